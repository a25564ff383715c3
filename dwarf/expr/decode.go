package expr

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/formaterr"
)

// operand is the encoding of one operand (DWARF 5 section 7.7.1, table
// 7.9).
type operand uint8

const (
	opU8 operand = iota + 1
	opS8
	opU16
	opS16
	opU32
	opS32
	opU64
	opS64
	opUleb
	opSleb
	opAddr   // address-sized
	opOffset // offset-sized (DWARF 5 section 7.4)
	opBlock  // ULEB128 length, then that many bytes
	opBlock1 // 1-byte length, then that many bytes (DW_OP_const_type)
)

// operandsOf gives the operands of every operation the decoder knows
// outside the lit, reg and breg ranges (those take none, none and one
// SLEB128).
var operandsOf = map[dwarf.Op][]operand{
	dwarf.DW_OP_addr: {opAddr}, dwarf.DW_OP_deref: nil,
	dwarf.DW_OP_const1u: {opU8}, dwarf.DW_OP_const1s: {opS8}, dwarf.DW_OP_const2u: {opU16}, dwarf.DW_OP_const2s: {opS16},
	dwarf.DW_OP_const4u: {opU32}, dwarf.DW_OP_const4s: {opS32}, dwarf.DW_OP_const8u: {opU64}, dwarf.DW_OP_const8s: {opS64},
	dwarf.DW_OP_constu: {opUleb}, dwarf.DW_OP_consts: {opSleb},
	dwarf.DW_OP_dup: nil, dwarf.DW_OP_drop: nil, dwarf.DW_OP_over: nil, dwarf.DW_OP_pick: {opU8},
	dwarf.DW_OP_swap: nil, dwarf.DW_OP_rot: nil, dwarf.DW_OP_xderef: nil, dwarf.DW_OP_abs: nil,
	dwarf.DW_OP_and: nil, dwarf.DW_OP_div: nil, dwarf.DW_OP_minus: nil, dwarf.DW_OP_mod: nil,
	dwarf.DW_OP_mul: nil, dwarf.DW_OP_neg: nil, dwarf.DW_OP_not: nil, dwarf.DW_OP_or: nil,
	dwarf.DW_OP_plus: nil, dwarf.DW_OP_plus_uconst: {opUleb}, dwarf.DW_OP_shl: nil, dwarf.DW_OP_shr: nil,
	dwarf.DW_OP_shra: nil, dwarf.DW_OP_xor: nil, dwarf.DW_OP_bra: {opS16},
	dwarf.DW_OP_eq: nil, dwarf.DW_OP_ge: nil, dwarf.DW_OP_gt: nil, dwarf.DW_OP_le: nil, dwarf.DW_OP_lt: nil, dwarf.DW_OP_ne: nil,
	dwarf.DW_OP_skip: {opS16},
	dwarf.DW_OP_regx: {opUleb}, dwarf.DW_OP_fbreg: {opSleb}, dwarf.DW_OP_bregx: {opUleb, opSleb},
	dwarf.DW_OP_piece: {opUleb}, dwarf.DW_OP_deref_size: {opU8}, dwarf.DW_OP_xderef_size: {opU8}, dwarf.DW_OP_nop: nil,
	dwarf.DW_OP_push_object_address: nil, dwarf.DW_OP_call2: {opU16}, dwarf.DW_OP_call4: {opU32}, dwarf.DW_OP_call_ref: {opOffset},
	dwarf.DW_OP_form_tls_address: nil, dwarf.DW_OP_call_frame_cfa: nil, dwarf.DW_OP_bit_piece: {opUleb, opUleb},
	dwarf.DW_OP_implicit_value: {opBlock}, dwarf.DW_OP_stack_value: nil, dwarf.DW_OP_implicit_pointer: {opOffset, opSleb},
	dwarf.DW_OP_addrx: {opUleb}, dwarf.DW_OP_constx: {opUleb}, dwarf.DW_OP_entry_value: {opBlock},
	dwarf.DW_OP_const_type: {opUleb, opBlock1}, dwarf.DW_OP_regval_type: {opUleb, opUleb},
	dwarf.DW_OP_deref_type: {opU8, opUleb}, dwarf.DW_OP_xderef_type: {opU8, opUleb},
	dwarf.DW_OP_convert: {opUleb}, dwarf.DW_OP_reinterpret: {opUleb},
	dwarf.DW_OP_GNU_push_tls_address: nil, dwarf.DW_OP_GNU_entry_value: {opBlock}, dwarf.DW_OP_GNU_parameter_ref: {opU32},
}

// operands counts the operands of each operation of operandsOf.
var operands = func() map[dwarf.Op]int {
	m := make(map[dwarf.Op]int, len(operandsOf))
	for op, ops := range operandsOf {
		m[op] = len(ops)
	}
	return m
}()

// Operation is one decoded operation of a DWARF expression.
type Operation struct {
	// Offset is the offset of the opcode from the start of the
	// expression.
	Offset uint64
	Op     dwarf.Op
	// Args are the operands other than blocks, in order (at most two):
	// unsigned ones as they are, signed ones sign-extended (read them as
	// int64). A DW_OP_breg0-31 has its offset in Args[0]; DW_OP_bregx
	// has the register in Args[0] and the offset in Args[1].
	Args [2]uint64
	// NArgs is the number of Args used.
	NArgs int
	// Block is the block operand of DW_OP_implicit_value,
	// DW_OP_entry_value and DW_OP_const_type: a subslice of the
	// expression.
	Block []byte
}

// Reg returns the register the operation names (DW_OP_reg0-31,
// DW_OP_breg0-31, DW_OP_regx, DW_OP_bregx, DW_OP_regval_type) and true,
// or false for other operations.
func (o Operation) Reg() (arch.Reg, bool) {
	switch {
	case o.Op >= dwarf.DW_OP_reg0 && o.Op <= dwarf.DW_OP_reg31:
		return arch.Reg(o.Op - dwarf.DW_OP_reg0), true
	case o.Op >= dwarf.DW_OP_breg0 && o.Op <= dwarf.DW_OP_breg31:
		return arch.Reg(o.Op - dwarf.DW_OP_breg0), true
	case o.Op == dwarf.DW_OP_regx, o.Op == dwarf.DW_OP_bregx, o.Op == dwarf.DW_OP_regval_type:
		if o.Args[0] > 0xffff {
			return 0xffff, true // out of any ABI's range; arch.Reg is 16 bits
		}
		return arch.Reg(o.Args[0]), true
	}
	return 0, false
}

// String formats the operation as llvm-dwarfdump does: its name, then its
// operands ("DW_OP_breg5 +8" is written "DW_OP_breg5 8").
func (o Operation) String() string {
	var b strings.Builder
	switch {
	case o.Op >= dwarf.DW_OP_lit0 && o.Op <= dwarf.DW_OP_lit31:
		fmt.Fprintf(&b, "DW_OP_lit%d", o.Op-dwarf.DW_OP_lit0)
	case o.Op >= dwarf.DW_OP_reg0 && o.Op <= dwarf.DW_OP_reg31:
		fmt.Fprintf(&b, "DW_OP_reg%d", o.Op-dwarf.DW_OP_reg0)
	case o.Op >= dwarf.DW_OP_breg0 && o.Op <= dwarf.DW_OP_breg31:
		fmt.Fprintf(&b, "DW_OP_breg%d", o.Op-dwarf.DW_OP_breg0)
	default:
		b.WriteString(o.Op.String())
	}
	signed := o.signedArgs()
	for i := range o.NArgs {
		b.WriteByte(' ')
		if signed[i] {
			b.WriteString(strconv.FormatInt(int64(o.Args[i]), 10))
		} else {
			b.WriteString(strconv.FormatUint(o.Args[i], 10))
		}
	}
	if o.Block != nil {
		fmt.Fprintf(&b, " [% x]", o.Block)
	}
	return b.String()
}

// signedArgs tells which of the Args are signed.
func (o Operation) signedArgs() [2]bool {
	if o.Op >= dwarf.DW_OP_breg0 && o.Op <= dwarf.DW_OP_breg31 {
		return [2]bool{true}
	}
	var s [2]bool
	i := 0
	for _, k := range operandsOf[o.Op] {
		if k == opBlock || k == opBlock1 {
			continue
		}
		s[i] = k == opS8 || k == opS16 || k == opS32 || k == opS64 || k == opSleb
		i++
	}
	return s
}

// Decode splits the expression code into its operations (DWARF 5 section
// 2.5, encodings of section 7.7.1) without evaluating it: every operation
// of DWARF 5 plus DW_OP_GNU_push_tls_address, DW_OP_GNU_entry_value and
// DW_OP_GNU_parameter_ref.
// p gives the address size (DW_OP_addr), byte order, offset size
// (p.Format, for DW_OP_call_ref and DW_OP_implicit_pointer; 0 means the
// 32-bit format) and the section and offset named in errors.
//
// Errors are *formaterr.Error naming the operation and its offset: an
// unknown opcode or a truncated operand. Cost: linear in len(code); one
// allocation for the result.
func Decode(code []byte, p Params) ([]Operation, error) {
	order := p.Order
	if order == nil {
		order = binary.LittleEndian
	}
	b := dwarf.MakeBuf(p.Section, order, code)
	var out []Operation
	for b.Len() > 0 && b.Err() == nil {
		o := Operation{Offset: b.Off()}
		o.Op = dwarf.Op(b.U8("opcode"))
		var kinds []operand
		switch {
		case o.Op >= dwarf.DW_OP_lit0 && o.Op <= dwarf.DW_OP_reg31:
		case o.Op >= dwarf.DW_OP_breg0 && o.Op <= dwarf.DW_OP_breg31:
			kinds = []operand{opSleb}
		default:
			var ok bool
			if kinds, ok = operandsOf[o.Op]; !ok {
				return nil, &formaterr.Error{Source: p.Section, Offset: p.Offset + o.Offset, Field: o.Op.String(), Msg: "unknown operation"}
			}
		}
		for _, k := range kinds {
			var v uint64
			field := o.Op.String() + " operand"
			switch k {
			case opU8:
				v = uint64(b.U8(field))
			case opS8:
				v = uint64(int64(int8(b.U8(field))))
			case opU16:
				v = uint64(b.U16(field))
			case opS16:
				v = uint64(int64(int16(b.U16(field))))
			case opU32:
				v = uint64(b.U32(field))
			case opS32:
				v = uint64(int64(int32(b.U32(field))))
			case opU64, opS64:
				v = b.U64(field)
			case opUleb:
				v = b.Uleb(field)
			case opSleb:
				v = uint64(b.Sleb(field))
			case opAddr:
				size := p.AddrSize
				if size == 0 {
					size = 8
				}
				v = b.Addr(size, field)
			case opOffset:
				if p.Format == dwarf.Format64 {
					v = b.U64(field)
				} else {
					v = uint64(b.U32(field))
				}
			case opBlock, opBlock1:
				var n uint64
				if k == opBlock {
					n = b.Uleb(field + " length")
				} else {
					n = uint64(b.U8(field + " length"))
				}
				o.Block = b.Bytes(n, field)
				if o.Block == nil {
					o.Block = []byte{}
				}
				continue
			}
			o.Args[o.NArgs] = v
			o.NArgs++
		}
		if b.Err() != nil {
			break
		}
		out = append(out, o)
	}
	if err := b.Err(); err != nil {
		var e eval
		e.p = p
		return nil, e.rebase(err)
	}
	return out, nil
}
