package procview

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/elfimage/elfimage/debugfile"
	"github.com/elfimage/elfimage/unwind"
)

// ErrLiveStacksArch is wrapped by the error of Stacks on a host other
// than amd64: the thread stacks of a live process are read on x86-64
// only.
var ErrLiveStacksArch = errors.New("procview: thread stacks of a live process are read on amd64 only")

// MaxThreads bounds the threads Stacks stops.
const MaxThreads = 1 << 16

// Options tune Stacks. The zero value is the default.
type Options struct {
	// MaxFrames bounds the frames of each thread's backtrace
	// (DefaultMaxFrames when <= 0).
	MaxFrames int
	// NoSymbolize leaves Frame.Funcs and Frame.Args empty.
	NoSymbolize bool
	// NoArgs leaves Frame.Args empty (and copies no stack).
	NoArgs bool
	// NoPerfMap does not read /tmp/perf-PID.map.
	NoPerfMap bool
	// DebugFiles is the View's DebugFiles: how separate debug files
	// are found (nil: DefaultDebugFiles).
	DebugFiles *debugfile.Finder
}

// Thread is the backtrace of one thread.
type Thread struct {
	// TID is the thread's id; Name its name (/proc/PID/task/TID/comm).
	TID  int
	Name string
	// Frames are its frames, innermost first.
	Frames []Frame
	// Err is why the walk stopped before the outermost frame (see
	// View.Backtrace), or why the thread could not be stopped or its
	// registers read; nil only when the walk reached the outermost frame.
	Err error

	// stack is the copy of the thread's stacks taken while it was
	// stopped, which argument values are read from.
	stack stackCopy
}

// Stacks stops every thread of process pid, unwinds each, resumes them
// and returns their backtraces, sorted by thread id, with the View of the
// process's modules they were unwound with (the caller closes it). The
// threads are stopped with PTRACE_SEIZE and PTRACE_INTERRUPT (threads
// that appear while Stacks attaches are stopped too; a thread that exits
// meanwhile is left out), unwound while all are stopped, then detached
// (also on error; a signal that arrived meanwhile is delivered on detach)
// and only then symbolized, arguments included (View.DescribeFrames),
// from a copy of each thread's stacks taken while it was stopped: the
// bytes around the stack pointers of its frames, in each mapping they lie
// in (from 128 bytes below the lowest, the red zone, to 4 KiB above the
// highest, at most MaxStackCopy bytes per mapping); values elsewhere are
// "<error: ...>". Code outside every module is named from
// /tmp/perf-PID.map when there is one owned by the process's user or
// root (View.LoadPerfMap; a problem with it is one of the View's
// Warnings). Every ptrace call is made from one locked OS thread, which
// exits afterwards (so that the kernel detaches anything left).
//
// Errors: ErrSelf for the calling process; the errno of PTRACE_SEIZE
// (EPERM without ptrace access: another user, Yama ptrace_scope, or a
// process already traced), wrapped with the thread id; those of Open.
// Problems with one thread are in its Thread.Err. Only x86-64 hosts are
// supported (elsewhere an error wrapping ErrLiveStacksArch). Cost: the
// process stays stopped for the attach, the module snapshot (which reads JIT symbol files) and the unwinding of every
// thread; symbolization runs after it resumes.
func Stacks(pid int, opts *Options) ([]Thread, *View, error) {
	if opts == nil {
		opts = &Options{}
	}
	if pid == os.Getpid() {
		return nil, nil, ErrSelf
	}
	if runtime.GOARCH != "amd64" {
		return nil, nil, fmt.Errorf("%w, not %s: reading another architecture's thread registers with ptrace is not implemented (under qemu-user, which runs arm64 programs on other hosts, there is no ptrace of emulated processes at all); a core file of the process (CoreStacks) is read on any host, x86-64 and AArch64 alike", ErrLiveStacksArch, runtime.GOARCH)
	}
	type result struct {
		threads []Thread
		view    *View
		err     error
	}
	ch := make(chan result, 1)
	go func() {
		// Never unlocked: the thread exits with the goroutine, and the
		// kernel detaches whatever this thread still traces.
		runtime.LockOSThread()
		th, v, err := stacksLocked(pid, opts)
		ch <- result{th, v, err}
	}()
	r := <-ch
	if r.err != nil {
		return nil, nil, r.err
	}
	if !opts.NoSymbolize {
		for i := range r.threads {
			t := &r.threads[i]
			var mem unwind.Memory
			if !opts.NoArgs {
				mem = t.stack
			}
			r.view.DescribeFrames(t.Frames, mem)
			t.stack = nil
		}
	}
	return r.threads, r.view, nil
}

// tracee is one stopped thread.
type tracee struct {
	tid     int
	stopped bool
	sig     int // signal to deliver on detach
}

func stacksLocked(pid int, opts *Options) (threads []Thread, v *View, err error) {
	var ts []*tracee
	defer func() {
		for _, t := range ts {
			detach(t)
		}
	}()
	seen := map[int]bool{}
	for round := 0; ; round++ {
		tids, err := listTasks(pid)
		if err != nil {
			return nil, nil, err
		}
		n := 0
		for _, tid := range tids {
			if seen[tid] {
				continue
			}
			seen[tid] = true
			if len(ts) == MaxThreads {
				return nil, nil, fmt.Errorf("procview: process %d has more than %d threads", pid, MaxThreads)
			}
			if err := unix.PtraceSeize(tid); err != nil {
				if err == unix.ESRCH {
					continue // exited
				}
				return nil, nil, fmt.Errorf("procview: PTRACE_SEIZE thread %d of process %d: %w", tid, pid, err)
			}
			t := &tracee{tid: tid}
			ts = append(ts, t)
			if err := unix.PtraceInterrupt(tid); err != nil {
				continue
			}
			n++
		}
		// A thread created between two listings is seen by the next
		// one; once a listing finds no new thread, every thread is
		// stopped or about to be, and none can create another.
		if n == 0 || round == 100 {
			break
		}
	}
	for _, t := range ts {
		waitStop(t)
	}
	if v, err = Open(pid); err != nil {
		return nil, nil, err
	}
	v.DebugFiles = opts.DebugFiles
	if !opts.NoPerfMap {
		path := fmt.Sprintf("/tmp/perf-%d.map", pid)
		if err := v.LoadPerfMap(path, processUID(pid)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			v.warn = append(v.warn, err)
		}
	}
	mem := unwind.NewRemote(pid)
	for _, t := range ts {
		th := Thread{TID: t.tid, Name: threadName(pid, t.tid)}
		if !t.stopped {
			th.Err = fmt.Errorf("procview: thread %d did not stop", t.tid)
			threads = append(threads, th)
			continue
		}
		start, err := threadRegs(t.tid)
		if err != nil {
			th.Err = err
		} else {
			th.Frames, th.Err = v.walk(mem, start, opts.MaxFrames)
			if !opts.NoSymbolize && !opts.NoArgs {
				th.stack = v.copyStacks(th.Frames)
			}
		}
		threads = append(threads, th)
	}
	sort.Slice(threads, func(i, j int) bool { return threads[i].TID < threads[j].TID })
	return threads, v, nil
}

// waitStop waits (at most about a second) for t's ptrace-stop.
func waitStop(t *tracee) {
	deadline := time.Now().Add(time.Second)
	for {
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(t.tid, &ws, unix.WALL|unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return // gone
		}
		if wpid == t.tid {
			switch {
			case ws.Exited() || ws.Signaled():
				return
			case ws.Stopped():
				t.stopped = true
				// PTRACE_EVENT_STOP (the interrupt, or a group-stop) has
				// the event in bits 16-23; anything else is a
				// signal-delivery-stop, whose signal is delivered on
				// detach.
				if int(ws)>>16 != unix.PTRACE_EVENT_STOP {
					t.sig = int(ws.StopSignal())
				}
				return
			}
			continue
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(50 * time.Microsecond)
	}
}

func detach(t *tracee) {
	// PTRACE_DETACH's data is the signal to deliver. A thread not (yet)
	// in a ptrace-stop cannot be detached: interrupt it and wait.
	for range 3 {
		_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_DETACH, uintptr(t.tid), 0, uintptr(t.sig), 0, 0)
		if e == 0 || e == unix.ESRCH && t.stopped {
			return
		}
		if t.stopped {
			return
		}
		unix.PtraceInterrupt(t.tid)
		waitStop(t)
	}
}

// listTasks lists /proc/PID/task.
func listTasks(pid int) ([]int, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(MaxThreads + 1)
	if err != nil && len(names) == 0 {
		return nil, err
	}
	var out []int
	for _, n := range names {
		if tid, err := strconv.Atoi(n); err == nil && tid > 0 {
			out = append(out, tid)
		}
	}
	sort.Ints(out)
	return out, nil
}

func threadName(pid, tid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/comm", pid, tid))
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}

// processUID returns the effective user id of process pid
// (/proc/PID/status, "Uid:" real, effective, saved, filesystem), or -1.
func processUID(pid int) int {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Uid:"); ok {
			if f := strings.Fields(rest); len(f) >= 2 {
				if uid, err := strconv.Atoi(f[1]); err == nil {
					return uid
				}
			}
		}
	}
	return -1
}

// MaxStackCopy bounds the bytes Stacks copies from one mapping of one
// thread's stacks for reading argument values.
const MaxStackCopy = 1 << 20

// stackCopy is a copy of parts of a stopped thread's stacks: an
// unwind.SizedMemory whose reads outside the copy fail.
type stackCopy []unwind.Snapshot

// ReadUint64 implements unwind.Memory.
func (c stackCopy) ReadUint64(addr uint64) (uint64, error) { return c.ReadSized(addr, 8) }

// ReadSized implements unwind.SizedMemory.
func (c stackCopy) ReadSized(addr uint64, size int) (uint64, error) {
	for i := range c {
		s := &c[i]
		if addr >= s.Base && addr-s.Base < uint64(len(s.Data)) {
			return s.ReadSized(addr, size)
		}
	}
	return 0, fmt.Errorf("%w: %d bytes at %#x: not in the copy of the stack taken while the thread was stopped", unwind.ErrMemory, size, addr)
}

// copyStacks copies, for frames just unwound while their thread is
// stopped, the bytes around their stack pointers in each mapping they lie
// in.
func (v *View) copyStacks(frames []Frame) stackCopy {
	type rng struct{ lo, hi, mlo, mhi uint64 }
	var rs []rng
	space := addressSpace{v}
	for _, f := range frames {
		mlo, mhi, ok := space.Mapping(f.SP)
		if !ok {
			continue
		}
		found := false
		for i := range rs {
			if rs[i].mlo == mlo {
				rs[i].lo, rs[i].hi = min(rs[i].lo, f.SP), max(rs[i].hi, f.SP)
				found = true
			}
		}
		if !found {
			rs = append(rs, rng{f.SP, f.SP, mlo, mhi})
		}
	}
	var out stackCopy
	for _, r := range rs {
		lo := max(r.mlo, r.lo-min(r.lo, 128))
		hi := min(r.mhi, r.hi+4096, lo+MaxStackCopy)
		if lo >= hi {
			continue
		}
		b := make([]byte, hi-lo)
		n, _ := v.Mem.ReadAt(b, int64(lo))
		if n > 0 {
			out = append(out, unwind.Snapshot{Base: lo, Data: b[:n]})
		}
	}
	return out
}
