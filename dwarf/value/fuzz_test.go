package value_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/info"
	"github.com/elfimage/elfimage/dwarf/value"
)

// genTypes makes a graph of types from b: each next type's kind, size
// and the earlier types (or itself, through a pointer) it refers to come
// from the bytes, as a producer could write them.
func genTypes(b []byte) []*value.Type {
	next := func() int {
		if len(b) == 0 {
			return 0
		}
		c := int(b[0])
		b = b[1:]
		return c
	}
	var ts []*value.Type
	pick := func(self *value.Type) *value.Type {
		k := next()
		if self != nil && k%5 == 4 {
			return self
		}
		if len(ts) == 0 || k%7 == 6 {
			return nil
		}
		return ts[k%len(ts)]
	}
	sized := func(t *value.Type) bool { _, ok := value.SizeOf(t, nil, 8); return ok }
	for len(b) > 0 && len(ts) < 24 {
		t := &value.Type{}
		switch k := next() % 12; k {
		case 0, 1, 2:
			t.Kind = []value.Kind{value.KindSigned, value.KindUnsigned, value.KindBool}[k]
			t.Size = []int{1, 2, 4, 8}[next()%4]
			t.Name = fmt.Sprintf("%v%d", t.Kind, t.Size)
		case 3:
			t.Kind, t.Size, t.Name = value.KindFloat, 4+4*(next()%2), "float"
		case 4:
			t.Kind, t.Size, t.Name = value.KindChar, 1, "char"
		case 5:
			t.Kind, t.Size, t.Name = value.KindUnsignedChar, 1, "unsigned char"
		case 6:
			t.Kind = value.KindPointer
			t.Elem = pick(t)
		case 7, 8:
			t.Kind = value.KindStruct
			if k == 8 {
				t.Kind = value.KindUnion
			}
			t.Name = fmt.Sprintf("s%d", len(ts))
			off := 0
			for i := range next() % 4 {
				m := value.Member{Name: fmt.Sprintf("m%d", i), Type: pick(t)}
				if m.Type == t || m.Type == nil || !sized(m.Type) {
					m.Type = &value.Type{Kind: value.KindPointer, Elem: m.Type}
				}
				n, _ := value.SizeOf(m.Type, nil, 8)
				if t.Kind == value.KindStruct {
					m.Offset = off
					off += int(n)
				}
				t.Size = max(t.Size, m.Offset+int(n))
				t.Members = append(t.Members, m)
			}
			t.Size = max(t.Size, 1)
		case 9:
			t.Kind, t.Count = value.KindArray, next()%5
			if t.Elem = pick(nil); t.Elem == nil || !sized(t.Elem) {
				t.Elem = &value.Type{Kind: value.KindSigned, Name: "int", Size: 4}
			}
		case 10:
			t.Kind, t.Size, t.Name = value.KindEnum, []int{1, 2, 4, 8}[next()%4], "e"
			for i := range next() % 3 {
				t.Enumerators = append(t.Enumerators, value.Enumerator{Name: fmt.Sprintf("E%d", i), Value: int64(next()) - 100})
			}
		case 11:
			t.Kind, t.Name = value.KindTypedef, fmt.Sprintf("t%d", len(ts))
			if next()%2 == 1 {
				t.Kind, t.Name = value.KindConst, ""
			}
			if t.Elem = pick(nil); t.Elem == nil {
				t.Elem = &value.Type{Kind: value.KindVoid}
			}
		}
		ts = append(ts, t)
	}
	return ts
}

// encodeTypes writes the types as DWARF 5 entries (this test's own
// encoder, independent of elfimage.Link's) with a variable v<i> of each
// type i, and returns .debug_info, .debug_abbrev and .debug_str.
func encodeTypes(t testing.TB, ts []*value.Type) (infoSec, abbrev, str []byte) {
	dies := map[*value.Type]*info.DIE{}
	var kids []*info.DIE
	var die func(ty *value.Type) *info.DIE
	die = func(ty *value.Type) *info.DIE {
		if d := dies[ty]; d != nil {
			return d
		}
		d := &info.DIE{}
		dies[ty] = d
		kids = append(kids, d)
		attr := func(a dwarf.Attr, v info.Value) { d.Attrs = append(d.Attrs, info.Attr{Name: a, Value: v}) }
		if ty.Name != "" {
			attr(dwarf.DW_AT_name, info.String(ty.Name))
		}
		ref := func(e *value.Type) {
			if e != nil && e.Kind != value.KindVoid {
				attr(dwarf.DW_AT_type, info.Ref(die(e)))
			}
		}
		switch ty.Kind {
		case value.KindSigned, value.KindUnsigned, value.KindBool, value.KindFloat, value.KindChar, value.KindUnsignedChar:
			d.Tag = dwarf.DW_TAG_base_type
			enc := map[value.Kind]dwarf.ATE{value.KindSigned: dwarf.DW_ATE_signed, value.KindUnsigned: dwarf.DW_ATE_unsigned,
				value.KindBool: dwarf.DW_ATE_boolean, value.KindFloat: dwarf.DW_ATE_float, value.KindChar: dwarf.DW_ATE_signed_char,
				value.KindUnsignedChar: dwarf.DW_ATE_unsigned_char}[ty.Kind]
			attr(dwarf.DW_AT_encoding, info.Udata(uint64(enc)))
			attr(dwarf.DW_AT_byte_size, info.Udata(uint64(ty.Size)))
		case value.KindPointer:
			d.Tag = dwarf.DW_TAG_pointer_type
			attr(dwarf.DW_AT_byte_size, info.Udata(8))
			ref(ty.Elem)
		case value.KindStruct, value.KindUnion:
			d.Tag = dwarf.DW_TAG_structure_type
			if ty.Kind == value.KindUnion {
				d.Tag = dwarf.DW_TAG_union_type
			}
			attr(dwarf.DW_AT_byte_size, info.Udata(uint64(ty.Size)))
			for _, m := range ty.Members {
				md := &info.DIE{Tag: dwarf.DW_TAG_member, Attrs: []info.Attr{
					{Name: dwarf.DW_AT_name, Value: info.String(m.Name)},
					{Name: dwarf.DW_AT_type, Value: info.Ref(die(m.Type))},
					{Name: dwarf.DW_AT_data_member_location, Value: info.Udata(uint64(m.Offset))}}}
				d.Children = append(d.Children, md)
			}
		case value.KindArray:
			d.Tag = dwarf.DW_TAG_array_type
			ref(ty.Elem)
			d.Children = []*info.DIE{{Tag: dwarf.DW_TAG_subrange_type, Attrs: []info.Attr{{Name: dwarf.DW_AT_count, Value: info.Udata(uint64(ty.Count))}}}}
		case value.KindEnum:
			d.Tag = dwarf.DW_TAG_enumeration_type
			attr(dwarf.DW_AT_byte_size, info.Udata(uint64(ty.Size)))
			for _, e := range ty.Enumerators {
				d.Children = append(d.Children, &info.DIE{Tag: dwarf.DW_TAG_enumerator, Attrs: []info.Attr{
					{Name: dwarf.DW_AT_name, Value: info.String(e.Name)}, {Name: dwarf.DW_AT_const_value, Value: info.Sdata(e.Value)}}})
			}
		case value.KindTypedef:
			d.Tag = dwarf.DW_TAG_typedef
			ref(ty.Elem)
		case value.KindConst:
			d.Tag = dwarf.DW_TAG_const_type
			ref(ty.Elem)
		}
		return d
	}
	var vars []*info.DIE
	for i, ty := range ts {
		vars = append(vars, &info.DIE{Tag: dwarf.DW_TAG_variable, Attrs: []info.Attr{
			{Name: dwarf.DW_AT_name, Value: info.String(fmt.Sprintf("v%d", i))},
			{Name: dwarf.DW_AT_type, Value: info.Ref(die(ty))}}})
	}
	cu := &info.DIE{Tag: dwarf.DW_TAG_compile_unit, Attrs: []info.Attr{{Name: dwarf.DW_AT_name, Value: info.String("t.c")}},
		Children: append(kids, vars...)}
	st := dwarf.NewStrTab()
	infoSec, abbrev, err := info.Encode([]*info.Unit{{Enc: dwarf.Default64, Root: cu}}, st)
	if err != nil {
		t.Fatal(err)
	}
	return infoSec, abbrev, st.Bytes()
}

// readVars reads back the type of every variable v<i>; an error for one
// that fails.
func readVars(infoSec, abbrev, str []byte) ([]*value.Type, []error) {
	d, err := info.New(info.Sections{Info: infoSec, Abbrev: abbrev, Str: str, Order: binary.LittleEndian})
	if err != nil {
		return nil, []error{err}
	}
	r := value.NewReader(d)
	rd := d.Reader()
	var ts []*value.Type
	var errs []error
	for range 1 << 12 {
		e, err := rd.Next()
		if err != nil {
			errs = append(errs, err)
			break
		}
		if e == nil {
			break
		}
		if e.Tag == dwarf.DW_TAG_variable {
			t, err := r.TypeOf(e)
			ts, errs = append(ts, t), append(errs, err)
		}
	}
	return ts, errs
}

// same compares two type graphs by structure.
func same(a, b *value.Type, seen map[[2]*value.Type]bool) error {
	if a == nil || b == nil {
		if (a == nil) != (b == nil) {
			return fmt.Errorf("%v vs %v", a, b)
		}
		return nil
	}
	if seen[[2]*value.Type{a, b}] {
		return nil
	}
	seen[[2]*value.Type{a, b}] = true
	if a.Kind != b.Kind || a.Name != b.Name || a.Size != b.Size || a.Count != b.Count || len(a.Members) != len(b.Members) || fmt.Sprint(a.Enumerators) != fmt.Sprint(b.Enumerators) {
		return fmt.Errorf("%v %q size %d count %d, want %v %q size %d count %d", a.Kind, a.Name, a.Size, a.Count, b.Kind, b.Name, b.Size, b.Count)
	}
	for i := range a.Members {
		if a.Members[i].Name != b.Members[i].Name || a.Members[i].Offset != b.Members[i].Offset {
			return fmt.Errorf("member %d: %+v, want %+v", i, a.Members[i], b.Members[i])
		}
		if err := same(a.Members[i].Type, b.Members[i].Type, seen); err != nil {
			return fmt.Errorf("member %s: %w", a.Members[i].Name, err)
		}
	}
	return same(a.Elem, b.Elem, seen)
}

// patternMem is memory whose every byte is its address's low byte plus
// a seed.
type patternMem byte

func (m patternMem) ReadUint64(a uint64) (uint64, error) {
	var b [8]byte
	for i := range b {
		b[i] = byte(a) + byte(i) + byte(m)
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// FuzzReader: types generated from the input, encoded as DWARF entries,
// read back the same (the oracle: a round trip through an independent
// encoder); the same .debug_info with bytes overwritten never panics or
// hangs and fails only with *dwarf.FormatError; every type read formats
// in both styles within the bound, Brief as "..." exactly for what is not
// a scalar.
func FuzzReader(f *testing.F) {
	f.Add([]byte{0, 3, 6, 0, 7, 2, 0, 1, 9, 3, 0, 10, 2, 2, 5, 9}, uint16(0), []byte{})
	f.Add([]byte{6, 4, 7, 3, 4, 4, 4, 11, 0, 1, 11, 1, 1, 9, 2, 2}, uint16(40), []byte{0xff, 0xff})
	f.Add([]byte{3, 1, 4, 5, 8, 2, 1, 0, 10, 3, 2, 7, 200, 90}, uint16(7), []byte{0x13})
	f.Fuzz(func(t *testing.T, gen []byte, at uint16, patch []byte) {
		ts := genTypes(gen)
		infoSec, abbrev, str := encodeTypes(t, ts)
		got, errs := readVars(infoSec, abbrev, str)
		if len(got) != len(ts) {
			t.Fatalf("read %d variables, wrote %d (%v)", len(got), len(ts), errs)
		}
		for i := range ts {
			if errs[i] != nil {
				t.Fatalf("v%d: %v", i, errs[i])
			}
			if err := same(got[i], ts[i], map[[2]*value.Type]bool{}); err != nil {
				t.Fatalf("v%d (%v): %v", i, ts[i], err)
			}
		}
		if len(patch) > 0 {
			b := append([]byte(nil), infoSec...)
			copy(b[int(at)%len(b):], patch)
			got, errs = readVars(b, abbrev, str)
			for _, err := range errs {
				var fe *dwarf.FormatError
				if err != nil && !errors.As(err, &fe) {
					t.Fatalf("error %v is not a *dwarf.FormatError", err)
				}
			}
		}
		for _, ty := range got {
			if ty == nil {
				continue
			}
			_ = ty.String()
			for _, obj := range []value.Object{{InMemory: true, Addr: 0x1000}, {Bytes: []byte{1, 2, 3, 4, 5, 6, 7, 8}}} {
				text, _ := value.Format(ty, obj, &value.Options{Mem: patternMem(at), Vars: map[string]int64{}})
				if len(text) > 4096+3 {
					t.Fatalf("%d bytes of text", len(text))
				}
				brief, _ := value.Format(ty, obj, &value.Options{Style: value.Brief, Mem: patternMem(at)})
				if (brief == "...") == value.IsScalar(ty) {
					t.Fatalf("%v: brief %q", ty, brief)
				}
			}
		}
	})
}
