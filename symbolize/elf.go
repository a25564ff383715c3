package symbolize

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/elfimage/elfimage/elfobj"
)

// elfFile is the ELF file as package elfobj reads it; class64 is kept
// apart so that a symtab can be built without a file (tests).
//
// In a relocatable object (ET_REL) every section's sh_addr is 0, so the
// code of two sections (.text and .text.startup, or the sections of
// -ffunction-sections) shares addresses. obj is then a copy of the file
// whose SHF_ALLOC sections are laid out apart ([layoutObject]): its
// relocated DWARF and symbols have distinct addresses per section, and a
// query address is turned into one of them by [elfFile.linkAddr]. file0
// is the file as stored, for [Symbolizer.Section].
type elfFile struct {
	obj     *elfobj.File
	file0   *elfobj.File
	class64 bool
	text    []textSection // ET_REL only: the sections addresses are resolved in
}

// textSection is one section of a relocatable object that query
// addresses can fall in: its size and the address layoutObject gave it.
type textSection struct {
	size, base uint64
}

// relLayoutBase is where layoutObject puts the first section: above 0, so
// that an address left unrelocated (0) is nobody's.
const relLayoutBase = 0x10000

// layoutObject returns a copy of the relocatable object f whose SHF_ALLOC
// sections have distinct addresses (each at the next multiple of its
// alignment, at least 16, from relLayoutBase, in section header order)
// and the sections query addresses resolve in: those llvm-symbolizer
// takes for an address in an object (getModuleSectionIndexForAddress in
// LLVM's DebugInfo/Symbolize), every SHF_EXECINSTR section that is not
// SHT_NOBITS and not empty, in section header order. When the layout
// would not fit the file's address size, f is returned as it is (all
// sections at 0) with the same text sections at base 0.
func layoutObject(f *elfobj.File) (*elfobj.File, []textSection) {
	lay := *f
	lay.Sections = append([]elf.SectionHeader(nil), f.Sections...)
	limit := uint64(1<<32 - 1)
	if f.Class == elf.ELFCLASS64 {
		limit = 1<<63 - 1
	}
	at, ok := uint64(relLayoutBase), true
	for i := range lay.Sections {
		s := &lay.Sections[i]
		if s.Flags&elf.SHF_ALLOC == 0 {
			continue
		}
		align := max(s.Addralign, 16)
		if align&(align-1) != 0 || align > limit || s.Size > limit-align || at > limit-align-s.Size {
			ok = false
			break
		}
		at = (at + align - 1) &^ (align - 1)
		s.Addr = at
		at += s.Size
	}
	if !ok {
		lay.Sections = f.Sections
	}
	var text []textSection
	for _, s := range lay.Sections {
		if s.Flags&elf.SHF_EXECINSTR != 0 && s.Type != elf.SHT_NOBITS && s.Size > 0 {
			text = append(text, textSection{size: s.Size, base: s.Addr})
		}
	}
	return &lay, text
}

// linkAddr turns a query address into the address the file's DWARF and
// symbols use. In an executable or shared object it is addr. In a
// relocatable object addr is an offset in the first text section (in
// section header order) that is longer than addr, as llvm-symbolizer
// numbers an object's addresses (every section at 0); ok is false when
// no text section is that long.
func (f *elfFile) linkAddr(addr uint64) (uint64, bool) {
	if f.obj == nil || f.obj.Type != elf.ET_REL {
		return addr, true
	}
	for _, t := range f.text {
		if addr < t.size {
			return t.base + addr, true
		}
	}
	return 0, false
}

// parseELF reads the ELF header and the section header table of data
// (used in place) or, when data is nil, of the size bytes r holds, of
// either class and byte order. Input that is not ELF (elfobj.ErrNotELF:
// bad magic, class or EI_DATA) wraps ErrNotELF; a malformed table is
// elfobj's *formaterr.Error.
func parseELF(data []byte, r io.ReaderAt, size int64) (*elfFile, error) {
	var err error
	if data != nil || r == nil {
		_, err = elfobj.DecodeHeader(data)
	} else {
		_, err = elfobj.ReadHeader(r)
	}
	if errors.Is(err, elfobj.ErrNotELF) {
		return nil, fmt.Errorf("%w: %w", ErrNotELF, err)
	} else if err != nil {
		return nil, err
	}
	var f *elfobj.File
	if data != nil || r == nil {
		f, err = elfobj.NewBytes(data)
	} else {
		f, err = elfobj.NewFile(r, size)
	}
	if err != nil {
		return nil, err
	}
	ef := &elfFile{obj: f, file0: f, class64: f.Class == elf.ELFCLASS64}
	if f.Type == elf.ET_REL {
		ef.obj, ef.text = layoutObject(f)
	}
	return ef, nil
}

// order is the byte order of the file's data (EI_DATA), which its DWARF
// also uses.
func (f *elfFile) order() binary.ByteOrder {
	if f.obj != nil && f.obj.Data == elf.ELFDATA2MSB {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

// codeBounds returns the range of addresses outside of which no code of
// the file can be, for telling live DWARF ranges and line sequences from
// those of code the linker discarded (see [live]): low is the lowest
// address of a non-empty SHF_ALLOC|SHF_EXECINSTR section (SHT_NOBITS ones
// included: a separate debug file keeps the headers of the code it
// describes), or, without sections, of a PT_LOAD segment with PF_X; 0
// when the file has neither. tomb is the lowest tombstone of the address
// size: -2 as an ELF32 or ELF64 address.
func (f *elfFile) codeBounds() live {
	l := live{low: ^uint64(0), tomb: ^uint64(0) - 1}
	if !f.class64 {
		l.tomb = 1<<32 - 2
	}
	if f.obj == nil {
		l.low = 0
		return l
	}
	for _, s := range f.obj.Sections {
		if s.Flags&(elf.SHF_ALLOC|elf.SHF_EXECINSTR) == elf.SHF_ALLOC|elf.SHF_EXECINSTR && s.Size > 0 {
			l.low = min(l.low, s.Addr)
		}
	}
	if l.low == ^uint64(0) {
		for _, p := range f.obj.Progs {
			if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && p.Memsz > 0 {
				l.low = min(l.low, p.Vaddr)
			}
		}
	}
	if l.low == ^uint64(0) {
		l.low = 0
	}
	return l
}

// debugSection returns the contents of DWARF section name (".debug_info"),
// decompressed (SHF_COMPRESSED with zlib or zstd, GNU .zdebug_) and, in a
// relocatable object, relocated. A missing section is nil, nil.
func (f *elfFile) debugSection(name string) ([]byte, error) { return f.obj.DebugSection(name) }
