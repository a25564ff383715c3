package expr_test

import (
	"encoding/binary"
	"fmt"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/expr"
)

// regs is an expr.Context with registers only.
type regs map[arch.Reg]uint64

func (r regs) Reg(n arch.Reg) (uint64, bool)        { v, ok := r[n]; return v, ok }
func (regs) ReadMemory(uint64, int) (uint64, error) { return 0, fmt.Errorf("no memory") }
func (regs) CFA() (uint64, bool)                    { return 0, false }
func (regs) FrameBase() (uint64, bool)              { return 0, false }

// A runtime keeps fixnums tagged: the integer n is held as n<<1 | 1. Its
// debug information gives the value, not the word, with an expression
// that computes it from the register and ends in DW_OP_stack_value.
func ExampleCode() {
	untag := expr.Breg(arch.X86_64_RAX, 0).Const(1).Op(dwarf.DW_OP_shra).StackValue()
	ops, _ := expr.Decode(untag, expr.Params{AddrSize: 8})
	fmt.Println(ops)

	p := expr.Params{Section: ".debug_info", AddrSize: 8, Order: binary.LittleEndian}
	r, err := expr.Eval(untag, p, regs{arch.X86_64_RAX: 42<<1 | 1})
	fmt.Println(r.Kind, int64(r.Value), err)
	// Output:
	// [DW_OP_breg0 0 DW_OP_lit1 DW_OP_shra DW_OP_stack_value]
	// value 42 <nil>
}

// A 16-byte value returned in two registers is a location in pieces.
func ExampleCode_Piece() {
	loc := expr.Reg(arch.X86_64_RAX).Piece(8).Reg(arch.X86_64_RDX).Piece(8)
	ops, _ := expr.Decode(loc, expr.Params{AddrSize: 8})
	fmt.Println(ops)
	// Output:
	// [DW_OP_reg0 DW_OP_piece 8 DW_OP_reg1 DW_OP_piece 8]
}
