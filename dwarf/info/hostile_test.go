package info

import (
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	edwarf "github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/loc"
)

// TestTrapAbbrevTerminator (REFERENCE.md, DWARF): every abbreviation
// table the encoder writes ends with a 0 code (gdb and valgrind read past
// tables that lack it), and the reader does not silently merge an
// unterminated table with the next one.
func TestTrapAbbrevTerminator(t *testing.T) {
	var units []*Unit
	for i, enc := range encodings() {
		if enc.ByteOrder != binary.LittleEndian {
			continue
		}
		units = append(units, sampleUnit(enc, string(rune('a'+i))))
	}
	info, abbrev, err := Encode(units, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(Sections{Info: info, Abbrev: abbrev, Str: info})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	for _, u := range d.Units() {
		if seen[u.AbbrevOffset] {
			continue
		}
		seen[u.AbbrevOffset] = true
		_, n, err := ParseAbbrevTable(abbrev, binary.LittleEndian, u.AbbrevOffset)
		if err != nil {
			t.Fatal(err)
		}
		if end := u.AbbrevOffset + n; end == 0 || abbrev[end-1] != 0 {
			t.Errorf("abbreviation table at %#x (%d bytes) does not end with a 0 code", u.AbbrevOffset, n)
		}
	}
	if len(seen) == 0 || abbrev[len(abbrev)-1] != 0 {
		t.Errorf("%d tables; section ends with %#x", len(seen), abbrev[len(abbrev)-1])
	}

	// Two tables, the first without its terminator: reading the first
	// runs into the second, whose code 1 is then a duplicate.
	table := []byte{1, byte(edwarf.DW_TAG_compile_unit), 0, byte(edwarf.DW_AT_name), byte(edwarf.DW_FORM_string), 0, 0}
	two := append(append([]byte(nil), table...), append(table, 0)...)
	_, _, err = ParseAbbrevTable(two, binary.LittleEndian, 0)
	var fe *edwarf.FormatError
	if !errors.As(err, &fe) || fe.Field != "abbrev code" || fe.Offset != uint64(len(table)) {
		t.Errorf("unterminated table followed by another: err = %v, want FormatError on abbrev code at %#x", err, len(table))
	}
	// A lone unterminated table ends at the end of the section.
	tab, n, err := ParseAbbrevTable(table, binary.LittleEndian, 0)
	if err != nil || n != uint64(len(table)) || tab.Lookup(1) == nil {
		t.Errorf("unterminated table at section end: %d bytes, %v", n, err)
	}
}

// TestAbbrevWorkBounded: many units pointing into the middle of one long
// abbreviation table cannot make the reader parse it again and again
// (quadratic work); the budget turns that into a FormatError.
func TestAbbrevWorkBounded(t *testing.T) {
	le := binary.LittleEndian
	// A table of 2000 declarations of one attribute each.
	var abbrev []byte
	for code := uint64(1); code <= 2000; code++ {
		abbrev = edwarf.AppendUleb128(abbrev, code)
		abbrev = append(abbrev, byte(edwarf.DW_TAG_variable), 0, byte(edwarf.DW_AT_name), byte(edwarf.DW_FORM_string), 0, 0)
	}
	// 2000 DWARF 4 units, unit i using the table from declaration i on,
	// each with a root DIE of that declaration's code.
	var info []byte
	off := uint64(0)
	for code := uint64(1); code <= 2000; code++ {
		u := le.AppendUint32(nil, 0)
		u = le.AppendUint16(u, 4)
		u = le.AppendUint32(u, uint32(off))
		u = append(u, 8)
		u = edwarf.AppendUleb128(u, code)
		u = append(u, 'x', 0)
		le.PutUint32(u, uint32(len(u)-4))
		info = append(info, u...)
		off += uint64(len(edwarf.AppendUleb128(nil, code))) + 6
	}
	var err error
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = New(Sections{Info: info, Abbrev: abbrev})
	runtime.ReadMemStats(&after)
	var fe *edwarf.FormatError
	if !errors.As(err, &fe) || fe.Field != "debug_abbrev_offset" {
		t.Errorf("err = %v, want FormatError on debug_abbrev_offset (overlapping tables)", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64*uint64(len(info)+len(abbrev)) {
		t.Errorf("%d bytes of input allocated %d bytes", len(info)+len(abbrev), n)
	}
}

// TestTrapPerUnitRngListsBase (REFERENCE.md, DWARF): each unit has its
// own .debug_rnglists contribution; DW_FORM_rnglistx indexes the offsets
// table at the unit's DW_AT_rnglists_base, not the one at offset 0. The
// lists use DW_RLE_start_end, which is absolute (the unit's base address
// does not apply); the loc package reads them.
func TestTrapPerUnitRngListsBase(t *testing.T) {
	le := binary.LittleEndian
	abbrev := []byte{
		1, byte(edwarf.DW_TAG_compile_unit), 1,
		byte(edwarf.DW_AT_rnglists_base), byte(edwarf.DW_FORM_sec_offset),
		byte(edwarf.DW_AT_low_pc), byte(edwarf.DW_FORM_addr), 0, 0,
		2, byte(edwarf.DW_TAG_lexical_block), 0, byte(edwarf.DW_AT_ranges), byte(edwarf.DW_FORM_rnglistx), 0, 0,
		0,
	}
	var rng []byte
	contribution := func(lo, hi uint64) (base uint64) {
		rng = le.AppendUint32(rng, 30)
		rng = le.AppendUint16(rng, 5)
		rng = append(rng, 8, 0)
		rng = le.AppendUint32(rng, 1) // offset_entry_count
		base = uint64(len(rng))
		rng = le.AppendUint32(rng, 4) // list 0, relative to the base
		rng = append(rng, byte(edwarf.DW_RLE_start_end))
		rng = le.AppendUint64(rng, lo)
		rng = le.AppendUint64(rng, hi)
		return base
	}
	var info []byte
	unit := func(rngBase, lowPC uint64) {
		u := le.AppendUint32(nil, 0)
		u = le.AppendUint16(u, 5)
		u = append(u, byte(edwarf.DW_UT_compile), 8)
		u = le.AppendUint32(u, 0)
		u = append(u, 1)
		u = le.AppendUint32(u, uint32(rngBase))
		u = le.AppendUint64(u, lowPC)
		u = append(u, 2, 0, 0)
		le.PutUint32(u, uint32(len(u)-4))
		info = append(info, u...)
	}
	bases := []uint64{contribution(0x1000, 0x1010), 0}
	rng = append(rng, byte(edwarf.DW_RLE_end_of_list))
	le.PutUint32(rng, uint32(len(rng)-4))
	bases[1] = contribution(0x2000, 0x2010)
	rng = append(rng, byte(edwarf.DW_RLE_end_of_list))
	le.PutUint32(rng[bases[1]-12:], uint32(len(rng)-int(bases[1])+8))
	unit(bases[0], 0x5000)
	unit(bases[1], 0x6000)
	d, err := New(Sections{Info: info, Abbrev: abbrev, RngLists: rng})
	if err != nil {
		t.Fatal(err)
	}
	r := d.Reader()
	var got []uint64
	for {
		e, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e == nil {
			break
		}
		if f, ok := e.Val(edwarf.DW_AT_ranges); ok {
			got = append(got, f.Val)
		}
	}
	want := []uint64{bases[0] + 4, bases[1] + 4}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("DW_AT_ranges resolved to %#x, want %#x", got, want)
	}
	for i, lo := range []uint64{0x1000, 0x2000} {
		rs, err := loc.ReadRangeList(loc.Sections{RngLists: rng}, d.Units()[i].Enc, got[i], 0x5000+uint64(i)*0x1000)
		if err != nil || len(rs) != 1 || rs[0].Start != lo || rs[0].End != lo+0x10 {
			t.Errorf("unit %d: ranges %+v, %v; want [%#x, %#x)", i, rs, err, lo, lo+0x10)
		}
	}
}

// TestAbbrevOutOfRange: tags, attribute names and forms wider than 16
// bits are refused, not truncated (found by FuzzDiffGo: attribute
// 0x81f3027 was read as DW_AT 0x3027).
func TestAbbrevOutOfRange(t *testing.T) {
	uleb := func(v uint64) []byte { return edwarf.AppendUleb128(nil, v) }
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	for name, c := range map[string]struct {
		abbrev []byte
		field  string
	}{
		"tag":       {cat([]byte{1}, uleb(0x10000), []byte{0, 0, 0, 0}), "tag"},
		"attribute": {cat([]byte{1, byte(edwarf.DW_TAG_variable), 0}, uleb(0x81f3027), []byte{byte(edwarf.DW_FORM_string), 0, 0, 0}), "attribute specification"},
		"form":      {cat([]byte{1, byte(edwarf.DW_TAG_variable), 0, byte(edwarf.DW_AT_name)}, uleb(0x10008), []byte{0, 0, 0}), "attribute specification"},
	} {
		_, _, err := ParseAbbrevTable(c.abbrev, binary.LittleEndian, 0)
		var fe *edwarf.FormatError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: err = %v, want FormatError on %q", name, err, c.field)
		}
	}
}
