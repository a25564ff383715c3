package main

import (
	"context"
	"debug/dwarf"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/arch/x86/x86asm"

	"github.com/elfimage/elfimage/internal/gdbtest"
	"github.com/elfimage/elfimage/internal/qemutest"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// gdbProg is the program the gdb tests debug. Tests find lines by their
// text (gdbLine), so lines may be added; the values asserted follow from
// the arguments main passes.
const gdbProg = `;;; prog.scm: debugged by gdb_test.go.
(define (fib n)
  (if (< n 2)
      n
      (+ (fib (- n 1)) (fib (- n 2)))))

(define (tak x y z)
  (if (not (< y x))
      z
      (tak (tak (- x 1) y z)
           (tak (- y 1) z x)
           (tak (- z 1) x y))))

(define (scopes a)
  (let ((b (* a 2)))
    (let* ((c (+ b 1))
           (d (* c 3)))
      (display (+ a b c d)) ; scopes: nested lets
      (newline)
      (let loop ((i 0) (acc d))
        (if (< i 3) ; scopes: named let
            (loop (+ i 1) (+ acc i))
            acc)))))

(define (dead a)
  (let ((t (* a 7)))
    (display t)
    (newline) ; dead: t live
    (+ a 1)))

(define* (opt a #:optional (b 10) (c (* a 2)))
  (+ a b c))

(define (main)
  (display (fib 10)) (newline)
  (display (tak 18 12 6)) (newline)
  (display (scopes 5)) (newline)
  (display (dead 6)) (newline)
  (display (opt 1)) (newline)
  (display (opt 1 5)) (newline)
  0)
`

// gdbProgOutput is what gdbProg prints.
const gdbProgOutput = "55\n7\n59\n36\n42\n7\n13\n8\n"

// gdbLine returns the 1-based line of gdbProg holding text.
func gdbLine(t *testing.T, text string) int {
	t.Helper()
	for i, l := range strings.Split(gdbProg, "\n") {
		if strings.Contains(l, text) {
			return i + 1
		}
	}
	t.Fatalf("gdbProg has no line with %q", text)
	return 0
}

// gdbFixture is the CLI built with `go build` (a normally built binary:
// the hook must survive the linker and be found by name) and gdbProg
// built into an image, in one directory shared by the subtests.
type gdbFixture struct {
	gdb, dir, cli, img string
}

var (
	gdbOnce sync.Once
	gdbFix  *gdbFixture
	gdbErr  error
)

func setupGDB(t *testing.T) *gdbFixture {
	t.Helper()
	if why := qemutest.Emulated(); why != "" {
		t.Skipf("%s: gdb runs the CLI natively (ptrace), which qemu-user does not emulate; the AArch64 session is TestGDBMultiarchSchemeAArch64, gdb-multiarch against qemu-aarch64 -g", why)
	}
	gdb := tooltest.Require(t, "gdb")
	f := *setupCLI(t)
	f.gdb = gdb
	return &f
}

// setupCLI builds the fixture but for gdb (empty), once per test run: the
// lldb tests share it.
func setupCLI(t *testing.T) *gdbFixture {
	t.Helper()
	goTool := tooltest.Require(t, "go")
	gdbOnce.Do(func() {
		dir, err := os.MkdirTemp("", "elfimage-gdbtest-")
		if err != nil {
			gdbErr = err
			return
		}
		f := &gdbFixture{dir: dir, cli: filepath.Join(dir, "elfimage"), img: filepath.Join(dir, "prog.elf")}
		out, err := tooltest.RunGroup(exec.Command(goTool, "build", "-o", f.cli, "github.com/elfimage/elfimage/cmd/elfimage"), 5*time.Minute)
		if err != nil {
			gdbErr = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		if err := os.WriteFile(filepath.Join(dir, "prog.scm"), []byte(gdbProg), 0o644); err != nil {
			gdbErr = err
			return
		}
		build := qemutest.Command(context.Background(), t, f.cli, "build", "-o", "prog.elf", "prog.scm")
		build.Dir = dir
		if out, err := tooltest.RunGroup(build, 5*time.Minute); err != nil {
			gdbErr = fmt.Errorf("elfimage build: %v\n%s", err, out)
			return
		}
		gdbFix = f
	})
	if gdbErr != nil {
		t.Fatal(gdbErr)
	}
	return gdbFix
}

// TestMain removes the shared gdb fixture after the tests, and keeps the
// compile cache in a directory of its own (see isolateCache).
func TestMain(m *testing.M) {
	removeCache := isolateCache()
	code := m.Run()
	removeCache()
	if gdbFix != nil {
		os.RemoveAll(gdbFix.dir)
	}
	os.Exit(code)
}

// gdbMode is how gdb learns of the image: the hook script adding the image
// file, or the GDB JIT interface with an image loaded from the file or
// linked in memory.
type gdbMode string

const (
	modeHook    gdbMode = "hook"     // elfimage run prog.elf, with elfimage_gdb.py
	modeJITFile gdbMode = "jit-file" // elfimage run -gdb prog.elf, no script
	modeJITMem  gdbMode = "jit-mem"  // elfimage run -jit -gdb prog.scm, no script
)

var gdbModes = []gdbMode{modeHook, modeJITFile, modeJITMem}

// runArgs returns the arguments of `elfimage` for mode.
func (f *gdbFixture) runArgs(mode gdbMode) string {
	switch mode {
	case modeJITFile:
		return "run -gdb " + f.img
	case modeJITMem:
		return "run -jit -gdb prog.scm" // copied into the session's directory
	}
	return "run " + f.img
}

// gdbSession runs gdb on `elfimage run` of prog.elf (mode says how), cmds
// after "run" (the program's standard output goes to a file of its own:
// name), and returns the result and the program's output. before are the
// commands given before the program starts.
func gdbSession(t *testing.T, f *gdbFixture, mode gdbMode, name string, before, after []string) (*gdbtest.Result, int, string) {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, name+".out")
	if mode == modeJITMem {
		// gdb shows source names as the line table holds them: compile
		// prog.scm by that name, as `elfimage build` did.
		if err := os.WriteFile(filepath.Join(dir, "prog.scm"), []byte(gdbProg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmds := append(append(append([]string{}, before...), "run "+f.runArgs(mode)+" > "+out), after...)
	s := &gdbtest.Session{GDB: f.gdb, Program: f.cli, Dir: dir, Cmds: cmds, NoScript: mode != modeHook}
	r, err := s.Run()
	if err != nil {
		if r != nil {
			t.Fatalf("%v\n%s", err, r.Output)
		}
		t.Fatal(err)
	}
	prog, _ := os.ReadFile(out)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gdb session (%q):\n%s", cmds, r.Output)
		}
	})
	return r, len(before), string(prog)
}

// checkVars asserts that block (info args / info locals output) lists
// exactly want.
func checkVars(t *testing.T, what, block string, want map[string]string) {
	t.Helper()
	got := gdbtest.Vars(block)
	if len(got) != len(want) {
		t.Errorf("%s: got %v, want %v\n%s", what, got, want, block)
		return
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s = %q, want %q\n%s", what, k, got[k], v, block)
		}
	}
}

// checkFrames asserts the function names and argument texts of the first
// frames of a bt or bt full block, and that every named frame has
// prog.scm:LINE.
func checkFrames(t *testing.T, what, block string, want ...string) []gdbtest.Frame {
	t.Helper()
	fs := gdbtest.Frames(block)
	if len(fs) < len(want) {
		t.Fatalf("%s: %d frames, want at least %d:\n%s", what, len(fs), len(want), block)
	}
	for i, w := range want {
		got := fs[i].Func + " (" + fs[i].Args + ")"
		if got != w || fs[i].Num != i {
			t.Errorf("%s: frame #%d is %q, want #%d %q\n%s", what, fs[i].Num, got, i, w, block)
		}
		if fs[i].File != "prog.scm" || fs[i].Line == 0 {
			t.Errorf("%s: frame #%d at %q:%d, want prog.scm:LINE\n%s", what, i, fs[i].File, fs[i].Line, block)
		}
	}
	return fs
}

func mustContain(t *testing.T, what, block string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(block, w) {
			t.Errorf("%s: output lacks %q:\n%s", what, w, block)
		}
	}
}

// TestGDB drives gdb in batch mode on `elfimage run prog.elf` (a binary
// built with go build) with internal/gdbtest's script, which registers
// each image when the loader's hook (gdbhook.go) fires: breakpoints by
// name and by file:line set before the image exists, info args, info
// locals in nested scopes and after a binding is dead, bt, bt full,
// finish and list, and removal of the symbols when the image is closed.
func TestGDB(t *testing.T) {
	f := setupGDB(t)
	for _, mode := range gdbModes {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			testGDB(t, f, mode)
		})
	}
}

// checkHostFrames checks that a bt continues from the image's frames (the
// first n) through %start and the library's entry frame (elfimage.entry,
// which gdb shows as a signal frame), into the Go frames of the host, from
// native.trampoline down to main.main, with no frame gdb could not name.
func checkHostFrames(t *testing.T, what, block string) {
	t.Helper()
	var frameLines []string
	for _, l := range strings.Split(block, "\n") {
		if strings.HasPrefix(l, "#") {
			frameLines = append(frameLines, l)
		}
	}
	if !regexp.MustCompile(`(?m)^#\d+\s+(0x[0-9a-f]+ in )?%start \(\)\n#\d+\s+<signal handler called>\n#\d+\s+0x[0-9a-f]+ in github\.com/elfimage/elfimage/native\.trampoline \(\) at \S+/native/call_amd64\.s:\d+\n#\d+\s+0x[0-9a-f]+ in github\.com/elfimage/elfimage/native\.call \(`).MatchString(strings.Join(frameLines, "\n")) {
		t.Errorf("%s: want %%start, <signal handler called> (elfimage.entry), native.trampoline, then native.call:\n%s", what, block)
	}
	fs := gdbtest.Frames(block)
	if len(fs) == 0 || fs[len(fs)-1].Func != "main.main" {
		t.Errorf("%s: the last frame is not main.main:\n%s", what, block)
	}
	for _, fr := range fs {
		if fr.Func == "??" || strings.Contains(block, "Backtrace stopped") {
			t.Errorf("%s: unnamed frame or a stopped backtrace:\n%s", what, block)
			break
		}
	}
}

func testGDB(t *testing.T, f *gdbFixture, mode gdbMode) {

	// A pending breakpoint on a procedure name fires at each recursion
	// depth; bt shows the recursion; finish returns fib(8) = 21; the
	// image is mapped where the hook said; the program still runs right
	// under gdb; after Close the symbols are gone.
	t.Run("pending-name-recursion", func(t *testing.T) {
		t.Parallel()
		r, n, prog := gdbSession(t, f, mode, "fib",
			[]string{"break fib", "info breakpoints"},
			[]string{"info proc mappings", "info args", "continue", "info args", "continue", "bt",
				"delete", "finish", "continue", "info line fib"})
		b := r.Blocks
		mustContain(t, "break fib", b[0], `Function "fib" not defined.`, "Breakpoint 1 (fib) pending.")
		if !regexp.MustCompile(`(?m)^1\s+breakpoint\s+keep\s+y\s+<PENDING>\s+fib$`).MatchString(b[1]) {
			t.Errorf("info breakpoints does not show a pending fib:\n%s", b[1])
		}
		if mode == modeHook {
			m := regexp.MustCompile(`elfimage: added symbol file (\S+) at (0x[0-9a-f]+)`).FindStringSubmatch(b[n])
			if m == nil || m[1] != f.img {
				t.Fatalf("run: the hook script did not add %s:\n%s", f.img, b[n])
			}
			base := m[2]
			// The loader maps the file at the base the hook reported.
			if !regexp.MustCompile(`(?m)^\s*` + base + `\s+0x[0-9a-f]+\s+0x[0-9a-f]+\s+0x0\s+.*\s` + regexp.QuoteMeta(f.img) + `$`).MatchString(b[n+1]) {
				t.Errorf("info proc mappings has no mapping of %s at %s:\n%s", f.img, base, b[n+1])
			}
		}
		mustContain(t, "run", b[n], "hit Breakpoint 1, fib (n=10) at prog.scm:"+fmt.Sprint(gdbLine(t, "(if (< n 2)")))
		checkVars(t, "info args at the first stop", b[n+2], map[string]string{"n": "10"})
		mustContain(t, "continue", b[n+3], "hit Breakpoint 1, fib (n=9)")
		checkVars(t, "info args at the second stop", b[n+4], map[string]string{"n": "9"})
		mustContain(t, "continue", b[n+5], "hit Breakpoint 1, fib (n=8)")
		fs := checkFrames(t, "bt", b[n+6], "fib (n=8)", "fib (n=9)", "fib (n=10)", "main ()")
		checkHostFrames(t, "bt", b[n+6])
		recurse := gdbLine(t, "(+ (fib (- n 1))")
		for i := 1; i < 3; i++ {
			if fs[i].Line != recurse || fs[i].PC == 0 {
				t.Errorf("bt: caller frame #%d at line %d pc %#x, want line %d with a pc", i, fs[i].Line, fs[i].PC, recurse)
			}
		}
		mustContain(t, "finish", b[n+8], "in fib (n=9) at prog.scm:", "Value returned is $1 = 21")
		if mode == modeHook {
			mustContain(t, "continue to the end", b[n+9], "elfimage: removed symbol file "+f.img)
		}
		mustContain(t, "continue to the end", b[n+9], "exited normally")
		mustContain(t, "info line fib after Close", b[n+10], `Function "fib" not defined.`)
		if prog != gdbProgOutput {
			t.Errorf("program output under gdb %q, want %q", prog, gdbProgOutput)
		}
	})

	// tak's three parameters at three depths, and bt full.
	t.Run("tak-args-bt-full", func(t *testing.T) {
		t.Parallel()
		r, n, _ := gdbSession(t, f, mode, "tak", []string{"break tak"},
			[]string{"info args", "continue", "info args", "continue", "info args", "bt full", "kill"})
		b := r.Blocks
		checkVars(t, "tak depth 0", b[n+1], map[string]string{"x": "18", "y": "12", "z": "6"})
		checkVars(t, "tak depth 1", b[n+3], map[string]string{"x": "17", "y": "12", "z": "6"})
		checkVars(t, "tak depth 2", b[n+5], map[string]string{"x": "16", "y": "12", "z": "6"})
		checkFrames(t, "bt full", b[n+6], "tak (x=16, y=12, z=6)", "tak (x=17, y=12, z=6)", "tak (x=18, y=12, z=6)", "main ()")
		checkHostFrames(t, "bt full", b[n+6])
		for i, locals := range gdbtest.FullLocals(b[n+6])[:4] {
			if len(locals) != 0 {
				t.Errorf("bt full: frame #%d has locals %v, want none", i, locals)
			}
		}
		if strings.Count(b[n+6], "No locals.") < 4 {
			t.Errorf("bt full: want \"No locals.\" under each frame:\n%s", b[n+6])
		}
	})

	// file:line breakpoints set before load; list; info locals inside
	// nested let and let*, and in a named let at each iteration; bt full
	// lists the locals of the innermost scopes.
	t.Run("file-line-scopes-list", func(t *testing.T) {
		t.Parallel()
		nested := gdbLine(t, "scopes: nested lets")
		loop := gdbLine(t, "scopes: named let")
		r, n, _ := gdbSession(t, f, mode, "scopes",
			[]string{fmt.Sprintf("break prog.scm:%d", nested), fmt.Sprintf("break prog.scm:%d", loop)},
			[]string{"info args", "info locals", "list", "list fib",
				"continue", "info locals", "continue", "info locals", "continue", "info locals", "bt full", "kill"})
		b := r.Blocks
		mustContain(t, "break file:line", b[0], fmt.Sprintf("Breakpoint 1 (prog.scm:%d) pending.", nested))
		mustContain(t, "run", b[n], fmt.Sprintf("hit Breakpoint 1, scopes (a=5) at prog.scm:%d", nested))
		checkVars(t, "info args in scopes", b[n+1], map[string]string{"a": "5"})
		checkVars(t, "info locals in let*", b[n+2], map[string]string{"b": "10", "c": "11", "d": "33"})
		// gdb lists innermost scopes first: d and c (let*) before b (let).
		if i, j := strings.Index(b[n+2], "d = "), strings.Index(b[n+2], "b = "); i < 0 || j < i {
			t.Errorf("info locals: want the let* bindings before the let's:\n%s", b[n+2])
		}
		mustContain(t, "list", b[n+3], fmt.Sprintf("%d\t      (display (+ a b c d)) ; scopes: nested lets", nested),
			fmt.Sprintf("%d\t(define (scopes a)", gdbLine(t, "(define (scopes a)")))
		mustContain(t, "list fib", b[n+4], fmt.Sprintf("%d\t(define (fib n)", gdbLine(t, "(define (fib n)")))
		for k, want := range []map[string]string{
			{"i": "0", "acc": "33", "b": "10", "c": "11", "d": "33"},
			{"i": "1", "acc": "33", "b": "10", "c": "11", "d": "33"},
			{"i": "2", "acc": "34", "b": "10", "c": "11", "d": "33"},
		} {
			mustContain(t, "continue", b[n+5+2*k], fmt.Sprintf("hit Breakpoint 2, scopes (a=5) at prog.scm:%d", loop))
			checkVars(t, fmt.Sprintf("info locals in the named let, iteration %d", k), b[n+6+2*k], want)
		}
		checkFrames(t, "bt full", b[n+11], "scopes (a=5)", "main ()")
		if fl := gdbtest.FullLocals(b[n+11]); len(fl) < 1 || fl[0]["i"] != "2" || fl[0]["acc"] != "34" || fl[0]["b"] != "10" {
			t.Errorf("bt full: frame #0 locals %v, want i=2 acc=34 ... b=10:\n%s", fl, b[n+11])
		}
	})

	// A register binding is shown while live and as <optimized out> once
	// the epilogue has restored its register (its scope ends after the
	// ret: the let is in tail position); finish returns 7.
	t.Run("dead-binding", func(t *testing.T) {
		t.Parallel()
		leave := deadLeaveOffset(t, f.img)
		live := gdbLine(t, "dead: t live")
		r, n, _ := gdbSession(t, f, mode, "dead", []string{"break dead"},
			[]string{fmt.Sprintf("break prog.scm:%d", live), "continue", "info locals",
				fmt.Sprintf("break *dead+%d", leave), "continue", "info locals", "info args", "finish", "kill"})
		b := r.Blocks
		mustContain(t, "run", b[n], "hit Breakpoint 1, dead (a=6)")
		mustContain(t, "continue", b[n+2], fmt.Sprintf("hit Breakpoint 2, dead (a=6) at prog.scm:%d", live))
		checkVars(t, "info locals while t is live", b[n+3], map[string]string{"t": "42"})
		mustContain(t, "continue to the epilogue", b[n+5], "hit Breakpoint 3, ")
		checkVars(t, "info locals after t's register is restored", b[n+6], map[string]string{"t": "<optimized out>"})
		checkVars(t, "info args in the epilogue", b[n+7], map[string]string{"a": "6"})
		mustContain(t, "finish", b[n+8], "main () at prog.scm:", "Value returned is $1 = 7")
	})

	// define* optional parameters: defaults and passed values.
	t.Run("optional-args", func(t *testing.T) {
		t.Parallel()
		r, n, _ := gdbSession(t, f, mode, "opt", []string{"break opt"},
			[]string{"info args", "continue", "info args", "kill"})
		b := r.Blocks
		mustContain(t, "run", b[n], "hit Breakpoint 1, opt (a=1, b=10, c=2)")
		checkVars(t, "opt with defaults", b[n+1], map[string]string{"a": "1", "b": "10", "c": "2"})
		checkVars(t, "opt with b passed", b[n+3], map[string]string{"a": "1", "b": "5", "c": "2"})
	})
}

// deadLeaveOffset returns the offset from dead's entry of its LEAVE
// instruction, read with debug/dwarf, debug/elf and x86asm, and checks
// that it lies inside the lexical block binding t.
func deadLeaveOffset(t *testing.T, img string) uint64 {
	t.Helper()
	ef, err := elf.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	d, err := ef.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	var low, high, blockLow, blockHigh uint64
	rd := d.Reader()
	for {
		e, err := rd.Next()
		if err != nil || e == nil {
			break
		}
		if e.Tag != dwarf.TagSubprogram || e.Val(dwarf.AttrName) != "dead" {
			continue
		}
		rs, err := d.Ranges(e)
		if err != nil || len(rs) != 1 {
			t.Fatalf("dead: ranges %v, %v", rs, err)
		}
		low, high = rs[0][0], rs[0][1]
		for {
			c, err := rd.Next()
			if err != nil || c == nil || c.Tag == 0 {
				break
			}
			if c.Tag == dwarf.TagLexDwarfBlock {
				rs, err := d.Ranges(c)
				if err != nil || len(rs) != 1 {
					t.Fatalf("dead's block: ranges %v, %v", rs, err)
				}
				blockLow, blockHigh = rs[0][0], rs[0][1]
				break
			}
			if c.Children {
				rd.SkipChildren()
			}
		}
		break
	}
	if low == high || blockLow == blockHigh {
		t.Fatalf("no subprogram dead with a lexical block in %s", img)
	}
	var code []byte
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && p.Vaddr <= low && high <= p.Vaddr+p.Filesz {
			code = make([]byte, high-low)
			if _, err := p.ReadAt(code, int64(low-p.Vaddr)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if code == nil {
		t.Fatalf("dead [%#x, %#x) is in no PT_LOAD", low, high)
	}
	for off := 0; off < len(code); {
		inst, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			t.Fatalf("dead+%d: %v", off, err)
		}
		if pc := low + uint64(off); inst.Op == x86asm.LEAVE && pc >= blockLow && pc < blockHigh {
			return uint64(off)
		}
		off += inst.Len
	}
	t.Fatalf("dead has no LEAVE inside its lexical block [%#x, %#x)", blockLow, blockHigh)
	return 0
}

// TestGDBUnpublish: with the image published through the GDB JIT
// interface alone (no script), gdb knows a pc in fib once, and no more
// after Close unregisters the image (checked in the loader's unload hook,
// before the image is unmapped), while info line fib is gone too.
//
// gdb 13 sometimes registers one notification's symbol file twice (the
// race package gdbjit's callRegisterCode narrows: an event reaching the
// thread while gdb steps it over its JIT breakpoint; seen on a loaded
// machine about once in 50 sessions), and then one copy survives the
// unregistration. A session whose first info symbol shows fib twice is
// that race, not an answer about Close: it is run again, up to three
// times in all, and the test fails if every session shows it.
func TestGDBUnpublish(t *testing.T) {
	f := setupGDB(t)
	fibLine := regexp.MustCompile(`(?m)^fib \+ \d+ in section \.text`)
	for _, mode := range []gdbMode{modeJITFile, modeJITMem} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			var b []string
			var n int
			for attempt := 1; ; attempt++ {
				r, before, _ := gdbSession(t, f, mode, "unpublish", []string{"break fib"},
					[]string{"set $p = $pc", "info symbol $p", "delete",
						"break 'github.com/elfimage/elfimage.gdbImageUnloaded'", "continue",
						"info symbol $p", "info line fib", "kill"})
				b, n = r.Blocks, before
				copies := len(fibLine.FindAllString(b[n+2], -1))
				if copies <= 1 {
					break
				}
				if attempt == 3 {
					t.Fatalf("gdb registered the symbol file %d times in each of %d sessions (info symbol):\n%s", copies, attempt, b[n+2])
				}
				t.Logf("session %d: gdb registered the symbol file %d times (gdb's JIT breakpoint race); running the session again", attempt, copies)
			}
			if !fibLine.MatchString(b[n+2]) {
				t.Errorf("info symbol while published: want fib + N in section .text:\n%s", b[n+2])
			}
			mustContain(t, "continue to Close", b[n+5], "hit Breakpoint 2, github.com/elfimage/elfimage.gdbImageUnloaded")
			mustContain(t, "info symbol after unpublishing", b[n+6], "No symbol matches $p.")
			mustContain(t, "info line fib after unpublishing", b[n+7], `Function "fib" not defined.`)
		})
	}
}

// spinProg prints a line, then loops (a tail call) until killed.
const spinProg = `(define (spin n)
  (if (= n 0)
      0
      (spin (- n 1))))
(define (main)
  (display "ready") (newline)
  (spin 100000000000))
`

// TestGDBAttach: gdb -p, attached to a process already running image code
// published through the GDB JIT interface, finds the images by walking
// the interface's list: the thread in spin shows spin with its argument
// and source line, and the Go frames below.
func TestGDBAttach(t *testing.T) {
	f := setupGDB(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "spin.scm"), []byte(spinProg), 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command(f.cli, "build", "spin.scm")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"run", "-gdb", "spin.elf"}, {"run", "-jit", "-gdb", "spin.scm"}} {
		t.Run(args[1], func(t *testing.T) {
			pid := startReady(t, f.cli, dir, args...)
			s := &gdbtest.Session{GDB: f.gdb, Dir: dir, NoScript: true,
				Args: []string{"-p", strconv.Itoa(pid)},
				Cmds: []string{"thread apply all bt", "info line spin", "detach"}}
			r := gdbtest.MustRun(t, s)
			bt := r.Blocks[0]
			// main calls spin in tail position: spin's caller is %start.
			if !regexp.MustCompile(`(?m)^#0\s+(0x[0-9a-f]+ in )?spin \(n=\d+\) at spin\.scm:[1-4]\n#1\s+0x[0-9a-f]+ in %start \(\)\n`).MatchString(bt) {
				t.Errorf("no thread in spin (tail-called from main):\n%s", bt)
			}
			// The spinning thread's stack continues into Go frames.
			i := strings.Index(bt, "spin (n=")
			if i < 0 || !strings.Contains(bt[i:], "<signal handler called>") || !strings.Contains(bt[i:], "native.call") {
				t.Errorf("the spinning thread's bt does not reach the Go caller:\n%s", bt)
			}
			mustContain(t, "info line spin", r.Blocks[1], `Line 1 of "spin.scm" starts at address`)
		})
	}
}

// startReady starts the CLI with args in dir, waits until the program
// prints its first line, "ready", and returns its pid; the process is
// killed when the test ends.
func startReady(t *testing.T, cli, dir string, args ...string) int {
	t.Helper()
	cmd := exec.Command(cli, args...)
	cmd.Dir = dir
	tooltest.StartReady(t, cmd)
	return cmd.Process.Pid
}
