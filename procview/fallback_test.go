package procview_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/elfimage/elfimage/internal/gdbtest"
	"github.com/elfimage/elfimage/internal/tooltest"
	"github.com/elfimage/elfimage/procview"
	"github.com/elfimage/elfimage/unwind"
)

// downProg prints "ready", then recurses six levels deep (down 5 to down
// 0, none of them tail calls) and spins in spin, which loops by tail
// calls, until killed. main's call of down is a tail call: down 5 returns
// to %start.
const downProg = `(define (spin n)
  (if (= n 0)
      0
      (spin (- n 1))))
(define (down n)
  (if (= n 0)
      (+ 1 (spin 100000000000))
      (+ 1 (down (- n 1)))))
(define (main)
  (display "ready") (newline)
  (down 5))
`

// startDown runs `elfimage run ARGS down.scm` in a test directory and
// returns its pid; the perf map it may write is removed at the end.
func startDown(t *testing.T, args ...string) int {
	t.Helper()
	bin := filepath.Join(fixture(t), "elfimage")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "down.scm"), []byte(downProg), 0o644); err != nil {
		t.Fatal(err)
	}
	pid := 0
	t.Cleanup(func() { // runs after StartReady's kill
		if pid != 0 {
			os.Remove(fmt.Sprintf("/tmp/perf-%d.map", pid))
		}
	})
	cmd := exec.Command(bin, append(append([]string{"run"}, args...), "down.scm")...)
	cmd.Dir = dir
	tooltest.StartReady(t, cmd)
	pid = cmd.Process.Pid
	return pid
}

// spinning returns the thread whose innermost frame is in spin, or nil.
func spinning(threads []procview.Thread) *procview.Thread {
	for i := range threads {
		fs := threads[i].Frames
		if len(fs) > 0 && len(fs[0].Funcs) > 0 && fs[0].Funcs[0].Function == "spin" {
			return &threads[i]
		}
	}
	return nil
}

// stacksWhen freezes pid and takes its stacks until ok accepts them
// (resuming the process for a moment between tries), at most tries times.
func stacksWhen(t *testing.T, pid, tries int, ok func([]procview.Thread) bool) ([]procview.Thread, *procview.View) {
	t.Helper()
	var threads []procview.Thread
	for try := 0; ; try++ {
		if try > 0 {
			syscall.Kill(pid, syscall.SIGCONT)
			time.Sleep(time.Duration(5+try%7) * time.Millisecond)
		}
		freeze(t, pid)
		th, view, err := procview.Stacks(pid, nil)
		if err != nil {
			t.Fatal(err)
		}
		threads = th
		if ok(th) {
			t.Cleanup(func() { view.Close() })
			return th, view
		}
		view.Close()
		if try == tries {
			t.Fatalf("no acceptable stacks after %d tries:\n%s", tries, dumpThreads(threads))
		}
	}
}

// TestStacksUnpublished: a process running image code linked in memory
// and announced only in its perf map (run -jit -perf-map, no -gdb): the
// spinning thread is named from /tmp/perf-PID.map, unwound by frame
// pointer through the six down frames, %start and the library's entry
// routine elfimage.entry (also in the perf map) into native.trampoline,
// crosses native.Call's stack switch into native.call and goes on by CFI
// to main.main and runtime.goexit, where it ends cleanly. Every frame
// eu-stack -p shows (it walks by frame pointer too) has our pc, in every
// thread, up to native.trampoline, which eu-stack unwinds by its Go CFI
// with the native stack pointer.
func TestStacksUnpublished(t *testing.T) {
	requireAmd64Stacks(t)
	euStack := tooltest.Require(t, "eu-stack")
	pid := startDown(t, "-jit", "-perf-map")
	perfMap := fmt.Sprintf("/tmp/perf-%d.map", pid)
	// eu-stack's frame-pointer walk skips the caller of a frame stopped
	// in its prologue or epilogue: compare when spin is in its body.
	threads, view := stacksWhen(t, pid, 100, func(th []procview.Thread) bool {
		s := spinning(th)
		return s != nil && len(s.Frames) > 1 && s.Frames[1].Method == unwind.MethodFramePointer
	})
	for _, w := range view.Warnings() {
		t.Logf("warning: %v", w)
	}
	th := spinning(threads)
	seq := funcSeq(th)
	want := []string{"spin", "down", "down", "down", "down", "down", "down", "%start", "elfimage.entry", "github.com/elfimage/elfimage/native.trampoline", "github.com/elfimage/elfimage/native.call"}
	if len(seq) < len(want) || strings.Join(seq[:len(want)], " ") != strings.Join(want, " ") {
		t.Fatalf("spinning thread: %v, want it to start with %v\n%s", seq, want, dumpThreads(threads))
	}
	if !strings.Contains(strings.Join(seq, " "), " main.main runtime.main runtime.goexit") || th.Err != nil {
		t.Errorf("the walk does not reach main.main and end at runtime.goexit: %v, %v", seq, th.Err)
	}
	for i, f := range th.Frames {
		var m unwind.Method
		switch {
		case i == 0:
			m = unwind.MethodRegisters
		case i < len(want)-1:
			m = unwind.MethodFramePointer
		case i == len(want)-1:
			m = unwind.MethodStackSwitch
		default:
			m = unwind.MethodCFI
		}
		if f.Method != m {
			t.Errorf("frame %d (%v) found by %v, want %v", i, seq[i], f.Method, m)
		}
		if i < len(want)-2 && f.Module != perfMap {
			t.Errorf("frame %d: module %q, want %s", i, f.Module, perfMap)
		}
	}
	// The frames of one down are the same return address; each frame's
	// stack pointer is above the one before.
	for i := 1; i < len(th.Frames); i++ {
		if th.Frames[i].SP <= th.Frames[i-1].SP && i != len(want)-1 {
			t.Errorf("frame %d: sp %#x not above %#x", i, th.Frames[i].SP, th.Frames[i-1].SP)
		}
	}

	eu := euStacks(t, euStack, "-p", strconv.Itoa(pid))
	for i := range threads {
		ours, theirs := threads[i].Frames, eu[threads[i].TID]
		if len(theirs) == 0 {
			t.Errorf("eu-stack shows no frames for thread %d", threads[i].TID)
			continue
		}
		n := min(len(ours), len(theirs))
		for j := 0; j < n; j++ {
			if ours[j].PC != theirs[j].pc {
				t.Errorf("thread %d frame %d: pc %#x, eu-stack %#x\nours:\n%s\neu-stack: %#x", threads[i].TID, j, ours[j].PC, theirs[j], dumpThreads(threads[i:i+1]), theirs)
				break
			}
			if len(ours[j].Funcs) > 0 && strings.HasPrefix(ours[j].Funcs[0].Function, "github.com/elfimage/elfimage/native.trampoline") {
				n = j + 1
				break // eu-stack goes on from here by the trampoline's Go CFI, with the native stack pointer
			}
		}
		if &threads[i] == th && (n < len(want)-1 || len(ours) <= n) {
			t.Errorf("spinning thread: %d frames agree with eu-stack, ours %d; want agreement down to native.trampoline and ours further", n, len(ours))
		}
	}
}

// TestStacksArgs: for the same program published to gdb (run -jit -gdb),
// every frame gdb's `thread apply all bt` names has our function and our
// argument values (spin (n=...), down (n=0) to down (n=5), and the Go
// frames' scalars), physical frame by physical frame, and the frames of
// the image have a column.
func TestStacksArgs(t *testing.T) {
	requireAmd64Stacks(t)
	gdb := tooltest.Require(t, "gdb")
	pid := startDown(t, "-jit", "-gdb")
	threads, _ := stacksWhen(t, pid, 50, func(th []procview.Thread) bool { return spinning(th) != nil })
	th := spinning(threads)
	for i, n := 1, 0; i <= 6; i, n = i+1, n+1 {
		f := th.Frames[i]
		if len(f.Funcs) != 1 || f.Funcs[0].Function != "down" || len(f.Args) != 1 || len(f.Args[0]) != 1 ||
			f.Args[0][0].Name != "n" || f.Args[0][0].Value != strconv.Itoa(n) || f.Funcs[0].Column == 0 {
			t.Errorf("frame %d: %+v args %+v, want down (n=%d) with a column", i, f.Funcs, f.Args, n)
		}
	}
	if a := th.Frames[0].Args; len(a) != 1 || len(a[0]) != 1 || a[0][0].Name != "n" {
		t.Errorf("spin's arguments: %+v", a)
	}
	g := gdbArgStacks(t, gdb, pid)
	compared := 0
	for i := range threads {
		ours, modules := ourArgLines(&threads[i]), ourArgModules(&threads[i])
		theirs := g[threads[i].TID]
		for j := 0; j < len(theirs) && j < len(ours); j++ {
			if theirs[j].Func == "??" {
				break
			}
			if j == len(ours)-1 && ours[j].fn == "??" && errors.Is(threads[i].Err, procview.ErrNotExecutable) {
				// Our walk stopped outside executable memory, where
				// gdb names a data symbol and goes on (see notCode).
				break
			}
			if !sameFunc(modules[j], norm(ours[j].fn), norm(theirs[j].Func)) {
				t.Errorf("thread %d line %d: %s, gdb %s", threads[i].TID, j, ours[j].fn, theirs[j].Func)
				break
			}
			if ga := gdbArgs(theirs[j].Args); !sameArgs(norm(theirs[j].Func), ours[j].args, ga) {
				t.Errorf("thread %d line %d %s: arguments (%s), gdb (%s)", threads[i].TID, j, ours[j].fn, ours[j].args, ga)
			}
			compared++
		}
	}
	if compared < 20 {
		t.Errorf("only %d frames compared with gdb", compared)
	}
	if t.Failed() {
		t.Logf("ours:\n%s", dumpThreads(threads))
	}
}

type argLine struct{ fn, args string }

// ourArgLines lists a thread's source frames as gdb prints them, with
// our argument lists; frames gdb shows as <signal handler called> are
// left out, as the gdb parser leaves them out.
func ourArgLines(th *procview.Thread) []argLine {
	var out []argLine
	for _, f := range th.Frames {
		if f.Signal {
			continue
		}
		if len(f.Funcs) == 0 {
			out = append(out, argLine{fn: "??"})
		}
		for j, fn := range f.Funcs {
			var as []string
			if j < len(f.Args) {
				for _, a := range f.Args[j] {
					as = append(as, a.String())
				}
			}
			out = append(out, argLine{fn.Function, strings.Join(as, ", ")})
		}
	}
	return out
}

// ourArgModules returns the module of each line of ourArgLines.
func ourArgModules(th *procview.Thread) []string {
	var out []string
	for _, f := range th.Frames {
		if f.Signal {
			continue
		}
		for range max(len(f.Funcs), 1) {
			out = append(out, f.Module)
		}
	}
	return out
}

// gdbArgs normalizes gdb's argument list ("n=3, s=0x1234",
// "x=x@entry=5", "x=6, x@entry=5") to what we print, keeping gdb's
// entry-value forms: gdb adds the symbol a pointer points into
// (0x879e60 <runtime.sched+288>) and prints a Go slice as "[]T = {...}".
// gdb prints a Go func value as a C function at the address of the
// variable ({void (int)} 0xADDR), where we print the closure pointer it
// holds: such values are returned as "?", not compared.
func gdbArgs(s string) string {
	var kept []string
	for _, a := range parseArgs(s) {
		a.val, a.entry = normVal(a.val), normVal(a.entry)
		kept = append(kept, a.String())
	}
	return strings.Join(kept, ", ")
}

// argVal is one parameter as gdb's bt shows it: its value and, when shown,
// its value on entry (gdb's "x@entry").
type argVal struct{ name, val, entry string }

// String formats a as gdb does (see procview.Arg.String).
func (a argVal) String() string {
	return procview.Arg{Name: a.name, Value: a.val, Entry: a.entry}.String()
}

// parseArgs splits an argument list in gdb's bt form into parameters:
// "x=V", "x=x@entry=V" (the value, equal to the value on entry), and
// "x=V, x@entry=E".
func parseArgs(s string) []argVal {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{', '(', '[', '<':
			depth++
		case '}', ')', ']', '>':
			depth--
		case ',':
			if depth == 0 && i+1 < len(s) && s[i+1] == ' ' {
				parts = append(parts, s[start:i])
				start = i + 2
			}
		}
	}
	if s != "" {
		parts = append(parts, s[start:])
	}
	var out []argVal
	for _, p := range parts {
		name, val, _ := strings.Cut(p, "=")
		if n, ok := strings.CutSuffix(name, "@entry"); ok && len(out) > 0 && out[len(out)-1].name == n {
			out[len(out)-1].entry = val
			continue
		}
		a := argVal{name: name, val: val}
		if v, ok := strings.CutPrefix(val, name+"@entry="); ok {
			a.val, a.entry = v, v
		}
		out = append(out, a)
	}
	return out
}

var symRE = regexp.MustCompile(`^(0x[0-9a-f]+) <[^>]*>$`)

// normVal normalizes one of gdb's values (see gdbArgs).
func normVal(v string) string {
	switch {
	case strings.HasPrefix(v, "{"):
		return "?"
	case strings.HasSuffix(v, " = {...}"):
		return "..."
	}
	return symRE.ReplaceAllString(v, "$1")
}

// sameArgs compares our argument list (procview.Arg.String's forms) with
// gdb's normalized one (gdbArgs) of function fn, in any order, where "?"
// matches any value. Where we know a value on entry it must be gdb's, in
// gdb's form (x=x@entry=V, x=V, x@entry=E). Where gdb knows one we do not,
// our value must be gdb's, or, when gdb's value is the value on entry
// (x=x@entry=V), not known to us (<not saved>, <optimized out>): gdb reads
// registers our unwinding did not recover (the frame-pointer fallback) and
// call values in them. In main gdb finds no value on entry (it does not
// unwind past main: set backtrace past-main), where we find them through
// the C library's call site: there our value may be known where gdb's is
// <optimized out>, and our values on entry are not compared.
func sameArgs(fn, ours, gdb string) bool {
	o, g := parseArgs(ours), parseArgs(gdb)
	if len(o) != len(g) {
		return false
	}
	// gdb may list an inlined frame's arguments in another order
	// (glibc's __mmap64 inlined into mmap: offset first).
	byName := func(a, b argVal) int { return strings.Compare(a.name, b.name) }
	slices.SortStableFunc(o, byName)
	slices.SortStableFunc(g, byName)
	notKnown := func(v string) bool { return v == "<not saved>" || v == "<optimized out>" }
	for i := range o {
		oa, ga := o[i], g[i]
		switch {
		case oa.name != ga.name:
			return false
		case ga.val == "?":
		case fn == "main" && oa.entry != "" && ga.entry == "":
			if oa.val != ga.val && ga.val != "<optimized out>" {
				return false
			}
		case oa.entry != "":
			if oa.entry != ga.entry || oa.val != ga.val {
				return false
			}
		case ga.entry != "" && ga.entry == ga.val:
			if oa.val != ga.val && !notKnown(oa.val) {
				return false
			}
		case oa.val != ga.val:
			return false
		}
	}
	return true
}

// gdbArgStacks runs gdb -p pid with `thread apply all bt` and returns each
// thread's frame lines (gdbtest.Frames) by thread id.
func gdbArgStacks(t *testing.T, gdb string, pid int) map[int][]gdbtest.Frame {
	t.Helper()
	s := &gdbtest.Session{GDB: gdb, Dir: t.TempDir(), NoScript: true,
		Args: []string{"-p", strconv.Itoa(pid)},
		Cmds: []string{"thread apply all bt", "detach"}}
	r := gdbtest.MustRun(t, s)
	out := map[int][]gdbtest.Frame{}
	for tid, block := range gdbtest.Threads(r.Blocks[0]) {
		out[tid] = gdbtest.Frames(block)
	}
	if len(out) == 0 {
		t.Fatalf("no backtrace in gdb's output:\n%s", r.Output)
	}
	return out
}

// startBogusFP compiles and starts tooltest.BogusFPProg and returns its
// process id.
func startBogusFP(t *testing.T) int {
	t.Helper()
	cmd := exec.Command(tooltest.GCC(t, tooltest.BogusFPProg, "-O1"))
	tooltest.StartReady(t, cmd)
	return cmd.Process.Pid
}

// TestStacksStop: a walk that cannot go on says why: the thread of a
// process spinning in anonymous code with the frame pointer 0xdeadbeef
// shows that frame (via registers) and stops with an error that wraps
// unwind.ErrNoFDE and unwind.ErrImplausible and names the check.
func TestStacksStop(t *testing.T) {
	requireAmd64Stacks(t)
	pid := startBogusFP(t)
	// Once printed "ready", the thread calls the code.
	threads, _ := stacksWhen(t, pid, 50, func(th []procview.Thread) bool {
		return len(th) == 1 && len(th[0].Frames) > 0 && th[0].Frames[0].Module == ""
	})
	if len(threads) != 1 {
		t.Fatalf("%d threads:\n%s", len(threads), dumpThreads(threads))
	}
	th := threads[0]
	if len(th.Frames) != 1 || th.Frames[0].Method != unwind.MethodRegisters || th.Frames[0].Module != "" {
		t.Fatalf("frames:\n%s", dumpThreads(threads))
	}
	if rbp, _ := th.Frames[0].Regs.Get(6); rbp != 0xdeadbeef {
		t.Errorf("rbp %#x, want 0xdeadbeef", rbp)
	}
	err := th.Err
	if !errors.Is(err, unwind.ErrNoFDE) || !errors.Is(err, unwind.ErrImplausible) ||
		!strings.Contains(fmt.Sprint(err), "outside every module") || !strings.Contains(fmt.Sprint(err), "frame pointer 0xdeadbeef is not 8-byte aligned") {
		t.Errorf("stop reason: %v", err)
	}
}

// TestLoadPerfMap: a perf map owned by the process's user names code
// outside every module (and its perf map is the frame's module); one
// claimed for another user, a symbolic link or a directory is refused.
func TestLoadPerfMap(t *testing.T) {
	v, err := procview.Open(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "perf-1.map")
	// An address outside every module: in the test's own heap.
	buf := make([]byte, 64)
	pc := uint64(uintptr(unsafe.Pointer(&buf[0])))
	if _, err := v.Lookup(pc); err == nil {
		t.Fatalf("%#x is in a module", pc)
	}
	if err := os.WriteFile(path, fmt.Appendf(nil, "%x 40 jitted procedure\n", pc), 0o644); err != nil {
		t.Fatal(err)
	}
	// Owned by a user who is not the process's: refused, unless that
	// user is root.
	if euid := os.Geteuid(); euid != 0 {
		if err := v.LoadPerfMap(path, euid+1); err == nil {
			t.Error("a perf map of another user was trusted")
		}
	} else {
		other := filepath.Join(dir, "other.map")
		if err := os.WriteFile(other, []byte("1000 10 x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(other, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		if err := v.LoadPerfMap(other, 0); err == nil || !strings.Contains(err.Error(), "not trusted") {
			t.Errorf("a perf map of user 12345 for a root process: %v", err)
		}
		if err := v.LoadPerfMap(other, 12345); err != nil {
			t.Errorf("a perf map of user 12345 for its process: %v", err)
		}
	}
	link := filepath.Join(dir, "link.map")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if err := v.LoadPerfMap(link, os.Geteuid()); err == nil {
		t.Error("a perf map behind a symbolic link was read")
	}
	if err := v.LoadPerfMap(dir, os.Geteuid()); err == nil {
		t.Error("a directory was read as a perf map")
	}
	if err := v.LoadPerfMap(filepath.Join(dir, "none.map"), os.Geteuid()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing perf map: %v, want fs.ErrNotExist", err)
	}
	if err := v.LoadPerfMap(path, os.Geteuid()); err != nil {
		t.Fatal(err)
	}
	frames := []procview.Frame{{PC: pc + 0x11}, {PC: pc + 0x41}}
	v.SymbolizeFrames(frames)
	if f := frames[0]; len(f.Funcs) != 1 || f.Funcs[0].Function != "jitted procedure" || f.Module != path {
		t.Errorf("frame in the perf map: %+v", f)
	}
	if f := frames[1]; len(f.Funcs) != 0 || f.Module != "" {
		t.Errorf("frame past the perf map's entry (a return address one past it is looked up at its end): %+v", f)
	}
}

// argsCProg spins in a C function with parameters of many types.
const argsCProg = `#include <stdio.h>

enum color { RED, GREEN = 5, BLUE };
struct pair { int a, b; };
volatile int stop;

__attribute__((noinline)) void spin(char c, char nl, unsigned short u, long l, double d, float f,
		_Bool b, enum color e, const volatile int *p, struct pair s) {
	while (!stop)
		;
}

__attribute__((noinline)) void outer(int depth, unsigned char uc) {
	struct pair s = {1, 2};
	if (depth > 0)
		outer(depth - 1, uc + 1);
	else
		spin('a', '\n', 65535, -42, 2.5, 0.1f, 1, GREEN, &stop, s);
}

int main(void) {
	printf("ready\n");
	fflush(stdout);
	outer(3, 200);
	return 0;
}
`

// TestStacksArgsC: the arguments of a gcc-compiled program (DWARF 5,
// -O0: frame base DW_OP_call_frame_cfa, parameters at fbreg offsets) of
// every scalar kind read as gdb's bt prints them: characters, unsigned
// and negative integers, double and float, bool, an enumerator, a
// pointer, and an aggregate as "...".
func TestStacksArgsC(t *testing.T) {
	requireAmd64Stacks(t)
	gdb := tooltest.Require(t, "gdb")
	bin := tooltest.GCC(t, argsCProg, "-g", "-O0")
	cmd := exec.Command(bin)
	tooltest.StartReady(t, cmd)
	pid := cmd.Process.Pid
	threads, _ := stacksWhen(t, pid, 50, func(th []procview.Thread) bool {
		f := th[0].Frames
		return len(f) > 0 && len(f[0].Funcs) > 0 && f[0].Funcs[0].Function == "spin" && f[0].Funcs[0].Line == 9
	})
	got := ourArgLines(&threads[0])
	want := []argLine{
		{"spin", "c=97 'a', nl=10 '\\n', u=65535, l=-42, d=2.5, f=0.100000001, b=true, e=GREEN, p=" + fmt.Sprintf("%#x", stopAddr(t, bin, threads[0].Frames[0].Module, pid)) + ", s=..."},
		{"outer", "depth=0, uc=203 '\\313'"},
		{"outer", "depth=1, uc=202 '\\312'"},
		{"outer", "depth=2, uc=201 '\\311'"},
		{"outer", "depth=3, uc=200 '\\310'"},
		{"main", ""},
	}
	if len(got) < len(want) {
		t.Fatalf("frames %+v, want %+v", got, want)
	}
	for i, w := range want {
		if got[i] != w {
			t.Errorf("frame %d: %s (%s), want %s (%s)", i, got[i].fn, got[i].args, w.fn, w.args)
		}
	}
	g := gdbArgStacks(t, gdb, pid)[threads[0].TID]
	for i := range want {
		if i >= len(g) || g[i].Func != got[i].fn || !sameArgs(g[i].Func, got[i].args, gdbArgs(g[i].Args)) {
			t.Errorf("frame %d: ours %s (%s), gdb %+v", i, got[i].fn, got[i].args, g)
			break
		}
	}
}

// stopAddr returns the run-time address of the variable stop in the
// process: its symbol's value plus the executable's load bias.
func stopAddr(t *testing.T, bin, module string, pid int) uint64 {
	t.Helper()
	return symbolValue(t, bin, module, pid, "stop")
}

// symbolValue returns the run-time address of the symbol name of bin,
// module in process pid.
func symbolValue(t *testing.T, bin, module string, pid int, name string) uint64 {
	t.Helper()
	_, syms := tooltest.ELFSymbols(t, bin)
	v, err := procview.Open(pid)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	for _, m := range v.Modules() {
		if m.Name != module {
			continue
		}
		for _, s := range syms {
			if s.Name == name {
				return s.Value + m.Bias
			}
		}
	}
	t.Fatalf("no symbol %s", name)
	return 0
}

// TestSameArgsEntryValues: gdb's entry-value forms against ours, as seen
// on a thread caught in glibc's clone (CI, 2026-12-04), and in gcc -O2
// programs.
func TestSameArgsEntryValues(t *testing.T) {
	for _, c := range []struct {
		fn, ours, gdb string
		want          bool
	}{
		{"clone3", "cl_args=<not saved>, func=<not saved>, arg=0x7f6c7249b6c0",
			"cl_args=cl_args@entry=0x7f6c7349c980, func=func@entry=0x7f6cbb160ef0 <start_thread>, arg=arg@entry=0x7f6c7249b6c0", true},
		{"clone3", "cl_args=cl_args@entry=0x7f6c7349c980, func=func@entry=0x7f6cbb160ef0, arg=arg@entry=0x7f6c7249b6c0",
			"cl_args=cl_args@entry=0x7f6c7349c980, func=func@entry=0x7f6cbb160ef0 <start_thread>, arg=arg@entry=0x7f6c7249b6c0", true},
		{"start_thread", "pd=0x7f6c7249b6c0, stackaddr=<optimized out>, stacksize=<optimized out>",
			"pd=pd@entry=0x7f6c7249b6c0, stackaddr=stackaddr@entry=0x7f6c71c9b000, stacksize=<optimized out>", true},
		{"f", "pd=0x7f6c7249b6c1", "pd=pd@entry=0x7f6c7249b6c0", false}, // a value of ours that differs
		{"f", "n=5", "n=5, n@entry=6", true},                            // the value on entry beside the current one, not known to us
		{"f", "n=4", "n=5, n@entry=4", false},                           // the value is not the entry value
		{"f", "n=n@entry=5", "n=n@entry=5", true},                       // ours known: strict
		{"f", "n=n@entry=5", "n=5", false},                              // a value on entry gdb does not find
		{"f", "n=n@entry=5", "n=n@entry=6", false},                      // or finds another
		{"f", "n=256, n@entry=32", "n=256, n@entry=32", true},           // both known, different
		{"f", "n=256, n@entry=31", "n=256, n@entry=32", false},
		{"f", "n=256, n@entry=32", "n=n@entry=256", false},
		{"f", "n=<optimized out>, n@entry=3", "n=<optimized out>, n@entry=3", true}, // lost in the callee, known on entry
		{"main", "argc=argc@entry=1, argv=argv@entry=0x7ffd1188c1c8", "argc=1, argv=<optimized out>", true},
		{"main", "argc=argc@entry=2, argv=argv@entry=0x7ffd1188c1c8", "argc=1, argv=<optimized out>", false},
	} {
		if got := sameArgs(c.fn, c.ours, gdbArgs(c.gdb)); got != c.want {
			t.Errorf("sameArgs(%s, %q, gdbArgs(%q) = %q) = %v, want %v", c.fn, c.ours, c.gdb, gdbArgs(c.gdb), got, c.want)
		}
	}
}
