package loc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/elfimage/elfimage/dwarf"
)

func fuzzEnc(v5, a8 bool) dwarf.Encoding {
	e := dwarf.Encoding{Version: 4, Format: dwarf.Format32, AddrSize: 4, ByteOrder: binary.LittleEndian}
	if v5 {
		e.Version = 5
	}
	if a8 {
		e.AddrSize = 8
	}
	return e
}

func isFormatError(t *testing.T, what string, err error) {
	t.Helper()
	var fe *dwarf.FormatError
	if err != nil && !errors.As(err, &fe) {
		t.Fatalf("%s: %T %v is not a FormatError", what, err, err)
	}
}

// seedLists adds writer output (with the offset of each list) as seeds.
func seedLists(f *testing.F, v5, isLoc bool) {
	addr := (&asm{a: 8}).u8(0, 0, 0, 0, 5, 0, 8, 0).addr(0x1000).addr(0x2000).b
	for _, a8 := range []bool{false, true} {
		enc := fuzzEnc(v5, a8)
		var data []byte
		var offs []uint64
		if isLoc {
			b, _ := NewLocLists(enc, cuBase)
			for _, l := range sampleLocLists() {
				off, err := b.AddList(l)
				if err != nil {
					f.Fatal(err)
				}
				offs = append(offs, off)
			}
			data = b.Bytes()
		} else {
			b, _ := NewRangeLists(enc, cuBase)
			for _, l := range sampleRangeLists() {
				off, err := b.AddList(l)
				if err != nil {
					f.Fatal(err)
				}
				offs = append(offs, off)
			}
			data = b.Bytes()
		}
		for _, off := range offs {
			f.Add(data, addr, off, uint64(8), a8, uint64(0x401008))
		}
	}
	if v5 {
		// Every kind, indexed ones included.
		ll := (&asm{a: 8}).u8(1).uleb(1).u8(4).uleb(0).uleb(4).uleb(1).u8(0x50).u8(2).uleb(0).uleb(1).uleb(0).
			u8(3).uleb(1).uleb(3).uleb(0).u8(5).uleb(1).u8(0x51).u8(7).addr(1).addr(2).uleb(0).u8(0).b
		f.Add(ll, addr, uint64(0), uint64(8), true, uint64(0x2001))
	}
}

// checkLists is the property every list fuzzer checks: no panic,
// FormatErrors only, well-formed entries, the allocation-free forms agree
// with the slice form, and what was read re-encodes to the same entries.
func checkLists(t *testing.T, v5, isLoc bool, data, addr []byte, off, addrBase uint64, a8 bool, pc uint64) {
	enc := fuzzEnc(v5, a8)
	sec := Sections{Loc: data, LocLists: data, Ranges: data, RngLists: data, Addr: addr, AddrBase: addrBase}
	var es []Entry
	var err error
	if isLoc {
		es, err = ReadLocList(sec, enc, off, cuBase)
		isFormatError(t, "ReadLocList", err)
		expr, ok, err2 := LocationAt(sec, enc, off, cuBase, pc)
		isFormatError(t, "LocationAt", err2)
		// LocationAt stops at the first match, before a later error.
		if (err2 != nil && err == nil) || (err != nil && err2 == nil && !ok) {
			t.Fatalf("ReadLocList err %v, LocationAt err %v", err, err2)
		}
		if err == nil {
			want, wantOK := scan(es, pc)
			if ok != wantOK || !bytes.Equal(expr, want) {
				t.Fatalf("LocationAt(%#x) = %x %v, scan gives %x %v", pc, expr, ok, want, wantOK)
			}
		}
	} else {
		var rs []Range
		rs, err = ReadRangeList(sec, enc, off, cuBase)
		isFormatError(t, "ReadRangeList", err)
		in, err2 := RangeContains(sec, enc, off, cuBase, pc)
		isFormatError(t, "RangeContains", err2)
		if (err2 != nil && err == nil) || (err != nil && err2 == nil && !in) {
			t.Fatalf("ReadRangeList err %v, RangeContains err %v", err, err2)
		}
		want := false
		for _, r := range rs {
			es = append(es, Entry{Start: r.Start, End: r.End})
			want = want || (r.Start <= pc && pc < r.End)
		}
		if err == nil && in != want {
			t.Fatalf("RangeContains(%#x) = %v, want %v", pc, in, want)
		}
	}
	if err != nil {
		return
	}
	for _, e := range es {
		if !e.Default && e.Start >= e.End {
			t.Fatalf("entry %+v: empty or reversed", e)
		}
	}
	// Re-encode what was read (when every address fits the writer's
	// rule) and read it back.
	for _, e := range es {
		if e.End > maxAddr(enc.AddrSize) || (!v5 && len(e.Expr) > 0xffff) {
			return
		}
	}
	var out []byte
	var o uint64
	if isLoc {
		b, _ := NewLocLists(enc, cuBase)
		o, err = b.AddList(es)
		out = b.Bytes()
	} else {
		b, _ := NewRangeLists(enc, cuBase)
		rs := make([]Range, len(es))
		for i, e := range es {
			rs[i] = Range{e.Start, e.End}
		}
		o, err = b.AddList(rs)
		out = b.Bytes()
	}
	if err != nil {
		t.Fatalf("re-encoding %+v: %v", es, err)
	}
	sec2 := Sections{Loc: out, LocLists: out, Ranges: out, RngLists: out}
	var again []Entry
	if isLoc {
		again, err = ReadLocList(sec2, enc, o, cuBase)
	} else {
		var rs []Range
		rs, err = ReadRangeList(sec2, enc, o, cuBase)
		for _, r := range rs {
			again = append(again, Entry{Start: r.Start, End: r.End})
		}
	}
	if err != nil || len(again) != len(es) {
		t.Fatalf("re-read: %v, %d entries, want %d", err, len(again), len(es))
	}
	for i := range es {
		if es[i].Start != again[i].Start || es[i].End != again[i].End || es[i].Default != again[i].Default || !bytes.Equal(es[i].Expr, again[i].Expr) {
			t.Fatalf("entry %d: re-read %+v, want %+v", i, again[i], es[i])
		}
	}
}

// FuzzLocLists reads arbitrary .debug_loclists (and .debug_addr) bytes.
func FuzzLocLists(f *testing.F) {
	seedLists(f, true, true)
	f.Fuzz(func(t *testing.T, data, addr []byte, off, addrBase uint64, a8 bool, pc uint64) {
		checkLists(t, true, true, data, addr, off, addrBase, a8, pc)
	})
}

// FuzzRngLists reads arbitrary .debug_rnglists (and .debug_addr) bytes.
func FuzzRngLists(f *testing.F) {
	seedLists(f, true, false)
	f.Fuzz(func(t *testing.T, data, addr []byte, off, addrBase uint64, a8 bool, pc uint64) {
		checkLists(t, true, false, data, addr, off, addrBase, a8, pc)
	})
}

// FuzzLoc4 reads arbitrary DWARF 2–4 .debug_loc bytes.
func FuzzLoc4(f *testing.F) {
	seedLists(f, false, true)
	f.Fuzz(func(t *testing.T, data, addr []byte, off, addrBase uint64, a8 bool, pc uint64) {
		checkLists(t, false, true, data, addr, off, addrBase, a8, pc)
	})
}

// FuzzRanges4 reads arbitrary DWARF 2–4 .debug_ranges bytes.
func FuzzRanges4(f *testing.F) {
	seedLists(f, false, false)
	f.Fuzz(func(t *testing.T, data, addr []byte, off, addrBase uint64, a8 bool, pc uint64) {
		checkLists(t, false, false, data, addr, off, addrBase, a8, pc)
	})
}

// FuzzAranges reads arbitrary .debug_aranges bytes; what it reads must
// re-encode to the same sets.
func FuzzAranges(f *testing.F) {
	for _, enc := range encodings() {
		if enc.ByteOrder != binary.LittleEndian {
			continue
		}
		set, err := EncodeAranges(enc, 0x30, sampleRangeLists()[3])
		if err != nil {
			f.Fatal(err)
		}
		f.Add(append(set, set...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sets, err := ReadAranges(data, binary.LittleEndian)
		isFormatError(t, "ReadAranges", err)
		if err != nil {
			return
		}
		for _, s := range sets {
			if s.Enc.AddrSize != 4 && s.Enc.AddrSize != 8 {
				continue
			}
			ok := true
			for _, r := range s.Ranges {
				ok = ok && r.Start < r.End && r.End <= maxAddr(s.Enc.AddrSize)
			}
			if !ok {
				continue
			}
			b, err := EncodeAranges(s.Enc, s.CUOffset, s.Ranges)
			if err != nil {
				t.Fatalf("re-encoding %+v: %v", s, err)
			}
			again, err := ReadAranges(b, binary.LittleEndian)
			if err != nil || len(again) != 1 || !reflect.DeepEqual(again[0].Ranges, s.Ranges) || again[0].CUOffset != s.CUOffset {
				t.Fatalf("re-read %+v, %v; want %+v", again, err, s)
			}
		}
	})
}
