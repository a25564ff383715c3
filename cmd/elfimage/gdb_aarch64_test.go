//go:build linux && amd64

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/internal/gdbtest"
	"github.com/elfimage/elfimage/internal/lldbtest"
	"github.com/elfimage/elfimage/internal/qemutest"
	"github.com/elfimage/elfimage/internal/tooltest"
	"github.com/elfimage/elfimage/lang/scheme"
)

// TestGDBMultiarchSchemeAArch64 cross-compiles gdbProg for AArch64 on
// this host (scheme.CompileFor), cross-builds elfimage for linux/arm64,
// runs `elfimage run -gdb prog.elf` under qemu-aarch64 -g with
// gdb-multiarch attached to qemu's stub (internal/qemutest: loopback-only
// namespace), and checks what a user sees: the pending breakpoint at the
// Scheme procedure tak resolves through the GDB JIT interface, the
// second stop (the inner, non-tail call) shows tak called from tak called
// from main with their lines and arguments in bt (the CFI's frame
// records), bt going on through the library's entry frame into the Go
// callers of native.Call down to main.main (checkEntryFrames), info args and info locals read the DWARF locations (frame
// slots, x19 for a let binding), and the program runs to its normal end
// with the output it has on x86-64.
func TestGDBMultiarchSchemeAArch64(t *testing.T) {
	gdb := tooltest.Require(t, "gdb-multiarch")
	dir, bin, src, wrapper, progOut := schemeAArch64Debugger(t, gdb)
	letLine := gdbLine(t, "scopes: nested lets")
	s := &gdbtest.Session{GDB: wrapper, Program: bin, Dir: dir, NoScript: true, Timeout: 5 * time.Minute, Cmds: []string{
		qemutest.GDBConnect,
		"break tak",
		"continue",
		"continue",
		"bt",
		"info args",
		"delete",
		fmt.Sprintf("break prog.scm:%d", letLine),
		"continue",
		"info locals",
		"delete",
		"continue",
	}}
	r := qemutest.MustRunGDBStops(t, s, 3)
	t.Logf("gdb-multiarch:\n%s", r.Output)
	ifLine := gdbLine(t, "(if (not (< y x))")
	if want := fmt.Sprintf("tak (x=17, y=12, z=6) at %s:%d", src, ifLine); !strings.Contains(r.Blocks[3], want) {
		t.Errorf("second continue: no stop at %q:\n%s", want, r.Blocks[3])
	}
	var got []string
	for _, f := range gdbtest.Frames(r.Blocks[4]) {
		got = append(got, fmt.Sprintf("%s(%s):%d", f.Func, f.Args, f.Line))
	}
	checkTakFrames(t, got, r.Blocks[4])
	// Past main and the image's %start, gdb crosses the library's entry
	// frame (a signal frame to gdb: "<signal handler called>", see
	// elfimage.EntryImage) into the Go code that called native.Call.
	checkEntryFrames(t, gdbtest.Funcs(r.Blocks[4]), r.Blocks[4], false, "main.main")
	if !regexp.MustCompile(`(?m)^#\d+ +0x[0-9a-f]+ in %start \(\)\n#\d+ +<signal handler called>\n#\d+ +github\.com/elfimage/elfimage/native\.trampoline \(\) at \S+/native/call_arm64\.s:\d+\n`).MatchString(r.Blocks[4]) {
		t.Errorf("bt: no %%start, <signal handler called>, native.trampoline at call_arm64.s in a row:\n%s", r.Blocks[4])
	}
	if strings.Contains(r.Blocks[4], "??") || strings.Contains(r.Blocks[4], "Backtrace stopped") {
		t.Errorf("bt has an unnamed frame or stopped:\n%s", r.Blocks[4])
	}
	if args := gdbtest.Vars(r.Blocks[5]); args["x"] != "17" || args["y"] != "12" || args["z"] != "6" {
		t.Errorf("info args %v, want x = 17, y = 12, z = 6:\n%s", args, r.Blocks[5])
	}
	// (scopes 5): b = 10 (in x19), c = 11, d = 33.
	if locals := gdbtest.Vars(r.Blocks[9]); locals["b"] != "10" || locals["c"] != "11" || locals["d"] != "33" {
		t.Errorf("info locals %v, want b = 10, c = 11, d = 33:\n%s", locals, r.Blocks[9])
	}
	if !strings.Contains(r.Blocks[11], "exited normally") {
		t.Errorf("last continue: the program did not exit normally:\n%s", r.Blocks[11])
	}
	if out, err := os.ReadFile(progOut); err != nil || string(out) != gdbProgOutput {
		t.Errorf("program output %q (%v), want %q", out, err, gdbProgOutput)
	}
}

// schemeAArch64Debugger writes gdbProg into a temporary directory,
// cross-compiles and links it for AArch64 there (prog.elf), cross-builds
// elfimage for linux/arm64, and returns the wrapper that stands for
// debugger with `elfimage run -gdb prog.elf` under qemu-aarch64 -g
// (qemutest.Wrapper) and the file that receives the program's output.
func schemeAArch64Debugger(t *testing.T, debugger string) (dir, bin, src, wrapper, progOut string) {
	t.Helper()
	dir = t.TempDir()
	bin = qemutest.BuildArm64(t, dir, ".", "elfimage")
	src = filepath.Join(dir, "prog.scm")
	if err := os.WriteFile(src, []byte(gdbProg), 0o644); err != nil {
		t.Fatal(err)
	}
	mod, err := scheme.CompileFor(arch.AArch64, src, []byte(gdbProg))
	if err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "prog.elf")
	if err := elfimage.WriteFile(img, mod, elfimage.LinkOptions{}); err != nil {
		t.Fatal(err)
	}
	wrapper, progOut = qemutest.Wrapper(t, dir, debugger, bin, "run", "-gdb", img)
	return dir, bin, src, wrapper, progOut
}

// TestLLDBSchemeAArch64 is TestGDBMultiarchSchemeAArch64 with lldb-19
// (gdb-remote to qemu's stub, its GDB JIT loader enabled): it stops at
// the second call of tak, whose backtrace shows tak called from tak
// called from main with their arguments and lines, then elfimage.entry
// and the Go callers of native.Call down to runtime.goexit
// (checkEntryFrames), frame variable shows
// the arguments, and the program ends normally with its x86-64 output
// (LLDB may lose the connection as it exits: checkExit).
func TestLLDBSchemeAArch64(t *testing.T) {
	lldb := tooltest.Require(t, "lldb-19", "lldb")
	dir, bin, _, wrapper, progOut := schemeAArch64Debugger(t, lldb)
	s := &lldbtest.Session{LLDB: wrapper, Program: bin, Dir: dir, Timeout: 5 * time.Minute, Cmds: append(qemutest.LLDBConnect(),
		"breakpoint set -n tak",
		"continue",
		"continue",
		"bt",
		"frame variable",
		"breakpoint delete -f",
		"continue",
	)}
	r := qemutest.MustRunLLDBStops(t, s, 2)
	t.Logf("lldb:\n%s", r.Output)
	var got []string
	for _, f := range lldbtest.Frames(r.Blocks[7]) {
		got = append(got, fmt.Sprintf("%s(%s):%d", f.Func, f.Args, f.Line))
	}
	checkTakFrames(t, got, r.Blocks[7])
	// lldb names the entry frame (it needs no signal frame) and goes on
	// through the Go callers of native.Call to runtime.goexit.
	checkEntryFrames(t, lldbtest.Funcs(r.Blocks[7]), r.Blocks[7], true, "runtime.goexit")
	if v := lldbtest.Vars(r.Blocks[8]); v["x"].Value != "17" || v["y"].Value != "12" || v["z"].Value != "6" {
		t.Errorf("frame variable %v, want x = 17, y = 12, z = 6:\n%s", v, r.Blocks[8])
	}
	checkExit(t, r.Blocks[10])
	if out, err := os.ReadFile(progOut); err != nil || string(out) != gdbProgOutput {
		t.Errorf("program output %q (%v), want %q", out, err, gdbProgOutput)
	}
}

// checkEntryFrames checks the frames of the backtrace at gdbProg's second
// stop in tak below main (names, parsed from block): the image's %start,
// then the library's entry frame (named elfimage.EntryName when named is
// set, as lldb shows it, whose ".abi0" suffixes of assembly functions are
// then removed; gdb shows it as "<signal handler called>", which
// gdbtest.Frames skips), then the Go callers of native.Call,
// native.trampoline, native.call and native.CallErr, and on down to
// main.main, with last the outermost frame and no frame without a name:
// the AArch64 counterpart of TestEntryGDB and TestEntryLLDB of package
// elfimage, through the runtime of `elfimage run`.
func checkEntryFrames(t *testing.T, names []string, block string, named bool, last string) {
	t.Helper()
	want := []string{"%start", "github.com/elfimage/elfimage/native.trampoline",
		"github.com/elfimage/elfimage/native.call", "github.com/elfimage/elfimage/native.CallErr"}
	if named {
		want = slices.Insert(want, 1, elfimage.EntryName)
		names = slices.Clone(names)
		for i, n := range names {
			names[i] = strings.TrimSuffix(n, ".abi0")
		}
	}
	if len(names) < 3+len(want) || strings.Join(names[3:3+len(want)], " ") != strings.Join(want, " ") {
		t.Errorf("bt frames %q: want %q after tak, tak, main:\n%s", names, want, block)
	}
	if len(names) == 0 || names[len(names)-1] != last || !slices.Contains(names, "main.main") {
		t.Errorf("bt frames %q do not reach main.main and end at %s:\n%s", names, last, block)
	}
	for i, n := range names {
		if n == "" || n == "??" {
			t.Errorf("bt frame %d has no name:\n%s", i, block)
		}
	}
}

// checkTakFrames checks the first frames of the backtrace at gdbProg's
// second stop in tak, each as FUNC(ARGS):LINE (got, parsed from block):
// tak called from tak (the inner, non-tail call) called from main, with
// their arguments and lines.
func checkTakFrames(t *testing.T, got []string, block string) {
	t.Helper()
	want := []string{
		fmt.Sprintf("tak(x=17, y=12, z=6):%d", gdbLine(t, "(if (not (< y x))")),
		fmt.Sprintf("tak(x=18, y=12, z=6):%d", gdbLine(t, "(tak (tak (- x 1) y z)")),
		fmt.Sprintf("main():%d", gdbLine(t, "(display (tak 18 12 6))")),
	}
	if len(got) < len(want) || strings.Join(got[:len(want)], " ") != strings.Join(want, " ") {
		t.Errorf("bt frames %q, want %q first:\n%s", got, want, block)
	}
}
