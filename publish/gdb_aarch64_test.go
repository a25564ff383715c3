//go:build linux && amd64

package publish_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/elfimage/elfimage/internal/gdbtest"
	"github.com/elfimage/elfimage/internal/lldbtest"
	"github.com/elfimage/elfimage/internal/qemutest"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// TestGDBMultiarchAArch64 cross-builds testdata/a64prog for linux/arm64,
// runs it under qemu-aarch64 -g with gdb-multiarch attached through qemu's
// gdb stub, and checks that gdb breaks at the AArch64 JIT procedure the
// program published with publish.GDB (a pending breakpoint resolved
// through the GDB JIT interface) and shows its line and arguments from the
// image's DWARF, that the CFI describes its frame record, and that the
// backtrace crosses the library's AArch64 entry frame into the Go code
// that called native.Call. qemu's stub
// listens on every interface, so both run in a new user and network
// namespace (unshare -rn) whose only interface is loopback: the port is
// private to the test.
func TestGDBMultiarchAArch64(t *testing.T) {
	gdb := tooltest.Require(t, "gdb-multiarch")
	prog, wrapper, progOut := qemuDebugger(t, gdb)
	s := &gdbtest.Session{GDB: wrapper, Program: prog, Dir: filepath.Dir(prog), NoScript: true, Cmds: []string{
		qemutest.GDBConnect,
		"break a64_twice",
		"continue",
		"info args",
		"info frame",
		"bt",
		// Deleted, the breakpoint needs no step over it (after one,
		// qemu's stub sometimes reports the same stop again).
		"delete",
		"continue",
	}}
	r := qemutest.MustRunGDBStops(t, s, 1)
	if want := "a64_twice (a=20, b=1) at /src/a64.scm:11"; !strings.Contains(r.Blocks[2], want) {
		t.Errorf("continue: no stop at %q:\n%s", want, r.Blocks[2])
	}
	if args := gdbtest.Vars(r.Blocks[3]); args["a"] != "20" || args["b"] != "1" {
		t.Errorf("info args %v, want a = 20, b = 1:\n%s", args, r.Blocks[3])
	}
	if !strings.Contains(r.Blocks[4], "x29 at ") || !strings.Contains(r.Blocks[4], "x30 at ") {
		t.Errorf("info frame: no saved x29, x30 (the CFI's frame record):\n%s", r.Blocks[4])
	}
	// The AArch64 entry image's CFI (a signal frame: gdb prints it as
	// "<signal handler called>") leads from the JIT code across the stack
	// switch into the trampoline and the Go code that called native.Call.
	names := gdbtest.Funcs(r.Blocks[5])
	want := []string{"a64_twice", "github.com/elfimage/elfimage/native.trampoline",
		"github.com/elfimage/elfimage/native.call", "github.com/elfimage/elfimage/native.CallErr",
		"github.com/elfimage/elfimage/native.Call", "main.run", "main.main"}
	if strings.Join(names, "\n") != strings.Join(want, "\n") || !strings.Contains(r.Blocks[5], "#1  <signal handler called>") {
		t.Errorf("bt frames %q, want %q:\n%s", names, want, r.Blocks[5])
	}
	if !strings.Contains(r.Blocks[7], "exited normally") {
		t.Errorf("last continue: the program did not exit normally:\n%s", r.Blocks[7])
	}
	if out, err := os.ReadFile(progOut); err != nil || !strings.Contains(string(out), "a64_twice(20, 1) = 42") {
		t.Errorf("program output %q (%v), want a64_twice(20, 1) = 42", out, err)
	}
}

// qemuDebugger cross-builds testdata/a64prog for linux/arm64 and writes a
// wrapper that stands for the debugger at path debugger, with the program
// under qemu-aarch64 -g in a loopback-only namespace (qemutest.Wrapper).
func qemuDebugger(t *testing.T, debugger string) (prog, wrapper, progOut string) {
	t.Helper()
	dir := t.TempDir()
	prog = qemutest.BuildArm64(t, dir, "./testdata/a64prog", "a64prog")
	wrapper, progOut = qemutest.Wrapper(t, dir, debugger, prog)
	return prog, wrapper, progOut
}

// TestLLDBAArch64 is TestGDBMultiarchAArch64 with lldb-19 (gdb-remote to
// qemu's stub, its GDB JIT loader enabled): it stops at the AArch64 JIT
// procedure with its line and arguments, and its backtrace crosses the
// entry frame (which lldb names elfimage.entry) into the Go code.
func TestLLDBAArch64(t *testing.T) {
	lldb := tooltest.Require(t, "lldb-19", "lldb")
	prog, wrapper, progOut := qemuDebugger(t, lldb)
	// The breakpoint is deleted before the last continue: it then needs
	// no step over it (after one, qemu's stub sometimes reports the same
	// stop again).
	s := &lldbtest.Session{LLDB: wrapper, Program: prog, Dir: filepath.Dir(prog), Timeout: 3 * time.Minute, Cmds: append(qemutest.LLDBConnect(),
		"breakpoint set -n a64_twice",
		"continue",
		"frame variable",
		"bt",
		"breakpoint delete -f",
		"continue",
	)}
	r := qemutest.MustRunLLDBStops(t, s, 1)
	if want := "a64_twice(a=20, b=1) at a64.scm:11"; !strings.Contains(r.Blocks[5], want) {
		out, _ := os.ReadFile(progOut)
		t.Fatalf("continue: no stop at %q:\n%s\nprogram output:\n%s", want, r.Blocks[5], out)
	}
	if v := lldbtest.Vars(r.Blocks[6]); v["a"].Value != "20" || v["b"].Value != "1" {
		t.Errorf("frame variable %v, want a = 20, b = 1:\n%s", v, r.Blocks[6])
	}
	names := lldbtest.Funcs(r.Blocks[7])
	want := []string{"a64_twice", "elfimage.entry", "github.com/elfimage/elfimage/native.trampoline.abi0",
		"github.com/elfimage/elfimage/native.call", "github.com/elfimage/elfimage/native.CallErr", "main.run", "main.main"}
	if len(names) < len(want) || strings.Join(names[:len(want)], "\n") != strings.Join(want, "\n") {
		t.Errorf("bt frames %q, want %q first:\n%s", names, want, r.Blocks[7])
	}
	if !strings.Contains(r.Blocks[9], "exited with status = 0") {
		t.Errorf("last continue: the program did not exit with 0:\n%s", r.Blocks[9])
	}
	if out, err := os.ReadFile(progOut); err != nil || !strings.Contains(string(out), "a64_twice(20, 1) = 42") {
		t.Errorf("program output %q (%v), want a64_twice(20, 1) = 42", out, err)
	}
}
