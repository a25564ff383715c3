package elfimage

import (
	"fmt"

	"github.com/elfimage/elfimage/dwarf/value"
)

// Type is the type of a value as debuggers show it: a base type (an
// integer, a boolean, a floating-point number, a character), a pointer, a
// structure or union of named members, an array, an enumeration, a
// typedef or a const-qualified type. It is the type model of package
// dwarf/value (see value.Type for its fields), which the image's
// queries ([Image.Locals], [Image.SubprogramAt]) read types back into and
// [FormatLocation] shows values of. Link writes each type once per image
// as DWARF type entries (DWARF 5 chapter 5), however many variables use
// it.
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
// Which fields a type uses depends on its Kind; the others must be zero.
// Two types with the same structure (kind, name, size, and the same
// structure of what they refer to) are written as one DWARF entry, so
// constructing IntType(8) twice costs nothing. Link refuses invalid types
// with a [LinkError] naming the procedure, the variable and the type. A
// variable-length array (Type.CountVar) makes Link declare an artificial
// variable value.CountPrefix + CountVar holding the length, which the
// array's DW_AT_count refers to, as gdb and lldb read it.
type Type = value.Type

// TypeKind says what a [Type] is (value.Kind).
type TypeKind = value.Kind

// Member is a named member of a structure or union at a byte offset
// (value.Member).
type Member = value.Member

// Enumerator is a named value of an enumeration (value.Enumerator).
type Enumerator = value.Enumerator

// Type kinds (see value.Kind for the DWARF encoding of each).
const (
	KindSigned       = value.KindSigned       // a two's complement integer
	KindUnsigned     = value.KindUnsigned     // an unsigned integer
	KindBool         = value.KindBool         // a boolean
	KindFloat        = value.KindFloat        // an IEEE 754 binary32 or binary64 number
	KindChar         = value.KindChar         // a signed byte character, or a Unicode code unit (Size 2 or 4)
	KindUnsignedChar = value.KindUnsignedChar // an unsigned byte character
	KindPointer      = value.KindPointer      // an address of a value of type Elem
	KindStruct       = value.KindStruct       // a structure of Members
	KindUnion        = value.KindUnion        // a union of Members
	KindArray        = value.KindArray        // Count (or CountVar) elements of type Elem
	KindEnum         = value.KindEnum         // an integer whose values have names
	KindTypedef      = value.KindTypedef      // another name for Elem
	KindConst        = value.KindConst        // Elem qualified const
	KindVoid         = value.KindVoid         // no value
)

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
