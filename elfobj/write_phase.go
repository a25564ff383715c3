package elfobj

import (
	"crypto/sha1"
	"debug/elf"
	"hash"
	"math"
)

// beginWrite ends the reserve phase: it checks the reservation as a whole
// and allocates the output.
func (w *Writer) beginWrite() bool {
	if w.err != nil {
		return false
	}
	switch w.phase {
	case writing:
		return true
	case finished:
		w.fail(ErrLayout, "write after Finish")
		return false
	}
	if w.class == elf.ELFCLASS32 && w.size > math.MaxUint32 {
		w.fail(ErrRange, "ELF32 file of %d bytes", w.size)
		return false
	}
	if w.phnum >= int(pnXNum) && !w.shdrs {
		w.fail(ErrLayout, "%d program headers need a section header table to hold the count", w.phnum)
		return false
	}
	if w.symtab == nil && w.nsym > 0 {
		w.fail(ErrLayout, "%d symbols reserved but no symbol table (ReserveSymtab)", w.nsym)
		return false
	}
	if w.symtab != nil {
		link := w.symtab.Link
		if link == 0 || int(link) > len(w.sections) || w.sections[link-1].tab == nil {
			w.fail(ErrLayout, "the symbol table's string table (section %d) has no reserved contents", link)
			return false
		}
		w.strtabN = uint64(len(w.sections[link-1].tab.data))
	}
	if w.size > MaxFileSize || w.size > uint64(math.MaxInt) {
		w.fail(ErrRange, "file of %d bytes is larger than a Writer builds in memory (MaxFileSize, %d bytes)", w.size, uint64(MaxFileSize))
		return false
	}
	w.phase = writing
	w.out = make([]byte, w.size)
	return true
}

// begin starts writing the next reserved range, which must be of the
// given kind (and section): it closes the table being written, checking
// that it is complete.
func (w *Writer) begin(kind spanKind, sec *Section, what string) *span {
	if !w.beginWrite() {
		return nil
	}
	if !w.closeTable() {
		return nil
	}
	w.skipEmptyTables()
	if w.next >= len(w.spans) {
		w.fail(ErrLayout, "%s: nothing more was reserved", what)
		return nil
	}
	sp := &w.spans[w.next]
	if sp.kind != kind || sp.sec != sec {
		w.fail(ErrLayout, "%s, but the next range reserved is %s", what, sp.describe())
		return nil
	}
	w.next++
	switch kind {
	case spanProgHeaders, spanSymtab, spanRela, spanDynamic, spanSection:
		w.cur, w.curN = sp, 0
	}
	return sp
}

// skipEmptyTables passes over reserved tables of no entries (relocation
// or dynamic sections reserved for 0 entries): no write call can begin
// them, and they hold no bytes.
func (w *Writer) skipEmptyTables() {
	for w.next < len(w.spans) {
		sp := &w.spans[w.next]
		if (sp.kind != spanRela && sp.kind != spanDynamic) || sp.n != 0 {
			return
		}
		w.next++
	}
}

// closeTable checks that the table (or note section) being written is
// complete.
func (w *Writer) closeTable() bool {
	sp := w.cur
	if sp == nil {
		return true
	}
	w.cur = nil
	if sp.kind == spanSection {
		if uint64(w.curN) != sp.size {
			w.fail(ErrLayout, "%s: %d bytes of notes written, %d reserved", sp.describe(), w.curN, sp.size)
			return false
		}
		return true
	}
	if w.curN != sp.n {
		w.fail(ErrLayout, "%s: %d entries written, %d reserved", sp.describe(), w.curN, sp.n)
		return false
	}
	return true
}

func (sp *span) describe() string {
	switch sp.kind {
	case spanFileHeader:
		return "the ELF header"
	case spanProgHeaders:
		return "the program header table"
	case spanSectionHeaders:
		return "the section header table"
	}
	return "the contents of " + sp.sec.describe()
}

// table returns the open table span of the given kind and section, or
// begins it.
func (w *Writer) table(kind spanKind, sec *Section, what string) *span {
	if w.err != nil {
		return nil
	}
	if sp := w.cur; sp != nil && sp.kind == kind && sp.sec == sec && w.curN < sp.n {
		return sp
	}
	return w.begin(kind, sec, what)
}

// WriteFileHeader starts the write phase (allocating the output) and
// writes the ELF header with h's fields and those the reservation
// determines (see [FileHeader]).
func (w *Writer) WriteFileHeader(h FileHeader) {
	sp := w.begin(spanFileHeader, nil, "WriteFileHeader")
	if sp == nil {
		return
	}
	b := w.out[:w.lay.ehdr]
	copy(b, elf.ELFMAG)
	b[elf.EI_CLASS] = byte(w.class)
	b[elf.EI_DATA] = byte(w.data)
	b[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	b[elf.EI_OSABI] = byte(h.OSABI)
	b[elf.EI_ABIVERSION] = h.ABIVersion
	o := w.order
	o.PutUint16(b[16:], uint16(h.Type))
	o.PutUint16(b[18:], uint16(h.Machine))
	o.PutUint32(b[20:], uint32(elf.EV_CURRENT))
	shnum, shstrndx := w.shnum()
	phnum := w.phnum
	if phnum >= int(pnXNum) {
		phnum = int(pnXNum)
	}
	var phentsize, shentsize uint16
	if w.phnum > 0 {
		phentsize = uint16(w.lay.phdr)
	}
	if w.shdrs {
		shentsize = uint16(w.lay.shdr)
	}
	p := 24
	p = w.putAddr(b, p, h.Entry, "e_entry")
	p = w.putAddr(b, p, w.phoff, "e_phoff")
	p = w.putAddr(b, p, w.shoff, "e_shoff")
	o.PutUint32(b[p:], h.Flags)
	o.PutUint16(b[p+4:], uint16(w.lay.ehdr))
	o.PutUint16(b[p+6:], phentsize)
	o.PutUint16(b[p+8:], uint16(phnum))
	o.PutUint16(b[p+10:], shentsize)
	o.PutUint16(b[p+12:], shnum)
	o.PutUint16(b[p+14:], shstrndx)
}

// shnum returns e_shnum and e_shstrndx, escaped as the gABI's extended
// numbering wants when they do not fit.
func (w *Writer) shnum() (shnum, shstrndx uint16) {
	if !w.shdrs {
		return 0, 0
	}
	if n := len(w.sections) + 1; n < int(elf.SHN_LORESERVE) {
		shnum = uint16(n)
	}
	if i := int(w.shstrtab.index); i < int(elf.SHN_LORESERVE) {
		shstrndx = uint16(i)
	} else {
		shstrndx = uint16(elf.SHN_XINDEX)
	}
	return shnum, shstrndx
}

// putAddr writes an address-sized field at b[p:] and returns the offset
// after it.
func (w *Writer) putAddr(b []byte, p int, v uint64, field string) int {
	if w.lay.addr == 8 {
		w.order.PutUint64(b[p:], v)
		return p + 8
	}
	w.order.PutUint32(b[p:], w.narrow(v, field))
	return p + 4
}

// narrow returns v as an ELF32 word, recording an error when it does not
// fit.
func (w *Writer) narrow(v uint64, field string) uint32 {
	if v > math.MaxUint32 {
		w.fail(ErrRange, "%s %#x does not fit ELF32", field, v)
	}
	return uint32(v)
}

// WriteProgramHeader writes the next entry of the program header table
// (gABI "Program Header"). It checks what a loader relies on: a PT_LOAD's
// p_filesz is at most its p_memsz and, with p_align > 1, p_offset and
// p_vaddr are congruent modulo p_align; a segment's file bytes
// [p_offset, p_offset+p_filesz) lie inside the file.
func (w *Writer) WriteProgramHeader(p elf.ProgHeader) {
	sp := w.table(spanProgHeaders, nil, "WriteProgramHeader")
	if sp == nil {
		return
	}
	i := w.curN
	switch {
	case p.Type == elf.PT_LOAD && p.Filesz > p.Memsz:
		w.fail(ErrRange, "program header %d: PT_LOAD p_filesz %#x > p_memsz %#x", i, p.Filesz, p.Memsz)
	case p.Type == elf.PT_LOAD && p.Align > 1 && (!pow2(p.Align) || p.Off%p.Align != p.Vaddr%p.Align):
		w.fail(ErrRange, "program header %d: PT_LOAD p_offset %#x and p_vaddr %#x not congruent modulo p_align %#x", i, p.Off, p.Vaddr, p.Align)
	case p.Filesz > 0 && (p.Off > w.size || p.Filesz > w.size-p.Off):
		w.fail(ErrRange, "program header %d: file bytes [%#x, +%#x) past the end of the file (%#x bytes)", i, p.Off, p.Filesz, w.size)
	}
	if w.err != nil {
		return
	}
	b := w.out[sp.off+uint64(i)*w.lay.phdr:]
	o := w.order
	if w.lay.addr == 8 {
		o.PutUint32(b[0:], uint32(p.Type))
		o.PutUint32(b[4:], uint32(p.Flags))
		o.PutUint64(b[8:], p.Off)
		o.PutUint64(b[16:], p.Vaddr)
		o.PutUint64(b[24:], p.Paddr)
		o.PutUint64(b[32:], p.Filesz)
		o.PutUint64(b[40:], p.Memsz)
		o.PutUint64(b[48:], p.Align)
	} else {
		o.PutUint32(b[0:], uint32(p.Type))
		o.PutUint32(b[4:], w.narrow(p.Off, "p_offset"))
		o.PutUint32(b[8:], w.narrow(p.Vaddr, "p_vaddr"))
		o.PutUint32(b[12:], w.narrow(p.Paddr, "p_paddr"))
		o.PutUint32(b[16:], w.narrow(p.Filesz, "p_filesz"))
		o.PutUint32(b[20:], w.narrow(p.Memsz, "p_memsz"))
		o.PutUint32(b[24:], uint32(p.Flags))
		o.PutUint32(b[28:], w.narrow(p.Align, "p_align"))
	}
	w.curN++
}

// WriteSection writes the contents of s, which must be the next range
// reserved and exactly len(data) bytes.
func (w *Writer) WriteSection(s *Section, data []byte) {
	sp := w.begin(spanSection, s, "WriteSection("+s.Name+")")
	if sp == nil {
		return
	}
	w.cur = nil
	if uint64(len(data)) != sp.size {
		w.fail(ErrLayout, "%s: %d bytes written, %d reserved", s.describe(), len(data), sp.size)
		return
	}
	copy(w.out[sp.off:], data)
}

// SectionBytes returns the contents of s, which must be the next range
// reserved, for the caller to fill in place: a slice of the output of
// exactly the reserved size, zeroed, valid until [Writer.Finish] returns
// it as part of the file. After an error it returns a scratch slice of the
// same size, so that the caller can go on until it checks the error.
func (w *Writer) SectionBytes(s *Section) []byte {
	sp := w.begin(spanSection, s, "SectionBytes("+s.Name+")")
	if sp == nil {
		return make([]byte, s.Size)
	}
	w.cur = nil
	return w.out[sp.off : sp.off+sp.size : sp.off+sp.size]
}

// NoteSize returns the size in bytes of a note (gABI "Note Section") with
// the given name (its NUL terminator is added) and a descriptor of
// descSize bytes: three 4-byte words (namesz, descsz, type), then the
// name and the descriptor, each padded to a multiple of 4. A name "" has
// namesz 0.
func NoteSize(name string, descSize int) uint64 {
	n := uint64(0)
	if name != "" {
		n = uint64(len(name)) + 1
	}
	return 12 + alignUp(n, 4) + alignUp(uint64(descSize), 4)
}

// WriteNote writes a note (see [NoteSize]) of type typ into the note
// section s (SHT_NOTE), whose reserved contents are filled by successive
// notes: the first note of s must come when s is the next range
// reserved, and the notes must fill it exactly.
func (w *Writer) WriteNote(s *Section, name string, typ elf.NType, desc []byte) {
	w.note(s, name, typ, desc, len(desc))
}

// note writes a note whose descriptor is desc followed by zeros up to
// descSize bytes, and returns the offset of the descriptor, or -1.
func (w *Writer) note(s *Section, name string, typ elf.NType, desc []byte, descSize int) int {
	if w.err != nil {
		return -1
	}
	sp := w.cur
	if sp == nil || sp.kind != spanSection || sp.sec != s || uint64(w.curN) >= sp.size {
		if sp = w.begin(spanSection, s, "WriteNote("+s.Name+")"); sp == nil {
			return -1
		}
		if s.Type != elf.SHT_NOTE {
			w.fail(ErrLayout, "WriteNote: %s is %v, not SHT_NOTE", s.describe(), s.Type)
			return -1
		}
	}
	size := NoteSize(name, descSize)
	if size > sp.size-uint64(w.curN) {
		w.fail(ErrLayout, "%s: a note of %d bytes overruns the %d bytes reserved (%d written)", s.describe(), size, sp.size, w.curN)
		return -1
	}
	namesz := 0
	if name != "" {
		namesz = len(name) + 1
	}
	b := w.out[sp.off+uint64(w.curN):]
	w.order.PutUint32(b[0:], uint32(namesz))
	w.order.PutUint32(b[4:], uint32(descSize))
	w.order.PutUint32(b[8:], uint32(typ))
	copy(b[12:], name)
	d := 12 + int(alignUp(uint64(namesz), 4))
	copy(b[d:], desc)
	at := int(sp.off) + w.curN + d
	w.curN += int(size)
	return at
}

// NT_GNU_BUILD_ID is the type of the GNU build-ID note (owner "GNU"),
// which debug/elf does not name.
const NT_GNU_BUILD_ID elf.NType = 3

// hashAhead is the build ID's hash of the first bytes of the file, computed
// while the rest is written ([Writer.HashWritten]).
type hashAhead struct {
	// h is the SHA-1 of w.out[:upTo] once done is closed. Each
	// HashWritten call starts a goroutine that waits for the previous
	// one's done, writes its range into h and closes its own done: one
	// goroutine at a time uses h, in file order, and each ends by itself
	// (none is left waiting if the caller never calls Finish).
	h    hash.Hash
	done chan struct{}
	upTo int
}

// HashWritten starts hashing, for the build ID ([Writer.WriteBuildID]),
// the bytes of the file up to the end of the last range begun, on another
// goroutine, so that the hash runs while the caller writes the next
// ranges; [Writer.Finish] hashes the rest. The build ID is the same as
// without the call: the SHA-1 of the same bytes in the same order (the
// descriptor is zero until Finish fills it in). A table (symbols,
// relocations, dynamic entries, notes, program headers) still being
// written is left for a later call or Finish. The caller must have filled
// the ranges it asked for with [Writer.SectionBytes] before the call, and
// must not modify them after it: those bytes may already be hashed. It
// does nothing before the write phase, after an error, without a build
// ID, or when no byte was written since the last call. Cost: one
// goroutine per call; it may be called any number of times.
func (w *Writer) HashWritten() {
	if w.err != nil || w.phase != writing || w.buildID < 0 || w.next == 0 {
		return
	}
	sp := &w.spans[w.next-1]
	end := sp.off + sp.size
	if w.cur != nil {
		end = w.cur.off
	}
	a := &w.ahead
	if end <= uint64(a.upTo) {
		return
	}
	if a.h == nil {
		a.h = sha1.New()
	}
	h, b, prev, done := a.h, w.out[a.upTo:end], a.done, make(chan struct{})
	go func() {
		if prev != nil {
			<-prev
		}
		h.Write(b)
		close(done)
	}()
	a.done, a.upTo = done, int(end)
}

// BuildIDSize is the size in bytes of the build ID [Writer.WriteBuildID]
// writes: a SHA-1 digest.
const BuildIDSize = sha1.Size

// BuildIDNoteSize is the size in bytes of the note [Writer.WriteBuildID]
// writes: NoteSize("GNU", BuildIDSize).
const BuildIDNoteSize = 12 + 4 + BuildIDSize

// WriteBuildID writes an NT_GNU_BUILD_ID note of owner "GNU" into the
// note section s, as [Writer.WriteNote] does, with a [BuildIDSize]-byte
// descriptor that [Writer.Finish] fills with the SHA-1 of the whole file
// while the descriptor is zero: any change of any byte changes the ID,
// and a reader checks it by zeroing the descriptor and hashing. A file has
// at most one.
func (w *Writer) WriteBuildID(s *Section) {
	if w.err == nil && w.buildID >= 0 {
		w.fail(ErrLayout, "WriteBuildID: a second build ID (%s)", s.describe())
		return
	}
	if at := w.note(s, "GNU", NT_GNU_BUILD_ID, nil, BuildIDSize); at >= 0 {
		w.buildID = at
	}
}

// WriteNullSymbol begins the symbol table reserved by
// [Writer.ReserveSymtab] with its entry 0, the null symbol (all zeros).
func (w *Writer) WriteNullSymbol() {
	if w.begin(spanSymtab, w.symtab, "WriteNullSymbol") != nil {
		w.curN = 1
	}
}

// WriteSymbol writes the next symbol of the symbol table (gABI "Symbol
// Table"), after [Writer.WriteNullSymbol] and the symbols before it. A
// symbol of binding STB_LOCAL must have an index reserved by
// [Writer.ReserveLocalSymbols], any other one by
// [Writer.ReserveGlobalSymbols]. st_name must be an offset into the
// symbol table's string table, st_shndx a section index or a reserved
// one (SHN_ABS, SHN_COMMON, ...). In ELF32 st_value and st_size must fit
// 32 bits.
func (w *Writer) WriteSymbol(sym elf.Sym64) {
	if w.err != nil {
		return
	}
	sp := w.cur
	if sp == nil || sp.kind != spanSymtab {
		w.fail(ErrLayout, "WriteSymbol outside the symbol table (WriteNullSymbol begins it)")
		return
	}
	i := w.curN
	if i >= sp.n {
		w.fail(ErrLayout, "WriteSymbol: symbol %d, but %d symbols were reserved", i, sp.n)
		return
	}
	local := elf.ST_BIND(sym.Info) == elf.STB_LOCAL
	switch {
	case local && i >= w.nlocal:
		w.fail(ErrLayout, "symbol %d is STB_LOCAL but was reserved as a global one (locals are 1-%d)", i, w.nlocal-1)
	case !local && i < w.nlocal:
		w.fail(ErrLayout, "symbol %d has binding %v but was reserved as a local one (locals are 1-%d)", i, elf.ST_BIND(sym.Info), w.nlocal-1)
	case uint64(sym.Name) >= max(w.strtabN, 1):
		w.fail(ErrRange, "symbol %d: st_name %d outside the %d-byte string table", i, sym.Name, w.strtabN)
	case sym.Shndx != 0 && sym.Shndx < uint16(elf.SHN_LORESERVE) && int(sym.Shndx) > len(w.sections):
		w.fail(ErrRange, "symbol %d: st_shndx %d but the file has %d sections", i, sym.Shndx, len(w.sections)+1)
	}
	if w.err != nil {
		return
	}
	b := w.out[sp.off+uint64(i)*w.lay.sym:]
	o := w.order
	if w.lay.addr == 8 {
		o.PutUint32(b[0:], sym.Name)
		b[4] = sym.Info
		b[5] = sym.Other
		o.PutUint16(b[6:], sym.Shndx)
		o.PutUint64(b[8:], sym.Value)
		o.PutUint64(b[16:], sym.Size)
	} else {
		o.PutUint32(b[0:], sym.Name)
		o.PutUint32(b[4:], w.narrow(sym.Value, "st_value"))
		o.PutUint32(b[8:], w.narrow(sym.Size, "st_size"))
		b[12] = sym.Info
		b[13] = sym.Other
		o.PutUint16(b[14:], sym.Shndx)
	}
	w.curN++
}

// WriteStringTable writes the contents of the string table section s as
// reserved by [Writer.ReserveStringTable] or [Writer.ReserveShstrtab].
func (w *Writer) WriteStringTable(s *Section) {
	sp := w.begin(spanStrtab, s, "WriteStringTable("+s.Name+")")
	if sp == nil {
		return
	}
	copy(w.out[sp.off:], s.tab.data)
}

// WriteRela writes the next entry of the relocation section s (reserved
// by [Writer.ReserveRela]): r_offset, r_info (elf.R_INFO(symbol, type))
// and r_addend. In ELF32, r_info is re-packed as elf.R_INFO32 (the symbol
// must fit 24 bits and the type 8) and r_offset and r_addend must fit 32
// bits.
func (w *Writer) WriteRela(s *Section, r elf.Rela64) {
	sp := w.table(spanRela, s, "WriteRela("+s.Name+")")
	if sp == nil {
		return
	}
	b := w.out[sp.off+uint64(w.curN)*w.lay.rela:]
	o := w.order
	if w.lay.addr == 8 {
		o.PutUint64(b[0:], r.Off)
		o.PutUint64(b[8:], r.Info)
		o.PutUint64(b[16:], uint64(r.Addend))
	} else {
		sym, typ := elf.R_SYM64(r.Info), elf.R_TYPE64(r.Info)
		if sym >= 1<<24 || typ >= 1<<8 || r.Addend < math.MinInt32 || r.Addend > math.MaxInt32 {
			w.fail(ErrRange, "%s: relocation %d (symbol %d, type %d, addend %d) does not fit ELF32", s.describe(), w.curN, sym, typ, r.Addend)
			return
		}
		o.PutUint32(b[0:], w.narrow(r.Off, "r_offset"))
		o.PutUint32(b[4:], elf.R_INFO32(sym, typ))
		o.PutUint32(b[8:], uint32(int32(r.Addend)))
	}
	w.curN++
}

// WriteDynamic writes the next entry of the dynamic section s (reserved
// by [Writer.ReserveDynamic]). In ELF32 d_tag and d_val must fit 32 bits.
func (w *Writer) WriteDynamic(s *Section, d elf.Dyn64) {
	sp := w.table(spanDynamic, s, "WriteDynamic("+s.Name+")")
	if sp == nil {
		return
	}
	b := w.out[sp.off+uint64(w.curN)*w.lay.dyn:]
	o := w.order
	if w.lay.addr == 8 {
		o.PutUint64(b[0:], uint64(d.Tag))
		o.PutUint64(b[8:], d.Val)
	} else {
		if d.Tag < math.MinInt32 || d.Tag > math.MaxInt32 {
			w.fail(ErrRange, "%s: d_tag %#x does not fit ELF32", s.describe(), d.Tag)
			return
		}
		o.PutUint32(b[0:], uint32(int32(d.Tag)))
		o.PutUint32(b[4:], w.narrow(d.Val, "d_val"))
	}
	w.curN++
}

// WriteSectionHeaders writes the section header table: the null section
// (holding the section count, the index of .shstrtab or the program
// header count when those do not fit the ELF header, gABI extended
// numbering), then every section in index order. It checks that each
// section's Offset and Size are still those of its reservation.
func (w *Writer) WriteSectionHeaders() {
	sp := w.begin(spanSectionHeaders, nil, "WriteSectionHeaders")
	if sp == nil {
		return
	}
	var null elf.SectionHeader
	if n := len(w.sections) + 1; n >= int(elf.SHN_LORESERVE) {
		null.Size = uint64(n)
	}
	if i := w.shstrtab.index; i >= SectionIndex(elf.SHN_LORESERVE) {
		null.Link = uint32(i)
	}
	if w.phnum >= int(pnXNum) {
		null.Info = uint32(w.phnum)
	}
	w.putSection(w.out[sp.off:], &null, 0)
	for _, s := range w.sections {
		if s.span >= 0 {
			r := &w.spans[s.span]
			if s.Offset != r.off || s.Size != r.size {
				w.fail(ErrLayout, "%s: sh_offset %#x and sh_size %#x, but [%#x, +%#x) was reserved", s.describe(), s.Offset, s.Size, r.off, r.size)
				return
			}
		}
		if s == w.symtab && s.Info != uint32(w.nlocal) {
			w.fail(ErrLayout, "%s: sh_info %d, but %d local symbols were reserved", s.describe(), s.Info, w.nlocal)
			return
		}
		if !w.checkLinks(s) {
			return
		}
		w.putSection(w.out[sp.off+uint64(s.index)*w.lay.shdr:], &s.SectionHeader, s.nameOff)
	}
}

// checkLinks checks the sh_link and sh_info fields the gABI defines as
// section indices ("sh_link and sh_info Interpretation"): sh_link of
// symbol, relocation, dynamic and hash sections (0 allowed for
// relocations that name no symbol), and sh_info of relocation sections
// with SHF_INFO_LINK.
func (w *Writer) checkLinks(s *Section) bool {
	n := uint32(len(w.sections))
	switch s.Type {
	case elf.SHT_SYMTAB, elf.SHT_DYNSYM, elf.SHT_DYNAMIC, elf.SHT_HASH, elf.SHT_GNU_HASH, elf.SHT_REL, elf.SHT_RELA:
		if s.Link > n || (s.Link == 0 && s.Type != elf.SHT_REL && s.Type != elf.SHT_RELA) {
			w.fail(ErrRange, "%s: sh_link %d is not a section index (1-%d)", s.describe(), s.Link, n)
			return false
		}
	}
	if (s.Type == elf.SHT_REL || s.Type == elf.SHT_RELA) && s.Flags&elf.SHF_INFO_LINK != 0 && (s.Info == 0 || s.Info > n) {
		w.fail(ErrRange, "%s: SHF_INFO_LINK but sh_info %d is not a section index (1-%d)", s.describe(), s.Info, n)
		return false
	}
	return true
}

func (w *Writer) putSection(b []byte, s *elf.SectionHeader, name uint32) {
	o := w.order
	o.PutUint32(b[0:], name)
	o.PutUint32(b[4:], uint32(s.Type))
	if w.lay.addr == 8 {
		o.PutUint64(b[8:], uint64(s.Flags))
		o.PutUint64(b[16:], s.Addr)
		o.PutUint64(b[24:], s.Offset)
		o.PutUint64(b[32:], s.Size)
		o.PutUint32(b[40:], s.Link)
		o.PutUint32(b[44:], s.Info)
		o.PutUint64(b[48:], s.Addralign)
		o.PutUint64(b[56:], s.Entsize)
	} else {
		o.PutUint32(b[8:], w.narrow(uint64(s.Flags), "sh_flags"))
		o.PutUint32(b[12:], w.narrow(s.Addr, "sh_addr"))
		o.PutUint32(b[16:], w.narrow(s.Offset, "sh_offset"))
		o.PutUint32(b[20:], w.narrow(s.Size, "sh_size"))
		o.PutUint32(b[24:], s.Link)
		o.PutUint32(b[28:], s.Info)
		o.PutUint32(b[32:], w.narrow(s.Addralign, "sh_addralign"))
		o.PutUint32(b[36:], w.narrow(s.Entsize, "sh_entsize"))
	}
}

// Finish ends the write phase: it checks that every reserved range was
// written, fills the build ID (see [Writer.WriteBuildID]) and returns the
// file, [Writer.ReservedSize] bytes, or the first error recorded. Cost:
// a SHA-1 of the file when it has a build ID.
func (w *Writer) Finish() ([]byte, error) {
	if w.err != nil {
		return nil, w.err
	}
	if w.phase == reserving && !w.beginWrite() {
		return nil, w.err
	}
	if w.phase == finished {
		w.fail(ErrLayout, "Finish called twice")
		return nil, w.err
	}
	if !w.closeTable() {
		return nil, w.err
	}
	w.skipEmptyTables()
	if w.next < len(w.spans) {
		w.fail(ErrLayout, "Finish: %s was reserved but not written", w.spans[w.next].describe())
		return nil, w.err
	}
	w.phase = finished
	if w.buildID >= 0 {
		var sum [sha1.Size]byte
		if a := &w.ahead; a.done != nil {
			<-a.done // a.h has w.out[:a.upTo]
			a.h.Write(w.out[a.upTo:])
			a.h.Sum(sum[:0])
		} else {
			sum = sha1.Sum(w.out)
		}
		copy(w.out[w.buildID:], sum[:])
	}
	out := w.out
	w.out = nil
	return out, nil
}

func pow2(a uint64) bool { return a&(a-1) == 0 }

// alignUp rounds v up to a multiple of align (a power of two; 0 means 1).
func alignUp(v, align uint64) uint64 {
	if align <= 1 {
		return v
	}
	return (v + align - 1) &^ (align - 1)
}

// pnXNum is PN_XNUM (gABI): e_phnum's escape value, when the count is in
// sh_info of section 0.
const pnXNum = 0xffff
