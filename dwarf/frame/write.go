package frame

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
)

// CIE is a Common Information Entry to write (DWARF 5 section 6.4.1): what
// the FDEs that use it share.
type CIE struct {
	// CodeAlign is the code alignment factor: every advance is a multiple
	// of it (bytes). Must be > 0.
	CodeAlign uint64
	// DataAlign is the data alignment factor: every factored offset (saved
	// register offsets, DW_CFA_def_cfa_sf) is a multiple of it (bytes).
	// Must be != 0.
	DataAlign int64
	// RA is the return-address column.
	RA arch.Reg
	// Initial are the initial instructions that define the first row of
	// every FDE using this CIE; their PC must be 0.
	Initial []Insn
	// Signal marks FDEs using this CIE as signal frames (augmentation "S"):
	// unwinders then look up the caller's exact pc, not pc-1.
	Signal bool
}

// FDE is a Frame Description Entry to write (DWARF 5 section 6.4.1): the
// rules for the code addresses [Start, Start+Size).
type FDE struct {
	// Start is the address of the first byte described; Size the number
	// of bytes.
	Start, Size uint64
	// Insns are the instructions after the CIE's initial ones, sorted by
	// PC, each PC a byte offset from Start in [0, Size].
	Insns []Insn
	// CIE, if not nil, is the CIE this FDE uses instead of the default one
	// given to the encoder. Equal CIEs are written once.
	CIE *CIE
}

// StandardCIE returns the CIE elfimage writes for ABI a: its code and data
// alignment factors and return-address column, with the row in effect at a
// procedure's first instruction. On x86-64 that is CFA = rsp+8 and the return
// address saved at CFA-8 (AMD64 psABI section 3.7); on AArch64 CFA = sp+0 and
// the return address is in the link register (no rule needed). Other ABIs get
// CFA = SP+0.
func StandardCIE(a *arch.Arch) CIE {
	c := CIE{CodeAlign: a.CodeAlign, DataAlign: a.DataAlign, RA: a.RA}
	switch a.Machine {
	case arch.X86_64.Machine:
		c.Initial = []Insn{
			{Op: OpDefCFA, Reg: a.SP, Offset: int64(a.PtrSize)},
			{Op: OpOffset, Reg: a.RA, Offset: -int64(a.PtrSize)},
		}
	default:
		c.Initial = []Insn{{Op: OpDefCFA, Reg: a.SP, Offset: 0}}
	}
	return c
}

// ErrInvalid is wrapped by every error the encoders return for a model they
// refuse (unsorted PCs, offsets not a multiple of the data alignment factor,
// values that do not fit their fields, ...).
var ErrInvalid = errors.New("frame: invalid call frame information")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// flavor holds what differs between .eh_frame and .debug_frame, for the
// writer and the reader alike.
type flavor interface {
	name() string
	// cieID is the value of the CIE id field of a CIE.
	cieID(f dwarf.Format) uint64
	// isCIE reports whether id (read at section offset idOff) marks a CIE.
	isCIE(id uint64, f dwarf.Format) bool
	// ciePointer encodes the FDE field at idOff pointing at the CIE at
	// cieOff, and decodes it back.
	ciePointer(idOff, cieOff uint64) uint64
	cieOffset(idOff, ptr uint64) (uint64, bool)
	// zeroTerminated reports whether a zero length ends the section.
	zeroTerminated() bool
	// idSize is the size of the CIE id / CIE pointer field.
	idSize(f dwarf.Format) int
}

// ehFlavor is .eh_frame; abs selects the FDE pointer encoding
// DW_EH_PE_absptr instead of ehPtrEnc (the reader ignores it: it decodes
// whatever encoding each CIE gives); deferred leaves the pcrel pc_begin
// fields zero, for [DeferredEHFrame.Put] to fill.
type ehFlavor struct{ abs, deferred bool }

func (ehFlavor) name() string                         { return ".eh_frame" }
func (ehFlavor) cieID(dwarf.Format) uint64            { return 0 }
func (ehFlavor) isCIE(id uint64, _ dwarf.Format) bool { return id == 0 }
func (ehFlavor) ciePointer(idOff, cieOff uint64) uint64 {
	return idOff - cieOff
}
func (ehFlavor) cieOffset(idOff, ptr uint64) (uint64, bool) {
	return idOff - ptr, ptr <= idOff
}
func (ehFlavor) zeroTerminated() bool { return true }

// idSize: LSB 5.0 section 10.6.1 makes the CIE id and CIE pointer 4 bytes
// even after an extended (64-bit) length.
func (ehFlavor) idSize(dwarf.Format) int { return 4 }

type debugFlavor struct{}

func (debugFlavor) name() string { return ".debug_frame" }
func (debugFlavor) cieID(f dwarf.Format) uint64 {
	if f == dwarf.Format64 {
		return math.MaxUint64
	}
	return math.MaxUint32
}
func (d debugFlavor) isCIE(id uint64, f dwarf.Format) bool { return id == d.cieID(f) }
func (debugFlavor) ciePointer(_, cieOff uint64) uint64     { return cieOff }
func (debugFlavor) cieOffset(_, ptr uint64) (uint64, bool) { return ptr, true }
func (debugFlavor) zeroTerminated() bool                   { return false }
func (debugFlavor) idSize(f dwarf.Format) int              { return f.OffsetSize() }

// ehPtrEnc is the pointer encoding elfimage writes in .eh_frame: FDE
// pc_begin relative to its own field, 4 bytes signed.
const ehPtrEnc = dwarf.DW_EH_PE_pcrel | dwarf.DW_EH_PE_sdata4

// EncodeEHFrame encodes an .eh_frame section (LSB 5.0 section 10.6.1) that
// will be loaded at address sectionAddr: each distinct CIE (cie, and any
// FDE.CIE) once with augmentation "zR" (plus "S" for signal frames) and
// pointer encoding DW_EH_PE_pcrel|DW_EH_PE_sdata4, then the FDEs in the
// order given, then a zero terminator. Each entry is padded with DW_CFA_nop
// to a multiple of enc.AddrSize. fdeOffsets[i] is the section offset of
// fdes[i]'s length field (for [EncodeEHFrameHdr]).
//
// enc gives the byte order and address size; its version is ignored (CIEs
// are version 1, or 3 when the return-address column exceeds 255) and so is
// its offset format: .eh_frame is always written in the 32-bit format,
// because its consumers (libgcc's unwinder, readelf) do not read 64-bit
// lengths there, and LSB fixes its CIE id and pointer at 4 bytes anyway. The size of data
// depends only on the model, never on sectionAddr or the FDE addresses, so a
// linker can size the section before laying it out. An FDE start more than
// 2 GiB away from its pc_begin field does not fit sdata4 and fails.
//
// Errors wrap [ErrInvalid]. Cost: O(total instructions); allocates the
// output.
func EncodeEHFrame(cie CIE, fdes []FDE, sectionAddr uint64, enc dwarf.Encoding) (data []byte, fdeOffsets []uint64, err error) {
	return encode(ehFlavor{}, cie, fdes, sectionAddr, enc)
}

// EncodeEHFrameAbsolute encodes an .eh_frame section as [EncodeEHFrame]
// does, except that the FDE pointer encoding (augmentation "R") is
// DW_EH_PE_absptr: each FDE's pc_begin and pc_range are enc.AddrSize-byte
// absolute values. The bytes then depend on no section address, which
// suits an .eh_frame that is read from a file but never loaded (not
// SHF_ALLOC), such as that of an in-memory symbol file registered through
// the GDB JIT interface (package jit/gdbjit), and cannot have an
// .eh_frame_hdr (whose table is relative to its own address). Every
// reader of .eh_frame decodes DW_EH_PE_absptr, the encoding FDEs have
// when a CIE has no "R" augmentation.
//
// Errors wrap [ErrInvalid]. Cost: O(total instructions); allocates the
// output.
func EncodeEHFrameAbsolute(cie CIE, fdes []FDE, enc dwarf.Encoding) (data []byte, fdeOffsets []uint64, err error) {
	return encode(ehFlavor{abs: true}, cie, fdes, 0, enc)
}

// EncodeDebugFrame encodes a .debug_frame section (DWARF 5 sections 6.4.1
// and 7.24): each distinct CIE once (augmentation "" or "S", CIE id
// 0xffffffff or 0xffffffffffffffff in DWARF64), then the FDEs with their
// CIE pointer as a section offset and absolute enc.AddrSize addresses. The
// CIE version follows enc.Version: 4 (with address_size and
// segment_selector_size fields) for DWARF 4 and 5, 3 for DWARF 3, 1 for
// DWARF 2 (3 when the return-address column exceeds 255).
// Entries are padded with DW_CFA_nop to a multiple of enc.AddrSize; there is
// no terminator. fdeOffsets[i] is the section offset of fdes[i].
//
// Errors wrap [ErrInvalid]. Cost: O(total instructions).
func EncodeDebugFrame(cie CIE, fdes []FDE, enc dwarf.Encoding) (data []byte, fdeOffsets []uint64, err error) {
	return encode(debugFlavor{}, cie, fdes, 0, enc)
}

type writer struct {
	fl    flavor
	enc   dwarf.Encoding
	order binary.AppendByteOrder
	buf   []byte
	addr  uint64 // section address (eh_frame)
	cie   []byte // cieBody's output, reused
	body  []byte // fde's body, reused
}

func encode(fl flavor, defCIE CIE, fdes []FDE, sectionAddr uint64, enc dwarf.Encoding) ([]byte, []uint64, error) {
	if enc.AddrSize != 4 && enc.AddrSize != 8 {
		return nil, nil, invalid("address size %d", enc.AddrSize)
	}
	if enc.Format != dwarf.Format32 && enc.Format != dwarf.Format64 {
		return nil, nil, invalid("offset format %d", enc.Format)
	}
	order, ok := enc.ByteOrder.(binary.AppendByteOrder)
	if !ok {
		return nil, nil, invalid("byte order %v cannot append", enc.ByteOrder)
	}
	if _, eh := fl.(ehFlavor); eh {
		enc.Format = dwarf.Format32
	}
	w := &writer{fl: fl, enc: enc, order: order, addr: sectionAddr}
	// The section at once: an FDE is about 24 bytes of header and
	// pc fields plus 2 or 3 per instruction.
	est := 64
	for i := range fdes {
		est += 28 + 3*len(fdes[i].Insns)
	}
	w.buf = make([]byte, 0, est)
	// CIEs are deduplicated by their encoded bytes.
	// The last CIE is remembered by address: FDEs without their own CIE
	// (and runs of FDEs sharing one) do not encode it again.
	cieOffs := map[string]uint64{}
	var lastCIE *CIE
	var lastOff uint64
	cieOf := func(c *CIE) (uint64, error) {
		if c == lastCIE {
			return lastOff, nil
		}
		body, err := w.cieBody(c)
		if err != nil {
			return 0, err
		}
		off, ok := cieOffs[string(body)]
		if !ok {
			off = uint64(len(w.buf))
			w.entry(fl.cieID(enc.Format), body)
			cieOffs[string(body)] = off
		}
		lastCIE, lastOff = c, off
		return off, nil
	}
	if _, err := cieOf(&defCIE); err != nil {
		return nil, nil, fmt.Errorf("CIE: %w", err)
	}
	offs := make([]uint64, len(fdes))
	for i := range fdes {
		f := &fdes[i]
		c := &defCIE
		if f.CIE != nil {
			c = f.CIE
		}
		cieOff, err := cieOf(c)
		if err != nil {
			return nil, nil, fmt.Errorf("FDE %d CIE: %w", i, err)
		}
		offs[i] = uint64(len(w.buf))
		if err := w.fde(f, c, cieOff); err != nil {
			return nil, nil, fmt.Errorf("FDE %d [%#x, %#x): %w", i, f.Start, f.Start+f.Size, err)
		}
	}
	if fl.zeroTerminated() {
		w.buf = append(w.buf, 0, 0, 0, 0)
	}
	return w.buf, offs, nil
}

// entry appends length, id (CIE id or CIE pointer) and body, then pads with
// DW_CFA_nop so the whole entry is a multiple of the address size.
func (w *writer) entry(id uint64, body []byte) {
	osz := w.enc.Format.OffsetSize()
	hdr := 4 + osz // length field + id
	if w.enc.Format == dwarf.Format64 {
		hdr = 12 + osz
	}
	total := hdr + len(body)
	pad := (int(w.enc.AddrSize) - total%int(w.enc.AddrSize)) % int(w.enc.AddrSize)
	length := uint64(total - (hdr - osz) + pad) // bytes after the length field
	if w.enc.Format == dwarf.Format64 {
		w.buf = w.order.AppendUint32(w.buf, 0xffffffff)
		w.buf = w.order.AppendUint64(w.buf, length) // unit_length
		w.buf = w.order.AppendUint64(w.buf, id)     // CIE_id / CIE_pointer
	} else {
		w.buf = w.order.AppendUint32(w.buf, uint32(length)) // length
		w.buf = w.order.AppendUint32(w.buf, uint32(id))     // CIE_id / CIE_pointer
	}
	w.buf = append(w.buf, body...)
	for range pad {
		w.buf = append(w.buf, byte(dwarf.DW_CFA_nop))
	}
}

// lenFieldSize is the size of the initial length field.
func (w *writer) lenFieldSize() int {
	if w.enc.Format == dwarf.Format64 {
		return 12
	}
	return 4
}

func (w *writer) cieBody(c *CIE) ([]byte, error) {
	if c.CodeAlign == 0 {
		return nil, invalid("code alignment factor 0")
	}
	if c.DataAlign == 0 {
		return nil, invalid("data alignment factor 0")
	}
	_, eh := w.fl.(ehFlavor)
	b := w.cie[:0]
	defer func() { w.cie = b[:0] }()
	version := byte(4)
	switch {
	case eh || w.enc.Version < 3:
		version = 1
		if c.RA > 0xff {
			version = 3
		}
	case w.enc.Version == 3:
		version = 3 // DWARF 3 section 6.4.1: no address_size fields
	}
	b = append(b, version) // version
	switch {
	case eh && c.Signal:
		b = append(b, "zRS\x00"...) // augmentation
	case eh:
		b = append(b, "zR\x00"...)
	case c.Signal:
		b = append(b, "S\x00"...)
	default:
		b = append(b, 0)
	}
	if version == 4 {
		b = append(b, w.enc.AddrSize, 0) // address_size, segment_selector_size
	}
	b = dwarf.AppendUleb128(b, c.CodeAlign) // code_alignment_factor
	b = dwarf.AppendSleb128(b, c.DataAlign) // data_alignment_factor
	if version == 1 {
		b = append(b, byte(c.RA)) // return_address_register
	} else {
		b = dwarf.AppendUleb128(b, uint64(c.RA))
	}
	if eh {
		enc := byte(ehPtrEnc)
		if w.fl.(ehFlavor).abs {
			enc = byte(dwarf.DW_EH_PE_absptr)
		}
		b = dwarf.AppendUleb128(b, 1) // augmentation data length
		b = append(b, enc)            // R: FDE pointer encoding
	}
	for i, in := range c.Initial {
		if in.PC != 0 {
			return nil, invalid("initial instruction %d (%v) at pc %#x: CIE instructions must be at pc 0", i, in.Op, in.PC)
		}
		if in.Op == OpRestore || in.Op == OpRestoreState {
			return nil, invalid("initial instruction %d: %v is meaningless in a CIE", i, in.Op)
		}
	}
	b, err := appendInsns(b, w.order, c, c.Initial, math.MaxUint64)
	return b, err
}

func (w *writer) fde(f *FDE, c *CIE, cieOff uint64) error {
	if f.Start+f.Size < f.Start {
		return invalid("range overflows the address space")
	}
	if w.enc.AddrSize == 4 && (f.Start > math.MaxUint32 || f.Start+f.Size > math.MaxUint32+1) {
		return invalid("range does not fit 4-byte addresses")
	}
	start := uint64(len(w.buf))
	idOff := start + uint64(w.lenFieldSize())
	bodyOff := idOff + uint64(w.enc.Format.OffsetSize())
	b := w.body[:0] // reused: entry copies the body out
	if fl, eh := w.fl.(ehFlavor); eh && fl.abs {
		b = w.appendAddr(b, f.Start)  // pc_begin (absptr)
		b = w.appendAddr(b, f.Size)   // pc_range
		b = dwarf.AppendUleb128(b, 0) // augmentation data length
	} else if eh {
		var rel int64
		if !fl.deferred {
			field := w.addr + bodyOff
			rel = int64(f.Start - field)
			if rel < math.MinInt32 || rel > math.MaxInt32 {
				return invalid("pc_begin %#x is too far from its field at %#x for sdata4", f.Start, field)
			}
		}
		if f.Size > math.MaxUint32 {
			return invalid("size %#x does not fit 4 bytes", f.Size)
		}
		b = w.order.AppendUint32(b, uint32(int32(rel))) // pc_begin (pcrel|sdata4)
		b = w.order.AppendUint32(b, uint32(f.Size))     // pc_range
		b = dwarf.AppendUleb128(b, 0)                   // augmentation data length
	} else {
		b = w.appendAddr(b, f.Start) // initial_location
		b = w.appendAddr(b, f.Size)  // address_range
	}
	b, err := appendInsns(b, w.order, c, f.Insns, f.Size)
	if err != nil {
		return err
	}
	w.entry(w.fl.ciePointer(idOff, cieOff), b)
	w.body = b[:0]
	return nil
}

// appendAddr appends v as an enc.AddrSize-byte value (the range check
// of fde makes it fit).
func (w *writer) appendAddr(b []byte, v uint64) []byte {
	if w.enc.AddrSize == 8 {
		return w.order.AppendUint64(b, v)
	}
	return w.order.AppendUint32(b, uint32(v))
}

// appendInsns encodes insns with the shortest encodings, advancing the
// location as needed. PCs must be sorted and at most size.
func appendInsns(b []byte, order binary.AppendByteOrder, c *CIE, insns []Insn, size uint64) ([]byte, error) {
	var pc uint64
	for i, in := range insns {
		if in.PC < pc {
			return nil, invalid("instruction %d (%v): pc %#x before previous pc %#x (unsorted)", i, in.Op, in.PC, pc)
		}
		if in.PC > size {
			return nil, invalid("instruction %d (%v): pc %#x past the end of the range (size %#x)", i, in.Op, in.PC, size)
		}
		if d := in.PC - pc; d != 0 {
			if d%c.CodeAlign != 0 {
				return nil, invalid("instruction %d: advance %#x is not a multiple of the code alignment factor %d", i, d, c.CodeAlign)
			}
			f := d / c.CodeAlign
			switch {
			case f < 0x40:
				b = append(b, byte(dwarf.DW_CFA_advance_loc)|byte(f))
			case f <= math.MaxUint8:
				b = append(b, byte(dwarf.DW_CFA_advance_loc1), byte(f))
			case f <= math.MaxUint16:
				b = append(b, byte(dwarf.DW_CFA_advance_loc2))
				b = order.AppendUint16(b, uint16(f))
			case f <= math.MaxUint32:
				b = append(b, byte(dwarf.DW_CFA_advance_loc4))
				b = order.AppendUint32(b, uint32(f))
			default:
				return nil, invalid("instruction %d: advance %#x too large", i, d)
			}
			pc = in.PC
		}
		var err error
		b, err = appendInsn(b, c, in)
		if err != nil {
			return nil, invalid("instruction %d (%v at pc %#x): %v", i, in.Op, in.PC, err)
		}
	}
	return b, nil
}

// factor divides a byte offset by the data alignment factor.
func factor(c *CIE, off int64) (int64, error) {
	if off%c.DataAlign != 0 {
		return 0, fmt.Errorf("offset %d is not a multiple of the data alignment factor %d", off, c.DataAlign)
	}
	return off / c.DataAlign, nil
}

func appendInsn(b []byte, c *CIE, in Insn) ([]byte, error) {
	uleb, sleb := dwarf.AppendUleb128, dwarf.AppendSleb128
	reg := uint64(in.Reg)
	switch in.Op {
	case OpNop:
		return append(b, byte(dwarf.DW_CFA_nop)), nil
	case OpAdvanceLoc:
		return b, nil
	case OpDefCFA:
		// def_cfa takes an unfactored non-negative offset; def_cfa_sf a
		// factored signed one. Prefer def_cfa on a tie.
		if in.Offset >= 0 {
			f, ferr := factor(c, in.Offset)
			if ferr != nil || dwarf.Uleb128Size(uint64(in.Offset)) <= dwarf.Sleb128Size(f) {
				b = append(b, byte(dwarf.DW_CFA_def_cfa))
				return uleb(uleb(b, reg), uint64(in.Offset)), nil
			}
		}
		f, err := factor(c, in.Offset)
		if err != nil {
			return nil, err
		}
		b = append(b, byte(dwarf.DW_CFA_def_cfa_sf))
		return sleb(uleb(b, reg), f), nil
	case OpDefCFARegister:
		return uleb(append(b, byte(dwarf.DW_CFA_def_cfa_register)), reg), nil
	case OpDefCFAOffset:
		if in.Offset >= 0 {
			f, ferr := factor(c, in.Offset)
			if ferr != nil || dwarf.Uleb128Size(uint64(in.Offset)) <= dwarf.Sleb128Size(f) {
				return uleb(append(b, byte(dwarf.DW_CFA_def_cfa_offset)), uint64(in.Offset)), nil
			}
		}
		f, err := factor(c, in.Offset)
		if err != nil {
			return nil, err
		}
		return sleb(append(b, byte(dwarf.DW_CFA_def_cfa_offset_sf)), f), nil
	case OpDefCFAExpression:
		if len(in.Expr) == 0 {
			return nil, fmt.Errorf("empty expression")
		}
		b = uleb(append(b, byte(dwarf.DW_CFA_def_cfa_expression)), uint64(len(in.Expr)))
		return append(b, in.Expr...), nil
	case OpOffset:
		f, err := factor(c, in.Offset)
		if err != nil {
			return nil, err
		}
		switch {
		case f >= 0 && reg < 0x40:
			return uleb(append(b, byte(dwarf.DW_CFA_offset)|byte(reg)), uint64(f)), nil
		case f >= 0:
			return uleb(uleb(append(b, byte(dwarf.DW_CFA_offset_extended)), reg), uint64(f)), nil
		default:
			return sleb(uleb(append(b, byte(dwarf.DW_CFA_offset_extended_sf)), reg), f), nil
		}
	case OpValOffset:
		f, err := factor(c, in.Offset)
		if err != nil {
			return nil, err
		}
		if f >= 0 {
			return uleb(uleb(append(b, byte(dwarf.DW_CFA_val_offset)), reg), uint64(f)), nil
		}
		return sleb(uleb(append(b, byte(dwarf.DW_CFA_val_offset_sf)), reg), f), nil
	case OpRegister:
		return uleb(uleb(append(b, byte(dwarf.DW_CFA_register)), reg), uint64(in.Reg2)), nil
	case OpExpression, OpValExpression:
		if len(in.Expr) == 0 {
			return nil, fmt.Errorf("empty expression")
		}
		op := dwarf.DW_CFA_expression
		if in.Op == OpValExpression {
			op = dwarf.DW_CFA_val_expression
		}
		b = uleb(uleb(append(b, byte(op)), reg), uint64(len(in.Expr)))
		return append(b, in.Expr...), nil
	case OpRestore:
		if reg < 0x40 {
			return append(b, byte(dwarf.DW_CFA_restore)|byte(reg)), nil
		}
		return uleb(append(b, byte(dwarf.DW_CFA_restore_extended)), reg), nil
	case OpUndefined:
		return uleb(append(b, byte(dwarf.DW_CFA_undefined)), reg), nil
	case OpSameValue:
		return uleb(append(b, byte(dwarf.DW_CFA_same_value)), reg), nil
	case OpRememberState:
		return append(b, byte(dwarf.DW_CFA_remember_state)), nil
	case OpRestoreState:
		return append(b, byte(dwarf.DW_CFA_restore_state)), nil
	case OpArgsSize:
		if in.Offset < 0 {
			return nil, fmt.Errorf("negative args size %d", in.Offset)
		}
		return uleb(append(b, byte(dwarf.DW_CFA_GNU_args_size)), uint64(in.Offset)), nil
	case OpNegateRAState:
		return append(b, byte(dwarf.DW_CFA_AARCH64_negate_ra_state)), nil
	}
	return nil, fmt.Errorf("unknown op %d", in.Op)
}
