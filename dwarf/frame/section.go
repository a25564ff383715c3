package frame

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/formaterr"
)

// ErrNoFDE is returned (wrapped with the pc) when no FDE covers a pc.
var ErrNoFDE = errors.New("frame: no FDE covers pc")

// PointerReader reads a pointer-sized value from the address space the
// section describes; it resolves DW_EH_PE_indirect pointers (a personality
// routine's GOT slot, for example).
type PointerReader interface {
	ReadUint64(addr uint64) (uint64, error)
}

// Bases are the addresses the relative DW_EH_PE pointer applications are
// relative to (LSB 5.0 section 10.5.1). DW_EH_PE_pcrel needs none (the
// section address is known) and DW_EH_PE_funcrel uses the FDE's start.
type Bases struct {
	Text, Data       uint64 // DW_EH_PE_textrel, DW_EH_PE_datarel base
	HasText, HasData bool   // whether Text and Data are known; if not, such pointers fail
}

// pointers decodes DW_EH_PE encoded pointers of one section.
type pointers struct {
	addr     uint64 // address of the section's first byte
	addrSize uint8
	bases    Bases
	indirect PointerReader
}

// read decodes one pointer in encoding enc at the cursor. funcBase is the
// DW_EH_PE_funcrel base, valid when hasFunc.
func (p *pointers) read(b *dwarf.Buf, enc dwarf.EHPE, field string, funcBase uint64, hasFunc bool) uint64 {
	if b.Err() != nil {
		return 0
	}
	start := b.Off()
	if enc == dwarf.DW_EH_PE_omit {
		b.FailAt(start, field, "pointer encoding DW_EH_PE_omit where a value is required")
		return 0
	}
	if enc&0x70 == dwarf.DW_EH_PE_aligned {
		a := uint64(p.addrSize)
		pad := (a - (p.addr+start)%a) % a
		b.Skip(pad, field)
		start = b.Off()
	}
	var v uint64
	switch enc & 0x0f {
	case dwarf.DW_EH_PE_absptr:
		v = b.Addr(p.addrSize, field)
	case dwarf.DW_EH_PE_uleb128:
		v = b.Uleb(field)
	case dwarf.DW_EH_PE_udata2:
		v = uint64(b.U16(field))
	case dwarf.DW_EH_PE_udata4:
		v = uint64(b.U32(field))
	case dwarf.DW_EH_PE_udata8:
		v = b.U64(field)
	case dwarf.DW_EH_PE_signed:
		v = b.Addr(p.addrSize, field)
		if p.addrSize == 4 {
			v = uint64(int64(int32(uint32(v))))
		}
	case dwarf.DW_EH_PE_sleb128:
		v = uint64(b.Sleb(field))
	case dwarf.DW_EH_PE_sdata2:
		v = uint64(int64(int16(b.U16(field))))
	case dwarf.DW_EH_PE_sdata4:
		v = uint64(int64(int32(b.U32(field))))
	case dwarf.DW_EH_PE_sdata8:
		v = b.U64(field)
	default:
		b.FailAt(start, field, fmt.Sprintf("unknown pointer format in encoding %#x", uint8(enc)))
		return 0
	}
	switch enc & 0x70 {
	case dwarf.DW_EH_PE_absptr, dwarf.DW_EH_PE_aligned:
	case dwarf.DW_EH_PE_pcrel:
		v += p.addr + start
	case dwarf.DW_EH_PE_textrel:
		if !p.bases.HasText {
			b.FailAt(start, field, "DW_EH_PE_textrel pointer but no text base given")
			return 0
		}
		v += p.bases.Text
	case dwarf.DW_EH_PE_datarel:
		if !p.bases.HasData {
			b.FailAt(start, field, "DW_EH_PE_datarel pointer but no data base given")
			return 0
		}
		v += p.bases.Data
	case dwarf.DW_EH_PE_funcrel:
		if !hasFunc {
			b.FailAt(start, field, "DW_EH_PE_funcrel pointer outside an FDE")
			return 0
		}
		v += funcBase
	default:
		b.FailAt(start, field, fmt.Sprintf("unknown pointer application in encoding %#x", uint8(enc)))
		return 0
	}
	if p.addrSize == 4 {
		v &= 0xffffffff
	}
	if enc&dwarf.DW_EH_PE_indirect != 0 {
		if p.indirect == nil {
			b.FailAt(start, field, "DW_EH_PE_indirect pointer unsupported without a memory reader")
			return 0
		}
		w, err := p.indirect.ReadUint64(v)
		if err != nil {
			b.FailAt(start, field, fmt.Sprintf("DW_EH_PE_indirect pointer at %#x unreadable: %v", v, err))
			return 0
		}
		v = w
		if p.addrSize == 4 {
			v &= 0xffffffff
		}
	}
	return v
}

// validEnc reports whether enc is a pointer encoding this package decodes.
func validEnc(enc dwarf.EHPE) bool {
	if enc == dwarf.DW_EH_PE_omit {
		return true
	}
	switch enc & 0x0f {
	case 0, 1, 2, 3, 4, 8, 9, 10, 11, 12:
	default:
		return false
	}
	if enc&0x70 == dwarf.DW_EH_PE_aligned {
		// LSB 5.0 table 10.3 (and GCC's unwinder) know only the exact
		// value DW_EH_PE_aligned: an aligned absolute pointer.
		return enc == dwarf.DW_EH_PE_aligned
	}
	return enc&0x70 <= dwarf.DW_EH_PE_aligned
}

// Section is one .eh_frame or .debug_frame section, ready to be read. It
// holds only the section bytes (not copied) and a few parameters: parsing
// is on demand, so a Section costs nothing to make and its methods may be
// called concurrently once its exported fields are set.
type Section struct {
	// Bases are the text and data bases for DW_EH_PE_textrel and
	// DW_EH_PE_datarel pointers; set them before use if the section has
	// such pointers (GCC never emits them on x86-64 or AArch64).
	Bases Bases
	// Indirect, if set, resolves DW_EH_PE_indirect pointers (it reads the
	// address space the section describes). Without it an indirect
	// personality or LSDA pointer is returned not dereferenced (see
	// ParsedCIE.PersonalityIndirect and ParsedFDE.LSDAIndirect), and an
	// indirect FDE pointer encoding (augmentation R) or DW_CFA_set_loc
	// operand fails with a *formaterr.Error.
	Indirect PointerReader

	fl       flavor
	name     string // fl.name(), kept to avoid an interface call per read
	eh       bool   // fl is ehFlavor
	le       bool   // order is binary.LittleEndian: fdeFast and Exec.runFast apply
	data     []byte
	order    binary.ByteOrder
	addr     uint64
	addrSize uint8
}

// NewEHFrame returns the .eh_frame section data loaded at address addr
// (pc-relative pointers are relative to it; give run-time addresses to get
// run-time pcs). addrSize is the target's address size, 4 or 8.
func NewEHFrame(data []byte, addr uint64, order binary.ByteOrder, addrSize uint8) *Section {
	return &Section{fl: ehFlavor{}, name: ".eh_frame", eh: true, le: order == binary.LittleEndian, data: data, order: order, addr: addr, addrSize: addrSize}
}

// NewDebugFrame returns the .debug_frame section data. addrSize is the
// address size used by CIEs of version < 4 (version 4 CIEs carry their own).
func NewDebugFrame(data []byte, order binary.ByteOrder, addrSize uint8) *Section {
	return &Section{fl: debugFlavor{}, name: ".debug_frame", le: order == binary.LittleEndian, data: data, order: order, addrSize: addrSize}
}

// Name returns ".eh_frame" or ".debug_frame".
func (s *Section) Name() string { return s.name }

// Data returns the section bytes.
func (s *Section) Data() []byte { return s.data }

// Addr returns the address the section was given (0 for .debug_frame).
func (s *Section) Addr() uint64 { return s.addr }

// IsEHFrame reports whether s is an .eh_frame section.
func (s *Section) IsEHFrame() bool { return s.eh }

func (s *Section) buf() dwarf.Buf {
	return dwarf.MakeBuf(s.name, s.order, s.data)
}

func (s *Section) ptrs(addrSize uint8) pointers {
	return pointers{addr: s.addr, addrSize: addrSize, bases: s.Bases, indirect: s.Indirect}
}

// ParsedCIE is a CIE as read from a section (DWARF 5 section 6.4.1; LSB 5.0
// section 10.6.1.1). Byte slices point into the section data.
type ParsedCIE struct {
	Offset         uint64       // section offset of the length field
	End            uint64       // section offset just past the entry
	Format         dwarf.Format // 32- or 64-bit DWARF
	Version        uint8        // 1, 3 or 4
	Augmentation   []byte       // augmentation string without its NUL ("zR", "zPLR", "S", "")
	AddrSize       uint8        // address size of FDE addresses (bytes)
	SegmentSize    uint8        // segment_selector_size (version 4)
	CodeAlign      uint64       // code alignment factor
	DataAlign      int64        // data alignment factor
	RA             arch.Reg     // return-address column
	FDEEnc         dwarf.EHPE   // R: FDE pointer encoding (DW_EH_PE_absptr if absent)
	LSDAEnc        dwarf.EHPE   // L: LSDA pointer encoding (DW_EH_PE_omit if absent)
	PersonalityEnc dwarf.EHPE   // P: encoding of Personality (DW_EH_PE_omit if absent)
	Personality    uint64       // P: personality routine address
	// PersonalityIndirect: the encoding is DW_EH_PE_indirect and the
	// Section has no Indirect reader, so Personality is the address of
	// the pointer to the routine, not dereferenced.
	PersonalityIndirect bool
	Signal              bool   // S: FDEs using this CIE are signal frames
	Initial             []byte // initial instructions
	InitialOff          uint64 // section offset of Initial
}

// ParsedFDE is an FDE as read from a section, with the CIE it uses. It
// describes the addresses [Start, Start+Size).
type ParsedFDE struct {
	Offset  uint64 // section offset of the length field
	End     uint64 // section offset just past the entry
	CIE     ParsedCIE
	Start   uint64 // initial_location / pc_begin (an address)
	Size    uint64 // address_range / pc_range (bytes)
	LSDA    uint64 // L: language-specific data area address
	HasLSDA bool
	// LSDAIndirect: like ParsedCIE.PersonalityIndirect, LSDA is the
	// address of a pointer to the LSDA.
	LSDAIndirect bool
	Insns        []byte // instructions
	InsnsOff     uint64 // section offset of Insns
	sec          *Section
	// cieOK: CIE was parsed without error from sec (the CIE at
	// CIE.Offset), so a later parse into this value of an FDE of the
	// same section using the same CIE keeps it instead of parsing again.
	cieOK bool
}

// Section returns the section the FDE was read from.
func (f *ParsedFDE) Section() *Section { return f.sec }

// Contains reports whether pc is in [Start, Start+Size).
func (f *ParsedFDE) Contains(pc uint64) bool { return pc >= f.Start && pc-f.Start < f.Size }

// EntryKind says what a section entry is.
type EntryKind uint8

// Entry kinds.
const (
	EntryCIE        EntryKind = iota + 1
	EntryFDE                  // a Frame Description Entry
	EntryTerminator           // a zero length: the end of an .eh_frame (padding in .debug_frame)
)

type header struct {
	off, idOff, body, end uint64
	format                dwarf.Format
	id                    uint64
}

func (s *Section) header(b *dwarf.Buf, off uint64) (h header, kind EntryKind) {
	h.off = off
	b.Seek(off, "length")
	length, f := b.UnitLength("length")
	h.format = f
	h.idOff = b.Off()
	if b.Err() != nil {
		return h, 0
	}
	if length == 0 && f == dwarf.Format32 {
		h.end = h.idOff
		return h, EntryTerminator
	}
	if length > uint64(b.Len()) {
		b.FailAt(off, "length", fmt.Sprintf("entry length %#x runs past the end of the section (%#x bytes left)", length, b.Len()))
		return h, 0
	}
	h.end = h.idOff + length
	b.SetEnd(int(h.end))
	if s.eh { // LSB 5.0 section 10.6.1: a 4-byte CIE id / pointer, 0 in a CIE
		h.id = uint64(b.U32("CIE_id"))
	} else {
		h.id = b.Uint(s.fl.idSize(f), "CIE_id")
	}
	h.body = b.Off()
	if b.Err() != nil {
		return h, 0
	}
	if s.eh && h.id == 0 || !s.eh && s.fl.isCIE(h.id, f) {
		return h, EntryCIE
	}
	return h, EntryFDE
}

// EntryAt reads the header of the entry at section offset off and returns
// its kind and the offset of the next entry. At the end of the data it
// returns next == len(data) with kind 0 and no error. Cost: O(1).
func (s *Section) EntryAt(off uint64) (kind EntryKind, next uint64, err error) {
	if off == uint64(len(s.data)) {
		return 0, off, nil
	}
	b := s.buf()
	h, kind := s.header(&b, off)
	if err := b.Err(); err != nil {
		return 0, 0, err
	}
	return kind, h.end, nil
}

// CIEAt parses the CIE whose length field is at section offset off.
// Errors are *formaterr.Error. Cost: O(augmentation); no allocation
// unless it fails.
func (s *Section) CIEAt(off uint64) (ParsedCIE, error) {
	var c ParsedCIE
	b := s.buf()
	h, kind := s.header(&b, off)
	if b.Err() == nil && kind != EntryCIE {
		b.FailAt(off, "CIE_id", "not a CIE")
	}
	s.parseCIE(&b, h, &c)
	return c, b.Err()
}

func (s *Section) parseCIE(b *dwarf.Buf, h header, c *ParsedCIE) {
	if b.Err() != nil {
		return
	}
	c.Offset, c.End, c.Format = h.off, h.end, h.format
	c.FDEEnc, c.LSDAEnc, c.PersonalityEnc = dwarf.DW_EH_PE_absptr, dwarf.DW_EH_PE_omit, dwarf.DW_EH_PE_omit
	c.AddrSize = s.addrSize
	vOff := b.Off()
	c.Version = b.U8("version")
	switch {
	case b.Err() != nil:
		return
	case c.Version == 1 || c.Version == 3:
	case c.Version == 4 && !s.IsEHFrame():
	default:
		b.FailAt(vOff, "version", fmt.Sprintf("unsupported CIE version %d", c.Version))
		return
	}
	augOff := b.Off()
	c.Augmentation = b.CString("augmentation")
	aug := c.Augmentation
	z := len(aug) > 0 && aug[0] == 'z'
	if !z {
		// Without z the layout of augmentation data is unknown; only S
		// (which has no data) is understood.
		for _, ch := range aug {
			if ch != 'S' {
				b.FailAt(augOff, "augmentation", fmt.Sprintf("unsupported augmentation %q", aug))
				return
			}
			c.Signal = true
		}
	}
	if c.Version == 4 {
		asOff := b.Off()
		c.AddrSize = b.U8("address_size")
		c.SegmentSize = b.U8("segment_selector_size")
		if b.Err() == nil && c.AddrSize != 4 && c.AddrSize != 8 {
			b.FailAt(asOff, "address_size", fmt.Sprintf("unsupported address size %d", c.AddrSize))
			return
		}
		if b.Err() == nil && c.SegmentSize > 8 {
			b.FailAt(asOff+1, "segment_selector_size", fmt.Sprintf("unsupported segment selector size %d", c.SegmentSize))
			return
		}
	}
	c.CodeAlign = b.Uleb("code_alignment_factor")
	c.DataAlign = b.Sleb("data_alignment_factor")
	raOff := b.Off()
	var ra uint64
	if c.Version == 1 {
		ra = uint64(b.U8("return_address_register"))
	} else {
		ra = b.Uleb("return_address_register")
	}
	if ra > 0xffff {
		b.FailAt(raOff, "return_address_register", fmt.Sprintf("register %d out of range", ra))
		return
	}
	c.RA = arch.Reg(ra)
	if z {
		n := b.Uleb("augmentation_length")
		dOff := b.Off()
		old := b.Limit(n, "augmentation_length")
		p := s.ptrs(c.AddrSize)
	loop:
		for _, ch := range aug[1:] {
			if b.Err() != nil {
				return
			}
			switch ch {
			case 'R':
				eOff := b.Off()
				c.FDEEnc = dwarf.EHPE(b.U8("FDE pointer encoding"))
				if c.FDEEnc == dwarf.DW_EH_PE_omit || !validEnc(c.FDEEnc) || c.FDEEnc&dwarf.DW_EH_PE_indirect != 0 && s.Indirect == nil {
					b.FailAt(eOff, "FDE pointer encoding", fmt.Sprintf("unsupported encoding %#x", uint8(c.FDEEnc)))
				}
			case 'L':
				eOff := b.Off()
				c.LSDAEnc = dwarf.EHPE(b.U8("LSDA encoding"))
				if !validEnc(c.LSDAEnc) {
					b.FailAt(eOff, "LSDA encoding", fmt.Sprintf("unsupported encoding %#x", uint8(c.LSDAEnc)))
				}
			case 'P':
				eOff := b.Off()
				c.PersonalityEnc = dwarf.EHPE(b.U8("personality encoding"))
				if !validEnc(c.PersonalityEnc) || c.PersonalityEnc == dwarf.DW_EH_PE_omit {
					b.FailAt(eOff, "personality encoding", fmt.Sprintf("unsupported encoding %#x", uint8(c.PersonalityEnc)))
					break loop
				}
				enc := c.PersonalityEnc
				if enc&dwarf.DW_EH_PE_indirect != 0 && s.Indirect == nil {
					enc &^= dwarf.DW_EH_PE_indirect
					c.PersonalityIndirect = true
				}
				c.Personality = p.read(b, enc, "personality", 0, false)
			case 'S':
				c.Signal = true
			case 'B', 'G':
				// AArch64 pointer authentication key B / MTE tagged frames:
				// no data.
			default:
				// Unknown: the rest of the data is skipped (its length is
				// known), as the z augmentation allows.
				break loop
			}
		}
		b.Seek(dOff+n, "augmentation data")
		b.SetEnd(old)
	}
	c.InitialOff = b.Off()
	c.Initial = b.Bytes(uint64(b.Len()), "initial_instructions")
	if b.Err() == nil && c.CodeAlign == 0 {
		b.FailAt(h.body, "code_alignment_factor", "zero")
	}
}

// FDEAt parses the FDE whose length field is at section offset off, with
// its CIE. Errors are *formaterr.Error. Cost: O(1) plus the CIE's
// augmentation; no allocation unless it fails.
func (s *Section) FDEAt(off uint64) (ParsedFDE, error) {
	var f ParsedFDE
	err := s.fdeAt(off, &f)
	return f, err
}

func (s *Section) fdeAt(off uint64, f *ParsedFDE) error {
	if s.eh && s.le && f.cieOK && f.sec == s && s.fdeFast(off, f) {
		return nil
	}
	b := s.buf()
	h, kind := s.header(&b, off)
	if b.Err() == nil && kind != EntryFDE {
		b.FailAt(off, "CIE_pointer", "not an FDE")
	}
	if err := b.Err(); err != nil {
		return err
	}
	return s.parseFDE(&b, h, f)
}

// fdeFast parses the .eh_frame FDE at off into f, which holds an FDE of
// s whose CIE was parsed without error, when the FDE has the shape GCC,
// LLVM and our writer emit: a 32-bit little-endian length, a CIE pointer
// to f's CIE, pc_begin and pc_range in DW_EH_PE_pcrel|sdata4 (or
// udata4/sdata4 absolute) and, for a "z" CIE, an augmentation length of
// one byte with no LSDA or a pcrel|sdata4 one. It reports whether it did; on false f is
// unchanged and the general parser (which names the field of any error)
// must run. Every field it accepts decodes to what parseFDE gives: the
// bounds are checked against the section and the entry's length.
func (s *Section) fdeFast(off uint64, f *ParsedFDE) bool {
	d := s.data
	if off >= uint64(len(d)) || uint64(len(d))-off < 17 {
		return false
	}
	e := d[off:]
	length := uint64(binary.LittleEndian.Uint32(e))
	if length < 13 || length > uint64(len(e))-4 {
		return false // a terminator, a 64-bit length, too short or too long
	}
	id := uint64(binary.LittleEndian.Uint32(e[4:]))
	c := &f.CIE
	if id == 0 || id > off+4 || off+4-id != c.Offset {
		return false
	}
	e = e[:4+length]
	var start, size uint64
	switch c.FDEEnc {
	case dwarf.DW_EH_PE_pcrel | dwarf.DW_EH_PE_sdata4:
		start = uint64(int64(int32(binary.LittleEndian.Uint32(e[8:])))) + s.addr + off + 8
		size = uint64(int64(int32(binary.LittleEndian.Uint32(e[12:]))))
	case dwarf.DW_EH_PE_sdata4:
		start = uint64(int64(int32(binary.LittleEndian.Uint32(e[8:]))))
		size = uint64(int64(int32(binary.LittleEndian.Uint32(e[12:]))))
	case dwarf.DW_EH_PE_udata4:
		start = uint64(binary.LittleEndian.Uint32(e[8:]))
		size = uint64(binary.LittleEndian.Uint32(e[12:]))
	default:
		return false
	}
	if c.AddrSize == 4 {
		start &= 0xffffffff
		size &= 0xffffffff
	}
	if start+size < start {
		return false // parseFDE reports the overflow
	}
	p := uint64(16)
	var lsda uint64
	hasLSDA := false
	if len(c.Augmentation) > 0 && c.Augmentation[0] == 'z' {
		n := uint64(e[16])
		if n >= 0x80 || n > uint64(len(e))-17 {
			return false
		}
		if n > 0 && c.LSDAEnc != dwarf.DW_EH_PE_omit {
			// A C++ FDE's LSDA pointer, pcrel|sdata4 as GCC and LLVM
			// write it; other encodings take the general parser.
			if c.LSDAEnc != dwarf.DW_EH_PE_pcrel|dwarf.DW_EH_PE_sdata4 || n < 4 {
				return false
			}
			lsda = uint64(int64(int32(binary.LittleEndian.Uint32(e[17:])))) + s.addr + off + 17
			if c.AddrSize == 4 {
				lsda &= 0xffffffff
			}
			hasLSDA = true
		}
		p += 1 + n
	}
	f.Offset, f.End, f.Start, f.Size = off, off+uint64(len(e)), start, size
	f.LSDA, f.HasLSDA, f.LSDAIndirect = lsda, hasLSDA, false
	f.InsnsOff, f.Insns = off+p, d[off+p:off+uint64(len(e))]
	return true
}

func (s *Section) parseFDE(b *dwarf.Buf, h header, f *ParsedFDE) error {
	cieOff, ok := h.idOff-h.id, h.id <= h.idOff // .eh_frame: relative to the pointer
	if !s.eh {
		cieOff, ok = s.fl.cieOffset(h.idOff, h.id)
	}
	if !ok || cieOff >= uint64(len(s.data)) {
		*f = ParsedFDE{Offset: h.off, End: h.end, sec: s}
		return &formaterr.Error{Source: s.fl.name(), Offset: h.idOff, Field: "CIE_pointer", Msg: fmt.Sprintf("CIE pointer %#x out of range", h.id)}
	}
	// An unwinder parses one FDE after another into the same value, and
	// most FDEs of a module share one CIE: keep the CIE already parsed
	// from this section (the section's bytes do not change).
	if f.cieOK && f.sec == s && f.CIE.Offset == cieOff {
		*f = ParsedFDE{Offset: h.off, End: h.end, CIE: f.CIE, sec: s, cieOK: true}
	} else {
		*f = ParsedFDE{Offset: h.off, End: h.end, sec: s}
		cb := s.buf()
		ch, kind := s.header(&cb, cieOff)
		if cb.Err() == nil && kind != EntryCIE {
			return &formaterr.Error{Source: s.fl.name(), Offset: h.idOff, Field: "CIE_pointer", Msg: fmt.Sprintf("entry at %#x is not a CIE", cieOff)}
		}
		s.parseCIE(&cb, ch, &f.CIE)
		if err := cb.Err(); err != nil {
			return err
		}
		f.cieOK = true
	}
	c := &f.CIE
	if s.IsEHFrame() {
		p := s.ptrs(c.AddrSize)
		f.Start = p.read(b, c.FDEEnc, "pc_begin", 0, false)
		f.Size = p.read(b, c.FDEEnc&0x0f, "pc_range", 0, false)
	} else {
		b.Skip(uint64(c.SegmentSize), "segment_selector")
		f.Start = b.Addr(c.AddrSize, "initial_location")
		f.Size = b.Addr(c.AddrSize, "address_range")
	}
	if b.Err() == nil && f.Start+f.Size < f.Start {
		b.FailAt(h.body, "pc_range", fmt.Sprintf("range [%#x, +%#x) overflows", f.Start, f.Size))
	}
	if len(c.Augmentation) > 0 && c.Augmentation[0] == 'z' {
		n := b.Uleb("augmentation_length")
		dOff := b.Off()
		old := b.Limit(n, "augmentation_length")
		if c.LSDAEnc != dwarf.DW_EH_PE_omit && n > 0 {
			p := s.ptrs(c.AddrSize)
			enc := c.LSDAEnc
			if enc&dwarf.DW_EH_PE_indirect != 0 && s.Indirect == nil {
				enc &^= dwarf.DW_EH_PE_indirect
				f.LSDAIndirect = true
			}
			f.LSDA = p.read(b, enc, "LSDA", f.Start, true)
			f.HasLSDA = b.Err() == nil
		}
		b.Seek(dOff+n, "augmentation data")
		b.SetEnd(old)
	}
	f.InsnsOff = b.Off()
	f.Insns = b.Bytes(uint64(b.Len()), "instructions")
	return b.Err()
}

// Entries calls fn for each CIE and FDE of the section in order, stopping
// at the end of the data, at a zero terminator in .eh_frame, at the first
// error (returned) or when fn returns false. Exactly one of cie and fde is
// non-nil; both point to values reused between calls. Cost: O(section);
// allocates nothing unless it fails.
func (s *Section) Entries(fn func(cie *ParsedCIE, fde *ParsedFDE) bool) error {
	var c ParsedCIE
	var f ParsedFDE
	off := uint64(0)
	for off < uint64(len(s.data)) {
		b := s.buf()
		h, kind := s.header(&b, off)
		if err := b.Err(); err != nil {
			return err
		}
		switch kind {
		case EntryTerminator:
			if s.fl.zeroTerminated() {
				return nil
			}
		case EntryCIE:
			c = ParsedCIE{}
			s.parseCIE(&b, h, &c)
			if err := b.Err(); err != nil {
				return err
			}
			if !fn(&c, nil) {
				return nil
			}
		case EntryFDE:
			if err := s.parseFDE(&b, h, &f); err != nil {
				return err
			}
			if !fn(nil, &f) {
				return nil
			}
		}
		off = h.end
	}
	return nil
}

// FDEs returns every FDE of the section in section order. Cost: O(section);
// allocates the result.
func (s *Section) FDEs() ([]ParsedFDE, error) {
	var out []ParsedFDE
	err := s.Entries(func(_ *ParsedCIE, f *ParsedFDE) bool {
		if f != nil {
			out = append(out, *f)
		}
		return true
	})
	return out, err
}

// FindFDE scans the section for the first FDE covering pc and stores it in
// fde. A miss returns an error wrapping [ErrNoFDE]. Cost: O(section) (use a
// [Finder] with .eh_frame_hdr for O(log n)); allocates nothing on a hit.
func (s *Section) FindFDE(pc uint64, fde *ParsedFDE) error {
	off := uint64(0)
	for off < uint64(len(s.data)) {
		b := s.buf()
		h, kind := s.header(&b, off)
		if err := b.Err(); err != nil {
			return err
		}
		if kind == EntryTerminator && s.fl.zeroTerminated() {
			break
		}
		if kind == EntryFDE {
			if err := s.parseFDE(&b, h, fde); err != nil {
				return err
			}
			if fde.Contains(pc) {
				return nil
			}
		}
		off = h.end
	}
	return fmt.Errorf("%w %#x in %s", ErrNoFDE, pc, s.fl.name())
}
