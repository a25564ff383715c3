package dwarf

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

// Test vectors from DWARF 5 section 7.6, figures 7.3 and 7.4.
func TestLEB128Vectors(t *testing.T) {
	for _, c := range []struct {
		v    uint64
		want []byte
	}{{2, []byte{2}}, {127, []byte{127}}, {128, []byte{0x80, 1}}, {129, []byte{0x81, 1}}, {130, []byte{0x82, 1}}, {12857, []byte{0xb9, 100}}} {
		if got := AppendUleb128(nil, c.v); string(got) != string(c.want) || Uleb128Size(c.v) != len(c.want) {
			t.Errorf("ULEB128(%d) = %x, want %x", c.v, got, c.want)
		}
	}
	for _, c := range []struct {
		v    int64
		want []byte
	}{{2, []byte{2}}, {-2, []byte{0x7e}}, {127, []byte{0xff, 0}}, {-127, []byte{0x81, 0x7f}}, {128, []byte{0x80, 1}}, {-128, []byte{0x80, 0x7f}}, {129, []byte{0x81, 1}}, {-129, []byte{0xff, 0x7e}}} {
		if got := AppendSleb128(nil, c.v); string(got) != string(c.want) || Sleb128Size(c.v) != len(c.want) {
			t.Errorf("SLEB128(%d) = %x, want %x", c.v, got, c.want)
		}
	}
}

func TestLEB128RoundTrip(t *testing.T) {
	for _, v := range []uint64{0, 1, 63, 64, 127, 128, 1 << 32, math.MaxInt64, math.MaxUint64} {
		b := AppendUleb128(nil, v)
		if got, n := Uleb128(b); got != v || n != len(b) {
			t.Errorf("Uleb128(%x) = %d, %d", b, got, n)
		}
		s := int64(v)
		b = AppendSleb128(nil, s)
		if got, n := Sleb128(b); got != s || n != len(b) {
			t.Errorf("Sleb128(%x) = %d, %d; want %d", b, got, n, s)
		}
		if _, n := Uleb128(b[:len(b)-1]); len(b) > 1 && n != 0 {
			t.Errorf("truncated %x decoded", b)
		}
	}
}

func TestBufStickyError(t *testing.T) {
	b := NewBuf(".debug_test", binary.LittleEndian, []byte{1, 2, 3, 0x80})
	if v := b.U16("first"); v != 0x201 {
		t.Fatalf("U16 = %#x", v)
	}
	b.U32("second") // only 2 bytes left
	b.U8("third")
	var fe *FormatError
	if !errors.As(b.Err(), &fe) || fe.Field != "second" || fe.Offset != 2 || fe.Source != ".debug_test" {
		t.Fatalf("error %v, want FormatError at .debug_test+0x2 for field second", b.Err())
	}
	if b.Len() != 0 || b.U64("x") != 0 {
		t.Errorf("cursor not empty after error")
	}
	b = NewBuf(".s", binary.LittleEndian, []byte{0x80, 0x80})
	b.Uleb("n")
	if b.Err() == nil {
		t.Errorf("truncated ULEB128 accepted")
	}
	b = NewBuf(".s", binary.LittleEndian, []byte{0xf0, 0xff, 0xff, 0xff})
	b.UnitLength("unit_length")
	if b.Err() == nil {
		t.Errorf("reserved unit length accepted")
	}
	if _, err := CStringAt(".s", []byte("ab"), 0, "name"); err == nil {
		t.Errorf("unterminated string accepted")
	}
}

func FuzzBuf(f *testing.F) {
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5, 6, 7, 8, 0x80, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		b := NewBuf(".fuzz", binary.LittleEndian, data)
		for b.Len() > 0 {
			n, _ := b.UnitLength("len")
			b.Limit(n, "unit")
			b.Uleb("u")
			b.Sleb("s")
			b.CString("c")
			b.Bytes(uint64(b.U8("n")), "b")
		}
	})
}

func TestStrTab(t *testing.T) {
	s := NewStrTab()
	a, b, c := s.Add("abc"), s.Add("x"), s.Add("abc")
	if a != 1 || b != 5 || c != a || string(s.Bytes()) != "\x00abc\x00x\x00" {
		t.Errorf("offsets %d %d %d, bytes %q", a, b, c, s.Bytes())
	}
}

func TestConstantNames(t *testing.T) {
	if DW_TAG_subprogram.String() != "DW_TAG_subprogram" || DW_CFA_def_cfa.String() != "DW_CFA_def_cfa" || Tag(0x7777).String() != "DW_TAG_0x7777" {
		t.Errorf("names: %v %v %v", DW_TAG_subprogram, DW_CFA_def_cfa, Tag(0x7777))
	}
}
