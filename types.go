package elfimage

import "fmt"

// Type is the type of a value as debuggers show it: a base type (an
// integer, a boolean, a floating-point number, a character), a pointer, a
// structure or union of named members, an array, an enumeration, a
// typedef or a const-qualified type. Link writes each type once per image
// as DWARF type entries (DWARF 5 chapter 5), however many variables use it;
// the image's queries ([Image.Locals], [Image.SubprogramAt]) read types
// back into the same shape.
//
// Build types with the constructors ([IntType], [PointerTo], [ArrayOf],
// [StructOf], ...) or as struct literals. Types refer to one another by
// pointer, so a recursive type is built in two steps:
//
//	node := &elfimage.Type{Kind: elfimage.KindStruct, Name: "node", Size: 16}
//	node.Members = []elfimage.Member{
//		{Name: "value", Offset: 0, Type: elfimage.IntType(8)},
//		{Name: "next", Offset: 8, Type: elfimage.PointerTo(node)},
//	}
//
// Read back from other producers' DWARF, volatile, restrict and atomic
// qualifiers are dropped, references read as pointers and classes as
// structures, bit fields are left out, and what this model lacks reads as
// KindVoid (function types) or as a KindStruct of its size without members
// (an x87 or 128-bit float).
//
// Which fields a type uses depends on its Kind; the others must be zero.
// Two types with the same structure (kind, name, size, and the same
// structure of what they refer to) are written as one DWARF entry, so
// constructing IntType(8) twice costs nothing. Link refuses invalid types
// with a [LinkError] naming the procedure, the variable and the type.
type Type struct {
	Kind TypeKind
	// Name is the type's name: required for base types and typedefs,
	// optional (anonymous) for structures, unions and enumerations,
	// unused for pointers, arrays and const. Debuggers print it as
	// written ("struct vm" is the Name "vm" of a KindStruct).
	Name string
	// Size is the size in bytes of a base type (1, 2, 4 or 8; a float 4
	// or 8), a structure, union or enumeration (at least 1). Pointers
	// have the architecture's pointer size and arrays Count times their
	// element's size: leave Size 0 for them, and for typedefs and const.
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
	// array (DWARF 5 section 5.13; Link declares an artificial variable
	// "__vla_count_" + CountVar holding the value, which DW_AT_count
	// refers to, as gdb and lldb read it). Such an array can only be a
	// variable's own type (Var.Type), as its length differs per frame.
	Count    int
	CountVar string
	// Enumerators are an enumeration's named values.
	Enumerators []Enumerator
}

// TypeKind says what a [Type] is.
type TypeKind uint8

// Type kinds. The base kinds map to DWARF base type encodings (DWARF 5
// section 5.1, table 5.1).
const (
	// KindSigned is a two's complement integer (DW_ATE_signed).
	KindSigned TypeKind = iota + 1
	// KindUnsigned is an unsigned integer (DW_ATE_unsigned).
	KindUnsigned
	// KindBool is a boolean, 0 false and anything else true
	// (DW_ATE_boolean).
	KindBool
	// KindFloat is an IEEE 754 binary32 (Size 4) or binary64 (Size 8)
	// number (DW_ATE_float).
	KindFloat
	// KindChar is a character: a byte (Size 1, DW_ATE_signed_char, as C's
	// char) or a Unicode code unit or point (Size 2 or 4, DW_ATE_UTF in
	// DWARF 4 and later, DW_ATE_unsigned in DWARF 3).
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
	// KindVoid is no value: as [Proc.Result], a procedure that returns
	// nothing. A pointer to void has a nil Elem.
	KindVoid
)

var kindNames = [...]string{"kind 0", "signed", "unsigned", "bool", "float", "char", "pointer", "struct", "union", "array", "enum", "typedef", "const", "void"}

func (k TypeKind) String() string {
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

// IntType returns the signed integer type of size bytes (1, 2, 4 or 8),
// named "int8", "int16", "int32" or "int64".
func IntType(size int) *Type {
	return &Type{Kind: KindSigned, Name: fmt.Sprintf("int%d", 8*size), Size: size}
}

// UintType returns the unsigned integer type of size bytes (1, 2, 4 or
// 8), named "uint8", "uint16", "uint32" or "uint64".
func UintType(size int) *Type {
	return &Type{Kind: KindUnsigned, Name: fmt.Sprintf("uint%d", 8*size), Size: size}
}

// FloatType returns the floating-point type of size bytes: "float" (4) or
// "double" (8), as C and debuggers name them.
func FloatType(size int) *Type {
	name := "double"
	if size == 4 {
		name = "float"
	}
	return &Type{Kind: KindFloat, Name: name, Size: size}
}

// BoolType returns the one-byte boolean type "bool".
func BoolType() *Type { return &Type{Kind: KindBool, Name: "bool", Size: 1} }

// CharType returns the one-byte character type "char".
func CharType() *Type { return &Type{Kind: KindChar, Name: "char", Size: 1} }

// VoidType returns the void type: as a [Proc.Result], no value.
func VoidType() *Type { return &Type{Kind: KindVoid} }

// PointerTo returns the type of pointers to elem; a nil elem gives an
// untyped pointer ("void *").
func PointerTo(elem *Type) *Type { return &Type{Kind: KindPointer, Elem: elem} }

// ArrayOf returns the type of arrays of count elements of type elem.
func ArrayOf(elem *Type, count int) *Type { return &Type{Kind: KindArray, Elem: elem, Count: count} }

// StructOf returns the structure type name of size bytes with the given
// members.
func StructOf(name string, size int, members ...Member) *Type {
	return &Type{Kind: KindStruct, Name: name, Size: size, Members: members}
}

// UnionOf returns the union type name of size bytes with the given
// members (each at Offset 0).
func UnionOf(name string, size int, members ...Member) *Type {
	return &Type{Kind: KindUnion, Name: name, Size: size, Members: members}
}

// EnumOf returns the enumeration type name, an integer of size bytes,
// with the given named values.
func EnumOf(name string, size int, values ...Enumerator) *Type {
	return &Type{Kind: KindEnum, Name: name, Size: size, Enumerators: values}
}

// TypedefOf returns the type name, another name for t.
func TypedefOf(name string, t *Type) *Type { return &Type{Kind: KindTypedef, Name: name, Elem: t} }

// ConstOf returns t qualified const.
func ConstOf(t *Type) *Type { return &Type{Kind: KindConst, Elem: t} }

// String returns the type as C spells it, with the names of structures,
// unions and enumerations but not their members: "int64", "struct vm *",
// "double[8]", "const char *", "int64[n]". A nil Type is the default
// integer type of variables without one, "integer".
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
		kw := map[TypeKind]string{KindStruct: "struct", KindUnion: "union", KindEnum: "enum"}[t.Kind]
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
