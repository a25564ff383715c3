package elfobj

import (
	"debug/elf"
	"fmt"
	"strings"
)

// How one relocation type computes and stores its value (psABI relocation
// tables): S is the symbol's value, A the addend, P the place (the
// relocated section's sh_addr plus r_offset), V the value already at the
// place.
type relOp uint8

const (
	relOpNone relOp = iota // nothing
	relOpAbs               // S + A
	relOpPC                // S + A - P
	relOpAdd               // V + S + A
	relOpSub               // V - (S + A)
)

// relRange is what a 32-bit (or narrower) result must fit in, in an ELF64
// file (ELF32 arithmetic is modulo 2^32, as the field is).
type relRange uint8

const (
	fitAny    relRange = iota // truncated to the field (the full-width fields, and label arithmetic)
	fitU32                    // [0, 2^32)
	fitS32                    // [-2^31, 2^31)
	fitEither                 // [-2^31, 2^32): AArch64's ABS32 and PREL32
)

type relHow struct {
	op    relOp
	size  uint8 // bytes written: 1, 2, 4 or 8; 0 with bits6 set for the low 6 bits of a byte
	bits6 bool
	fit   relRange
}

var (
	relNone  = relHow{op: relOpNone}
	relAbs64 = relHow{op: relOpAbs, size: 8}
	relPC64  = relHow{op: relOpPC, size: 8}
)

func relAbs32(fit relRange) relHow { return relHow{op: relOpAbs, size: 4, fit: fit} }
func relPC32(fit relRange) relHow  { return relHow{op: relOpPC, size: 4, fit: fit} }

// relocTypes lists, per machine, the relocation types a reader of debug
// sections and .eh_frame meets in relocatable objects, and how to apply
// them (the machines' psABI documents: x86-64 psABI 4.4, i386 psABI
// "Relocation Types", ELF for the Arm 64-bit Architecture 5.7, ELF for the
// Arm Architecture 5.6, the RISC-V ELF psABI "Relocations", and the Power,
// s390x and SPARC ABIs). Types that need a linker (GOT, PLT, TLS models
// other than the module offset) are not listed: applying them is an error.
var relocTypes = map[elf.Machine]map[uint32]relHow{
	elf.EM_X86_64: {
		uint32(elf.R_X86_64_NONE):     relNone,
		uint32(elf.R_X86_64_64):       relAbs64,
		uint32(elf.R_X86_64_PC32):     relPC32(fitS32),
		uint32(elf.R_X86_64_32):       relAbs32(fitU32),
		uint32(elf.R_X86_64_32S):      relAbs32(fitS32),
		uint32(elf.R_X86_64_PC64):     relPC64,
		uint32(elf.R_X86_64_DTPOFF64): relAbs64,
		uint32(elf.R_X86_64_DTPOFF32): relAbs32(fitS32),
	},
	elf.EM_386: {
		uint32(elf.R_386_NONE):         relNone,
		uint32(elf.R_386_32):           relAbs32(fitAny),
		uint32(elf.R_386_PC32):         relPC32(fitAny),
		uint32(elf.R_386_TLS_LDO_32):   relAbs32(fitAny),
		uint32(elf.R_386_TLS_DTPOFF32): relAbs32(fitAny),
	},
	elf.EM_AARCH64: {
		uint32(elf.R_AARCH64_NONE):         relNone,
		uint32(elf.R_AARCH64_NULL):         relNone,
		uint32(elf.R_AARCH64_ABS64):        relAbs64,
		uint32(elf.R_AARCH64_ABS32):        relAbs32(fitEither),
		uint32(elf.R_AARCH64_PREL64):       relPC64,
		uint32(elf.R_AARCH64_PREL32):       relPC32(fitEither),
		uint32(elf.R_AARCH64_TLS_DTPREL64): relAbs64,
	},
	elf.EM_ARM: {
		uint32(elf.R_ARM_NONE):      relNone,
		uint32(elf.R_ARM_ABS32):     relAbs32(fitAny),
		uint32(elf.R_ARM_REL32):     relPC32(fitAny),
		uint32(elf.R_ARM_TLS_LDO32): relAbs32(fitAny),
	},
	elf.EM_RISCV: {
		uint32(elf.R_RISCV_NONE):     relNone,
		uint32(elf.R_RISCV_64):       relAbs64,
		uint32(elf.R_RISCV_32):       relAbs32(fitEither),
		uint32(elf.R_RISCV_32_PCREL): relPC32(fitS32),
		uint32(elf.R_RISCV_ADD8):     {op: relOpAdd, size: 1},
		uint32(elf.R_RISCV_ADD16):    {op: relOpAdd, size: 2},
		uint32(elf.R_RISCV_ADD32):    {op: relOpAdd, size: 4},
		uint32(elf.R_RISCV_ADD64):    {op: relOpAdd, size: 8},
		uint32(elf.R_RISCV_SUB8):     {op: relOpSub, size: 1},
		uint32(elf.R_RISCV_SUB16):    {op: relOpSub, size: 2},
		uint32(elf.R_RISCV_SUB32):    {op: relOpSub, size: 4},
		uint32(elf.R_RISCV_SUB64):    {op: relOpSub, size: 8},
		uint32(elf.R_RISCV_SUB6):     {op: relOpSub, bits6: true},
		uint32(elf.R_RISCV_SET6):     {op: relOpAbs, bits6: true},
		uint32(elf.R_RISCV_SET8):     {op: relOpAbs, size: 1},
		uint32(elf.R_RISCV_SET16):    {op: relOpAbs, size: 2},
		uint32(elf.R_RISCV_SET32):    {op: relOpAbs, size: 4},
	},
	elf.EM_PPC64: {
		uint32(elf.R_PPC64_NONE):     relNone,
		uint32(elf.R_PPC64_ADDR64):   relAbs64,
		uint32(elf.R_PPC64_ADDR32):   relAbs32(fitEither),
		uint32(elf.R_PPC64_REL64):    relPC64,
		uint32(elf.R_PPC64_REL32):    relPC32(fitS32),
		uint32(elf.R_PPC64_DTPREL64): relAbs64,
	},
	elf.EM_PPC: {
		uint32(elf.R_PPC_NONE):     relNone,
		uint32(elf.R_PPC_ADDR32):   relAbs32(fitAny),
		uint32(elf.R_PPC_REL32):    relPC32(fitAny),
		uint32(elf.R_PPC_DTPREL32): relAbs32(fitAny),
	},
	elf.EM_S390: {
		uint32(elf.R_390_NONE):      relNone,
		uint32(elf.R_390_64):        relAbs64,
		uint32(elf.R_390_32):        relAbs32(fitEither),
		uint32(elf.R_390_PC64):      relPC64,
		uint32(elf.R_390_PC32):      relPC32(fitS32),
		uint32(elf.R_390_TLS_LDO64): relAbs64,
		uint32(elf.R_390_TLS_LDO32): relAbs32(fitEither),
	},
	elf.EM_SPARCV9: {
		uint32(elf.R_SPARC_NONE):   relNone,
		uint32(elf.R_SPARC_64):     relAbs64,
		uint32(elf.R_SPARC_UA64):   relAbs64,
		uint32(elf.R_SPARC_32):     relAbs32(fitEither),
		uint32(elf.R_SPARC_UA32):   relAbs32(fitEither),
		uint32(elf.R_SPARC_DISP32): relPC32(fitS32),
	},
	elf.EM_MIPS: { // ELF32 only: ELF64 MIPS packs three types into r_info
		uint32(elf.R_MIPS_NONE):         relNone,
		uint32(elf.R_MIPS_32):           relAbs32(fitAny),
		uint32(elf.R_MIPS_PC32):         relPC32(fitAny),
		uint32(elf.R_MIPS_TLS_DTPREL32): relAbs32(fitAny),
	},
}

// RelocTypeName names relocation type t of machine m in debug/elf's
// spelling ("R_X86_64_PC32"), or gives the number for machines debug/elf
// has no names for.
func RelocTypeName(m elf.Machine, t uint32) string {
	switch m {
	case elf.EM_X86_64:
		return elf.R_X86_64(t).String()
	case elf.EM_386:
		return elf.R_386(t).String()
	case elf.EM_AARCH64:
		return elf.R_AARCH64(t).String()
	case elf.EM_ARM:
		return elf.R_ARM(t).String()
	case elf.EM_RISCV:
		return elf.R_RISCV(t).String()
	case elf.EM_PPC64:
		return elf.R_PPC64(t).String()
	case elf.EM_PPC:
		return elf.R_PPC(t).String()
	case elf.EM_S390:
		return elf.R_390(t).String()
	case elf.EM_SPARCV9:
		return elf.R_SPARC(t).String()
	case elf.EM_MIPS:
		return elf.R_MIPS(t).String()
	}
	return fmt.Sprintf("relocation type %d", t)
}

// Relocated returns the contents of section i ([File.SectionData]: decompressed)
// with the relocations of an ET_REL file applied, as a reader of a
// relocatable object's DWARF or .eh_frame must see them before decoding
// (an unrelocated DW_FORM_strp reads offset 0 of .debug_str). The
// relocations are those of every SHT_RELA and SHT_REL section whose sh_info
// is i, against the symbol table its sh_link names, applied in order to a
// copy of the data (SectionData itself is not changed). A symbol's value is its
// st_value plus its section's sh_addr (0 in objects), 0 for undefined and
// common symbols, st_value for SHN_ABS; the place is i's sh_addr plus
// r_offset. SHT_REL entries take their addend from the place. For other
// file types, and for sections without relocations, the result is SectionData's.
//
// Supported relocation types (the ones compilers emit in debug sections and
// .eh_frame; see relocTypes): x86-64 R_X86_64_64, 32, 32S, PC32, PC64,
// DTPOFF32, DTPOFF64; i386 R_386_32, PC32, TLS_LDO_32, TLS_DTPOFF32;
// AArch64 ABS64, ABS32, PREL64, PREL32, TLS_DTPREL64; Arm ABS32, REL32,
// TLS_LDO32; RISC-V 32, 64, 32_PCREL and the ADD, SUB and SET label
// arithmetic; Power, s390x and SPARC V9 absolute and pc-relative
// addresses; 32-bit MIPS 32, PC32, TLS_DTPREL32; and every machine's NONE.
//
// Errors are *formaterr.Error with Source the relocation section's name
// and Offset the file offset of the entry (or of its section header):
// Field "r_info" for an unsupported type (named, with the place) or a
// symbol index outside the table, "r_offset" for a place outside the
// section, "r_addend" for a result that does not fit its field, "sh_size"
// or "sh_link" for a malformed relocation section; those of
// [File.Symbols] for its symbol table; and those of SectionData. Cost: O(section
// size + relocations); one copy of the section.
func (f *File) Relocated(i int) ([]byte, error) {
	p, fresh, err := f.contents(i)
	if err != nil || f.Type != elf.ET_REL {
		return p, err
	}
	for j := range f.Sections {
		r := &f.Sections[j]
		if (r.Type != elf.SHT_RELA && r.Type != elf.SHT_REL) || int(r.Info) != i || j == i || r.Size == 0 {
			continue
		}
		if !fresh {
			p = append([]byte(nil), p...)
			fresh = true
		}
		if err := f.applyRelocs(p, i, j); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// applyRelocs applies relocation section j to dst, the contents of
// section i.
func (f *File) applyRelocs(dst []byte, i, j int) error {
	r := &f.Sections[j]
	name := f.secName(j)
	hdr := f.SectionHeaderOffset(j)
	c := f.cls()
	rela := r.Type == elf.SHT_RELA
	ent := uint64(f.RelSize(rela))
	if r.Size%ent != 0 {
		return formatErr(name, hdr+secSize[c], "sh_size", "size %#x is not a multiple of %d", r.Size, ent)
	}
	if r.Link == 0 || uint64(r.Link) >= uint64(len(f.Sections)) {
		return formatErr(name, hdr+secLink[c], "sh_link", "symbol table index %d not in [1, %d)", r.Link, len(f.Sections))
	}
	types := relocTypes[f.Machine]
	if types == nil || (f.Machine == elf.EM_MIPS && f.is64) {
		return formatErr(name, hdr+secInfo[c], "sh_info", "relocations for %v (%v) are not supported", f.Machine, f.Class)
	}
	syms, err := f.symbols(int(r.Link), false)
	if err != nil {
		return err
	}
	rels, err := f.SectionData(j)
	if err != nil {
		return err
	}
	target := &f.Sections[i]
	tname := f.secName(i)
	for k := uint64(0); k*ent < uint64(len(rels)); k++ {
		at := r.Offset + k*ent
		rel := f.DecodeRel(rels[k*ent:], rela)
		how, ok := types[rel.Type]
		if !ok {
			return formatErr(name, at, "r_info", "relocation %d: %s at offset %#x of %s is not supported", k, RelocTypeName(f.Machine, rel.Type), rel.Off, tname)
		}
		if how.op == relOpNone {
			continue
		}
		size := uint64(how.size)
		if how.bits6 {
			size = 1
		}
		if rel.Off > uint64(len(dst)) || size > uint64(len(dst))-rel.Off {
			return formatErr(name, at, "r_offset", "relocation %d: %s of %d bytes at offset %#x is outside %s (%#x bytes)",
				k, RelocTypeName(f.Machine, rel.Type), size, rel.Off, tname, len(dst))
		}
		place := dst[rel.Off : rel.Off+size]
		s, err := f.symValue(syms, rel.Sym)
		if err != nil {
			return formatErr(name, at, "r_info", "relocation %d: %v", k, err)
		}
		cur := f.load(place)
		a := uint64(rel.Addend)
		if !rela {
			a = cur
			if size == 4 && f.is64 {
				a = uint64(int64(int32(cur)))
			}
		}
		var v uint64
		switch how.op {
		case relOpAbs:
			v = s + a
		case relOpPC:
			v = s + a - (target.Addr + rel.Off)
		case relOpAdd:
			v = cur + s + a
		case relOpSub:
			v = cur - (s + a)
		}
		if how.bits6 {
			place[0] = place[0]&0xc0 | byte(v)&0x3f
			continue
		}
		if !f.is64 && size == 4 {
			v &= 1<<32 - 1
		} else if !relFits(v, how.fit) {
			field, off := "r_addend", at+uint64(f.RelSize(false))
			if !rela {
				field, off = "r_offset", at // the addend is at the place
			}
			return formatErr(name, off, field, "relocation %d: %s at offset %#x of %s: value %#x does not fit in %d bytes",
				k, RelocTypeName(f.Machine, rel.Type), rel.Off, tname, v, size)
		}
		f.store(place, v)
	}
	return nil
}

func relFits(v uint64, r relRange) bool {
	switch r {
	case fitU32:
		return v < 1<<32
	case fitS32:
		return int64(v) >= -1<<31 && int64(v) < 1<<31
	case fitEither:
		return int64(v) >= -1<<31 && int64(v) < 1<<32
	}
	return true
}

// load reads the 1-, 2-, 4- or 8-byte value at b in the file's byte order.
func (f *File) load(b []byte) uint64 {
	switch len(b) {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(f.u16(b))
	case 4:
		return uint64(f.u32(b))
	}
	return f.u64(b)
}

// store writes v, truncated to len(b) bytes, at b in the file's byte order.
func (f *File) store(b []byte, v uint64) {
	switch len(b) {
	case 1:
		b[0] = byte(v)
	case 2:
		if f.big {
			b[0], b[1] = byte(v>>8), byte(v)
		} else {
			b[0], b[1] = byte(v), byte(v>>8)
		}
	case 4:
		f.put32(b, uint32(v))
	default:
		f.put64(b, v)
	}
}

// symValue returns the value S of symbol idx of t for a relocation.
func (f *File) symValue(t *SymbolTable, idx uint32) (uint64, error) {
	if idx == 0 {
		return 0, nil
	}
	if uint64(idx) >= uint64(t.Len()) {
		return 0, fmt.Errorf("symbol %d outside %s (%d symbols)", idx, t.SectionName, t.Len())
	}
	s := t.Sym(int(idx))
	if sec, ok := t.SectionOf(int(idx)); ok {
		if uint64(sec) >= uint64(len(f.Sections)) {
			return 0, fmt.Errorf("symbol %d in section %d, but there are %d sections", idx, sec, len(f.Sections))
		}
		return s.Value + f.Sections[sec].Addr, nil
	}
	switch s.Section {
	case elf.SHN_UNDEF, elf.SHN_COMMON:
		return 0, nil
	case elf.SHN_XINDEX:
		return 0, fmt.Errorf("symbol %d has st_shndx SHN_XINDEX but no SHT_SYMTAB_SHNDX entry", idx)
	}
	return s.Value, nil // SHN_ABS, and processor- or OS-specific indices: taken as absolute
}

// DebugSection returns the contents of the DWARF section name (for example
// ".debug_info"), as a reader of DWARF needs them: decompressed and, in an
// ET_REL file, relocated ([File.Relocated]). When there is no section of
// that name and name starts with ".debug_", it looks for the GNU
// compressed ".zdebug_" form. A missing section (or an SHT_NOBITS one, as
// in a stripped file) gives nil and no error. Errors are those of
// Relocated.
func (f *File) DebugSection(name string) ([]byte, error) {
	i := f.FindSection(name)
	if i < 0 {
		if rest, ok := strings.CutPrefix(name, ".debug_"); ok {
			i = f.FindSection(".zdebug_" + rest)
		}
	}
	if i < 0 {
		return nil, nil
	}
	return f.Relocated(i)
}
