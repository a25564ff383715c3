package info

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	edwarf "github.com/elfimage/elfimage/dwarf"
)

// unitWriterTree is a compile unit shaped like the linker's: kept type
// entries, transient subprograms with parameters referring to types
// before and after them, and a kept type referring to a transient entry
// of its group (a variable-length array's DW_AT_count).
func unitWriterTree() (root *DIE, groups [][]*DIE, keep [][]bool) {
	intType := &DIE{Tag: edwarf.DW_TAG_base_type, Attrs: []Attr{{edwarf.DW_AT_name, String("int")}, {edwarf.DW_AT_byte_size, Udata(8)}}}
	late := &DIE{Tag: edwarf.DW_TAG_base_type, Attrs: []Attr{{edwarf.DW_AT_name, String("late")}, {edwarf.DW_AT_byte_size, Udata(4)}}}
	root = &DIE{Tag: edwarf.DW_TAG_compile_unit, Attrs: []Attr{{edwarf.DW_AT_name, String("u.src")}, {edwarf.DW_AT_low_pc, Addr(0x1000)}, {edwarf.DW_AT_stmt_list, SecOffset(0)}}}
	groups = append(groups, []*DIE{intType})
	keep = append(keep, []bool{true})
	for i := range 5 {
		sp := &DIE{Tag: edwarf.DW_TAG_subprogram, Attrs: []Attr{
			{edwarf.DW_AT_name, String("p" + string(rune('0'+i)))},
			{edwarf.DW_AT_low_pc, Addr(uint64(0x1000 + 16*i))}, {edwarf.DW_AT_decl_line, Udata(16 + uint64(300*i))},
			{edwarf.DW_AT_type, Ref(intType)}}}
		a := &DIE{Tag: edwarf.DW_TAG_formal_parameter, Attrs: []Attr{{edwarf.DW_AT_name, String("a")}, {edwarf.DW_AT_type, Ref(intType)}}}
		b := &DIE{Tag: edwarf.DW_TAG_formal_parameter, Attrs: []Attr{{edwarf.DW_AT_name, String("b")}, {edwarf.DW_AT_type, Ref(late)}}}
		sp.Children = []*DIE{a, b}
		g, k := []*DIE{}, []bool{}
		if i == 2 {
			// A kept array type whose count is a transient variable.
			count := &DIE{Tag: edwarf.DW_TAG_variable, Attrs: []Attr{{edwarf.DW_AT_name, String("n")}, {edwarf.DW_AT_type, Ref(intType)}}}
			arr := &DIE{Tag: edwarf.DW_TAG_array_type, Attrs: []Attr{{edwarf.DW_AT_type, Ref(intType)}},
				Children: []*DIE{{Tag: edwarf.DW_TAG_subrange_type, Attrs: []Attr{{edwarf.DW_AT_count, Ref(count)}}}}}
			sp.Children = append(sp.Children, count, &DIE{Tag: edwarf.DW_TAG_variable, Attrs: []Attr{{edwarf.DW_AT_name, String("v")}, {edwarf.DW_AT_type, Ref(arr)}}})
			g, k = append(g, arr), append(k, true)
		}
		groups = append(groups, append(g, sp))
		keep = append(keep, append(k, false))
	}
	groups = append(groups, []*DIE{late})
	keep = append(keep, []bool{true})
	for _, g := range groups {
		root.Children = append(root.Children, g...)
	}
	return root, groups, keep
}

// TestUnitWriterMatchesEncode: a unit written DIE group by DIE group,
// the transient entries overwritten after each Release (as a reused
// slab does), is byte for byte what EncodeFields writes for the whole
// tree, fields included, in every encoding.
func TestUnitWriterMatchesEncode(t *testing.T) {
	for _, enc := range encodings() {
		root, _, _ := unitWriterTree()
		str := edwarf.NewStrTab()
		wantInfo, wantAbbrev, wantFields, err := EncodeFields([]*Unit{{Enc: enc, Root: root}}, str)
		if err != nil {
			t.Fatalf("%v: %v", enc, err)
		}
		wantStr := append([]byte(nil), str.Bytes()...)

		root, groups, keep := unitWriterTree()
		str = edwarf.NewStrTab()
		u := &Unit{Enc: enc, Root: root}
		w, err := NewUnitWriter(u, str, true, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, g := range groups {
			for j, d := range g {
				if err := w.Add(d, keep[i][j]); err != nil {
					t.Fatalf("%v: group %d: %v", enc, i, err)
				}
			}
			if err := w.Release(); err != nil {
				t.Fatal(err)
			}
			for j, d := range g {
				if !keep[i][j] {
					overwrite(d)
				}
			}
		}
		gotInfo, gotAbbrev, gotFields, err := w.Finish()
		if err != nil {
			t.Fatalf("%v: %v", enc, err)
		}
		if !bytes.Equal(gotInfo, wantInfo) || !bytes.Equal(gotAbbrev, wantAbbrev) || !bytes.Equal(str.Bytes(), wantStr) {
			t.Errorf("%v: UnitWriter wrote\ninfo % x\nabbrev % x\nEncodeFields\ninfo % x\nabbrev % x", enc, gotInfo, gotAbbrev, wantInfo, wantAbbrev)
		}
		if !reflect.DeepEqual(gotFields, wantFields) {
			t.Errorf("%v: fields %+v, want %+v", enc, gotFields, wantFields)
		}
		if u.Offset != 0 {
			t.Errorf("unit offset %d", u.Offset)
		}
	}
}

// TestUnitWriterRefuses: a reference to a transient entry after its
// Release, a DIE added twice, and an invalid attribute are errors
// wrapping ErrInvalidUnit, and the writer stays failed.
func TestUnitWriterRefuses(t *testing.T) {
	enc := encodings()[0]
	newW := func() *UnitWriter {
		w, err := NewUnitWriter(&Unit{Enc: enc, Root: &DIE{Tag: edwarf.DW_TAG_compile_unit}}, edwarf.NewStrTab(), false, 0)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	v := &DIE{Tag: edwarf.DW_TAG_variable}
	w := newW()
	if err := w.Add(v, false); err != nil {
		t.Fatal(err)
	}
	w.Release()
	if err := w.Add(&DIE{Tag: edwarf.DW_TAG_variable, Attrs: []Attr{{edwarf.DW_AT_type, Ref(v)}}}, false); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := w.Finish(); !errors.Is(err, ErrInvalidUnit) {
		t.Errorf("reference to a released entry: %v", err)
	}

	w = newW()
	k := &DIE{Tag: edwarf.DW_TAG_base_type}
	w.Add(k, true)
	if err := w.Add(k, false); !errors.Is(err, ErrInvalidUnit) {
		t.Errorf("DIE added twice: %v", err)
	}
	if _, _, _, err := w.Finish(); !errors.Is(err, ErrInvalidUnit) {
		t.Errorf("Finish after an error: %v", err)
	}

	w = newW()
	if err := w.Add(&DIE{Tag: edwarf.DW_TAG_variable, Attrs: []Attr{{edwarf.DW_AT_name, String("a\x00b")}}}, false); !errors.Is(err, ErrInvalidUnit) {
		t.Errorf("NUL in a string: %v", err)
	}
	if err := w.Release(); !errors.Is(err, ErrInvalidUnit) {
		t.Errorf("Release after an error: %v", err)
	}
}

// overwrite replaces d and its descendants with other entries, as the
// next user of reused memory would.
func overwrite(d *DIE) {
	for _, c := range d.Children {
		overwrite(c)
	}
	*d = DIE{Tag: edwarf.DW_TAG_member, Attrs: []Attr{{edwarf.DW_AT_name, String("overwritten")}}}
}
