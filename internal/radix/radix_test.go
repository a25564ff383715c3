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
