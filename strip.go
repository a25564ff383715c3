package elfimage

import (
	"bytes"
	"cmp"
	"debug/elf"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/debugfile"
	"github.com/elfimage/elfimage/elfobj"
	"github.com/elfimage/elfimage/meta"
)

// StripOptions tunes [Strip].
type StripOptions struct {
	// DebugLink is the file name (without directory) of the debug file,
	// recorded in the stripped image's .gnu_debuglink section with the
	// debug file's CRC-32, so that gdb, elfutils, LLVM and [Open] find it
	// beside the image (or in its .debug directory). "" writes no
	// .gnu_debuglink: the debug file is then found by build ID only.
	DebugLink string
	// DropProcTable leaves the procedure table (.elfimage.procs, and
	// .elfimage.strs when it has one) out of the stripped image; it is
	// always in the debug file. Kept (the default), [Image.Procedure]
	// answers from the stripped image alone, without its debug file.
	DropProcTable bool
}

// Strip splits the image file data (as [Link] writes it) into a stripped
// image and its debug file, as `eu-strip -f` or `objcopy
// --only-keep-debug` then `objcopy --strip-debug --add-gnu-debuglink`
// would, but keeping the image's layout rules:
//
//   - stripped: the same bytes at the same offsets for every loaded
//     segment (the ELF and program headers, .rela.dyn, .dynamic, the
//     build-ID note, .data, .text, .rodata, .eh_frame_hdr, .eh_frame: it loads, runs and
//     unwinds as the image does, and has the same build ID), then,
//     unless opts.DropProcTable, the procedure table with its
//     PTProcTable program header; the .gnu_debuglink section
//     (debugfile.SectionDebugLink) when opts.DebugLink is set; the
//     section names and headers. No symbols, DWARF or rebase table; the
//     program headers that pointed at them (PTLineProgram,
//     PTLineStrings) become PT_NULL, so the table keeps its size.
//   - debug: the same ELF header fields and build-ID note; every other
//     loaded section as SHT_NOBITS at its address (sh_addr, sh_size and
//     flags kept); .symtab, .strtab, the DWARF sections, the procedure
//     table and [SectionRebase] as they were; program headers as the
//     image's, with PT_LOAD, PT_DYNAMIC and PT_GNU_EH_FRAME holding no
//     file bytes (p_filesz 0), PT_NOTE at the note and the OS-range
//     headers at their sections. This is the layout gdb, lldb, elfutils
//     and debuginfod expect of a separate debug file.
//
// Sections the linker does not write (a .comment added by another
// tool) stay in the stripped image only. Errors are *FormatError: data
// that the loader refuses, that has no .debug_info (stripped already),
// that already has a .gnu_debuglink, whose note sections and PT_NOTE
// segments give different build IDs, whose loaded segments hold bytes
// outside sections, or with a section whose sh_addralign is not a power
// of two, is more than a page (not loaded) or does not divide its
// sh_offset (loaded); and an opts.DebugLink with a '/'. Cost: two copies of
// data (at most), one pass over its sections and symbols, and a CRC-32 of
// the debug file.
func Strip(data []byte, opts StripOptions) (stripped, debug []byte, err error) {
	s, err := newStripper(data)
	if err != nil {
		return nil, nil, err
	}
	if strings.IndexByte(opts.DebugLink, '/') >= 0 || strings.IndexByte(opts.DebugLink, 0) >= 0 {
		return nil, nil, &FormatError{Field: "StripOptions.DebugLink", Msg: fmt.Sprintf("%q is not a file name (no directory, no NUL)", opts.DebugLink)}
	}
	if debug, err = s.debugFile(); err != nil {
		return nil, nil, err
	}
	if stripped, err = s.strippedImage(opts, debugfile.CRC32(debug)); err != nil {
		return nil, nil, err
	}
	return stripped, debug, nil
}

// LinkSplit links m as [Link] does and splits the image with [Strip]:
// it returns the stripped image, whose .gnu_debuglink names
// filepath.Base(opts.DebugFile) (none when DebugFile is ""), and its
// debug file. opts.DropProcTable leaves the procedure table out of the
// stripped image. Errors are those of Link and Strip.
func LinkSplit(m *Module, opts LinkOptions) (image, debug []byte, err error) {
	debugFile := opts.DebugFile
	opts.DebugFile = ""
	b, err := Link(m, opts)
	if err != nil {
		return nil, nil, err
	}
	link := ""
	if debugFile != "" {
		link = filepath.Base(debugFile)
	}
	return Strip(b, StripOptions{DebugLink: link, DropProcTable: opts.DropProcTable})
}

// stripper holds an image being split.
type stripper struct {
	data   []byte
	f      *elfobj.File
	secs   []SectionHeader
	alloc  []int // indices of SHF_ALLOC sections, in file order
	page   uint64
	phEnd  uint64 // end of the program header table
	ldEnd  uint64 // end of the last PT_LOAD
	symtab int    // index of .symtab, or -1
}

func newStripper(data []byte) (*stripper, error) {
	d := &decoder{data: data}
	h, err := elfobj.DecodeHeader(data)
	if err != nil {
		return nil, objError("", err)
	}
	a := arch.ForMachine(h.Machine)
	if a == nil {
		return nil, d.errorf(offMachine, "e_machine", "machine %v: no ABI of the arch package", h.Machine)
	}
	p, err := parseImage("", data, a, a.PageSize)
	if err != nil {
		return nil, err
	}
	f, secs, err := parseSectionTable("", data)
	if err != nil {
		return nil, err
	}
	s := &stripper{data: data, f: f, secs: secs, page: a.PageSize, ldEnd: p.size, symtab: -1}
	s.phEnd = f.Phoff + uint64(len(f.Progs))*phdrSize
	hasInfo := false
	for i := 1; i < len(secs); i++ {
		sec := &secs[i]
		switch {
		case sec.Flags&elf.SHF_ALLOC != 0:
			s.alloc = append(s.alloc, i)
		case sec.Name == debugfile.SectionDebugLink:
			return nil, d.errorf(f.SectionHeaderOffset(i), "section headers", "the image has a %s already (stripped)", debugfile.SectionDebugLink)
		case sec.Name == ".debug_info" && sec.Type != elf.SHT_NOBITS && sec.Size > 0:
			hasInfo = true
		case sec.Type == elf.SHT_SYMTAB && s.symtab < 0:
			s.symtab = i
		}
	}
	if !hasInfo {
		return nil, d.errorf(h.Shoff, "section headers", "no .debug_info: the image is stripped already")
	}
	// The stripped image keeps its notes, the debug file its build-ID note
	// section: the loader pairs them by the build ID of PT_NOTE, gdb,
	// elfutils and debuginfod by that of the SHT_NOTE sections. An image
	// on which the two disagree would give a pair that one side or the
	// other does not match.
	id, err := f.BuildID()
	if err != nil {
		return nil, objError("", err)
	}
	if !bytes.Equal(id, p.buildID) {
		off, field := h.Shoff, "section headers"
		for i := range f.Sections {
			if f.Sections[i].Type == elf.SHT_NOTE {
				off, field = f.SectionHeaderOffset(i), fmt.Sprintf("section %d (%s)", i, f.Sections[i].Name)
				break
			}
		}
		hex := func(b []byte) string {
			if len(b) == 0 {
				return "none"
			}
			return fmt.Sprintf("%x", b)
		}
		return nil, d.errorf(off, field, "the note sections give build ID %s, the PT_NOTE segments %s (not the linker's layout): the stripped image and its debug file would not pair", hex(id), hex(p.buildID))
	}
	if f.Phoff != ehdrSize {
		return nil, d.errorf(offPhoff, "e_phoff", "program header table at %#x, want %d (right after the ELF header)", f.Phoff, ehdrSize)
	}
	// The writers lay each copied section out at a multiple of its
	// sh_addralign, so the alignment bounds the output's size: a loaded
	// section must already sit at a multiple of it (it keeps its offset),
	// and a section that is not loaded needs none beyond the page. Either
	// way the output is at most the input's size plus a page per section.
	for i := 1; i < len(secs); i++ {
		sec := &secs[i]
		if i == int(f.Shstrndx) {
			continue // not copied: both files get a new one
		}
		a := sec.Addralign
		field := fmt.Sprintf("sh_addralign of section %d", i)
		switch {
		case a&(a-1) != 0:
			return nil, d.errorf(f.SectionHeaderOffset(i)+48, field, "section %s: %d is not a power of two (gABI)", sec.Name, a)
		case sec.Flags&elf.SHF_ALLOC == 0 && a > s.page:
			return nil, d.errorf(f.SectionHeaderOffset(i)+48, field, "section %s is not loaded but aligned to %#x bytes, more than a page (%#x)", sec.Name, a, s.page)
		case sec.Flags&elf.SHF_ALLOC != 0 && sec.Type != elf.SHT_NOBITS && a > 1 && sec.Offset%a != 0:
			return nil, d.errorf(f.SectionHeaderOffset(i)+48, field, "loaded section %s at offset %#x, not a multiple of its alignment %#x", sec.Name, sec.Offset, a)
		}
	}
	slices.SortStableFunc(s.alloc, func(i, j int) int { return cmp.Compare(secs[i].Offset, secs[j].Offset) })
	prev := s.phEnd
	for _, i := range s.alloc {
		sec := &secs[i]
		if sec.Type == elf.SHT_NOBITS {
			continue
		}
		if sec.Offset < prev || sec.Offset+sec.Size > s.ldEnd {
			return nil, d.errorf(f.SectionHeaderOffset(i)+24, fmt.Sprintf("sh_offset of section %d", i), "loaded section %s [%#x, +%#x) overlaps the headers or the section before it, or is outside the loaded segments", sec.Name, sec.Offset, sec.Size)
		}
		prev = sec.Offset + sec.Size
	}
	return s, nil
}

// fileHeader returns the caller-chosen fields of the image's ELF header.
func (s *stripper) fileHeader() elfobj.FileHeader {
	h := &s.f.Header
	return elfobj.FileHeader{Type: h.Type, Machine: h.Machine, Flags: h.Flags, Entry: h.Entry, OSABI: h.OSABI, ABIVersion: h.ABIVersion}
}

// bytes returns section i's contents.
func (s *stripper) bytes(i int) []byte {
	sec := &s.secs[i]
	if sec.Type == elf.SHT_NOBITS {
		return nil
	}
	return s.data[sec.Offset : sec.Offset+sec.Size]
}

// addAlloc adds the loaded sections to w, in index order, as SHT_NOBITS
// (but the notes) when nobits; it returns the new sections by old index.
func (s *stripper) addAlloc(w *elfobj.Writer, nobits bool) map[int]*elfobj.Section {
	out := make(map[int]*elfobj.Section, len(s.secs))
	for i := 1; i < len(s.secs); i++ {
		sec := s.secs[i]
		if sec.Flags&elf.SHF_ALLOC == 0 {
			continue
		}
		h := elf.SectionHeader{Name: sec.Name, Type: sec.Type, Flags: sec.Flags, Addr: sec.Addr, Link: sec.Link, Info: sec.Info, Addralign: sec.Addralign, Entsize: sec.Entsize}
		if nobits && sec.Type != elf.SHT_NOTE {
			h.Type = elf.SHT_NOBITS
		}
		out[i] = w.AddSection(h)
	}
	return out
}

// relink rewrites sh_link (and sh_info of SHF_INFO_LINK sections) of the
// new sections through the old-to-new map; a link to a section left out
// becomes 0.
func relink(secs []SectionHeader, out map[int]*elfobj.Section) {
	idx := func(old uint32) uint32 {
		if n, ok := out[int(old)]; ok {
			return uint32(n.Index())
		}
		return 0
	}
	for old, n := range out {
		sec := &secs[old]
		if sec.Link != 0 {
			n.Link = idx(sec.Link)
		}
		if sec.Flags&elf.SHF_INFO_LINK != 0 {
			n.Info = idx(sec.Info)
		}
	}
}

// tailHeader returns the header of a copied non-loaded section.
func tailHeader(sec *SectionHeader) elf.SectionHeader {
	return elf.SectionHeader{Name: sec.Name, Type: sec.Type, Flags: sec.Flags, Link: sec.Link, Info: sec.Info, Addralign: sec.Addralign, Entsize: sec.Entsize}
}

// tailSectionOf maps a program header type of ours to its section.
var tailSectionOf = map[elf.ProgType]string{
	PTProcTable:   meta.SectionProcs,
	PTLineProgram: ".debug_line",
	PTLineStrings: ".debug_line_str",
}

// debugFile writes the debug file (see Strip).
func (s *stripper) debugFile() ([]byte, error) {
	w := elfobj.NewWriter(elf.ELFCLASS64, elf.ELFDATA2LSB)
	out := s.addAlloc(w, true)
	var tail []int
	for i := 1; i < len(s.secs); i++ {
		sec := &s.secs[i]
		if sec.Flags&elf.SHF_ALLOC != 0 || sec.Type == elf.SHT_NOBITS || i == int(s.f.Shstrndx) {
			continue
		}
		switch {
		case i == s.symtab, sec.Type == elf.SHT_STRTAB && s.symtab >= 0 && int(s.secs[s.symtab].Link) == i,
			strings.HasPrefix(sec.Name, ".debug_"), sec.Name == meta.SectionProcs, sec.Name == meta.SectionStrs,
			sec.Name == SectionRebase:
			tail = append(tail, i)
			out[i] = w.AddSection(tailHeader(sec))
		}
	}
	relink(s.secs, out)
	w.ReserveFileHeader()
	w.ReserveProgramHeaders(len(s.f.Progs))
	for _, i := range s.alloc {
		w.ReserveSectionData(out[i], s.secs[i].Size)
	}
	for _, i := range tail {
		w.ReserveSectionData(out[i], s.secs[i].Size)
	}
	shstrtab := w.ReserveShstrtab()
	w.ReserveSectionHeaders()
	if err := w.Err(); err != nil {
		return nil, fmt.Errorf("elfimage: strip: internal error: %w", err)
	}
	byName := func(name string) *elfobj.Section {
		for _, i := range tail {
			if s.secs[i].Name == name {
				return out[i]
			}
		}
		return nil
	}
	w.WriteFileHeader(s.fileHeader())
	for _, ph := range s.f.Progs {
		switch ph.Type {
		case elf.PT_LOAD, elf.PT_DYNAMIC, elf.PT_GNU_EH_FRAME:
			ph.Off, ph.Filesz = 0, 0
		case elf.PT_NOTE:
			ph.Off = 0
			for _, i := range s.alloc {
				if s.secs[i].Type == elf.SHT_NOTE && s.secs[i].Addr == ph.Vaddr {
					ph.Off = out[i].Offset
				}
			}
		case PTProcTable, PTLineProgram, PTLineStrings:
			if t := byName(tailSectionOf[ph.Type]); t != nil {
				ph.Off, ph.Filesz = t.Offset, t.Size
			} else {
				ph = elf.ProgHeader{Type: elf.PT_NULL}
			}
		}
		w.WriteProgramHeader(ph)
	}
	for _, i := range s.alloc {
		if s.secs[i].Type == elf.SHT_NOTE {
			w.WriteSection(out[i], s.bytes(i))
		}
	}
	for _, i := range tail {
		b := s.bytes(i)
		if i == s.symtab {
			b = s.remapSymbols(b, out)
		}
		w.WriteSection(out[i], b)
	}
	w.WriteStringTable(shstrtab)
	w.WriteSectionHeaders()
	b, err := w.Finish()
	if err != nil {
		return nil, fmt.Errorf("elfimage: strip: internal error: %w", err)
	}
	return b, nil
}

// remapSymbols returns a copy of the symbol table b whose st_shndx
// fields name the new sections (SHN_UNDEF for a section left out).
func (s *stripper) remapSymbols(b []byte, out map[int]*elfobj.Section) []byte {
	b = slices.Clone(b)
	for off := 0; off+symSize <= len(b); off += symSize {
		shndx := elf.SectionIndex(le.Uint16(b[off+6:]))
		if shndx == elf.SHN_UNDEF || shndx >= elf.SHN_LORESERVE {
			continue
		}
		n := uint16(0)
		if sec, ok := out[int(shndx)]; ok {
			n = uint16(sec.Index())
		}
		le.PutUint16(b[off+6:], n)
	}
	return b
}

// strippedImage writes the stripped image (see Strip); crc is the debug
// file's CRC-32.
func (s *stripper) strippedImage(opts StripOptions, crc uint32) ([]byte, error) {
	w := elfobj.NewWriter(elf.ELFCLASS64, elf.ELFDATA2LSB)
	out := s.addAlloc(w, false)
	var keep []int
	for i := 1; i < len(s.secs); i++ {
		sec := &s.secs[i]
		if sec.Flags&elf.SHF_ALLOC != 0 || i == int(s.f.Shstrndx) || i == s.symtab {
			continue
		}
		switch {
		case sec.Type == elf.SHT_STRTAB && s.symtab >= 0 && int(s.secs[s.symtab].Link) == i,
			strings.HasPrefix(sec.Name, ".debug_"), sec.Name == SectionRebase:
			continue
		case sec.Name == meta.SectionProcs, sec.Name == meta.SectionStrs:
			if opts.DropProcTable {
				continue
			}
		}
		keep = append(keep, i)
		out[i] = w.AddSection(tailHeader(sec))
	}
	var link *elfobj.Section
	var linkData []byte
	if opts.DebugLink != "" {
		linkData = debugfile.AppendDebuglink(nil, debugfile.Debuglink{Name: opts.DebugLink, CRC: crc}, le)
		link = w.AddSection(elf.SectionHeader{Name: debugfile.SectionDebugLink, Type: elf.SHT_PROGBITS, Addralign: 4})
	}
	relink(s.secs, out)
	w.ReserveFileHeader()
	w.ReserveProgramHeaders(len(s.f.Progs))
	for _, i := range s.alloc {
		w.ReserveUntil(s.secs[i].Offset)
		w.ReserveSectionData(out[i], s.secs[i].Size)
	}
	w.ReserveUntil(s.ldEnd)
	w.ReserveAlign(s.page)
	for _, i := range keep {
		w.ReserveSectionData(out[i], s.secs[i].Size)
	}
	if link != nil {
		w.ReserveSectionData(link, uint64(len(linkData)))
	}
	shstrtab := w.ReserveShstrtab()
	w.ReserveSectionHeaders()
	if err := w.Err(); err != nil {
		return nil, fmt.Errorf("elfimage: strip: internal error: %w", err)
	}
	w.WriteFileHeader(s.fileHeader())
	for _, ph := range s.f.Progs {
		switch ph.Type {
		case PTProcTable, PTLineProgram, PTLineStrings:
			kept := false
			for _, i := range keep {
				if s.secs[i].Name == tailSectionOf[ph.Type] {
					ph.Off, ph.Filesz, kept = out[i].Offset, out[i].Size, true
				}
			}
			if !kept {
				ph = elf.ProgHeader{Type: elf.PT_NULL}
			}
		}
		w.WriteProgramHeader(ph)
	}
	for _, i := range s.alloc {
		w.WriteSection(out[i], s.bytes(i))
	}
	for _, i := range keep {
		w.WriteSection(out[i], s.bytes(i))
	}
	if link != nil {
		w.WriteSection(link, linkData)
	}
	w.WriteStringTable(shstrtab)
	w.WriteSectionHeaders()
	b, err := w.Finish()
	if err != nil {
		return nil, fmt.Errorf("elfimage: strip: internal error: %w", err)
	}
	// The loaded segments must be the image's byte for byte past the
	// headers: a byte outside every section would have been lost.
	if i := firstDiff(b[s.phEnd:s.ldEnd], s.data[s.phEnd:s.ldEnd]); i >= 0 {
		off := s.phEnd + uint64(i)
		return nil, &FormatError{Offset: off, Field: "loaded segment", Msg: fmt.Sprintf("byte at %#x is outside every section (not the linker's layout): stripping would lose it", off)}
	}
	return b, nil
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}
