package scheme

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSignalsDuringRun sends SIGURG (Go's preemption signal, which Go's
// handler takes and ignores when no preemption is pending) to the thread
// running compiled code, again and again until the run ends: the run must
// end with its value. Go's signal handler finds the goroutine through the
// g register (x28 on arm64, read from it when cgo is not linked), so
// generated code that wrote x28 (native.Call's rule forbids it) would
// crash here (a segmentation fault in runtime.sigtrampgo) the first time
// a signal lands in it.
func TestSignalsDuringRun(t *testing.T) {
	m, err := Compile("prog.scm", []byte(kernelSrc(t, "(+ (fib 27) (fib 27) (fib 27) (fib 27))")))
	if err != nil {
		t.Fatal(err)
	}
	f := loadFlat(t, m)
	tid := make(chan int)
	type result struct {
		v   int64
		err error
	}
	done := make(chan result)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tid <- unix.Gettid()
		res, err := runEntry(f.syms[symStart], RunOptions{}, f.inImage)
		if err != nil {
			done <- result{0, err}
			return
		}
		done <- result{res.Value, nil}
	}()
	target, pid := <-tid, unix.Getpid()
	var sent atomic.Int64
	for {
		select {
		case r := <-done:
			if r.err != nil || r.v != 4*196418 {
				t.Fatalf("run with signals: %d, %v; want %d", r.v, r.err, 4*196418)
			}
			t.Logf("%d signals sent during the run", sent.Load())
			if sent.Load() == 0 {
				t.Error("no signal sent during the run")
			}
			return
		default:
		}
		if err := unix.Tgkill(pid, target, unix.SIGURG); err != nil {
			t.Fatal(err)
		}
		sent.Add(1)
		time.Sleep(100 * time.Microsecond) // pacing only: no timing is checked
	}
}
