package radix

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSort checks Sort against slices.Sort on short and long
// inputs, keys of 1 to 64 bits, many equal keys, and digits every key
// shares (skipped passes), reusing the scratch between calls.
func TestSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tmp []uint64
	for _, n := range []int{0, 1, 255, 256, 1000, 20000} {
		for _, keyBits := range []int{1, 8, 9, 17, 35, 63, 64} {
			for _, shape := range []string{"random", "few", "shared-high"} {
				keys := make([]uint64, n)
				for i := range keys {
					v := rng.Uint64()
					if keyBits < 64 {
						v &= 1<<keyBits - 1
					}
					switch shape {
					case "few":
						v %= 7
					case "shared-high":
						if keyBits > 16 {
							v = v&0xffff | 0x5a<<(keyBits-8)
						}
					}
					keys[i] = v
				}
				want := slices.Clone(keys)
				slices.Sort(want)
				var got []uint64
				got, tmp = Sort(keys, tmp, keyBits)
				if !slices.Equal(got, want) {
					t.Fatalf("n=%d bits=%d %s: not sorted as slices.Sort sorts", n, keyBits, shape)
				}
			}
		}
	}
}

// TestSortHigh checks SortHigh against a stable sort on the high bits
// (slices.SortStableFunc) on short and long inputs, with low bits that
// are random (so that stability shows) and an index in table order (so
// that the result is what Sort gives), digits every key shares, and
// scratch reused between calls.
func TestSortHigh(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var tmp []uint64
	for _, n := range []int{0, 1, 2, 255, 256, 300, 1000, 5000, 20000} {
		for _, bitsLow := range [][2]int{{0, 1}, {0, 64}, {15, 35}, {15, 64}, {8, 17}, {20, 20}, {3, 50}, {1, 2}} {
			low, keyBits := bitsLow[0], bitsLow[1]
			for _, shape := range []string{"random", "index", "few", "shared-high"} {
				keys := make([]uint64, n)
				for i := range keys {
					v := rng.Uint64()
					if keyBits < 64 {
						v &= 1<<keyBits - 1
					}
					switch shape {
					case "index":
						if low > 0 {
							v = v>>low<<low | uint64(i)&(1<<low-1)
						}
					case "few":
						v = v%7<<low | v&(1<<low-1)
					case "shared-high":
						if keyBits-low > 16 {
							v = v&(1<<(low+12)-1) | 0x5a<<(keyBits-8)
						}
					}
					if keyBits < 64 {
						v &= 1<<keyBits - 1
					}
					keys[i] = v
				}
				want := slices.Clone(keys)
				slices.SortStableFunc(want, func(a, b uint64) int {
					if a>>low < b>>low {
						return -1
					}
					if a>>low > b>>low {
						return 1
					}
					return 0
				})
				if shape == "index" && uint64(n) <= 1<<low {
					if s := slices.Sorted(slices.Values(keys)); !slices.Equal(s, want) {
						t.Fatalf("n=%d low=%d: the stable sort of indexed keys is not their sort", n, low)
					}
				}
				var got []uint64
				got, tmp = SortHigh(keys, tmp, low, keyBits)
				if !slices.Equal(got, want) {
					t.Fatalf("n=%d bits [%d, %d) %s: not sorted as a stable sort on the high bits sorts", n, low, keyBits, shape)
				}
			}
		}
	}
}
