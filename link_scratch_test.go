package elfimage

import (
	"bytes"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"
)

// TestScratchAging checks that a kept buffer survives the collection
// that begins after its put and is dropped at the second, that the most
// recent is taken first, and that no more than scratchKeep are kept.
func TestScratchAging(t *testing.T) {
	var s scratch[*[]byte]
	a, b := new([]byte), new([]byte)
	s.put(a)
	s.put(b)
	if v, ok := s.get(); !ok || v != b {
		t.Fatalf("get after two puts: %p, %v; want the last put, %p", v, ok, b)
	}
	c := gcCycles()
	s.put(b)
	s.collected(c + 1)
	if v, ok := s.get(); !ok || v != b {
		t.Fatalf("get after one collection: %p, %v; want %p", v, ok, b)
	}
	if v, ok := s.get(); !ok || v != a {
		t.Fatalf("second get after one collection: %p, %v; want %p", v, ok, a)
	}
	s.put(b)
	s.collected(c + 2)
	if v, ok := s.get(); ok {
		t.Fatalf("get after two collections: %p; want nothing", v)
	}
	for range scratchKeep + 2 {
		s.put(new([]byte))
	}
	n := 0
	for {
		if _, ok := s.get(); !ok {
			break
		}
		n++
	}
	if n != scratchKeep {
		t.Errorf("%d buffers kept, want %d", n, scratchKeep)
	}
}

// TestScratchDroppedByGC checks that the package's scratches are aged by
// real collections: a buffer kept in rowsScratch is gone after a few.
func TestScratchDroppedByGC(t *testing.T) {
	for {
		if _, ok := rowsScratch.get(); !ok {
			break
		}
	}
	rowsScratch.put(nil)
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		time.Sleep(time.Millisecond) // the cleanup runs on its own goroutine
		rowsScratch.mu.Lock()
		n := len(rowsScratch.kept)
		rowsScratch.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rowsScratch still keeps %d buffers after 10 s of collections", n)
		}
	}
}

// TestLinkReusesScratch links modules of different sizes one after
// another, with collections between some, and concurrently, and compares
// every output with the one of a link that found no kept buffer.
func TestLinkReusesScratch(t *testing.T) {
	sizes := []int{600, 3000, 40, 1200, 3000}
	want := make([][]byte, len(sizes))
	for i, n := range sizes {
		for _, s := range scratches {
			s.collected(^uint64(0)) // nothing kept: as the first link of a process
		}
		b, err := Link(parallelModule(n), LinkOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want[i] = b
	}
	for round := range 3 {
		for i, n := range sizes {
			if round == 1 && i%2 == 0 {
				runtime.GC()
			}
			b, err := Link(parallelModule(n), LinkOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, want[i]) {
				t.Fatalf("round %d: %d procedures: output differs from a fresh link's", round, n)
			}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan string, 4*len(sizes))
	for range 4 {
		wg.Go(func() {
			for i, n := range sizes {
				b, err := Link(parallelModule(n), LinkOptions{})
				if err != nil {
					errs <- err.Error()
					return
				}
				if !bytes.Equal(b, want[i]) {
					errs <- "concurrent link: output differs"
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestGCCycles checks that gcCycles reads the runtime's count of
// collections (not the fallback): it grows by at least one per
// runtime.GC.
func TestGCCycles(t *testing.T) {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		t.Fatalf("metric %s not reported (kind %v)", s[0].Name, s[0].Value.Kind())
	}
	c0 := gcCycles()
	runtime.GC()
	runtime.GC()
	if c1 := gcCycles(); c1 < c0+2 {
		t.Errorf("gcCycles %d before two runtime.GC, %d after", c0, c1)
	}
}
