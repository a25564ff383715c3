package elfobj

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
)

// independentRelocate applies the relocations of section i of the file ef
// (read by debug/elf) to a copy of its contents, written from the psABI
// tables without this package's code: entries and symbols are decoded
// with encoding/binary into debug/elf's structures. It is the oracle of
// [File.Relocated].
func independentRelocate(ef *elf.File, i int) ([]byte, error) {
	target := ef.Sections[i]
	dst, err := target.Data()
	if err != nil {
		return nil, err
	}
	dst = append([]byte(nil), dst...)
	if ef.Type != elf.ET_REL {
		return dst, nil
	}
	bo := ef.ByteOrder
	is64 := ef.Class == elf.ELFCLASS64
	for j, r := range ef.Sections {
		if (r.Type != elf.SHT_REL && r.Type != elf.SHT_RELA) || int(r.Info) != i || j == i || r.Size == 0 {
			continue
		}
		rela := r.Type == elf.SHT_RELA
		if int(r.Link) == 0 || int(r.Link) >= len(ef.Sections) {
			return nil, errors.New("bad sh_link")
		}
		type rel struct {
			off, sym uint64
			typ      uint32
			addend   int64
		}
		var rels []rel
		rd, err := r.Data()
		if err != nil {
			return nil, err
		}
		br := bytes.NewReader(rd)
		var entSize int
		switch {
		case is64 && rela:
			entSize = 24
		case is64:
			entSize = 16
		case rela:
			entSize = 12
		default:
			entSize = 8
		}
		if len(rd)%entSize != 0 {
			return nil, errors.New("bad relocation section size")
		}
		if _, ok := machineOK(ef); !ok {
			return nil, errors.New("machine not supported")
		}
		for br.Len() > 0 {
			switch {
			case is64 && rela:
				var e elf.Rela64
				binary.Read(br, bo, &e)
				rels = append(rels, rel{e.Off, uint64(elf.R_SYM64(e.Info)), elf.R_TYPE64(e.Info), e.Addend})
			case is64:
				var e elf.Rel64
				binary.Read(br, bo, &e)
				rels = append(rels, rel{e.Off, uint64(elf.R_SYM64(e.Info)), elf.R_TYPE64(e.Info), 0})
			case rela:
				var e elf.Rela32
				binary.Read(br, bo, &e)
				rels = append(rels, rel{uint64(e.Off), uint64(elf.R_SYM32(e.Info)), elf.R_TYPE32(e.Info), int64(e.Addend)})
			default:
				var e elf.Rel32
				binary.Read(br, bo, &e)
				rels = append(rels, rel{uint64(e.Off), uint64(elf.R_SYM32(e.Info)), elf.R_TYPE32(e.Info), 0})
			}
		}
		symtab := ef.Sections[r.Link]
		if symtab.Type != elf.SHT_SYMTAB && symtab.Type != elf.SHT_DYNSYM {
			return nil, errors.New("sh_link is not a symbol table")
		}
		sd, err := symtab.Data()
		if err != nil {
			return nil, err
		}
		type sym struct {
			value uint64
			shndx elf.SectionIndex
			ext   bool // shndx is from SHT_SYMTAB_SHNDX: an index, whatever its value
		}
		var syms []sym
		symSize := 16
		if is64 {
			symSize = 24
		}
		if len(sd)%symSize != 0 {
			return nil, errors.New("bad symbol table size")
		}
		if sl := int(symtab.Link); sl == 0 || sl >= len(ef.Sections) {
			return nil, errors.New("bad string table link")
		}
		sr := bytes.NewReader(sd)
		for sr.Len() > 0 {
			if is64 {
				var s elf.Sym64
				binary.Read(sr, bo, &s)
				syms = append(syms, sym{value: s.Value, shndx: elf.SectionIndex(s.Shndx)})
			} else {
				var s elf.Sym32
				binary.Read(sr, bo, &s)
				syms = append(syms, sym{value: uint64(s.Value), shndx: elf.SectionIndex(s.Shndx)})
			}
		}
		// Extended section indices.
		for _, x := range ef.Sections {
			if x.Type == elf.SHT_SYMTAB_SHNDX && int(x.Link) == int(r.Link) {
				xd, err := x.Data()
				if err != nil {
					return nil, err
				}
				for k := range syms {
					if syms[k].shndx == elf.SHN_XINDEX && 4*k+4 <= len(xd) {
						syms[k].shndx, syms[k].ext = elf.SectionIndex(bo.Uint32(xd[4*k:])), true
					}
				}
				break
			}
		}
		for _, e := range rels {
			kind, width, check, ok := howTo(ef.Machine, e.typ)
			if !ok {
				return nil, fmt.Errorf("type %d", e.typ)
			}
			if kind == "none" {
				continue
			}
			n := uint64(width)
			if width == 6 {
				n = 1
			}
			if e.off > uint64(len(dst)) || n > uint64(len(dst))-e.off {
				return nil, errors.New("offset out of range")
			}
			var s uint64
			if e.sym != 0 {
				if e.sym >= uint64(len(syms)) {
					return nil, errors.New("symbol out of range")
				}
				y := syms[e.sym]
				switch {
				case y.ext && int(y.shndx) < len(ef.Sections):
					s = y.value + ef.Sections[y.shndx].Addr
				case y.ext:
					return nil, errors.New("extended symbol section out of range")
				case y.shndx == elf.SHN_UNDEF, y.shndx == elf.SHN_COMMON:
				case y.shndx == elf.SHN_XINDEX:
					return nil, errors.New("unresolved SHN_XINDEX")
				case int(y.shndx) < len(ef.Sections):
					s = y.value + ef.Sections[y.shndx].Addr
				case y.shndx >= elf.SHN_LORESERVE:
					s = y.value
				default:
					return nil, errors.New("symbol section out of range")
				}
			}
			at := dst[e.off : e.off+n]
			var cur uint64
			switch n {
			case 1:
				cur = uint64(at[0])
			case 2:
				cur = uint64(bo.Uint16(at))
			case 4:
				cur = uint64(bo.Uint32(at))
			case 8:
				cur = bo.Uint64(at)
			}
			a := uint64(e.addend)
			if !rela {
				a = cur
				if n == 4 && is64 {
					a = uint64(int64(int32(uint32(cur))))
				}
			}
			var v uint64
			switch kind {
			case "abs":
				v = s + a
			case "pc":
				v = s + a - (target.Addr + e.off)
			case "add":
				v = cur + s + a
			case "sub":
				v = cur - (s + a)
			}
			if width == 6 {
				at[0] = at[0]&0xc0 | byte(v&0x3f)
				continue
			}
			if is64 || n != 4 {
				iv := int64(v)
				switch check {
				case "u32":
					if v > 0xffffffff {
						return nil, errors.New("overflow")
					}
				case "s32":
					if iv < -0x80000000 || iv > 0x7fffffff {
						return nil, errors.New("overflow")
					}
				case "either":
					if iv < -0x80000000 || iv > 0xffffffff {
						return nil, errors.New("overflow")
					}
				}
			}
			switch n {
			case 1:
				at[0] = byte(v)
			case 2:
				bo.PutUint16(at, uint16(v))
			case 4:
				bo.PutUint32(at, uint32(v))
			case 8:
				bo.PutUint64(at, v)
			}
		}
	}
	return dst, nil
}

func machineOK(ef *elf.File) (elf.Machine, bool) {
	switch ef.Machine {
	case elf.EM_X86_64, elf.EM_386, elf.EM_AARCH64, elf.EM_ARM, elf.EM_RISCV, elf.EM_PPC64, elf.EM_PPC, elf.EM_S390, elf.EM_SPARCV9:
		return ef.Machine, true
	case elf.EM_MIPS:
		return ef.Machine, ef.Class == elf.ELFCLASS32
	}
	return ef.Machine, false
}

// howTo is the psABI table: what relocation type t of machine m computes
// ("none", "abs" S+A, "pc" S+A-P, "add" V+S+A, "sub" V-S-A), the field's
// width in bytes (6: the low 6 bits of a byte), and the range an ELF64
// result must fit ("u32", "s32", "either" [-2^31, 2^32), "" none).
func howTo(m elf.Machine, t uint32) (kind string, width int, check string, ok bool) {
	switch m {
	case elf.EM_X86_64:
		switch elf.R_X86_64(t) {
		case elf.R_X86_64_NONE:
			return "none", 0, "", true
		case elf.R_X86_64_64, elf.R_X86_64_DTPOFF64:
			return "abs", 8, "", true
		case elf.R_X86_64_PC64:
			return "pc", 8, "", true
		case elf.R_X86_64_32:
			return "abs", 4, "u32", true
		case elf.R_X86_64_32S, elf.R_X86_64_DTPOFF32:
			return "abs", 4, "s32", true
		case elf.R_X86_64_PC32:
			return "pc", 4, "s32", true
		}
	case elf.EM_386:
		switch elf.R_386(t) {
		case elf.R_386_NONE:
			return "none", 0, "", true
		case elf.R_386_32, elf.R_386_TLS_LDO_32, elf.R_386_TLS_DTPOFF32:
			return "abs", 4, "", true
		case elf.R_386_PC32:
			return "pc", 4, "", true
		}
	case elf.EM_AARCH64:
		switch elf.R_AARCH64(t) {
		case elf.R_AARCH64_NONE, elf.R_AARCH64_NULL:
			return "none", 0, "", true
		case elf.R_AARCH64_ABS64, elf.R_AARCH64_TLS_DTPREL64:
			return "abs", 8, "", true
		case elf.R_AARCH64_PREL64:
			return "pc", 8, "", true
		case elf.R_AARCH64_ABS32:
			return "abs", 4, "either", true
		case elf.R_AARCH64_PREL32:
			return "pc", 4, "either", true
		}
	case elf.EM_ARM:
		switch elf.R_ARM(t) {
		case elf.R_ARM_NONE:
			return "none", 0, "", true
		case elf.R_ARM_ABS32, elf.R_ARM_TLS_LDO32:
			return "abs", 4, "", true
		case elf.R_ARM_REL32:
			return "pc", 4, "", true
		}
	case elf.EM_RISCV:
		switch elf.R_RISCV(t) {
		case elf.R_RISCV_NONE:
			return "none", 0, "", true
		case elf.R_RISCV_64:
			return "abs", 8, "", true
		case elf.R_RISCV_32:
			return "abs", 4, "either", true
		case elf.R_RISCV_32_PCREL:
			return "pc", 4, "s32", true
		case elf.R_RISCV_ADD8, elf.R_RISCV_ADD16, elf.R_RISCV_ADD32, elf.R_RISCV_ADD64:
			return "add", map[elf.R_RISCV]int{elf.R_RISCV_ADD8: 1, elf.R_RISCV_ADD16: 2, elf.R_RISCV_ADD32: 4, elf.R_RISCV_ADD64: 8}[elf.R_RISCV(t)], "", true
		case elf.R_RISCV_SUB8, elf.R_RISCV_SUB16, elf.R_RISCV_SUB32, elf.R_RISCV_SUB64:
			return "sub", map[elf.R_RISCV]int{elf.R_RISCV_SUB8: 1, elf.R_RISCV_SUB16: 2, elf.R_RISCV_SUB32: 4, elf.R_RISCV_SUB64: 8}[elf.R_RISCV(t)], "", true
		case elf.R_RISCV_SUB6:
			return "sub", 6, "", true
		case elf.R_RISCV_SET6:
			return "abs", 6, "", true
		case elf.R_RISCV_SET8:
			return "abs", 1, "", true
		case elf.R_RISCV_SET16:
			return "abs", 2, "", true
		case elf.R_RISCV_SET32:
			return "abs", 4, "", true
		}
	case elf.EM_PPC64:
		switch elf.R_PPC64(t) {
		case elf.R_PPC64_NONE:
			return "none", 0, "", true
		case elf.R_PPC64_ADDR64, elf.R_PPC64_DTPREL64:
			return "abs", 8, "", true
		case elf.R_PPC64_ADDR32:
			return "abs", 4, "either", true
		case elf.R_PPC64_REL64:
			return "pc", 8, "", true
		case elf.R_PPC64_REL32:
			return "pc", 4, "s32", true
		}
	case elf.EM_PPC:
		switch elf.R_PPC(t) {
		case elf.R_PPC_NONE:
			return "none", 0, "", true
		case elf.R_PPC_ADDR32, elf.R_PPC_DTPREL32:
			return "abs", 4, "", true
		case elf.R_PPC_REL32:
			return "pc", 4, "", true
		}
	case elf.EM_S390:
		switch elf.R_390(t) {
		case elf.R_390_NONE:
			return "none", 0, "", true
		case elf.R_390_64, elf.R_390_TLS_LDO64:
			return "abs", 8, "", true
		case elf.R_390_32, elf.R_390_TLS_LDO32:
			return "abs", 4, "either", true
		case elf.R_390_PC64:
			return "pc", 8, "", true
		case elf.R_390_PC32:
			return "pc", 4, "s32", true
		}
	case elf.EM_SPARCV9:
		switch elf.R_SPARC(t) {
		case elf.R_SPARC_NONE:
			return "none", 0, "", true
		case elf.R_SPARC_64, elf.R_SPARC_UA64:
			return "abs", 8, "", true
		case elf.R_SPARC_32, elf.R_SPARC_UA32:
			return "abs", 4, "either", true
		case elf.R_SPARC_DISP32:
			return "pc", 4, "s32", true
		}
	case elf.EM_MIPS:
		switch elf.R_MIPS(t) {
		case elf.R_MIPS_NONE:
			return "none", 0, "", true
		case elf.R_MIPS_32, elf.R_MIPS_TLS_DTPREL32:
			return "abs", 4, "", true
		case elf.R_MIPS_PC32:
			return "pc", 4, "", true
		}
	}
	return "", 0, "", false
}

// checkRelocations compares Relocated with independentRelocate for every
// section of f, an ET_REL file read from data: both fail, or both give
// the same bytes.
func checkRelocations(t testing.TB, f *File, data []byte) {
	t.Helper()
	if f.Type != elf.ET_REL {
		return
	}
	ef, err := elf.NewFile(bytes.NewReader(data))
	if err != nil || len(ef.Sections) != len(f.Sections) {
		return
	}
	for i, s := range ef.Sections {
		if s.Type == elf.SHT_NOBITS || s.Size > maxCompared {
			continue
		}
		if !readable(f, i) {
			continue // compareFile judged the sections' contents
		}
		want, werr := independentRelocate(ef, i)
		got, err := f.Relocated(i)
		if (err != nil) != (werr != nil) {
			t.Fatalf("section %d (%s): Relocated: %v; independent relocator: %v", i, s.Name, err, werr)
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Fatalf("section %d (%s): relocated contents differ from the independent relocator's", i, s.Name)
		}
	}
}

// readable reports whether section i, the relocation sections that apply
// to it and their symbol tables all read without error.
func readable(f *File, i int) bool {
	if _, err := f.SectionData(i); err != nil {
		return false
	}
	for j, r := range f.Sections {
		if (r.Type == elf.SHT_REL || r.Type == elf.SHT_RELA) && int(r.Info) == i {
			if _, err := f.SectionData(j); err != nil {
				return false
			}
			if int(r.Link) < len(f.Sections) {
				if _, err := f.SectionData(int(r.Link)); err != nil {
					return false
				}
			}
		}
	}
	return true
}
