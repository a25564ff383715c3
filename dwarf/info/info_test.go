package info

import (
	"bytes"
	"debug/dwarf"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	edwarf "github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// sampleUnit builds a compile unit like the linker's: a CU with two
// subprograms, parameters with locations, a base type referenced from
// both, constants of every size and a nested lexical block.
func sampleUnit(enc edwarf.Encoding, name string) *Unit {
	intType := &DIE{Tag: edwarf.DW_TAG_base_type, Attrs: []Attr{
		{edwarf.DW_AT_name, String("int")},
		{edwarf.DW_AT_byte_size, Udata(8)},
		{edwarf.DW_AT_encoding, Udata(5)},
	}}
	highPC := Udata(0x40)
	if enc.Version < 4 {
		highPC = Addr(0x401040)
	}
	f1 := &DIE{Tag: edwarf.DW_TAG_subprogram, Attrs: []Attr{
		{edwarf.DW_AT_name, String(name + "_main")},
		{edwarf.DW_AT_low_pc, Addr(0x401000)},
		{edwarf.DW_AT_high_pc, highPC},
		{edwarf.DW_AT_frame_base, Exprloc([]byte{0x9c})}, // DW_OP_call_frame_cfa
		{edwarf.DW_AT_external, Flag(true)},
		{edwarf.DW_AT_type, Value{}}, // patched below
		{edwarf.DW_AT_decl_line, Udata(70000)},
	}, Children: []*DIE{
		{Tag: edwarf.DW_TAG_formal_parameter, Attrs: []Attr{{edwarf.DW_AT_name, String("x")}, {edwarf.DW_AT_location, Exprloc([]byte{0x91, 0x68})}}},
		{Tag: edwarf.DW_TAG_lexical_block, Children: []*DIE{
			{Tag: edwarf.DW_TAG_variable, Attrs: []Attr{{edwarf.DW_AT_name, String("neg")}, {edwarf.DW_AT_const_value, Sdata(-3)}}},
			{Tag: edwarf.DW_TAG_variable, Attrs: []Attr{{edwarf.DW_AT_name, String("big")}, {edwarf.DW_AT_const_value, Sdata(1 << 40)}}},
			{Tag: edwarf.DW_TAG_variable, Attrs: []Attr{{edwarf.DW_AT_name, String("u64")}, {edwarf.DW_AT_const_value, Udata(1 << 63)}}},
			{Tag: edwarf.DW_TAG_variable, Attrs: []Attr{{edwarf.DW_AT_name, String("s200")}, {edwarf.DW_AT_const_value, Sdata(200)}}},
			// A location longer than 127 bytes: its exprloc length takes
			// two ULEB128 bytes.
			{Tag: edwarf.DW_TAG_variable, Attrs: []Attr{{edwarf.DW_AT_name, String("long")}, {edwarf.DW_AT_location, Exprloc(bytes.Repeat([]byte{0x96}, 200))}}},
		}},
	}}
	f1.Attrs[5].Value = Ref(intType)
	f2 := &DIE{Tag: edwarf.DW_TAG_subprogram, Attrs: []Attr{
		{edwarf.DW_AT_name, String(name + "_helper")},
		{edwarf.DW_AT_low_pc, Addr(0x401040)},
		{edwarf.DW_AT_high_pc, Addr(0x401050)},
		{edwarf.DW_AT_artificial, Flag(true)},
		{edwarf.DW_AT_external, Flag(false)},
		{edwarf.DW_AT_type, Ref(intType)},
		{edwarf.DW_AT_description, String("a docstring")},
		{edwarf.DW_AT_location, Block(bytes.Repeat([]byte{0x96}, 300))},
	}}
	lowCU, highCU := Addr(0x401000), Udata(0x50)
	if enc.Version < 4 {
		highCU = Addr(0x401050)
	}
	root := &DIE{Tag: edwarf.DW_TAG_compile_unit, Attrs: []Attr{
		{edwarf.DW_AT_producer, String("elfimage test")},
		{edwarf.DW_AT_language, Udata(0x8001)},
		{edwarf.DW_AT_name, String(name + ".scm")},
		{edwarf.DW_AT_comp_dir, String("/src")},
		{edwarf.DW_AT_low_pc, lowCU},
		{edwarf.DW_AT_high_pc, highCU},
		{edwarf.DW_AT_stmt_list, SecOffset(0x1234)},
	}, Children: []*DIE{intType, f1, f2}}
	return &Unit{Enc: enc, Root: root}
}

// flatten lists the DIEs of a tree in pre-order with null entries (tag 0).
func flatten(d *DIE, out []*DIE) []*DIE {
	out = append(out, d)
	if len(d.Children) > 0 {
		for _, c := range d.Children {
			out = flatten(c, out)
		}
		out = append(out, nil)
	}
	return out
}

func encodings() []edwarf.Encoding {
	var es []edwarf.Encoding
	for _, v := range []uint16{2, 3, 4, 5} {
		for _, f := range []edwarf.Format{edwarf.Format32, edwarf.Format64} {
			for _, as := range []uint8{4, 8} {
				es = append(es, edwarf.Encoding{Version: v, Format: f, AddrSize: as, ByteOrder: binary.LittleEndian})
			}
		}
	}
	es = append(es, edwarf.Encoding{Version: 5, Format: edwarf.Format32, AddrSize: 8, ByteOrder: binary.BigEndian})
	return es
}

func TestRoundTrip(t *testing.T) {
	for _, enc := range encodings() {
		t.Run(fmt.Sprintf("v%d/%v/addr%d/%v", enc.Version, enc.Format, enc.AddrSize, enc.ByteOrder), func(t *testing.T) {
			units := []*Unit{sampleUnit(enc, "a"), sampleUnit(enc, "b")}
			str := edwarf.NewStrTab()
			info, abbrev, err := Encode(units, str)
			if err != nil {
				t.Fatal(err)
			}
			if units[0].Offset != 0 || units[1].Offset == 0 {
				t.Errorf("unit offsets %#x %#x", units[0].Offset, units[1].Offset)
			}
			// Both units share the abbreviations: the table holds one
			// declaration per distinct shape only.
			if a2, _, _ := encodeOne(t, sampleUnit(enc, "a")); len(a2) != len(abbrev) {
				t.Errorf("abbrev table %d bytes for two units, %d for one", len(abbrev), len(a2))
			}
			d, err := New(Sections{Info: info, Abbrev: abbrev, Str: str.Bytes(), Order: enc.ByteOrder})
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Units()) != 2 {
				t.Fatalf("%d units", len(d.Units()))
			}
			r := d.Reader()
			for ui, u := range units {
				hdr := d.Units()[ui]
				if hdr.Offset != u.Offset || hdr.Enc.Version != enc.Version || hdr.Enc.Format != enc.Format || hdr.Enc.AddrSize != enc.AddrSize {
					t.Errorf("unit %d header %+v", ui, hdr)
				}
				dieOff := map[*DIE]uint64{}
				var got []*Entry
				for _, want := range flatten(u.Root, nil) {
					e, err := r.Next()
					if err != nil || e == nil {
						t.Fatalf("Next: %v, %v", e, err)
					}
					got = append(got, e)
					if want == nil {
						if e.Tag != 0 {
							t.Errorf("entry at %#x: tag %v, want null", e.Offset, e.Tag)
						}
						continue
					}
					dieOff[want] = e.Offset
					if e.Tag != want.Tag || e.Children != (len(want.Children) > 0) || len(e.Fields) != len(want.Attrs) {
						t.Fatalf("entry at %#x: %v children %v %d fields; want %v %d", e.Offset, e.Tag, e.Children, len(e.Fields), want.Tag, len(want.Attrs))
					}
				}
				i := 0
				for _, want := range flatten(u.Root, nil) {
					e := got[i]
					i++
					if want == nil {
						continue
					}
					for j, a := range want.Attrs {
						checkField(t, e.Fields[j], a, dieOff, enc)
					}
				}
			}
			if e, err := r.Next(); e != nil || err != nil {
				t.Errorf("after the last unit: %v, %v", e, err)
			}
			compareGo(t, enc.ByteOrder, info, abbrev, str.Bytes(), nil)
		})
	}
}

func encodeOne(t *testing.T, u *Unit) (abbrev, info []byte, str *edwarf.StrTab) {
	str = edwarf.NewStrTab()
	info, abbrev, err := Encode([]*Unit{u}, str)
	if err != nil {
		t.Fatal(err)
	}
	return abbrev, info, str
}

func checkField(t *testing.T, f Field, a Attr, dieOff map[*DIE]uint64, enc edwarf.Encoding) {
	t.Helper()
	v := a.Value
	if f.Attr != a.Name {
		t.Errorf("attribute %v, want %v", f.Attr, a.Name)
	}
	want := v.class
	if enc.Version < 4 && v.class == ClassExprloc {
		want = ClassBlock
	}
	if f.Class != want {
		t.Errorf("%v: class %v (form %v), want %v", a.Name, f.Class, f.Form, want)
		return
	}
	switch v.class {
	case ClassString:
		if f.Str != v.str {
			t.Errorf("%v = %q, want %q", a.Name, f.Str, v.str)
		}
	case ClassAddress, ClassSecOffset, ClassFlag:
		if f.Val != v.u {
			t.Errorf("%v = %#x, want %#x", a.Name, f.Val, v.u)
		}
	case ClassConstant:
		if v.signed && f.Int != v.s || !v.signed && f.Val != v.u {
			t.Errorf("%v = %d/%d (form %v), want %+v", a.Name, f.Int, f.Val, f.Form, v)
		}
	case ClassExprloc, ClassBlock:
		if !bytes.Equal(f.Block, v.b) {
			t.Errorf("%v = % x, want % x", a.Name, f.Block, v.b)
		}
	case ClassReference:
		if f.Val != dieOff[v.ref] {
			t.Errorf("%v = %#x, want %#x", a.Name, f.Val, dieOff[v.ref])
		}
	}
}

// compareGo reads the same sections with Go's debug/dwarf and compares
// every entry: offset, tag, children, attributes and values.
func compareGo(t testing.TB, order binary.ByteOrder, info, abbrev, str []byte, extra map[string][]byte) {
	t.Helper()
	gd, err := dwarf.New(abbrev, nil, nil, info, nil, nil, nil, str)
	if err != nil {
		t.Fatalf("debug/dwarf: %v", err)
	}
	sec := Sections{Info: info, Abbrev: abbrev, Str: str, Order: order}
	for name, data := range extra {
		gd.AddSection(name, data)
		switch name {
		case ".debug_line_str":
			sec.LineStr = data
		case ".debug_str_offsets":
			sec.StrOffsets = data
		case ".debug_addr":
			sec.Addr = data
		case ".debug_rnglists":
			sec.RngLists = data
		case ".debug_loclists":
			sec.LocLists = data
		}
	}
	d, err := New(sec)
	if err != nil {
		t.Fatal(err)
	}
	if msg := diffGo(d, gd, true); msg != "" {
		t.Error(msg)
	}
}

// diffGo walks both readers in step and returns a description of the
// first difference, or "". With strict unset, an error from either reader
// ends the walk without a difference.
func diffGo(d *Data, gd *dwarf.Data, strict bool) string {
	r, gr := d.Reader(), gd.Reader()
	for n := 0; ; n++ {
		e, err := r.Next()
		ge, gerr := gr.Next()
		if err != nil || gerr != nil {
			if strict {
				return fmt.Sprintf("entry %d: ours %v, debug/dwarf %v", n, err, gerr)
			}
			return ""
		}
		if e == nil || ge == nil {
			if (e == nil) != (ge == nil) {
				return fmt.Sprintf("entry %d: ours %v, debug/dwarf %v", n, e, ge)
			}
			return ""
		}
		if e.Tag == 0 && ge.Tag == 0 && !ge.Children && len(ge.Field) == 0 {
			continue // debug/dwarf gives null entries offset 0
		}
		if e.Offset != uint64(ge.Offset) || uint32(e.Tag) != uint32(ge.Tag) || e.Children != ge.Children || len(e.Fields) != len(ge.Field) {
			return fmt.Sprintf("entry %d: ours %+v; debug/dwarf %+v", n, e, ge)
		}
		for i, f := range e.Fields {
			gf := ge.Field[i]
			if uint32(f.Attr) != uint32(gf.Attr) {
				return fmt.Sprintf("entry at %#x field %d: %v; debug/dwarf %v", e.Offset, i, f.Attr, gf.Attr)
			}
			ok := true
			switch v := gf.Val.(type) {
			case string:
				ok = f.Class == ClassString && f.Str == v
			case int64:
				ok = f.Int == v || f.Class == ClassSecOffset && f.Val == uint64(v)
			case uint64:
				ok = f.Val == v
			case bool:
				// debug/dwarf reads DW_FORM_flag as "== 1"; DWARF 5
				// section 7.5.5 makes any non-zero value true.
				ok = f.Class == ClassFlag && ((f.Val == 1) == v || f.Form == edwarf.DW_FORM_flag && !v)
			case dwarf.Offset:
				// debug/dwarf's Offset is 32 bits: a DW_FORM_ref_addr
				// of a version 2 unit with 8-byte addresses (or of the
				// 64-bit format) is truncated there.
				ok = f.Val == uint64(v) || f.Val > 0xffffffff && uint32(f.Val) == uint32(v)
			case []byte:
				ok = bytes.Equal(f.Block, v)
			}
			if f.Form == edwarf.DW_FORM_loclistx {
				ok = true // debug/dwarf keeps the index, we resolve it
			}
			if !ok {
				return fmt.Sprintf("entry at %#x %v: ours %+v; debug/dwarf %#v (class %v)", e.Offset, f.Attr, f, gf.Val, gf.Class)
			}
		}
	}
}

func TestSkipChildrenAndSeek(t *testing.T) {
	u := sampleUnit(edwarf.Default64, "a")
	abbrev, info, str := encodeOne(t, u)
	d, err := New(Sections{Info: info, Abbrev: abbrev, Str: str.Bytes()})
	if err != nil {
		t.Fatal(err)
	}
	r := d.Reader()
	var names []string
	var f1Off uint64
	for {
		e, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e == nil {
			break
		}
		if e.Tag == edwarf.DW_TAG_subprogram {
			n, _ := e.String(edwarf.DW_AT_name)
			names = append(names, n)
			if f1Off == 0 {
				f1Off = e.Offset
			}
			r.SkipChildren()
		}
		if e.Tag == edwarf.DW_TAG_variable || e.Tag == edwarf.DW_TAG_formal_parameter {
			t.Errorf("SkipChildren did not skip %v", e.Tag)
		}
	}
	if fmt.Sprint(names) != "[a_main a_helper]" {
		t.Errorf("subprograms %v", names)
	}
	r.Seek(f1Off)
	e, err := r.Next()
	if err != nil || e.Offset != f1Off {
		t.Fatalf("Seek(%#x): %+v, %v", f1Off, e, err)
	}
	if lo, hi, ok := e.PCRange(); !ok || lo != 0x401000 || hi != 0x401040 {
		t.Errorf("PCRange = %#x, %#x, %v", lo, hi, ok)
	}
	r.Seek(0)
	if e, err := r.Next(); err != nil || e.Tag != edwarf.DW_TAG_compile_unit {
		t.Errorf("Seek(0): %+v, %v", e, err)
	}
	r.Seek(5) // inside the unit header
	if _, err := r.Next(); err == nil {
		t.Error("Seek into a unit header: no error")
	}
}

func TestEncodeErrors(t *testing.T) {
	other := &DIE{Tag: edwarf.DW_TAG_base_type}
	shared := &DIE{Tag: edwarf.DW_TAG_variable}
	cases := map[string]*Unit{
		"ref outside unit": {Enc: edwarf.Default64, Root: &DIE{Tag: edwarf.DW_TAG_compile_unit, Attrs: []Attr{{edwarf.DW_AT_type, Ref(other)}}}},
		"addr too wide": {Enc: edwarf.Encoding{Version: 5, Format: edwarf.Format32, AddrSize: 4, ByteOrder: binary.LittleEndian},
			Root: &DIE{Tag: edwarf.DW_TAG_compile_unit, Attrs: []Attr{{edwarf.DW_AT_low_pc, Addr(1 << 32)}}}},
		"DIE twice":   {Enc: edwarf.Default64, Root: &DIE{Tag: edwarf.DW_TAG_compile_unit, Children: []*DIE{shared, shared}}},
		"cycle":       {Enc: edwarf.Default64, Root: func() *DIE { d := &DIE{Tag: edwarf.DW_TAG_compile_unit}; d.Children = []*DIE{d}; return d }()},
		"zero value":  {Enc: edwarf.Default64, Root: &DIE{Tag: edwarf.DW_TAG_compile_unit, Attrs: []Attr{{edwarf.DW_AT_name, Value{}}}}},
		"NUL string":  {Enc: edwarf.Default64, Root: &DIE{Tag: edwarf.DW_TAG_compile_unit, Attrs: []Attr{{edwarf.DW_AT_name, String("a\x00")}}}},
		"high_pc v3":  {Enc: edwarf.Encoding{Version: 3, Format: edwarf.Format32, AddrSize: 8, ByteOrder: binary.LittleEndian}, Root: &DIE{Tag: edwarf.DW_TAG_compile_unit, Attrs: []Attr{{edwarf.DW_AT_high_pc, Udata(4)}}}},
		"no root":     {Enc: edwarf.Default64},
		"bad version": {Enc: edwarf.Encoding{Version: 7, Format: edwarf.Format32, AddrSize: 8, ByteOrder: binary.LittleEndian}, Root: &DIE{Tag: edwarf.DW_TAG_compile_unit}},
	}
	for name, u := range cases {
		if _, _, err := Encode([]*Unit{u}, edwarf.NewStrTab()); !errors.Is(err, ErrInvalidUnit) {
			t.Errorf("%s: err = %v, want ErrInvalidUnit", name, err)
		}
	}
}

// TestForms checks the form the encoder picks for each value.
func TestForms(t *testing.T) {
	v5, v3 := edwarf.Default64, edwarf.Encoding{Version: 3, Format: edwarf.Format32, AddrSize: 8, ByteOrder: binary.LittleEndian}
	for _, c := range []struct {
		enc  edwarf.Encoding
		v    Value
		form edwarf.Form
	}{
		{v5, Udata(0), edwarf.DW_FORM_data1},
		{v5, Udata(255), edwarf.DW_FORM_data1},
		{v5, Udata(256), edwarf.DW_FORM_data2},
		{v5, Udata(70000), edwarf.DW_FORM_udata},
		{v5, Udata(1 << 30), edwarf.DW_FORM_data4},
		{v5, Udata(1 << 63), edwarf.DW_FORM_data8},
		{v3, Udata(1 << 30), edwarf.DW_FORM_udata},
		{v5, Sdata(127), edwarf.DW_FORM_data1},
		{v5, Sdata(128), edwarf.DW_FORM_data2},
		{v5, Sdata(-1), edwarf.DW_FORM_sdata},
		{v5, Sdata(1 << 40), edwarf.DW_FORM_sdata},
		{v5, Flag(true), edwarf.DW_FORM_flag_present},
		{v3, Flag(true), edwarf.DW_FORM_flag},
		{v5, Exprloc([]byte{1}), edwarf.DW_FORM_exprloc},
		{v3, Exprloc([]byte{1}), edwarf.DW_FORM_block1},
		{v5, SecOffset(4), edwarf.DW_FORM_sec_offset},
		{v3, SecOffset(4), edwarf.DW_FORM_data4},
		{v5, String("s"), edwarf.DW_FORM_strp},
		{v5, Addr(1), edwarf.DW_FORM_addr},
	} {
		u := &Unit{Enc: c.enc, Root: &DIE{Tag: edwarf.DW_TAG_compile_unit, Attrs: []Attr{{edwarf.DW_AT_const_value, c.v}}}}
		abbrev, info, str := encodeOne(t, u)
		d, err := New(Sections{Info: info, Abbrev: abbrev, Str: str.Bytes()})
		if err != nil {
			t.Fatal(err)
		}
		e, err := d.Reader().Next()
		if err != nil {
			t.Fatal(err)
		}
		if f := e.Fields[0]; f.Form != c.form {
			t.Errorf("v%d %+v: form %v, want %v", c.enc.Version, c.v, f.Form, c.form)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	abbrev, info, str := encodeOne(t, sampleUnit(edwarf.Default64, "a"))
	check := func(name string, sec Sections, field string) {
		t.Helper()
		d, err := New(sec)
		if err == nil {
			r := d.Reader()
			for {
				var e *Entry
				e, err = r.Next()
				if e == nil || err != nil {
					break
				}
			}
		}
		var fe *edwarf.FormatError
		if !errors.As(err, &fe) || (field != "" && fe.Field != field) {
			t.Errorf("%s: err = %v, want FormatError field %q", name, err, field)
		}
	}
	mod := func(b []byte, f func([]byte)) []byte { c := append([]byte(nil), b...); f(c); return c }
	check("unit past end", Sections{Info: mod(info, func(b []byte) { b[0] = 0xf0 }), Abbrev: abbrev, Str: str.Bytes()}, "unit_length")
	check("version", Sections{Info: mod(info, func(b []byte) { b[4] = 9 }), Abbrev: abbrev, Str: str.Bytes()}, "version")
	check("abbrev code", Sections{Info: mod(info, func(b []byte) { b[12] = 0x7f }), Abbrev: abbrev, Str: str.Bytes()}, "abbrev code")
	check("abbrev offset", Sections{Info: mod(info, func(b []byte) { b[8] = 0xff }), Abbrev: abbrev, Str: str.Bytes()}, "debug_abbrev_offset")
	check("no str", Sections{Info: info, Abbrev: abbrev}, "DW_FORM_strp")
	check("truncated", Sections{Info: info[:len(info)-3], Abbrev: abbrev, Str: str.Bytes()}, "unit_length")
	// Deep nesting: a chain of 2000 DIEs with children.
	deep := &Unit{Enc: edwarf.Default64, Root: &DIE{Tag: edwarf.DW_TAG_compile_unit}}
	cur := deep.Root
	for range 2000 {
		c := &DIE{Tag: edwarf.DW_TAG_lexical_block}
		cur.Children = []*DIE{c}
		cur = c
	}
	da, di, _ := encodeOne(t, deep)
	check("depth", Sections{Info: di, Abbrev: da}, "DIE nesting")
}

// TestGCC reads what gcc writes with -gdwarf-5 and -gdwarf-4 and compares
// every entry with Go's debug/dwarf, then the subprograms' names and
// low_pc.
func TestGCC(t *testing.T) {
	src := `#include <stdio.h>
struct point { int x, y; };
static int sq(int x) { return x * x; }
int dist2(struct point p) { return sq(p.x) + sq(p.y); }
int main(int argc, char **argv) {
  struct point p = { argc, 2 };
  const char *s = argv[0];
  printf("%d %s\n", dist2(p), s);
  return 0;
}
`
	for _, v := range []string{"-gdwarf-5", "-gdwarf-4"} {
		f, data := tooltest.GCCBinary(t, src, "-g", v, "-O1")
		sec := Sections{Info: data(".debug_info"), Abbrev: data(".debug_abbrev"), Str: data(".debug_str"),
			LineStr: data(".debug_line_str"), StrOffsets: data(".debug_str_offsets"), Addr: data(".debug_addr"),
			RngLists: data(".debug_rnglists"), LocLists: data(".debug_loclists")}
		gd, err := f.DWARF()
		if err != nil {
			t.Fatal(err)
		}
		d, err := New(sec)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if msg := diffGo(d, gd, true); msg != "" {
			t.Errorf("%s: %s", v, msg)
		}
		subs := map[string]uint64{}
		r := d.Reader()
		for {
			e, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			if e == nil {
				break
			}
			if e.Tag == edwarf.DW_TAG_subprogram {
				if lo, _, ok := e.PCRange(); ok {
					n, _ := e.String(edwarf.DW_AT_name)
					if ao, ok := e.Val(edwarf.DW_AT_abstract_origin); ok && n == "" {
						// The name is on the abstract instance.
						r2 := d.Reader()
						r2.Seek(ao.Val)
						a, err := r2.Next()
						if err != nil {
							t.Fatal(err)
						}
						n, _ = a.String(edwarf.DW_AT_name)
					}
					subs[n] = lo
				}
			}
		}
		gsubs := map[string]uint64{}
		gr := gd.Reader()
		for {
			e, err := gr.Next()
			if err != nil || e == nil {
				break
			}
			if e.Tag == dwarf.TagSubprogram {
				if lo, ok := e.Val(dwarf.AttrLowpc).(uint64); ok {
					n, _ := e.Val(dwarf.AttrName).(string)
					if ao, ok := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset); ok && n == "" {
						r2 := gd.Reader()
						r2.Seek(ao)
						a, _ := r2.Next()
						n, _ = a.Val(dwarf.AttrName).(string)
					}
					gsubs[n] = lo
				}
			}
		}
		if fmt.Sprint(subs) != fmt.Sprint(gsubs) || subs["main"] == 0 || subs["dist2"] == 0 {
			t.Errorf("%s: subprograms %v, debug/dwarf %v", v, subs, gsubs)
		}
	}
}

// TestOverlappingAbbrevTables: units that each point into the middle of
// one long abbreviation table (no 0 code ends it) would cost time and
// memory quadratic in the input; the reader stops with a FormatError once
// it has parsed a few times the section.
func TestOverlappingAbbrevTables(t *testing.T) {
	const k = 4000
	var abbrev []byte
	offs := make([]uint32, k)
	for j := range k {
		offs[j] = uint32(len(abbrev))
		abbrev = edwarf.AppendUleb128(abbrev, uint64(j+1))
		abbrev = append(abbrev, byte(edwarf.DW_TAG_compile_unit), 0, 0, 0)
	}
	var inf []byte
	for i := range k {
		var u []byte
		u = binary.LittleEndian.AppendUint16(u, 4)
		u = binary.LittleEndian.AppendUint32(u, offs[i])
		u = append(u, 8)
		u = edwarf.AppendUleb128(u, uint64(i+1))
		inf = binary.LittleEndian.AppendUint32(inf, uint32(len(u)))
		inf = append(inf, u...)
	}
	_, err := New(Sections{Info: inf, Abbrev: abbrev})
	var fe *edwarf.FormatError
	if !errors.As(err, &fe) || fe.Source != ".debug_abbrev" {
		t.Fatalf("New = %v, want a .debug_abbrev FormatError", err)
	}
}
