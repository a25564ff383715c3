package value

import (
	"fmt"
	"strings"
	"sync"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/info"
	"github.com/elfimage/elfimage/formaterr"
)

// Reader decodes the types of one DWARF .debug_info into [Type] values,
// each type entry once: a type is cached by the offset of its entry, so
// types that refer to one another share their *Type and a recursive type
// reads back as a cycle. It is safe for concurrent use.
//
// A type entry reads as (DWARF 5 chapter 5):
//
//   - DW_TAG_base_type by its DW_AT_encoding and DW_AT_byte_size:
//     signed, unsigned and address as KindSigned and KindUnsigned (1 to
//     8 bytes), boolean as KindBool, float as KindFloat (4 or 8 bytes),
//     signed_char and unsigned_char of one byte as KindChar and
//     KindUnsignedChar (wider ones as the integers they are, as gdb shows
//     them in C), UTF as KindChar (KindUnsigned when 8 bytes); anything
//     else of some size (a 16-byte integer, an x87 or complex float, a
//     decimal or fixed-point number) as an opaque KindStruct of its size
//     without members, and of no size as KindVoid;
//   - DW_TAG_pointer_type, DW_TAG_reference_type,
//     DW_TAG_rvalue_reference_type and DW_TAG_ptr_to_member_type as
//     KindPointer (Size 0: the unit's address size);
//   - DW_TAG_typedef and DW_TAG_const_type as KindTypedef and KindConst
//     (of void when they have no DW_AT_type); DW_TAG_volatile_type,
//     DW_TAG_restrict_type, DW_TAG_atomic_type and DW_TAG_shared_type as
//     the type they qualify;
//   - DW_TAG_structure_type, DW_TAG_class_type and DW_TAG_union_type as
//     KindStruct or KindUnion with their DW_TAG_member children at their
//     DW_AT_data_member_location (a constant, or DW_OP_plus_uconst),
//     except static members (DW_AT_declaration) and bit fields
//     (DW_AT_bit_size);
//   - DW_TAG_array_type as KindArray, one level per DW_TAG_subrange_type
//     (the first the outermost): DW_AT_count, or DW_AT_upper_bound and
//     DW_AT_lower_bound (default 0), as constants; a reference to a
//     variable as CountVar (its name, without CountPrefix when it is
//     artificial); anything else (an expression) as Count 0;
//   - DW_TAG_enumeration_type as KindEnum with its DW_TAG_enumerator
//     children and its underlying type (DW_AT_type) as Elem;
//   - DW_TAG_subroutine_type of the unit's address size (Go's func
//     values: a pointer to a closure) as a KindTypedef of its name for a
//     void pointer; other subroutine types, DW_TAG_unspecified_type and
//     anything else as KindVoid.
type Reader struct {
	d     *info.Data
	mu    sync.Mutex
	byOff map[uint64]*Type
}

// NewReader returns a Reader of the types of d. Cost: O(1); nothing is
// decoded until asked for.
func NewReader(d *info.Data) *Reader { return &Reader{d: d, byOff: map[uint64]*Type{}} }

// Type returns the type whose entry is at .debug_info offset off,
// decoding it, and what it refers to, on first use. Errors are
// *formaterr.Error naming the offset: no entry there, a size above
// MaxSize, types nested by value deeper than 64, more than MaxTypes types,
// a typedef or const chain that loops, or the decoder's errors; nothing
// of a failed decode is kept. Cost: one DIE decode per new type entry
// (and per child of a structure, union, array or enumeration); a cached
// type is a map lookup.
func (r *Reader) Type(off uint64) (*Type, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.byOff[off]; ok {
		return t, nil
	}
	d := &decoder{d: r.d, cached: r.byOff, fresh: map[uint64]*Type{}}
	t, err := d.decode(off, 0)
	if err != nil {
		return nil, err
	}
	for k, v := range d.fresh {
		r.byOff[k] = v
	}
	return t, nil
}

// TypeOf returns the type of the entry e (a variable, parameter, member,
// subprogram): its DW_AT_type, nil when it has none. Errors are those of
// Type.
func (r *Reader) TypeOf(e *info.Entry) (*Type, error) {
	f, ok := e.Val(dwarf.DW_AT_type)
	if !ok || f.Class != info.ClassReference {
		return nil, nil
	}
	return r.Type(f.Val)
}

// decoder is one decode: types already cached, and those decoded by it
// (kept only if it succeeds).
type decoder struct {
	d      *info.Data
	cached map[uint64]*Type
	fresh  map[uint64]*Type
}

func typeErr(off uint64, field, msg string) error {
	return &formaterr.Error{Source: ".debug_info", Offset: off, Field: field, Msg: msg}
}

// entries reads the DIE at off and its children (not their descendants),
// and the address size of its unit.
func (td *decoder) entries(off uint64) (*info.Entry, []*info.Entry, int, error) {
	r := td.d.Reader()
	r.Seek(off)
	e, err := r.Next()
	if err != nil {
		return nil, nil, 0, err
	}
	if e == nil || e.Tag == 0 {
		return nil, nil, 0, typeErr(off, "DW_AT_type", "refers to no entry")
	}
	addrSize := 8
	if u := r.Unit(); u != nil {
		addrSize = int(u.Enc.AddrSize)
	}
	if !e.Children {
		return e, nil, addrSize, nil
	}
	var kids []*info.Entry
	for {
		c, err := r.Next()
		if err != nil {
			return nil, nil, 0, err
		}
		if c == nil || c.Tag == 0 {
			return e, kids, addrSize, nil
		}
		kids = append(kids, c)
		if c.Children {
			r.SkipChildren()
		}
	}
}

func (td *decoder) decode(off uint64, depth int) (*Type, error) {
	if t, ok := td.cached[off]; ok {
		return t, nil
	}
	if t, ok := td.fresh[off]; ok {
		return t, nil
	}
	if depth > maxDepth {
		return nil, typeErr(off, "DW_AT_type", fmt.Sprintf("types nested deeper than %d", maxDepth))
	}
	if len(td.cached)+len(td.fresh) >= MaxTypes {
		return nil, typeErr(off, "DW_AT_type", fmt.Sprintf("more than %d types", MaxTypes))
	}
	e, kids, addrSize, err := td.entries(off)
	if err != nil {
		return nil, err
	}
	t := &Type{}
	td.fresh[off] = t // before what it refers to: recursive types become cycles
	t.Name, _ = e.String(dwarf.DW_AT_name)
	size, hasSize := e.Uint(dwarf.DW_AT_byte_size)
	if size > MaxSize {
		return nil, typeErr(off, "DW_AT_byte_size", fmt.Sprintf("%d bytes", size))
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
		t.Kind = baseKind(dwarf.ATE(uintAttr(e, dwarf.DW_AT_encoding)), t.Size)
		if t.Kind == KindVoid {
			t.Size = 0
		}
	case dwarf.DW_TAG_pointer_type, dwarf.DW_TAG_reference_type, dwarf.DW_TAG_rvalue_reference_type, tagPtrToMemberType:
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
			t.Elem = &Type{Kind: KindVoid}
		}
		if loops(t) {
			return nil, typeErr(off, "DW_AT_type", fmt.Sprintf("a chain of typedefs and const that loops or is longer than %d", maxDepth))
		}
	case dwarf.DW_TAG_volatile_type, dwarf.DW_TAG_restrict_type, dwarf.DW_TAG_atomic_type, tagSharedType:
		// Qualifiers a debugger view does not need: the type itself.
		u, err := elem()
		if err != nil {
			return nil, err
		}
		if u == nil {
			u = &Type{Kind: KindVoid}
		}
		*t = *u // t may already be referred to (a cycle through a qualifier keeps the copy)
		td.fresh[off] = u
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
					m.Offset = int(min(f.Val, MaxSize))
				case (f.Class == info.ClassExprloc || f.Class == info.ClassBlock) && len(f.Block) > 1 && dwarf.Op(f.Block[0]) == dwarf.DW_OP_plus_uconst:
					v, n := dwarf.Uleb128(f.Block[1:])
					if n == len(f.Block)-1 {
						m.Offset = int(min(v, MaxSize))
					}
				}
			}
			if f, ok := c.Val(dwarf.DW_AT_type); ok && f.Class == info.ClassReference {
				if m.Type, err = td.decode(f.Val, depth+1); err != nil {
					return nil, err
				}
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
	case dwarf.DW_TAG_subroutine_type:
		if hasSize && t.Size == addrSize {
			// A function value: a pointer (Go's funcs point to a
			// closure), shown as one under the type's name.
			if t.Name == "" {
				t.Name = "func"
			}
			t.Kind, t.Size, t.Elem = KindTypedef, 0, &Type{Kind: KindPointer}
			break
		}
		t.Kind, t.Size = KindVoid, 0
	default:
		// Unspecified types (C++ nullptr_t), Fortran strings and others:
		// nothing to show of a value.
		t.Kind, t.Size = KindVoid, 0
	}
	return t, nil
}

// DWARF tags the dwarf package does not name.
const (
	tagPtrToMemberType dwarf.Tag = 0x1f
	tagSharedType      dwarf.Tag = 0x40
)

// loops reports whether the chain of typedefs and const from t comes
// back to t or is longer than maxDepth. (One that reaches a typedef still
// being decoded, whose Elem is nil, does not loop yet: that typedef's own
// check sees the whole chain.)
func loops(t *Type) bool {
	x := t.Elem
	for range maxDepth {
		switch {
		case x == t:
			return true
		case x == nil || (x.Kind != KindTypedef && x.Kind != KindConst):
			return false
		}
		x = x.Elem
	}
	return true
}

func uintAttr(e *info.Entry, a dwarf.Attr) uint64 {
	v, _ := e.Uint(a)
	return v
}

// baseKind is the kind of a base type of encoding enc and size bytes.
func baseKind(enc dwarf.ATE, size int) Kind {
	scalar := size >= 1 && size <= 8
	switch {
	case size == 0:
		return KindVoid
	case !scalar:
		return KindStruct // opaque: its size only
	}
	switch enc {
	case dwarf.DW_ATE_signed:
		return KindSigned
	case dwarf.DW_ATE_unsigned, dwarf.DW_ATE_address:
		return KindUnsigned
	case dwarf.DW_ATE_boolean:
		return KindBool
	case dwarf.DW_ATE_float:
		if size == 4 || size == 8 {
			return KindFloat
		}
	case dwarf.DW_ATE_signed_char:
		if size == 1 {
			return KindChar
		}
		return KindSigned
	case dwarf.DW_ATE_unsigned_char:
		if size == 1 {
			return KindUnsignedChar
		}
		return KindUnsigned
	case dwarf.DW_ATE_UTF:
		if size == 8 {
			return KindUnsigned
		}
		return KindChar
	}
	return KindStruct
}

// bound sets the element count of an array dimension from its
// DW_TAG_subrange_type (see Reader).
func (td *decoder) bound(t *Type, dim *info.Entry) error {
	ref := func(f info.Field) error {
		r := td.d.Reader()
		r.Seek(f.Val)
		v, err := r.Next()
		if err != nil {
			return err
		}
		if v != nil {
			t.CountVar, _ = v.String(dwarf.DW_AT_name)
			if f, ok := v.Val(dwarf.DW_AT_artificial); ok && f.Val != 0 && strings.HasPrefix(t.CountVar, CountPrefix) {
				t.CountVar = strings.TrimPrefix(t.CountVar, CountPrefix)
			}
		}
		return nil
	}
	if f, ok := dim.Val(dwarf.DW_AT_count); ok {
		switch f.Class {
		case info.ClassConstant:
			if f.Val <= MaxSize {
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
		if n := f.Int - lo + 1; n > 0 && n <= MaxSize {
			t.Count = int(n)
		}
	case info.ClassReference:
		// The variable holds the upper bound, one less than the count;
		// shown as the variable's name all the same.
		return ref(f)
	}
	return nil
}
