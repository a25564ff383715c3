package expr

import (
	"fmt"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
)

// Code is a DWARF expression being built (DWARF 5 section 2.5): the bytes
// of its operations, in order. Each method appends one operation, in its
// shortest encoding, and returns the longer expression, so that calls
// chain from one of the constructors ([Reg], [Breg], [Fbreg],
// [CallFrameCFA], [Const]) or from an empty Code:
//
//	// The value of a fixnum tagged in its low bit, held in RAX: rax >> 1.
//	loc := expr.Breg(arch.X86_64_RAX, 0).Const(1).Op(dwarf.DW_OP_shra).StackValue()
//
// A Code is a []byte, so it goes wherever a location expression does
// (elfimage.Var.Location, frame.Insn.Expr). Like append, a method may
// reuse the receiver's backing array: keep using only the result.
type Code []byte

// Reg returns the register location of DWARF register r (DWARF 5 section
// 2.6.1.1.3): the object is in r itself, not in memory. It must be the
// whole expression or be followed by [Code.Piece].
func Reg(r arch.Reg) Code { return Code(nil).Reg(r) }

// Breg returns an expression that pushes the contents of register r plus
// off (DWARF 5 section 2.5.1.2, DW_OP_breg0-31 or DW_OP_bregx): a memory
// location at that address, or with [Code.StackValue] a value computed
// from the register.
func Breg(r arch.Reg, off int64) Code { return Code(nil).Breg(r, off) }

// Fbreg returns an expression that pushes the frame base plus off (DWARF 5
// section 2.5.1.2, DW_OP_fbreg): a memory location in the frame. Images
// written by elfimage.Link have the CFA as every procedure's frame base,
// so off is relative to the CFA.
func Fbreg(off int64) Code { return Code(nil).Fbreg(off) }

// CallFrameCFA returns an expression that pushes the canonical frame
// address (DWARF 5 section 2.5.1.3, DW_OP_call_frame_cfa).
func CallFrameCFA() Code { return Code(nil).CallFrameCFA() }

// Const returns an expression that pushes the constant v (DWARF 5 section
// 2.5.1.1); see [Code.Const].
func Const(v int64) Code { return Code(nil).Const(v) }

// Reg appends a register location (DW_OP_reg0-31 for r < 32, else
// DW_OP_regx r; DWARF 5 section 2.6.1.1.3).
func (c Code) Reg(r arch.Reg) Code {
	if r < 32 {
		return append(c, byte(dwarf.DW_OP_reg0)+byte(r))
	}
	return dwarf.AppendUleb128(append(c, byte(dwarf.DW_OP_regx)), uint64(r))
}

// Breg appends "push register r + off" (DW_OP_breg0-31 for r < 32, else
// DW_OP_bregx r off; DWARF 5 section 2.5.1.2).
func (c Code) Breg(r arch.Reg, off int64) Code {
	if r < 32 {
		return dwarf.AppendSleb128(append(c, byte(dwarf.DW_OP_breg0)+byte(r)), off)
	}
	c = dwarf.AppendUleb128(append(c, byte(dwarf.DW_OP_bregx)), uint64(r))
	return dwarf.AppendSleb128(c, off)
}

// Fbreg appends "push frame base + off" (DW_OP_fbreg; DWARF 5 section
// 2.5.1.2).
func (c Code) Fbreg(off int64) Code {
	return dwarf.AppendSleb128(append(c, byte(dwarf.DW_OP_fbreg)), off)
}

// CallFrameCFA appends "push the CFA" (DW_OP_call_frame_cfa; DWARF 5
// section 2.5.1.3).
func (c Code) CallFrameCFA() Code { return append(c, byte(dwarf.DW_OP_call_frame_cfa)) }

// Const appends "push v" in the shortest encoding (DWARF 5 section
// 2.5.1.1): DW_OP_lit0-31, DW_OP_const1u/1s/2u/2s/4u/4s, or DW_OP_constu
// or DW_OP_consts when shorter, else DW_OP_const8s. Values are
// address-sized on the stack: with 4-byte addresses only the low 32 bits
// count.
func (c Code) Const(v int64) Code {
	switch {
	case v >= 0 && v < 32:
		return append(c, byte(dwarf.DW_OP_lit0)+byte(v))
	case v >= 0 && v <= 0xff:
		return append(c, byte(dwarf.DW_OP_const1u), byte(v))
	case v >= -0x80 && v < 0:
		return append(c, byte(dwarf.DW_OP_const1s), byte(v))
	}
	// Fixed-size forms and LEB128 forms: pick the shortest, fixed on a
	// tie (readers decode it without a loop).
	type form struct {
		op   dwarf.Op
		size int
	}
	var best form
	switch {
	case v >= 0 && v <= 0xffff:
		best = form{dwarf.DW_OP_const2u, 3}
	case v >= -0x8000 && v < 0x8000:
		best = form{dwarf.DW_OP_const2s, 3}
	case v >= 0 && v <= 0xffffffff:
		best = form{dwarf.DW_OP_const4u, 5}
	case v >= -0x80000000 && v < 0x80000000:
		best = form{dwarf.DW_OP_const4s, 5}
	default:
		best = form{dwarf.DW_OP_const8s, 9}
	}
	if v >= 0 && 1+dwarf.Uleb128Size(uint64(v)) < best.size {
		return dwarf.AppendUleb128(append(c, byte(dwarf.DW_OP_constu)), uint64(v))
	}
	if v < 0 && 1+dwarf.Sleb128Size(v) < best.size {
		return dwarf.AppendSleb128(append(c, byte(dwarf.DW_OP_consts)), v)
	}
	c = append(c, byte(best.op))
	for i := range best.size - 1 {
		c = append(c, byte(uint64(v)>>(8*i)))
	}
	return c
}

// Uconst appends "push v" for an unsigned v (DW_OP_lit0-31,
// DW_OP_const1u/2u/4u/8u or DW_OP_constu, the shortest; DWARF 5 section
// 2.5.1.1), for constants above math.MaxInt64.
func (c Code) Uconst(v uint64) Code {
	if v <= 1<<63-1 {
		return c.Const(int64(v))
	}
	if dwarf.Uleb128Size(v) < 8 {
		return dwarf.AppendUleb128(append(c, byte(dwarf.DW_OP_constu)), v)
	}
	c = append(c, byte(dwarf.DW_OP_const8u))
	for i := range 8 {
		c = append(c, byte(v>>(8*i)))
	}
	return c
}

// PlusUconst appends "add n to the top of the stack" (DW_OP_plus_uconst;
// DWARF 5 section 2.5.1.4).
func (c Code) PlusUconst(n uint64) Code {
	return dwarf.AppendUleb128(append(c, byte(dwarf.DW_OP_plus_uconst)), n)
}

// Deref appends "replace the address on top of the stack by the
// address-sized value stored there" (DW_OP_deref; DWARF 5 section
// 2.5.1.3).
func (c Code) Deref() Code { return append(c, byte(dwarf.DW_OP_deref)) }

// DerefSize appends "replace the address on top of the stack by the size
// bytes stored there, zero-extended" (DW_OP_deref_size; DWARF 5 section
// 2.5.1.3). Size is 1 to the address size.
func (c Code) DerefSize(size uint8) Code { return append(c, byte(dwarf.DW_OP_deref_size), size) }

// StackValue appends DW_OP_stack_value (DWARF 5 section 2.6.1.1.4): the
// value on top of the stack is the object's value, not its address. A
// debugger shows the value but cannot change it.
func (c Code) StackValue() Code { return append(c, byte(dwarf.DW_OP_stack_value)) }

// ImplicitValue appends DW_OP_implicit_value (DWARF 5 section 2.6.1.1.4):
// the object's value is the bytes b, in target byte order.
func (c Code) ImplicitValue(b []byte) Code {
	c = dwarf.AppendUleb128(append(c, byte(dwarf.DW_OP_implicit_value)), uint64(len(b)))
	return append(c, b...)
}

// Piece appends DW_OP_piece (DWARF 5 section 2.6.1.2): the location
// described so far holds the next size bytes of the object. An object in
// several places is a sequence of (location, piece), for example a
// 16-byte structure in two registers:
//
//	expr.Reg(arch.X86_64_RAX).Piece(8).Reg(arch.X86_64_RDX).Piece(8)
//
// A piece with no location before it stands for bytes that are not
// available (optimized out).
func (c Code) Piece(size uint64) Code {
	return dwarf.AppendUleb128(append(c, byte(dwarf.DW_OP_piece)), size)
}

// Op appends an operation that takes no operands (DWARF 5 section 2.5.1):
// stack operations (DW_OP_dup, DW_OP_drop, DW_OP_swap, DW_OP_over,
// DW_OP_rot), arithmetic and logic (DW_OP_plus, DW_OP_minus, DW_OP_mul,
// DW_OP_div, DW_OP_mod, DW_OP_neg, DW_OP_abs, DW_OP_and, DW_OP_or,
// DW_OP_xor, DW_OP_not, DW_OP_shl, DW_OP_shr, DW_OP_shra), comparisons
// (DW_OP_eq ... DW_OP_ne), DW_OP_deref, DW_OP_nop, DW_OP_lit0-31,
// DW_OP_reg0-31, DW_OP_push_object_address, DW_OP_form_tls_address,
// DW_OP_call_frame_cfa and DW_OP_stack_value. It panics for an operation
// that takes operands (use the method for it), as the expression would be
// malformed.
func (c Code) Op(op dwarf.Op) Code {
	if n, ok := operands[op]; !ok || n != 0 {
		if !(op >= dwarf.DW_OP_lit0 && op <= dwarf.DW_OP_lit31) && !(op >= dwarf.DW_OP_reg0 && op <= dwarf.DW_OP_reg31) {
			panic(fmt.Sprintf("expr: Code.Op(%v): the operation takes operands or is unknown", op))
		}
	}
	return append(c, byte(op))
}
