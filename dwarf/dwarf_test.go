package dwarf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"runtime"
	"testing"
)

// Test vectors from DWARF 5 section 7.6, tables 7.7 (unsigned) and 7.8
// (signed) (figures 22 and 23 in DWARF 4), plus the 64-bit extremes. Each
// is checked in both directions: our encoder gives the bytes, and both
// decoders (Uleb128/Sleb128 and Buf.Uleb/Buf.Sleb) give the value back
// and consume exactly the encoding.
var ulebVectors = []struct {
	v   uint64
	enc []byte
}{
	{2, []byte{2}}, {127, []byte{127}}, {128, []byte{0x80, 1}}, {129, []byte{0x81, 1}},
	{130, []byte{0x82, 1}}, {12857, []byte{0xb9, 100}},
	{0, []byte{0}}, {624485, []byte{0xe5, 0x8e, 0x26}},
	{math.MaxUint64, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
}

var slebVectors = []struct {
	v   int64
	enc []byte
}{
	{2, []byte{2}}, {-2, []byte{0x7e}}, {127, []byte{0xff, 0}}, {-127, []byte{0x81, 0x7f}},
	{128, []byte{0x80, 1}}, {-128, []byte{0x80, 0x7f}}, {129, []byte{0x81, 1}}, {-129, []byte{0xff, 0x7e}},
	{0, []byte{0}}, {-1, []byte{0x7f}}, {63, []byte{0x3f}}, {64, []byte{0xc0, 0}}, {-64, []byte{0x40}}, {-65, []byte{0xbf, 0x7f}},
	{-123456, []byte{0xc0, 0xbb, 0x78}},
	// The longest encodings whose sign bit is the 63rd (9 bytes) and 64th
	// (10 bytes) bit: sign extension at every length.
	{-1 << 62, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40}},
	{1<<62 - 1, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f}},
	{1 << 62, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0xc0, 0}},
	{-1<<62 - 1, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xbf, 0x7f}},
	{-1 << 56, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f}},
	{math.MaxInt64, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0}},
	{math.MinInt64, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f}},
}

func TestLEB128Vectors(t *testing.T) {
	for _, c := range ulebVectors {
		if got := AppendUleb128(nil, c.v); string(got) != string(c.enc) || Uleb128Size(c.v) != len(c.enc) {
			t.Errorf("ULEB128(%d) = %x (size %d), want %x", c.v, got, Uleb128Size(c.v), c.enc)
		}
		if v, n := Uleb128(c.enc); v != c.v || n != len(c.enc) {
			t.Errorf("Uleb128(%x) = %d, %d; want %d, %d", c.enc, v, n, c.v, len(c.enc))
		}
		// A trailing byte must not be consumed.
		b := NewBuf(".s", binary.LittleEndian, append(append([]byte(nil), c.enc...), 0x55))
		if v := b.Uleb("n"); v != c.v || b.Off() != uint64(len(c.enc)) || b.Err() != nil {
			t.Errorf("Buf.Uleb(%x) = %d at offset %d, %v; want %d at %d", c.enc, v, b.Off(), b.Err(), c.v, len(c.enc))
		}
	}
	for _, c := range slebVectors {
		if got := AppendSleb128(nil, c.v); string(got) != string(c.enc) || Sleb128Size(c.v) != len(c.enc) {
			t.Errorf("SLEB128(%d) = %x (size %d), want %x", c.v, got, Sleb128Size(c.v), c.enc)
		}
		if v, n := Sleb128(c.enc); v != c.v || n != len(c.enc) {
			t.Errorf("Sleb128(%x) = %d, %d; want %d, %d", c.enc, v, n, c.v, len(c.enc))
		}
		b := NewBuf(".s", binary.LittleEndian, append(append([]byte(nil), c.enc...), 0x55))
		if v := b.Sleb("n"); v != c.v || b.Off() != uint64(len(c.enc)) || b.Err() != nil {
			t.Errorf("Buf.Sleb(%x) = %d at offset %d, %v; want %d at %d", c.enc, v, b.Off(), b.Err(), c.v, len(c.enc))
		}
	}
}

// refLEB128 is an independent LEB128 decoder (DWARF 5 section 7.6) on
// math/big: it accumulates every 7-bit group of the number at the start of
// b without limit, sign-extends from the last group when signed, and
// returns the low 64 bits (the project's documented truncation) and the
// length; n is 0 when b ends inside the number.
func refLEB128(b []byte, signed bool) (low uint64, n int) {
	v := new(big.Int)
	for i, c := range b {
		v.Or(v, new(big.Int).Lsh(big.NewInt(int64(c&0x7f)), uint(7*i)))
		if c&0x80 != 0 {
			continue
		}
		if signed && c&0x40 != 0 {
			v.Sub(v, new(big.Int).Lsh(big.NewInt(1), uint(7*(i+1))))
		}
		mask := new(big.Int).SetUint64(math.MaxUint64)
		return v.And(v, mask).Uint64(), i + 1
	}
	return 0, 0
}

func TestRefLEB128(t *testing.T) {
	for _, c := range ulebVectors {
		if v, n := refLEB128(c.enc, false); v != c.v || n != len(c.enc) {
			t.Errorf("refLEB128(%x) = %d, %d", c.enc, v, n)
		}
	}
	for _, c := range slebVectors {
		if v, n := refLEB128(c.enc, true); int64(v) != c.v || n != len(c.enc) {
			t.Errorf("refLEB128(%x, signed) = %d, %d", c.enc, int64(v), n)
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

// FuzzBuf checks Buf against independent readers of the same bytes:
// LEB128 against refLEB128 (math/big) and encoding/binary's Uvarint (the
// same encoding for numbers of at most 10 bytes), fixed-width fields and
// strings against plain slicing, and the encoders by round trip. ops picks
// the sequence of reads; a failing read must leave a *FormatError naming
// the section, the field and the offset the read started at.
func FuzzBuf(f *testing.F) {
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5, 6, 7, 8, 0x80, 0}, []byte{7, 0, 1, 2, 3, 4, 5, 6}, false)
	f.Add([]byte{8, 0, 0, 0, 0x80, 1, 0x7f, 'x', 0, 1, 2, 3, 4, 5}, []byte{7, 0, 1, 6, 2, 2}, false)
	f.Add([]byte{0xe5, 0x8e, 0x26, 0xc0, 0xbb, 0x78, 'a', 'b', 0, 9, 8, 7, 6}, []byte{0, 1, 6, 2, 3}, true)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, []byte{0}, false)
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f, 0x80}, []byte{1, 1}, false)
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f}, []byte{1, 1}, false)
	f.Fuzz(func(t *testing.T, data, ops []byte, big bool) {
		var order binary.ByteOrder = binary.LittleEndian
		if big {
			order = binary.BigEndian
		}
		// Whole-slice decoders against the references.
		for _, signed := range []bool{false, true} {
			want, wn := refLEB128(data, signed)
			var got uint64
			var n int
			if signed {
				s, sn := Sleb128(data)
				got, n = uint64(s), sn
			} else {
				got, n = Uleb128(data)
			}
			if n != wn || got != want {
				t.Fatalf("LEB128(%x, signed %v) = %#x, %d; reference %#x, %d", data, signed, got, n, want, wn)
			}
			if !signed && n > 0 && n <= 10 {
				if uv, un := binary.Uvarint(data); un > 0 && (uv != got || un != n) {
					t.Fatalf("Uleb128(%x) = %#x, %d; binary.Uvarint %#x, %d", data, got, n, uv, un)
				}
			}
		}
		// A sequence of Buf reads against a reference cursor.
		b := NewBuf(".fuzz", order, data)
		off, end := 0, len(data)
		fail := func(field string) {
			t.Helper()
			var fe *FormatError
			if !errors.As(b.Err(), &fe) || fe.Source != ".fuzz" || fe.Field != field || fe.Offset != uint64(off) {
				t.Fatalf("%s at %#x failed with %v; want a FormatError at .fuzz+%#x for %s", field, off, b.Err(), off, field)
			}
			if b.Len() != 0 {
				t.Fatalf("%d bytes left after an error", b.Len())
			}
		}
		for i, op := range ops {
			if i >= 64 {
				break
			}
			rest := data[off:end]
			field := fmt.Sprintf("f%d", i)
			fixed := func(p []byte) (v uint64) {
				for j := range p {
					k := j
					if big {
						k = len(p) - 1 - j
					}
					v |= uint64(p[k]) << (8 * j)
				}
				return v
			}
			switch op % 8 {
			case 0, 1:
				signed := op%8 == 1
				want, n := refLEB128(rest, signed)
				var got uint64
				if signed {
					got = uint64(b.Sleb(field))
				} else {
					got = b.Uleb(field)
				}
				if n == 0 {
					fail(field)
					return
				}
				if got != want {
					t.Fatalf("%s: LEB128 at %#x (signed %v) = %#x, reference %#x", field, off, signed, got, want)
				}
				off += n
			case 2, 3, 4, 5:
				size := 1 << (op%8 - 2)
				got := b.Uint(size, field)
				if len(rest) < size {
					fail(field)
					return
				}
				if want := fixed(rest[:size]); got != want {
					t.Fatalf("%s: %d-byte field at %#x = %#x, want %#x", field, size, off, got, want)
				}
				off += size
			case 6:
				got := b.CString(field)
				j := bytes.IndexByte(rest, 0)
				if j < 0 {
					fail(field)
					return
				}
				if string(got) != string(rest[:j]) {
					t.Fatalf("%s: string at %#x = %q, want %q", field, off, got, rest[:j])
				}
				off += j + 1
			case 7: // an initial length (DWARF 5 section 7.4), then Limit to it
				n, format := b.UnitLength(field)
				if len(rest) < 4 {
					fail(field)
					return
				}
				l, size, wantFormat := fixed(rest[:4]), 4, Format32
				switch {
				case l == 0xffffffff && len(rest) < 12:
					off += 4 // the 8-byte length is the failing read
					fail(field)
					return
				case l == 0xffffffff:
					l, size, wantFormat = fixed(rest[4:12]), 12, Format64
				case l >= 0xfffffff0:
					fail(field)
					return
				}
				if n != l || format != wantFormat {
					t.Fatalf("%s: initial length at %#x = %#x %v, want %#x %v", field, off, n, format, l, wantFormat)
				}
				off += size
				b.Limit(n, field)
				if n > uint64(end-off) {
					fail(field)
					return
				}
				end = off + int(n)
			}
			if b.Err() != nil || b.Off() != uint64(off) || b.Len() != end-off {
				t.Fatalf("%s: cursor at %#x (%d left, err %v), want %#x", field, b.Off(), b.Len(), b.Err(), off)
			}
		}
		// Round trips through the encoders, for a value taken from data.
		var raw [8]byte
		copy(raw[:], data)
		v := binary.LittleEndian.Uint64(raw[:])
		for _, shift := range []uint{0, 7, 29, 57, 63} {
			u := v >> shift
			enc := AppendUleb128(nil, u)
			if !bytes.Equal(enc, binary.AppendUvarint(nil, u)) || Uleb128Size(u) != len(enc) {
				t.Fatalf("ULEB128(%#x) = %x (size %d), binary.AppendUvarint %x", u, enc, Uleb128Size(u), binary.AppendUvarint(nil, u))
			}
			if got, n := refLEB128(enc, false); got != u || n != len(enc) {
				t.Fatalf("ULEB128(%#x) = %x decodes to %#x by the reference", u, enc, got)
			}
			if rb := NewBuf(".rt", order, enc); rb.Uleb("u") != u || rb.Len() != 0 {
				t.Fatalf("Buf.Uleb(ULEB128(%#x))", u)
			}
			s := int64(v) >> shift
			enc = AppendSleb128(nil, s)
			if got, n := refLEB128(enc, true); int64(got) != s || n != len(enc) || Sleb128Size(s) != len(enc) {
				t.Fatalf("SLEB128(%d) = %x (size %d) decodes to %d by the reference", s, enc, Sleb128Size(s), int64(got))
			}
			if rb := NewBuf(".rt", order, enc); rb.Sleb("s") != s || rb.Len() != 0 {
				t.Fatalf("Buf.Sleb(SLEB128(%d))", s)
			}
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

// TestStrTabGrowReset checks that Grow sizes the index of a table from
// NewStrTab (which already holds the empty string), so that the Adds it
// made room for do not allocate, and that a Reset table keeps that room
// and builds the same bytes and offsets again.
func TestStrTabGrowReset(t *testing.T) {
	names := make([]string, 1000)
	size := 1
	for i := range names {
		names[i] = fmt.Sprintf("proc%d", i)
		size += len(names[i]) + 1
	}
	s := NewStrTab()
	s.Grow(len(names), size)
	offs := make([]uint64, len(names))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i, name := range names {
		offs[i] = s.Add(name)
	}
	runtime.ReadMemStats(&after)
	if n := after.Mallocs - before.Mallocs; n != 0 {
		t.Errorf("%d Adds after Grow: %d allocations", len(names), n)
	}
	first := string(s.Bytes())
	for round := range 2 {
		s.Reset()
		if s.Size() != 0 {
			t.Fatalf("after Reset: %d bytes", s.Size())
		}
		runtime.ReadMemStats(&before)
		s.Add("")
		s.Grow(len(names), size)
		for i, name := range names {
			if off := s.Add(name); off != offs[i] {
				t.Fatalf("round %d: %q at %d, before at %d", round, name, off, offs[i])
			}
		}
		runtime.ReadMemStats(&after)
		if n := after.Mallocs - before.Mallocs; n != 0 {
			t.Errorf("round %d: Grow and %d Adds after Reset: %d allocations", round, len(names), n)
		}
		if string(s.Bytes()) != first {
			t.Errorf("round %d: bytes differ after Reset", round)
		}
	}
}

func TestConstantNames(t *testing.T) {
	if DW_TAG_subprogram.String() != "DW_TAG_subprogram" || DW_CFA_def_cfa.String() != "DW_CFA_def_cfa" || Tag(0x7777).String() != "DW_TAG_0x7777" {
		t.Errorf("names: %v %v %v", DW_TAG_subprogram, DW_CFA_def_cfa, Tag(0x7777))
	}
}

// plainOrder is a ByteOrder that is not a binary.AppendByteOrder.
type plainOrder struct{ binary.ByteOrder }

// TestAppendUint checks AppendUint against PutUint for every size, for the
// orders that append in place and for one that does not.
func TestAppendUint(t *testing.T) {
	for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian, plainOrder{binary.BigEndian}} {
		for _, size := range []int{0, 1, 2, 3, 4, 8} {
			v := uint64(0x0102030405060708)
			want := make([]byte, 8)
			PutUint(want, order, size, v)
			got := AppendUint([]byte{0xee}, order, size, v)
			if len(got) != 1+size || got[0] != 0xee || string(got[1:]) != string(want[:size]) {
				t.Errorf("%T size %d: AppendUint gave % x, want ee % x", order, size, got, want[:size])
			}
		}
	}
	buf := make([]byte, 0, 16)
	if n := testing.AllocsPerRun(100, func() { buf = AppendUint(buf[:0], binary.LittleEndian, 4, 7) }); n != 0 {
		t.Errorf("AppendUint to a buffer with room: %v allocations", n)
	}
}
