package inspect

import (
	"debug/elf"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/elfimage/elfimage/elfobj"
)

// Note is one note of an SHT_NOTE section (or, in a file without
// sections, a PT_NOTE segment), readelf -n's columns.
type Note struct {
	Where       string // the section's name, or "PT_NOTE N"
	Owner       string
	DataSize    int    // n_descsz, bytes
	Type        string // readelf's name ("NT_GNU_BUILD_ID") or the number
	Description string // decoded where readelf decodes it, hexadecimal otherwise
}

// Notes returns the notes of f's SHT_NOTE sections, or of its PT_NOTE
// segments when it has no section table. Errors are those of
// [elfobj.NoteReader], after the notes read before them.
func Notes(f *elfobj.File) ([]Note, error) {
	var out []Note
	add := func(where string, r elfobj.NoteReader) error {
		for n, ok := r.Next(); ok; n, ok = r.Next() {
			out = append(out, decodeNote(f, where, n))
		}
		return r.Err()
	}
	any := false
	for i, s := range f.Sections {
		if s.Type != elf.SHT_NOTE {
			continue
		}
		any = true
		r, err := f.SectionNotes(i)
		if err == nil {
			err = add(s.Name, r)
		}
		if err != nil {
			return out, err
		}
	}
	if any || len(f.Sections) > 0 {
		return out, nil
	}
	for i, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		r, err := f.ProgNotes(i)
		if err == nil {
			err = add(fmt.Sprintf("PT_NOTE %d", i), r)
		}
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

func decodeNote(f *elfobj.File, where string, n elfobj.Note) Note {
	owner := string(n.Name)
	out := Note{Where: where, Owner: owner, DataSize: len(n.Desc), Type: fmt.Sprintf("%#x", uint32(n.Type)),
		Description: hex.EncodeToString(n.Desc)}
	bo := f.ByteOrder
	switch owner {
	case "GNU":
		switch n.Type {
		case 1:
			out.Type = "NT_GNU_ABI_TAG"
			if len(n.Desc) >= 16 {
				os := map[uint32]string{0: "Linux", 1: "Hurd", 2: "Solaris", 3: "FreeBSD"}[bo.Uint32(n.Desc)]
				out.Description = fmt.Sprintf("OS: %s, ABI: %d.%d.%d", os, bo.Uint32(n.Desc[4:]), bo.Uint32(n.Desc[8:]), bo.Uint32(n.Desc[12:]))
			}
		case 2:
			out.Type = "NT_GNU_HWCAP"
		case 3:
			out.Type = "NT_GNU_BUILD_ID"
			out.Description = "Build ID: " + out.Description
		case 4:
			out.Type = "NT_GNU_GOLD_VERSION"
			out.Description = "Version: " + strings.TrimRight(string(n.Desc), "\x00")
		case 5:
			out.Type = "NT_GNU_PROPERTY_TYPE_0"
			out.Description = gnuProperties(f, n.Desc)
		}
	case "Go":
		if n.Type == 4 {
			out.Type = "GO BUILDID"
			out.Description = "Build ID: " + strings.TrimRight(string(n.Desc), "\x00")
		}
	case "stapsdt":
		if n.Type == 3 {
			out.Type = "NT_STAPSDT"
		}
	case "FDO":
		if n.Type == 0xcafe1a7e {
			out.Type = "FDO_PACKAGING_METADATA"
			out.Description = "Packaging Metadata: " + strings.TrimRight(string(n.Desc), "\x00")
		}
	case "CORE", "LINUX":
		if s, ok := coreNotes[uint32(n.Type)]; ok {
			out.Type = s
		}
	}
	return out
}

// gnuProperties decodes an NT_GNU_PROPERTY_TYPE_0 descriptor (the
// x86-64 and AArch64 psABIs' program properties) as pr_type=value pairs,
// naming the x86 ISA levels and feature bits readelf names most often.
func gnuProperties(f *elfobj.File, d []byte) string {
	bo := f.ByteOrder
	align := 4
	if f.Class == elf.ELFCLASS64 {
		align = 8
	}
	var parts []string
	for len(d) >= 8 && len(parts) < 1024 {
		typ, sz := bo.Uint32(d), int(bo.Uint32(d[4:]))
		d = d[8:]
		if sz > len(d) {
			parts = append(parts, fmt.Sprintf("<corrupt length %d>", sz))
			break
		}
		v := d[:sz]
		val := hex.EncodeToString(v)
		if sz == 4 {
			val = fmt.Sprintf("%#x", bo.Uint32(v))
		}
		name := fmt.Sprintf("%#x", typ)
		switch {
		case typ == 0xc0000002 && f.Machine == elf.EM_X86_64:
			name = "x86 feature"
		case typ == 0xc0008002:
			name = "x86 ISA needed"
		case typ == 0xc0010001:
			name = "x86 feature used"
		case typ == 0xc0010002:
			name = "x86 ISA used"
		case typ == 0xc0000000 && f.Machine == elf.EM_AARCH64:
			name = "AArch64 feature"
		case typ == 1:
			name = "stack size"
		case typ == 2:
			name = "no copy on protected"
		}
		parts = append(parts, name+": "+val)
		pad := (sz + align - 1) &^ (align - 1)
		if pad > len(d) {
			break
		}
		d = d[pad:]
	}
	return strings.Join(parts, ", ")
}

// Dyn is one dynamic section entry, readelf -d's columns.
type Dyn struct {
	TagValue uint64 // d_tag
	Tag      string // readelf's name ("NEEDED", from debug/elf's without DT_), or the number
	Value    uint64
	Name     string `json:",omitempty"` // the string a NEEDED, SONAME, RPATH or RUNPATH entry names
}

// Dynamic returns the entries of f's SHT_DYNAMIC section (or PT_DYNAMIC
// segment when it has no section table) up to and including DT_NULL.
// Strings are read from the section's sh_link string table.
func Dynamic(f *elfobj.File) ([]Dyn, error) {
	var data, strs []byte
	if i := f.FindSectionType(elf.SHT_DYNAMIC); i >= 0 {
		b, err := f.SectionData(i)
		if err != nil {
			return nil, err
		}
		data = b
		if l := int(f.Sections[i].Link); l > 0 && l < len(f.Sections) {
			strs, _ = f.SectionData(l)
		}
	} else if len(f.Sections) == 0 {
		for i, p := range f.Progs {
			if p.Type == elf.PT_DYNAMIC {
				b, err := f.ProgData(i)
				if err != nil {
					return nil, err
				}
				data = b
			}
		}
	}
	if data == nil {
		return nil, nil
	}
	sz := f.DynSize()
	var out []Dyn
	for off := 0; off+sz <= len(data); off += sz {
		tag, val := f.DecodeDyn(data[off:])
		d := Dyn{TagValue: uint64(tag), Tag: dynTagName(tag), Value: val}
		switch tag {
		case elf.DT_NEEDED, elf.DT_SONAME, elf.DT_RPATH, elf.DT_RUNPATH:
			if val < uint64(len(strs)) {
				s := strs[val:]
				if k := strings.IndexByte(string(s), 0); k >= 0 {
					s = s[:k]
				}
				d.Name = string(s)
			}
		}
		out = append(out, d)
		if tag == elf.DT_NULL {
			break
		}
	}
	return out, nil
}

// Reloc is one relocation entry with its symbol, readelf -r's columns.
type Reloc struct {
	Offset      uint64
	Info        uint64
	Type        string // elfobj.RelocTypeName's name
	SymValue    uint64
	SymName     string
	Addend      int64
	HasAddend   bool
	SymbolIndex uint32
}

// RelocSection is one SHT_REL, SHT_RELA or SHT_RELR section.
type RelocSection struct {
	Section int
	Name    string
	Offset  uint64 // of the section in the file
	Entries []Reloc
	// Words and RelrOffsets are an SHT_RELR section's (gABI "Relative
	// relocation"): its address and bitmap words, and the places they
	// relocate, in order.
	Words       int      `json:",omitempty"`
	RelrOffsets []uint64 `json:",omitempty"`
}

// maxRelr bounds the places one SHT_RELR section may name (each bitmap
// word names up to 63): 2^26.
const maxRelr = 1 << 26

// Relocations returns the entries of every SHT_REL and SHT_RELA section
// of f, with the symbols of their sh_link symbol table (a section symbol
// takes its section's name, as readelf prints it). Errors are those of
// the section and symbol readers.
func Relocations(f *elfobj.File) ([]RelocSection, error) {
	var out []RelocSection
	for i, s := range f.Sections {
		if s.Type == shtRELR {
			rs, err := relr(f, i)
			out = append(out, rs)
			if err != nil {
				return out, err
			}
			continue
		}
		if s.Type != elf.SHT_REL && s.Type != elf.SHT_RELA {
			continue
		}
		rela := s.Type == elf.SHT_RELA
		data, err := f.SectionData(i)
		if err != nil {
			return out, err
		}
		var syms *elfobj.SymbolTable
		if l := int(s.Link); l > 0 && l < len(f.Sections) {
			if t := f.Sections[l].Type; t == elf.SHT_SYMTAB || t == elf.SHT_DYNSYM {
				if syms, err = f.Symbols(l); err != nil {
					return out, err
				}
			}
		}
		rs := RelocSection{Section: i, Name: s.Name, Offset: s.Offset}
		sz := f.RelSize(rela)
		for off := 0; off+sz <= len(data); off += sz {
			r := f.DecodeRel(data[off:], rela)
			e := Reloc{Offset: r.Off, Type: relocName(f.Machine, r.Type), Addend: r.Addend, HasAddend: rela, SymbolIndex: r.Sym}
			if f.Class == elf.ELFCLASS64 {
				e.Info = uint64(r.Sym)<<32 | uint64(r.Type)
			} else {
				e.Info = uint64(r.Sym)<<8 | uint64(r.Type&0xff)
			}
			if syms != nil && r.Sym != 0 && int(r.Sym) < syms.Len() {
				y := syms.Sym(int(r.Sym))
				e.SymValue = y.Value
				e.SymName, _ = syms.Name(int(r.Sym))
				if y.Type() == elf.STT_SECTION && e.SymName == "" {
					if k, ok := syms.SectionOf(int(r.Sym)); ok && k < len(f.Sections) {
						e.SymName = f.Sections[k].Name
					}
				}
			}
			rs.Entries = append(rs.Entries, e)
		}
		out = append(out, rs)
	}
	return out, nil
}

// dynTagName names a dynamic tag as readelf does, with the gABI's RELR
// tags debug/elf does not name.
func dynTagName(t elf.DynTag) string {
	switch t {
	case 35:
		return "RELRSZ"
	case 36:
		return "RELR"
	case 37:
		return "RELRENT"
	}
	return strings.TrimPrefix(t.String(), "DT_")
}

// relocName names a relocation type as readelf does: elfobj's (debug/elf's)
// names, with the psABIs' R_X86_64_JUMP_SLOT and R_386_JUMP_SLOT for
// debug/elf's JMP_SLOT.
func relocName(m elf.Machine, t uint32) string {
	s := elfobj.RelocTypeName(m, t)
	if (m == elf.EM_X86_64 || m == elf.EM_386) && strings.HasSuffix(s, "_JMP_SLOT") {
		s = strings.TrimSuffix(s, "_JMP_SLOT") + "_JUMP_SLOT"
	}
	return s
}

// relr decodes SHT_RELR section i: an even word is the address of the
// next place (and the base after it); an odd word is a bitmap of the
// word-size places that follow the base, bit k naming base + (k-1) ×
// word size, after which the base moves past all of them.
func relr(f *elfobj.File, i int) (RelocSection, error) {
	s := f.Sections[i]
	rs := RelocSection{Section: i, Name: s.Name, Offset: s.Offset}
	data, err := f.SectionData(i)
	if err != nil {
		return rs, err
	}
	w := 8
	if f.Class == elf.ELFCLASS32 {
		w = 4
	}
	word := func(b []byte) uint64 {
		if w == 4 {
			return uint64(f.ByteOrder.Uint32(b))
		}
		return f.ByteOrder.Uint64(b)
	}
	bits := uint(8*w - 1)
	var base uint64
	for off := 0; off+w <= len(data); off += w {
		rs.Words++
		v := word(data[off:])
		if v&1 == 0 {
			rs.RelrOffsets = append(rs.RelrOffsets, v)
			base = v + uint64(w)
		} else {
			for k := uint(1); k <= bits; k++ {
				if v>>k&1 != 0 {
					rs.RelrOffsets = append(rs.RelrOffsets, base+uint64(k-1)*uint64(w))
				}
			}
			base += uint64(bits) * uint64(w)
		}
		if len(rs.RelrOffsets) > maxRelr {
			return rs, fmt.Errorf("%s: more than %d relative relocations", s.Name, maxRelr)
		}
	}
	return rs, nil
}

// shtRELR is SHT_RELR (gABI), which debug/elf does not name.
const shtRELR elf.SectionType = 19

// coreNotes names the note types of core files (owners "CORE" and
// "LINUX"; Linux's include/uapi/linux/elf.h), which debug/elf names only
// in part.
var coreNotes = map[uint32]string{
	1: "NT_PRSTATUS", 2: "NT_FPREGSET", 3: "NT_PRPSINFO", 4: "NT_TASKSTRUCT", 6: "NT_AUXV",
	0x46494c45: "NT_FILE", 0x53494749: "NT_SIGINFO", 0x46e62b7f: "NT_PRXFPREG",
	0x200: "NT_386_TLS", 0x201: "NT_386_IOPERM", 0x202: "NT_X86_XSTATE", 0x204: "NT_X86_SHSTK",
	0x400: "NT_ARM_VFP", 0x401: "NT_ARM_TLS", 0x402: "NT_ARM_HW_BREAK", 0x403: "NT_ARM_HW_WATCH",
	0x404: "NT_ARM_SYSTEM_CALL", 0x405: "NT_ARM_SVE", 0x406: "NT_ARM_PAC_MASK", 0x409: "NT_ARM_TAGGED_ADDR_CTRL",
	0x900: "NT_RISCV_CSR", 0x100: "NT_PPC_VMX", 0x102: "NT_PPC_VSX", 0x300: "NT_S390_HIGH_GPRS",
}
