package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/internal/lldbtest"
	"github.com/elfimage/elfimage/internal/qemutest"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// lldbSession runs lldb-19 in batch mode on `elfimage run -gdb prog.elf`
// (modeJITFile) or `elfimage run -jit -gdb prog.scm` (modeJITMem): LLDB
// learns of the image only through the GDB JIT interface. In cmds, "RUN"
// stands for the launch command, which sends the program's standard
// output to a file of its own; its contents are returned.
func lldbSession(t *testing.T, f *gdbFixture, lldb string, mode gdbMode, cmds []string) (*lldbtest.Result, string) {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "prog.out")
	if mode == modeJITMem {
		// LLDB shows source names as the line table holds them: compile
		// prog.scm by that name, as `elfimage build` did.
		if err := os.WriteFile(filepath.Join(dir, "prog.scm"), []byte(gdbProg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmds = append([]string{}, cmds...)
	for i, c := range cmds {
		if c == "RUN" {
			cmds[i] = "process launch -o " + out
		}
	}
	s := &lldbtest.Session{LLDB: lldb, Program: f.cli, Args: strings.Fields(f.runArgs(mode)), Dir: dir, Cmds: cmds}
	r, err := s.Run()
	t.Cleanup(func() {
		if t.Failed() && r != nil {
			t.Logf("lldb session (%q):\n%s", cmds, r.Output)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	prog, _ := os.ReadFile(out)
	return r, string(prog)
}

// TestLLDB debugs gdbProg with lldb-19, the image published through the
// GDB JIT interface from its file (run -gdb prog.elf) and linked in
// memory (run -jit -gdb prog.scm): breakpoints by name set before the
// image exists resolve when it is published and stop; bt names each
// procedure with its arguments and file:line, recursion included, and
// continues through the runtime's entry code and the library's entry
// frame into the Go frames up to main.main; frame variable shows the
// arguments of the selected frame; the program then runs to its end with
// its normal output.
//
// What LLDB shows between the Scheme procedures and the Go frames (today,
// lldb-19):
//
//	frame #4: 0x00007ffff7e21456 JIT(0x7ffff7e1b040)`main at prog.scm:35:12
//	frame #5: 0x00007ffff7e21026 JIT(0x7ffff7e1b040)`%start + 22
//	frame #6: 0x00007ffff7e25007 JIT(0x7ffff7e1e040)`elfimage.entry + 7
//	frame #7: 0x0000000000578eeb elfimage`github.com/elfimage/elfimage/native.trampoline.abi0 at call_amd64.s:46
//
// the runtime's entry stub, named from the image's .symtab, with an
// offset instead of a line (it has no line rows), the library's entry
// frame in the entry image's own symbol file (elfimage.EntryName), then
// the Go frames that called into the image. The test asserts the shape of
// the runtime's frames (named frames of the image without file:line), not
// their names, which belong to the Scheme runtime.
func TestLLDB(t *testing.T) {
	if why := qemutest.Emulated(); why != "" {
		t.Skipf("%s: lldb runs the CLI natively (ptrace), which qemu-user does not emulate; the AArch64 session is TestLLDBSchemeAArch64, lldb against qemu-aarch64 -g", why)
	}
	lldb := tooltest.Require(t, lldbtest.Names...)
	f := setupCLI(t)
	fibLine, callLine, recLine := gdbLine(t, "(if (< n 2)"), gdbLine(t, "(display (fib 10))"), gdbLine(t, "(+ (fib (- n 1))")
	takLine := gdbLine(t, "(if (not (< y x))")
	for _, mode := range []gdbMode{modeJITFile, modeJITMem} {
		t.Run(string(mode), func(t *testing.T) {
			cmds := []string{
				0:  "breakpoint set -n fib",
				1:  "breakpoint set -n tak",
				2:  "RUN",
				3:  "bt",
				4:  "frame variable",
				5:  "breakpoint modify -i 2 1", // skip fib 9 and fib 8
				6:  "continue",
				7:  "bt 5",
				8:  "frame select 3",
				9:  "frame variable",
				10: "breakpoint delete 1",
				11: "continue",
				12: "frame variable",
				13: "breakpoint delete", // auto-confirm answers its question
				14: "continue",
			}
			r, out := lldbSession(t, f, lldb, mode, cmds)
			b := r.Blocks
			mustHave := func(i int, want string) {
				t.Helper()
				if !strings.Contains(b[i], want) {
					t.Errorf("%s: output lacks %q:\n%s", cmds[i], want, b[i])
				}
			}
			mustHave(0, "Breakpoint 1: no locations (pending).")
			mustHave(2, "1 location added to breakpoint 1")
			mustHave(2, "stop reason = breakpoint 1.1")

			// bt from the first fib: the procedures, the entry code, the
			// Go frames.
			fs := lldbtest.Frames(b[3])
			if len(fs) < 4 {
				t.Fatalf("bt: %d frames:\n%s", len(fs), b[3])
			}
			img := fs[0].Module
			if !strings.HasPrefix(img, "JIT(") {
				t.Errorf("frame 0 in module %q, want the JIT symbol file, JIT(ADDRESS)", img)
			}
			wantFrame(t, fs[0], lldbtest.Frame{Module: img, Func: "fib", Args: "n=10", File: "prog.scm", Line: fibLine})
			wantFrame(t, fs[1], lldbtest.Frame{Module: img, Func: "main", File: "prog.scm", Line: callLine})
			k := 2
			for k < len(fs) && fs[k].Module == img {
				if fs[k].File != "" || fs[k].Func == "" || strings.HasPrefix(fs[k].Func, "___lldb_unnamed_symbol") {
					t.Errorf("frame %d: %+v, want a named entry stub of the image without a line", k, fs[k])
				}
				k++
			}
			if k == 2 || k == len(fs) {
				t.Errorf("bt: %d frames of the image after main and %d after them, want both > 0", k-2, len(fs)-k)
			}
			if k < len(fs) && (fs[k].Func != elfimage.EntryName || !strings.HasPrefix(fs[k].Module, "JIT(") || fs[k].Module == img) {
				t.Errorf("frame %d after the image's frames: %+v, want %s in the entry image's JIT module", k, fs[k], elfimage.EntryName)
			}
			k++
			reached := false
			for _, fr := range fs[min(k, len(fs)):] {
				if fr.Module != "elfimage" {
					t.Errorf("frame %d after the image's frames is in module %q, want elfimage", fr.Num, fr.Module)
				}
				reached = reached || (fr.Func == "main.main" && fr.File == "main.go")
			}
			if !reached {
				t.Errorf("bt does not reach main.main at main.go:\n%s", b[3])
			}
			wantVars(t, cmds[4], b[4], map[string]string{"n": "10"})

			// Recursion: the fourth call of fib, fib 7, with its callers'
			// arguments.
			mustHave(6, "stop reason = breakpoint 1.1")
			fs = lldbtest.Frames(b[7])
			if len(fs) != 5 {
				t.Fatalf("bt 5: %d frames:\n%s", len(fs), b[7])
			}
			wantFrame(t, fs[0], lldbtest.Frame{Module: img, Func: "fib", Args: "n=7", File: "prog.scm", Line: fibLine})
			for i, n := range []string{"n=8", "n=9", "n=10"} {
				wantFrame(t, fs[1+i], lldbtest.Frame{Module: img, Func: "fib", Args: n, File: "prog.scm", Line: recLine})
			}
			wantFrame(t, fs[4], lldbtest.Frame{Module: img, Func: "main", File: "prog.scm", Line: callLine})
			mustHave(8, "frame #3:")
			wantVars(t, "frame variable in frame 3", b[9], map[string]string{"n": "10"})

			mustHave(11, "stop reason = breakpoint 2.1")
			mustHave(11, fmt.Sprintf("tak(x=18, y=12, z=6) at prog.scm:%d", takLine))
			wantVars(t, cmds[12], b[12], map[string]string{"x": "18", "y": "12", "z": "6"})
			checkExit(t, b[14])
			if out != gdbProgOutput {
				t.Errorf("program output %q, want %q", out, gdbProgOutput)
			}
		})
	}
}

// wantFrame compares the parts of an LLDB frame that want sets (Args
// always: "" means LLDB shows no parentheses).
func wantFrame(t *testing.T, got, want lldbtest.Frame) {
	t.Helper()
	if got.Module != want.Module || got.Func != want.Func || got.Args != want.Args || got.File != want.File || got.Line != want.Line {
		t.Errorf("frame #%d = %s`%s(%s) at %s:%d, want %s`%s(%s) at %s:%d", got.Num,
			got.Module, got.Func, got.Args, got.File, got.Line, want.Module, want.Func, want.Args, want.File, want.Line)
	}
}

// wantVars checks that a frame variable output lists exactly want (names
// and values), each of type long (the Scheme fixnums' DWARF base type).
func wantVars(t *testing.T, what, block string, want map[string]string) {
	t.Helper()
	got := lldbtest.Vars(block)
	if len(got) != len(want) {
		t.Errorf("%s: %d variables, want %v:\n%s", what, len(got), want, block)
	}
	for name, v := range want {
		if g, ok := got[name]; !ok || g.Value != v || g.Type != "long" {
			t.Errorf("%s: %s = %+v, want (long) %s:\n%s", what, name, g, v, block)
		}
	}
}

// checkExit checks that LLDB saw the program exit with status 0, or lost
// the connection as it exited (lldbtest.Exit: a race in lldb-19's
// lldb-server, which the program's complete output then shows to be
// harmless; logged).
func checkExit(t *testing.T, block string) {
	t.Helper()
	st, lost, ok := lldbtest.Exit(block)
	switch {
	case !ok:
		t.Errorf("LLDB did not report the program's exit:\n%s", block)
	case lost:
		t.Logf("lldb-server lost the process as it exited (lldb-19 race, see lldbtest.Exit): %s", strings.TrimSpace(block))
	case st != 0:
		t.Errorf("program exited with status %d:\n%s", st, block)
	}
}
