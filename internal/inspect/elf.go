// Package inspect decodes any ELF file (ELF32 or ELF64, either byte order)
// through the one ELF reader, [elfobj.File], into plain values for
// `elfimage dump`: the file header, program headers, section headers and
// symbol tables with the content `readelf -h -l -S -s` shows (gABI chapter 4
// "Object Files", chapter 5 "Program Header"), notes, the dynamic section
// and relocations (`readelf -n -d -r`), and the DWARF of any producer: units
// and DIEs with their location and range lists expanded, and line programs
// row by row (what `llvm-dwarfdump --debug-info --debug-line` shows). Every
// value has JSON field names; Write* functions print the text form.
//
// Input is untrusted: a malformed table or section gives an error naming
// it (a *formaterr.Error from the readers), never a panic; every loop is
// bounded by the sizes of the file's sections.
package inspect

import (
	"debug/elf"
	"fmt"
	"strings"

	"github.com/elfimage/elfimage/elfobj"
)

// Header is the ELF file header as readelf -h prints it. Names use
// readelf's spelling ("ELF64", "2's complement, little endian" is shortened
// to "little endian"; Type and Machine are debug/elf's names).
type Header struct {
	Class              string // "ELF32" or "ELF64"
	Data               string // "little endian" or "big endian"
	IdentVersion       uint8  // e_ident[EI_VERSION]
	OSABI              string // debug/elf's ELFOSABI_ name
	ABIVersion         uint8
	Type               string // ET_ name
	Machine            string // EM_ name
	Version            uint32 // e_version
	Entry              uint64
	ProgramHeaderStart uint64 // e_phoff, bytes into the file
	SectionHeaderStart uint64 // e_shoff, bytes into the file
	Flags              uint32
	HeaderSize         uint16 // e_ehsize, bytes
	ProgramHeaderSize  uint16 // e_phentsize, bytes
	ProgramHeaders     int    // the count, PN_XNUM resolved
	SectionHeaderSize  uint16 // e_shentsize, bytes
	SectionHeaders     int    // the count, extended numbering resolved
	SectionNames       int    // the section name string table's index, SHN_XINDEX resolved
	Interpreter        string `json:",omitempty"` // PT_INTERP's path, when there is one
}

// FileHeader returns f's header. Cost: reads PT_INTERP's bytes if any.
func FileHeader(f *elfobj.File) Header {
	h := Header{
		Class: "ELF32", Data: "little endian", IdentVersion: uint8(f.Version),
		OSABI: f.OSABI.String(), ABIVersion: f.ABIVersion, Type: f.Type.String(), Machine: f.Machine.String(),
		Version: f.ObjectVersion, Entry: f.Entry, ProgramHeaderStart: f.Phoff, SectionHeaderStart: f.Shoff,
		Flags: f.Flags, HeaderSize: f.Ehsize, ProgramHeaderSize: f.Phentsize, ProgramHeaders: len(f.Progs),
		SectionHeaderSize: f.Shentsize, SectionHeaders: len(f.Sections), SectionNames: int(f.Shstrndx),
	}
	if f.Class == elf.ELFCLASS64 {
		h.Class = "ELF64"
	}
	if f.Data == elf.ELFDATA2MSB {
		h.Data = "big endian"
	}
	if f.Shstrndx == uint16(elf.SHN_XINDEX) && len(f.Sections) > 0 {
		h.SectionNames = int(f.Sections[0].Link)
	}
	for i, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			if b, err := f.ProgData(i); err == nil {
				h.Interpreter = strings.TrimRight(string(b), "\x00")
			}
		}
	}
	return h
}

// Program is one program header (segment), readelf -l's columns.
type Program struct {
	Type     string // readelf's name: "LOAD", "GNU_STACK", "LOOS+0x..." for unknown ones
	Offset   uint64
	VirtAddr uint64
	PhysAddr uint64
	FileSize uint64
	MemSize  uint64
	Flags    string // readelf's "RWE" letters, blank for unset
	Align    uint64
	Sections []string // the sections the segment holds, as readelf's section to segment mapping
}

// ProgTypeNames maps the program header types of formats built on ELF
// (elfimage's own) to their names; ProgramHeaders consults it first.
var ProgTypeNames = map[elf.ProgType]string{}

// ProgTypeName names a program header type as readelf does.
func ProgTypeName(t elf.ProgType) string {
	if s, ok := ProgTypeNames[t]; ok {
		return s
	}
	switch t {
	case elf.PT_GNU_EH_FRAME, elf.PT_GNU_STACK, elf.PT_GNU_RELRO, elf.PT_GNU_PROPERTY:
		return strings.TrimPrefix(t.String(), "PT_")
	case 0x6474e554:
		return "GNU_SFRAME"
	}
	if s := t.String(); strings.HasPrefix(s, "PT_") {
		return strings.TrimPrefix(s, "PT_")
	}
	switch {
	case t >= elf.PT_LOOS && t <= elf.PT_HIOS:
		return fmt.Sprintf("LOOS+%#x", uint32(t-elf.PT_LOOS))
	case t >= elf.PT_LOPROC && t <= elf.PT_HIPROC:
		return fmt.Sprintf("LOPROC+%#x", uint32(t-elf.PT_LOPROC))
	}
	return fmt.Sprintf("%#x", uint32(t))
}

// ProgramHeaders returns f's program headers with the sections each holds
// (by readelf's rule: an allocated section whose addresses lie inside the
// segment's memory; SHT_NOBITS .tbss only in PT_TLS).
func ProgramHeaders(f *elfobj.File) []Program {
	out := make([]Program, len(f.Progs))
	for i, p := range f.Progs {
		fl := []byte("   ")
		if p.Flags&elf.PF_R != 0 {
			fl[0] = 'R'
		}
		if p.Flags&elf.PF_W != 0 {
			fl[1] = 'W'
		}
		if p.Flags&elf.PF_X != 0 {
			fl[2] = 'E'
		}
		q := Program{Type: ProgTypeName(p.Type), Offset: p.Off, VirtAddr: p.Vaddr, PhysAddr: p.Paddr,
			FileSize: p.Filesz, MemSize: p.Memsz, Flags: string(fl), Align: p.Align}
		for _, s := range f.Sections {
			if inSegment(s, p) {
				q.Sections = append(q.Sections, s.Name)
			}
		}
		out[i] = q
	}
	return out
}

func inSegment(s elf.SectionHeader, p elf.ProgHeader) bool {
	if s.Type == elf.SHT_NULL {
		return false
	}
	tbss := s.Type == elf.SHT_NOBITS && s.Flags&elf.SHF_TLS != 0
	if tbss && p.Type != elf.PT_TLS {
		return false
	}
	if s.Flags&elf.SHF_ALLOC == 0 {
		// Non-allocated sections by file offset (readelf counts them only
		// in segments that are not loaded, such as PT_NOTE in a core).
		return p.Type != elf.PT_LOAD && s.Type != elf.SHT_NOBITS && s.Size > 0 &&
			s.Offset >= p.Off && s.Offset-p.Off < p.Filesz && s.Size <= p.Filesz-(s.Offset-p.Off)
	}
	if s.Addr < p.Vaddr || s.Addr-p.Vaddr > p.Memsz {
		return false
	}
	if s.Size == 0 {
		return s.Addr-p.Vaddr < p.Memsz
	}
	if s.Size > p.Memsz-(s.Addr-p.Vaddr) {
		return false
	}
	if s.Type != elf.SHT_NOBITS {
		return s.Offset >= p.Off && s.Offset-p.Off < p.Filesz+1 && s.Size <= p.Filesz-min(p.Filesz, s.Offset-p.Off)
	}
	return true
}

// Section is one section header, readelf -S -W's columns.
type Section struct {
	Index     int
	Name      string
	Type      string // readelf's name: "PROGBITS", "VERSYM", "X86_64_UNWIND"
	Address   uint64
	Offset    uint64
	Size      uint64 // bytes in the file (sh_size; for a compressed section its compressed size)
	EntSize   uint64
	Flags     string // readelf's letters: W A X M S I L O G T C x o E l R
	Link      uint32
	Info      uint32
	Alignment uint64
}

// SectionTypeName names a section type as readelf does.
func SectionTypeName(t elf.SectionType, m elf.Machine) string {
	switch t {
	case shtRELR:
		return "RELR"
	case elf.SHT_GNU_VERSYM:
		return "VERSYM"
	case elf.SHT_GNU_VERDEF:
		return "VERDEF"
	case elf.SHT_GNU_VERNEED:
		return "VERNEED"
	case elf.SHT_GNU_HASH:
		return "GNU_HASH"
	case elf.SHT_GNU_ATTRIBUTES:
		return "GNU_ATTRIBUTES"
	case 0x6fff4c03:
		return "LLVM_ADDRSIG"
	case 0x70000001:
		switch m {
		case elf.EM_X86_64:
			return "X86_64_UNWIND" // x86-64 psABI section 4.2.4
		case elf.EM_ARM:
			return "ARM_EXIDX"
		case elf.EM_MIPS:
			return "MIPS_LIBLIST"
		}
	case 0x70000006, 0x7000000d, 0x7000001e, 0x7000002a:
		if m == elf.EM_MIPS {
			return map[elf.SectionType]string{0x70000006: "MIPS_REGINFO", 0x7000000d: "MIPS_OPTIONS",
				0x7000001e: "MIPS_DWARF", 0x7000002a: "MIPS_ABIFLAGS"}[t]
		}
	case 0x70000003:
		if m == elf.EM_ARM || m == elf.EM_AARCH64 || m == elf.EM_RISCV {
			return strings.TrimPrefix(m.String(), "EM_") + "_ATTRIBUTES"
		}
	}
	if s := t.String(); strings.HasPrefix(s, "SHT_") {
		return strings.TrimPrefix(s, "SHT_")
	}
	switch {
	case t >= elf.SHT_LOOS && t <= elf.SHT_HIOS:
		return fmt.Sprintf("LOOS+%#x", uint32(t-elf.SHT_LOOS))
	case t >= elf.SHT_LOPROC && t <= elf.SHT_HIPROC:
		return fmt.Sprintf("LOPROC+%#x", uint32(t-elf.SHT_LOPROC))
	case t >= elf.SHT_LOUSER:
		return fmt.Sprintf("LOUSER+%#x", uint32(t-elf.SHT_LOUSER))
	}
	return fmt.Sprintf("%#x", uint32(t))
}

// SectionFlags spells section flags with readelf's letters, in its order.
func SectionFlags(fl elf.SectionFlag, m elf.Machine) string {
	var b strings.Builder
	for _, x := range []struct {
		f elf.SectionFlag
		c byte
	}{{elf.SHF_WRITE, 'W'}, {elf.SHF_ALLOC, 'A'}, {elf.SHF_EXECINSTR, 'X'}, {elf.SHF_MERGE, 'M'},
		{elf.SHF_STRINGS, 'S'}, {elf.SHF_INFO_LINK, 'I'}, {elf.SHF_LINK_ORDER, 'L'}, {elf.SHF_OS_NONCONFORMING, 'O'},
		{elf.SHF_GROUP, 'G'}, {elf.SHF_TLS, 'T'}, {elf.SHF_COMPRESSED, 'C'}, {0x200000, 'R'}, {0x80000000, 'E'}} {
		if fl&x.f != 0 {
			b.WriteByte(x.c)
		}
	}
	if m == elf.EM_X86_64 && fl&0x10000000 != 0 {
		b.WriteByte('l')
	}
	return b.String()
}

// Sections returns f's section headers, section 0 included.
func Sections(f *elfobj.File) []Section {
	out := make([]Section, len(f.Sections))
	for i, s := range f.Sections {
		out[i] = Section{Index: i, Name: s.Name, Type: SectionTypeName(s.Type, f.Machine), Address: s.Addr,
			Offset: s.Offset, Size: s.FileSize, EntSize: s.Entsize, Flags: SectionFlags(s.Flags, f.Machine),
			Link: s.Link, Info: s.Info, Alignment: s.Addralign}
		if s.Flags&elf.SHF_COMPRESSED == 0 && s.Type == elf.SHT_NOBITS {
			out[i].Size = s.Size
		}
	}
	return out
}

// Symbol is one symbol table entry, readelf -s -W's columns.
type Symbol struct {
	Num        int
	Value      uint64
	Size       uint64
	Type       string // readelf's: NOTYPE OBJECT FUNC SECTION FILE COMMON TLS IFUNC
	Bind       string // LOCAL GLOBAL WEAK UNIQUE
	Visibility string // DEFAULT INTERNAL HIDDEN PROTECTED
	Ndx        string // UND, ABS, COM or the section index
	Name       string
	Version    string `json:",omitempty"` // the symbol version (.gnu.version), "@VER" or "@@VER" for a default one
}

// SymbolTable is one symbol table section.
type SymbolTable struct {
	Section int
	Name    string
	Symbols []Symbol
}

// SymbolTables returns every SHT_SYMTAB and SHT_DYNSYM table of f, in
// section order, .dynsym entries with their versions. Errors are those of
// [elfobj.File.Symbols].
func SymbolTables(f *elfobj.File) ([]SymbolTable, error) {
	var out []SymbolTable
	for i, s := range f.Sections {
		if s.Type != elf.SHT_SYMTAB && s.Type != elf.SHT_DYNSYM {
			continue
		}
		t, err := f.Symbols(i)
		if err != nil {
			return out, err
		}
		var vers []string
		if s.Type == elf.SHT_DYNSYM {
			vers = versions(f, t.Len(), func(i int) string { s, _ := t.Name(i); return s })
		}
		st := SymbolTable{Section: i, Name: s.Name, Symbols: make([]Symbol, t.Len())}
		for j := range st.Symbols {
			y := t.Sym(j)
			name, err := t.Name(j)
			if err != nil {
				return out, err
			}
			ndx := fmt.Sprint(uint32(y.Section))
			switch y.Section {
			case elf.SHN_UNDEF:
				ndx = "UND"
			case elf.SHN_ABS:
				ndx = "ABS"
			case elf.SHN_COMMON:
				ndx = "COM"
			default:
				if k, ok := t.SectionOf(j); ok {
					ndx = fmt.Sprint(k)
				}
			}
			sym := Symbol{Num: j, Value: y.Value, Size: y.Size, Type: symType(y.Type()), Bind: symBind(y.Bind()),
				Visibility: strings.TrimPrefix(y.Visibility().String(), "STV_"), Ndx: ndx, Name: name}
			if name == "" && y.Type() == elf.STT_SECTION {
				// readelf (binutils 2.40 and later) names a section
				// symbol by its section.
				if k, ok := t.SectionOf(j); ok && k > 0 && k < len(f.Sections) {
					name = f.Sections[k].Name
					sym.Name = name
				}
			}
			if j < len(vers) {
				sym.Version = vers[j]
			}
			st.Symbols[j] = sym
		}
		out = append(out, st)
	}
	return out, nil
}

func symType(t elf.SymType) string {
	switch t {
	case elf.STT_GNU_IFUNC:
		return "IFUNC"
	case elf.STT_COMMON:
		return "COMMON"
	}
	if s := t.String(); strings.HasPrefix(s, "STT_") {
		return strings.TrimPrefix(s, "STT_")
	}
	return fmt.Sprintf("<%d>", uint8(t))
}

func symBind(b elf.SymBind) string {
	if b == 10 {
		return "UNIQUE" // STB_GNU_UNIQUE
	}
	if s := b.String(); strings.HasPrefix(s, "STB_") {
		return strings.TrimPrefix(s, "STB_")
	}
	return fmt.Sprintf("<%d>", uint8(b))
}
