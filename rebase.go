package elfimage

import (
	"cmp"
	"debug/elf"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/elfobj"
)

// SectionRebase is the name of the non-loaded section in which [Link]
// records where the debug sections hold absolute addresses, so that
// [Rebase] can move an image's debugging view to the address where it
// runs.
//
// Contents, version 2 (all numbers unsigned LEB128 unless noted): a
// version byte (2) and an address-size byte, then one group per section
// that holds addresses: the section's name (NUL-terminated, not empty),
// the number n ≥ 1 of addresses, and n offsets in the section, the first
// as is and each later one as the distance from the previous (at least
// the address size: the words do not overlap). Each listed word is a
// little-endian address of the given size. The words are the
// DW_FORM_addr values of .debug_info, the DW_LNE_set_address operands of
// .debug_line, the tuple addresses of .debug_aranges, the absolute
// entries of the location and range lists and the initial_location of
// .debug_frame FDEs; relative encodings (offset pairs, pc-relative
// .eh_frame pointers, the data-relative .eh_frame_hdr table) are not
// listed because they do not change.
//
// Groups name sections, not section header indices, because strip tools
// (objcopy --strip-debug, strip, eu-strip) renumber the section headers
// and drop sections: a group whose section is gone is skipped, since
// nothing of it is left to move. Version 1 (images linked before
// version 2) had the section header index in place of the name; it is
// still read when the index still names a .debug_ section (the section
// table as the linker wrote it), and refused with an error naming the
// section otherwise.
const SectionRebase = ".elfimage.rebase"

// rebaseVersion is the version of the SectionRebase tables Link writes;
// rebaseVersionIndex is the older one keyed by section index.
const (
	rebaseVersion      = 2
	rebaseVersionIndex = 1
)

// encodeRebase builds the contents of SectionRebase (version 2) from the
// tail sections' recorded address offsets.
func encodeRebase(secs []builtSection) []byte {
	b := []byte{rebaseVersion, 8} // ELF64: 8-byte addresses
	for _, s := range secs {
		if len(s.addrs) == 0 {
			continue
		}
		addrs := slices.Clone(s.addrs)
		slices.Sort(addrs)
		b = append(b, s.hdr.Name...)
		b = append(b, 0)
		b = dwarf.AppendUleb128(b, uint64(len(addrs)))
		prev := uint64(0)
		for _, off := range addrs {
			b = dwarf.AppendUleb128(b, off-prev)
			prev = off
		}
	}
	return b
}

// Rebase returns a copy of the image file data in which every address a
// debugger or profiler reads is moved by base: the image as if linked at
// base instead of 0. It is how a loaded image becomes visible to gdb
// through the GDB JIT interface, which does not relocate the symbol files
// it is given (GDB manual, "JIT Compilation Interface"): Rebase(file,
// run-time base) is such a symbol file. What it changes:
//
//   - e_entry (when not 0); p_vaddr and p_paddr of PT_LOAD, PT_DYNAMIC,
//     PT_GNU_EH_FRAME and PT_NOTE; sh_addr of every SHF_ALLOC section;
//   - st_value of every .symtab symbol defined in an SHF_ALLOC section;
//   - the address entries of .dynamic (DT_RELA, DT_STRTAB, DT_SYMTAB) and
//     r_offset and the addend of each R_X86_64_RELATIVE relocation
//     (R_AARCH64_RELATIVE on EM_AARCH64);
//   - every word listed in [SectionRebase].
//
// Position-independent encodings (.eh_frame, .eh_frame_hdr, offset pairs
// in location lists) stay valid as they are; .elfimage.procs keeps
// link-time addresses, as the runtime's queries take them. The bytes of
// loaded segments are copied as given: an image whose .data was already
// relocated keeps its run-time values there.
//
// An image stripped of its debug sections (by [Strip], objcopy
// --strip-debug, strip or eu-strip) is moved too: groups of the rebase
// table whose section is gone are skipped, and an image without a rebase
// table is accepted when it has no .debug_ section left.
//
// Errors are *FormatError (a malformed header, section table, symbol
// table, dynamic table or rebase table, naming the field and its offset),
// including an image that has .debug_ sections but no [SectionRebase]
// (written before it existed, or by another linker), a listed section
// that is compressed (SHF_COMPRESSED: objcopy --compress-debug-sections;
// its words are not where the table says), and a version 1 table whose
// section indices no longer name .debug_ sections (renumbered by a strip
// tool), and a damaged image in which an address to move lies in a table
// Rebase reads (a symbol table laid over the program headers, say) or
// overlaps another. Cost: a copy of data plus time linear in the number of headers,
// symbols and listed addresses.
func Rebase(data []byte, base uint64) ([]byte, error) {
	out := make([]byte, len(data))
	if err := rebaseInto("", out, data, base); err != nil {
		return nil, err
	}
	return out, nil
}

// rebaseInto writes Rebase(data, base) into out (len(out) == len(data)).
// data is parsed and validated first, and only then copied: a damaged
// image leaves out partly written and an error.
func rebaseInto(path string, out, data []byte, base uint64) error {
	f, secs, err := parseSectionTable(path, data)
	if err != nil {
		return err
	}
	d := decoder{path: path, data: data}
	h := &f.Header
	// The words to move are collected first and checked (movedWords)
	// before any is written: in a damaged image one could lie in a table
	// the parse read (a section header laid over the ELF header, a symbol
	// table over the program headers), or overlap another word, and the
	// result would no longer be the input moved by base.
	var words movedWords
	words.table(0, uint64(h.Ehsize))                                       // regionELFHeader
	words.table(h.Phoff, h.Phoff+uint64(len(f.Progs))*uint64(h.Phentsize)) // regionProgHeaders
	words.table(h.Shoff, h.Shoff+uint64(len(secs))*uint64(h.Shentsize))    // regionSectionHeaders

	if h.Entry != 0 {
		words.add(offEntry, regionELFHeader)
	}
	for i, p := range f.Progs {
		switch p.Type {
		case elf.PT_LOAD, elf.PT_DYNAMIC, elf.PT_GNU_EH_FRAME, elf.PT_NOTE:
			off := f.ProgHeaderOffset(i)
			words.add(off+16, regionProgHeaders) // p_vaddr
			words.add(off+24, regionProgHeaders) // p_paddr
		}
	}
	var rebaseSec, debugSec *SectionHeader
	for i := range secs {
		s := &secs[i]
		if s.Flags&elf.SHF_ALLOC != 0 {
			words.add(f.SectionHeaderOffset(i)+16, regionSectionHeaders) // sh_addr
		}
		switch {
		case s.Type == elf.SHT_SYMTAB:
			if err := rebaseSymbols(&d, f, i, words.section(s)); err != nil {
				return err
			}
		case s.Type == elf.SHT_DYNAMIC:
			if err := rebaseDynamic(&d, h, s, words.section(s)); err != nil {
				return err
			}
		case s.Type == elf.SHT_RELA && s.Flags&elf.SHF_ALLOC != 0:
			if err := rebaseRela(&d, h, s, words.section(s)); err != nil {
				return err
			}
		case s.Name == SectionRebase && rebaseSec == nil:
			rebaseSec = s
		case debugSec == nil && s.Type != elf.SHT_NOBITS && s.Size > 0 && strings.HasPrefix(s.Name, ".debug_"):
			debugSec = s
		}
	}
	if rebaseSec == nil && debugSec != nil {
		return d.errorf(h.Shoff, "section headers", "no %s section: the addresses in %s and the other debug sections cannot be moved", SectionRebase, debugSec.Name)
	}
	if rebaseSec != nil { // else stripped: no debug address to move
		// The words it lists are in debug sections, which the parse does
		// not read: they belong to no table.
		words.table(rebaseSec.Offset, rebaseSec.Offset+rebaseSec.Size)
		add := func(off uint64) { words.add(off, regionNone) }
		if err := applyRebaseTable(&d, rebaseSec, secs, add); err != nil {
			return err
		}
	}
	if err := words.check(&d); err != nil {
		return err
	}
	copy(out, data)
	for _, w := range words.words {
		le.PutUint64(out[w.off:], le.Uint64(out[w.off:])+base)
	}
	return nil
}

// region names a table the parse of Rebase reads: an index into
// movedWords.tables.
type region int32

const (
	regionNone           region = -1 // a word in no table (in a debug section)
	regionELFHeader      region = 0
	regionProgHeaders    region = 1
	regionSectionHeaders region = 2
	// Then one region per symbol table, dynamic table and relocation
	// section, and the rebase table, in the order they are parsed.
)

// movedWords are the file offsets of the 8-byte words Rebase adds the
// base to, each with the table it belongs to, and the tables the parse
// read: [start, end) file offsets, which may overlap each other in a
// damaged image.
type movedWords struct {
	words []movedWord
	// tables[r] is region r's [start, end).
	tables [][2]uint64
}

type movedWord struct {
	off uint64
	in  region
}

// table adds a region of [start, end) and returns its index.
func (w *movedWords) table(start, end uint64) region {
	w.tables = append(w.tables, [2]uint64{start, end})
	return region(len(w.tables) - 1)
}

// section adds the contents of s as a region and returns an add function
// for the words in it.
func (w *movedWords) section(s *SectionHeader) func(uint64) {
	r := w.table(s.Offset, s.Offset+s.Size)
	return func(off uint64) { w.add(off, r) }
}

func (w *movedWords) add(off uint64, in region) {
	w.words = append(w.words, movedWord{off, in})
}

// check refuses words that overlap each other, and words that overlap a
// table other than their own: adding to such a word would change what the
// parse read (a symbol's value or section index, a section header), so the
// result would not be the input moved. Cost: a sort of the words and a
// binary search per table.
func (w *movedWords) check(d *decoder) error {
	slices.SortFunc(w.words, func(a, b movedWord) int { return cmp.Compare(a.off, b.off) })
	ws := w.words
	for i := 1; i < len(ws); i++ {
		if ws[i].off-ws[i-1].off < 8 {
			return d.errorf(ws[i].off, "moved address", "the addresses at %#x and %#x overlap", ws[i-1].off, ws[i].off)
		}
	}
	for r, t := range w.tables {
		if t[1] <= t[0] {
			continue
		}
		// The words with off+8 > start, that is off >= start-7, and off < end.
		lo := uint64(0)
		if t[0] > 7 {
			lo = t[0] - 7
		}
		i, _ := slices.BinarySearchFunc(ws, lo, func(x movedWord, off uint64) int { return cmp.Compare(x.off, off) })
		for ; i < len(ws) && ws[i].off < t[1]; i++ {
			if ws[i].in != region(r) {
				return d.errorf(ws[i].off, "moved address", "the address at %#x overlaps a table the rebase reads, at [%#x, %#x)", ws[i].off, t[0], t[1])
			}
		}
	}
	return nil
}

// rebaseSymbols moves st_value of the symbols of table i that are defined
// in an SHF_ALLOC section.
func rebaseSymbols(d *decoder, f *elfobj.File, i int, add func(uint64)) error {
	s := &f.Sections[i]
	if s.Entsize != elf.Sym64Size || s.Size%elf.Sym64Size != 0 {
		return d.errorf(s.Offset, "sh_entsize of "+s.Name, "entry size %d and size %d do not describe Elf64_Sym entries", s.Entsize, s.Size)
	}
	t, err := f.Symbols(i)
	if err != nil {
		return objError(d.path, err)
	}
	for j := range t.Len() {
		sym := t.Sym(j)
		shndx := sym.Section
		if shndx == elf.SHN_UNDEF || shndx >= elf.SHN_LORESERVE {
			continue
		}
		off := t.Offset + uint64(j)*elf.Sym64Size
		if int(shndx) >= len(f.Sections) {
			return d.errorf(off+6, "st_shndx", "section index %d out of range (%d sections)", shndx, len(f.Sections))
		}
		if f.Sections[shndx].Flags&elf.SHF_ALLOC != 0 {
			add(off + 8) // st_value
		}
	}
	return nil
}

func rebaseDynamic(d *decoder, h *elfobj.Header, s *SectionHeader, add func(uint64)) error {
	if s.Size%dynSize != 0 {
		return d.errorf(s.Offset, "sh_size of "+s.Name, "size %d is not a multiple of %d", s.Size, dynSize)
	}
	for off := s.Offset; off < s.Offset+s.Size; off += dynSize {
		tag, _ := h.DecodeDyn(d.data[off:])
		switch tag {
		case elf.DT_NULL:
			return nil
		case elf.DT_RELA, elf.DT_STRTAB, elf.DT_SYMTAB:
			add(off + 8)
		}
	}
	return nil
}

func rebaseRela(d *decoder, h *elfobj.Header, s *SectionHeader, add func(uint64)) error {
	if s.Size%relaSize != 0 {
		return d.errorf(s.Offset, "sh_size of "+s.Name, "size %d is not a multiple of %d", s.Size, relaSize)
	}
	relative := uint32(elf.R_X86_64_RELATIVE)
	if a := arch.ForMachine(h.Machine); a != nil {
		relative = a.RelocRelative // R_AARCH64_RELATIVE on EM_AARCH64
	}
	for off := s.Offset; off < s.Offset+s.Size; off += relaSize {
		add(off) // r_offset
		if h.DecodeRel(d.data[off:], true).Type == relative {
			add(off + 16) // r_addend
		}
	}
	return nil
}

func applyRebaseTable(d *decoder, rs *SectionHeader, secs []SectionHeader, add func(uint64)) error {
	buf := dwarf.NewBuf(SectionRebase, le, d.data[rs.Offset:rs.Offset+rs.Size])
	fail := func(err error) error {
		fe := &FormatError{Source: d.path, Offset: rs.Offset, Field: SectionRebase, Err: err}
		if e, ok := err.(*FormatError); ok {
			fe.Offset, fe.Field, fe.Msg, fe.Err = rs.Offset+e.Offset, SectionRebase+" "+e.Field, e.Msg, e.Err
		}
		return fe
	}
	version := buf.U8("version")
	if buf.Err() == nil && version != rebaseVersion && version != rebaseVersionIndex {
		return fail(fmt.Errorf("version %d, want %d (or %d)", version, rebaseVersion, rebaseVersionIndex))
	}
	if n := buf.U8("address size"); n != 8 && buf.Err() == nil {
		return fail(fmt.Errorf("address size %d, want 8", n))
	}
	for buf.Err() == nil && buf.Len() > 0 {
		at := buf.Off()
		var t *SectionHeader // nil: the section is gone (stripped)
		if version == rebaseVersionIndex {
			idx := buf.Uleb("section index")
			if buf.Err() != nil {
				break
			}
			if idx == 0 || idx >= uint64(len(secs)) {
				return fail(&FormatError{Offset: at, Field: "section index", Msg: fmt.Sprintf("%d not in [1, %d): the section headers were renumbered (by a strip tool?); a version %d table, which names sections, needs the image linked again", idx, len(secs), rebaseVersion)})
			}
			t = &secs[idx]
			if !strings.HasPrefix(t.Name, ".debug_") {
				return fail(&FormatError{Offset: at, Field: "section index", Msg: fmt.Sprintf("section %d is now %s, not a debug section: the section headers were renumbered (by a strip tool?); a version %d table, which names sections, needs the image linked again", idx, t.Name, rebaseVersion)})
			}
		} else {
			name := buf.CString("section name")
			if buf.Err() != nil {
				break
			}
			if len(name) == 0 {
				return fail(&FormatError{Offset: at, Field: "section name", Msg: "empty name"})
			}
			for i := range secs {
				if secs[i].Name == string(name) {
					t = &secs[i]
					break
				}
			}
		}
		n := buf.Uleb("count")
		if buf.Err() != nil {
			break
		}
		if n == 0 || n > uint64(buf.Len()) {
			return fail(&FormatError{Offset: at, Field: "count", Msg: fmt.Sprintf("%d addresses in %d remaining bytes", n, buf.Len())})
		}
		if t != nil && (t.Type == elf.SHT_NOBITS || t.Flags&elf.SHF_ALLOC != 0) {
			return fail(&FormatError{Offset: at, Field: "section", Msg: fmt.Sprintf("%s is not a non-loaded section with contents", t.Name)})
		}
		if t != nil && t.Flags&elf.SHF_COMPRESSED != 0 {
			return fail(&FormatError{Offset: at, Field: "section", Msg: fmt.Sprintf("%s is compressed (SHF_COMPRESSED): its addresses cannot be moved in place (objcopy --decompress-debug-sections undoes it)", t.Name)})
		}
		off := uint64(0)
		for i := range n {
			at := buf.Off()
			delta := buf.Uleb("offset")
			if buf.Err() != nil {
				break
			}
			if i > 0 && delta < 8 {
				return fail(&FormatError{Offset: at, Field: "offset", Msg: fmt.Sprintf("address %d overlaps the one before (distance %d)", i, delta)})
			}
			if t == nil {
				continue // the section was stripped: nothing to move
			}
			if t.Size < 8 || delta > t.Size-8 || off+delta > t.Size-8 {
				return fail(&FormatError{Offset: at, Field: "offset", Msg: fmt.Sprintf("address %d at offset %#x does not fit in %s (%#x bytes)", i, off+delta, t.Name, t.Size)})
			}
			off += delta
			add(t.Offset + off)
		}
	}
	if err := buf.Err(); err != nil {
		return fail(err)
	}
	return nil
}

// Symfile returns the image's debugging view at its run-time address:
// [Rebase] of the image file by [Image.Base]. It is the symbol file
// package publish hands to gdb through the GDB JIT interface; written to
// a file it is also what `add-symbol-file FILE` (without -o) takes.
// Errors: those of Rebase, [ErrFault] when the mapped file was truncated.
// Cost: one copy of the file, linear in its symbols and debug addresses.
func (im *Image) Symfile() ([]byte, error) {
	out := make([]byte, len(im.data))
	if err := im.SymfileInto(out); err != nil {
		return nil, err
	}
	return out, nil
}

// SymfileInto writes [Image.Symfile] into dst, which must be exactly
// len(im.Bytes()) bytes (for example memory a debugger interface reads),
// without allocating the copy. Errors: a dst of another length, and those
// of Symfile. Cost: as Symfile, without the allocation.
func (im *Image) SymfileInto(dst []byte) (err error) {
	if len(dst) != len(im.data) {
		return fmt.Errorf("elfimage: %s: symbol file needs %d bytes, got %d", im.path, len(im.data), len(dst))
	}
	defer im.guardFaults(&err, debug.SetPanicOnFault(true))
	return rebaseInto(im.path, dst, im.data, uint64(im.Base()))
}
