package addrmap

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchSizes are the entry counts measured, matching the _dl_find_object
// comparison (1, 100, 1,000 loaded objects).
var benchSizes = []int{1, 100, 1000}

const benchPCs = 4096 // power of two

// benchMap returns a map of n ranges [i<<16, i<<16 + 0x8000) (the size of a
// small shared object's text) and benchPCs addresses, each inside a range
// chosen at random, as the C harness picks them.
func benchMap(n int) (*Map[*int], []uintptr) {
	m := new(Map[*int])
	for i := range n {
		x := i
		if err := m.Insert(uintptr(i+1)<<16, uintptr(i+1)<<16+0x8000, &x); err != nil {
			panic(err)
		}
	}
	rng := rand.New(rand.NewPCG(uint64(n), 3))
	pcs := make([]uintptr, benchPCs)
	for i := range pcs {
		pcs[i] = uintptr(rng.IntN(n)+1)<<16 + uintptr(rng.IntN(0x8000))
	}
	return m, pcs
}

func benchLookup(b *testing.B, n int) { benchLookupIn(b, benchMap, n) }

// benchLookupIn measures Lookup on the map and addresses mk makes.
func benchLookupIn(b *testing.B, mk func(int) (*Map[*int], []uintptr), n int) {
	m, pcs := mk(n)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := m.Lookup(pcs[i&(benchPCs-1)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func benchLookupParallel(b *testing.B, n int) {
	m, pcs := benchMap(n)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := m.Lookup(pcs[i&(benchPCs-1)]); err != nil {
				panic(err)
			}
			i++
		}
	})
}

func benchAcquire(b *testing.B, n int) {
	m, pcs := benchMap(n)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r, err := m.Acquire(pcs[i&(benchPCs-1)])
		if err != nil {
			b.Fatal(err)
		}
		r.Release()
		i++
	}
}

func benchAcquireParallel(b *testing.B, n int) {
	m, pcs := benchMap(n)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			r, err := m.Acquire(pcs[i&(benchPCs-1)])
			if err != nil {
				panic(err)
			}
			r.Release()
			i++
		}
	})
}

// benchMapIrregular is benchMap with a process's layout instead of evenly
// spaced ranges: a Go binary's text at 0x400000 and, far above it, n-1
// ranges of random sizes (4 KiB to 4 MiB) with random gaps (0 to 1 MiB),
// as mmapped images of different sizes come out. The bucket index then
// has crowded and empty buckets.
func benchMapIrregular(n int) (*Map[*int], []uintptr) {
	m := new(Map[*int])
	rng := rand.New(rand.NewPCG(uint64(n), 5))
	var rs []Range
	rs = append(rs, Range{0x400000, 0x400000 + 8<<20})
	at := uintptr(mmapBase)
	for len(rs) < n {
		size := uintptr(4096 << rng.IntN(11))
		rs = append(rs, Range{at, at + size})
		at += size + uintptr(rng.IntN(1<<20))&^4095
	}
	for i, r := range rs {
		x := i
		if err := m.Insert(r.Start, r.End, &x); err != nil {
			panic(err)
		}
	}
	pcs := make([]uintptr, benchPCs)
	for i := range pcs {
		r := rs[rng.IntN(len(rs))]
		pcs[i] = r.Start + uintptr(rng.Uint64N(uint64(r.End-r.Start)))
	}
	return m, pcs
}

// BenchmarkLookupIrregular is BenchmarkLookup on benchMapIrregular's
// layout.
func BenchmarkLookupIrregular(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) { benchLookupIn(b, benchMapIrregular, n) })
	}
}

// BenchmarkLookup measures Lookup of random addresses inside 1, 100 and
// 1,000 ranges, on one goroutine and in parallel.
func BenchmarkLookup(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) { benchLookup(b, n) })
		b.Run(fmt.Sprintf("entries=%d/parallel", n), func(b *testing.B) { benchLookupParallel(b, n) })
	}
}

// BenchmarkAcquireRelease measures an Acquire/Release pair on random
// addresses inside 1, 100 and 1,000 ranges, on one goroutine and in
// parallel (with one entry, every goroutine contends on its count).
func BenchmarkAcquireRelease(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) { benchAcquire(b, n) })
		b.Run(fmt.Sprintf("entries=%d/parallel", n), func(b *testing.B) { benchAcquireParallel(b, n) })
	}
}

// BenchmarkLookupMiss measures a miss between ranges of a 1,000-range map.
func BenchmarkLookupMiss(b *testing.B) {
	m, _ := benchMap(1000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Lookup(500<<16 + 0x9000); err != ErrNotFound {
			b.Fatal(err)
		}
	}
}

// BenchmarkLookupDelta measures Lookup of random addresses inside the
// ranges of a full delta: a map of 17 ranges, the first in the base and
// the 16 inserted after it in the delta, searched after the base misses.
func BenchmarkLookupDelta(b *testing.B) { benchLookupIn(b, benchMapDelta, deltaMax+1) }

// benchMapDelta is benchMap(n) with addresses only in the ranges of its
// delta; it panics when the delta does not hold n-1 ranges.
func benchMapDelta(n int) (*Map[*int], []uintptr) {
	m, _ := benchMap(n)
	v := m.cur.Load()
	nd := int(v.nd.Load())
	if nd != n-1 {
		panic(fmt.Sprintf("view of %d base ranges and %d in the delta, want %d in the delta", len(v.ents), nd, n-1))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pcs := make([]uintptr, benchPCs)
	for i := range pcs {
		e := &v.delta[rng.IntN(nd)]
		pcs[i] = e.start + uintptr(rng.Uint64N(uint64(e.end-e.start)))
	}
	return m, pcs
}
