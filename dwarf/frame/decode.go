package frame

import (
	"fmt"
	"math"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
)

// MaxInsns bounds the number of instructions decoded from one CIE or FDE
// (each is at least one byte, so this only matters for huge entries).
const MaxInsns = 1 << 20

// Decoded is one call frame instruction exactly as read (DWARF 5 section
// 6.4.2): where it was, its opcode, and its meaning as an [Insn]. Offsets in
// the Insn are in bytes (already multiplied by the alignment factors); PC is
// the location the instruction takes effect at, as a byte offset from the
// FDE's start (0 for a CIE's initial instructions). Advances
// (DW_CFA_advance_loc*, DW_CFA_MIPS_advance_loc8, DW_CFA_set_loc) decode to
// [OpAdvanceLoc] with the new location in PC; DW_CFA_GNU_window_save
// (DW_CFA_AARCH64_negate_ra_state) decodes to [OpNegateRAState].
type Decoded struct {
	Off  uint64    // section offset of the opcode byte
	Code dwarf.CFA // the opcode; for the three primary opcodes without the low 6 bits
	Insn
}

// insnReader decodes instructions one at a time without allocating.
type insnReader struct {
	b     dwarf.Buf
	cie   *ParsedCIE
	p     pointers
	start uint64 // FDE start address
	loc   uint64 // current location, offset from start
	n     int
	isEH  bool
}

func (s *Section) insnReader(cie *ParsedCIE, code []byte, codeOff uint64, start uint64) insnReader {
	r := insnReader{b: s.buf(), cie: cie, p: s.ptrs(cie.AddrSize), start: start, isEH: s.IsEHFrame()}
	r.b.Seek(codeOff, "instructions")
	r.b.Limit(uint64(len(code)), "instructions")
	return r
}

func (r *insnReader) reg(field string) arch.Reg {
	off := r.b.Off()
	v := r.b.Uleb(field)
	if v > math.MaxUint16 {
		r.b.FailAt(off, field, fmt.Sprintf("register %d out of range", v))
		return 0
	}
	return arch.Reg(v)
}

func (r *insnReader) advance(d *Decoded, delta uint64) {
	f := delta * r.cie.CodeAlign
	if r.cie.CodeAlign != 0 && f/r.cie.CodeAlign != delta || r.loc+f < r.loc || r.start+r.loc+f < r.start {
		r.b.FailAt(d.Off, d.Code.String(), "advance overflows")
		return
	}
	r.loc += f
	d.Op, d.PC = OpAdvanceLoc, r.loc
}

// next decodes the next instruction into d. It returns false at the end of
// the instructions or on error (see r.b.Err()).
func (r *insnReader) next(d *Decoded) bool {
	if r.b.Len() == 0 {
		return false
	}
	r.n++
	if r.n > MaxInsns {
		r.b.Fail("instructions", "too many instructions")
		return false
	}
	*d = Decoded{Off: r.b.Off()}
	d.PC = r.loc
	op := r.b.U8("opcode")
	da := r.cie.DataAlign
	switch op & 0xc0 {
	case 0x40:
		d.Code = dwarf.DW_CFA_advance_loc
		r.advance(d, uint64(op&0x3f))
		return r.b.Err() == nil
	case 0x80:
		d.Code, d.Op, d.Reg = dwarf.DW_CFA_offset, OpOffset, arch.Reg(op&0x3f)
		d.Offset = int64(r.b.Uleb("offset")) * da
		return r.b.Err() == nil
	case 0xc0:
		d.Code, d.Op, d.Reg = dwarf.DW_CFA_restore, OpRestore, arch.Reg(op&0x3f)
		return r.b.Err() == nil
	}
	d.Code = dwarf.CFA(op)
	switch d.Code {
	case dwarf.DW_CFA_nop:
		d.Op = OpNop
	case dwarf.DW_CFA_AARCH64_negate_ra_state:
		d.Op = OpNegateRAState
	case dwarf.DW_CFA_set_loc:
		var a uint64
		if r.isEH {
			a = r.p.read(&r.b, r.cie.FDEEnc, "address", 0, false)
		} else {
			a = r.b.Addr(r.cie.AddrSize, "address")
		}
		if r.b.Err() == nil && (a < r.start || a-r.start < r.loc) {
			r.b.FailAt(d.Off, "DW_CFA_set_loc", fmt.Sprintf("location %#x moves backwards", a))
		}
		r.loc = a - r.start
		d.Op, d.PC = OpAdvanceLoc, r.loc
	case dwarf.DW_CFA_advance_loc1:
		r.advance(d, uint64(r.b.U8("delta")))
	case dwarf.DW_CFA_advance_loc2:
		r.advance(d, uint64(r.b.U16("delta")))
	case dwarf.DW_CFA_advance_loc4:
		r.advance(d, uint64(r.b.U32("delta")))
	case dwarf.DW_CFA_MIPS_advance_loc8:
		r.advance(d, r.b.U64("delta"))
	case dwarf.DW_CFA_offset_extended:
		d.Op, d.Reg = OpOffset, r.reg("register")
		d.Offset = int64(r.b.Uleb("offset")) * da
	case dwarf.DW_CFA_GNU_negative_offset_extended:
		d.Op, d.Reg = OpOffset, r.reg("register")
		d.Offset = -int64(r.b.Uleb("offset")) * da
	case dwarf.DW_CFA_restore_extended:
		d.Op, d.Reg = OpRestore, r.reg("register")
	case dwarf.DW_CFA_undefined:
		d.Op, d.Reg = OpUndefined, r.reg("register")
	case dwarf.DW_CFA_same_value:
		d.Op, d.Reg = OpSameValue, r.reg("register")
	case dwarf.DW_CFA_register:
		d.Op, d.Reg = OpRegister, r.reg("register")
		d.Reg2 = r.reg("register")
	case dwarf.DW_CFA_remember_state:
		d.Op = OpRememberState
	case dwarf.DW_CFA_restore_state:
		d.Op = OpRestoreState
	case dwarf.DW_CFA_def_cfa:
		d.Op, d.Reg = OpDefCFA, r.reg("register")
		d.Offset = int64(r.b.Uleb("offset"))
	case dwarf.DW_CFA_def_cfa_sf:
		d.Op, d.Reg = OpDefCFA, r.reg("register")
		d.Offset = r.b.Sleb("offset") * da
	case dwarf.DW_CFA_def_cfa_register:
		d.Op, d.Reg = OpDefCFARegister, r.reg("register")
	case dwarf.DW_CFA_def_cfa_offset:
		d.Op = OpDefCFAOffset
		d.Offset = int64(r.b.Uleb("offset"))
	case dwarf.DW_CFA_def_cfa_offset_sf:
		d.Op = OpDefCFAOffset
		d.Offset = r.b.Sleb("offset") * da
	case dwarf.DW_CFA_def_cfa_expression:
		d.Op = OpDefCFAExpression
		d.Expr = r.b.Bytes(r.b.Uleb("length"), "DW_CFA_def_cfa_expression")
	case dwarf.DW_CFA_expression, dwarf.DW_CFA_val_expression:
		d.Op = OpExpression
		if d.Code == dwarf.DW_CFA_val_expression {
			d.Op = OpValExpression
		}
		d.Reg = r.reg("register")
		d.Expr = r.b.Bytes(r.b.Uleb("length"), d.Code.String())
	case dwarf.DW_CFA_offset_extended_sf:
		d.Op, d.Reg = OpOffset, r.reg("register")
		d.Offset = r.b.Sleb("offset") * da
	case dwarf.DW_CFA_val_offset:
		d.Op, d.Reg = OpValOffset, r.reg("register")
		d.Offset = int64(r.b.Uleb("offset")) * da
	case dwarf.DW_CFA_val_offset_sf:
		d.Op, d.Reg = OpValOffset, r.reg("register")
		d.Offset = r.b.Sleb("offset") * da
	case dwarf.DW_CFA_GNU_args_size:
		d.Op = OpArgsSize
		d.Offset = int64(r.b.Uleb("size"))
	default:
		r.b.FailAt(d.Off, "opcode", fmt.Sprintf("unknown call frame instruction %#x", op))
	}
	return r.b.Err() == nil
}

// DecodeInsns decodes the initial instructions of cie (fde == nil) or the
// instructions of fde (cie must then be &fde.CIE or nil) into a list, for
// dumps. Errors are *formaterr.Error; the instructions decoded before the
// error are returned with it. Cost: O(instructions); allocates the result.
func (s *Section) DecodeInsns(cie *ParsedCIE, fde *ParsedFDE) ([]Decoded, error) {
	var r insnReader
	if fde != nil {
		r = s.insnReader(&fde.CIE, fde.Insns, fde.InsnsOff, fde.Start)
	} else {
		r = s.insnReader(cie, cie.Initial, cie.InitialOff, 0)
	}
	var out []Decoded
	var d Decoded
	for r.next(&d) {
		out = append(out, d)
	}
	return out, r.b.Err()
}
