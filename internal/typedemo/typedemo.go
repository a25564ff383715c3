// Package typedemo is the typed test image of issue 13: a Module built by
// hand, as a compiler author would, whose one procedure takes a pointer to
// a structure holding every kind of type, a length, and a tagged fixnum,
// with a variable-length array and a fixnum untagged by its location
// expression. Root tests link and check it with llvm-dwarfdump and
// debug/dwarf; testdata/typesprog runs it under gdb and lldb.
package typedemo

import (
	"encoding/binary"
	"math"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/expr"
	"github.com/elfimage/elfimage/dwarf/frame"
)

// File is the source file the image names; its lines are Source's.
const File = "/elfimage/typedemo/vm.c"

// Source is what the procedure's line rows describe, line by line.
const Source = `struct vm;                                       /* 1 */
long inspect(struct vm *vm, unsigned long n, long fix)
{
	long a = vm->cells[0];                       /* 4: after the prologue */
	a += vm->cells[1];                           /* 5 */
	return a;                                    /* 6 */
}
`

// Proc is the procedure's name.
const Proc = "inspect"

// Layout of struct vm (VMSize bytes): offsets of its members.
const (
	OffData  = 0
	OffCells = 8 // int64[8]
	OffF     = 72
	OffG     = 80
	OffI32   = 84
	OffI16   = 88
	OffU16   = 90
	OffI8    = 92
	OffOK    = 93
	OffC     = 94
	OffU8    = 95
	OffCol   = 96
	OffU32   = 100
	OffU     = 104
	OffList  = 112
	OffK     = 120
	OffW     = 128
	OffName  = 136 // char[8]
	VMSize   = 144
	NodeSize = 16
)

// Types returns the types of the image: struct vm, struct node (a
// recursive list) and the enumeration color.
func Types() (vm, node, color *elfimage.Type) {
	node = &elfimage.Type{Kind: elfimage.KindStruct, Name: "node", Size: NodeSize}
	node.Members = []elfimage.Member{
		{Name: "value", Offset: 0, Type: elfimage.IntType(8)},
		{Name: "next", Offset: 8, Type: elfimage.PointerTo(node)},
	}
	color = elfimage.EnumOf("color", 4,
		elfimage.Enumerator{Name: "RED"}, elfimage.Enumerator{Name: "GREEN", Value: 1}, elfimage.Enumerator{Name: "BLUE", Value: 2})
	vm = elfimage.StructOf("vm", VMSize,
		elfimage.Member{Name: "data", Offset: OffData, Type: elfimage.PointerTo(elfimage.UintType(1))},
		elfimage.Member{Name: "cells", Offset: OffCells, Type: elfimage.ArrayOf(elfimage.IntType(8), 8)},
		elfimage.Member{Name: "f", Offset: OffF, Type: elfimage.FloatType(8)},
		elfimage.Member{Name: "g", Offset: OffG, Type: elfimage.FloatType(4)},
		elfimage.Member{Name: "i32", Offset: OffI32, Type: elfimage.IntType(4)},
		elfimage.Member{Name: "i16", Offset: OffI16, Type: elfimage.IntType(2)},
		elfimage.Member{Name: "u16", Offset: OffU16, Type: elfimage.UintType(2)},
		elfimage.Member{Name: "i8", Offset: OffI8, Type: elfimage.IntType(1)},
		elfimage.Member{Name: "ok", Offset: OffOK, Type: elfimage.BoolType()},
		elfimage.Member{Name: "c", Offset: OffC, Type: elfimage.CharType()},
		elfimage.Member{Name: "u8", Offset: OffU8, Type: elfimage.UintType(1)},
		elfimage.Member{Name: "col", Offset: OffCol, Type: color},
		elfimage.Member{Name: "u32", Offset: OffU32, Type: elfimage.UintType(4)},
		elfimage.Member{Name: "u", Offset: OffU, Type: elfimage.UnionOf("num", 8,
			elfimage.Member{Name: "i", Type: elfimage.IntType(8)},
			elfimage.Member{Name: "d", Type: elfimage.FloatType(8)})},
		elfimage.Member{Name: "list", Offset: OffList, Type: elfimage.PointerTo(node)},
		elfimage.Member{Name: "k", Offset: OffK, Type: elfimage.ConstOf(elfimage.IntType(8))},
		elfimage.Member{Name: "w", Offset: OffW, Type: elfimage.TypedefOf("word", elfimage.UintType(8))},
		elfimage.Member{Name: "name", Offset: OffName, Type: elfimage.ArrayOf(elfimage.CharType(), 8)},
	)
	return vm, node, color
}

// Code is inspect's machine code (x86-64), with the line of Source each
// instruction comes from.
//
//	0: 55           push rbp               line 3
//	1: 48 89 e5     mov rbp, rsp           line 3
//	4: 48 8b 47 08  mov rax, [rdi+8]       line 4 (prologue end)
//	8: 48 03 47 10  add rax, [rdi+16]      line 5
//	c: 5d           pop rbp                line 6
//	d: c3           ret                    line 6
var Code = []byte{0x55, 0x48, 0x89, 0xe5, 0x48, 0x8b, 0x47, 0x08, 0x48, 0x03, 0x47, 0x10, 0x5d, 0xc3}

// BodyStart and BodyEnd delimit the body, where the parameters' locations
// hold (the registers are not written before BodyEnd).
const BodyStart, BodyEnd = 4, 0xc

// Module returns the image's model: procedure inspect(vm, n, fix) with the
// variable-length array cells (n elements at vm->cells), the fixnum fix
// untagged (rdx >> 1) by its location expression, and pair, a structure
// in two registers (RSI and RDX: {n, Fix}). A second,
// procedure, other, uses the same types built again, to check that each
// is written once.
func Module() *elfimage.Module {
	vm, _, _ := Types()
	vm2, _, _ := Types()
	cells := &elfimage.Type{Kind: elfimage.KindArray, Elem: elfimage.IntType(8), CountVar: "n"}
	fixnum := elfimage.TypedefOf("fixnum", elfimage.IntType(8))
	p := &elfimage.Proc{
		Name: Proc, Code: Code, Line: 2, Column: 1,
		Result: elfimage.IntType(8),
		Lines: []elfimage.LineRow{
			{Offset: 0, Line: 3, Column: 1, IsStmt: true},
			{Offset: 4, Line: 4, Column: 2, IsStmt: true, PrologueEnd: true},
			{Offset: 8, Line: 5, Column: 2, IsStmt: true},
			{Offset: 0xc, Line: 6, Column: 2, IsStmt: true},
		},
		CFI: []frame.Insn{
			{PC: 1, Op: frame.OpDefCFAOffset, Offset: 16},
			{PC: 1, Op: frame.OpOffset, Reg: arch.X86_64_RBP, Offset: -16},
			{PC: 4, Op: frame.OpDefCFARegister, Reg: arch.X86_64_RBP},
			{PC: 0xd, Op: frame.OpDefCFA, Reg: arch.X86_64_RSP, Offset: 8},
		},
		Params: []elfimage.Var{
			{Name: "vm", Type: elfimage.PointerTo(vm), Line: 2, Column: 24, Location: expr.Reg(arch.X86_64_RDI)},
			{Name: "n", Type: elfimage.UintType(8), Line: 2, Column: 42, Location: expr.Reg(arch.X86_64_RSI)},
			// A fixnum n is held as n<<1 | 1: the debugger shows n.
			{Name: "fix", Type: fixnum, Line: 2, Column: 50,
				Location: expr.Breg(arch.X86_64_RDX, 0).Const(1).Op(dwarf.DW_OP_shra).StackValue()},
		},
		Scopes: []*elfimage.Scope{{
			Ranges: []elfimage.CodeRange{{Start: BodyStart, End: BodyEnd}},
			Vars: []elfimage.Var{
				// The first n cells, seen through vm (rdi + 8).
				{Name: "cells", Type: cells, Line: 4, Column: 7, Location: expr.Breg(arch.X86_64_RDI, OffCells)},
				{Name: "ratio", Type: elfimage.FloatType(8), Line: 4, Column: 7, Location: expr.Breg(arch.X86_64_RDI, OffF)},
				// A structure in two registers: a composite location.
				{Name: "pair", Type: elfimage.StructOf("pair", 16,
					elfimage.Member{Name: "a", Type: elfimage.UintType(8)},
					elfimage.Member{Name: "b", Offset: 8, Type: elfimage.IntType(8)}),
					Line: 4, Column: 7, Location: expr.Reg(arch.X86_64_RSI).Piece(8).Reg(arch.X86_64_RDX).Piece(8)},
			},
		}},
	}
	other := &elfimage.Proc{
		Name: "other", Code: []byte{0xc3}, Result: elfimage.VoidType(),
		Lines:  []elfimage.LineRow{{Offset: 0, Line: 7, Column: 1, IsStmt: true}},
		Params: []elfimage.Var{{Name: "vm", Type: elfimage.PointerTo(vm2), Location: expr.Reg(arch.X86_64_RDI)}},
	}
	return &elfimage.Module{File: File, CompDir: "/elfimage/typedemo", Producer: "typedemo", Language: dwarf.DW_LANG_C99,
		Procs: []*elfimage.Proc{p, other}}
}

// Values of the fixture's structure, as Fill writes them.
const (
	Data        = "hello"
	F           = 3.5
	G           = float32(-0.25)
	I32         = -7
	I16         = -300
	U16         = 65000
	I8          = -5
	C           = 'A'
	U8          = 200
	Col         = 1 // GREEN
	U32         = 4000000000
	UI          = -1234567890123
	K           = 42
	W           = 0xdeadbeef
	Name        = "vmname"
	N           = 5         // the length passed, of the variable-length array
	Fix         = 21<<1 | 1 // the tagged fixnum passed: 21
	First, Next = 10, 20    // the list's values
)

// Cell returns the fixture's cells[i].
func Cell(i int) int64 { return int64(i+1) * 11 }

// Fill writes the fixture's structure into mem, which the code sees at
// address base: struct vm at base, its list's two nodes at base+VMSize
// and base+VMSize+NodeSize, and the bytes of Data after them. mem must
// hold at least FillSize bytes.
func Fill(mem []byte, base uint64) {
	le := binary.LittleEndian
	i32, i16, i8, ui := int32(I32), int16(I16), int8(I8), int64(UI)
	n1, n2, data := base+VMSize, base+VMSize+NodeSize, base+VMSize+2*NodeSize
	le.PutUint64(mem[OffData:], data)
	for i := range 8 {
		le.PutUint64(mem[OffCells+8*i:], uint64(Cell(i)))
	}
	le.PutUint64(mem[OffF:], math.Float64bits(F))
	le.PutUint32(mem[OffG:], math.Float32bits(G))
	le.PutUint32(mem[OffI32:], uint32(i32))
	le.PutUint16(mem[OffI16:], uint16(i16))
	le.PutUint16(mem[OffU16:], U16)
	mem[OffI8] = byte(i8)
	mem[OffOK] = 1
	mem[OffC] = C
	mem[OffU8] = U8
	le.PutUint32(mem[OffCol:], Col)
	le.PutUint32(mem[OffU32:], U32)
	le.PutUint64(mem[OffU:], uint64(ui))
	le.PutUint64(mem[OffList:], n1)
	le.PutUint64(mem[OffK:], K)
	le.PutUint64(mem[OffW:], W)
	copy(mem[OffName:OffName+8], Name)
	le.PutUint64(mem[VMSize:], First)
	le.PutUint64(mem[VMSize+8:], n2)
	le.PutUint64(mem[VMSize+NodeSize:], Next)
	le.PutUint64(mem[VMSize+NodeSize+8:], 0)
	copy(mem[VMSize+2*NodeSize:], Data+"\x00")
}

// FillSize is the size of what Fill writes.
const FillSize = VMSize + 2*NodeSize + len(Data) + 1
