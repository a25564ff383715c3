package procview

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sort"

	"github.com/elfimage/elfimage/dwarf"
)

// ELF constants used here (System V gABI, "ELF Header", "Program Header",
// "Symbol Table").
const (
	ptLoad     = 1
	pfX        = 1
	emX86_64   = 62
	ehSize64   = 64
	phentSize  = 56
	symentSize = 24
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

// ProgHeaders reads the ELF64 little-endian header and program headers
// of the file (or memory image) r. Only x86-64 (EM_X86_64) is accepted, the
// only machine Stacks unwinds. Errors are *dwarf.FormatError with Section
// "ELF header" or "program headers" naming the offset and field, or wrap
// r's error. Cost: two reads; at most MaxProgramHeaders headers
// (56 bytes each) are allocated.
func ProgHeaders(r io.ReaderAt) ([]ProgHeader, error) {
	ferr := func(off uint64, field, msg string) error {
		return &dwarf.FormatError{Section: "ELF header", Offset: off, Field: field, Msg: msg}
	}
	var h [ehSize64]byte
	if n, err := r.ReadAt(h[:], 0); n < len(h) {
		return nil, ferr(0, "e_ident", fmt.Sprintf("short ELF header (%d bytes): %v", n, err))
	}
	if !bytes.HasPrefix(h[:], []byte("\x7fELF")) {
		return nil, ferr(0, "e_ident", "no ELF magic")
	}
	if h[4] != 2 || h[5] != 1 {
		return nil, ferr(4, "e_ident", fmt.Sprintf("class %d data %d: only little-endian ELF64 is supported", h[4], h[5]))
	}
	le := binary.LittleEndian
	if m := le.Uint16(h[18:]); m != emX86_64 {
		return nil, ferr(18, "e_machine", fmt.Sprintf("machine %d: only x86-64 is supported", m))
	}
	phoff := le.Uint64(h[32:])
	entsize, num := le.Uint16(h[54:]), le.Uint16(h[56:])
	if num == 0 {
		return nil, nil
	}
	if entsize != phentSize {
		return nil, ferr(54, "e_phentsize", fmt.Sprintf("%d, want %d", entsize, phentSize))
	}
	if num > MaxProgramHeaders || num == 0xffff {
		return nil, ferr(56, "e_phnum", fmt.Sprintf("%d program headers (at most %d read)", num, MaxProgramHeaders))
	}
	size := uint64(num) * phentSize
	if phoff > 1<<62 || phoff+size > 1<<62 {
		return nil, ferr(32, "e_phoff", fmt.Sprintf("%#x out of range", phoff))
	}
	p := make([]byte, size)
	if n, err := r.ReadAt(p, int64(phoff)); uint64(n) < size {
		return nil, &dwarf.FormatError{Section: "program headers", Offset: phoff, Field: "e_phoff", Msg: fmt.Sprintf("%d program headers do not fit (%d of %d bytes read): %v", num, n, size, err)}
	}
	out := make([]ProgHeader, num)
	for i := range out {
		q := p[i*phentSize:]
		out[i] = ProgHeader{
			Type: le.Uint32(q), Flags: le.Uint32(q[4:]),
			Offset: le.Uint64(q[8:]), Vaddr: le.Uint64(q[16:]),
			Filesz: le.Uint64(q[32:]), Memsz: le.Uint64(q[40:]), Align: le.Uint64(q[48:]),
		}
	}
	return out, nil
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

// LookupSymbol returns the value of the first symbol named name in an
// ELF64 little-endian symbol table symtab (.symtab or .dynsym contents,
// 24-byte Elf64_Sym entries) whose names are in strtab, with a defined
// section (st_shndx != SHN_UNDEF). ok is false when there is none. Names
// outside strtab are skipped. Cost: O(len(symtab)); no allocation.
func LookupSymbol(symtab, strtab []byte, name string) (value uint64, ok bool) {
	le := binary.LittleEndian
	for i := 0; i+symentSize <= len(symtab); i += symentSize {
		e := symtab[i : i+symentSize]
		off := uint64(le.Uint32(e))
		if le.Uint16(e[6:]) == 0 || off >= uint64(len(strtab)) {
			continue
		}
		s := strtab[off:]
		if len(s) > len(name) && s[len(name)] == 0 && string(s[:len(name)]) == name {
			return le.Uint64(e[8:]), true
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
	le := binary.LittleEndian
	var out []symEntry
	for i := 0; i+symentSize <= len(symtab) && len(out) < maxSymbols; i += symentSize {
		e := symtab[i : i+symentSize]
		typ := e[4] & 0xf
		if (typ != 2 && typ != 0) || le.Uint16(e[6:]) == 0 {
			continue
		}
		off := uint64(le.Uint32(e))
		if off >= uint64(len(strtab)) {
			continue
		}
		s := strtab[off:]
		if j := bytes.IndexByte(s, 0); j > 0 {
			out = append(out, symEntry{le.Uint64(e[8:]), le.Uint64(e[16:]), string(s[:j])})
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
