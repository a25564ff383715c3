package addrmap

import (
	"errors"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestAcquireRelease(t *testing.T) {
	var m Map[string]
	if r, err := m.Acquire(0x1000); r != nil || err != ErrNotFound {
		t.Fatalf("Acquire on empty map = %v, %v; want nil, ErrNotFound", r, err)
	}
	m.Insert(0x1000, 0x2000, "a")
	m.Insert(0x3000, 0x4000, "b")
	for _, pc := range []uintptr{0xfff, 0x2000, 0x2fff, 0x4000} {
		if r, err := m.Acquire(pc); r != nil || err != ErrNotFound {
			t.Errorf("Acquire(%#x) = %v, %v; want nil, ErrNotFound", pc, r, err)
		}
	}
	r, err := m.Acquire(0x3fff)
	if err != nil || r.Value() != "b" || r.Range() != (Range{0x3000, 0x4000}) {
		t.Fatalf("Acquire(0x3fff) = %v %v", r, err)
	}

	var freed []string
	free := func(v string) { freed = append(freed, v) }

	// Held: RemoveFunc unpublishes at once but defers free to Release.
	r2, _ := m.Acquire(0x3000)
	if r2 != r {
		t.Errorf("two Acquires of one entry gave different Refs")
	}
	if ok, freedNow := m.RemoveFunc(0x3000, free); !ok || freedNow {
		t.Fatalf("RemoveFunc(0x3000) of a held entry = %v, %v; want true, false", ok, freedNow)
	}
	if _, err := m.Lookup(0x3100); err != ErrNotFound {
		t.Errorf("Lookup after RemoveFunc: %v", err)
	}
	if r3, err := m.Acquire(0x3100); r3 != nil || err != ErrNotFound {
		t.Errorf("Acquire after RemoveFunc = %v, %v", r3, err)
	}
	if len(freed) != 0 {
		t.Fatalf("free ran while 2 Refs held: %v", freed)
	}
	r.Release()
	if len(freed) != 0 {
		t.Fatalf("free ran while 1 Ref held: %v", freed)
	}
	if r2.Value() != "b" {
		t.Errorf("held value changed")
	}
	r2.Release()
	if len(freed) != 1 || freed[0] != "b" {
		t.Fatalf("after last Release freed = %v, want [b]", freed)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("extra Release did not panic")
			}
		}()
		r2.Release()
	}()

	// Not held: free runs before RemoveFunc returns.
	if ok, freedNow := m.RemoveFunc(0x1000, free); !ok || !freedNow || len(freed) != 2 || freed[1] != "a" {
		t.Fatalf("RemoveFunc of an unheld entry = %v, %v: freed = %v", ok, freedNow, freed)
	}
	if ok, _ := m.RemoveFunc(0x1000, free); ok || len(freed) != 2 {
		t.Errorf("second RemoveFunc found the entry or freed again: %v", freed)
	}

	// Re-inserting the same range creates a new entry with its own count.
	m.Insert(0x1000, 0x2000, "a2")
	ra, _ := m.Acquire(0x1000)
	if v, ok := m.Remove(0x1000); !ok || v != "a2" {
		t.Fatalf("Remove = %q %v", v, ok)
	}
	if _, err := m.Acquire(0x1000); err != ErrNotFound {
		t.Errorf("Acquire after Remove: %v", err)
	}
	ra.Release() // no free function: nothing runs
	if len(freed) != 2 {
		t.Errorf("Remove's entry ran a free function: %v", freed)
	}
}

func TestRemoveWait(t *testing.T) {
	var m Map[int]
	m.Insert(0x1000, 0x2000, 7)
	r, err := m.Acquire(0x1800)
	if err != nil {
		t.Fatal(err)
	}
	var released atomic.Bool
	go func() {
		time.Sleep(50 * time.Millisecond)
		released.Store(true)
		r.Release()
	}()
	v, ok := m.RemoveWait(0x1000)
	if !ok || v != 7 {
		t.Fatalf("RemoveWait = %d, %v", v, ok)
	}
	if !released.Load() {
		t.Fatal("RemoveWait returned while a Ref was held")
	}
	if _, ok := m.RemoveWait(0x1000); ok {
		t.Error("RemoveWait of a missing range reported true")
	}
	m.Insert(0x1000, 0x2000, 8)
	if v, ok := m.RemoveWait(0x1000); !ok || v != 8 {
		t.Errorf("RemoveWait unheld = %d, %v", v, ok)
	}
}

func TestAcquireAllocatesNothing(t *testing.T) {
	var m Map[*int]
	for i := range 100 {
		x := i
		m.Insert(uintptr(i*0x1000), uintptr(i*0x1000+0x800), &x)
	}
	hit := testing.AllocsPerRun(1000, func() {
		r, err := m.Acquire(0x42100)
		if err != nil || *r.Value() != 0x42 {
			panic(err)
		}
		r.Release()
	})
	miss := testing.AllocsPerRun(1000, func() {
		if _, err := m.Acquire(0x42900); err == nil {
			panic("found")
		}
	})
	if hit != 0 || miss != 0 {
		t.Errorf("Acquire/Release allocates: hit %v, miss %v per call", hit, miss)
	}
}

// readFault reads the first byte of p and reports whether the read faulted
// (the memory is not mapped).
func readFault(p []byte) (faulted bool) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		if recover() != nil {
			faulted = true
		}
	}()
	sinkByte = p[0]
	return false
}

var sinkByte byte

// TestHeldMemoryStaysMapped shows the point of Acquire with real memory: an
// image-like mapping removed with RemoveFunc(munmap) stays readable while a
// Ref is held and is unmapped by the last Release. The fault check proves
// the memory really goes away, so the stress test's reads can fail.
func TestHeldMemoryStaysMapped(t *testing.T) {
	mem, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	mem[0] = 42
	var m Map[[]byte]
	start := uintptr(unsafePointer(mem))
	if err := m.Insert(start, start+4096, mem); err != nil {
		t.Fatal(err)
	}
	r, err := m.Acquire(start + 100)
	if err != nil {
		t.Fatal(err)
	}
	unmapped := false
	m.RemoveFunc(start, func(b []byte) {
		if err := unix.Munmap(b); err != nil {
			t.Error(err)
		}
		unmapped = true
	})
	if unmapped || readFault(r.Value()) || r.Value()[0] != 42 {
		t.Fatalf("memory of a held Ref was unmapped by RemoveFunc")
	}
	r.Release()
	if !unmapped || !readFault(mem) {
		t.Fatalf("last Release did not unmap (unmapped=%v)", unmapped)
	}
	if _, err := m.Acquire(start + 100); !errors.Is(err, ErrNotFound) {
		t.Errorf("Acquire after unload: %v", err)
	}
}
