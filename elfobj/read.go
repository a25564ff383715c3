package elfobj

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/elfimage/elfimage/formaterr"
)

// ErrNotELF is wrapped, together with a *formaterr.Error naming the
// e_ident field, by the errors of [DecodeHeader], [ReadHeader], [NewFile]
// and [NewBytes] for input that is not an ELF file at all: shorter than an
// ELF header, without the magic number, or of an unknown class or data
// encoding. Match it with errors.Is.
var ErrNotELF = errors.New("elfobj: not an ELF file")

// Header is an ELF file header (Elf32_Ehdr or Elf64_Ehdr, gABI "ELF
// Header") in a form independent of the class. The counts and indices are
// the values stored in the header, before the extended numbering escapes
// are resolved ([File] resolves them).
type Header struct {
	// FileHeader holds e_ident's class, data encoding, version, OS ABI
	// and ABI version, the byte order, e_type, e_machine and e_entry.
	elf.FileHeader
	ObjectVersion uint32 // e_version
	Phoff         uint64 // e_phoff: file offset of the program header table, bytes
	Shoff         uint64 // e_shoff: file offset of the section header table, bytes (0: none)
	Flags         uint32 // e_flags
	Ehsize        uint16 // e_ehsize: bytes
	Phentsize     uint16 // e_phentsize: bytes
	Phnum         uint16 // e_phnum (PN_XNUM: the count is in section header 0)
	Shentsize     uint16 // e_shentsize: bytes
	Shnum         uint16 // e_shnum (0 with e_shoff != 0: the count is in section header 0)
	Shstrndx      uint16 // e_shstrndx (SHN_XINDEX: the index is in section header 0)

	big  bool // ELFDATA2MSB
	is64 bool
}

// PN_XNUM is the e_phnum value that means the program header count is in
// section header 0's sh_info (gABI "Program Header", "Extended Program
// Header Numbering"); debug/elf does not name it.
const PN_XNUM = 0xffff

// ELF32 and ELF64 structure sizes in bytes (gABI "ELF Header", "Sections",
// "Symbol Table", "Relocation", "Program Header", "Dynamic Section",
// "Compressed Sections", "Note Section").
const (
	header32Size  = 52
	header64Size  = 64
	prog32Size    = 32
	prog64Size    = 56
	section32Size = 40
	section64Size = 64
	sym32Size     = 16
	sym64Size     = 24
	rel32Size     = 8
	rela32Size    = 12
	rel64Size     = 16
	rela64Size    = 24
	dyn32Size     = 8
	dyn64Size     = 16
	chdr32Size    = 12
	chdr64Size    = 24
	noteHdrSize   = 12 // Elf32_Nhdr and Elf64_Nhdr: namesz, descsz, type
)

// Field offsets of the file header, per class, for errors.
type headerLayout struct {
	phoff, shoff, shentsize, shnum, shstrndx, phentsize, phnum uint64
}

var (
	hdrLayout32 = headerLayout{phoff: 28, shoff: 32, phentsize: 42, phnum: 44, shentsize: 46, shnum: 48, shstrndx: 50}
	hdrLayout64 = headerLayout{phoff: 32, shoff: 40, phentsize: 54, phnum: 56, shentsize: 58, shnum: 60, shstrndx: 62}
)

func (h *Header) layout() *headerLayout {
	if h.is64 {
		return &hdrLayout64
	}
	return &hdrLayout32
}

func formatErr(section string, off uint64, field, format string, args ...any) *formaterr.Error {
	return &formaterr.Error{Source: section, Offset: off, Field: field, Msg: fmt.Sprintf(format, args...)}
}

func notELF(off uint64, field, format string, args ...any) error {
	return fmt.Errorf("%w: %w", ErrNotELF, formatErr("ELF header", off, field, format, args...))
}

// DecodeHeader decodes the ELF file header at the start of b, which must
// hold at least the header of the class b[EI_CLASS] names (52 bytes for
// ELFCLASS32, 64 for ELFCLASS64). It checks only what it needs to decode:
// the magic number, a known class and a known data encoding; e_ident's
// version, e_version, e_ehsize and the sizes and counts are returned as
// stored, for the caller to check. Errors wrap [ErrNotELF] and a
// *formaterr.Error (Source "ELF header") on e_ident[EI_MAG],
// e_ident[EI_CLASS] or e_ident[EI_DATA], or on e_ident when b is too short.
// Cost: constant; it allocates nothing but its error.
func DecodeHeader(b []byte) (Header, error) {
	var h Header
	err := DecodeHeaderInto(&h, b)
	return h, err
}

// DecodeHeaderInto is [DecodeHeader] decoding into *h, which it overwrites
// in full (fields it does not reach on an error are zero), instead of
// returning a Header: a caller that keeps the header in place (on its
// stack, in a struct) saves the copy of the result, about 100 bytes.
// Errors and cost as for DecodeHeader.
func DecodeHeaderInto(h *Header, b []byte) error {
	*h = Header{}
	if len(b) < elf.EI_NIDENT {
		return notELF(0, "e_ident", "%d bytes, shorter than e_ident (%d bytes)", len(b), elf.EI_NIDENT)
	}
	if string(b[:4]) != elf.ELFMAG {
		return notELF(0, "e_ident[EI_MAG]", "bad magic %q", b[:4])
	}
	h.Class = elf.Class(b[elf.EI_CLASS])
	switch h.Class {
	case elf.ELFCLASS32:
	case elf.ELFCLASS64:
		h.is64 = true
	default:
		return notELF(elf.EI_CLASS, "e_ident[EI_CLASS]", "unknown class %d", b[elf.EI_CLASS])
	}
	h.Data = elf.Data(b[elf.EI_DATA])
	switch h.Data {
	case elf.ELFDATA2LSB:
		h.ByteOrder = binary.LittleEndian
	case elf.ELFDATA2MSB:
		h.ByteOrder = binary.BigEndian
		h.big = true
	default:
		return notELF(elf.EI_DATA, "e_ident[EI_DATA]", "unknown data encoding %d", b[elf.EI_DATA])
	}
	if n := h.HeaderSize(); len(b) < n {
		return notELF(0, "e_ident", "%d bytes, shorter than the %d-byte %v header", len(b), n, h.Class)
	}
	h.Version = elf.Version(b[elf.EI_VERSION])
	h.OSABI = elf.OSABI(b[elf.EI_OSABI])
	h.ABIVersion = b[elf.EI_ABIVERSION]
	if h.is64 && !h.big { // the common case, without a branch per field
		le := binary.LittleEndian
		_ = b[header64Size-1]
		h.Type = elf.Type(le.Uint16(b[16:]))
		h.Machine = elf.Machine(le.Uint16(b[18:]))
		h.ObjectVersion = le.Uint32(b[20:])
		h.Entry = le.Uint64(b[24:])
		h.Phoff = le.Uint64(b[32:])
		h.Shoff = le.Uint64(b[40:])
		h.Flags = le.Uint32(b[48:])
		h.Ehsize = le.Uint16(b[52:])
		h.Phentsize = le.Uint16(b[54:])
		h.Phnum = le.Uint16(b[56:])
		h.Shentsize = le.Uint16(b[58:])
		h.Shnum = le.Uint16(b[60:])
		h.Shstrndx = le.Uint16(b[62:])
		return nil
	}
	h.Type = elf.Type(h.u16(b[16:]))
	h.Machine = elf.Machine(h.u16(b[18:]))
	h.ObjectVersion = h.u32(b[20:])
	if h.is64 {
		h.Entry = h.u64(b[24:])
		h.Phoff = h.u64(b[32:])
		h.Shoff = h.u64(b[40:])
		b = b[48:]
	} else {
		h.Entry = uint64(h.u32(b[24:]))
		h.Phoff = uint64(h.u32(b[28:]))
		h.Shoff = uint64(h.u32(b[32:]))
		b = b[36:]
	}
	h.Flags = h.u32(b)
	h.Ehsize = h.u16(b[4:])
	h.Phentsize = h.u16(b[6:])
	h.Phnum = h.u16(b[8:])
	h.Shentsize = h.u16(b[10:])
	h.Shnum = h.u16(b[12:])
	h.Shstrndx = h.u16(b[14:])
	return nil
}

// HeaderFor returns a Header with only the class and data encoding set
// (and the byte order they imply), for decoding structures of a file whose
// header the caller does not have at hand. Errors are those of
// [DecodeHeader] for an unknown class or data encoding. Cost: constant; no
// allocation but the error.
func HeaderFor(class elf.Class, data elf.Data) (Header, error) {
	var b [header64Size]byte
	copy(b[:], elf.ELFMAG)
	b[elf.EI_CLASS], b[elf.EI_DATA] = byte(class), byte(data)
	return DecodeHeader(b[:])
}

// ReadHeader reads and decodes the ELF file header at offset 0 of r (one
// read of at most 64 bytes). Errors are those of [DecodeHeader], with a
// file shorter than the header reported as such; an error of r other than
// io.EOF is returned wrapped.
func ReadHeader(r io.ReaderAt) (Header, error) {
	var b [header64Size]byte
	n, err := r.ReadAt(b[:], 0)
	if n < len(b) && err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return Header{}, fmt.Errorf("elfobj: reading the ELF header: %w", err)
	}
	return DecodeHeader(b[:n])
}

func (h *Header) u16(b []byte) uint16 {
	if h.big {
		return binary.BigEndian.Uint16(b)
	}
	return binary.LittleEndian.Uint16(b)
}

func (h *Header) u32(b []byte) uint32 {
	if h.big {
		return binary.BigEndian.Uint32(b)
	}
	return binary.LittleEndian.Uint32(b)
}

func (h *Header) u64(b []byte) uint64 {
	if h.big {
		return binary.BigEndian.Uint64(b)
	}
	return binary.LittleEndian.Uint64(b)
}

func (h *Header) put32(b []byte, v uint32) {
	if h.big {
		binary.BigEndian.PutUint32(b, v)
	} else {
		binary.LittleEndian.PutUint32(b, v)
	}
}

func (h *Header) put64(b []byte, v uint64) {
	if h.big {
		binary.BigEndian.PutUint64(b, v)
	} else {
		binary.LittleEndian.PutUint64(b, v)
	}
}

// Is64 reports whether the file is ELFCLASS64.
func (h *Header) Is64() bool { return h.is64 }

// HeaderSize returns the size in bytes of the file header of h's class:
// 52 or 64.
func (h *Header) HeaderSize() int {
	if h.is64 {
		return header64Size
	}
	return header32Size
}

// ProgHeaderSize returns the size in bytes of one program header of h's
// class (Elf32_Phdr 32, Elf64_Phdr 56): the e_phentsize a reader accepts.
func (h *Header) ProgHeaderSize() int {
	if h.is64 {
		return prog64Size
	}
	return prog32Size
}

// SectionHeaderSize returns the size in bytes of one section header of h's
// class (Elf32_Shdr 40, Elf64_Shdr 64): the e_shentsize a reader accepts.
func (h *Header) SectionHeaderSize() int {
	if h.is64 {
		return section64Size
	}
	return section32Size
}

// SymSize returns the size in bytes of one symbol table entry of h's class
// (Elf32_Sym 16, Elf64_Sym 24).
func (h *Header) SymSize() int {
	if h.is64 {
		return sym64Size
	}
	return sym32Size
}

// RelSize returns the size in bytes of one relocation entry of h's class,
// with an explicit addend (Elf32_Rela 12, Elf64_Rela 24) when rela is set,
// else without (Elf32_Rel 8, Elf64_Rel 16).
func (h *Header) RelSize(rela bool) int {
	switch {
	case h.is64 && rela:
		return rela64Size
	case h.is64:
		return rel64Size
	case rela:
		return rela32Size
	}
	return rel32Size
}

// DynSize returns the size in bytes of one dynamic table entry of h's
// class (Elf32_Dyn 8, Elf64_Dyn 16).
func (h *Header) DynSize() int {
	if h.is64 {
		return dyn64Size
	}
	return dyn32Size
}

// DecodeProg decodes the program header (Elf32_Phdr or Elf64_Phdr, gABI
// "Program Header") at the start of b, which must hold at least
// [Header.ProgHeaderSize] bytes (it panics otherwise, as indexing does).
// Cost: constant; no allocation.
func (h *Header) DecodeProg(b []byte) elf.ProgHeader {
	var p elf.ProgHeader
	h.DecodeProgInto(&p, b)
	return p
}

// DecodeProgInto is [Header.DecodeProg] storing the fields straight into
// *p (all of them) instead of returning a ProgHeader: a caller filling a
// table saves the copy of each 64-byte result, whose 16-byte loads of the
// fields just stored stall on store forwarding. Panics and cost as for
// DecodeProg.
func (h *Header) DecodeProgInto(p *elf.ProgHeader, b []byte) {
	if h.is64 && !h.big { // the common case, without a branch per field
		le := binary.LittleEndian
		_ = b[prog64Size-1]
		p.Type, p.Flags = elf.ProgType(le.Uint32(b)), elf.ProgFlag(le.Uint32(b[4:]))
		p.Off, p.Vaddr, p.Paddr = le.Uint64(b[8:]), le.Uint64(b[16:]), le.Uint64(b[24:])
		p.Filesz, p.Memsz, p.Align = le.Uint64(b[32:]), le.Uint64(b[40:]), le.Uint64(b[48:])
		return
	}
	h.decodeProgSlow(p, b)
}

// decodeProgSlow is DecodeProgInto for ELF32 and big-endian files.
func (h *Header) decodeProgSlow(p *elf.ProgHeader, b []byte) {
	if h.is64 {
		_ = b[prog64Size-1]
		*p = elf.ProgHeader{
			Type: elf.ProgType(h.u32(b)), Flags: elf.ProgFlag(h.u32(b[4:])),
			Off: h.u64(b[8:]), Vaddr: h.u64(b[16:]), Paddr: h.u64(b[24:]),
			Filesz: h.u64(b[32:]), Memsz: h.u64(b[40:]), Align: h.u64(b[48:]),
		}
		return
	}
	_ = b[prog32Size-1]
	*p = elf.ProgHeader{
		Type: elf.ProgType(h.u32(b)), Off: uint64(h.u32(b[4:])),
		Vaddr: uint64(h.u32(b[8:])), Paddr: uint64(h.u32(b[12:])),
		Filesz: uint64(h.u32(b[16:])), Memsz: uint64(h.u32(b[20:])),
		Flags: elf.ProgFlag(h.u32(b[24:])), Align: uint64(h.u32(b[28:])),
	}
}

// Program header field offsets, per class.
var (
	progOffset = [2]uint64{4, 8}
	progFilesz = [2]uint64{16, 32}
)

// DecodeSection decodes the section header (Elf32_Shdr or Elf64_Shdr,
// gABI "Sections") at the start of b, which must hold at least
// [Header.SectionHeaderSize] bytes (it panics otherwise). The result has
// no Name (sh_name, the offset of the name in the section name string
// table, is returned separately) and Size == FileSize == sh_size. Cost:
// constant; no allocation.
func (h *Header) DecodeSection(b []byte) (s elf.SectionHeader, name uint32) {
	if h.is64 {
		_ = b[section64Size-1]
		s = elf.SectionHeader{
			Type: elf.SectionType(h.u32(b[4:])), Flags: elf.SectionFlag(h.u64(b[8:])),
			Addr: h.u64(b[16:]), Offset: h.u64(b[24:]), Size: h.u64(b[32:]),
			Link: h.u32(b[40:]), Info: h.u32(b[44:]), Addralign: h.u64(b[48:]), Entsize: h.u64(b[56:]),
		}
	} else {
		_ = b[section32Size-1]
		s = elf.SectionHeader{
			Type: elf.SectionType(h.u32(b[4:])), Flags: elf.SectionFlag(h.u32(b[8:])),
			Addr: uint64(h.u32(b[12:])), Offset: uint64(h.u32(b[16:])), Size: uint64(h.u32(b[20:])),
			Link: h.u32(b[24:]), Info: h.u32(b[28:]), Addralign: uint64(h.u32(b[32:])), Entsize: uint64(h.u32(b[36:])),
		}
	}
	s.FileSize = s.Size
	return s, h.u32(b)
}

// Section header field offsets, per class ([0] ELF32, [1] ELF64).
var (
	secType   = [2]uint64{4, 4}
	secOffset = [2]uint64{16, 24}
	secSize   = [2]uint64{20, 32}
	secLink   = [2]uint64{24, 40}
	secInfo   = [2]uint64{28, 44}
)

func (h *Header) cls() int {
	if h.is64 {
		return 1
	}
	return 0
}

// Sym is one symbol table entry (Elf32_Sym or Elf64_Sym, gABI "Symbol
// Table"). It holds no pointer: decoding one allocates nothing.
type Sym struct {
	Name  uint32 // st_name: offset of the name in the string table
	Info  byte   // st_info: binding and type
	Other byte   // st_other: visibility
	// Section is st_shndx as stored: a section index below
	// SHN_LORESERVE, SHN_UNDEF, a reserved index (SHN_ABS, SHN_COMMON),
	// or SHN_XINDEX when the index is in the SHT_SYMTAB_SHNDX section
	// ([SymbolTable.SectionOf] resolves it).
	Section elf.SectionIndex
	Value   uint64 // st_value
	Size    uint64 // st_size, bytes
}

// Type returns the symbol type of st_info (STT_FUNC, ...).
func (s Sym) Type() elf.SymType { return elf.ST_TYPE(s.Info) }

// Bind returns the symbol binding of st_info (STB_GLOBAL, ...).
func (s Sym) Bind() elf.SymBind { return elf.ST_BIND(s.Info) }

// Visibility returns the symbol visibility of st_other.
func (s Sym) Visibility() elf.SymVis { return elf.ST_VISIBILITY(s.Other) }

// DecodeSym decodes the symbol table entry at the start of b, which must
// hold at least [Header.SymSize] bytes (it panics otherwise). Cost:
// constant; no allocation.
func (h *Header) DecodeSym(b []byte) Sym {
	if h.is64 && !h.big {
		le := binary.LittleEndian
		_ = b[sym64Size-1]
		return Sym{Name: le.Uint32(b), Info: b[4], Other: b[5], Section: elf.SectionIndex(le.Uint16(b[6:])),
			Value: le.Uint64(b[8:]), Size: le.Uint64(b[16:])}
	}
	if h.is64 {
		_ = b[sym64Size-1]
		return Sym{Name: h.u32(b), Info: b[4], Other: b[5], Section: elf.SectionIndex(h.u16(b[6:])),
			Value: h.u64(b[8:]), Size: h.u64(b[16:])}
	}
	_ = b[sym32Size-1]
	return Sym{Name: h.u32(b), Value: uint64(h.u32(b[4:])), Size: uint64(h.u32(b[8:])),
		Info: b[12], Other: b[13], Section: elf.SectionIndex(h.u16(b[14:]))}
}

// Rel is one relocation entry (Elf32_Rel, Elf32_Rela, Elf64_Rel or
// Elf64_Rela, gABI "Relocation"), with r_info split into its symbol index
// and type.
type Rel struct {
	Off    uint64 // r_offset: in an ET_REL file, the offset in the section relocated
	Sym    uint32 // ELF32_R_SYM / ELF64_R_SYM of r_info
	Type   uint32 // ELF32_R_TYPE / ELF64_R_TYPE of r_info
	Addend int64  // r_addend (0 for entries without one)
}

// DecodeRel decodes the relocation entry at the start of b, with an
// explicit addend when rela is set; b must hold at least
// [Header.RelSize](rela) bytes (it panics otherwise). Cost: constant; no
// allocation.
func (h *Header) DecodeRel(b []byte, rela bool) Rel {
	var r Rel
	if h.is64 && !h.big && rela { // the common case, without a branch per field
		le := binary.LittleEndian
		_ = b[rela64Size-1]
		info := le.Uint64(b[8:])
		return Rel{Off: le.Uint64(b), Sym: uint32(info >> 32), Type: uint32(info), Addend: int64(le.Uint64(b[16:]))}
	}
	if h.is64 {
		_ = b[rel64Size-1]
		info := h.u64(b[8:])
		r = Rel{Off: h.u64(b), Sym: uint32(info >> 32), Type: uint32(info)}
		if rela {
			r.Addend = int64(h.u64(b[16:]))
		}
		return r
	}
	_ = b[rel32Size-1]
	info := h.u32(b[4:])
	r = Rel{Off: uint64(h.u32(b)), Sym: info >> 8, Type: info & 0xff}
	if rela {
		r.Addend = int64(int32(h.u32(b[8:])))
	}
	return r
}

// DecodeDyn decodes the dynamic table entry (Elf32_Dyn or Elf64_Dyn, gABI
// "Dynamic Section") at the start of b, which must hold at least
// [Header.DynSize] bytes (it panics otherwise): its tag and its value (or
// address). ELF32 tags are sign-extended. Cost: constant; no allocation.
func (h *Header) DecodeDyn(b []byte) (elf.DynTag, uint64) {
	if h.is64 && !h.big { // the common case, without a branch per field
		le := binary.LittleEndian
		_ = b[dyn64Size-1]
		return elf.DynTag(int64(le.Uint64(b))), le.Uint64(b[8:])
	}
	if h.is64 {
		_ = b[dyn64Size-1]
		return elf.DynTag(int64(h.u64(b))), h.u64(b[8:])
	}
	_ = b[dyn32Size-1]
	return elf.DynTag(int32(h.u32(b))), uint64(h.u32(b[4:]))
}

// Chdr is a compression header (Elf32_Chdr or Elf64_Chdr, gABI
// "Compressed Sections"), which starts an SHF_COMPRESSED section.
type Chdr struct {
	Type      elf.CompressionType // ch_type
	Size      uint64              // ch_size: bytes once decompressed
	Addralign uint64              // ch_addralign of the decompressed data
}

// ChdrSize returns the size in bytes of a compression header of h's class
// (12 or 24).
func (h *Header) ChdrSize() int {
	if h.is64 {
		return chdr64Size
	}
	return chdr32Size
}

// DecodeChdr decodes the compression header at the start of b, which must
// hold at least [Header.ChdrSize] bytes (it panics otherwise). Cost:
// constant; no allocation.
func (h *Header) DecodeChdr(b []byte) Chdr {
	if h.is64 {
		_ = b[chdr64Size-1]
		return Chdr{Type: elf.CompressionType(h.u32(b)), Size: h.u64(b[8:]), Addralign: h.u64(b[16:])}
	}
	_ = b[chdr32Size-1]
	return Chdr{Type: elf.CompressionType(h.u32(b)), Size: uint64(h.u32(b[4:])), Addralign: uint64(h.u32(b[8:]))}
}
