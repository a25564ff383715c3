package addrmap

import (
	"encoding/binary"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// region is a stress-test value: an anonymous mapping whose every page
// starts with the region's id.
type region struct {
	mem   []byte
	id    uint64
	freed atomic.Bool
}

const stressPage = 4096

// TestStressUnload runs readers that look up random addresses while writers
// map, register, unregister and unmap ranges, for about 2 s (0.3 s with
// -short); run it with -race. Writers unregister with RemoveFunc whose free
// function unmaps. A reader that acquires a range checks that it contains
// the pc and reads every page of it, checking the id written there: a
// lookup that returned an unmapped range would fault (turned into a test
// failure by debug.SetPanicOnFault) or, if the kernel had reused the
// address for another region, read the wrong id.
func TestStressUnload(t *testing.T) {
	dur := 2 * time.Second
	if testing.Short() {
		dur = 300 * time.Millisecond
	}
	const writers, readers, perWriter = 2, 4, 24
	var (
		m        Map[*region]
		hints    [256]atomic.Uintptr // recently registered starts, for readers to aim at
		nextID   atomic.Uint64
		live     atomic.Int64 // mappings not yet unmapped
		frees    atomic.Int64
		maps     atomic.Int64
		hits     atomic.Int64
		heldFree atomic.Int64 // frees run by a reader's Release rather than the remover
		stop     atomic.Bool
		wg       sync.WaitGroup
	)
	free := func(r *region) {
		if !r.freed.CompareAndSwap(false, true) {
			t.Errorf("region %d freed twice", r.id)
			return
		}
		if err := unix.Munmap(r.mem); err != nil {
			t.Errorf("munmap: %v", err)
		}
		live.Add(-1)
		frees.Add(1)
	}
	newRegion := func(rng *rand.Rand) (*region, error) {
		n := 1 + rng.IntN(4)
		mem, err := unix.Mmap(-1, 0, n*stressPage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
		if err != nil {
			return nil, err
		}
		live.Add(1)
		maps.Add(1)
		r := &region{mem: mem, id: nextID.Add(1)}
		for p := 0; p < len(mem); p += stressPage {
			binary.LittleEndian.PutUint64(mem[p:], r.id)
		}
		if err := unix.Mprotect(mem, unix.PROT_READ); err != nil {
			return nil, err
		}
		return r, nil
	}

	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			var mine []*region
			removeOne := func(i int) {
				r := mine[i]
				mine[i] = mine[len(mine)-1]
				mine = mine[:len(mine)-1]
				if ok, _ := m.RemoveFunc(uintptr(unsafePointer(r.mem)), free); !ok {
					t.Errorf("RemoveFunc of region %d: not registered", r.id)
				}
			}
			for !stop.Load() {
				if len(mine) < perWriter && (len(mine) == 0 || rng.IntN(2) == 0) {
					r, err := newRegion(rng)
					if err != nil {
						t.Errorf("mmap: %v", err)
						return
					}
					start := uintptr(unsafePointer(r.mem))
					if err := m.Insert(start, start+uintptr(len(r.mem)), r); err != nil {
						t.Errorf("Insert of a fresh mapping: %v", err)
						return
					}
					mine = append(mine, r)
					hints[rng.IntN(len(hints))].Store(start)
				} else {
					removeOne(rng.IntN(len(mine)))
				}
			}
			for len(mine) > 0 {
				removeOne(0)
			}
		})
	}

	var rwg sync.WaitGroup
	readerStop := make(chan struct{})
	for r := range readers {
		rwg.Go(func() {
			debug.SetPanicOnFault(true)
			var pc uintptr
			defer func() {
				if e := recover(); e != nil {
					t.Errorf("reader faulted at pc %#x: %v", pc, e)
				}
			}()
			rng := rand.New(rand.NewPCG(uint64(r), 2))
			for {
				select {
				case <-readerStop:
					return
				default:
				}
				for range 64 {
					// Aim at a recent start, plus up to 6 pages: hits, stale
					// hits on removed ranges, and misses.
					pc = hints[rng.IntN(len(hints))].Load() + uintptr(rng.IntN(6*stressPage))
					if rng.IntN(4) == 0 {
						// Lookup checks only the range; it must not touch memory.
						if rr, v, err := m.LookupRange(pc); err == nil && (!rr.Contains(pc) || rr.Start != uintptr(unsafePointer(v.mem))) {
							t.Errorf("LookupRange(%#x) = %v, region at %p", pc, rr, v.mem)
							return
						}
						continue
					}
					ref, err := m.Acquire(pc)
					if err != nil {
						if err != ErrNotFound {
							t.Errorf("Acquire(%#x): %v", pc, err)
							return
						}
						continue
					}
					v, rr := ref.Value(), ref.Range()
					if !rr.Contains(pc) || rr.Start != uintptr(unsafePointer(v.mem)) || rr.End-rr.Start != uintptr(len(v.mem)) {
						t.Errorf("Acquire(%#x) = %v, region at %p len %d", pc, rr, v.mem, len(v.mem))
						return
					}
					if v.freed.Load() {
						t.Errorf("Acquire(%#x) returned region %d already freed", pc, v.id)
						return
					}
					for p := 0; p < len(v.mem); p += stressPage {
						if got := binary.LittleEndian.Uint64(v.mem[p:]); got != v.id {
							t.Errorf("Acquire(%#x): page %d of region %d holds id %d: unmapped and reused", pc, p/stressPage, v.id, got)
							return
						}
					}
					hits.Add(1)
					if rng.IntN(8) == 0 {
						time.Sleep(time.Microsecond) // hold across a removal now and then
					}
					before := frees.Load()
					ref.Release()
					if frees.Load() != before {
						heldFree.Add(1)
					}
				}
			}
		})
	}

	time.Sleep(dur)
	stop.Store(true)
	wg.Wait()
	close(readerStop)
	rwg.Wait()
	if m.Len() != 0 {
		t.Errorf("Len after all writers removed their ranges = %d", m.Len())
	}
	if n := live.Load(); n != 0 {
		t.Errorf("%d mappings never unmapped (free did not run for every removed range)", n)
	}
	t.Logf("%d mappings made and unmapped, %d acquires that read memory, ~%d frees run by a reader's Release",
		maps.Load(), hits.Load(), heldFree.Load())
	if hits.Load() < 1000 || maps.Load() < 100 {
		t.Errorf("stress did too little: %d hits, %d mappings", hits.Load(), maps.Load())
	}
}
