package symbolize

import (
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// TestBucketIndex: last equals a bisection of all the keys, for keys
// spread evenly, clustered, repeated, near 0 and near 2^64, few and many,
// at every key, its neighbours and random addresses; on unsorted keys it
// stays in range.
func TestBucketIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	top := ^uint64(0)
	gen := map[string]func(n int) []uint64{
		"even": func(n int) []uint64 {
			k := make([]uint64, n)
			for i := range k {
				k[i] = 0x401000 + uint64(i)*48
			}
			return k
		},
		"random": func(n int) []uint64 {
			k := make([]uint64, n)
			for i := range k {
				k[i] = rng.Uint64()
			}
			slices.Sort(k)
			return k
		},
		"clustered": func(n int) []uint64 {
			k := make([]uint64, n)
			for i := range k {
				k[i] = uint64(i%3)<<40 + uint64(rng.IntN(1<<12))
			}
			slices.Sort(k)
			return k
		},
		"repeated": func(n int) []uint64 {
			k := make([]uint64, n)
			for i := range k {
				k[i] = 0x1000 + uint64(i/7)*16
			}
			return k
		},
		"at 0": func(n int) []uint64 {
			k := make([]uint64, n)
			for i := range k {
				k[i] = uint64(i)
			}
			return k
		},
		"at top": func(n int) []uint64 {
			k := make([]uint64, n)
			for i := range k {
				k[i] = top - uint64(n-1-i)
			}
			return k
		},
		"wide": func(n int) []uint64 {
			k := make([]uint64, n)
			for i := range k {
				k[i] = uint64(i) * (top / uint64(n))
			}
			return k
		},
	}
	for name, g := range gen {
		for _, n := range []int{1, 2, minBucketKeys - 1, minBucketKeys, 100, 5000} {
			keys := g(n)
			x := newBucketIndex(keys)
			probes := []uint64{0, 1, top, top - 1}
			for _, k := range keys {
				probes = append(probes, k-1, k, k+1)
			}
			for range 2000 {
				probes = append(probes, keys[0]+rng.Uint64N(keys[n-1]-keys[0]+1))
				probes = append(probes, rng.Uint64())
			}
			for _, a := range probes {
				want := sort.Search(len(keys), func(i int) bool { return keys[i] > a }) - 1
				if got := x.last(keys, a); got != want {
					t.Fatalf("%s, %d keys: last(%#x) = %d, want %d", name, n, a, got, want)
				}
			}
		}
	}
	// Unsorted keys: any answer, but in range.
	keys := make([]uint64, 1000)
	for i := range keys {
		keys[i] = rng.Uint64() >> uint(rng.IntN(64))
	}
	x := newBucketIndex(keys)
	for range 10000 {
		if got := x.last(keys, rng.Uint64()>>uint(rng.IntN(64))); got < -1 || got >= len(keys) {
			t.Fatalf("unsorted keys: last = %d of %d", got, len(keys))
		}
	}
}

// TestBucketIndexEntries: on sorted keys of both widths every entry is
// the last key at or before its bucket's start (the last entry: the last
// key), as a scan of the buckets finds it; for keys of 32 bits and the
// same keys widened by a constant the entries are equal, sorted or not.
func TestBucketIndexEntries(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for round := range 200 {
		n := minBucketKeys + rng.IntN(3000)
		keys := make([]uint32, n)
		spread := uint32(1) << rng.IntN(31)
		for i := range keys {
			keys[i] = rng.Uint32N(spread)
			if round%3 == 0 {
				keys[i] = uint32(i / (1 + round%5)) // runs of equal keys
			}
		}
		sorted := round%7 != 6
		if sorted {
			slices.Sort(keys)
		}
		x := newBucketIndexOf(nil, keys)
		if sorted {
			span := uint64(keys[n-1] - keys[0])
			for k := range x.b {
				at := min(uint64(k)<<x.shift, span)
				if k == len(x.b)-1 {
					at = span
				}
				want := sort.Search(n, func(i int) bool { return uint64(keys[i]-keys[0]) > at }) - 1
				if int(x.b[k]) != want {
					t.Fatalf("round %d: entry %d of %d = %d, want %d", round, k, len(x.b), x.b[k], want)
				}
			}
		}
		c := uint64(rng.Uint32()) << rng.IntN(32)
		wide := make([]uint64, n)
		for i, k := range keys {
			wide[i] = uint64(k) + c
		}
		y := newBucketIndexOf(nil, wide)
		if y.shift != x.shift || y.base != x.base+c || !slices.Equal(x.b, y.b) {
			t.Fatalf("round %d (sorted %v): the index of the keys moved by %#x differs", round, sorted, c)
		}
		for _, e := range x.b {
			if e < 0 || int(e) >= n {
				t.Fatalf("round %d: entry %d not in [0, %d)", round, e, n)
			}
		}
	}
}
