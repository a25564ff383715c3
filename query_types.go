package elfimage

import (
	"fmt"
	"strings"
	"sync"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/info"
)

// Bounds on the types read from an image's DWARF, which may be hostile.
const (
	maxTypes     = 1 << 16 // type entries decoded per image
	maxTypeDepth = 64      // nesting of types by value (members, elements)
)

// typeState caches the types decoded from an image's DWARF by the
// .debug_info offset of their entry, so that each is decoded once and
// shared (a recursive type decodes to a cycle of *Type).
type typeState struct {
	mu    sync.Mutex
	byOff map[uint64]*Type
}

// typeOf returns the type of a DIE's DW_AT_type: nil when it has none.
func (im *Image) typeOf(e *info.Entry) (*Type, error) {
	f, ok := e.Val(dwarf.DW_AT_type)
	if !ok || f.Class != info.ClassReference {
		return nil, nil
	}
	return im.typeAt(f.Val)
}

// typeAt returns the type whose entry is at .debug_info offset off,
// decoding it and what it refers to on first use.
func (im *Image) typeAt(off uint64) (*Type, error) {
	s := &im.debug.types
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byOff == nil {
		s.byOff = map[uint64]*Type{}
	}
	d, err := im.infoData()
	if err != nil {
		return nil, err
	}
	return (&typeDecoder{d: d, byOff: s.byOff}).decode(off, 0)
}

type typeDecoder struct {
	d     *info.Data
	byOff map[uint64]*Type
}

// entries reads the DIE at off and its children (not their
// descendants).
func (td *typeDecoder) entries(off uint64) (*info.Entry, []*info.Entry, error) {
	r := td.d.Reader()
	r.Seek(off)
	e, err := r.Next()
	if err != nil {
		return nil, nil, err
	}
	if e == nil || e.Tag == 0 {
		return nil, nil, &dwarf.FormatError{Section: ".debug_info", Offset: off, Field: "DW_AT_type", Msg: "refers to no entry"}
	}
	if !e.Children {
		return e, nil, nil
	}
	var kids []*info.Entry
	for {
		c, err := r.Next()
		if err != nil {
			return nil, nil, err
		}
		if c == nil || c.Tag == 0 {
			return e, kids, nil
		}
		kids = append(kids, c)
		if c.Children {
			r.SkipChildren()
		}
	}
}

func (td *typeDecoder) decode(off uint64, depth int) (*Type, error) {
	if t, ok := td.byOff[off]; ok {
		return t, nil
	}
	if depth > maxTypeDepth {
		return nil, &dwarf.FormatError{Section: ".debug_info", Offset: off, Field: "DW_AT_type", Msg: fmt.Sprintf("types nested deeper than %d", maxTypeDepth)}
	}
	if len(td.byOff) >= maxTypes {
		return nil, &dwarf.FormatError{Section: ".debug_info", Offset: off, Field: "DW_AT_type", Msg: fmt.Sprintf("more than %d types", maxTypes)}
	}
	e, kids, err := td.entries(off)
	if err != nil {
		return nil, err
	}
	t := &Type{}
	td.byOff[off] = t // before what it refers to: recursive types become cycles
	t.Name, _ = e.String(dwarf.DW_AT_name)
	size, _ := e.Uint(dwarf.DW_AT_byte_size)
	if size > maxTypeSize {
		return nil, &dwarf.FormatError{Section: ".debug_info", Offset: off, Field: "DW_AT_byte_size", Msg: fmt.Sprintf("%d bytes", size)}
	}
	t.Size = int(size)
	elem := func() (*Type, error) {
		f, ok := e.Val(dwarf.DW_AT_type)
		if !ok || f.Class != info.ClassReference {
			return nil, nil
		}
		return td.decode(f.Val, depth+1)
	}
	switch e.Tag {
	case dwarf.DW_TAG_base_type:
		enc, _ := e.Uint(dwarf.DW_AT_encoding)
		switch dwarf.ATE(enc) {
		case dwarf.DW_ATE_signed:
			t.Kind = KindSigned
		case dwarf.DW_ATE_boolean:
			t.Kind = KindBool
		case dwarf.DW_ATE_float:
			t.Kind = KindFloat
			if t.Size != 4 && t.Size != 8 {
				t.Kind = KindStruct // an x87 or binary128 float: shown as its size only
			}
		case dwarf.DW_ATE_signed_char, dwarf.DW_ATE_unsigned_char, dwarf.DW_ATE_UTF:
			t.Kind = KindChar
		default:
			t.Kind = KindUnsigned
			if t.Size > 8 {
				t.Kind = KindStruct
			}
		}
	case dwarf.DW_TAG_pointer_type, dwarf.DW_TAG_reference_type, dwarf.DW_TAG_rvalue_reference_type:
		t.Kind, t.Size = KindPointer, 0
		if t.Elem, err = elem(); err != nil {
			return nil, err
		}
	case dwarf.DW_TAG_typedef, dwarf.DW_TAG_const_type:
		t.Kind, t.Size = KindTypedef, 0
		if e.Tag == dwarf.DW_TAG_const_type {
			t.Kind = KindConst
		}
		if t.Elem, err = elem(); err != nil {
			return nil, err
		}
		if t.Elem == nil {
			t.Elem = VoidType()
		}
	case dwarf.DW_TAG_volatile_type, dwarf.DW_TAG_restrict_type, dwarf.DW_TAG_atomic_type:
		// Qualifiers a debugger view does not need: the type itself.
		u, err := elem()
		if err != nil {
			return nil, err
		}
		if u == nil {
			u = VoidType()
		}
		*t = *u // t may already be referred to (a cycle through a qualifier keeps the copy)
		td.byOff[off] = u
		return u, nil
	case dwarf.DW_TAG_structure_type, dwarf.DW_TAG_class_type, dwarf.DW_TAG_union_type:
		t.Kind = KindStruct
		if e.Tag == dwarf.DW_TAG_union_type {
			t.Kind = KindUnion
		}
		for _, c := range kids {
			if c.Tag != dwarf.DW_TAG_member {
				continue
			}
			if f, ok := c.Val(dwarf.DW_AT_declaration); ok && f.Val != 0 {
				continue // a static member
			}
			if _, bits := c.Val(dwarf.DW_AT_bit_size); bits {
				continue // bit fields are not modelled
			}
			m := Member{}
			m.Name, _ = c.String(dwarf.DW_AT_name)
			if f, ok := c.Val(dwarf.DW_AT_data_member_location); ok {
				switch {
				case f.Class == info.ClassConstant:
					m.Offset = int(min(f.Val, maxTypeSize))
				case isExpr(f) && len(f.Block) > 1 && dwarf.Op(f.Block[0]) == dwarf.DW_OP_plus_uconst:
					v, n := dwarf.Uleb128(f.Block[1:])
					if n == len(f.Block)-1 {
						m.Offset = int(min(v, maxTypeSize))
					}
				}
			}
			if m.Type, err = td.member(c, depth); err != nil {
				return nil, err
			}
			t.Members = append(t.Members, m)
		}
	case dwarf.DW_TAG_array_type:
		t.Kind, t.Size = KindArray, 0
		u, err := elem()
		if err != nil {
			return nil, err
		}
		var dims []*info.Entry
		for _, c := range kids {
			if c.Tag == dwarf.DW_TAG_subrange_type {
				dims = append(dims, c)
			}
		}
		if len(dims) == 0 {
			dims = []*info.Entry{{}} // an array of unknown length
		}
		// The first subrange is the outermost dimension, this entry.
		cur := t
		for i, dim := range dims {
			cur.Kind = KindArray
			if err := td.bound(cur, dim); err != nil {
				return nil, err
			}
			if i == len(dims)-1 {
				cur.Elem = u
			} else {
				cur.Elem = &Type{}
				cur = cur.Elem
			}
		}
	case dwarf.DW_TAG_enumeration_type:
		t.Kind = KindEnum
		if t.Elem, err = elem(); err != nil {
			return nil, err
		}
		for _, c := range kids {
			if c.Tag != dwarf.DW_TAG_enumerator {
				continue
			}
			en := Enumerator{}
			en.Name, _ = c.String(dwarf.DW_AT_name)
			if f, ok := c.Val(dwarf.DW_AT_const_value); ok && f.Class == info.ClassConstant {
				en.Value = f.Int
			}
			t.Enumerators = append(t.Enumerators, en)
		}
	default:
		// Subroutine types, unspecified types (C++ nullptr_t) and others:
		// nothing to show of a value.
		t.Kind, t.Size = KindVoid, 0
	}
	return t, nil
}

// member decodes a member's type (nil when it has none).
func (td *typeDecoder) member(c *info.Entry, depth int) (*Type, error) {
	f, ok := c.Val(dwarf.DW_AT_type)
	if !ok || f.Class != info.ClassReference {
		return nil, nil
	}
	return td.decode(f.Val, depth+1)
}

// bound sets the element count of an array dimension from its
// DW_TAG_subrange_type: DW_AT_count, or DW_AT_upper_bound (and
// DW_AT_lower_bound, default 0) as constants; a reference to a variable
// names it in CountVar; anything else (an expression) leaves Count 0.
func (td *typeDecoder) bound(t *Type, dim *info.Entry) error {
	ref := func(f info.Field) error {
		r := td.d.Reader()
		r.Seek(f.Val)
		v, err := r.Next()
		if err != nil {
			return err
		}
		if v != nil {
			t.CountVar, _ = v.String(dwarf.DW_AT_name)
			// Link's variable holding the length of N is named for N.
			if f, ok := v.Val(dwarf.DW_AT_artificial); ok && f.Val != 0 && strings.HasPrefix(t.CountVar, countPrefix) {
				t.CountVar = strings.TrimPrefix(t.CountVar, countPrefix)
			}
		}
		return nil
	}
	if f, ok := dim.Val(dwarf.DW_AT_count); ok {
		switch f.Class {
		case info.ClassConstant:
			if f.Val <= maxTypeSize {
				t.Count = int(f.Val)
			}
		case info.ClassReference:
			return ref(f)
		}
		return nil
	}
	f, ok := dim.Val(dwarf.DW_AT_upper_bound)
	if !ok {
		return nil
	}
	switch f.Class {
	case info.ClassConstant:
		lo := int64(0)
		if l, ok := dim.Val(dwarf.DW_AT_lower_bound); ok && l.Class == info.ClassConstant {
			lo = l.Int
		}
		if n := f.Int - lo + 1; n > 0 && n <= maxTypeSize {
			t.Count = int(n)
		}
	case info.ClassReference:
		// The variable holds the upper bound, one less than the count;
		// shown as the variable's name all the same.
		return ref(f)
	}
	return nil
}
