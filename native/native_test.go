//go:build linux && (amd64 || arm64)

package native

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/elfimage/elfimage/internal/qemutest"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// loadCode maps code read-write, copies it, then makes it read-execute
// (never writable and executable at once) and returns its address.
func loadCode(t testing.TB, code []byte) uintptr {
	t.Helper()
	mem, err := unix.Mmap(-1, 0, len(code), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	copy(mem, code)
	if err := unix.Mprotect(mem, unix.PROT_READ|unix.PROT_EXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	return uintptr(unsafe.Pointer(&mem[0]))
}

func newStack(t testing.TB, size int) *Stack {
	t.Helper()
	s, err := NewStack(size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func sum(n uint64) uint64 { return n * (n + 1) / 2 }

func TestCallReturn(t *testing.T) {
	s := newStack(t, 64<<10)
	if got := Call(loadCode(t, codeRet42), s); got != 42 {
		t.Errorf("mov eax,42; ret returned %d", got)
	}
	if got := Call(loadCode(t, codeRet), s); got != 0 {
		t.Errorf("RAX at entry = %#x, want 0 (AL is the vector count for variadic callees)", got)
	}
}

func TestCallArgs(t *testing.T) {
	s := newStack(t, 64<<10)
	var fns [MaxArgs]uintptr
	for i := range fns {
		fns[i] = loadCode(t, codeArgReg[i])
	}
	regs := [MaxArgs]string{"rdi", "rsi", "rdx", "rcx", "r8", "r9"}
	all := []uintptr{0x1111111111111111, 0x2222222222222222, 0x3333333333333333,
		^uintptr(0), 0x5555555555555555, 0x8000000000000006}
	for n := 0; n <= MaxArgs; n++ {
		args := all[:n]
		for i, fn := range fns {
			var want uintptr
			if i < n {
				want = args[i]
			}
			if got := Call(fn, s, args...); got != want {
				t.Errorf("%d args: %s = %#x, want %#x", n, regs[i], got, want)
			}
		}
	}
}

func TestEntryAlignment(t *testing.T) {
	s := newStack(t, 64<<10)
	if got := Call(loadCode(t, codeRSPMod16), s); got != entrySPMod16 {
		t.Errorf("sp mod 16 at entry = %d, want %d (%s)", got, entrySPMod16, entrySPRule)
	}
	rsp := Call(loadCode(t, codeRSP), s)
	if rsp != s.EntrySP() {
		t.Errorf("rsp at entry = %#x, want EntrySP %#x", rsp, s.EntrySP())
	}
	if rsp >= s.Top() || rsp < s.Bottom() || s.Top()%16 != 0 {
		t.Errorf("rsp %#x outside [%#x, %#x) or top unaligned", rsp, s.Bottom(), s.Top())
	}
}

func TestDeepRecursion(t *testing.T) {
	s := newStack(t, 64<<20)
	const n = 1_000_000 // 16 MB of frames
	if got := Call(loadCode(t, codeSum), s, n); uint64(got) != sum(n) {
		t.Errorf("sum(%d) = %d, want %d", n, got, sum(n))
	}
}

func TestStackLayout(t *testing.T) {
	const size = 100_000
	s := newStack(t, size)
	page := uintptr(os.Getpagesize())
	if s.Size() < size || s.Size() >= size+int(page) || s.Top()-s.Bottom() != uintptr(s.Size()) {
		t.Errorf("Size %d (top %#x bottom %#x), want %d rounded up to a page", s.Size(), s.Top(), s.Bottom(), size)
	}
	if s.Bottom()%page != 0 || s.Top()%page != 0 {
		t.Errorf("bottom %#x or top %#x not page aligned", s.Bottom(), s.Top())
	}
	if p := mapsPerms(t, s.Bottom()-1); p != "---p" {
		t.Errorf("guard page below Bottom has perms %q, want ---p", p)
	}
	if p := mapsPerms(t, s.Bottom()); p != "rw-p" {
		t.Errorf("stack has perms %q, want rw-p", p)
	}
	if p := mapsPerms(t, s.Top()-1); p != "rw-p" {
		t.Errorf("stack's last page has perms %q, want rw-p", p)
	}
	// The guard above keeps a profiler's copy of the stack (perf: 8 KiB
	// from SP) from running on into the next mapping.
	if p := mapsPerms(t, s.Top()); p != "---p" {
		t.Errorf("guard page at Top has perms %q, want ---p", p)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
	if _, err := CallErr(loadCode(t, codeRet42), s); !errors.Is(err, ErrClosed) {
		t.Errorf("CallErr on closed stack = %v, want ErrClosed", err)
	}
}

// mapsPerms returns the permissions of the /proc/self/maps line holding addr.
func mapsPerms(t *testing.T, addr uintptr) string {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var lo, hi uintptr
		var perms string
		if _, err := fmt.Sscanf(sc.Text(), "%x-%x %s", &lo, &hi, &perms); err == nil && lo <= addr && addr < hi {
			return perms
		}
	}
	return "unmapped"
}

func TestCallErrors(t *testing.T) {
	s := newStack(t, 4096)
	fn := loadCode(t, codeRet42)
	for _, c := range []struct {
		name string
		fn   uintptr
		s    *Stack
		args []uintptr
		want error
	}{
		{"7 args", fn, s, make([]uintptr, 7), ErrTooManyArgs},
		{"nil stack", fn, nil, nil, ErrNilStack},
		{"nil func", 0, s, nil, ErrNilFunc},
	} {
		if _, err := CallErr(c.fn, c.s, c.args...); !errors.Is(err, c.want) {
			t.Errorf("%s: CallErr error %v, want %v", c.name, err, c.want)
		}
		func() {
			defer func() {
				if err, _ := recover().(error); !errors.Is(err, c.want) {
					t.Errorf("%s: Call panicked with %v, want %v", c.name, err, c.want)
				}
			}()
			Call(c.fn, c.s, c.args...)
		}()
	}
	if got := Call(fn, s); got != 42 {
		t.Errorf("call after misuse returned %d", got)
	}
	if _, err := NewStack(0); err == nil {
		t.Error("NewStack(0) succeeded")
	}
}

// spinning starts codeSpin on s in a goroutine and waits until it runs.
// It returns ctl (set ctl[0] to stop it) and a channel with its result.
func spinning(t *testing.T, s *Stack, order *atomic.Int32, seq *atomic.Int32) (ctl []uint64, done chan uintptr) {
	t.Helper()
	mem, err := Alloc(16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Free(mem) })
	ctl = unsafe.Slice((*uint64)(unsafe.Pointer(&mem[0])), 2)
	fn := loadCode(t, codeSpin)
	done = make(chan uintptr, 1)
	go func() {
		r := Call(fn, s, uintptr(unsafe.Pointer(&ctl[0])), 1<<32) // ~1 s without the flag
		if order != nil {
			order.Store(seq.Add(1))
		}
		done <- r
	}()
	for atomic.LoadUint64(&ctl[1]) == 0 {
		runtime.Gosched()
	}
	return ctl, done
}

// TestGCDuringCall checks that a collection does not wait for a native call:
// runtime.GC must finish while the call still spins, which ends only when
// told to after GC returns (or on its own after ~2^32 iterations, which
// fails the test).
func TestGCDuringCall(t *testing.T) {
	s := newStack(t, 64<<10)
	var seq, callEnd atomic.Int32
	ctl, done := spinning(t, s, &callEnd, &seq)
	runtime.GC()
	gcEnd := seq.Add(1)
	atomic.StoreUint64(&ctl[0], 1)
	if r := <-done; r != 1 || callEnd.Load() < gcEnd {
		t.Errorf("native call ended before runtime.GC (result %d, gc at %d, call at %d)", r, gcEnd, callEnd.Load())
	}
}

func TestBusy(t *testing.T) {
	s := newStack(t, 64<<10)
	ctl, done := spinning(t, s, nil, nil)
	if _, err := CallErr(loadCode(t, codeRet42), s); !errors.Is(err, ErrBusy) {
		t.Errorf("CallErr on busy stack = %v, want ErrBusy", err)
	}
	if err := s.Close(); !errors.Is(err, ErrBusy) {
		t.Errorf("Close of busy stack = %v, want ErrBusy", err)
	}
	atomic.StoreUint64(&ctl[0], 1)
	if r := <-done; r != 1 {
		t.Errorf("spin returned %d, want 1", r)
	}
	if got := Call(loadCode(t, codeRet42), s); got != 42 {
		t.Errorf("call after busy returned %d", got)
	}
}

func TestAbort(t *testing.T) {
	s := newStack(t, 64<<10)
	mem, err := Alloc(8)
	if err != nil {
		t.Fatal(err)
	}
	defer Free(mem)
	abort, ret42 := loadCode(t, codeAbort), loadCode(t, codeRet42)
	for i := range 3 {
		*(*uint64)(unsafe.Pointer(&mem[0])) = 0
		if got := Call(abort, s, uintptr(unsafe.Pointer(&mem[0])), s.EntrySP()); got != 77 {
			t.Fatalf("abort call %d returned %d, want 77", i, got)
		}
		if saved := *(*uint64)(unsafe.Pointer(&mem[0])); uintptr(saved) != s.EntrySP() {
			t.Errorf("rsp saved at entry %#x, want EntrySP %#x", saved, s.EntrySP())
		}
		// Go's state (g in R14, zero X15, DF clear) must be intact.
		runtime.GC()
		src := []byte(strings.Repeat("abcdefgh", 64))
		dst := make([]byte, len(src))
		copy(dst[1:], src) // overlapping-free memmove; DF set would break it
		if string(dst[1:]) != string(src[:len(src)-1]) {
			t.Fatal("memmove broken after abort")
		}
		if got := Call(ret42, s); got != 42 {
			t.Fatalf("call after abort returned %d", got)
		}
	}
}

func TestConcurrent(t *testing.T) {
	fn := loadCode(t, codeSum)
	var wg sync.WaitGroup
	for g := range 16 {
		s := newStack(t, 1<<20)
		wg.Go(func() {
			for i := range 200 {
				n := uint64(g*1000 + i)
				if got := Call(fn, s, uintptr(n)); uint64(got) != sum(n) {
					t.Errorf("goroutine %d: sum(%d) = %d, want %d", g, n, got, sum(n))
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestCallAllocs(t *testing.T) {
	s := newStack(t, 64<<10)
	fn := loadCode(t, codeArgReg[5])
	if n := testing.AllocsPerRun(100, func() { Call(fn, s, 1, 2, 3, 4, 5, 6) }); n != 0 {
		t.Errorf("Call allocates %v times per call, want 0", n)
	}
}

func TestAllocFree(t *testing.T) {
	b, err := Alloc(10000)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 10000 {
		t.Fatalf("len %d, want 10000", len(b))
	}
	for i := range b {
		if b[i] != 0 {
			t.Fatalf("byte %d = %d, want zero", i, b[i])
		}
		b[i] = byte(i)
	}
	if err := Free(b[:10]); err != nil {
		t.Errorf("Free: %v", err)
	}
	if err := Free(make([]byte, 10)); err == nil {
		t.Error("Free of Go memory succeeded")
	}
	if _, err := Alloc(0); err == nil {
		t.Error("Alloc(0) succeeded")
	}
}

// TestGuardPageKills documents what a stack overflow does: the process dies
// with SIGSEGV (it is not recoverable). Runs in a child process.
func TestGuardPageKills(t *testing.T) {
	if os.Getenv("NATIVE_TEST_OVERFLOW") == "1" {
		s, _ := NewStack(64 << 10)
		Call(loadCode(t, codeSum), s, 1_000_000) // 16 MB of frames on 64 KiB
		os.Exit(0)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Under qemu-user without binfmt_misc the child runs under qemu-aarch64.
	cmd := qemutest.Command(context.Background(), t, exe, "-test.run=^TestGuardPageKills$")
	cmd.Env = append(os.Environ(), "NATIVE_TEST_OVERFLOW=1")
	out, err := tooltest.RunTool(t, cmd, 2*time.Minute)
	if err == nil || !strings.Contains(out, "SIGSEGV") {
		t.Errorf("overflowing child: err %v, output %q; want death by SIGSEGV", err, out)
	}
}

// TestDirectCall: without an installed routine, the trampoline calls the
// code itself, with the same entry SP; the return address into the
// trampoline is then at EntrySP.
func TestDirectCall(t *testing.T) {
	if Entry() != 0 {
		t.Skip("an entry routine is installed (TestEntryRoutine ran before)")
	}
	checkTop(t, directRA, false)
}

// TestEntryRoutine installs an entry routine and checks that calls keep
// their contract through it (arguments, result, entry SP, abort) and that
// the top of the stack holds what the routine's CFI reads (checkTop).
func TestEntryRoutine(t *testing.T) {
	if err := SetEntry(0); err == nil {
		t.Error("SetEntry(0) succeeded")
	}
	pc := entryRoutine()
	if err := SetEntry(pc); err != nil {
		t.Fatalf("SetEntry: %v", err)
	}
	if err := SetEntry(pc); err != nil {
		t.Errorf("SetEntry of the installed routine again: %v", err)
	}
	if err := SetEntry(pc + 1); !errors.Is(err, ErrEntrySet) {
		t.Errorf("SetEntry of another routine: %v, want ErrEntrySet", err)
	}
	if Entry() != pc {
		t.Errorf("Entry() = %#x, want %#x", Entry(), pc)
	}
	TestCallReturn(t)
	TestCallArgs(t)
	TestEntryAlignment(t)
	TestAbort(t)
	checkTop(t, func(ra uintptr) bool { return ra == pc+entryRoutineRAOffset }, true)
}

// BenchmarkCall measures Call of mov eax, 42; ret. It calls the code
// directly unless an entry routine was installed before it ran (go test
// -run NONE runs no test, so none is); BenchmarkCallEntry installs one.
func BenchmarkCall(b *testing.B) {
	s := newStack(b, 64<<10)
	fn := loadCode(b, codeRet42)
	b.ReportAllocs()
	for b.Loop() {
		Call(fn, s)
	}
}

// BenchmarkCallEntry is BenchmarkCall through the entry routine of
// package elfimage (installed for the rest of the process).
func BenchmarkCallEntry(b *testing.B) {
	if err := SetEntry(entryRoutine()); err != nil {
		b.Fatal(err)
	}
	BenchmarkCall(b)
}
