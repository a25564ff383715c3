package meta

import (
	"errors"
	"testing"

	"github.com/elfimage/elfimage/dwarf"
)

// withoutStartIndex encodes ps as the writer did before the start index.
func withoutStartIndex(t testing.TB, ps []Proc) []byte {
	t.Helper()
	old := writeStartIndex
	writeStartIndex = false
	defer func() { writeStartIndex = old }()
	sec, err := Encode(ps)
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

// flatFind is the reference lookup: the last record whose start is at
// most addr, by a linear scan of every record (-1: none).
func flatFind(tab *Table, addr uint64) int {
	i := -1
	for j := 0; j < tab.n; j++ {
		if tab.startAt(j) <= addr {
			i = j
		}
	}
	return i
}

// TestStartIndex checks Lookup with and without the start index on
// tables around the chunk bounds: every procedure's bytes and gaps
// (lookupAll), the index's length and entries, and that a table written
// without it (as before FlagStartIndex) reads the same.
func TestStartIndex(t *testing.T) {
	for _, n := range []int{0, 1, 63, 64, 65, 127, 128, 129, 1000, 4097} {
		ps := genProcs(n)
		sec, err := Encode(ps)
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		if n > IndexStride {
			k = (n - 1) / IndexStride
		}
		if got := sec[7]&FlagStartIndex != 0; got != (k > 0) {
			t.Errorf("%d procedures: start index flag %v, want %v", n, got, k > 0)
		}
		old := withoutStartIndex(t, ps)
		if len(sec)-len(old) != k*int(sec[5]) {
			t.Errorf("%d procedures: the index adds %d bytes, want %d entries of %d", n, len(sec)-len(old), k, sec[5])
		}
		for _, s := range [][]byte{sec, old} {
			tab, err := NewTable(s, nil)
			if err != nil {
				t.Fatal(err)
			}
			wantK := k
			if s[7]&FlagStartIndex == 0 {
				wantK = 0
			}
			if tab.IndexLen() != wantK {
				t.Errorf("%d procedures: %d index entries, want %d", n, tab.IndexLen(), wantK)
			}
			for j := 0; j < tab.k; j++ {
				if got, want := tab.base+le(s[HeaderSize+j*tab.ss:], tab.ss), ps[(j+1)*IndexStride].Start; got != want {
					t.Errorf("%d procedures: index entry %d = %#x, want %#x", n, j, got, want)
				}
			}
			lookupAll(t, tab, ps)
			if n > 0 {
				if _, err := tab.Lookup(ps[0].Start - 1); err != ErrNotFound {
					t.Errorf("%d procedures: Lookup before the first = %v", n, err)
				}
			}
		}
	}
}

// TestProbes checks that Probes lists what Lookup reads: with the start
// index, the header page's entries, then one chunk's records (and the next
// chunk's first when the answer is a chunk's last), then the info field.
func TestProbes(t *testing.T) {
	ps := genProcs(10000)
	for _, s := range [][]byte{mustEncode(t, ps), withoutStartIndex(t, ps)} {
		tab, err := NewTable(s, nil)
		if err != nil {
			t.Fatal(err)
		}
		recEnd := tab.recOff + tab.n*tab.rec
		most := 0
		for i := 0; i < len(ps); i += 37 {
			for _, a := range []uint64{ps[i].Start, ps[i].Start + ps[i].Size - 1} {
				offs := tab.Probes(a)
				if len(offs) < 2 {
					t.Fatalf("Probes(%#x) = %v", a, offs)
				}
				if want := tab.recOff + i*tab.rec + tab.ss; offs[len(offs)-1] != want {
					t.Fatalf("Probes(%#x) ends at %#x, want record %d's info field %#x", a, offs[len(offs)-1], i, want)
				}
				lo, hi := recEnd, 0
				for _, o := range offs[:len(offs)-1] {
					if o < HeaderSize || o >= recEnd {
						t.Fatalf("Probes(%#x): %#x outside the index and records", a, o)
					}
					if o >= tab.recOff {
						lo, hi = min(lo, o), max(hi, o)
					}
				}
				if tab.k > 0 && hi-lo > IndexStride*tab.rec {
					t.Fatalf("Probes(%#x): records read over %d bytes, more than a chunk", a, hi-lo)
				}
				most = max(most, len(offs))
			}
		}
		t.Logf("start index %v: at most %d fields read per lookup", tab.k > 0, most)
	}
}

func mustEncode(t testing.TB, ps []Proc) []byte {
	t.Helper()
	sec, err := Encode(ps)
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

// TestStartIndexHostile changes start index entries so that they
// disagree with their records: a Lookup that relies on one fails with a
// FormatError naming the entry's offset and field "start index"; every
// other gives the reference answer.
func TestStartIndexHostile(t *testing.T) {
	ps := genProcs(300)
	sec := mustEncode(t, ps)
	ss := int(sec[5])
	// Every truncation, and one byte more, is refused by NewTable (the
	// index's length follows from the count).
	for n := 0; n <= len(sec); n++ {
		b := append(append([]byte(nil), sec[:n]...), make([]byte, n/len(sec))...)
		_, err := NewTable(b, nil)
		var fe *dwarf.FormatError
		if !errors.As(err, &fe) {
			t.Fatalf("%d of %d bytes: %v", len(b), len(sec), err)
		}
	}
	for _, c := range []struct {
		j     int
		delta int64
	}{{0, -16}, {0, +16}, {1, -1}, {1, 0x1000}, {3, -0x100000}, {3, +1}} {
		b := append([]byte(nil), sec...)
		off := HeaderSize + c.j*ss
		v := int64(le(b[off:], ss)) + c.delta
		if v < 0 {
			v = 0
		}
		copy(b[off:off+ss], putLE(nil, uint64(v), ss))
		tab, err := NewTable(b, nil)
		if err != nil {
			t.Fatal(err)
		}
		failed := 0
		for _, p := range ps {
			for _, a := range []uint64{p.Start - 1, p.Start, p.Start + p.Size - 1, p.Start + p.Size} {
				e, err := tab.Lookup(a)
				var fe *dwarf.FormatError
				if errors.As(err, &fe) {
					if fe.Field != "start index" || fe.Offset != uint64(off) {
						t.Errorf("entry %d%+d: Lookup(%#x): %v, want entry %d at %#x", c.j, c.delta, a, err, c.j, off)
					}
					failed++
					continue
				}
				want := flatFind(tab, a)
				if want < 0 || a-ps[want].Start >= ps[want].Size {
					if err != ErrNotFound {
						t.Errorf("entry %d%+d: Lookup(%#x) in a gap = %+v, %v", c.j, c.delta, a, e, err)
					}
					continue
				}
				if err != nil || e.Index != want {
					t.Errorf("entry %d%+d: Lookup(%#x) = %d, %v; want %d", c.j, c.delta, a, e.Index, err, want)
				}
			}
		}
		if failed == 0 {
			t.Errorf("entry %d%+d: no Lookup failed", c.j, c.delta)
		}
	}
}
