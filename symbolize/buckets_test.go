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
