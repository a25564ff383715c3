package symbolize

import (
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"
)

// indexEntry is one unit of a test unit index: its signature and its
// contributions, by column.
type indexEntry struct {
	sig  uint64
	offs []uint32
	lens []uint32
}

// encodeCUIndex writes a version 5 unit index (DWARF 5 section 7.3.5.3)
// for entries with the given columns (DW_SECT_* ids) and slot count, the
// units placed by the probe sequence of section 7.3.5.4: the encoder the
// decoder is checked against.
func encodeCUIndex(cols []uint32, slots uint32, es []indexEntry) []byte {
	le := binary.LittleEndian
	var b []byte
	b = le.AppendUint16(b, 5)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint32(b, uint32(len(cols)))
	b = le.AppendUint32(b, uint32(len(es)))
	b = le.AppendUint32(b, slots)
	sigs := make([]uint64, slots)
	rows := make([]uint32, slots)
	mask := uint64(slots - 1)
	for i, e := range es {
		h, step := e.sig&mask, (e.sig>>32)&mask|1
		for rows[h] != 0 {
			h = (h + step) & mask
		}
		sigs[h], rows[h] = e.sig, uint32(i+1)
	}
	for _, s := range sigs {
		b = le.AppendUint64(b, s)
	}
	for _, r := range rows {
		b = le.AppendUint32(b, r)
	}
	for _, c := range cols {
		b = le.AppendUint32(b, c)
	}
	for _, e := range es {
		for _, o := range e.offs {
			b = le.AppendUint32(b, o)
		}
	}
	for _, e := range es {
		for _, l := range e.lens {
			b = le.AppendUint32(b, l)
		}
	}
	return b
}

// FuzzCUIndex checks the unit index decoder two ways. An index built by
// encodeCUIndex from entries derived from the input (distinct signatures,
// random contributions, a load of at most one unit per slot) decodes to
// exactly those entries: every signature finds its row and contributions,
// and signatures not in it are not found. And the raw input, decoded as
// an index, never panics, and whatever lookup finds is a slot holding the
// signature asked for, with a row in [1, unit_count] (checked against a
// linear scan of the slots).
func FuzzCUIndex(f *testing.F) {
	f.Add([]byte{}, uint64(0))
	f.Add(encodeCUIndex([]uint32{1, 3, 6}, 4, []indexEntry{{0x8bbef599ad3ecb76, []uint32{0, 0, 0}, []uint32{0xee, 0xcc, 0x48}}}), uint64(0x8bbef599ad3ecb76))
	f.Add(encodeCUIndex([]uint32{1, 3, 5, 6, 8}, 8, []indexEntry{
		{1, []uint32{0, 0, 0, 0, 0}, []uint32{1, 2, 3, 4, 5}}, {9, []uint32{1, 2, 3, 4, 5}, []uint32{6, 7, 8, 9, 10}},
		{17, []uint32{7, 9, 11, 13, 15}, []uint32{1, 1, 1, 1, 1}}}), uint64(9))
	f.Fuzz(func(t *testing.T, b []byte, sig uint64) {
		// The raw input.
		if x, err := parseCUIndex(b, binary.LittleEndian); err == nil {
			row, ok := x.lookup(sig)
			if ok {
				le := binary.LittleEndian
				found := false
				for i := uint64(0); i < uint64(x.slots); i++ {
					if le.Uint64(b[x.hashOff+8*i:]) == sig && le.Uint32(b[x.indexOff+4*i:]) == row {
						found = true
					}
				}
				if !found || row == 0 || row > x.units {
					t.Fatalf("lookup(%#x) = row %d of %d, not in the slots", sig, row, x.units)
				}
				for id := 0; id <= sectMax+1; id++ {
					x.contribution(row, id)
				}
			}
		}
		// A valid index from the input's bytes.
		r := rand.New(rand.NewPCG(sig, uint64(len(b))))
		n := len(b) % 40
		slots := uint32(1)
		for slots < uint32(n)+1 || slots < 2 {
			slots <<= 1
		}
		cols := []uint32{1, 3, 6, 8}[:1+len(b)%4]
		seen := map[uint64]bool{}
		var es []indexEntry
		for i := range n {
			s := r.Uint64()
			if i < len(b) {
				s ^= uint64(b[i]) << 32
			}
			if seen[s] {
				continue
			}
			seen[s] = true
			e := indexEntry{sig: s}
			for range cols {
				e.offs = append(e.offs, r.Uint32())
				e.lens = append(e.lens, r.Uint32())
			}
			es = append(es, e)
		}
		x, err := parseCUIndex(encodeCUIndex(cols, slots, es), binary.LittleEndian)
		if err != nil {
			t.Fatalf("valid index of %d units, %d slots: %v", len(es), slots, err)
		}
		for i, e := range es {
			row, ok := x.lookup(e.sig)
			if !ok || row != uint32(i+1) {
				t.Fatalf("lookup(%#x) = %d, %v; want row %d", e.sig, row, ok, i+1)
			}
			for c, id := range cols {
				got, ok := x.contribution(row, int(id))
				if !ok || got != (contribution{uint64(e.offs[c]), uint64(e.lens[c])}) {
					t.Fatalf("row %d DW_SECT %d: %+v, %v; want %#x+%#x", row, id, got, ok, e.offs[c], e.lens[c])
				}
			}
		}
		if !seen[sig] {
			if _, ok := x.lookup(sig); ok {
				t.Fatalf("lookup(%#x) found a signature not in the index", sig)
			}
		}
	})
}

// TestCUIndexHostile: malformed headers are refused naming the field.
func TestCUIndexHostile(t *testing.T) {
	good := encodeCUIndex([]uint32{1, 3}, 2, []indexEntry{{5, []uint32{0, 0}, []uint32{1, 1}}})
	for _, c := range []struct {
		name  string
		edit  func(b []byte) []byte
		field string
	}{
		{"short", func(b []byte) []byte { return b[:10] }, "header"},
		{"version 2", func(b []byte) []byte { b[0] = 2; return b }, "version"},
		{"slots not a power of two", func(b []byte) []byte { b[12] = 3; return b }, "slot_count"},
		{"more units than slots", func(b []byte) []byte { b[8] = 3; return b }, "unit_count"},
		{"tables past the end", func(b []byte) []byte { return b[:len(b)-1] }, "section_count"},
		{"no columns", func(b []byte) []byte { b[4] = 0; return b }, "section_count"},
		{"repeated column", func(b []byte) []byte { b[16+8*2+4*2+4] = 1; return b }, "section identifier"},
		{"no DW_SECT_INFO", func(b []byte) []byte { b[16+8*2+4*2] = 6; return b }, "section identifier"},
	} {
		b := c.edit(append([]byte(nil), good...))
		if _, err := parseCUIndex(b, binary.LittleEndian); err == nil || !strings.Contains(err.Error(), c.field) || !strings.Contains(err.Error(), secCUIndex) {
			t.Errorf("%s: %v, want an error on %s", c.name, err, c.field)
		}
	}
	if _, err := parseCUIndex(good, binary.LittleEndian); err != nil {
		t.Fatal(err)
	}
}
