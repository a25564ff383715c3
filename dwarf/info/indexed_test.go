package info

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	edwarf "github.com/elfimage/elfimage/dwarf"
)

// indexedSample hand-assembles a DWARF 5 unit using the indexed and
// unusual forms clang emits (strx*, addrx*, rnglistx, loclistx,
// implicit_const, data16, indirect, ref_udata, ref_addr), with the side
// sections they index.
func indexedSample() (abbrev, info []byte, extra map[string][]byte) {
	le := binary.LittleEndian
	abbrev = []byte{
		1, 0x11, 1,
		0x72, 0x17, 0x73, 0x17, 0x74, 0x17, 0x8c, 0x01, 0x17,
		0x03, 0x0e, 0x11, 0x01, 0x12, 0x06,
		0x13, 0x21, 0x1d, // language implicit_const 0x1d
		0, 0,
		2, 0x2e, 0,
		0x03, 0x26, 0x11, 0x1b, 0x12, 0x0b, 0x02, 0x22, 0x1c, 0x1e,
		0x49, 0x16, 0x47, 0x10, 0x6e, 0x28, 0x52, 0x2a,
		0x55, 0x23, 0x5a, 0x25, 0x7d, 0x29, 0x76, 0x1a,
		0, 0,
		3, 0x24, 0,
		0x03, 0x27, 0x3e, 0x0b,
		0, 0,
		0,
	}
	u32 := func(b []byte, v uint32) []byte { return le.AppendUint32(b, v) }
	info = u32(nil, 85)
	info = append(info, 5, 0, 1, 8)
	info = u32(info, 0)
	// DIE 1 at 12: the bases, then only forms that need none (Go's
	// debug/dwarf resolves the root DIE's own indexed forms with base 0).
	info = append(info, 1)
	info = u32(info, 8)
	info = u32(info, 8)
	info = u32(info, 12)
	info = u32(info, 12)
	info = u32(info, 1)
	info = le.AppendUint64(info, 0x1000)
	info = u32(info, 0x20)
	// DIE 2 at 45
	info = append(info, 2, 1, 0, 1, 0x10, 0)
	info = append(info, bytes.Repeat([]byte{0xab}, 16)...)
	info = append(info, 0x15, 83)
	info = u32(info, 83)
	info = u32(info, 0)
	info = append(info, 0, 0)
	info = append(info, 0, 2, 1, 2)
	// DIE 3 at 83
	info = append(info, 3, 2, 0, 0, 5)
	info = append(info, 0)
	str := []byte("\x00cu.c\x00fn\x00x\x00")
	strOff := u32(nil, 16)
	strOff = append(strOff, 5, 0, 0, 0)
	for _, o := range []uint32{1, 6, 9} {
		strOff = u32(strOff, o)
	}
	addr := u32(nil, 20)
	addr = append(addr, 5, 0, 8, 0)
	addr = le.AppendUint64(addr, 0x1000)
	addr = le.AppendUint64(addr, 0x1010)
	list := u32(nil, 2+1+1+4+4+1)
	list = append(list, 5, 0, 8, 0)
	list = u32(list, 1)
	list = u32(list, 4)
	list = append(list, 0)
	extra = map[string][]byte{".debug_str": str, ".debug_str_offsets": strOff, ".debug_addr": addr, ".debug_rnglists": list, ".debug_loclists": list}
	return abbrev, info, extra
}

func TestIndexedForms(t *testing.T) {
	abbrev, info, extra := indexedSample()
	d, err := New(Sections{Info: info, Abbrev: abbrev, Str: extra[".debug_str"], StrOffsets: extra[".debug_str_offsets"],
		Addr: extra[".debug_addr"], RngLists: extra[".debug_rnglists"], LocLists: extra[".debug_loclists"]})
	if err != nil {
		t.Fatal(err)
	}
	r := d.Reader()
	cu, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	sub, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	bt, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	str := func(e *Entry, a edwarf.Attr, want string) {
		t.Helper()
		if s, ok := e.String(a); !ok || s != want {
			t.Errorf("%v %v = %q, want %q", e.Tag, a, s, want)
		}
	}
	num := func(e *Entry, a edwarf.Attr, class Class, want uint64) {
		t.Helper()
		f, ok := e.Val(a)
		if !ok || f.Class != class || f.Val != want {
			t.Errorf("%v %v = %+v, want %v %#x", e.Tag, a, f, class, want)
		}
	}
	str(cu, edwarf.DW_AT_name, "cu.c")
	num(cu, edwarf.DW_AT_low_pc, ClassAddress, 0x1000)
	num(cu, edwarf.DW_AT_high_pc, ClassConstant, 0x20)
	num(cu, edwarf.DW_AT_language, ClassConstant, 0x1d)
	num(sub, edwarf.DW_AT_ranges, ClassSecOffset, 16)
	num(sub, edwarf.DW_AT_call_return_pc, ClassAddress, 0x1010)
	str(sub, edwarf.DW_AT_description, "x")
	str(sub, edwarf.DW_AT_dwo_name, "x")
	str(sub, edwarf.DW_AT_name, "fn")
	str(sub, edwarf.DW_AT_linkage_name, "cu.c")
	num(sub, edwarf.DW_AT_low_pc, ClassAddress, 0x1010)
	num(sub, edwarf.DW_AT_entry_pc, ClassAddress, 0x1000)
	num(sub, edwarf.DW_AT_location, ClassSecOffset, 16)
	num(sub, edwarf.DW_AT_type, ClassReference, 83)
	num(sub, edwarf.DW_AT_specification, ClassReference, 83)
	if f, _ := sub.Val(edwarf.DW_AT_const_value); f.Class != ClassConstant || len(f.Block) != 16 {
		t.Errorf("data16 = %+v", f)
	}
	if f, _ := sub.Val(edwarf.DW_AT_type); f.Form != edwarf.DW_FORM_ref_udata {
		t.Errorf("indirect form read as %v", f.Form)
	}
	str(bt, edwarf.DW_AT_name, "x")
	if bt.Offset != 83 {
		t.Errorf("base type at %#x", bt.Offset)
	}
	if lo, hi, ok := sub.PCRange(); !ok || lo != 0x1010 || hi != 0x1020 {
		t.Errorf("PCRange = %#x %#x %v", lo, hi, ok)
	}
	u := d.Units()[0]
	if u.StrOffsetsBase != 8 || u.AddrBase != 8 || u.RngListsBase != 12 || u.LocListsBase != 12 {
		t.Errorf("bases %+v", u)
	}
	// Go's debug/dwarf agrees on every value it resolves.
	delete(extra, ".debug_str")
	compareGo(t, binary.LittleEndian, info, abbrev, []byte("\x00cu.c\x00fn\x00x\x00"), extra)
	// Without .debug_str_offsets the strx forms fail with a FormatError
	// naming the section.
	d2, err := New(Sections{Info: info, Abbrev: abbrev, Str: []byte("\x00cu.c\x00fn\x00x\x00")})
	if err != nil {
		t.Fatal(err)
	}
	r2 := d2.Reader()
	for {
		e, err := r2.Next()
		if err != nil {
			fe, ok := err.(*edwarf.FormatError)
			if !ok || fe.Source != ".debug_info" || fe.Offset != 46 || !strings.Contains(fe.Msg, ".debug_str_offsets") {
				t.Errorf("error %v", err)
			}
			break
		}
		if e == nil {
			t.Fatal("strx without .debug_str_offsets: no error")
		}
	}
}
