package addrmap

import (
	"errors"
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

func TestInsertLookupRemove(t *testing.T) {
	var m Map[string]
	if _, err := m.Lookup(0x1000); !errors.Is(err, ErrNotFound) {
		t.Fatalf("empty map lookup: err = %v, want ErrNotFound", err)
	}
	for _, r := range []struct {
		s, e uintptr
		v    string
	}{{0x3000, 0x4000, "c"}, {0x1000, 0x2000, "a"}, {0x2000, 0x2800, "b"}, {0x5000, 0x5001, "d"}} {
		if err := m.Insert(r.s, r.e, r.v); err != nil {
			t.Fatalf("Insert(%#x, %#x): %v", r.s, r.e, err)
		}
	}
	if m.Len() != 4 {
		t.Fatalf("Len = %d, want 4", m.Len())
	}
	cases := []struct {
		pc   uintptr
		want string // "" = not found
	}{
		{0, ""}, {0xfff, ""}, {0x1000, "a"}, {0x1fff, "a"}, {0x2000, "b"}, {0x27ff, "b"},
		{0x2800, ""}, {0x2fff, ""}, {0x3000, "c"}, {0x3fff, "c"}, {0x4000, ""},
		{0x5000, "d"}, {0x5001, ""}, {^uintptr(0), ""},
	}
	for _, c := range cases {
		v, err := m.Lookup(c.pc)
		if c.want == "" {
			if !errors.Is(err, ErrNotFound) || v != "" {
				t.Errorf("Lookup(%#x) = %q, %v; want ErrNotFound", c.pc, v, err)
			}
			continue
		}
		if err != nil || v != c.want {
			t.Errorf("Lookup(%#x) = %q, %v; want %q", c.pc, v, err, c.want)
		}
	}
	r, v, err := m.LookupRange(0x2100)
	if err != nil || v != "b" || r != (Range{0x2000, 0x2800}) {
		t.Errorf("LookupRange(0x2100) = %v %q %v", r, v, err)
	}

	// Overlaps and empty ranges are rejected and leave the map unchanged.
	for _, r := range []struct {
		s, e uintptr
		want error
	}{
		{0x0fff, 0x1001, ErrOverlap}, {0x1fff, 0x2001, ErrOverlap}, {0x0, 0x10000, ErrOverlap},
		{0x2400, 0x2500, ErrOverlap}, {0x27ff, 0x3001, ErrOverlap}, {0x3fff, 0x4001, ErrOverlap},
		{0x6000, 0x6000, ErrEmptyRange}, {0x7000, 0x6000, ErrEmptyRange},
	} {
		if err := m.Insert(r.s, r.e, "x"); !errors.Is(err, r.want) {
			t.Errorf("Insert(%#x, %#x) err = %v, want %v", r.s, r.e, err, r.want)
		}
	}
	if m.Len() != 4 {
		t.Fatalf("Len after rejected inserts = %d, want 4", m.Len())
	}
	// Adjacent ranges are fine.
	if err := m.Insert(0x2800, 0x3000, "gap"); err != nil {
		t.Fatalf("Insert into exact gap: %v", err)
	}

	var got []Range
	for r := range m.All() {
		got = append(got, r)
	}
	want := []Range{{0x1000, 0x2000}, {0x2000, 0x2800}, {0x2800, 0x3000}, {0x3000, 0x4000}, {0x5000, 0x5001}}
	if len(got) != len(want) {
		t.Fatalf("All = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("All = %v, want %v", got, want)
		}
	}

	if _, ok := m.Remove(0x1001); ok {
		t.Error("Remove of a non-start address succeeded")
	}
	if v, ok := m.Remove(0x2000); !ok || v != "b" {
		t.Errorf("Remove(0x2000) = %q, %v", v, ok)
	}
	if _, err := m.Lookup(0x2100); !errors.Is(err, ErrNotFound) {
		t.Errorf("Lookup after Remove: %v", err)
	}
	if _, ok := m.Remove(0x2000); ok {
		t.Error("second Remove succeeded")
	}
	for _, s := range []uintptr{0x1000, 0x2800, 0x3000, 0x5000} {
		if _, ok := m.Remove(s); !ok {
			t.Errorf("Remove(%#x) failed", s)
		}
	}
	if m.Len() != 0 {
		t.Errorf("Len after removing all = %d", m.Len())
	}
}

// TestAgainstModel checks random inserts/removes/lookups against a naive
// linear model.
func TestAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var m Map[int]
	model := map[uintptr]Range{} // start -> range
	vals := map[uintptr]int{}
	for i := range 5000 {
		switch rng.IntN(3) {
		case 0:
			s := uintptr(rng.IntN(1000))
			e := s + uintptr(rng.IntN(30))
			overlap := s >= e
			for _, r := range model {
				if s < r.End && r.Start < e {
					overlap = true
				}
			}
			err := m.Insert(s, e, i)
			if (err == nil) == overlap {
				t.Fatalf("Insert(%d, %d) err = %v, model overlap = %v", s, e, err, overlap)
			}
			if err == nil {
				model[s] = Range{s, e}
				vals[s] = i
			}
		case 1:
			s := uintptr(rng.IntN(1000))
			v, ok := m.Remove(s)
			_, mok := model[s]
			if ok != mok || (ok && v != vals[s]) {
				t.Fatalf("Remove(%d) = %d, %v; model %v", s, v, ok, mok)
			}
			delete(model, s)
		case 2:
			pc := uintptr(rng.IntN(1100))
			v, err := m.Lookup(pc)
			want, found := -1, false
			for s, r := range model {
				if r.Contains(pc) {
					want, found = vals[s], true
				}
			}
			if found != (err == nil) || (found && v != want) {
				t.Fatalf("Lookup(%d) = %d, %v; model %d, %v", pc, v, err, want, found)
			}
			ref, err := m.Acquire(pc)
			if found != (err == nil) || (found && (ref.Value() != want || !ref.Range().Contains(pc))) {
				t.Fatalf("Acquire(%d) = %v, %v; model %d, %v", pc, ref, err, want, found)
			}
			if err == nil {
				ref.Release()
			} else if ref != nil || err != ErrNotFound {
				t.Fatalf("Acquire(%d) miss = %v, %v; want nil, ErrNotFound itself", pc, ref, err)
			}
		}
		if m.Len() != len(model) {
			t.Fatalf("Len = %d, model %d", m.Len(), len(model))
		}
	}
}

func TestLookupAllocatesNothing(t *testing.T) {
	var m Map[*int]
	for i := range 100 {
		x := i
		if err := m.Insert(uintptr(i*0x1000), uintptr(i*0x1000+0x800), &x); err != nil {
			t.Fatal(err)
		}
	}
	hit := testing.AllocsPerRun(1000, func() {
		if _, err := m.Lookup(0x42100); err != nil {
			panic(err)
		}
	})
	miss := testing.AllocsPerRun(1000, func() {
		if _, err := m.Lookup(0x42900); err == nil {
			panic("found")
		}
	})
	if hit != 0 || miss != 0 {
		t.Errorf("Lookup allocates: hit %v, miss %v per call", hit, miss)
	}
}

// TestConcurrent runs lock-free readers against writers; run it with -race.
// Each writer owns a disjoint address band, so a reader that finds a value
// can check that the value belongs to the range it looked up.
func TestConcurrent(t *testing.T) {
	var m Map[uintptr] // value = start of its range
	const writers, readers, rounds = 4, 8, 2000
	var stop atomic.Bool
	var wg, rg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			base := uintptr(w+1) << 20
			for i := range rounds {
				s := base + uintptr(i%16)*0x1000
				if err := m.Insert(s, s+0x1000, s); err != nil {
					t.Errorf("Insert: %v", err)
					return
				}
				if i%2 == 1 {
					if v, ok := m.Remove(s); !ok || v != s {
						t.Errorf("Remove(%#x) = %#x, %v", s, v, ok)
						return
					}
				} else if i%16 == 14 {
					for j := range uintptr(16) {
						m.Remove(base + j*0x1000)
					}
				}
			}
		})
	}
	for r := range readers {
		rg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			for !stop.Load() {
				pc := uintptr(rng.IntN(writers)+1)<<20 + uintptr(rng.IntN(16*0x1000))
				v, err := m.Lookup(pc)
				if err == nil && (pc < v || pc >= v+0x1000) {
					t.Errorf("Lookup(%#x) = %#x: wrong range", pc, v)
					return
				}
				n := 0
				var prev Range
				for rr := range m.All() {
					if n > 0 && rr.Start < prev.End {
						t.Errorf("All not sorted/disjoint: %v then %v", prev, rr)
						return
					}
					prev = rr
					n++
				}
			}
		})
	}
	wg.Wait()
	stop.Store(true)
	rg.Wait()
}

func BenchmarkInsertRemove(b *testing.B) {
	var m Map[int]
	for i := range 1000 {
		m.Insert(uintptr(i)*0x10000, uintptr(i)*0x10000+0x8000, i)
	}
	b.ReportAllocs()
	for b.Loop() {
		m.Insert(0x8000, 0x9000, 1)
		m.Remove(0x8000)
	}
}

// mmapBase is about where Linux puts mmapped objects: near the top of the
// 47-bit user address space, or of a 32-bit one.
var mmapBase = map[int]uint64{64: 0x7f0000000000, 32: 0xb0000000}[bits.UintSize]

// TestLookupLayouts checks Lookup against a linear search on layouts that
// stress the bucket index: ranges spread evenly, crowded into one bucket
// next to a range far away (a Go binary's text and a cluster of mmapped
// images), at both ends of the address space, of size 1, and abutting;
// probing every range's edges, the gaps and random addresses.
func TestLookupLayouts(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	top := ^uintptr(0)
	layouts := map[string][]Range{
		"one":        {{0x1000, 0x2000}},
		"one at top": {{top - 0x10, top}},
		"one at 0":   {{0, 0x1000}},
		"bytes at 0": {{0, 1}, {1, 2}, {2, 3}},
		"even":       nil,
		"crowded":    {{0x400000, 0x800000}},
		"ends":       {{0, 1}, {1, 2}, {top - 1, top}},
		"random":     nil,
	}
	for i := range 200 {
		layouts["even"] = append(layouts["even"], Range{uintptr(i+1) << 16, uintptr(i+1)<<16 + 0x8000})
	}
	for i := range 500 {
		s := uintptr(mmapBase) + uintptr(i)*0x3000
		layouts["crowded"] = append(layouts["crowded"], Range{s, s + 0x2000 + uintptr(i%2)*0x1000})
	}
	for i := range 300 {
		layouts["ends"] = append(layouts["ends"], Range{top/2 + uintptr(i)*7, top/2 + uintptr(i)*7 + 1})
	}
	for len(layouts["random"]) < 400 {
		s := uintptr(rng.Uint64())
		e := s + uintptr(rng.IntN(1<<20)) + 1
		if e < s {
			continue
		}
		ok := true
		for _, r := range layouts["random"] {
			if s < r.End && r.Start < e {
				ok = false
			}
		}
		if ok {
			layouts["random"] = append(layouts["random"], Range{s, e})
		}
	}
	for name, rs := range layouts {
		var m Map[int]
		for i, r := range rs {
			if err := m.Insert(r.Start, r.End, i); err != nil {
				t.Fatalf("%s: Insert(%#x, %#x): %v", name, r.Start, r.End, err)
			}
		}
		var pcs []uintptr
		for _, r := range rs {
			pcs = append(pcs, r.Start-1, r.Start, r.Start+(r.End-r.Start)/2, r.End-1, r.End)
		}
		for range 2000 {
			pcs = append(pcs, uintptr(rng.Uint64()))
		}
		pcs = append(pcs, 0, top)
		for _, pc := range pcs {
			want := -1
			for i, r := range rs {
				if r.Contains(pc) {
					want = i
				}
			}
			got, err := m.Lookup(pc)
			if (want >= 0) != (err == nil) || (want >= 0 && got != want) {
				t.Fatalf("%s: Lookup(%#x) = %d, %v; want range %d", name, pc, got, err, want)
			}
		}
	}
}

// TestWriteAllocations: with 1,000 ranges registered, an Insert and a
// Remove allocate the entry's Ref and, amortised, less than one more (the
// view is rebuilt once every deltaCap(1000) = 15 inserts), not a copy of
// the map.
func TestWriteAllocations(t *testing.T) {
	var m Map[int]
	for i := range 1000 {
		if err := m.Insert(uintptr(i+1)<<16, uintptr(i+1)<<16+0x8000, i); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(400, func() {
		if err := m.Insert(0x8000, 0x9000, 1); err != nil {
			t.Fatal(err)
		}
		if _, ok := m.Remove(0x8000); !ok {
			t.Fatal("Remove missed")
		}
	})
	if allocs > 1 {
		t.Errorf("Insert+Remove with 1,000 ranges: %.1f allocations, want at most 1", allocs)
	}
}

// TestDeltaSearch checks the delta's sorted search where removed ranges
// and ranges inserted after them overlap: a range inserted again at the
// same start, one starting below a removed range and reaching into it, one
// starting inside it; probing every edge against a linear search of the
// live ranges, with Lookup, LookupRange and Acquire.
func TestDeltaSearch(t *testing.T) {
	var m Map[int]
	live := map[int]Range{}
	insert := func(id int, start, end uintptr) {
		t.Helper()
		if err := m.Insert(start, end, id); err != nil {
			t.Fatal(err)
		}
		live[id] = Range{start, end}
	}
	remove := func(id int) {
		t.Helper()
		if _, ok := m.Remove(live[id].Start); !ok {
			t.Fatalf("Remove(%d) missed", id)
		}
		delete(live, id)
	}
	insert(0, 0x1000, 0x2000) // the base: the first insert builds the view
	insert(1, 0x10000, 0x20000)
	insert(2, 0x5000, 0x6000)
	insert(3, 0x30000, 0x31000)
	remove(1)
	insert(4, 0x8000, 0x14000)  // below the removed range, into it
	insert(5, 0x14000, 0x18000) // inside it
	remove(2)
	insert(6, 0x5000, 0x5800) // the removed range's start again
	if v := m.cur.Load(); len(v.ents) != 1 || v.nd.Load() != 6 {
		t.Fatalf("view holds %d base ranges and %d in the delta; the test wants 1 and 6", len(v.ents), v.nd.Load())
	}
	var probes []uintptr
	for _, r := range []Range{{0x1000, 0x2000}, {0x10000, 0x20000}, {0x5000, 0x6000}, {0x30000, 0x31000}, {0x8000, 0x14000}, {0x14000, 0x18000}, {0x5000, 0x5800}} {
		probes = append(probes, r.Start-1, r.Start, r.Start+1, (r.Start+r.End)/2, r.End-1, r.End, r.End+1)
	}
	probes = append(probes, 0, 0x12000, 0x19000, ^uintptr(0))
	for _, pc := range probes {
		want := -1
		for id, r := range live {
			if r.Contains(pc) {
				want = id
			}
		}
		got, err := m.Lookup(pc)
		if (want >= 0) != (err == nil) || (want >= 0 && got != want) {
			t.Errorf("Lookup(%#x) = %d, %v; want range %d", pc, got, err, want)
		}
		r, gotR, err := m.LookupRange(pc)
		if (want >= 0) != (err == nil) || (want >= 0 && (gotR != want || r != live[want])) {
			t.Errorf("LookupRange(%#x) = %v %d, %v; want range %d", pc, r, gotR, err, want)
		}
		if ref, err := m.Acquire(pc); (want >= 0) != (err == nil) {
			t.Errorf("Acquire(%#x): %v; want range %d", pc, err, want)
		} else if err == nil {
			if ref.Value() != want {
				t.Errorf("Acquire(%#x) = %d; want %d", pc, ref.Value(), want)
			}
			ref.Release()
		}
	}
}

// TestDeltaShare: a map filled by inserts keeps at most one range per 64
// in its delta from 64 ranges on (the lookups of a bench of 100 objects
// stay off it), and at most 16 below.
func TestDeltaShare(t *testing.T) {
	var m Map[int]
	for i := range 2000 {
		if err := m.Insert(uintptr(i+1)<<16, uintptr(i+1)<<16+0x8000, i); err != nil {
			t.Fatal(err)
		}
		n, nd := i+1, int(m.cur.Load().nd.Load())
		if want := min(n/deltaShare, deltaMax); n >= deltaShare && nd > want || nd > deltaMax {
			t.Fatalf("%d ranges: %d in the delta, want at most %d", n, nd, want)
		}
	}
}

// TestTombstonesBounded: removed ranges stay in the view as tombstones
// (holding their values) only until they outnumber deltaMax plus the live
// ranges; then the view is rebuilt without them.
func TestTombstonesBounded(t *testing.T) {
	var m Map[int]
	for round := range 3 {
		for i := range 100 {
			if err := m.Insert(uintptr(i+1)<<12, uintptr(i+1)<<12+0x800, i); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 100 {
			if _, ok := m.Remove(uintptr(i+1) << 12); !ok {
				t.Fatalf("round %d: Remove(%d) missed", round, i)
			}
			held := 0
			if v := m.cur.Load(); v != nil {
				held = len(v.ents) + int(v.nd.Load())
			}
			if live := 100 - (i + 1); held > 2*live+2*deltaMax+1 {
				t.Fatalf("round %d: %d live ranges, the view holds %d entries", round, live, held)
			}
			if _, err := m.Lookup(uintptr(i+1)<<12 + 1); !errors.Is(err, ErrNotFound) {
				t.Fatalf("round %d: Lookup of a removed range: %v", round, err)
			}
		}
		if m.Len() != 0 {
			t.Fatalf("Len = %d after removing all", m.Len())
		}
	}
}

// TestSmallView checks the small base (one or two ranges held in the
// view's header) at its edges: ranges at the bottom and top of the address
// space, pcs just outside them and at ^0, a second range in the delta
// beside a small base, two ranges in the header (left by a build that
// removals trigger), removal of either (its tombstone must be missed by
// the header check), and a larger base.
func TestSmallView(t *testing.T) {
	const top = ^uintptr(0)
	var m Map[int]
	check := func(pc uintptr, want int) {
		t.Helper()
		v, err := m.Lookup(pc)
		if want < 0 {
			if err != ErrNotFound {
				t.Fatalf("Lookup(%#x) = %d, %v; want ErrNotFound", pc, v, err)
			}
			return
		}
		if err != nil || v != want {
			t.Fatalf("Lookup(%#x) = %d, %v; want %d", pc, v, err, want)
		}
		if _, v2, err := m.LookupRange(pc); err != nil || v2 != want {
			t.Fatalf("LookupRange(%#x) = %d, %v; want %d", pc, v2, err, want)
		}
		r, err := m.Acquire(pc)
		if err != nil || r.Value() != want {
			t.Fatalf("Acquire(%#x): %v", pc, err)
		}
		r.Release()
	}
	insert := func(start, end uintptr, v int) {
		t.Helper()
		if err := m.Insert(start, end, v); err != nil {
			t.Fatal(err)
		}
	}
	check(0, -1)
	check(top, -1)
	insert(0, 0x1000, 1)
	if v := m.cur.Load(); len(v.ents) != 1 || &v.ents[0] != &v.small[0] {
		t.Fatalf("one range: not held in the view's header")
	}
	check(0, 1)
	check(0xfff, 1)
	check(0x1000, -1)
	check(top, -1)
	insert(top-0x1000, top, 2) // into the delta
	check(0xfff, 1)
	check(top-0x1001, -1)
	check(top-0x1000, 2)
	check(top-1, 2)
	check(top, -1)
	// deltaMax+3 more, then remove all but the first two: the removal
	// that leaves more tombstones than deltaMax plus the live ranges is
	// the last, and builds a base of two.
	for i := range uintptr(deltaMax + 3) {
		insert(0x10000*(i+1), 0x10000*(i+1)+0x100, int(i)+10)
	}
	for i := range uintptr(deltaMax + 3) {
		check(0x10000*(i+1)+0xff, int(i)+10)
		check(0x10000*(i+1)+0x100, -1)
		if _, ok := m.Remove(0x10000 * (i + 1)); !ok {
			t.Fatalf("Remove %d failed", i)
		}
	}
	if v := m.cur.Load(); len(v.ents) != 2 || &v.ents[1] != &v.small[1] {
		t.Fatalf("two ranges after the build: not held in the view's header (%d in the base)", len(v.ents))
	}
	check(0xfff, 1)
	check(0x10000, -1)
	check(top-0x1000, 2)
	check(top, -1)
	if _, ok := m.Remove(top - 0x1000); !ok {
		t.Fatal("Remove of the second range failed")
	}
	check(top-0x1000, -1)
	check(0, 1)
	if _, ok := m.Remove(0); !ok {
		t.Fatal("Remove of the first range failed")
	}
	check(0, -1)
	check(top, -1)
}

// TestInsertRefRace: of two InsertRef calls of one Ref racing on a map
// (disjoint ranges, so neither fails for overlap), exactly one registers
// it and the other panics; the map holds the one range (and -race sees
// no race on the Ref).
func TestInsertRefRace(t *testing.T) {
	type obj struct{ ref Ref[*obj] }
	for round := range 500 {
		var m Map[*obj]
		o := &obj{}
		var wg sync.WaitGroup
		var panics, inserted atomic.Int32
		start := make(chan struct{})
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() {
					if recover() != nil {
						panics.Add(1)
					}
				}()
				<-start
				lo := uintptr(0x1000 + g*0x1000)
				if err := m.InsertRef(lo, lo+0x1000, o, &o.ref); err != nil {
					t.Errorf("round %d: InsertRef: %v", round, err)
					return
				}
				inserted.Add(1)
			}()
		}
		close(start)
		wg.Wait()
		if panics.Load() != 1 || inserted.Load() != 1 || m.Len() != 1 {
			t.Fatalf("round %d: %d panics, %d inserts, Len %d; want 1, 1, 1", round, panics.Load(), inserted.Load(), m.Len())
		}
	}
}

// TestInsertRef: a range registered with a Ref of the caller's is found
// as one of Insert's, Acquire returns that Ref, the free function runs
// once through it, an insert that fails leaves the Ref usable, one already
// used panics, and a value holding its own Ref is registered without an
// allocation of the insert's own (past the view's rebuild).
func TestInsertRef(t *testing.T) {
	type obj struct {
		name string
		ref  Ref[*obj]
	}
	var m Map[*obj]
	a := &obj{name: "a"}
	if err := m.InsertRef(0x1000, 0x2000, a, &a.ref); err != nil {
		t.Fatal(err)
	}
	if v, err := m.Lookup(0x1800); err != nil || v != a {
		t.Fatalf("Lookup(0x1800) = %v, %v; want a", v, err)
	}
	r, err := m.Acquire(0x1fff)
	if err != nil || r != &a.ref || r.Value() != a || r.Range() != (Range{0x1000, 0x2000}) {
		t.Fatalf("Acquire(0x1fff) = %p (%v), %v; want a's own Ref %p for [0x1000, 0x2000)", r, r.Range(), err, &a.ref)
	}

	// A failed insert (overlap, empty range) leaves the Ref fresh.
	b := &obj{name: "b"}
	if err := m.InsertRef(0x1800, 0x2800, b, &b.ref); !errors.Is(err, ErrOverlap) {
		t.Fatalf("InsertRef over a: err = %v, want ErrOverlap", err)
	}
	if err := m.InsertRef(0x3000, 0x3000, b, &b.ref); !errors.Is(err, ErrEmptyRange) {
		t.Fatalf("InsertRef of an empty range: err = %v, want ErrEmptyRange", err)
	}
	if err := m.InsertRef(0x2000, 0x2800, b, &b.ref); err != nil {
		t.Fatalf("InsertRef after the failures: %v", err)
	}

	// Removal with a reader holding a's Ref: free runs at its Release.
	freed := 0
	if removed, done := m.RemoveFunc(0x1000, func(o *obj) { freed++ }); !removed || done {
		t.Fatalf("RemoveFunc(a) = %v, %v; want removed, not yet freed", removed, done)
	}
	if _, err := m.Lookup(0x1800); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Lookup after removal: %v, want ErrNotFound", err)
	}
	r.Release()
	if freed != 1 {
		t.Fatalf("free ran %d times at the last Release, want 1", freed)
	}

	// A Ref registered once may not be registered again, even removed.
	func() {
		defer func() {
			if recover() == nil {
				t.Error("InsertRef of a used Ref did not panic")
			}
		}()
		m.InsertRef(0x5000, 0x6000, a, &a.ref)
	}()
	if m.Len() != 1 {
		t.Fatalf("Len = %d, want 1 (b)", m.Len())
	}

	// No allocation per insert + remove but the rebuild's, amortised
	// (once per deltaMax inserts; AllocsPerRun rounds down).
	objs := make([]*obj, 200*deltaMax)
	for i := range objs {
		objs[i] = &obj{}
	}
	i := 0
	allocs := testing.AllocsPerRun(100*deltaMax, func() {
		o := objs[i]
		i++
		if err := m.InsertRef(0x10000, 0x20000, o, &o.ref); err != nil {
			t.Fatal(err)
		}
		m.RemoveFunc(0x10000, nil)
	})
	if allocs != 0 {
		t.Errorf("InsertRef + RemoveFunc allocate %.2f times per call, want 0 (amortised)", allocs)
	}
}
