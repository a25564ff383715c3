package loc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/elfimage/elfimage/dwarf"
)

// encodings returns every encoding the writers support: versions 4 and 5,
// 32- and 64-bit formats, 4- and 8-byte addresses, and one big-endian.
func encodings() []dwarf.Encoding {
	var out []dwarf.Encoding
	for _, v := range []uint16{4, 5} {
		for _, f := range []dwarf.Format{dwarf.Format32, dwarf.Format64} {
			for _, a := range []uint8{4, 8} {
				out = append(out, dwarf.Encoding{Version: v, Format: f, AddrSize: a, ByteOrder: binary.LittleEndian})
			}
		}
	}
	out = append(out, dwarf.Encoding{Version: 5, Format: dwarf.Format32, AddrSize: 8, ByteOrder: binary.BigEndian},
		dwarf.Encoding{Version: 3, Format: dwarf.Format32, AddrSize: 4, ByteOrder: binary.BigEndian})
	return out
}

func encName(e dwarf.Encoding) string {
	o := "le"
	if e.ByteOrder == binary.BigEndian {
		o = "be"
	}
	return fmt.Sprintf("v%d-%v-addr%d-%s", e.Version, e.Format, e.AddrSize, o)
}

const cuBase = 0x401000

// sampleLocLists are lists that exercise both DWARF 5 encodings, entries
// below the base (DWARF 4 base selection), overlap and empty lists.
func sampleLocLists() [][]Entry {
	op := func(b ...byte) []byte { return b }
	return [][]Entry{
		{{Start: 0x401000, End: 0x401010, Expr: op(byte(dwarf.DW_OP_reg0))}},
		{
			{Start: 0x401000, End: 0x401008, Expr: op(byte(dwarf.DW_OP_reg0) + 5)},
			{Start: 0x401008, End: 0x401030, Expr: op(byte(dwarf.DW_OP_fbreg), 0x68)},
			{Start: 0x401030, End: 0x401031, Expr: nil},
			{Start: 0x401020, End: 0x401040, Expr: op(byte(dwarf.DW_OP_breg0)+7, 8)}, // overlaps
		},
		{}, // empty list
		{ // below the unit's base
			{Start: 0x400f00, End: 0x400f10, Expr: op(byte(dwarf.DW_OP_reg0) + 3)},
			{Start: 0x401100, End: 0x401200, Expr: op(byte(dwarf.DW_OP_reg0) + 4)},
		},
		{{Start: 0x10, End: 0x20, Expr: bytes.Repeat([]byte{byte(dwarf.DW_OP_nop)}, 300)}},
	}
}

func sampleRangeLists() [][]Range {
	return [][]Range{
		{{0x401000, 0x401010}},
		{{0x401000, 0x401008}, {0x401010, 0x401018}, {0x401100, 0x401180}},
		{},
		{{0x400000, 0x400004}, {0x401000, 0x402000}},
		{{0xffff0000, 0xfffffff0}},
	}
}

func TestLocListsRoundTrip(t *testing.T) {
	for _, enc := range encodings() {
		t.Run(encName(enc), func(t *testing.T) {
			b, err := NewLocLists(enc, cuBase)
			if err != nil {
				t.Fatal(err)
			}
			lists := sampleLocLists()
			if enc.Version >= 5 {
				lists = append(lists, []Entry{
					{Start: 0x401000, End: 0x401004, Expr: []byte{byte(dwarf.DW_OP_reg0) + 1}},
					{Default: true, Expr: []byte{byte(dwarf.DW_OP_reg0) + 2}},
				})
			}
			var offs []uint64
			for _, l := range lists {
				off, err := b.AddList(l)
				if err != nil {
					t.Fatal(err)
				}
				offs = append(offs, off)
			}
			sec := Sections{}
			if enc.Version >= 5 {
				sec.LocLists = b.Bytes()
				if b.Section() != ".debug_loclists" {
					t.Errorf("Section() = %q", b.Section())
				}
			} else {
				sec.Loc = b.Bytes()
				if b.Section() != ".debug_loc" {
					t.Errorf("Section() = %q", b.Section())
				}
			}
			for i, l := range lists {
				got, err := ReadLocList(sec, enc, offs[i], cuBase)
				if err != nil {
					t.Fatalf("list %d: %v", i, err)
				}
				if len(got) == 0 && len(l) == 0 {
					continue
				}
				for j := range l {
					if l[j].Expr == nil {
						l[j].Expr = []byte{}
					}
				}
				if !reflect.DeepEqual(got, l) {
					t.Errorf("list %d at %#x:\n got %+v\nwant %+v", i, offs[i], got, l)
				}
				// LocationAt agrees with a linear scan of the input.
				for _, e := range l {
					for _, pc := range []uint64{e.Start - 1, e.Start, e.End - 1, e.End} {
						want, wantOK := scan(l, pc)
						expr, ok, err := LocationAt(sec, enc, offs[i], cuBase, pc)
						if err != nil || ok != wantOK || !bytes.Equal(expr, want) {
							t.Errorf("list %d: LocationAt(%#x) = %x, %v, %v; want %x, %v", i, pc, expr, ok, err, want, wantOK)
						}
					}
				}
			}
		})
	}
}

// scan is the reference for LocationAt.
func scan(l []Entry, pc uint64) ([]byte, bool) {
	for _, e := range l {
		if !e.Default && e.Start <= pc && pc < e.End {
			return e.Expr, true
		}
	}
	for _, e := range l {
		if e.Default {
			return e.Expr, true
		}
	}
	return nil, false
}

func TestRangeListsRoundTrip(t *testing.T) {
	for _, enc := range encodings() {
		t.Run(encName(enc), func(t *testing.T) {
			b, err := NewRangeLists(enc, cuBase)
			if err != nil {
				t.Fatal(err)
			}
			var offs []uint64
			lists := sampleRangeLists()
			for i, l := range lists {
				if i == 1 {
					b.Base = 0x401008 // units with different bases share the section
				}
				off, err := b.AddList(l)
				if err != nil {
					t.Fatal(err)
				}
				offs = append(offs, off)
			}
			sec := Sections{Ranges: b.Bytes(), RngLists: b.Bytes()}
			for i, l := range lists {
				base := uint64(cuBase)
				if i >= 1 {
					base = 0x401008
				}
				got, err := ReadRangeList(sec, enc, offs[i], base)
				if err != nil {
					t.Fatalf("list %d: %v", i, err)
				}
				if len(got) != len(l) || (len(l) > 0 && !reflect.DeepEqual(got, l)) {
					t.Errorf("list %d: got %v want %v", i, got, l)
				}
				for _, r := range l {
					for _, pc := range []uint64{r.Start, r.End - 1} {
						if ok, err := RangeContains(sec, enc, offs[i], base, pc); !ok || err != nil {
							t.Errorf("list %d: RangeContains(%#x) = %v, %v", i, pc, ok, err)
						}
					}
				}
				if ok, err := RangeContains(sec, enc, offs[i], base, 0x500000); ok || err != nil {
					t.Errorf("list %d: RangeContains(0x500000) = %v, %v", i, ok, err)
				}
			}
		})
	}
}

// TestEncodingChoice checks the bytes the DWARF 5 writer chooses: a lone
// entry is DW_LLE_start_length, several are DW_LLE_base_address plus
// DW_LLE_offset_pair; DWARF 4 writes pairs relative to the base.
func TestEncodingChoice(t *testing.T) {
	enc := dwarf.Default64
	b, _ := NewLocLists(enc, 0)
	off1, _ := b.AddList([]Entry{{Start: 0x1000, End: 0x1010, Expr: []byte{0x50}}})
	off2, _ := b.AddList([]Entry{{Start: 0x1000, End: 0x1010, Expr: []byte{0x50}}, {Start: 0x1010, End: 0x1020, Expr: []byte{0x51}}})
	got := b.Bytes()
	want := []byte{
		0, 0, 0, 0, 5, 0, 8, 0, 0, 0, 0, 0, // header (length patched below)
		8, 0x00, 0x10, 0, 0, 0, 0, 0, 0, 0x10, 1, 0x50, 0, // start_length; end_of_list
		6, 0x00, 0x10, 0, 0, 0, 0, 0, 0, // base_address
		4, 0, 0x10, 1, 0x50, // offset_pair
		4, 0x10, 0x20, 1, 0x51,
		0,
	}
	binary.LittleEndian.PutUint32(want, uint32(len(want)-4))
	if !bytes.Equal(got, want) || off1 != 12 || off2 != 25 {
		t.Errorf("loclists = % x (offsets %d, %d)\nwant       % x (12, 25)", got, off1, off2, want)
	}

	r, _ := NewRangeLists(dwarf.Encoding{Version: 4, Format: dwarf.Format32, AddrSize: 4, ByteOrder: binary.LittleEndian}, 0x1000)
	r.AddList([]Range{{0x1004, 0x1008}})
	r.AddList([]Range{{0x800, 0x900}})
	want = []byte{
		4, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0xff, 0xff, 0xff, 0xff, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	}
	if got := r.Bytes(); !bytes.Equal(got, want) {
		t.Errorf("ranges = % x\nwant     % x", got, want)
	}
}

func TestWriterRefuses(t *testing.T) {
	v4a4 := dwarf.Encoding{Version: 4, Format: dwarf.Format32, AddrSize: 4, ByteOrder: binary.LittleEndian}
	for _, c := range []struct {
		name string
		enc  dwarf.Encoding
		l    []Entry
	}{
		{"empty range", dwarf.Default64, []Entry{{Start: 5, End: 5}}},
		{"reversed range", dwarf.Default64, []Entry{{Start: 6, End: 5}}},
		{"address too wide", v4a4, []Entry{{Start: 5, End: 1 << 32}}},
		{"default before v5", v4a4, []Entry{{Default: true}}},
		{"long v4 expression", v4a4, []Entry{{Start: 1, End: 2, Expr: make([]byte, 1<<16)}}},
	} {
		b, err := NewLocLists(c.enc, 0)
		if err != nil {
			t.Fatal(err)
		}
		before := len(b.Bytes())
		if _, err := b.AddList(c.l); !errors.Is(err, ErrInvalidList) {
			t.Errorf("%s: AddList err = %v, want ErrInvalidList", c.name, err)
		}
		if len(b.Bytes()) != before {
			t.Errorf("%s: section changed after a refused list", c.name)
		}
	}
	r, _ := NewRangeLists(dwarf.Default64, 0)
	if _, err := r.AddList([]Range{{1, 1}}); !errors.Is(err, ErrInvalidList) {
		t.Errorf("empty range: %v", err)
	}
	if _, err := NewLocLists(dwarf.Encoding{Version: 5, Format: dwarf.Format32, AddrSize: 3, ByteOrder: binary.LittleEndian}, 0); !errors.Is(err, ErrInvalidList) {
		t.Errorf("bad address size: %v", err)
	}
	if _, err := NewRangeLists(v4a4, 1<<32); err != nil {
		t.Fatal(err)
	} else if b, _ := NewRangeLists(v4a4, 1<<32); b != nil {
		if _, err := b.AddList(nil); !errors.Is(err, ErrInvalidList) {
			t.Errorf("base too wide: %v", err)
		}
	}
	if _, err := EncodeAranges(v4a4, 0, []Range{{0, 0}}); !errors.Is(err, ErrInvalidList) {
		t.Errorf("aranges empty range: %v", err)
	}
	if _, err := EncodeAranges(v4a4, 1<<32, nil); !errors.Is(err, ErrInvalidList) {
		t.Errorf("aranges cu offset: %v", err)
	}
}

// asm assembles test input: bytes, little-endian addresses of size a.
type asm struct {
	b []byte
	a int
}

func (s *asm) u8(v ...byte) *asm { s.b = append(s.b, v...); return s }
func (s *asm) uleb(v uint64) *asm {
	s.b = dwarf.AppendUleb128(s.b, v)
	return s
}
func (s *asm) addr(v uint64) *asm { s.b = dwarf.AppendUint(s.b, binary.LittleEndian, s.a, v); return s }
func (s *asm) u16(v uint16) *asm {
	s.b = dwarf.AppendUint(s.b, binary.LittleEndian, 2, uint64(v))
	return s
}

// TestReadAllKinds reads hand-assembled lists using every DWARF 5 kind,
// including the indexed ones, and DWARF 4 base selection entries.
func TestReadAllKinds(t *testing.T) {
	enc := dwarf.Default64
	// .debug_addr: header (8 bytes), then addresses 0x1000, 0x2000, 0x3000.
	addr := (&asm{a: 8}).u8(0, 0, 0, 0, 5, 0, 8, 0).addr(0x1000).addr(0x2000).addr(0x3000).b
	ll := (&asm{a: 8}).
		u8(byte(dwarf.DW_LLE_base_addressx)).uleb(1).
		u8(byte(dwarf.DW_LLE_offset_pair)).uleb(0).uleb(4).uleb(1).u8(0x50).
		u8(byte(dwarf.DW_LLE_startx_endx)).uleb(0).uleb(1).uleb(1).u8(0x51).
		u8(byte(dwarf.DW_LLE_startx_length)).uleb(2).uleb(0x10).uleb(1).u8(0x52).
		u8(byte(dwarf.DW_LLE_default_location)).uleb(2).u8(0x91, 0x70).
		u8(byte(dwarf.DW_LLE_base_address)).addr(0x5000).
		u8(byte(dwarf.DW_LLE_offset_pair)).uleb(8).uleb(8).uleb(1).u8(0x53). // empty: skipped
		u8(byte(dwarf.DW_LLE_start_end)).addr(0x6000).addr(0x6008).uleb(0).
		u8(byte(dwarf.DW_LLE_start_length)).addr(0x7000).uleb(2).uleb(1).u8(0x54).
		u8(byte(dwarf.DW_LLE_end_of_list)).b
	sec := Sections{LocLists: ll, Addr: addr, AddrBase: 8}
	got, err := ReadLocList(sec, enc, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{
		{Start: 0x2000, End: 0x2004, Expr: []byte{0x50}},
		{Start: 0x1000, End: 0x2000, Expr: []byte{0x51}},
		{Start: 0x3000, End: 0x3010, Expr: []byte{0x52}},
		{Default: true, Expr: []byte{0x91, 0x70}},
		{Start: 0x6000, End: 0x6008, Expr: []byte{}},
		{Start: 0x7000, End: 0x7002, Expr: []byte{0x54}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	if e, ok, err := LocationAt(sec, enc, 0, 0, 0x4000); !ok || err != nil || !bytes.Equal(e, []byte{0x91, 0x70}) {
		t.Errorf("default location: %x %v %v", e, ok, err)
	}

	rl := (&asm{a: 8}).
		u8(byte(dwarf.DW_RLE_offset_pair)).uleb(0).uleb(4). // against the unit base
		u8(byte(dwarf.DW_RLE_base_addressx)).uleb(2).
		u8(byte(dwarf.DW_RLE_offset_pair)).uleb(0).uleb(4).
		u8(byte(dwarf.DW_RLE_startx_endx)).uleb(0).uleb(1).
		u8(byte(dwarf.DW_RLE_startx_length)).uleb(1).uleb(0x20).
		u8(byte(dwarf.DW_RLE_base_address)).addr(0x9000).
		u8(byte(dwarf.DW_RLE_offset_pair)).uleb(1).uleb(2).
		u8(byte(dwarf.DW_RLE_start_end)).addr(0xa000).addr(0xa100).
		u8(byte(dwarf.DW_RLE_start_length)).addr(0xb000).uleb(0x10).
		u8(byte(dwarf.DW_RLE_end_of_list)).b
	rs, err := ReadRangeList(Sections{RngLists: rl, Addr: addr, AddrBase: 8}, enc, 0, 0x800)
	wantR := []Range{{0x800, 0x804}, {0x3000, 0x3004}, {0x1000, 0x2000}, {0x2000, 0x2020}, {0x9001, 0x9002}, {0xa000, 0xa100}, {0xb000, 0xb010}}
	if err != nil || !reflect.DeepEqual(rs, wantR) {
		t.Errorf("ranges: %v, %v\nwant %v", rs, err, wantR)
	}

	// DWARF 4 .debug_loc with a base selection entry, 4-byte addresses.
	v4 := dwarf.Encoding{Version: 4, Format: dwarf.Format32, AddrSize: 4, ByteOrder: binary.LittleEndian}
	loc := (&asm{a: 4}).
		addr(0).addr(4).u16(1).u8(0x50).
		addr(0xffffffff).addr(0x8000).
		addr(0x10).addr(0x20).u16(2).u8(0x91, 0x10).
		addr(0x20).addr(0x20).u16(0). // no effect
		addr(0).addr(0).b
	got, err = ReadLocList(Sections{Loc: loc}, v4, 0, 0x1000)
	want = []Entry{{Start: 0x1000, End: 0x1004, Expr: []byte{0x50}}, {Start: 0x8010, End: 0x8020, Expr: []byte{0x91, 0x10}}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("v4 loc: %+v, %v", got, err)
	}
}

func TestReadErrors(t *testing.T) {
	enc := dwarf.Default64
	v4 := dwarf.Encoding{Version: 4, Format: dwarf.Format32, AddrSize: 8, ByteOrder: binary.LittleEndian}
	for _, c := range []struct {
		name    string
		sec     Sections
		enc     dwarf.Encoding
		off     uint64
		ranges  bool
		section string
		field   string
		at      uint64
	}{
		{"truncated kind", Sections{LocLists: []byte{4, 0, 1, 1, 0x50}}, enc, 0, false, SecLocLists, "entry kind", 5},
		{"truncated expr", Sections{LocLists: []byte{4, 0, 1, 5, 0x50}}, enc, 0, false, SecLocLists, "location description", 4},
		{"unknown kind", Sections{LocLists: []byte{9}}, enc, 0, false, SecLocLists, "entry kind", 0},
		{"default in rnglists", Sections{RngLists: []byte{0, 0x08}}, enc, 1, true, SecRngLists, "entry kind", 1},
		{"reversed", Sections{RngLists: []byte{4, 5, 4, 0}}, enc, 0, true, SecRngLists, "ending address", 0},
		{"offset past end", Sections{RngLists: []byte{0}}, enc, 7, true, SecRngLists, "list offset", 0},
		{"addr index", Sections{RngLists: []byte{1, 3, 0}, Addr: make([]byte, 16), AddrBase: 8}, enc, 0, true, SecAddr, "address index", 32},
		{"reversed after wrap", Sections{RngLists: (&asm{a: 8}).u8(5).addr(^uint64(0)-1).u8(4, 1, 5, 0).b}, enc, 0, true, SecRngLists, "ending address", 9},
		{"v4 truncated", Sections{Ranges: []byte{1, 0, 0, 0, 0, 0, 0, 0, 2}}, v4, 0, true, SecRanges, "ending address", 8},
		{"v4 no terminator", Sections{Ranges: (&asm{a: 8}).addr(1).addr(2).b}, v4, 0, true, SecRanges, "beginning address", 16},
	} {
		var err error
		if c.ranges {
			_, err = ReadRangeList(c.sec, c.enc, c.off, 0)
		} else {
			_, err = ReadLocList(c.sec, c.enc, c.off, 0)
		}
		var fe *dwarf.FormatError
		if !errors.As(err, &fe) {
			t.Errorf("%s: err = %v, want a FormatError", c.name, err)
			continue
		}
		if fe.Source != c.section || fe.Field != c.field || (c.at != 0 && fe.Offset != c.at) {
			t.Errorf("%s: got %q (section %s field %q offset %#x), want %s %q %#x", c.name, err, fe.Source, fe.Field, fe.Offset, c.section, c.field, c.at)
		}
		if c.ranges {
			_, err = RangeContains(c.sec, c.enc, c.off, 0, 1<<62)
		} else {
			_, _, err = LocationAt(c.sec, c.enc, c.off, 0, 1<<62)
		}
		if !errors.As(err, &fe) {
			t.Errorf("%s: run-time form err = %v", c.name, err)
		}
	}
	if _, err := ReadLocList(Sections{}, dwarf.Encoding{Version: 5}, 0, 0); err == nil {
		t.Error("invalid encoding accepted")
	}
}

func TestAranges(t *testing.T) {
	ranges := []Range{{0x401000, 0x401234}, {0x0, 0x10}, {0x500000, 0x500001}}
	var sec []byte
	var wantSets []ArangeSet
	for i, enc := range encodings() {
		set, err := EncodeAranges(enc, uint64(i*0x40), ranges)
		if err != nil {
			t.Fatal(err)
		}
		tuple := 2 * int(enc.AddrSize)
		if len(set)%tuple != 0 {
			t.Errorf("%s: set of %d bytes not a multiple of %d", encName(enc), len(set), tuple)
		}
		hdr := 12
		if enc.Format == dwarf.Format64 {
			hdr = 24
		}
		if pad := (hdr + tuple - 1) / tuple * tuple; len(set) != pad+tuple*(len(ranges)+1) {
			t.Errorf("%s: set of %d bytes, want %d", encName(enc), len(set), pad+tuple*(len(ranges)+1))
		}
		if enc.ByteOrder != binary.LittleEndian {
			continue // one section, one byte order
		}
		e := enc
		e.Version = 2
		wantSets = append(wantSets, ArangeSet{Offset: uint64(len(sec)), Enc: e, CUOffset: uint64(i * 0x40), Ranges: ranges})
		sec = append(sec, set...)
	}
	got, err := ReadAranges(sec, binary.LittleEndian)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, wantSets) {
		t.Errorf("got  %+v\nwant %+v", got, wantSets)
	}
	// Exact bytes of one set (DWARF 5 section 6.1.2).
	set, _ := EncodeAranges(dwarf.Encoding{Version: 5, Format: dwarf.Format32, AddrSize: 4, ByteOrder: binary.LittleEndian}, 0x20, []Range{{0x1000, 0x1010}})
	want := []byte{0x1c, 0, 0, 0, 2, 0, 0x20, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	if !bytes.Equal(set, want) {
		t.Errorf("set = % x\nwant  % x", set, want)
	}
	// Hostile sets.
	for _, c := range []struct {
		name  string
		data  []byte
		field string
	}{
		{"version", []byte{4, 0, 0, 0, 9, 0, 0, 0}, "version"},
		{"address size", []byte{8, 0, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0}, "address_size"},
		{"segment", []byte{8, 0, 0, 0, 2, 0, 0, 0, 0, 0, 4, 4}, "segment_selector_size"},
		{"length", []byte{0x40, 0, 0, 0, 2, 0}, "unit_length"},
		{"wrap", append([]byte{0x14, 0, 0, 0, 2, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0}, 0xf0, 0xff, 0xff, 0xff, 0x20, 0, 0, 0), "length"},
	} {
		_, err := ReadAranges(c.data, nil)
		var fe *dwarf.FormatError
		if !errors.As(err, &fe) || fe.Field != c.field || fe.Source != ".debug_aranges" {
			t.Errorf("%s: err = %v, want FormatError on %s", c.name, err, c.field)
		}
	}
}

// TestNoAllocs asserts the run-time lookups allocate nothing.
func TestNoAllocs(t *testing.T) {
	for _, enc := range []dwarf.Encoding{dwarf.Default64, {Version: 4, Format: dwarf.Format32, AddrSize: 8, ByteOrder: binary.LittleEndian}} {
		lb, _ := NewLocLists(enc, cuBase)
		rb, _ := NewRangeLists(enc, cuBase)
		l := sampleLocLists()[1]
		loff, _ := lb.AddList(l)
		roff, _ := rb.AddList(sampleRangeLists()[1])
		sec := Sections{Loc: lb.Bytes(), LocLists: lb.Bytes(), Ranges: rb.Bytes(), RngLists: rb.Bytes()}
		n := testing.AllocsPerRun(100, func() {
			expr, ok, err := LocationAt(sec, enc, loff, cuBase, 0x401020)
			if !ok || err != nil || len(expr) != 2 {
				t.Fatal("LocationAt failed")
			}
			if ok, err := RangeContains(sec, enc, roff, cuBase, 0x401110); !ok || err != nil {
				t.Fatal("RangeContains failed")
			}
			r := NewLocListReader(sec, enc, loff, cuBase)
			var e Entry
			for r.Next(&e) {
			}
			if r.Err() != nil {
				t.Fatal(r.Err())
			}
		})
		if n != 0 {
			t.Errorf("v%d: %v allocations per lookup, want 0", enc.Version, n)
		}
	}
}

func BenchmarkLocationAt(b *testing.B) {
	lb, _ := NewLocLists(dwarf.Default64, 0)
	off, _ := lb.AddList(sampleLocLists()[1])
	sec := Sections{LocLists: lb.Bytes()}
	b.ReportAllocs()
	for b.Loop() {
		LocationAt(sec, dwarf.Default64, off, 0, 0x401020)
	}
}

// TestOffsetPairWraps: offsets from a base address are unsigned and wrap
// around the address space, as Go's linker writes them for code below the
// base (llvm-dwarfdump reads them the same way).
func TestOffsetPairWraps(t *testing.T) {
	enc := dwarf.Encoding{Version: 5, Format: dwarf.Format32, AddrSize: 8, ByteOrder: binary.LittleEndian}
	neg := func(n uint64) []byte { return dwarf.AppendUleb128(nil, -n) }
	b := (&asm{a: 8}).u8(5).addr(0x60b1c0).b // DW_RLE_base_address
	b = append(b, 4)                         // DW_RLE_offset_pair
	b = append(b, neg(0xe6a40)...)
	b = append(b, neg(0xe6a00)...)
	b = append(b, 0) // DW_RLE_end_of_list
	rs, err := ReadRangeList(Sections{RngLists: b}, enc, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0] != (Range{Start: 0x60b1c0 - 0xe6a40, End: 0x60b1c0 - 0xe6a00}) {
		t.Errorf("ranges %#x, want [%#x, %#x)", rs, 0x60b1c0-0xe6a40, 0x60b1c0-0xe6a00)
	}
}
