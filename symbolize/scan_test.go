package symbolize

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
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
		starts, segs, long := flattenSubrs(rs, new(scratch), nil)
		for addr := uint64(0); addr < 70; addr++ {
			want := int32(-1) // from the segments
			for i := range segs {
				if starts[i] <= addr && addr < segEnd(segs, long, i) {
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

// TestScanNamesDeep: a name reached through more references than
// maxNameHops from one subroutine and fewer from another is the same for
// the scan (which resolves only the address's chain) and the index (which
// resolves every subroutine, the farther one first): names cut by the limit
// are not cached. S1 reaches the name "deep" through 10 abstract_origin
// links (cut: no name), S2 through 6 (named).
func TestScanNamesDeep(t *testing.T) {
	abbrev := []byte{
		1, 0x11, 1, 0x11, 0x01, 0x12, 0x21, 0x80, 0x80, 0x04, 0, 0,
		2, 0x2e, 0, 0x31, 0x13, 0, 0,
		3, 0x2e, 0, 0x03, 0x08, 0, 0,
		4, 0x2e, 0, 0x11, 0x01, 0x12, 0x21, 0x80, 0x02, 0x31, 0x13, 0, 0,
		0}
	var b []byte
	u32 := func(v uint32) { b = binary.LittleEndian.AppendUint32(b, v) }
	u64 := func(v uint64) { b = binary.LittleEndian.AppendUint64(b, v) }
	u32(0) // length, patched
	b = append(b, 5, 0, 1, 8)
	u32(0)
	b = append(b, 1)
	u64(0x500000)
	rOff := func(k int) uint32 { return uint32(21 + 5*(k-1)) }
	for k := 1; k <= 9; k++ {
		if uint32(len(b)) != rOff(k) {
			t.Fatal("offset")
		}
		b = append(b, 2)
		u32(rOff(k + 1))
	}
	b = append(b, 3)
	b = append(b, "deep\x00"...)
	b = append(b, 4) // S1
	u64(0x501000)
	u32(rOff(1))
	b = append(b, 4) // S2
	u64(0x502000)
	u32(rOff(5))
	b = append(b, 0)
	binary.LittleEndian.PutUint32(b, uint32(len(b)-4))
	m := map[string][]byte{".debug_info": b, ".debug_abbrev": abbrev}
	d, err := loadSections(func(n string) ([]byte, error) { return m[n], nil }, binary.LittleEndian)
	if err != nil {
		t.Fatal(err)
	}
	scan, err := d.scanFrames(&d.units[0], 0x502000, nil)
	x := d.index(0)
	idx := x.frames(0x502000, nil)
	if !slices.Equal(scan, idx) || len(idx) != 1 || idx[0].Function != "deep" {
		t.Errorf("0x502000: scan %+v (err %v), index %+v (err %v); want the name deep from both", scan, err, idx, x.err)
	}
	if f := x.frames(0x501000, nil); len(f) != 1 || f[0].Function != "" {
		t.Errorf("0x501000 (10 links): %+v, want no name", f)
	}
}
