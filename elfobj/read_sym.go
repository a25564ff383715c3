package elfobj

import (
	"bytes"
	"debug/elf"
	"fmt"
)

// SymbolTable is a symbol table (.symtab or .dynsym, gABI "Symbol Table")
// with its string table and, when the file has one, its SHT_SYMTAB_SHNDX
// section of extended section indices. Entries are decoded on demand:
// [SymbolTable.Sym] allocates nothing, so iterating over a table of any
// size costs no memory. It is safe for concurrent use.
type SymbolTable struct {
	// Section is the index of the table's section (-1 for a table made
	// by [NewSymbolTable]) and SectionName its name.
	Section     int
	SectionName string
	// Offset is the file offset of entry 0, so that entry i starts at
	// Offset + i × [Header.SymSize] (0 for NewSymbolTable).
	Offset uint64

	h       Header
	ent     int
	syms    []byte // whole entries only
	strs    []byte
	shndx   []byte // SHT_SYMTAB_SHNDX contents, or nil
	strName string
}

// Symbols returns the symbol table of section i, which must be of type
// SHT_SYMTAB or SHT_DYNSYM, with its string table (the section sh_link
// names). The table and the string table are read once (subslices for
// [NewBytes]); so is the SHT_SYMTAB_SHNDX section whose sh_link is i, if
// any.
//
// Errors are *formaterr.Error with Source the table's name: Field
// "sh_type" for another section type, "sh_size" for a size that is not a
// multiple of the entry size ([Header.SymSize]; sh_entsize is not
// trusted), "sh_link" for a string table index that is 0 or out of range;
// or the read errors of [File.Raw]. Cost: the reads; no allocation for
// NewBytes beyond the table itself.
func (f *File) Symbols(i int) (*SymbolTable, error) {
	return f.symbols(i, true)
}

// symbols is Symbols; without names it does not read the string table
// (for relocations, which need only the values).
func (f *File) symbols(i int, names bool) (*SymbolTable, error) {
	s, err := f.section(i)
	if err != nil {
		return nil, err
	}
	name := f.secName(i)
	at := f.SectionHeaderOffset(i)
	c := f.cls()
	if s.Type != elf.SHT_SYMTAB && s.Type != elf.SHT_DYNSYM {
		return nil, formatErr(name, at+secType[c], "sh_type", "section of type %v is not a symbol table", s.Type)
	}
	ent := uint64(f.SymSize())
	if s.Size%ent != 0 {
		return nil, formatErr(name, at+secSize[c], "sh_size", "size %#x is not a multiple of %d", s.Size, ent)
	}
	if s.Link == 0 || uint64(s.Link) >= uint64(len(f.Sections)) {
		return nil, formatErr(name, at+secLink[c], "sh_link", "string table index %d not in [1, %d)", s.Link, len(f.Sections))
	}
	syms, err := f.SectionData(i)
	if err != nil {
		return nil, err
	}
	var strs []byte
	if names {
		if st := f.Sections[s.Link]; st.Type == elf.SHT_NOBITS && st.Size > 0 && s.Type != elf.SHT_NOBITS {
			return nil, formatErr(name, at+secLink[c], "sh_link", "string table %d has no contents (SHT_NOBITS)", s.Link)
		}
		if strs, err = f.SectionData(int(s.Link)); err != nil {
			return nil, err
		}
	}
	t := &SymbolTable{Section: i, SectionName: name, Offset: s.Offset, h: f.Header, ent: int(ent),
		syms: syms[:uint64(len(syms))/ent*ent], strs: strs, strName: f.secName(int(s.Link))}
	for j := range f.Sections {
		x := &f.Sections[j]
		if x.Type == elf.SHT_SYMTAB_SHNDX && int(x.Link) == i {
			if t.shndx, err = f.SectionData(j); err != nil {
				return nil, err
			}
			break
		}
	}
	return t, nil
}

// SymbolsOfType returns the symbol table of the first section of type typ
// (SHT_SYMTAB or SHT_DYNSYM), or elf.ErrNoSymbols when there is none.
// Errors are otherwise those of [File.Symbols].
func (f *File) SymbolsOfType(typ elf.SectionType) (*SymbolTable, error) {
	i := f.FindSectionType(typ)
	if i < 0 {
		return nil, elf.ErrNoSymbols
	}
	return f.Symbols(i)
}

// NewSymbolTable returns the symbol table held in syms (entries of class
// and data's layout) with names in strs, for callers that hold the bytes of
// a table but not its file (offsets in errors are then offsets in syms).
// name is used in errors. It has no extended section indices. Errors are
// *formaterr.Error: a class or data encoding that is not ELFCLASS32/64
// or ELFDATA2LSB/MSB, or (Source the name, Field "sh_size") a size that is not
// a multiple of the entry size. Cost: constant; the bytes are used in
// place.
func NewSymbolTable(class elf.Class, data elf.Data, name string, syms, strs []byte) (*SymbolTable, error) {
	h, err := HeaderFor(class, data)
	if err != nil {
		return nil, err
	}
	ent := h.SymSize()
	if len(syms)%ent != 0 {
		return nil, formatErr(name, 0, "sh_size", "size %#x is not a multiple of %d", len(syms), ent)
	}
	return &SymbolTable{Section: -1, SectionName: name, h: h, ent: ent, syms: syms, strs: strs, strName: name + " strings"}, nil
}

// Len returns the number of entries, including the null symbol 0.
func (t *SymbolTable) Len() int { return len(t.syms) / t.ent }

// Bytes returns the table's entries as stored: Len() entries of
// [Header.SymSize] bytes each (Elf32_Sym or Elf64_Sym in the file's byte
// order; [SymbolTable.Is64] and [SymbolTable.BigEndian] tell which), for
// callers that decode a whole table in one pass. Do not modify it. Cost:
// constant; no allocation.
func (t *SymbolTable) Bytes() []byte { return t.syms }

// Is64 reports whether the entries are Elf64_Sym (24 bytes each) rather
// than Elf32_Sym (16 bytes).
func (t *SymbolTable) Is64() bool { return t.h.is64 }

// BigEndian reports whether the entries are big-endian (ELFDATA2MSB).
func (t *SymbolTable) BigEndian() bool { return t.h.big }

// Sym returns entry i, 0 <= i < Len() (it panics otherwise, as indexing
// does). Cost: constant; no allocation.
func (t *SymbolTable) Sym(i int) Sym { return t.h.DecodeSym(t.syms[i*t.ent:]) }

// SectionOf returns the index of the section that entry i, 0 <= i <
// Len(), is defined in: its st_shndx, or, when that is SHN_XINDEX, its
// entry in the table's SHT_SYMTAB_SHNDX section (gABI "Extended Section
// Index Section"). ok is false for an undefined symbol (SHN_UNDEF), a
// reserved index (SHN_ABS, SHN_COMMON, processor- and OS-specific ones)
// and an SHN_XINDEX without an extended entry. The index is not checked
// against the section count. Cost: constant; no allocation.
func (t *SymbolTable) SectionOf(i int) (section int, ok bool) {
	s := t.Sym(i)
	switch {
	case s.Section == elf.SHN_XINDEX:
		if uint64(i)*4+4 > uint64(len(t.shndx)) {
			return 0, false
		}
		return int(t.h.u32(t.shndx[i*4:])), true
	case s.Section == elf.SHN_UNDEF || s.Section >= elf.SHN_LORESERVE:
		return 0, false
	}
	return int(s.Section), true
}

// Strings returns the string table (names are at [Sym].Name offsets in
// it). Do not modify it.
func (t *SymbolTable) Strings() []byte { return t.strs }

// NameBytes returns the name of entry i, 0 <= i < Len(), as a subslice of
// the string table (do not modify it). Errors are *formaterr.Error,
// Source the table's name, Offset the entry's file offset, Field
// "st_name of symbol i": a name offset outside the string table or a name
// not NUL-terminated in it. Cost: O(name length); no allocation.
func (t *SymbolTable) NameBytes(i int) ([]byte, error) {
	off := uint64(t.h.u32(t.syms[i*t.ent:]))
	if off >= uint64(len(t.strs)) {
		if off == 0 && len(t.strs) == 0 {
			return nil, nil // an empty name in an empty string table
		}
		return nil, formatErr(t.SectionName, t.Offset+uint64(i*t.ent), fmt.Sprintf("st_name of symbol %d", i),
			"name offset %#x outside %s (%#x bytes)", off, t.strName, len(t.strs))
	}
	n := bytes.IndexByte(t.strs[off:], 0)
	if n < 0 {
		return nil, formatErr(t.SectionName, t.Offset+uint64(i*t.ent), fmt.Sprintf("st_name of symbol %d", i),
			"name at offset %#x of %s is not NUL-terminated", off, t.strName)
	}
	return t.strs[off : off+uint64(n) : off+uint64(n)], nil
}

// Name is [SymbolTable.NameBytes] as a string (which it allocates).
func (t *SymbolTable) Name(i int) (string, error) {
	b, err := t.NameBytes(i)
	return string(b), err
}
