package symbolize

import (
	"math/rand/v2"
	"testing"
)

// TestScanRule: the rule scanFrames applies to ranges (of those that hold
// an address, the one that starts last, the later in preorder among equal
// starts) picks the subroutine flattenSubrs' segments give, for nested,
// overlapping, repeated and empty ranges in any order.
func TestScanRule(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 2000 {
		n := 1 + rng.IntN(12)
		rs := make([]cuRange, n)
		for i := range rs {
			lo := uint64(rng.IntN(40))
			rs[i] = cuRange{lo, lo + uint64(rng.IntN(20)), i}
			if rs[i].start == rs[i].end { // appendRanges drops empty ranges
				rs[i].end++
			}
		}
		if round%2 == 0 { // properly nested, as compilers write them
			for i := 1; i < n; i++ {
				p := rs[rng.IntN(i)]
				lo := p.start + uint64(rng.IntN(int(p.end-p.start)))
				hi := lo + 1 + uint64(rng.IntN(int(p.end-lo)))
				rs[i] = cuRange{lo, hi, i}
			}
		}
		starts, segs := flattenSubrs(rs, new(scratch))
		for addr := uint64(0); addr < 70; addr++ {
			want := int32(-1) // from the segments
			for i := range segs {
				if starts[i] <= addr && addr < segs[i].end {
					want = segs[i].die
				}
			}
			got, best := int32(-1), uint64(0) // scanFrames' rule
			for _, r := range rs {
				if r.start <= addr && addr < r.end && (got < 0 || r.start >= best) {
					got, best = int32(r.cu), r.start
				}
			}
			if got != want {
				t.Fatalf("ranges %v, address %d: the rule picks %d, the segments %d (%v %v)", rs, addr, got, want, starts, segs)
			}
		}
	}
}
