package procview_test

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/elfimage/elfimage/internal/gdbtest"
	"github.com/elfimage/elfimage/internal/tooltest"
	"github.com/elfimage/elfimage/procview"
	"github.com/elfimage/elfimage/unwind"
)

// gcore writes a core of the live process pid with gdb's gcore (the
// process continues; gdb detaches) and returns its path.
func gcore(t *testing.T, gdb, dir string, pid int) string {
	t.Helper()
	path := filepath.Join(dir, fmt.Sprintf("core.gcore.%d", pid))
	s := &gdbtest.Session{GDB: gdb, Dir: dir, NoScript: true, Timeout: 5 * time.Minute,
		Args: []string{"-p", strconv.Itoa(pid)},
		Cmds: []string{"gcore " + path, "detach"}}
	r := gdbtest.MustRun(t, s)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("gcore wrote no core: %v\n%s", err, r.Output)
	}
	return path
}

// gdbCoreStacks runs `gdb EXE -c CORE -batch -ex 'thread apply all bt'`
// and returns each thread's frames by thread id.
func gdbCoreStacks(t *testing.T, gdb, dir, exe, core string) map[int][]gdbFrame {
	t.Helper()
	return gdbThreads(t, &gdbtest.Session{GDB: gdb, Dir: dir, NoScript: true, Program: exe,
		Args: []string{"-c", core}, Cmds: []string{"thread apply all bt"}})
}

// parseGDBThreads parses the output of `thread apply all bt`: each
// thread's frames by thread id (the LWP gdb names). A frame right after "<signal handler called>" prints no pc
// when its pc is at the start of a line, but it has one: it was
// interrupted there, not inlined into the signal frame.
func parseGDBThreads(text string) map[int][]gdbFrame {
	out := map[int][]gdbFrame{}
	for tid, block := range gdbtest.Threads(text) {
		var fs []gdbFrame
		for _, line := range strings.Split(block, "\n") {
			m := gdbFrameRE.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			fn := m[3]
			if i := strings.Index(fn, " ("); i >= 0 {
				fn = fn[:i]
			} else if i := strings.Index(fn, " at "); i >= 0 {
				fn = fn[:i]
			}
			afterSignal := len(fs) > 0 && fs[len(fs)-1].fn == "<signal handler called>"
			fs = append(fs, gdbFrame{fn: strings.TrimSuffix(fn, " ()"), hasPC: m[2] != "" || m[1] == "0" || afterSignal})
		}
		if len(fs) > 0 {
			out[tid] = fs
		}
	}
	return out
}

// euFrame is one frame of eu-stack: its pc and symbol ("" when eu-stack
// names none).
type euFrame struct {
	pc uint64
	fn string
}

var (
	euThreadRE = regexp.MustCompile(`^TID (\d+):`)
	euFrameRE  = regexp.MustCompile(`^#(\d+)\s+0x([0-9a-f]+)\s*(\S*)`)
)

// euStacks runs eu-stack with args (`-p PID`, or `--core CORE -e EXE`)
// and returns each thread's frames by thread id. eu-stack exits non-zero
// when it cannot finish a thread (it stops at the first frame without CFI
// that it cannot unwind by frame pointer); what it printed up to there is
// kept. eu-stack attaches to the process as a debugger does: a run of
// more than 2 minutes is killed and fails the test (tooltest.RunToolSplit).
func euStacks(t *testing.T, euStack string, args ...string) map[int][]euFrame {
	t.Helper()
	stdout, stderr, _ := tooltest.RunToolSplit(t, exec.Command(euStack, args...), 2*time.Minute)
	out := map[int][]euFrame{}
	tid := 0
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		line := sc.Text()
		if m := euThreadRE.FindStringSubmatch(line); m != nil {
			tid, _ = strconv.Atoi(m[1])
			continue
		}
		if m := euFrameRE.FindStringSubmatch(line); m != nil && tid != 0 {
			pc, _ := strconv.ParseUint(m[2], 16, 64)
			out[tid] = append(out[tid], euFrame{pc, m[3]})
		}
	}
	if len(out) == 0 {
		t.Fatalf("no stacks from eu-stack:\n%s\n%s", stdout, stderr)
	}
	return out
}

// compareWithEUStack checks that each of eu-stack's frames of a thread is
// ours at the same position: the same pc, and, when eu-stack names it,
// the same function (its symbol table name, the outermost of our
// physical frame's functions). eu-stack stops at frames it cannot unwind
// (Go's signal return trampoline has no CFI): we must go at least as far.
// Past a pc outside every module (a thread just cloned, whose stack is
// not set up yet, returns there), or in data where our walk stopped
// (notCode, or a return address our walk refused as not in executable
// memory), eu-stack goes on guessing where gdb and we stop: the
// comparison ends at that frame. It returns the number of
// frames compared.
func compareWithEUStack(t *testing.T, tid int, ours *procview.Thread, eu []euFrame) int {
	t.Helper()
	for i, e := range eu {
		if i > 0 && i == len(eu)-1 && e.fn == "" && inClone3(&ours.Frames[i-1]) && (i == len(ours.Frames) || ours.Frames[i].PC != e.pc) {
			// A thread just past clone3's system call (libc's, now
			// that the CLI links libc), where clone3 has no CFI: our
			// walk takes the return address at the stack pointer, as
			// the ret two instructions on says (0 in the new thread,
			// its outermost frame; the caller in the thread that
			// called clone3), eu-stack follows the frame pointer the
			// caller left in rbp (glibc's struct pthread) to a word
			// that is not code (its dtv pointer), unnamed, and stops.
			return i
		}
		if i == len(ours.Frames) {
			t.Errorf("thread %d: eu-stack has %d frames, we %d\neu-stack %v\nours %s", tid, len(eu), len(ours.Frames), eu, dumpThreads([]procview.Thread{*ours}))
			return i
		}
		f := ours.Frames[i]
		if f.PC == e.pc && (e.fn == "" && f.Module == "" || notCode(ours, i)) {
			return i + 1
		}
		if f.PC == e.pc && len(f.Funcs) > 0 && strings.HasPrefix(f.Funcs[0].Function, "github.com/elfimage/elfimage/native.trampoline") &&
			i+1 < len(eu) && i+1 < len(ours.Frames) && eu[i+1].pc != ours.Frames[i+1].PC {
			// When the entry image is in anonymous memory eu-stack
			// does not see it, and unwinds native.Call's trampoline
			// by its Go CFI with the native stack pointer: past it
			// eu-stack guesses. (When it finds the frame-pointer
			// chain instead, the comparison goes on.)
			return i + 1
		}
		if f.PC != e.pc {
			t.Errorf("thread %d frame %d: pc %#x, eu-stack %#x\neu-stack %v\nours %s", tid, i, f.PC, e.pc, eu, dumpThreads([]procview.Thread{*ours}))
			return i
		}
		if e.fn == "" {
			continue
		}
		if len(f.Funcs) == 0 || norm(f.Funcs[len(f.Funcs)-1].Function) != norm(e.fn) {
			t.Errorf("thread %d frame %d: %+v, eu-stack %s", tid, i, f.Funcs, e.fn)
			return i
		}
	}
	return len(eu)
}

// inClone3 reports whether f's function is libc's clone3 (__clone3).
func inClone3(f *procview.Frame) bool {
	return len(f.Funcs) > 0 && strings.TrimPrefix(f.Funcs[0].Function, "__") == "clone3"
}

// compareCoreTools compares every thread of the core with gdb's `thread
// apply all bt` on `gdb EXE -c CORE` (compareWithGDB) and with eu-stack
// --core CORE -e EXE (compareWithEUStack), and returns by thread id the
// physical frames compared with gdb and the frames compared with
// eu-stack out of how many eu-stack shows; on a failure it logs our
// threads.
func compareCoreTools(t *testing.T, gdb, euStack, dir, exe, core string, threads []procview.Thread) (nGDB, nEU, ofEU map[int]int) {
	t.Helper()
	g := gdbCoreStacks(t, gdb, dir, exe, core)
	e := euStacks(t, euStack, "--core", core, "-e", exe)
	nGDB, nEU, ofEU = map[int]int{}, map[int]int{}, map[int]int{}
	for i := range threads {
		th := &threads[i]
		ofEU[th.TID] = len(e[th.TID])
		nGDB[th.TID] = compareWithGDB(t, th.TID, th, g[th.TID])
		nEU[th.TID] = compareWithEUStack(t, th.TID, th, e[th.TID])
		t.Logf("thread %d: %d frames, %d physical frames compared with gdb, %d with eu-stack", th.TID, len(th.Frames), nGDB[th.TID], nEU[th.TID])
	}
	if t.Failed() {
		t.Logf("ours:\n%s", dumpThreads(threads))
	}
	return nGDB, nEU, ofEU
}

// TestCoreStacksGcore: a core that gdb's gcore writes of a child running
// spin.scm's image (mapped from its file and published with -gdb; or
// linked in memory, -jit -gdb, so that the image exists only in the
// core's memory, found through the GDB JIT list) gives, thread by thread,
// the same frames as Stacks gave of the frozen live process just before,
// the same functions as gdb's `thread apply all bt` on the core, and the
// same pcs and symbols as eu-stack --core.
func TestCoreStacksGcore(t *testing.T) {
	requireAmd64Stacks(t)
	gdb := tooltest.Require(t, "gdb")
	euStack := tooltest.Require(t, "eu-stack")
	dir := fixture(t)
	cli := filepath.Join(dir, "elfimage")
	for _, args := range [][]string{{"run", "-gdb", "spin.elf"}, {"run", "-jit", "-gdb", "spin.scm"}} {
		t.Run(strings.Join(args[1:len(args)-1], ""), func(t *testing.T) {
			cmd := exec.Command(cli, args...)
			cmd.Dir = dir
			tooltest.StartReady(t, cmd)
			pid := cmd.Process.Pid
			live := frozenInSpin(t, pid)
			corePath := gcore(t, gdb, t.TempDir(), pid)
			c, err := procview.OpenCore(corePath)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if c.PID != pid || len(c.Threads) != len(live) {
				t.Fatalf("core of pid %d with %d threads; the process %d has %d", c.PID, len(c.Threads), pid, len(live))
			}
			threads, view, err := procview.CoreStacks(c, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer view.Close()
			for _, w := range view.Warnings() {
				t.Logf("warning: %v", w)
			}
			sameAsLive(t, live, threads)
			th := threadWith(threads, "spin")
			if th == nil {
				t.Fatalf("no thread in spin:\n%s", dumpThreads(threads))
			}
			if want := "[jit@"; args[1] == "-jit" && !strings.HasPrefix(th.Frames[0].Module, want) {
				t.Errorf("frame 0 in %q, want a JIT symbol file", th.Frames[0].Module)
			}
			nGDB, nEU, _ := compareCoreTools(t, gdb, euStack, dir, cli, corePath, threads)
			if n := nGDB[th.TID]; n < 8 {
				t.Errorf("only %d frames of the spinning thread compared with gdb", n)
			}
			if m := nEU[th.TID]; args[1] != "-jit" && m < 8 {
				t.Errorf("only %d frames of the spinning thread compared with eu-stack", m)
			}
		})
	}
}

// sameAsLive checks that the threads of a core are those the live
// process had when it was dumped: the same frames (pcs, modules,
// functions, signal frames) found the same way; thread names aside, as a
// core has only the process's.
func sameAsLive(t *testing.T, live, core []procview.Thread) {
	t.Helper()
	for i := range live {
		l, o := &live[i], byTIDOf(core, live[i].TID)
		if o == nil {
			t.Errorf("thread %d is not in the core", l.TID)
			continue
		}
		lc, oc := *l, *o
		lc.Name, oc.Name = "", ""
		if a, b := dumpThreads([]procview.Thread{lc}), dumpThreads([]procview.Thread{oc}); a != b {
			t.Errorf("live and core differ:\nlive %s\ncore %s", a, b)
		}
		for j := range min(len(l.Frames), len(o.Frames)) {
			if l.Frames[j].Method != o.Frames[j].Method {
				t.Errorf("thread %d frame %d: found by %v in the core, %v live", l.TID, j, o.Frames[j].Method, l.Frames[j].Method)
			}
		}
	}
}

// frozenInSpin stops process pid (SIGSTOP, until the test ends) once its
// main thread runs spin, and returns its live backtraces.
func frozenInSpin(t *testing.T, pid int) []procview.Thread {
	t.Helper()
	for try := 0; ; try++ {
		if try > 0 {
			syscall.Kill(pid, syscall.SIGCONT)
			time.Sleep(10 * time.Millisecond)
		}
		freeze(t, pid)
		threads, view, err := procview.Stacks(pid, nil)
		if err != nil {
			t.Fatal(err)
		}
		view.Close()
		if threadWith(threads, "spin") != nil {
			return threads
		}
		if try == 20 {
			t.Fatalf("no thread in spin:\n%s", dumpThreads(threads))
		}
	}
}

// crashCore makes the child cmd (started, printing ready) dump core on
// SIGABRT as the kernel writes it (core(5)): its RLIMIT_CORE soft limit is
// raised to its hard limit (prlimit(2) on the child only; nothing
// system-wide changes), and the core is found where
// /proc/sys/kernel/core_pattern puts it. The test is skipped when the
// pattern pipes cores to a handler (systemd-coredump, apport), which
// keeps them out of reach, or when the hard limit is 0.
func crashCore(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	return crashCoreAfter(t, cmd, syscall.SIGABRT, func() {
		if err := syscall.Kill(cmd.Process.Pid, syscall.SIGABRT); err != nil {
			t.Fatal(err)
		}
	})
}

// crashCoreAfter is crashCore with crash, instead of a SIGABRT, making the
// child die of signal sig.
func crashCoreAfter(t *testing.T, cmd *exec.Cmd, sig syscall.Signal, crash func()) string {
	t.Helper()
	pattern, usesPID := corePattern(t)
	pid := cmd.Process.Pid
	var lim unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_CORE, nil, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Max == 0 {
		// A host setting no container can change: a plain skip, even
		// under CI.
		t.Skip("the hard RLIMIT_CORE is 0: the kernel writes no core")
	}
	lim.Cur = lim.Max
	if err := unix.Prlimit(pid, unix.RLIMIT_CORE, &lim, nil); err != nil {
		t.Fatal(err)
	}
	crash()
	err := tooltest.Wait(t, cmd, 0)
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != sig {
		t.Fatalf("child: %v, want killed by %v", err, sig)
	}
	if !ws.CoreDump() {
		t.Fatalf("child died of %v without a core (core_pattern %q, RLIMIT_CORE %d)", sig, pattern, lim.Cur)
	}
	glob := expandCorePattern(pattern, pid, usesPID)
	if !filepath.IsAbs(glob) {
		glob = filepath.Join(cmd.Dir, glob)
	}
	matches, _ := filepath.Glob(glob)
	for _, m := range matches {
		c, err := procview.OpenCore(m)
		if err != nil {
			continue
		}
		c.Close()
		if c.PID == pid {
			if !strings.HasPrefix(m, cmd.Dir) {
				t.Cleanup(func() { os.Remove(m) })
			}
			return m
		}
	}
	t.Fatalf("no core of process %d at %s (core_pattern %q)", pid, glob, pattern)
	return ""
}

// corePattern returns /proc/sys/kernel/core_pattern and core_uses_pid,
// skipping the test when the pattern is a pipe.
func corePattern(t *testing.T) (string, bool) {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/kernel/core_pattern")
	if err != nil {
		tooltest.Skip(t, "no core_pattern: %v", err)
	}
	pattern := strings.TrimSpace(string(b))
	if strings.HasPrefix(pattern, "|") {
		// core_pattern is the host kernel's, which no container can
		// change: a plain skip, even under CI.
		t.Skipf("core_pattern %q pipes cores to a handler: the kernel's core file is out of this test's reach", pattern)
	}
	u, _ := os.ReadFile("/proc/sys/kernel/core_uses_pid")
	return pattern, strings.TrimSpace(string(u)) == "1"
}

// expandCorePattern turns a core_pattern into a glob for process pid:
// %p and %P are the pid, %% a percent sign, any other specifier a
// wildcard; with core_uses_pid and no %p, the kernel appends ".PID".
func expandCorePattern(pattern string, pid int, usesPID bool) string {
	var b strings.Builder
	hasPID := false
	for i := 0; i < len(pattern); i++ {
		if pattern[i] != '%' || i+1 == len(pattern) {
			b.WriteByte(pattern[i])
			continue
		}
		i++
		switch pattern[i] {
		case '%':
			b.WriteByte('%')
		case 'p', 'P':
			hasPID = true
			b.WriteString(strconv.Itoa(pid))
		default:
			b.WriteByte('*')
		}
	}
	if usesPID && !hasPID {
		fmt.Fprintf(&b, ".%d", pid)
	}
	return b.String()
}

// TestCoreStacksCrash: the kernel's core of a child that GOTRACEBACK=crash
// makes abort on SIGABRT while it runs spin.scm's image linked in memory
// (-jit -gdb): the thread that got the signal is first, with SIGABRT; Go's
// crash handler runs on every thread, and the walk crosses its signal
// frames (Go's sigreturn trampoline has no CFI; the registers come from
// the saved sigcontext) into spin, %start, the library's entry frame
// (elfimage.entry, a signal frame) and the Go frames from
// native.trampoline to main.main. Each thread agrees with gdb on the core, and with eu-stack as
// far as eu-stack goes. The same core cut after its notes still decodes,
// and every thread's walk ends with ErrNotDumped.
func TestCoreStacksCrash(t *testing.T) {
	requireAmd64Stacks(t)
	gdb := tooltest.Require(t, "gdb")
	euStack := tooltest.Require(t, "eu-stack")
	corePattern(t)
	dir := fixture(t)
	cli := filepath.Join(dir, "elfimage")
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "spin.scm"), []byte(spinProg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cli, "run", "-jit", "-gdb", "spin.scm")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "GOTRACEBACK=crash")
	tooltest.StartReady(t, cmd)
	pid := cmd.Process.Pid
	for try := 0; ; try++ {
		threads, view, err := procview.Stacks(pid, nil)
		if err != nil {
			t.Fatal(err)
		}
		view.Close()
		if threadWith(threads, "spin") != nil {
			break
		}
		if try == 50 {
			t.Fatalf("no thread in spin:\n%s", dumpThreads(threads))
		}
		time.Sleep(10 * time.Millisecond)
	}
	corePath := crashCore(t, cmd)
	c, err := procview.OpenCore(corePath)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Threads[0].TID != pid || c.Threads[0].Signal != int(syscall.SIGABRT) || c.Siginfo == nil || c.Siginfo.Signo != int32(syscall.SIGABRT) || c.Command != "elfimage" {
		t.Errorf("core: thread %+v, siginfo %+v, command %q", c.Threads[0].TID, c.Siginfo, c.Command)
	}
	threads, view, err := procview.CoreStacks(c, &procview.CoreOptions{Exe: cli})
	if err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	th := threadWith(threads, "spin")
	if th == nil {
		t.Fatalf("no thread in spin:\n%s", dumpThreads(threads))
	}
	seq := strings.Join(funcSeq(th), " ")
	if want := "runtime.sigtramp <signal handler called> spin %start <signal handler called> github.com/elfimage/elfimage/native.trampoline github.com/elfimage/elfimage/native.call"; !strings.Contains(seq, want) || !strings.Contains(seq, " main.main") {
		t.Errorf("spinning thread: %s\nwant it to contain %s ... main.main", seq, want)
	}
	nGDB, nEU, _ := compareCoreTools(t, gdb, euStack, dir, cli, corePath, threads)
	if n := nGDB[th.TID]; n < 14 {
		t.Errorf("only %d frames of the spinning thread compared with gdb", n)
	}
	if m := nEU[th.TID]; m < 4 {
		t.Errorf("spinning thread: only %d frames compared with eu-stack", m)
	}

	// Another executable (this test's binary) is refused: its Go build ID
	// is not the one in the core's copy of the executable's first page.
	if _, err := procview.NewCoreView(c, os.Args[0]); !errors.Is(err, procview.ErrBuildIDMismatch) {
		t.Errorf("NewCoreView with the wrong executable: %v, want ErrBuildIDMismatch", err)
	} else {
		t.Logf("wrong executable: %v", err)
	}

	t.Run("truncated", func(t *testing.T) {
		f, err := os.Open(corePath)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var notesEnd int64
		for _, s := range c.Segments {
			if notesEnd == 0 || int64(s.Offset) < notesEnd {
				notesEnd = int64(s.Offset) // the first segment's bytes follow the notes
			}
		}
		tc, err := procview.NewCore(f, notesEnd)
		if err != nil {
			t.Fatal(err)
		}
		if len(tc.Warnings()) == 0 {
			t.Errorf("no warning for a core cut after its notes")
		}
		threads, view, err := procview.CoreStacks(tc, &procview.CoreOptions{Exe: cli})
		if err != nil {
			t.Fatal(err)
		}
		defer view.Close()
		if len(threads) != len(c.Threads) {
			t.Fatalf("%d threads, want %d", len(threads), len(c.Threads))
		}
		for _, th := range threads {
			if !errors.Is(th.Err, procview.ErrNotDumped) || len(th.Frames) == 0 || th.Frames[0].PC == 0 {
				t.Errorf("thread %d: %d frames, %v; want its first frame and ErrNotDumped", th.TID, len(th.Frames), th.Err)
			}
		}
		if _, err := procview.NewCore(f, notesEnd/2); err == nil || !strings.Contains(err.Error(), "truncated") {
			t.Errorf("core cut in its notes: %v", err)
		}
	})
}

// cCrashProg is a C program with two threads: main calls middle, which
// calls leaf, which blocks in pause(2); the second thread blocks in
// pause from worker. With an argument, leaf waits for a byte on standard
// input, then stores to address 0 (SIGSEGV).
const cCrashProg = `#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void *worker(void *arg) {
	for (;;)
		pause();
	return arg;
}

__attribute__((noinline)) static void leaf(int crash) {
	if (crash) {
		char c;
		if (read(0, &c, 1) >= 0)
			*(volatile int *)0 = c;
	}
	for (;;)
		pause();
}

__attribute__((noinline)) static void middle(int crash) {
	leaf(crash);
	__asm__ volatile("");
}

int main(int argc, char **argv) {
	pthread_t t;
	(void)argv;
	pthread_create(&t, 0, worker, 0);
	printf("ready\n");
	fflush(stdout);
	middle(argc > 1);
	return 0;
}
`

// waitWorkers waits until every thread of pid but the main one blocks in
// pause(2), so that no core catches a thread still starting (in clone3,
// or on its way to pause).
func waitWorkers(t *testing.T, pid int) {
	t.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		if tid, _ := strconv.Atoi(task.Name()); tid != pid {
			waitSyscall(t, pid, tid, sysPauseX86_64)
		}
	}
}

// TestCoreStacksC: cores of a C program (a PIE executable, libc and the
// dynamic loader from NT_FILE with their build IDs checked, libc's
// separate debug information, the vDSO), one from gcore while its threads
// block in pause(2), one the kernel writes when it stores to address 0:
// every thread agrees with gdb and, frame by frame and pc by pc, with
// eu-stack, which unwinds such a program completely; the crash's siginfo
// is SIGSEGV at address 0.
func TestCoreStacksC(t *testing.T) {
	requireAmd64Stacks(t)
	gdb := tooltest.Require(t, "gdb")
	euStack := tooltest.Require(t, "eu-stack")
	dir := t.TempDir()
	exe := tooltest.GCC(t, cCrashProg, "-g", "-O1", "-pthread")
	check := func(t *testing.T, corePath string, pid int, want string) *procview.Core {
		t.Helper()
		c, err := procview.OpenCore(corePath)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		threads, view, err := procview.CoreStacks(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer view.Close()
		for _, w := range view.Warnings() {
			t.Logf("warning: %v", w)
		}
		if len(threads) != 2 || threads[0].TID != pid {
			t.Fatalf("threads:\n%s", dumpThreads(threads))
		}
		main := threadWith(threads, "middle")
		if main == nil {
			t.Fatalf("no thread in middle:\n%s", dumpThreads(threads))
		}
		seq := strings.Join(funcSeq(main), " ")
		if !strings.HasPrefix(seq, want) {
			t.Errorf("main thread: %s, want it to start with %s", seq, want)
		}
		if threadWith(threads, "worker") == nil {
			t.Errorf("no thread in worker:\n%s", dumpThreads(threads))
		}
		var vdso bool
		for _, m := range view.Modules() {
			vdso = vdso || m.Kind == procview.ModuleVDSO
		}
		if !vdso {
			t.Errorf("no vDSO module: %+v", view.Modules())
		}
		nGDB, nEU, ofEU := compareCoreTools(t, gdb, euStack, dir, exe, corePath, threads)
		for _, th := range threads {
			if n, m := nGDB[th.TID], nEU[th.TID]; n < 3 || m < min(3, ofEU[th.TID]) {
				t.Errorf("thread %d: compared %d frames with gdb, %d of eu-stack's %d", th.TID, n, m, ofEU[th.TID])
			}
		}
		return c
	}
	t.Run("gcore", func(t *testing.T) {
		cmd := exec.Command(exe)
		tooltest.StartReady(t, cmd)
		waitSyscall(t, cmd.Process.Pid, cmd.Process.Pid, sysPauseX86_64)
		waitWorkers(t, cmd.Process.Pid)
		check(t, gcore(t, gdb, t.TempDir(), cmd.Process.Pid), cmd.Process.Pid, "pause leaf middle main")
	})
	t.Run("crash", func(t *testing.T) {
		corePattern(t)
		cmd := exec.Command(exe, "crash")
		cmd.Dir = t.TempDir()
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		tooltest.StartReady(t, cmd)
		waitSyscall(t, cmd.Process.Pid, cmd.Process.Pid, int(syscall.SYS_READ))
		waitWorkers(t, cmd.Process.Pid)
		corePath := crashCoreAfter(t, cmd, syscall.SIGSEGV, func() { stdin.Write([]byte{'x'}) })
		c := check(t, corePath, cmd.Process.Pid, "leaf middle main")
		if si := c.Siginfo; si == nil || si.Signo != int32(syscall.SIGSEGV) || si.Addr != 0 || c.Threads[0].Signal != int(syscall.SIGSEGV) {
			t.Errorf("siginfo %+v, thread signal %d; want SIGSEGV at 0", si, c.Threads[0].Signal)
		}
	})
}

// TestCoreStacksUnpublished: a gcore of a process running image code
// linked in memory and announced only in its perf map (run -jit
// -perf-map, as in TestStacksUnpublished). The core's PT_LOAD segments
// give the address space: the anonymous code is executable, so the
// spinning thread is walked by frame pointer through the six down frames,
// %start and the library's entry routine (elfimage.entry), across
// native.Call's stack switch into the Go frames
// to runtime.goexit, each JIT frame named from /tmp/perf-PID.map (read by
// default for the core's PID): the same frames, found the same way, as
// the live process gave. eu-stack --core, which walks by frame pointer
// too (in a core past the entry routine, as it does not live), agrees pc by pc as
// far as it goes. Without the perf map the walk
// is the same with the JIT frames unnamed; a perf map given by path is
// used, one of other addresses is used only with a warning.
func TestCoreStacksUnpublished(t *testing.T) {
	requireAmd64Stacks(t)
	gdb := tooltest.Require(t, "gdb")
	euStack := tooltest.Require(t, "eu-stack")
	pid := startDown(t, "-jit", "-perf-map")
	perfMap := fmt.Sprintf("/tmp/perf-%d.map", pid)
	live, _ := stacksWhen(t, pid, 100, func(th []procview.Thread) bool {
		s := spinning(th)
		return s != nil && len(s.Frames) > 1 && s.Frames[1].Method == unwind.MethodFramePointer
	})
	dir := t.TempDir()
	corePath := gcore(t, gdb, dir, pid)
	c, err := procview.OpenCore(corePath)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.UID != os.Geteuid() {
		t.Errorf("core's user %d, want %d", c.UID, os.Geteuid())
	}
	stacks := func(opts *procview.CoreOptions) ([]procview.Thread, *procview.View) {
		t.Helper()
		threads, view, err := procview.CoreStacks(c, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { view.Close() })
		return threads, view
	}
	threads, view := stacks(nil)
	for _, w := range view.Warnings() {
		t.Logf("warning: %v", w)
	}
	sameAsLive(t, live, threads)
	th := spinning(threads)
	if th == nil {
		t.Fatalf("no thread in spin:\n%s", dumpThreads(threads))
	}
	want := []string{"spin", "down", "down", "down", "down", "down", "down", "%start", "elfimage.entry", "github.com/elfimage/elfimage/native.trampoline", "github.com/elfimage/elfimage/native.call"}
	nJIT := len(want) - 2 // spin to the entry routine: in anonymous memory, named from the perf map
	seq := funcSeq(th)
	if len(seq) < len(want) || strings.Join(seq[:len(want)], " ") != strings.Join(want, " ") ||
		!strings.Contains(strings.Join(seq, " "), " main.main runtime.main runtime.goexit") || th.Err != nil {
		t.Errorf("spinning thread: %v (%v), want %v ... main.main runtime.main runtime.goexit", seq, th.Err, want)
	}
	for i, f := range th.Frames[:nJIT] {
		if f.Module != perfMap || (i > 0 && f.Method != unwind.MethodFramePointer) {
			t.Errorf("frame %d: module %q, %v; want %s, by frame pointer", i, f.Module, f.Method, perfMap)
		}
	}

	e := euStacks(t, euStack, "--core", corePath, "-e", filepath.Join(fixture(t), "elfimage"))
	for i := range threads {
		n := compareWithEUStack(t, threads[i].TID, &threads[i], e[threads[i].TID])
		t.Logf("thread %d: %d frames, %d compared with eu-stack's %d", threads[i].TID, len(threads[i].Frames), n, len(e[threads[i].TID]))
		if &threads[i] == th && n <= nJIT {
			t.Errorf("spinning thread: %d of eu-stack's %d frames the same; want eu-stack to walk through the entry routine to the trampoline and ours as far", n, len(e[th.TID]))
		}
	}

	// No perf map: the same walk, the JIT frames without names.
	bare, _ := stacks(&procview.CoreOptions{Options: procview.Options{NoPerfMap: true}})
	bt := byTIDOf(bare, th.TID)
	if bt == nil || len(bt.Frames) != len(th.Frames) || bt.Err != nil {
		t.Fatalf("without the perf map:\n%s", dumpThreads(bare))
	}
	for i := range bt.Frames {
		if bt.Frames[i].PC != th.Frames[i].PC || (i < nJIT) != (len(bt.Frames[i].Funcs) == 0) {
			t.Errorf("without the perf map, frame %d: %#x %+v; with it %#x %+v", i, bt.Frames[i].PC, bt.Frames[i].Funcs, th.Frames[i].PC, th.Frames[i].Funcs)
		}
	}

	// A perf map given by path (a copy, as if /tmp had been cleaned).
	b, err := os.ReadFile(perfMap)
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(dir, "saved.map")
	if err := os.WriteFile(copyPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	given, _ := stacks(&procview.CoreOptions{PerfMap: copyPath})
	if g := byTIDOf(given, th.TID); g == nil || g.Frames[1].Module != copyPath || funcSeq(g)[1] != "down" {
		t.Errorf("with --perf-map %s:\n%s", copyPath, dumpThreads(given))
	}
	// One of other addresses: used as given, with a warning.
	other := filepath.Join(dir, "other.map")
	if err := os.WriteFile(other, []byte("1000 10 elsewhere\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, ov := stacks(&procview.CoreOptions{PerfMap: other})
	if !strings.Contains(fmt.Sprint(ov.Warnings()), "not this process's perf map") {
		t.Errorf("a perf map of other addresses: warnings %v", ov.Warnings())
	}
	if _, _, err := procview.CoreStacks(c, &procview.CoreOptions{PerfMap: filepath.Join(dir, "none.map")}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing perf map given by path: %v, want fs.ErrNotExist", err)
	}
}

func byTIDOf(threads []procview.Thread, tid int) *procview.Thread {
	for i := range threads {
		if threads[i].TID == tid {
			return &threads[i]
		}
	}
	return nil
}

// sysPauseX86_64 is pause(2)'s number on x86-64 (syscall.SYS_PAUSE there;
// arm64 has no pause system call, and the C programs run on the x86-64
// host).
const sysPauseX86_64 = 34

// cNoCFIProg waits in pause(2) under two functions of its own built
// without call frame information (no .eh_frame or .debug_frame entries
// for them) and with frame pointers.
const cNoCFIProg = `#include <stdio.h>
#include <unistd.h>

__attribute__((noinline)) void leaf(void) { pause(); __asm__ volatile(""); }
__attribute__((noinline)) void middle(void) { leaf(); __asm__ volatile(""); }

int main(void) {
	puts("ready");
	fflush(stdout);
	middle();
	return 0;
}
`

// TestCoreStacksNoCFI: a gcore of a C program whose own functions have no
// CFI gives the frames the live process gave, pause leaf middle main,
// middle and main found by frame pointer (leaf's and middle's frame
// records). The frame-pointer fallback
// checks that each return address follows a call, reading the code
// before it, which the core leaves out (text of a mapped file): it is
// read from the executable, as live from the process.
func TestCoreStacksNoCFI(t *testing.T) {
	requireAmd64Stacks(t)
	gdb := tooltest.Require(t, "gdb")
	exe := tooltest.GCC(t, cNoCFIProg, "-O1", "-fno-omit-frame-pointer", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables")
	cmd := exec.Command(exe)
	tooltest.StartReady(t, cmd)
	pid := cmd.Process.Pid
	waitSyscall(t, pid, pid, sysPauseX86_64)
	live, view, err := procview.Stacks(pid, nil)
	if err != nil {
		t.Fatal(err)
	}
	view.Close()
	c, err := procview.OpenCore(gcore(t, gdb, t.TempDir(), pid))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	threads, view, err := procview.CoreStacks(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	sameAsLive(t, live, threads)
	if len(threads) != 1 {
		t.Fatalf("threads:\n%s", dumpThreads(threads))
	}
	th := &threads[0]
	if seq := strings.Join(funcSeq(th), " "); !strings.HasPrefix(seq, "pause leaf middle main") {
		t.Errorf("core: %s (%v), want pause leaf middle main ...", seq, th.Err)
	}
	for i, f := range th.Frames[2:min(4, len(th.Frames))] {
		if f.Method != unwind.MethodFramePointer {
			t.Errorf("frame %d (%#x) found by %v, want by frame pointer", i+2, f.PC, f.Method)
		}
	}
}
