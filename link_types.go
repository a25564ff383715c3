package elfimage

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/info"
	"github.com/elfimage/elfimage/dwarf/value"
)

// maxTypeSize bounds the size of any type, so that sizes and offsets stay
// far from overflow and readers never allocate a hostile size (1 TiB).
const maxTypeSize = value.MaxSize

// typeWriter turns model Types into DWARF type entries of the unit: each
// type once, found first by identity, then by structure (key), so that
// equal types built separately share one entry.
type typeWriter struct {
	l       *linker
	cu      *info.DIE
	intType *info.DIE // the default type of untyped variables

	byPtr   map[*Type]*info.DIE
	byKey   map[string]*info.DIE
	keys    map[*Type]string // structural keys that do not depend on the context
	names   map[string]string
	checked map[*Type]bool
	sizing  map[*Type]bool // types whose size is being computed (by-value cycles)
}

func newTypeWriter(l *linker, cu, intType *info.DIE) *typeWriter {
	w := &typeWriter{l: l, cu: cu, intType: intType,
		byPtr: map[*Type]*info.DIE{}, byKey: map[string]*info.DIE{}, keys: map[*Type]string{},
		names: map[string]string{}, checked: map[*Type]bool{}, sizing: map[*Type]bool{}}
	w.byKey[w.keyOf(defaultType)] = intType
	return w
}

// defaultType is what a Var without a Type has.
var defaultType = value.DefaultType()

// typeError says what is wrong with a type, naming it.
func typeError(t *Type, format string, args ...any) error {
	return fmt.Errorf("type %s: %s", t, fmt.Sprintf(format, args...))
}

// check validates t and everything it refers to (each type once). top
// says t is a variable's own type, the only place a variable-length array
// may be.
func (w *typeWriter) check(t *Type, top bool) error {
	if t == nil {
		return nil
	}
	if w.checked[t] {
		if t.Kind == KindArray && t.CountVar != "" && !top {
			return typeError(t, "an array whose length is variable %s can only be a variable's own type (Var.Type)", t.CountVar)
		}
		return nil
	}
	w.checked[t] = true
	if strings.IndexByte(t.Name, 0) >= 0 {
		return typeError(t, "name %q contains a NUL byte", t.Name)
	}
	extra := func(what string, set bool) error {
		if set {
			return typeError(t, "%s %v type has no %s", article(t.Kind), t.Kind, what)
		}
		return nil
	}
	noElem := func() error { return extra("Elem", t.Elem != nil) }
	noMembers := func() error { return extra("Members", len(t.Members) > 0) }
	noArray := func() error { return extra("Count or CountVar", t.Count != 0 || t.CountVar != "") }
	noEnums := func() error { return extra("Enumerators", len(t.Enumerators) > 0) }
	named := func() error {
		if t.Name == "" {
			return typeError(t, "%s %v type needs a Name", article(t.Kind), t.Kind)
		}
		return nil
	}
	sizeIn := func(sizes ...int) error {
		var list []string
		for _, s := range sizes {
			if t.Size == s {
				return nil
			}
			list = append(list, strconv.Itoa(s))
		}
		return typeError(t, "Size %d: %s %v type has %s bytes", t.Size, article(t.Kind), t.Kind, strings.Join(list, ", "))
	}
	first := func(errs ...error) error {
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}
	switch t.Kind {
	case KindSigned, KindUnsigned, KindBool:
		return first(named(), sizeIn(1, 2, 4, 8), noElem(), noMembers(), noArray(), noEnums())
	case KindFloat:
		return first(named(), sizeIn(4, 8), noElem(), noMembers(), noArray(), noEnums())
	case KindChar:
		return first(named(), sizeIn(1, 2, 4), noElem(), noMembers(), noArray(), noEnums())
	case KindUnsignedChar:
		return first(named(), sizeIn(1), noElem(), noMembers(), noArray(), noEnums())
	case KindVoid:
		return first(extra("Size", t.Size != 0), noElem(), noMembers(), noArray(), noEnums())
	case KindPointer:
		if t.Size != 0 && t.Size != w.l.a.PtrSize {
			return typeError(t, "Size %d: pointers have the architecture's size, %d bytes (leave Size 0)", t.Size, w.l.a.PtrSize)
		}
		if err := first(noMembers(), noArray(), noEnums()); err != nil {
			return err
		}
		return w.check(t.Elem, false)
	case KindTypedef, KindConst:
		if t.Kind == KindTypedef {
			if err := named(); err != nil {
				return err
			}
		}
		if t.Elem == nil {
			return typeError(t, "Elem is nil: a %v type refers to another type", t.Kind)
		}
		if err := first(extra("Size", t.Size != 0), noMembers(), noArray(), noEnums()); err != nil {
			return err
		}
		return w.check(t.Elem, false)
	case KindArray:
		if t.Elem == nil {
			return typeError(t, "Elem is nil: an array has an element type")
		}
		if err := first(extra("Size (it is Count times the element's)", t.Size != 0), noMembers(), noEnums()); err != nil {
			return err
		}
		if t.Count < 0 {
			return typeError(t, "Count %d is negative", t.Count)
		}
		if t.CountVar != "" && t.Count != 0 {
			return typeError(t, "both Count %d and CountVar %s are set", t.Count, t.CountVar)
		}
		if t.CountVar != "" && !top {
			return typeError(t, "an array whose length is variable %s can only be a variable's own type (Var.Type)", t.CountVar)
		}
		if err := w.check(t.Elem, false); err != nil {
			return err
		}
		sized := t
		if t.CountVar != "" {
			sized = t.Elem // the elements have a size; the array's varies
		}
		if _, err := w.size(sized); err != nil {
			return err
		}
		return nil
	case KindStruct, KindUnion:
		if t.Size < 1 || t.Size > maxTypeSize {
			return typeError(t, "Size %d: a %v has 1 to 2^40 bytes", t.Size, t.Kind)
		}
		if err := first(noElem(), noArray(), noEnums()); err != nil {
			return err
		}
		seen := map[string]bool{}
		for i, m := range t.Members {
			if m.Name == "" {
				return typeError(t, "member %d has no name", i)
			}
			if strings.IndexByte(m.Name, 0) >= 0 {
				return typeError(t, "member %q: the name contains a NUL byte", m.Name)
			}
			if seen[m.Name] {
				return typeError(t, "member %s appears twice", m.Name)
			}
			seen[m.Name] = true
			if m.Type == nil {
				return typeError(t, "member %s has no type", m.Name)
			}
			if err := w.check(m.Type, false); err != nil {
				return fmt.Errorf("type %s: member %s: %w", t, m.Name, err)
			}
			size, err := w.size(m.Type)
			if err != nil {
				return fmt.Errorf("type %s: member %s: %w", t, m.Name, err)
			}
			if t.Kind == KindUnion && m.Offset != 0 {
				return typeError(t, "member %s at offset %d: union members are at offset 0", m.Name, m.Offset)
			}
			if m.Offset < 0 || int64(m.Offset)+size > int64(t.Size) {
				return typeError(t, "member %s at offset %d (%d bytes) runs past the end of the %d-byte %v", m.Name, m.Offset, size, t.Size, t.Kind)
			}
		}
		// A structure that holds itself by value has no size; size finds it.
		if _, err := w.size(t); err != nil {
			return err
		}
		return nil
	case KindEnum:
		if err := first(sizeIn(1, 2, 4, 8), noMembers(), noArray()); err != nil {
			return err
		}
		if t.Elem != nil {
			e := t.Elem
			if (e.Kind != KindSigned && e.Kind != KindUnsigned) || e.Size != t.Size {
				return typeError(t, "Elem %s: the underlying type of an enumeration is an integer of its Size (%d bytes)", e, t.Size)
			}
			if err := w.check(e, false); err != nil {
				return err
			}
		}
		bits := uint(8 * t.Size)
		seen := map[string]bool{}
		for i, e := range t.Enumerators {
			if e.Name == "" || strings.IndexByte(e.Name, 0) >= 0 {
				return typeError(t, "enumerator %d: name %q is empty or holds a NUL byte", i, e.Name)
			}
			if seen[e.Name] {
				return typeError(t, "enumerator %s appears twice", e.Name)
			}
			seen[e.Name] = true
			unsigned := t.Elem != nil && t.Elem.Kind == KindUnsigned
			ok := bits == 64 || (!unsigned && e.Value >= -1<<(bits-1) && e.Value < 1<<bits) || (unsigned && e.Value >= 0 && e.Value < 1<<bits)
			if !ok {
				return typeError(t, "enumerator %s = %d does not fit in %d bytes", e.Name, e.Value, t.Size)
			}
		}
		return nil
	}
	return fmt.Errorf("type %q: unknown Kind %d", t.Name, t.Kind)
}

// article is "a" or "an" before a kind's name.
func article(k TypeKind) string {
	if k == KindUnsigned || k == KindUnsignedChar || k == KindArray || k == KindEnum {
		return "an"
	}
	return "a"
}

// size returns the size in bytes of a checked type, or an error for a
// type without one (void, a variable-length array) or that holds itself
// by value.
func (w *typeWriter) size(t *Type) (int64, error) {
	if w.sizing[t] {
		return 0, typeError(t, "it contains itself (a type can refer to itself only through a pointer)")
	}
	switch t.Kind {
	case KindPointer:
		return int64(w.l.a.PtrSize), nil
	case KindVoid:
		return 0, typeError(t, "void has no size (a pointer to void is a pointer with a nil Elem)")
	case KindTypedef, KindConst, KindArray:
		if t.Kind == KindArray && t.CountVar != "" {
			return 0, typeError(t, "an array whose length is a variable has no fixed size")
		}
		w.sizing[t] = true
		defer delete(w.sizing, t)
		n, err := w.size(t.Elem)
		if err != nil || t.Kind != KindArray {
			return n, err
		}
		if t.Count > 0 && n > maxTypeSize/int64(t.Count) {
			return 0, typeError(t, "%d elements of %d bytes exceed 2^40 bytes", t.Count, n)
		}
		return n * int64(t.Count), nil
	case KindStruct, KindUnion:
		w.sizing[t] = true
		defer delete(w.sizing, t)
		for _, m := range t.Members {
			if m.Type != nil {
				if _, err := w.size(m.Type); err != nil {
					return 0, err
				}
			}
		}
	}
	return int64(t.Size), nil
}

// keyOf returns the structural key of t.
func (w *typeWriter) keyOf(t *Type) string {
	k, _ := w.key(t, nil)
	return k
}

// key returns the structural key of t reached through the ancestors
// stack, and how many levels above t the key's back references reach (0:
// none leave t's own subtree, so the key is t's in any context and is
// memoized). A reference to an ancestor is written "^d", d levels up.
func (w *typeWriter) key(t *Type, stack []*Type) (string, int) {
	if t == nil {
		return "void", 0
	}
	if k, ok := w.keys[t]; ok {
		return k, 0
	}
	for i := len(stack) - 1; i >= 0; i-- {
		if stack[i] == t {
			d := len(stack) - i
			return "^" + strconv.Itoa(d), d
		}
	}
	stack = append(stack, t)
	reach := 0
	sub := func(u *Type) string {
		k, r := w.key(u, stack)
		reach = max(reach, r-1)
		return k
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d:%q:%d", t.Kind, t.Name, t.Size)
	switch t.Kind {
	case KindPointer, KindTypedef, KindConst, KindEnum:
		b.WriteString("(" + sub(t.Elem) + ")")
	case KindArray:
		fmt.Fprintf(&b, "[%d,%q](%s)", t.Count, t.CountVar, sub(t.Elem))
	}
	for _, m := range t.Members {
		fmt.Fprintf(&b, "{%q@%d:%s}", m.Name, m.Offset, sub(m.Type))
	}
	for _, e := range t.Enumerators {
		fmt.Fprintf(&b, "<%q=%d>", e.Name, e.Value)
	}
	k := b.String()
	if reach <= 0 {
		w.keys[t] = k
	}
	return k, reach
}

// die returns the type entry of a checked type, making it (and the
// entries it refers to) on first use. A variable-length array gets an
// entry of its own, whose DW_AT_count refers to count.
func (w *typeWriter) die(t *Type, count *info.DIE) (*info.DIE, error) {
	if t == nil {
		return w.intType, nil
	}
	dynamic := t.Kind == KindArray && t.CountVar != ""
	if d, ok := w.byPtr[t]; ok && !dynamic {
		return d, nil
	}
	k := w.keyOf(t)
	if d, ok := w.byKey[k]; ok && !dynamic {
		w.byPtr[t] = d
		return d, nil
	}
	if t.Name != "" && (t.Kind == KindStruct || t.Kind == KindUnion || t.Kind == KindEnum || t.Kind == KindTypedef) {
		n := t.String()
		if prev, ok := w.names[n]; ok && prev != k {
			return nil, typeError(t, "defined twice with different contents (one image has one %s)", n)
		}
		w.names[n] = k
	}
	d := &info.DIE{}
	w.cu.Children = append(w.cu.Children, d)
	if !dynamic {
		w.byPtr[t], w.byKey[k] = d, d
	}
	name := func() {
		if t.Name != "" {
			d.Attrs = append(d.Attrs, info.Attr{Name: dwarf.DW_AT_name, Value: info.String(t.Name)})
		}
	}
	size := func(n int) {
		d.Attrs = append(d.Attrs, info.Attr{Name: dwarf.DW_AT_byte_size, Value: info.Udata(uint64(n))})
	}
	ref := func(to *Type) error {
		if to == nil || to.Kind == KindVoid {
			return nil
		}
		e, err := w.die(to, nil)
		if err != nil {
			return err
		}
		d.Attrs = append(d.Attrs, info.Attr{Name: dwarf.DW_AT_type, Value: info.Ref(e)})
		return nil
	}
	switch t.Kind {
	case KindSigned, KindUnsigned, KindBool, KindFloat, KindChar, KindUnsignedChar:
		d.Tag = dwarf.DW_TAG_base_type
		enc := map[TypeKind]dwarf.ATE{KindSigned: dwarf.DW_ATE_signed, KindUnsigned: dwarf.DW_ATE_unsigned,
			KindBool: dwarf.DW_ATE_boolean, KindFloat: dwarf.DW_ATE_float, KindChar: dwarf.DW_ATE_signed_char,
			KindUnsignedChar: dwarf.DW_ATE_unsigned_char}[t.Kind]
		if t.Kind == KindChar && t.Size > 1 {
			enc = dwarf.DW_ATE_UTF // DWARF 4 section 5.1
			if w.l.enc.Version < 4 {
				enc = dwarf.DW_ATE_unsigned
			}
		}
		name()
		d.Attrs = append(d.Attrs, info.Attr{Name: dwarf.DW_AT_encoding, Value: info.Udata(uint64(enc))})
		size(t.Size)
	case KindPointer:
		d.Tag = dwarf.DW_TAG_pointer_type
		size(w.l.a.PtrSize)
		return d, ref(t.Elem)
	case KindTypedef:
		d.Tag = dwarf.DW_TAG_typedef
		name()
		return d, ref(t.Elem)
	case KindConst:
		d.Tag = dwarf.DW_TAG_const_type
		return d, ref(t.Elem)
	case KindStruct, KindUnion:
		d.Tag = dwarf.DW_TAG_structure_type
		if t.Kind == KindUnion {
			d.Tag = dwarf.DW_TAG_union_type
		}
		name()
		size(t.Size)
		for _, m := range t.Members {
			md := &info.DIE{Tag: dwarf.DW_TAG_member, Attrs: []info.Attr{{Name: dwarf.DW_AT_name, Value: info.String(m.Name)}}}
			e, err := w.die(m.Type, nil)
			if err != nil {
				return nil, err
			}
			md.Attrs = append(md.Attrs, info.Attr{Name: dwarf.DW_AT_type, Value: info.Ref(e)})
			if t.Kind == KindStruct {
				// A constant offset: DWARF 3 section 5.6.6 and later.
				md.Attrs = append(md.Attrs, info.Attr{Name: dwarf.DW_AT_data_member_location, Value: info.Udata(uint64(m.Offset))})
			}
			d.Children = append(d.Children, md)
		}
	case KindArray:
		d.Tag = dwarf.DW_TAG_array_type
		if err := ref(t.Elem); err != nil {
			return nil, err
		}
		// The default lower bound depends on DW_AT_language (DWARF 5
		// section 5.13, Table 7.17), which a module may leave out: say 0.
		sub := &info.DIE{Tag: dwarf.DW_TAG_subrange_type, Attrs: []info.Attr{{Name: dwarf.DW_AT_lower_bound, Value: info.Udata(0)}}}
		if dynamic {
			sub.Attrs = append(sub.Attrs, info.Attr{Name: dwarf.DW_AT_count, Value: info.Ref(count)})
		} else {
			sub.Attrs = append(sub.Attrs, info.Attr{Name: dwarf.DW_AT_count, Value: info.Udata(uint64(t.Count))})
		}
		d.Children = []*info.DIE{sub}
	case KindEnum:
		d.Tag = dwarf.DW_TAG_enumeration_type
		name()
		size(t.Size)
		if err := ref(t.Elem); err != nil {
			return nil, err
		}
		unsigned := t.Elem != nil && t.Elem.Kind == KindUnsigned
		for _, e := range t.Enumerators {
			v := info.Sdata(e.Value)
			if unsigned {
				v = info.Udata(uint64(e.Value))
			}
			d.Children = append(d.Children, &info.DIE{Tag: dwarf.DW_TAG_enumerator, Attrs: []info.Attr{
				{Name: dwarf.DW_AT_name, Value: info.String(e.Name)}, {Name: dwarf.DW_AT_const_value, Value: v}}})
		}
	default:
		return nil, typeError(t, "internal error: no entry for kind %v", t.Kind)
	}
	return d, nil
}

// typeAttr returns the DW_AT_type attribute of a variable of type t (the
// default type for nil), validating t.
func (w *typeWriter) typeAttr(t *Type, count *info.DIE) (info.Attr, error) {
	if err := w.check(t, true); err != nil {
		return info.Attr{}, err
	}
	if t != nil {
		if t.Kind == KindVoid {
			return info.Attr{}, typeError(t, "void has no size: a variable cannot be void")
		}
		if t.Kind != KindArray || t.CountVar == "" {
			if _, err := w.size(t); err != nil {
				return info.Attr{}, err
			}
		}
	}
	d, err := w.die(t, count)
	if err != nil {
		return info.Attr{}, err
	}
	return info.Attr{Name: dwarf.DW_AT_type, Value: info.Ref(d)}, nil
}
