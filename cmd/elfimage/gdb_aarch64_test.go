//go:build linux && amd64

package main

import (
	"fmt"
	"os"
	"path/filepath"
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
// records), info args and info locals read the DWARF locations (frame
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
	r, err := s.Run()
	if err != nil {
		t.Fatalf("%v\n%s", err, r.Output)
	}
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
// called from main with their arguments and lines, frame variable shows
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
	r, err := qemutest.RunLLDBStops(t, s, 2)
	if err != nil {
		t.Fatalf("%v\n%s", err, r.Output)
	}
	t.Logf("lldb:\n%s", r.Output)
	var got []string
	for _, f := range lldbtest.Frames(r.Blocks[7]) {
		got = append(got, fmt.Sprintf("%s(%s):%d", f.Func, f.Args, f.Line))
	}
	checkTakFrames(t, got, r.Blocks[7])
	if v := lldbtest.Vars(r.Blocks[8]); v["x"].Value != "17" || v["y"].Value != "12" || v["z"].Value != "6" {
		t.Errorf("frame variable %v, want x = 17, y = 12, z = 6:\n%s", v, r.Blocks[8])
	}
	checkExit(t, r.Blocks[10])
	if out, err := os.ReadFile(progOut); err != nil || string(out) != gdbProgOutput {
		t.Errorf("program output %q (%v), want %q", out, err, gdbProgOutput)
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
