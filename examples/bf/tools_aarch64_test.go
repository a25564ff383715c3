//go:build linux && amd64

package main

// The AArch64 bf command under qemu-aarch64 -g, with gdb-multiarch and
// lldb attached through qemu's gdb stub.

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/internal/gdbtest"
	"github.com/elfimage/elfimage/internal/lldbtest"
	"github.com/elfimage/elfimage/internal/qemutest"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// TestGDBMultiarchAArch64 runs the AArch64 bf command on hello.b with -gdb
// under qemu-aarch64 -g and gdb-multiarch attached to qemu's stub: the
// pending breakpoint on hello.b:8 resolves through the GDB JIT interface
// and stops at the line's first command; vm, the cells and the locals hold
// what the program computed so far (the same as TestGDB on x86-64); bt
// goes from hello through the library's AArch64 entry frame ("<signal
// handler called>") into the Go code down to main.main; the program
// prints Hello, World! and exits normally.
func TestGDBMultiarchAArch64(t *testing.T) {
	t.Parallel()
	gdb := tooltest.Require(t, "gdb-multiarch")
	dir := t.TempDir()
	prog := qemutest.BuildArm64(t, dir, ".", "bf-arm64")
	wrapper, progOut := qemutest.Wrapper(t, dir, gdb, prog, "-gdb", "hello.b")
	cmds := []string{
		qemutest.GDBConnect,
		"break hello.b:8",
		"continue",
		"p *vm",
		"p/d vm->cells[0]@8",
		"info locals",
		"info frame",
		"bt",
		"info line *$pc",
		// Deleted, the breakpoint needs no step over it (qemu's stub
		// sometimes reports the same stop again after one).
		"delete",
		"continue",
	}
	s := &gdbtest.Session{GDB: wrapper, Program: prog, Dir: testdata(t), Cmds: cmds, NoScript: true, Timeout: 3 * time.Minute}
	r := qemutest.MustRunGDBStops(t, s, 1)
	defer func() {
		if t.Failed() {
			out, _ := os.ReadFile(progOut)
			t.Logf("gdb-multiarch session:\n%s\nprogram output:\n%s", r.Output, out)
		}
	}()
	for i, wants := range map[int][]string{
		2:  {"Breakpoint 1, hello (vm=0x", ") at hello.b:8\n8\t+++++++.."},
		3:  {"{data = 0x", `in = 0, out = 1, errno = 0, cells = "\000He\036\n", '\000' <repeats 2999`},
		4:  {"= {0, 72, 101, 30, 10, 0, 0, 0}"},
		5:  {"cell = 101 'e'", "index = 2"},
		6:  {"x29 at ", "x30 at ", "x19 at ", "x20 at "},
		8:  {`Line 8 of "hello.b" starts at address`},
		10: {"exited normally"},
	} {
		for _, w := range wants {
			if !strings.Contains(r.Blocks[i], w) {
				t.Errorf("%s: gdb-multiarch printed\n%s\nwithout %q", cmds[i], r.Blocks[i], w)
			}
		}
	}
	bt := r.Blocks[7]
	fs := gdbtest.Frames(bt)
	if len(fs) < 4 || fs[0].Func != "hello" || fs[0].File != "hello.b" || fs[0].Line != 8 {
		t.Errorf("bt does not start at hello at hello.b:8:\n%s", bt)
	}
	if !strings.Contains(bt, "#1  <signal handler called>\n") {
		t.Errorf("bt: frame 1 is not the entry frame (<signal handler called>, see elfimage.EntryImage):\n%s", bt)
	}
	if len(fs) == 0 || fs[len(fs)-1].Func != "main.main" || strings.Contains(bt, "??") || strings.Contains(bt, "Backtrace stopped") {
		t.Errorf("bt does not reach main.main with every frame named:\n%s", bt)
	}
	if out, err := os.ReadFile(progOut); err != nil || !strings.Contains(string(out), "Hello, World!\n") {
		t.Errorf("program output %q (%v), want Hello, World!", out, err)
	}
}

// TestLLDBAArch64 is TestGDBMultiarchAArch64 with lldb-19 (gdb-remote to
// qemu's stub, its GDB JIT loader enabled): it stops at hello.b:8 with vm,
// cell and index, and its backtrace crosses the entry frame into main.main.
func TestLLDBAArch64(t *testing.T) {
	t.Parallel()
	lldb := tooltest.Require(t, lldbtest.Names...)
	dir := t.TempDir()
	prog := qemutest.BuildArm64(t, dir, ".", "bf-arm64")
	wrapper, progOut := qemutest.Wrapper(t, dir, lldb, prog, "-gdb", "hello.b")
	s := &lldbtest.Session{LLDB: wrapper, Program: prog, Dir: testdata(t), Timeout: 3 * time.Minute, Cmds: append(qemutest.LLDBConnect(),
		"breakpoint set -f hello.b -l 8",
		"continue",
		"frame variable",
		"bt",
		// Disabled, the breakpoint needs no step over it (after one,
		// qemu's stub sometimes reports the same stop again).
		"breakpoint disable",
		"continue",
	)}
	r := qemutest.MustRunLLDBStops(t, s, 1)
	checkLLDBAArch64(t, r, progOut)
}

// checkLLDBAArch64 checks what TestLLDBAArch64's session printed.
func checkLLDBAArch64(t *testing.T, r *lldbtest.Result, progOut string) {
	defer func() {
		if t.Failed() {
			out, _ := os.ReadFile(progOut)
			t.Logf("lldb session:\n%s\nprogram output:\n%s", r.Output, out)
		}
	}()
	if !strings.Contains(r.Blocks[5], "stop reason = breakpoint 1.1") || !strings.Contains(r.Blocks[5], "hello.b:8") {
		t.Fatalf("lldb did not stop at hello.b:8:\n%s", r.Blocks[5])
	}
	checkLLDBVars(t, r.Blocks[6])
	fs := lldbtest.Frames(r.Blocks[7])
	if len(fs) < 3 || fs[0].Func != "hello" || fs[0].File != "hello.b" || fs[0].Line != 8 || fs[1].Func != elfimage.EntryName {
		t.Errorf("bt does not start with hello at hello.b:8 and %s:\n%s", elfimage.EntryName, r.Blocks[7])
	}
	reached := false
	for _, f := range fs {
		reached = reached || f.Func == "main.main"
	}
	if !reached {
		t.Errorf("bt does not reach main.main:\n%s", r.Blocks[7])
	}
	if !strings.Contains(r.Blocks[9], "exited with status = 0") {
		t.Errorf("second continue: the program did not exit with 0:\n%s", r.Blocks[9])
	}
}
