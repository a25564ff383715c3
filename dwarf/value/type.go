package value

import "fmt"

// Bounds on types, which may come from hostile DWARF.
const (
	// MaxSize bounds the size in bytes of any type (1 TiB), so that sizes
	// and offsets stay far from overflow and no reader allocates a hostile
	// size.
	MaxSize = 1 << 40
	// MaxTypes bounds the type entries one Reader decodes.
	MaxTypes = 1 << 16
	// maxDepth bounds the nesting of types by value (members, elements)
	// decoded, and the typedef and const chains followed.
	maxDepth = 64
)

// CountPrefix starts the name of the artificial variable that holds the
// length of a variable-length array, as elfimage.Link declares it for
// Type.CountVar: the array of length n has DW_AT_count referring to the
// artificial variable CountPrefix + "n" (DWARF 5 section 5.13), and reads
// back with CountVar "n".
const CountPrefix = "__vla_count_"

// Type is the type of a value as debuggers show it: a base type (an
// integer, a boolean, a floating-point number, a character), a pointer, a
// structure or union of named members, an array, an enumeration, a
// typedef or a const-qualified type. It is what elfimage.Link writes as
// DWARF type entries (DWARF 5 chapter 5) and what [Reader] reads back
// from any producer's DWARF, and [Format] prints values of it.
//
// Types refer to one another by pointer, so a recursive type is built in
// two steps:
//
//	node := &value.Type{Kind: value.KindStruct, Name: "node", Size: 16}
//	node.Members = []value.Member{
//		{Name: "value", Offset: 0, Type: &value.Type{Kind: value.KindSigned, Name: "int64", Size: 8}},
//		{Name: "next", Offset: 8, Type: &value.Type{Kind: value.KindPointer, Elem: node}},
//	}
//
// Read back from other producers' DWARF (see [Reader] for every rule),
// volatile, restrict and atomic qualifiers are dropped, references read as
// pointers and classes as structures, bit fields are left out, and what
// this model lacks reads as KindVoid (function types) or as a KindStruct
// of its size without members (an x87 or 128-bit number).
//
// Which fields a type uses depends on its Kind; the others are zero.
type Type struct {
	Kind Kind
	// Name is the type's name: required for base types and typedefs,
	// optional (anonymous) for structures, unions and enumerations,
	// unused for pointers, arrays and const. Debuggers print it as
	// written ("struct vm" is the Name "vm" of a KindStruct).
	Name string
	// Size is the size in bytes of a base type (1, 2, 4 or 8; a float 4
	// or 8), a structure, union or enumeration (at least 1). Pointers
	// have the architecture's pointer size and arrays Count times their
	// element's size: Size is 0 for them, and for typedefs and const.
	Size int
	// Elem is what a pointer points to (nil: void, an untyped pointer),
	// an array's element type, the type a typedef names or const
	// qualifies, or an enumeration's underlying integer type (optional).
	Elem *Type
	// Members are a structure's or union's members, each at its byte
	// Offset from the start (0 for every member of a union).
	Members []Member
	// Count is a fixed array's number of elements (0 for an empty or
	// flexible array). CountVar instead names a parameter or variable of
	// the same procedure, visible where the array variable is declared,
	// whose integer value is the number of elements: a variable-length
	// array (DWARF 5 section 5.13; see CountPrefix). Such an array can
	// only be a variable's own type, as its length differs per frame.
	Count    int
	CountVar string
	// Enumerators are an enumeration's named values.
	Enumerators []Enumerator
}

// Kind says what a [Type] is.
type Kind uint8

// Type kinds. The base kinds map to DWARF base type encodings (DWARF 5
// section 5.1, table 5.1).
const (
	// KindSigned is a two's complement integer (DW_ATE_signed).
	KindSigned Kind = iota + 1
	// KindUnsigned is an unsigned integer (DW_ATE_unsigned).
	KindUnsigned
	// KindBool is a boolean, 0 false and anything else true
	// (DW_ATE_boolean).
	KindBool
	// KindFloat is an IEEE 754 binary32 (Size 4) or binary64 (Size 8)
	// number (DW_ATE_float).
	KindFloat
	// KindChar is a character: a signed byte (Size 1, DW_ATE_signed_char,
	// as C's char on x86-64) or a Unicode code unit or point (Size 2 or
	// 4, DW_ATE_UTF in DWARF 4 and later, DW_ATE_unsigned in DWARF 3).
	KindChar
	// KindPointer is an address of a value of type Elem
	// (DW_TAG_pointer_type).
	KindPointer
	// KindStruct is a structure of Members (DW_TAG_structure_type).
	KindStruct
	// KindUnion is a union of Members, all at offset 0
	// (DW_TAG_union_type).
	KindUnion
	// KindArray is Count (or CountVar) elements of type Elem, laid out
	// one after the other (DW_TAG_array_type with one
	// DW_TAG_subrange_type).
	KindArray
	// KindEnum is an integer of Size bytes whose values have names
	// (DW_TAG_enumeration_type).
	KindEnum
	// KindTypedef is another name for Elem (DW_TAG_typedef).
	KindTypedef
	// KindConst is Elem qualified const (DW_TAG_const_type).
	KindConst
	// KindVoid is no value: as a procedure's result type, a procedure
	// that returns nothing. A pointer to void has a nil Elem.
	KindVoid
	// KindUnsignedChar is an unsigned byte character (Size 1,
	// DW_ATE_unsigned_char: C's unsigned char), shown as KindChar is but
	// with its code unsigned.
	KindUnsignedChar
)

var kindNames = [...]string{"kind 0", "signed", "unsigned", "bool", "float", "char", "pointer", "struct", "union", "array", "enum", "typedef", "const", "void", "unsigned char"}

// String returns the kind's name: "signed", "pointer", "unsigned char".
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind %d", uint8(k))
}

// Member is a named member of a structure or union at a byte offset
// (DW_TAG_member with DW_AT_data_member_location, DWARF 5 section 5.7.6).
type Member struct {
	Name   string
	Offset int // bytes from the start of the structure; 0 in a union
	Type   *Type
}

// Enumerator is a named value of an enumeration (DW_TAG_enumerator).
type Enumerator struct {
	Name  string
	Value int64
}

// DefaultType returns the type of a value whose DWARF gives none: the
// 8-byte signed integer named "integer".
func DefaultType() *Type { return &Type{Kind: KindSigned, Name: "integer", Size: 8} }

// Under returns t without its typedefs and const qualifiers: the first
// type of the chain of Elem that is neither; nil for nil, and for a chain
// that loops or is longer than 64. Cost: O(chain).
func Under(t *Type) *Type {
	for range maxDepth {
		if t == nil || (t.Kind != KindTypedef && t.Kind != KindConst) {
			return t
		}
		t = t.Elem
	}
	return nil
}

// IsScalar reports whether a value of type t is a scalar, one that gdb's
// backtrace prints (print frame-arguments scalars): an integer, boolean,
// floating-point number, character, pointer or enumeration, through
// typedefs and const. A nil t is the default integer. Cost: O(chain).
func IsScalar(t *Type) bool {
	if t == nil {
		return true
	}
	u := Under(t)
	if u == nil {
		return false
	}
	switch u.Kind {
	case KindSigned, KindUnsigned, KindBool, KindFloat, KindChar, KindUnsignedChar, KindPointer, KindEnum:
		return true
	}
	return false
}

// SizeOf returns the size in bytes of a value of type t, whose pointers
// are ptrSize bytes (0 means 8) and whose variable-length arrays take
// their length from vars; false when it has none (void, an array of
// unknown length, a size beyond MaxSize) or the type nests deeper than
// 64. Cost: O(nesting).
func SizeOf(t *Type, vars map[string]int64, ptrSize int) (int64, bool) {
	if ptrSize == 0 {
		ptrSize = 8
	}
	return sizeOf(t, vars, int64(ptrSize), 0)
}

func sizeOf(t *Type, vars map[string]int64, ptrSize int64, depth int) (int64, bool) {
	for ; depth < maxDepth; depth++ {
		if t == nil {
			return 0, false
		}
		switch t.Kind {
		case KindPointer:
			return ptrSize, true
		case KindTypedef, KindConst:
			t = t.Elem
			continue
		case KindArray:
			n := int64(t.Count)
			if t.CountVar != "" {
				v, ok := vars[t.CountVar]
				if !ok || v < 0 || v > MaxSize {
					return 0, false
				}
				n = v
			}
			e, ok := sizeOf(t.Elem, vars, ptrSize, depth+1)
			if !ok || (e > 0 && n > MaxSize/e) {
				return 0, false
			}
			return n * e, true
		case KindVoid:
			return 0, false
		}
		return int64(t.Size), t.Size > 0
	}
	return 0, false
}

// String returns the type as C spells it, with the names of structures,
// unions and enumerations but not their members: "int64", "struct vm *",
// "double[8]", "const char *", "int64[n]". A nil Type is the default type
// of values without one, "integer". Cost: O(chain), at most 32 levels
// spelled.
func (t *Type) String() string {
	if t == nil {
		return "integer"
	}
	return typeString(t, "", 0)
}

// typeString spells t around the declarator inner (C's inside-out
// syntax: arrays bind tighter than pointers).
func typeString(t *Type, inner string, depth int) string {
	if depth > 32 {
		return "..." + inner
	}
	join := func(base string) string {
		if inner == "" {
			return base
		}
		if inner[0] == '[' {
			return base + inner
		}
		return base + " " + inner
	}
	switch t.Kind {
	case KindPointer:
		in := "*" + inner
		if t.Elem != nil && t.Elem.Kind == KindArray {
			in = "(" + in + ")"
		}
		if t.Elem == nil {
			return "void " + in
		}
		return typeString(t.Elem, in, depth+1)
	case KindArray:
		n := fmt.Sprint(t.Count)
		if t.CountVar != "" {
			n = t.CountVar
		}
		if t.Elem == nil {
			return join("?") + "[" + n + "]"
		}
		return typeString(t.Elem, inner+"["+n+"]", depth+1)
	case KindConst:
		if t.Elem == nil {
			return join("const ?")
		}
		if t.Elem.Kind == KindPointer {
			in := "const"
			if inner != "" {
				in += " " + inner
			}
			return typeString(t.Elem, in, depth+1)
		}
		return "const " + typeString(t.Elem, inner, depth+1)
	case KindStruct, KindUnion, KindEnum:
		kw := map[Kind]string{KindStruct: "struct", KindUnion: "union", KindEnum: "enum"}[t.Kind]
		if t.Name == "" {
			return join(kw + " {...}")
		}
		return join(kw + " " + t.Name)
	case KindVoid:
		return join("void")
	}
	if t.Name == "" {
		return join("<" + t.Kind.String() + ">")
	}
	return join(t.Name)
}
