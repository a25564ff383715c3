package procview

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/elfobj"
	"github.com/elfimage/elfimage/formaterr"
)

// ELF constants used here (System V gABI, "Program Header").
const (
	ptLoad = uint32(elf.PT_LOAD)
	pfX    = uint32(elf.PF_X)
	// MaxProgramHeaders bounds the program headers read from one file.
	MaxProgramHeaders = 4096
)

// ProgHeader is one ELF64 program header (gABI "Program Header"), the
// fields the load bias and a module's range need.
type ProgHeader struct {
	Type, Flags          uint32
	Offset, Vaddr        uint64
	Filesz, Memsz, Align uint64
}

// readHeader reads the ELF header of r with elfobj and accepts only
// little-endian ELF64; errors are *formaterr.Error with the given
// Source on e_ident.
func readHeader(r io.ReaderAt, section, what string) (elfobj.Header, error) {
	h, err := elfobj.ReadHeader(r)
	if errors.Is(err, elfobj.ErrNotELF) {
		return h, &formaterr.Error{Source: section, Offset: 0, Field: "e_ident", Msg: "no ELF magic: not an ELF file", Err: err}
	}
	if err != nil {
		return h, err
	}
	if h.Class != elf.ELFCLASS64 || h.Data != elf.ELFDATA2LSB {
		return h, &formaterr.Error{Source: section, Offset: uint64(elf.EI_CLASS), Field: "e_ident",
			Msg: fmt.Sprintf("class %d data %d: only little-endian ELF64 %s are supported", h.Class, h.Data, what)}
	}
	return h, nil
}

// ProgHeaders reads the ELF64 little-endian header and program headers
// of the file (or memory image) r, with package elfobj (e_phnum PN_XNUM
// takes the count from section header 0). x86-64 (EM_X86_64) and AArch64
// (EM_AARCH64) files are accepted, the machines a View unwinds, whatever
// the host's. Errors are *formaterr.Error
// with Source "ELF header" naming the offset and field, or wrap r's
// error. Cost: two reads (three for PN_XNUM); at most MaxProgramHeaders
// headers are allocated.
func ProgHeaders(r io.ReaderAt) ([]ProgHeader, error) {
	_, phdrs, err := machineProgHeaders(r)
	return phdrs, err
}

// machineProgHeaders is ProgHeaders that also returns the file's machine.
func machineProgHeaders(r io.ReaderAt) (elf.Machine, []ProgHeader, error) {
	h, err := readHeader(r, "ELF header", "files")
	if err != nil {
		return 0, nil, err
	}
	if arch.ForMachine(h.Machine) == nil {
		return 0, nil, &formaterr.Error{Source: "ELF header", Offset: 18, Field: "e_machine", Msg: fmt.Sprintf("machine %v: only x86-64 and AArch64 are supported", h.Machine)}
	}
	phdrs, err := h.ReadProgs(r, -1, MaxProgramHeaders)
	if err != nil || len(phdrs) == 0 {
		return h.Machine, nil, err
	}
	return h.Machine, progHeaders(phdrs), nil
}

func progHeaders(phdrs []elf.ProgHeader) []ProgHeader {
	out := make([]ProgHeader, len(phdrs))
	for i, p := range phdrs {
		out[i] = ProgHeader{Type: uint32(p.Type), Flags: uint32(p.Flags), Offset: p.Off, Vaddr: p.Vaddr,
			Filesz: p.Filesz, Memsz: p.Memsz, Align: p.Align}
	}
	return out
}

// LoadBias returns the load bias (run-time address minus link-time
// address) of a mapping of the file described by phdrs that starts at
// run-time address start and maps the file from offset off (the fields of
// a /proc/PID/maps line): bias = start - off - (p_vaddr - p_offset) for the
// PT_LOAD segment whose file range [p_offset, p_offset+p_filesz) holds off,
// the executable one first, rounded to pages as the loader maps them
// (gABI "Program Loading"). ok is false when no PT_LOAD holds off. Cost:
// O(len(phdrs)).
func LoadBias(phdrs []ProgHeader, start, off uint64) (bias uint64, ok bool) {
	for pass := 0; pass < 2; pass++ {
		for _, p := range phdrs {
			if p.Type != ptLoad || (pass == 0 && p.Flags&pfX == 0) {
				continue
			}
			lo := p.Offset &^ 0xfff
			if off < lo || off-lo >= p.Filesz+(p.Offset-lo) {
				continue
			}
			return start - off - (p.Vaddr - p.Offset), true
		}
	}
	return 0, false
}

// symbolTable decodes the ELF64 little-endian symbol table symtab (a
// partial entry at the end is ignored) with names in strtab.
func symbolTable(symtab, strtab []byte) *elfobj.SymbolTable {
	t, _ := elfobj.NewSymbolTable(elf.ELFCLASS64, elf.ELFDATA2LSB, ".symtab", symtab[:len(symtab)/elf.Sym64Size*elf.Sym64Size], strtab)
	return t
}

// LookupSymbol returns the value of the first symbol named name in an
// ELF64 little-endian symbol table symtab (.symtab or .dynsym contents,
// 24-byte Elf64_Sym entries, decoded by elfobj) whose names are in
// strtab, with a defined section (st_shndx != SHN_UNDEF). ok is false when
// there is none. Names outside strtab are skipped. Cost: O(len(symtab));
// one allocation.
func LookupSymbol(symtab, strtab []byte, name string) (value uint64, ok bool) {
	t := symbolTable(symtab, strtab)
	for i := range t.Len() {
		s := t.Sym(i)
		if s.Section == elf.SHN_UNDEF {
			continue
		}
		if n, err := t.NameBytes(i); err == nil && string(n) == name {
			return s.Value, true
		}
	}
	return 0, false
}

// symEntry is one function symbol: [value, value+size), size 0 reaching
// the next symbol.
type symEntry struct {
	value, size uint64
	name        string
}

// maxSymbols bounds the symbols indexed for one module.
const maxSymbols = 1 << 22

// funcSymbols indexes the STT_FUNC and STT_NOTYPE symbols of a defined
// section in symtab (24-byte Elf64_Sym entries, names in strtab), sorted
// by value. Cost: O(n log n); allocates the index and the names.
func funcSymbols(symtab, strtab []byte) []symEntry {
	t := symbolTable(symtab, strtab)
	var out []symEntry
	for i := 0; i < t.Len() && len(out) < maxSymbols; i++ {
		s := t.Sym(i)
		if (s.Type() != elf.STT_FUNC && s.Type() != elf.STT_NOTYPE) || s.Section == elf.SHN_UNDEF {
			continue
		}
		if n, err := t.NameBytes(i); err == nil && len(n) > 0 {
			out = append(out, symEntry{s.Value, s.Size, string(n)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].value < out[j].value })
	return out
}

// lookupSymbol returns the name of the symbol covering addr in syms
// (sorted by funcSymbols); of several at one address the largest wins.
func lookupSymbol(syms []symEntry, addr uint64) (string, bool) {
	i := sort.Search(len(syms), func(i int) bool { return syms[i].value > addr }) - 1
	if i < 0 {
		return "", false
	}
	v := syms[i].value
	best := -1
	for j := i; j >= 0 && syms[j].value == v; j-- {
		if best < 0 || syms[j].size > syms[best].size {
			best = j
		}
	}
	s := syms[best]
	if s.size != 0 && addr-s.value >= s.size {
		return "", false
	}
	return s.name, true
}
