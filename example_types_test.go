package elfimage_test

import (
	"encoding/binary"
	"fmt"
	"log"
	"math"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/expr"
	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/unwind"
)

// bytesAt is memory holding b at address base (a stand-in for the target
// process's memory).
type bytesAt struct {
	base uint64
	b    []byte
}

func (m bytesAt) ReadUint64(a uint64) (uint64, error) {
	if a < m.base || len(m.b) < 8 || a-m.base > uint64(len(m.b)-8) {
		return 0, fmt.Errorf("%#x not mapped", a)
	}
	return binary.LittleEndian.Uint64(m.b[a-m.base:]), nil
}

// A compiler describes its VM's state as a structure, here one with a
// data pointer, a cells array, a float and a list of nodes that point to
// one another, and gives each parameter its type and location. Debuggers
// then show vm with its members (gdb's `p *vm`, lldb's `frame variable
// *vm`), and so do the image's own queries.
func Example_types() {
	node := &elfimage.Type{Kind: elfimage.KindStruct, Name: "node", Size: 16}
	node.Members = []elfimage.Member{
		{Name: "value", Offset: 0, Type: elfimage.IntType(8)},
		{Name: "next", Offset: 8, Type: elfimage.PointerTo(node)}, // recursive, through a pointer
	}
	vm := elfimage.StructOf("vm", 88,
		elfimage.Member{Name: "data", Offset: 0, Type: elfimage.PointerTo(elfimage.UintType(1))},
		elfimage.Member{Name: "cells", Offset: 8, Type: elfimage.ArrayOf(elfimage.IntType(8), 8)},
		elfimage.Member{Name: "f", Offset: 72, Type: elfimage.FloatType(8)},
		elfimage.Member{Name: "list", Offset: 80, Type: elfimage.PointerTo(node)},
	)
	// long run(struct vm *vm): push rbp; mov rbp, rsp; mov rax, [rdi+8]; pop rbp; ret
	code := []byte{0x55, 0x48, 0x89, 0xe5, 0x48, 0x8b, 0x47, 0x08, 0x5d, 0xc3}
	m := &elfimage.Module{File: "vm.c", Language: dwarf.DW_LANG_C99, Procs: []*elfimage.Proc{{
		Name: "run", Code: code, Result: elfimage.IntType(8),
		Lines: []elfimage.LineRow{{Offset: 0, Line: 1, IsStmt: true}, {Offset: 4, Line: 2, IsStmt: true, PrologueEnd: true}},
		CFI: []frame.Insn{
			{PC: 1, Op: frame.OpDefCFAOffset, Offset: 16},
			{PC: 1, Op: frame.OpOffset, Reg: arch.X86_64_RBP, Offset: -16},
			{PC: 4, Op: frame.OpDefCFARegister, Reg: arch.X86_64_RBP},
			{PC: 9, Op: frame.OpDefCFA, Reg: arch.X86_64_RSP, Offset: 8},
		},
		Params: []elfimage.Var{{Name: "vm", Type: elfimage.PointerTo(vm), Location: expr.Reg(arch.X86_64_RDI)}},
	}}}
	b, err := elfimage.Link(m, elfimage.LinkOptions{})
	if err != nil {
		log.Fatal(err)
	}
	img, err := elfimage.Load("vm.elf", b, &elfimage.LoadOptions{Arch: arch.X86_64}) // x86-64 CFI and registers, never run
	if err != nil {
		log.Fatal(err)
	}
	defer img.Close()

	p, err := img.ProcedureByName("run")
	if err != nil {
		log.Fatal(err)
	}
	locals, err := img.Locals(p.Start + 4)
	if err != nil {
		log.Fatal(err)
	}
	param := locals[0]
	fmt.Println(param.Name, param.Type) // the type read back from the image's DWARF

	// A frame in which RDI points at a vm in memory.
	const base = 0x10000
	mem := make([]byte, 120)
	binary.LittleEndian.PutUint64(mem[0:], base+104)
	for i := range 8 {
		binary.LittleEndian.PutUint64(mem[8+8*i:], uint64(i*i))
	}
	binary.LittleEndian.PutUint64(mem[72:], math.Float64bits(0.5))
	binary.LittleEndian.PutUint64(mem[80:], base+88)
	binary.LittleEndian.PutUint64(mem[88:], 7) // the node: value 7, next nil
	var regs unwind.Regs
	regs.Set(arch.X86_64_RDI, base)
	st := &elfimage.FrameState{Regs: regs, Mem: bytesAt{base, mem}}

	v, err := elfimage.FormatLocation(param.Location, param.Type, st)
	fmt.Println("vm =", v, err)
	// *vm: the structure at the pointer's value.
	v, err = elfimage.FormatLocation(expr.Breg(arch.X86_64_RDI, 0), param.Type.Elem, st)
	fmt.Println("*vm =", v, err)
	// Output:
	// vm struct vm *
	// vm = 0x10000 <nil>
	// *vm = {data = 0x10068, cells = {0, 1, 4, 9, 16, 25, 36, 49}, f = 0.5, list = 0x10058} <nil>
}

// A runtime that tags its integers (a fixnum n held as n<<1 | 1) gives the
// debugger the integer, not the word: the variable's location computes the
// value from the register and ends in DW_OP_stack_value (DWARF 5 section
// 2.6.1.1.4). gdb prints `n = 21` and lldb `(long) n = 21` (lldb names
// base types as C does); neither can assign to it, as the value lives
// nowhere.
func ExampleVar_stackValue() {
	n := elfimage.Var{
		Name: "n",
		Type: elfimage.IntType(8),
		// RAX >> 1, an arithmetic shift: DW_OP_breg0 0, DW_OP_lit1, DW_OP_shra, DW_OP_stack_value.
		Location: expr.Breg(arch.X86_64_RAX, 0).Const(1).Op(dwarf.DW_OP_shra).StackValue(),
	}
	ops, _ := expr.Decode(n.Location, expr.Params{AddrSize: 8})
	fmt.Println(ops)

	var regs unwind.Regs
	regs.Set(arch.X86_64_RAX, 21<<1|1)
	v, err := elfimage.FormatLocation(n.Location, n.Type, &elfimage.FrameState{Regs: regs})
	fmt.Println(n.Name, "=", v, err)
	// Output:
	// [DW_OP_breg0 0 DW_OP_lit1 DW_OP_shra DW_OP_stack_value]
	// n = 21 <nil>
}
