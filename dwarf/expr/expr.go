// Package expr builds, decodes and evaluates DWARF expressions (DWARF 5
// sections 2.5 and 2.6): the stack machine that computes locations of
// variables (DW_AT_location, location lists) and the CFA and register
// rules of call frame information (DW_CFA_def_cfa_expression,
// DW_CFA_expression, DW_CFA_val_expression).
//
// [Code] builds expressions for a compiler: [Reg], [Breg], [Fbreg],
// [CallFrameCFA] and [Const] start one, its methods append operations in
// their shortest encodings ([Code.StackValue], [Code.Piece], [Code.Op]
// for arithmetic). [Decode] splits an expression into its operations
// without evaluating it.
//
// [Eval] runs one expression against a [Context] that supplies registers,
// memory, the CFA and the frame base, and returns a [Result]: a memory
// location, a register location or a value. Evaluation allocates nothing
// (the stack is a fixed array) unless it fails, and is bounded by
// [MaxSteps] operations and a [MaxStack]-deep stack, so hostile expressions
// cannot loop forever or grow memory. DW_OP_entry_value asks the Context
// for a value on entry when it implements [EntryValuer], and
// DW_OP_GNU_parameter_ref for the value a caller passed when it
// implements [ParameterValuer] (a debugger's frame, which finds both
// through the caller's call site); DW_OP_addr operands are link-time
// addresses, to which Params.AddrBias is added.
package expr

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/formaterr"
)

// Bounds on one evaluation.
const (
	MaxSteps = 10000 // operations executed (DW_OP_skip/bra can loop)
	MaxStack = 64    // values on the stack
)

// ErrUnsupported is wrapped by errors for valid operations this evaluator
// does not implement (DW_OP_xderef, DW_OP_call*, typed operations, more than
// one piece, ...). errors.As also finds the *formaterr.Error.
var ErrUnsupported = errors.New("expr: unsupported operation")

// Context supplies what an expression may read. Implementations are
// usually pointers to a struct, so passing one allocates nothing.
type Context interface {
	// Reg returns the value of DWARF register r, or false if unknown.
	Reg(r arch.Reg) (uint64, bool)
	// ReadMemory reads size bytes (1 to 8) at addr as an unsigned integer
	// in the target byte order.
	ReadMemory(addr uint64, size int) (uint64, error)
	// CFA returns the canonical frame address of the current frame
	// (DW_OP_call_frame_cfa), or false if unknown.
	CFA() (uint64, bool)
	// FrameBase returns the value of the current subprogram's
	// DW_AT_frame_base (DW_OP_fbreg), or false if unknown.
	FrameBase() (uint64, bool)
}

// ErrNoEntryValue is wrapped by the error of an evaluation that needed a
// value on entry (DW_OP_entry_value, DWARF 5 section 2.5.1.7) the Context
// could not give: it does not implement [EntryValuer], or its EntryValue
// found no call site that gives it (a tail call, a caller without call
// site information). The value is then not available here, which a
// debugger shows as optimized out.
var ErrNoEntryValue = errors.New("expr: value on entry not known")

// EntryValuer is implemented by a [Context] that can give the values
// registers had on entry to the current function, for DW_OP_entry_value
// and DW_OP_GNU_entry_value (DWARF 5 section 2.5.1.7), usually through the
// caller's call site (DW_TAG_call_site_parameter, section 3.4.2). Eval
// accepts the two sub-expressions gdb accepts: a register location
// (DW_OP_regN, DW_OP_regx), asking for the register's value on entry
// (size 0), and DW_OP_bregN 0 (or DW_OP_bregx r 0) followed by
// DW_OP_deref or DW_OP_deref_size, asking for the size bytes (1 to the
// address size) at the address the register held on entry
// (DW_AT_call_data_value).
type EntryValuer interface {
	// EntryValue returns register r's value on entry (size 0) or the
	// size bytes it pointed to then, as an unsigned integer. An error
	// wrapping ErrNoEntryValue means the value is not known here.
	EntryValue(r arch.Reg, size int) (uint64, error)
}

// ParameterValuer is implemented by a [Context] that can give the value
// a caller passed for a formal parameter the callee's DWARF does not
// locate: DW_OP_GNU_parameter_ref (a GNU extension gcc emits for
// parameters its interprocedural optimizations removed from a clone,
// such as f.isra.0), whose operand is the unit-relative offset of the
// DW_TAG_formal_parameter; the caller's DW_TAG_call_site_parameter for it
// has that DIE as DW_AT_abstract_origin and no DW_AT_location.
type ParameterValuer interface {
	// ParameterValue returns the value the caller's call site gives for
	// the DW_TAG_formal_parameter at unit-relative offset off. An error
	// wrapping ErrNoEntryValue means the value is not known here.
	ParameterValue(off uint64) (uint64, error)
}

// Params describes where an expression came from.
type Params struct {
	Section  string // section named in errors (".debug_info", ".eh_frame", ...)
	Offset   uint64 // section offset of the expression's first byte, for errors
	AddrSize uint8  // address size in bytes (4 or 8): DW_OP_addr, DW_OP_deref, arithmetic width
	// AddrBias is added to DW_OP_addr operands by Eval: the load bias of
	// the module whose link-time addresses they are (0 for an image
	// loaded where it was linked).
	AddrBias uint64
	Order    binary.ByteOrder // byte order of fixed-size operands
	// Format is the offset size of DW_OP_call_ref and
	// DW_OP_implicit_pointer operands, for [Decode] (Eval does not
	// implement them); 0 means dwarf.Format32.
	Format dwarf.Format
}

// Kind says what a [Result] is.
type Kind uint8

// Result kinds.
const (
	// Memory: the object is in memory at Result.Addr.
	Memory Kind = iota + 1
	// Register: the object is in register Result.Reg (DW_OP_reg*).
	Register
	// Value: the object has no location; its value is Result.Value
	// (DW_OP_stack_value).
	Value
	// Implicit: the object's value is the bytes Result.Bytes
	// (DW_OP_implicit_value).
	Implicit
)

func (k Kind) String() string {
	switch k {
	case Memory:
		return "memory"
	case Register:
		return "register"
	case Value:
		return "value"
	case Implicit:
		return "implicit"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Result is the outcome of an evaluation.
type Result struct {
	Kind  Kind
	Addr  uint64   // Memory: the address
	Reg   arch.Reg // Register: the register
	Value uint64   // Value: the value
	Bytes []byte   // Implicit: the value's bytes (a subslice of the expression)
	// PieceSize is the size in bytes of the one DW_OP_piece that ended
	// the expression, or 0 when there was none (the whole object).
	PieceSize uint64
}

// eval holds the machine state; it lives on Eval's stack.
type eval struct {
	p     Params
	b     dwarf.Buf
	stack [MaxStack]uint64
	sp    int
	mask  uint64
	err   error
}

func (e *eval) fail(off uint64, op dwarf.Op, msg string) {
	if e.err == nil {
		e.err = &formaterr.Error{Source: e.p.Section, Offset: e.p.Offset + off, Field: op.String(), Msg: msg}
	}
}

func (e *eval) unsupported(off uint64, op dwarf.Op) {
	if e.err == nil {
		fe := &formaterr.Error{Source: e.p.Section, Offset: e.p.Offset + off, Field: op.String(), Msg: "unsupported"}
		e.err = fmt.Errorf("%w: %w", ErrUnsupported, fe)
	}
}

func (e *eval) push(off uint64, op dwarf.Op, v uint64) {
	if e.sp == MaxStack {
		e.fail(off, op, fmt.Sprintf("stack deeper than %d", MaxStack))
		return
	}
	e.stack[e.sp] = v & e.mask
	e.sp++
}

func (e *eval) pop(off uint64, op dwarf.Op) uint64 {
	if e.sp == 0 {
		e.fail(off, op, "stack underflow")
		return 0
	}
	e.sp--
	return e.stack[e.sp]
}

// signed interprets v as a signed address-sized integer.
func (e *eval) signed(v uint64) int64 {
	if e.mask == 0xffffffff {
		return int64(int32(v))
	}
	return int64(v)
}

// Eval evaluates the DWARF expression code (DWARF 5 section 2.5) with the
// values initial pushed first, bottom to top (for CFI register rules, the
// CFA). The result is a memory location (the value left on top of the
// stack), a register location (DW_OP_reg*, DW_OP_regx, which must be the
// only operation), a value (DW_OP_stack_value) or implicit bytes
// (DW_OP_implicit_value); one DW_OP_piece may end the expression.
// DW_OP_entry_value pushes a value on entry that ctx gives when it is an
// [EntryValuer], DW_OP_GNU_parameter_ref the value a [ParameterValuer]
// gives (errors wrapping [ErrNoEntryValue] otherwise).
//
// Arithmetic is on address-sized values (p.AddrSize); DW_OP_div is signed,
// DW_OP_mod unsigned, comparisons signed (section 2.5.1.4). Errors are
// *formaterr.Error naming p.Section and the offset of the failing
// operation: malformed operands, stack underflow or more than [MaxStack]
// values, more than [MaxSteps] operations, division by zero, a register,
// memory, CFA or frame base the Context does not know, or (wrapping
// [ErrUnsupported]) an operation not implemented. Cost: O(MaxSteps) at
// most; no allocation unless it fails.
func Eval(code []byte, p Params, ctx Context, initial ...uint64) (Result, error) {
	e := eval{p: p, b: dwarf.MakeBuf(p.Section, p.Order, code), mask: ^uint64(0)}
	if p.AddrSize == 4 {
		e.mask = 0xffffffff
	} else if p.AddrSize != 8 {
		return Result{}, &formaterr.Error{Source: p.Section, Offset: p.Offset, Msg: fmt.Sprintf("unsupported address size %d", p.AddrSize)}
	}
	if p.Order == nil {
		e.b.Order = binary.LittleEndian
	}
	for _, v := range initial {
		e.push(0, 0, v)
	}
	var res Result
	steps := 0
	for e.err == nil && e.b.Len() > 0 {
		steps++
		if steps > MaxSteps {
			e.fail(e.b.Off(), 0, fmt.Sprintf("more than %d operations", MaxSteps))
			break
		}
		off := e.b.Off()
		op := dwarf.Op(e.b.U8("opcode"))
		if e.step(off, op, ctx, &res) {
			// A location description that must end the expression (or
			// be followed by one piece).
			e.finish(off, op, &res)
			break
		}
		if err := e.b.Err(); err != nil && e.err == nil {
			e.err = e.rebase(err)
		}
	}
	if e.err != nil {
		return Result{}, e.err
	}
	if res.Kind == 0 {
		if e.sp == 0 {
			return Result{}, &formaterr.Error{Source: p.Section, Offset: p.Offset, Msg: "empty expression stack"}
		}
		res = Result{Kind: Memory, Addr: e.stack[e.sp-1], PieceSize: res.PieceSize}
	}
	return res, nil
}

// rebase turns a cursor error (offset within code) into one with the
// section offset.
func (e *eval) rebase(err error) error {
	var fe *formaterr.Error
	if errors.As(err, &fe) {
		c := *fe
		c.Offset += e.p.Offset
		return &c
	}
	return err
}

// finish handles what may follow a location-ending operation: nothing, or
// one DW_OP_piece.
func (e *eval) finish(off uint64, op dwarf.Op, res *Result) {
	if e.err != nil || e.b.Err() != nil {
		if e.err == nil {
			e.err = e.rebase(e.b.Err())
		}
		return
	}
	if e.b.Len() == 0 {
		return
	}
	poff := e.b.Off()
	next := dwarf.Op(e.b.U8("opcode"))
	if next != dwarf.DW_OP_piece {
		e.fail(poff, next, fmt.Sprintf("operation after %v, which must end the expression", op))
		return
	}
	res.PieceSize = e.b.Uleb("size")
	if e.b.Err() != nil {
		e.err = e.rebase(e.b.Err())
		return
	}
	if e.b.Len() != 0 {
		e.unsupported(e.b.Off(), dwarf.DW_OP_piece)
	}
}

// step executes one operation. It returns true when the operation ends the
// expression with res set (register location, stack value, implicit value,
// or a piece ending a memory location).
func (e *eval) step(off uint64, op dwarf.Op, ctx Context, res *Result) bool {
	b := &e.b
	switch {
	case op >= dwarf.DW_OP_lit0 && op <= dwarf.DW_OP_lit31:
		e.push(off, op, uint64(op-dwarf.DW_OP_lit0))
		return false
	case op >= dwarf.DW_OP_reg0 && op <= dwarf.DW_OP_reg31:
		*res = Result{Kind: Register, Reg: arch.Reg(op - dwarf.DW_OP_reg0)}
		return true
	case op >= dwarf.DW_OP_breg0 && op <= dwarf.DW_OP_breg31:
		e.breg(off, op, ctx, arch.Reg(op-dwarf.DW_OP_breg0), b.Sleb("offset"))
		return false
	}
	switch op {
	case dwarf.DW_OP_addr:
		e.push(off, op, b.Addr(e.p.AddrSize, "address")+e.p.AddrBias)
	case dwarf.DW_OP_const1u:
		e.push(off, op, uint64(b.U8("constant")))
	case dwarf.DW_OP_const1s:
		e.push(off, op, uint64(int64(int8(b.U8("constant")))))
	case dwarf.DW_OP_const2u:
		e.push(off, op, uint64(b.U16("constant")))
	case dwarf.DW_OP_const2s:
		e.push(off, op, uint64(int64(int16(b.U16("constant")))))
	case dwarf.DW_OP_const4u:
		e.push(off, op, uint64(b.U32("constant")))
	case dwarf.DW_OP_const4s:
		e.push(off, op, uint64(int64(int32(b.U32("constant")))))
	case dwarf.DW_OP_const8u, dwarf.DW_OP_const8s:
		e.push(off, op, b.U64("constant"))
	case dwarf.DW_OP_constu:
		e.push(off, op, b.Uleb("constant"))
	case dwarf.DW_OP_consts:
		e.push(off, op, uint64(b.Sleb("constant")))
	case dwarf.DW_OP_regx:
		r := b.Uleb("register")
		if r > 0xffff {
			e.fail(off, op, fmt.Sprintf("register %d out of range", r))
			return false
		}
		*res = Result{Kind: Register, Reg: arch.Reg(r)}
		return b.Err() == nil
	case dwarf.DW_OP_bregx:
		r := b.Uleb("register")
		o := b.Sleb("offset")
		if r > 0xffff {
			e.fail(off, op, fmt.Sprintf("register %d out of range", r))
			return false
		}
		e.breg(off, op, ctx, arch.Reg(r), o)
	case dwarf.DW_OP_fbreg:
		o := b.Sleb("offset")
		if b.Err() != nil {
			return false
		}
		fb, ok := ctx.FrameBase()
		if !ok {
			e.fail(off, op, "frame base unknown")
			return false
		}
		e.push(off, op, fb+uint64(o))
	case dwarf.DW_OP_call_frame_cfa:
		cfa, ok := ctx.CFA()
		if !ok {
			e.fail(off, op, "CFA unknown")
			return false
		}
		e.push(off, op, cfa)
	case dwarf.DW_OP_dup:
		v := e.pop(off, op)
		e.push(off, op, v)
		e.push(off, op, v)
	case dwarf.DW_OP_drop:
		e.pop(off, op)
	case dwarf.DW_OP_over:
		e.pick(off, op, 1)
	case dwarf.DW_OP_pick:
		e.pick(off, op, uint64(b.U8("index")))
	case dwarf.DW_OP_swap:
		if e.sp < 2 {
			e.fail(off, op, "stack underflow")
			return false
		}
		e.stack[e.sp-1], e.stack[e.sp-2] = e.stack[e.sp-2], e.stack[e.sp-1]
	case dwarf.DW_OP_rot:
		if e.sp < 3 {
			e.fail(off, op, "stack underflow")
			return false
		}
		s := e.stack[e.sp-3 : e.sp]
		s[0], s[1], s[2] = s[2], s[0], s[1] // top moves to third, second to top, third to second
	case dwarf.DW_OP_deref:
		e.deref(off, op, ctx, int(e.p.AddrSize))
	case dwarf.DW_OP_deref_size:
		n := int(b.U8("size"))
		if b.Err() == nil && (n < 1 || n > int(e.p.AddrSize)) {
			e.fail(off, op, fmt.Sprintf("bad size %d", n))
			return false
		}
		e.deref(off, op, ctx, n)
	case dwarf.DW_OP_abs:
		v := e.signed(e.pop(off, op))
		if v < 0 {
			v = -v
		}
		e.push(off, op, uint64(v))
	case dwarf.DW_OP_neg:
		e.push(off, op, uint64(-e.signed(e.pop(off, op))))
	case dwarf.DW_OP_not:
		e.push(off, op, ^e.pop(off, op))
	case dwarf.DW_OP_plus_uconst:
		c := b.Uleb("constant")
		e.push(off, op, e.pop(off, op)+c)
	case dwarf.DW_OP_and, dwarf.DW_OP_div, dwarf.DW_OP_minus, dwarf.DW_OP_mod, dwarf.DW_OP_mul,
		dwarf.DW_OP_or, dwarf.DW_OP_plus, dwarf.DW_OP_shl, dwarf.DW_OP_shr, dwarf.DW_OP_shra, dwarf.DW_OP_xor,
		dwarf.DW_OP_eq, dwarf.DW_OP_ge, dwarf.DW_OP_gt, dwarf.DW_OP_le, dwarf.DW_OP_lt, dwarf.DW_OP_ne:
		e.binary(off, op)
	case dwarf.DW_OP_skip, dwarf.DW_OP_bra:
		d := int64(int16(b.U16("offset")))
		if b.Err() != nil {
			return false
		}
		if op == dwarf.DW_OP_bra && e.pop(off, op) == 0 {
			return false
		}
		target := int64(b.Off()) + d
		if target < 0 || target > int64(len(b.Data())) {
			e.fail(off, op, fmt.Sprintf("branch to %d outside the expression", target))
			return false
		}
		b.Seek(uint64(target), "offset")
	case dwarf.DW_OP_entry_value, dwarf.DW_OP_GNU_entry_value:
		n := b.Uleb("size")
		sub := b.Bytes(n, "block")
		if b.Err() != nil {
			return false
		}
		e.entryValue(off, op, ctx, sub)
	case dwarf.DW_OP_GNU_parameter_ref:
		ref := uint64(b.U32("offset"))
		if b.Err() != nil {
			return false
		}
		pv, ok := ctx.(ParameterValuer)
		if !ok {
			fe := &formaterr.Error{Source: e.p.Section, Offset: e.p.Offset + off, Field: op.String(), Msg: "no call site information"}
			e.err = fmt.Errorf("%w: %w", ErrNoEntryValue, fe)
			return false
		}
		v, err := pv.ParameterValue(ref)
		if err != nil {
			fe := &formaterr.Error{Source: e.p.Section, Offset: e.p.Offset + off, Field: op.String(), Msg: fmt.Sprintf("parameter at unit offset %#x", ref)}
			e.err = fmt.Errorf("%w: %w", fe, err)
			return false
		}
		e.push(off, op, v)
	case dwarf.DW_OP_nop:
	case dwarf.DW_OP_stack_value:
		v := e.pop(off, op)
		*res = Result{Kind: Value, Value: v}
		return e.err == nil
	case dwarf.DW_OP_implicit_value:
		n := b.Uleb("size")
		bs := b.Bytes(n, "block")
		*res = Result{Kind: Implicit, Bytes: bs}
		return b.Err() == nil
	case dwarf.DW_OP_piece:
		n := b.Uleb("size")
		if b.Err() != nil {
			return false
		}
		if b.Len() != 0 {
			e.unsupported(off, op)
			return false
		}
		if e.sp == 0 {
			e.fail(off, op, "piece without a location (an empty piece)")
			return false
		}
		*res = Result{Kind: Memory, Addr: e.stack[e.sp-1], PieceSize: n}
		return true
	default:
		e.unsupported(off, op)
	}
	return false
}

// entryValue pushes the value on entry that the sub-expression sub of a
// DW_OP_entry_value at off names (see EntryValuer).
func (e *eval) entryValue(off uint64, op dwarf.Op, ctx Context, sub []byte) {
	r, size, ok := EntryRegister(sub, e.p.AddrSize)
	if !ok {
		fe := &formaterr.Error{Source: e.p.Section, Offset: e.p.Offset + off, Field: op.String(),
			Msg: fmt.Sprintf("unsupported sub-expression % x (only DW_OP_regN, or DW_OP_bregN 0 and DW_OP_deref)", sub)}
		e.err = fmt.Errorf("%w: %w", ErrUnsupported, fe)
		return
	}
	ev, ok := ctx.(EntryValuer)
	if !ok {
		fe := &formaterr.Error{Source: e.p.Section, Offset: e.p.Offset + off, Field: op.String(), Msg: "no call site information"}
		e.err = fmt.Errorf("%w: %w", ErrNoEntryValue, fe)
		return
	}
	v, err := ev.EntryValue(r, size)
	if err != nil {
		fe := &formaterr.Error{Source: e.p.Section, Offset: e.p.Offset + off, Field: op.String(), Msg: fmt.Sprintf("register %d on entry", r)}
		e.err = fmt.Errorf("%w: %w", fe, err)
		return
	}
	e.push(off, op, v)
}

// EntryRegister decodes the sub-expression of a DW_OP_entry_value that
// EntryValuer supports: a register location (DW_OP_regN, DW_OP_regx r),
// for which it returns r and size 0, or DW_OP_bregN 0 (DW_OP_bregx r 0)
// followed by DW_OP_deref (size addrSize) or DW_OP_deref_size s (1 <= s
// <= addrSize), for which it returns r and the size. It reports false for
// any other expression. Cost: a few bytes read, no allocation.
func EntryRegister(sub []byte, addrSize uint8) (arch.Reg, int, bool) {
	b := dwarf.MakeBuf("", binary.LittleEndian, sub)
	op := dwarf.Op(b.U8("opcode"))
	var r uint64
	switch {
	case op >= dwarf.DW_OP_reg0 && op <= dwarf.DW_OP_reg31:
		r = uint64(op - dwarf.DW_OP_reg0)
	case op == dwarf.DW_OP_regx:
		r = b.Uleb("register")
	case op >= dwarf.DW_OP_breg0 && op <= dwarf.DW_OP_breg31, op == dwarf.DW_OP_bregx:
		r = uint64(op - dwarf.DW_OP_breg0)
		if op == dwarf.DW_OP_bregx {
			r = b.Uleb("register")
		}
		if b.Sleb("offset") != 0 {
			return 0, 0, false
		}
		size := int(addrSize)
		switch dwarf.Op(b.U8("opcode")) {
		case dwarf.DW_OP_deref:
		case dwarf.DW_OP_deref_size:
			size = int(b.U8("size"))
		default:
			return 0, 0, false
		}
		if b.Err() != nil || b.Len() != 0 || r > 0xffff || size < 1 || size > int(addrSize) {
			return 0, 0, false
		}
		return arch.Reg(r), size, true
	default:
		return 0, 0, false
	}
	if b.Err() != nil || b.Len() != 0 || r > 0xffff {
		return 0, 0, false
	}
	return arch.Reg(r), 0, true
}

func (e *eval) breg(off uint64, op dwarf.Op, ctx Context, r arch.Reg, o int64) {
	if e.b.Err() != nil {
		return
	}
	v, ok := ctx.Reg(r)
	if !ok {
		e.fail(off, op, fmt.Sprintf("register %d unknown", r))
		return
	}
	e.push(off, op, v+uint64(o))
}

func (e *eval) pick(off uint64, op dwarf.Op, i uint64) {
	if e.b.Err() != nil {
		return
	}
	if i >= uint64(e.sp) {
		e.fail(off, op, fmt.Sprintf("index %d beyond stack of %d", i, e.sp))
		return
	}
	e.push(off, op, e.stack[e.sp-1-int(i)])
}

func (e *eval) deref(off uint64, op dwarf.Op, ctx Context, n int) {
	if e.b.Err() != nil {
		return
	}
	a := e.pop(off, op)
	if e.err != nil {
		return
	}
	v, err := ctx.ReadMemory(a, n)
	if err != nil {
		e.fail(off, op, fmt.Sprintf("reading %d bytes at %#x: %v", n, a, err))
		return
	}
	e.push(off, op, v)
}

func (e *eval) binary(off uint64, op dwarf.Op) {
	b := e.pop(off, op) // top
	a := e.pop(off, op) // second
	if e.err != nil {
		return
	}
	sa, sb := e.signed(a), e.signed(b)
	bits := uint64(64)
	if e.mask == 0xffffffff {
		bits = 32
	}
	var r uint64
	cmp := func(c bool) uint64 {
		if c {
			return 1
		}
		return 0
	}
	switch op {
	case dwarf.DW_OP_and:
		r = a & b
	case dwarf.DW_OP_or:
		r = a | b
	case dwarf.DW_OP_xor:
		r = a ^ b
	case dwarf.DW_OP_plus:
		r = a + b
	case dwarf.DW_OP_minus:
		r = a - b
	case dwarf.DW_OP_mul:
		r = a * b
	case dwarf.DW_OP_div:
		if sb == 0 {
			e.fail(off, op, "division by zero")
			return
		}
		if sb == -1 {
			r = uint64(-sa) // avoids the MinInt64 / -1 trap
		} else {
			r = uint64(sa / sb)
		}
	case dwarf.DW_OP_mod:
		if b == 0 {
			e.fail(off, op, "division by zero")
			return
		}
		r = a % b
	case dwarf.DW_OP_shl:
		if b < bits {
			r = a << b
		}
	case dwarf.DW_OP_shr:
		if b < bits {
			r = a >> b
		}
	case dwarf.DW_OP_shra:
		if b >= bits {
			b = bits - 1
		}
		r = uint64(sa >> b)
	case dwarf.DW_OP_eq:
		r = cmp(sa == sb)
	case dwarf.DW_OP_ne:
		r = cmp(sa != sb)
	case dwarf.DW_OP_lt:
		r = cmp(sa < sb)
	case dwarf.DW_OP_le:
		r = cmp(sa <= sb)
	case dwarf.DW_OP_gt:
		r = cmp(sa > sb)
	case dwarf.DW_OP_ge:
		r = cmp(sa >= sb)
	}
	e.push(off, op, r)
}
