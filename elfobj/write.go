package elfobj

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrLayout is wrapped by every error a [Writer] reports when the write
// phase does not match the reserve phase (a range written out of order,
// twice or not at all, a size or count other than the one reserved, a
// symbol of the wrong binding for its reserved index) or when a call comes
// in a phase that does not allow it. These are errors in the calling
// program, not in its input; the message names the range and both values.
var ErrLayout = errors.New("elfobj: layout")

// ErrRange is wrapped by the errors a [Writer] reports for a value that
// does not fit its field: an offset, address or size above 4 GiB in an
// ELF32 file, a section index that no section has, a relocation's symbol
// index or type wider than ELF32's r_info, a string table past 4 GiB.
var ErrRange = errors.New("elfobj: value out of range")

// MaxFileSize is the largest file a [Writer] builds, in bytes (1 TiB): the
// output is one slice in memory, allocated when the write phase begins. A
// larger reservation is an error wrapping [ErrRange] at the first write,
// not an allocation the Go runtime would refuse with a panic or a fatal
// out-of-memory error.
const MaxFileSize = 1 << 40

// SectionIndex is the index of an entry of the section header table
// (gABI "Sections"): 0 is the null section (SHN_UNDEF); a writer gives
// out 1, 2, ... in the order sections are added.
type SectionIndex uint32

// SymbolIndex is the index of an entry of the symbol table (gABI "Symbol
// Table"): 0 is the null symbol (STN_UNDEF).
type SymbolIndex uint32

// FileHeader holds the fields of the ELF header (gABI "ELF Header") that
// the caller chooses; the writer fills in e_ident's class and data from
// [NewWriter], EV_CURRENT, and every offset, size and count from what was
// reserved (e_phoff, e_shoff, e_ehsize, e_phentsize, e_phnum,
// e_shentsize, e_shnum, e_shstrndx).
type FileHeader struct {
	Type       elf.Type    // e_type: ET_REL, ET_EXEC, ET_DYN, ...
	Machine    elf.Machine // e_machine
	Flags      uint32      // e_flags (processor-specific; 0 on x86-64 and AArch64)
	Entry      uint64      // e_entry: the entry point's address, 0 for none
	OSABI      elf.OSABI   // EI_OSABI
	ABIVersion uint8       // EI_ABIVERSION
}

// Section is an entry of the section header table being built by a
// [Writer], from [Writer.AddSection] until [Writer.WriteSectionHeaders]
// writes it. The caller sets the header's fields (Name, Type, Flags, Addr,
// Link, Info, Addralign, Entsize) any time before that, except that Name
// is read by [Writer.ReserveShstrtab]. The writer sets Offset and Size
// when the section's file range is reserved, and, for the symbol table,
// Link, Info, Entsize and Addralign; [Writer.WriteSectionHeaders] reports
// an error wrapping [ErrLayout] if Offset or Size no longer match the
// reservation. FileSize (a field for readers of compressed sections) is
// not written.
type Section struct {
	elf.SectionHeader
	w       *Writer
	index   SectionIndex
	span    int          // index of the section's file range in w.spans, or -1
	nameOff uint32       // sh_name, once .shstrtab is reserved
	tab     *StringTable // the contents of a string table section
}

// Index returns the section's index in the section header table, for
// sh_link, sh_info and st_shndx fields.
func (s *Section) Index() SectionIndex { return s.index }

// spanKind tells what a reserved file range holds and so which write call
// fills it.
type spanKind uint8

const (
	spanFileHeader spanKind = iota
	spanProgHeaders
	spanSection // section contents: WriteSection, SectionBytes or WriteNote
	spanSymtab
	spanStrtab
	spanRela
	spanDynamic
	spanSectionHeaders
)

// span is one reserved file range [off, off+size).
type span struct {
	kind      spanKind
	off, size uint64
	sec       *Section
	n         int // entries of a table (program headers, symbols, relocations, dynamic entries)
}

type phase uint8

const (
	reserving phase = iota
	writing
	finished
)

// layout holds the sizes of the structures of one ELF class.
type layout struct {
	ehdr, phdr, shdr, sym, rela, dyn, addr uint64
}

var (
	layout64 = layout{ehdr: 64, phdr: 56, shdr: 64, sym: 24, rela: 24, dyn: 16, addr: 8}
	layout32 = layout{ehdr: 52, phdr: 32, shdr: 40, sym: 16, rela: 12, dyn: 8, addr: 4}
)

// Writer writes one ELF file (System V gABI, "Object Files") in two
// phases, as the Rust object crate's ELF writer does:
//
//  1. Reserve. The caller reserves, in file order, every range of the
//     file: the ELF header ([Writer.ReserveFileHeader]), the program
//     header table ([Writer.ReserveProgramHeaders]), each section's
//     contents ([Writer.ReserveSectionData], [Writer.ReserveSymtab],
//     [Writer.ReserveStringTable], [Writer.ReserveRela],
//     [Writer.ReserveDynamic], [Writer.ReserveShstrtab]) with its
//     alignment, and the section header table
//     ([Writer.ReserveSectionHeaders]); alignment gaps and the gaps
//     [Writer.ReserveAlign] and [Writer.ReserveUntil] reserve are zero
//     bytes.
//     Section indices ([Writer.AddSection]), symbol indices
//     ([Writer.ReserveLocalSymbols], [Writer.ReserveGlobalSymbols]) and
//     string offsets ([StringTable.Add]) are known from the call that
//     reserves them, so that contents built during this phase (symbols,
//     relocations, debug information) can refer to them.
//  2. Write. The first write call allocates the output, one zeroed slice
//     of [Writer.ReservedSize] bytes; the caller then writes every
//     reserved range once, in the order reserved: [Writer.WriteFileHeader],
//     [Writer.WriteProgramHeader] for each program header,
//     [Writer.WriteSection] or [Writer.SectionBytes] for each section's
//     contents (or [Writer.WriteNullSymbol] then [Writer.WriteSymbol],
//     [Writer.WriteStringTable], [Writer.WriteRela],
//     [Writer.WriteDynamic], [Writer.WriteNote], [Writer.WriteBuildID]
//     for the tables; a table reserved for 0 entries is passed over),
//     and [Writer.WriteSectionHeaders]. [Writer.Finish] returns the file.
//
// Counts are never given twice: the ELF header's e_phnum and e_shnum, a
// table section's sh_size and the symbol table's sh_info (one past the
// last local symbol) come from the reservations, and the write phase
// checks that exactly the reserved number of entries and bytes is
// written, at the reserved offsets, in the reserved order.
//
// Errors are sticky, like debug/dwarf's buffer: the first misuse or
// mismatch is recorded, later calls do nothing, and [Writer.Finish] (or
// [Writer.Err] at any time) returns it. Misuse of the order of the phases
// or a mismatch between them wraps [ErrLayout]; a value that does not fit
// its field wraps [ErrRange]. Methods that return a value return a
// harmless one after an error (a zero index or offset; from
// [Writer.SectionBytes], a scratch slice of the right length). The
// section header table is checked as it is written: sh_link and sh_info
// fields that the gABI defines as section indices must name a section.
// Only programming errors that no input could cause panic: an invalid
// class or encoding given to [NewWriter], a [StringTable] changed after
// it was reserved, a [Section] of another writer.
//
// The writer supports ELF64 and ELF32 in either byte order, extended
// section numbering (e_shnum 0, SHN_XINDEX, PN_XNUM with the counts in
// section 0) and RELA relocations. It does not write SHT_REL,
// SHT_SYMTAB_SHNDX (so symbols must refer to sections below
// SHN_LORESERVE) or more than one symbol table. A Writer is not safe for
// concurrent use. Cost: reserving is O(1) per call except
// [Writer.ReserveShstrtab] (one pass over the section names); writing
// allocates the output once and costs its size plus O(1) per entry.
type Writer struct {
	class elf.Class
	data  elf.Data
	order binary.ByteOrder
	lay   layout
	err   error
	phase phase

	size  uint64 // bytes reserved so far
	spans []span

	phoff    uint64
	phnum    int
	sections []*Section // sections[i] has index i+1
	shstrtab *Section
	shstrs   StringTable
	shoff    uint64
	shdrs    bool // the section header table is reserved

	nsym    int // reserved symbols including the null symbol; 0 if none
	nlocal  int // reserved local symbols including the null symbol
	symtab  *Section
	strtabN uint64 // size of the symbol table's string table, for checking st_name

	// write phase
	out     []byte
	next    int   // index of the next span to begin
	cur     *span // the table span being written, or nil
	curN    int   // entries written into cur (bytes, for a note section)
	buildID int   // offset of the build ID's descriptor, or -1
	ahead   hashAhead
}

// NewWriter returns a writer of an ELF file of the given class
// (ELFCLASS64 or ELFCLASS32) and data encoding (ELFDATA2LSB or
// ELFDATA2MSB), in its reserve phase. It panics on any other class or
// encoding, a programming error.
func NewWriter(class elf.Class, data elf.Data) *Writer {
	w := &Writer{class: class, data: data, buildID: -1}
	switch class {
	case elf.ELFCLASS64:
		w.lay = layout64
	case elf.ELFCLASS32:
		w.lay = layout32
	default:
		panic(fmt.Sprintf("elfobj: NewWriter: class %v", class))
	}
	switch data {
	case elf.ELFDATA2LSB:
		w.order = binary.LittleEndian
	case elf.ELFDATA2MSB:
		w.order = binary.BigEndian
	default:
		panic(fmt.Sprintf("elfobj: NewWriter: data encoding %v", data))
	}
	return w
}

// Err returns the first error recorded, or nil.
func (w *Writer) Err() error { return w.err }

func (w *Writer) fail(base error, format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf("%w: %s", base, fmt.Sprintf(format, args...))
	}
}

// reserveOK reports whether a reserve call may proceed.
func (w *Writer) reserveOK(call string) bool {
	if w.err != nil {
		return false
	}
	if w.phase != reserving {
		w.fail(ErrLayout, "%s called in the write phase", call)
		return false
	}
	return true
}

// ReservedSize returns the size in bytes of the file reserved so far: once
// the reserve phase is over, the size of the file.
func (w *Writer) ReservedSize() uint64 { return w.size }

// reserve appends a file range of size bytes at the next multiple of
// align (a power of two) and returns its offset.
func (w *Writer) reserve(kind spanKind, sec *Section, size, align uint64, n int) uint64 {
	off := alignUp(w.size, align)
	if off < w.size || off+size < off {
		w.fail(ErrRange, "file size overflows 64 bits")
		return 0
	}
	w.spans = append(w.spans, span{kind: kind, off: off, size: size, sec: sec, n: n})
	w.size = off + size
	return off
}

// ReserveFileHeader reserves the ELF header (64 bytes in ELF64, 52 in
// ELF32). It must be the first reservation.
func (w *Writer) ReserveFileHeader() {
	if !w.reserveOK("ReserveFileHeader") {
		return
	}
	if len(w.spans) != 0 || w.size != 0 {
		w.fail(ErrLayout, "ReserveFileHeader: the ELF header must be the first range")
		return
	}
	w.reserve(spanFileHeader, nil, w.lay.ehdr, 1, 0)
}

// ReserveProgramHeaders reserves the program header table for n entries
// (56 bytes each in ELF64, 32 in ELF32), aligned to the address size, and
// returns its offset (e_phoff). It may be called once; n = 0 reserves
// nothing. n ≥ PN_XNUM (0xffff) needs the section header table, which
// then holds the count (gABI extended numbering).
func (w *Writer) ReserveProgramHeaders(n int) uint64 {
	if !w.reserveOK("ReserveProgramHeaders") {
		return 0
	}
	if w.phnum != 0 {
		w.fail(ErrLayout, "ReserveProgramHeaders called twice")
		return 0
	}
	if n < 0 || uint64(n) > math.MaxUint32 {
		w.fail(ErrRange, "%d program headers", n)
		return 0
	}
	if n == 0 {
		return 0
	}
	w.phnum = n
	w.phoff = w.reserve(spanProgHeaders, nil, uint64(n)*w.lay.phdr, w.lay.addr, n)
	return w.phoff
}

// ReserveAlign reserves zero bytes up to the next multiple of align (a
// power of two; 0 and 1 reserve nothing) and returns the new size: a page
// boundary between segments, for example.
func (w *Writer) ReserveAlign(align uint64) uint64 {
	if !w.reserveOK("ReserveAlign") {
		return w.size
	}
	if !pow2(align) {
		w.fail(ErrRange, "ReserveAlign: alignment %d is not a power of two", align)
		return w.size
	}
	off := alignUp(w.size, align)
	if off < w.size {
		w.fail(ErrRange, "file size overflows 64 bits")
		return w.size
	}
	w.size = off
	return off
}

// ReserveUntil reserves zero bytes up to file offset off, which may not
// be below [Writer.ReservedSize]: for contents that must start at a given
// offset, such as a section whose offset is its address.
func (w *Writer) ReserveUntil(off uint64) {
	if !w.reserveOK("ReserveUntil") {
		return
	}
	if off < w.size {
		w.fail(ErrLayout, "ReserveUntil(%#x): %#x bytes are already reserved", off, w.size)
		return
	}
	w.size = off
}

// AddSection adds a section with header h to the section header table
// and returns it; its index is one more than the previous section's (the
// first is 1). h's Offset and Size are replaced when its contents are
// reserved. Sections may be added until [Writer.ReserveShstrtab].
func (w *Writer) AddSection(h elf.SectionHeader) *Section {
	s := &Section{SectionHeader: h, w: w, span: -1}
	if !w.reserveOK("AddSection") {
		return s
	}
	if w.shstrtab != nil {
		w.fail(ErrLayout, "AddSection(%s) after ReserveShstrtab: its name would not be in .shstrtab", h.Name)
		return s
	}
	if uint64(len(w.sections)) >= uint64(math.MaxUint32)-1 {
		w.fail(ErrRange, "more than 2^32-2 sections")
		return s
	}
	w.sections = append(w.sections, s)
	s.index = SectionIndex(len(w.sections))
	return s
}

// own checks that s was added to w and that its contents are not yet
// reserved.
func (w *Writer) own(s *Section, call string) bool {
	if s == nil || s.w != w {
		panic("elfobj: " + call + ": section of another writer")
	}
	if s.index == 0 {
		return false // AddSection failed; the error is recorded
	}
	if s.span >= 0 {
		w.fail(ErrLayout, "%s: the contents of %s are already reserved", call, s.describe())
		return false
	}
	return true
}

func (s *Section) describe() string { return fmt.Sprintf("section %d (%s)", s.index, s.Name) }

// reserveSection reserves the contents of s and sets its Offset and Size.
func (w *Writer) reserveSection(kind spanKind, s *Section, size uint64, n int) uint64 {
	align := max(s.Addralign, 1)
	if !pow2(align) {
		w.fail(ErrRange, "%s: sh_addralign %d is not a power of two", s.describe(), s.Addralign)
		return 0
	}
	s.span = len(w.spans)
	off := w.reserve(kind, s, size, align, n)
	s.Offset, s.Size = off, size
	return off
}

// ReserveSectionData reserves size bytes of contents for s at the next
// multiple of its Addralign, sets s.Offset and s.Size, and returns the
// offset. For an SHT_NOBITS section nothing is reserved: Offset is the
// current end of the reservation (the conventional sh_offset of a section
// without file bytes) and Size is size. The contents are written later by
// [Writer.WriteSection], [Writer.SectionBytes] or, for a note section,
// [Writer.WriteNote] and [Writer.WriteBuildID].
func (w *Writer) ReserveSectionData(s *Section, size uint64) uint64 {
	if !w.reserveOK("ReserveSectionData") || !w.own(s, "ReserveSectionData") {
		return 0
	}
	if s.Type == elf.SHT_NOBITS {
		s.Offset, s.Size = w.size, size
		return w.size
	}
	return w.reserveSection(spanSection, s, size, 0)
}

// ReserveLocalSymbols reserves n symbol table indices for symbols of
// binding STB_LOCAL and returns the first; the null symbol (index 0, also
// local) is reserved with the first symbols. The gABI puts every local
// symbol before the others, so local symbols may not be reserved after
// [Writer.ReserveGlobalSymbols].
func (w *Writer) ReserveLocalSymbols(n int) SymbolIndex {
	if !w.reserveOK("ReserveLocalSymbols") {
		return 0
	}
	if w.nsym > w.nlocal {
		w.fail(ErrLayout, "ReserveLocalSymbols after ReserveGlobalSymbols: local symbols come first (gABI)")
		return 0
	}
	first := w.reserveSymbols(n)
	w.nlocal = w.nsym
	return first
}

// ReserveGlobalSymbols reserves n symbol table indices for symbols of any
// binding but STB_LOCAL (STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE) and returns
// the first.
func (w *Writer) ReserveGlobalSymbols(n int) SymbolIndex {
	if !w.reserveOK("ReserveGlobalSymbols") {
		return 0
	}
	return w.reserveSymbols(n)
}

func (w *Writer) reserveSymbols(n int) SymbolIndex {
	if w.symtab != nil {
		w.fail(ErrLayout, "symbols reserved after ReserveSymtab")
		return 0
	}
	if w.nsym == 0 {
		w.nsym, w.nlocal = 1, 1 // the null symbol
	}
	if n < 0 || uint64(w.nsym)+uint64(n) > math.MaxUint32 {
		w.fail(ErrRange, "%d more symbols", n)
		return 0
	}
	first := SymbolIndex(w.nsym)
	w.nsym += n
	return first
}

// SymbolCount returns the number of symbol table entries reserved so far,
// the null symbol included (0 when none is).
func (w *Writer) SymbolCount() int { return w.nsym }

// ReserveSymtab reserves the contents of the symbol table symtab (type
// SHT_SYMTAB): every symbol reserved so far (at least the null symbol),
// 24 bytes each in ELF64 and 16 in ELF32, aligned to the address size.
// It sets symtab's Link to strtab's index, Info to one more than the
// index of the last local symbol (gABI "Symbol Table"), Entsize, and
// Addralign when 0. The symbols are written by [Writer.WriteSymbol].
func (w *Writer) ReserveSymtab(symtab, strtab *Section) uint64 {
	if !w.reserveOK("ReserveSymtab") || !w.own(symtab, "ReserveSymtab") {
		return 0
	}
	if strtab == nil || strtab.w != w {
		panic("elfobj: ReserveSymtab: string table of another writer")
	}
	if symtab.Type != elf.SHT_SYMTAB || strtab.Type != elf.SHT_STRTAB {
		w.fail(ErrLayout, "ReserveSymtab: %s is %v and %s is %v, want SHT_SYMTAB and SHT_STRTAB",
			symtab.describe(), symtab.Type, strtab.describe(), strtab.Type)
		return 0
	}
	if w.symtab != nil {
		w.fail(ErrLayout, "ReserveSymtab: a second symbol table (%s)", symtab.describe())
		return 0
	}
	if w.nsym == 0 {
		w.nsym, w.nlocal = 1, 1
	}
	w.symtab = symtab
	symtab.Link = uint32(strtab.index)
	symtab.Info = uint32(w.nlocal)
	symtab.Entsize = w.lay.sym
	if symtab.Addralign == 0 {
		symtab.Addralign = w.lay.addr
	}
	return w.reserveSection(spanSymtab, symtab, uint64(w.nsym)*w.lay.sym, w.nsym)
}

// ReserveStringTable reserves the contents of the string table section s
// (type SHT_STRTAB: .strtab, .dynstr) as the bytes of t, which may not
// change afterwards ([StringTable.Add] then panics). Offsets t gave out
// stay valid. The contents are written by [Writer.WriteStringTable].
func (w *Writer) ReserveStringTable(s *Section, t *StringTable) uint64 {
	if !w.reserveOK("ReserveStringTable") || !w.own(s, "ReserveStringTable") {
		return 0
	}
	if s.Type != elf.SHT_STRTAB {
		w.fail(ErrLayout, "ReserveStringTable: %s is %v, want SHT_STRTAB", s.describe(), s.Type)
		return 0
	}
	t.freeze()
	if uint64(len(t.data)) > math.MaxUint32 {
		w.fail(ErrRange, "%s: string table of %d bytes", s.describe(), len(t.data))
		return 0
	}
	s.tab = t
	return w.reserveSection(spanStrtab, s, uint64(len(t.data)), 0)
}

// ReserveShstrtab adds the section header string table, .shstrtab
// (SHT_STRTAB, the last section: no section may be added after it),
// builds it from the names of all sections in index order, reserves its
// contents and returns it; e_shstrndx will be its index. Identical names
// share one string. Cost: one map insertion per section.
func (w *Writer) ReserveShstrtab() *Section {
	s := w.AddSection(elf.SectionHeader{Name: ".shstrtab", Type: elf.SHT_STRTAB, Addralign: 1})
	if w.err != nil {
		return s
	}
	w.shstrtab = s
	w.shstrs.Grow(len(w.sections) * 12)
	for _, t := range w.sections {
		t.nameOff = w.shstrs.Add(t.Name)
	}
	w.shstrs.freeze()
	s.tab = &w.shstrs
	w.reserveSection(spanStrtab, s, uint64(len(w.shstrs.data)), 0)
	return s
}

// ReserveRela reserves the contents of the relocation section s (type
// SHT_RELA) for n entries (24 bytes each in ELF64, 12 in ELF32), aligned
// to the address size when s.Addralign is 0, and sets s.Entsize. The
// caller sets s.Link (the symbol table's index, or 0 for relocations that
// name no symbol) and s.Info (the index of the section the relocations
// apply to, with SHF_INFO_LINK in Flags, or 0), as gABI "Relocation"
// describes. The entries are written by [Writer.WriteRela].
func (w *Writer) ReserveRela(s *Section, n int) uint64 {
	return w.reserveTable("ReserveRela", s, elf.SHT_RELA, spanRela, w.lay.rela, n)
}

// ReserveDynamic reserves the contents of the dynamic section s (type
// SHT_DYNAMIC) for n entries (16 bytes each in ELF64, 8 in ELF32, the
// DT_NULL terminator included), aligned to the address size when
// s.Addralign is 0, and sets s.Entsize. The caller sets s.Link to the
// index of the string table the entries use (gABI "Dynamic Section").
// The entries are written by [Writer.WriteDynamic].
func (w *Writer) ReserveDynamic(s *Section, n int) uint64 {
	return w.reserveTable("ReserveDynamic", s, elf.SHT_DYNAMIC, spanDynamic, w.lay.dyn, n)
}

func (w *Writer) reserveTable(call string, s *Section, typ elf.SectionType, kind spanKind, entsize uint64, n int) uint64 {
	if !w.reserveOK(call) || !w.own(s, call) {
		return 0
	}
	if s.Type != typ {
		w.fail(ErrLayout, "%s: %s is %v, want %v", call, s.describe(), s.Type, typ)
		return 0
	}
	if n < 0 || uint64(n) > math.MaxUint64/entsize {
		w.fail(ErrRange, "%s: %d entries", call, n)
		return 0
	}
	s.Entsize = entsize
	if s.Addralign == 0 {
		s.Addralign = w.lay.addr
	}
	return w.reserveSection(kind, s, uint64(n)*entsize, n)
}

// ReserveSectionHeaders reserves the section header table, aligned to the
// address size, for the null section and every section added (64 bytes
// each in ELF64, 40 in ELF32), and returns its offset (e_shoff). It comes
// after [Writer.ReserveShstrtab]; a file without sections does not call
// it.
func (w *Writer) ReserveSectionHeaders() uint64 {
	if !w.reserveOK("ReserveSectionHeaders") {
		return 0
	}
	if w.shdrs {
		w.fail(ErrLayout, "ReserveSectionHeaders called twice")
		return 0
	}
	if w.shstrtab == nil {
		w.fail(ErrLayout, "ReserveSectionHeaders before ReserveShstrtab")
		return 0
	}
	w.shdrs = true
	n := uint64(len(w.sections)) + 1
	w.shoff = w.reserve(spanSectionHeaders, nil, n*w.lay.shdr, w.lay.addr, int(n))
	return w.shoff
}
