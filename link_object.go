package elfimage

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/elfobj"
)

// LinkObject writes m as a relocatable object (ET_REL) for the system
// linker (GNU ld, gold, lld), to be linked with C or C++ code into a
// program or shared library, and returns its bytes. Where [Link] lays out
// an image the runtime loads itself, LinkObject leaves every address to
// the system linker, which also writes .eh_frame_hdr (gcc passes
// --eh-frame-hdr) and the build ID (--build-id). For an x86-64 module
// (EM_X86_64) it writes the x86-64 psABI's relocations (section 4.4.1),
// for an AArch64 one (EM_AARCH64) those of "ELF for the Arm 64-bit
// Architecture" (AAELF64 §5.7):
//
//   - .text (SHF_ALLOC|SHF_EXECINSTR) with the procedures at their
//     alignment (gaps filled as in Link: int3, or 0, udf #0, on AArch64),
//     .rodata and .data as in Link; each holds its relocations in
//     .rela.text, .rela.rodata, .rela.data. On x86-64: R_X86_64_PLT32 for
//     a PC32 relocation to a global procedure or an extern,
//     R_X86_64_PC32 against the section symbol otherwise, R_X86_64_64 for
//     Abs64. On AArch64: RelocAArch64Call26 and Jump26 become
//     R_AARCH64_CALL26 and JUMP26 against a global procedure's or an
//     extern's symbol (the linker adds a PLT entry or a range-extending
//     veneer as needed), or against .text plus the target's offset for an
//     Internal one; RelocAArch64AdrPage21, AddLo12 and Adr21 become
//     R_AARCH64_ADR_PREL_PG_HI21, ADD_ABS_LO12_NC and ADR_PREL_LO21, PC32
//     R_AARCH64_PREL32 and Abs64 R_AARCH64_ABS64, each against the target
//     section's symbol plus the target's offset (an extern's own symbol);
//     the instruction keeps its opcode and register bits, its relocated
//     field is 0;
//   - .eh_frame (SHT_X86_64_UNWIND on x86-64, SHT_PROGBITS on AArch64)
//     with a "zR" CIE and one FDE per procedure whose pc_begin
//     (DW_EH_PE_pcrel|DW_EH_PE_sdata4) is an R_X86_64_PC32 or
//     R_AARCH64_PREL32 against .text, without a terminator (LSB 5.0
//     section 10.6.1; the linker ends the merged section);
//   - the DWARF sections Link writes, with R_X86_64_64 (R_AARCH64_ABS64)
//     against .text for every address (DW_FORM_addr, DW_LNE_set_address,
//     .debug_aranges tuples, absolute list entries) and R_X86_64_32
//     (R_AARCH64_ABS32; the 64-bit types in the 64-bit format) against the
//     target section's STT_SECTION symbol for every section offset
//     (DW_FORM_strp, DW_FORM_line_strp in the line header, DW_AT_stmt_list
//     and other DW_FORM_sec_offset values, the units' debug_abbrev_offset
//     and .debug_aranges' debug_info_offset), so the linker may merge the
//     SHF_MERGE string sections;
//   - an empty .note.GNU-stack (a non-executable stack);
//   - .symtab: the null symbol, STT_FILE (Module.File's base name), an
//     STT_SECTION symbol per section, on AArch64 the AAELF64 mapping
//     symbols ($x at the start of .text, $d at those of .rodata and
//     .data), the Internal procedures and the data (STB_LOCAL), then
//     (sh_info) the other procedures as STB_GLOBAL STT_FUNC under their
//     LinkName or Name, then Module.Externs as undefined STB_GLOBAL
//     symbols.
//
// Every relocation section is SHT_RELA with SHF_INFO_LINK, sh_link the
// symbol table and sh_info its target; every field a relocation covers
// holds 0. Sections have address 0 and symbols their section offsets.
// There is no program header, no .eh_frame_hdr, no build ID, no
// .elfimage.procs table and no .elfimage.rebase: a linked program is read
// by the system's tools, not by [Load].
//
// The code must follow the platform's calling convention (System V
// AMD64, AAPCS64) where foreign code calls it; LinkObject does not check
// that. As in Link, an Abs64 relocation is allowed only in Module.Data
// (in .text or .rodata it would make a position-independent program need
// text relocations). Options: DWARF as for Link; DebugFrame, DebugFile
// and DropProcTable are refused. Errors are *LinkError values: those of
// Link, except that the distance of an AArch64 branch is the system
// linker's to check (a CALL26 or JUMP26 beyond ±128 MiB gets a veneer or
// a link error there); one naming the procedure or datum and the offset
// for a relocation to a symbol neither in the module nor in Externs, an
// AArch64 instruction relocation outside Proc.Relocs, not 4-byte aligned,
// past the code or in a module of another architecture, and an AArch64
// branch whose distance cannot be a multiple of 4 (to a procedure of the
// module, or an addend to an extern that is not); and one for an
// architecture other than x86-64 and AArch64 (Object "module", "LinkObject
// writes x86-64 and AArch64 relocations; the module is for NAME"). Cost:
// linear in the size of the output.
func LinkObject(m *Module, opts LinkOptions) ([]byte, error) {
	switch {
	case opts.DebugFile != "":
		return nil, &LinkError{"module", "LinkOptions.DebugFile is set: an object keeps its debug information (strip the linked program)"}
	case opts.DropProcTable:
		return nil, &LinkError{"module", "LinkOptions.DropProcTable is set: an object has no procedure table"}
	case opts.DebugFrame:
		return nil, &LinkError{"module", "LinkOptions.DebugFrame is set: an object has .eh_frame only"}
	}
	l, err := newLinker(m, opts)
	if err != nil {
		return nil, err
	}
	if l.a.Machine != elf.EM_X86_64 && l.a.Machine != elf.EM_AARCH64 {
		l.dropCFI() // newCFI may be running: done before LinkObject returns
		return nil, &LinkError{"module", fmt.Sprintf("LinkObject writes x86-64 and AArch64 relocations; the module is for %s", l.a.Name)}
	}
	l.object = true
	return l.linkObject()
}

// WriteObject writes [LinkObject]'s object for m to path atomically, as
// [WriteFile] does.
func WriteObject(path string, m *Module, opts LinkOptions) error {
	b, err := LinkObject(m, opts)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, b)
}

// objSection is a section of an object with its contents and relocations.
type objSection struct {
	sec    *elfobj.Section
	data   []byte
	relocs []elf.Rela64
	rela   *elfobj.Section // its .rela section, when it has relocations
	symbol uint32          // its STT_SECTION symbol
}

func (l *linker) linkObject() ([]byte, error) {
	m := l.m
	// Abs64 only in .data, as in an image: elsewhere it would be a text
	// relocation in a position-independent program (DT_TEXTREL).
	if _, err := l.countRelative(); err != nil {
		return nil, err
	}
	cfi, err := l.awaitCFI()
	if err != nil {
		return nil, err
	}
	w := elfobj.NewWriter(elf.ELFCLASS64, elf.ELFDATA2LSB)
	add := func(name string, typ elf.SectionType, flags elf.SectionFlag, align uint64) *objSection {
		return &objSection{sec: w.AddSection(elf.SectionHeader{Name: name, Type: typ, Flags: flags, Addralign: align})}
	}

	// Addresses are offsets in each section: the object's sections are
	// all at address 0.
	blocks := make([]block, len(m.Procs))
	for i, p := range m.Procs {
		blocks[i] = block{align: orDefault(p.Align, 16), size: uint64(len(p.Code))}
	}
	textOffs, textSize, textAlign := layBlocks(blocks, 16)
	roOffs, roSize, roAlign := layBlocks(datumBlocks(m.ROData), 1)
	dataOffs, dataSize, dataAlign := layBlocks(datumBlocks(m.Data), 8)
	l.procAddr, l.roAddr, l.dataAddr = textOffs, roOffs, dataOffs
	l.textStart, l.textEnd = 0, textSize
	cfi.setAddrs(l.procAddr)

	text := add(".text", elf.SHT_PROGBITS, elf.SHF_ALLOC|elf.SHF_EXECINSTR, textAlign)
	text.data = make([]byte, textSize)
	for i, p := range m.Procs {
		copy(text.data[textOffs[i]:], p.Code)
		end, next := textOffs[i]+uint64(len(p.Code)), textSize
		if i+1 < len(m.Procs) {
			next = textOffs[i+1]
		}
		fill := textFill(l.a) // a stray jump into padding traps
		for j := end; j < next; j++ {
			text.data[j] = fill
		}
	}
	secs := []*objSection{text}
	var rodata, data *objSection
	if len(m.ROData) > 0 {
		rodata = add(".rodata", elf.SHT_PROGBITS, elf.SHF_ALLOC, roAlign)
		rodata.data = make([]byte, roSize)
		for i, d := range m.ROData {
			copy(rodata.data[roOffs[i]:], d.Bytes)
		}
		secs = append(secs, rodata)
	}
	if len(m.Data) > 0 {
		data = add(".data", elf.SHT_PROGBITS, elf.SHF_ALLOC|elf.SHF_WRITE, dataAlign)
		data.data = make([]byte, dataSize)
		for i, d := range m.Data {
			copy(data.data[dataOffs[i]:], d.Bytes)
		}
		secs = append(secs, data)
	}
	ehType := elf.SHT_PROGBITS
	if l.a.Machine == elf.EM_X86_64 {
		ehType = shtX86_64Unwind // the x86-64 psABI's type for .eh_frame
	}
	ehFrame := add(".eh_frame", ehType, elf.SHF_ALLOC, 8)
	eh := make([]byte, cfi.eh.Size())
	if err := cfi.eh.Put(eh, 0, cfi.fdes); err != nil {
		return nil, &LinkError{"module", fmt.Sprintf("call frame information: %v", err)}
	}
	// Without the terminator, which would end the linker's parse of the
	// merged section at this object's end.
	fdeOffs := cfi.eh.FDEOffsets()
	last := fdeOffs[len(fdeOffs)-1]
	ehFrame.data = eh[:last+4+uint64(binary.LittleEndian.Uint32(eh[last:]))]
	secs = append(secs, ehFrame)
	tail, err := l.buildDWARF()
	if err != nil {
		return nil, err
	}
	byName := map[string]*objSection{}
	debug := make([]*objSection, len(tail))
	for i, t := range tail {
		s := &objSection{sec: w.AddSection(t.hdr), data: t.data}
		debug[i] = s
		byName[t.hdr.Name] = s
	}
	secs = append(secs, debug...)
	stack := add(".note.GNU-stack", elf.SHT_PROGBITS, 0, 1)
	symtab := add(".symtab", elf.SHT_SYMTAB, 0, 8)
	strtab := add(".strtab", elf.SHT_STRTAB, 0, 1)

	// The symbol table's plan: null, file, section symbols, local
	// procedures and data, then globals (procedures, then externs).
	strs := &elfobj.StringTable{}
	var syms []elf.Sym64
	syms = append(syms, elf.Sym64{})
	if m.File != "" {
		syms = append(syms, elf.Sym64{Name: strs.AddUnique(filepath.Base(m.File)), Info: elf.ST_INFO(elf.STB_LOCAL, elf.STT_FILE), Shndx: uint16(elf.SHN_ABS)})
	}
	for _, s := range secs {
		s.symbol = uint32(len(syms))
		syms = append(syms, elf.Sym64{Info: elf.ST_INFO(elf.STB_LOCAL, elf.STT_SECTION), Shndx: uint16(s.sec.Index())})
	}
	if l.a.Machine == elf.EM_AARCH64 {
		// AAELF64 mapping symbols: $x where AArch64 code starts, $d
		// where data does, for disassemblers.
		mapping := func(name string, s *objSection) {
			if s != nil {
				syms = append(syms, elf.Sym64{Name: strs.AddUnique(name), Info: elf.ST_INFO(elf.STB_LOCAL, elf.STT_NOTYPE), Shndx: uint16(s.sec.Index())})
			}
		}
		mapping("$x", text)
		mapping("$d", rodata)
		mapping("$d", data)
	}
	procSym := make([]uint32, len(m.Procs))
	for i, p := range m.Procs {
		if p.Internal {
			procSym[i] = uint32(len(syms))
			syms = append(syms, elf.Sym64{Name: strs.AddUnique(linkName(p)), Info: elf.ST_INFO(elf.STB_LOCAL, elf.STT_FUNC), Shndx: uint16(text.sec.Index()), Value: textOffs[i], Size: uint64(len(p.Code))})
		}
	}
	for _, g := range []struct {
		ds   []*Datum
		s    *objSection
		offs []uint64
	}{{m.ROData, rodata, roOffs}, {m.Data, data, dataOffs}} {
		for i, d := range g.ds {
			syms = append(syms, elf.Sym64{Name: strs.AddUnique(d.Name), Info: elf.ST_INFO(elf.STB_LOCAL, elf.STT_OBJECT), Shndx: uint16(g.s.sec.Index()), Value: g.offs[i], Size: uint64(len(d.Bytes))})
		}
	}
	nLocal := len(syms)
	for i, p := range m.Procs {
		if !p.Internal {
			procSym[i] = uint32(len(syms))
			syms = append(syms, elf.Sym64{Name: strs.AddUnique(linkName(p)), Info: elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC), Shndx: uint16(text.sec.Index()), Value: textOffs[i], Size: uint64(len(p.Code))})
		}
	}
	externSym := map[string]uint32{}
	for _, name := range m.Externs {
		if _, dup := l.syms[name]; dup || name == "" || strings.IndexByte(name, 0) >= 0 {
			return nil, &LinkError{"module", fmt.Sprintf("Module.Externs: %q is empty, has a NUL byte or names an object of the module", name)}
		}
		if _, dup := externSym[name]; dup {
			return nil, &LinkError{"module", fmt.Sprintf("Module.Externs: %q is listed twice", name)}
		}
		for _, p := range m.Procs {
			if p.LinkName == name {
				return nil, &LinkError{"proc " + p.Name, fmt.Sprintf("LinkName %q is also in Module.Externs", name)}
			}
		}
		externSym[name] = uint32(len(syms))
		syms = append(syms, elf.Sym64{Name: strs.AddUnique(name), Info: elf.ST_INFO(elf.STB_GLOBAL, elf.STT_NOTYPE), Shndx: uint16(elf.SHN_UNDEF)})
	}

	// Relocations of the code and data.
	rel := func(s *objSection, off uint64, sym uint32, typ uint32, addend int64) {
		s.relocs = append(s.relocs, elf.Rela64{Off: off, Info: elf.R_INFO(sym, typ), Addend: addend})
	}
	types := objRelocTypesFor(l.a)
	modelRelocs := func(obj string, s *objSection, base uint64, code []byte, size int, rs []Reloc) error {
		for _, r := range rs {
			at := base + uint64(r.Offset)
			n, call := 4, false
			switch r.Type {
			case RelocPC32:
				call = l.a.Machine == elf.EM_X86_64 // a call or jump: PLT32 to a global
			case RelocAbs64:
				n = 8
			case RelocAArch64Call26, RelocAArch64Jump26, RelocAArch64AdrPage21, RelocAArch64AddLo12, RelocAArch64Adr21:
				call = r.Type == RelocAArch64Call26 || r.Type == RelocAArch64Jump26
				if err := checkAArch64(l.a, obj, code, r); err != nil {
					return err
				}
			default:
				return &LinkError{obj, fmt.Sprintf("relocation at %#x: unknown type %d", r.Offset, r.Type)}
			}
			if uint64(r.Offset)+uint64(n) > uint64(size) {
				name := "PC32"
				if n == 8 {
					name = "Abs64"
				}
				return &LinkError{obj, fmt.Sprintf("%s relocation at %#x runs past the end (%#x bytes)", name, r.Offset, size)}
			}
			typ := types.of(r.Type)
			if n == 4 && r.Type != RelocPC32 {
				// An instruction: its opcode stays, its field is 0.
				w := binary.LittleEndian.Uint32(s.data[at:])
				binary.LittleEndian.PutUint32(s.data[at:], clearAArch64Field(r.Type, w))
			} else {
				clear(s.data[at : at+uint64(n)])
			}
			// A branch's S + A - P is a multiple of 4 (AAELF64 §5.7.8):
			// within .text it is known here, to an extern it is A.
			misaligned := func(d int64) error {
				if call && l.a.Machine == elf.EM_AARCH64 && d%4 != 0 {
					return &LinkError{obj, fmt.Sprintf("%s relocation at %#x to %q: distance %#x is not a multiple of 4", aarch64RelocName(r.Type), r.Offset, r.Symbol, d)}
				}
				return nil
			}
			t, ok := l.syms[r.Symbol]
			if !ok {
				ext, isExt := externSym[r.Symbol]
				if !isExt {
					return &LinkError{obj, fmt.Sprintf("relocation at %#x: unknown symbol %q (not in the module nor in Module.Externs)", r.Offset, r.Symbol)}
				}
				if err := misaligned(r.Addend); err != nil {
					return err
				}
				rel(s, at, ext, types.toGlobal(r.Type), r.Addend)
				continue
			}
			switch t.kind {
			case symProc:
				if s == text {
					if err := misaligned(int64(textOffs[t.index]) + r.Addend - int64(at)); err != nil {
						return err
					}
				}
				if !m.Procs[t.index].Internal && call {
					rel(s, at, procSym[t.index], types.toGlobal(r.Type), r.Addend)
				} else {
					rel(s, at, text.symbol, typ, int64(textOffs[t.index])+r.Addend)
				}
			case symROData:
				rel(s, at, rodata.symbol, typ, int64(roOffs[t.index])+r.Addend)
			default:
				rel(s, at, data.symbol, typ, int64(dataOffs[t.index])+r.Addend)
			}
		}
		return nil
	}
	for i, p := range m.Procs {
		if err := modelRelocs("proc "+p.Name, text, textOffs[i], p.Code, len(p.Code), p.Relocs); err != nil {
			return nil, err
		}
	}
	for i, d := range m.ROData {
		if err := modelRelocs("datum "+d.Name, rodata, roOffs[i], nil, len(d.Bytes), d.Relocs); err != nil {
			return nil, err
		}
	}
	for i, d := range m.Data {
		if err := modelRelocs("datum "+d.Name, data, dataOffs[i], nil, len(d.Bytes), d.Relocs); err != nil {
			return nil, err
		}
	}
	// .eh_frame: each FDE's pc_begin, after its length and CIE pointer.
	for i, off := range fdeOffs {
		at := off + 8
		clear(ehFrame.data[at : at+4])
		rel(ehFrame, at, text.symbol, types.pc32, int64(textOffs[i]))
	}
	// DWARF: addresses are .text offsets (the section is at 0 here);
	// section offsets point into the named section.
	for i, t := range tail {
		s := debug[i]
		for _, at := range t.addrs {
			v := binary.LittleEndian.Uint64(s.data[at:])
			clear(s.data[at : at+8])
			rel(s, at, text.symbol, types.abs64, int64(v))
		}
		for _, f := range t.offsets {
			target := byName[f.Section]
			if target == nil {
				return nil, fmt.Errorf("elfimage: internal error: %s refers to %s, which the object lacks", t.hdr.Name, f.Section)
			}
			v := uint64(binary.LittleEndian.Uint32(s.data[f.At:]))
			if f.Size == 8 {
				v = binary.LittleEndian.Uint64(s.data[f.At:])
			}
			clear(s.data[f.At : f.At+uint64(f.Size)])
			typ := types.abs32
			if f.Size == 8 {
				typ = types.abs64
			}
			rel(s, f.At, target.symbol, typ, int64(v))
		}
	}
	for _, s := range secs {
		if len(s.relocs) > 0 {
			s.rela = w.AddSection(elf.SectionHeader{Name: ".rela" + s.sec.Name, Type: elf.SHT_RELA,
				Flags: elf.SHF_INFO_LINK, Addralign: 8, Link: uint32(symtab.sec.Index()), Info: uint32(s.sec.Index())})
		}
	}

	// Reserve in file order, then write in the same order.
	w.ReserveFileHeader()
	for _, s := range secs {
		w.ReserveSectionData(s.sec, uint64(len(s.data)))
	}
	w.ReserveSectionData(stack.sec, 0)
	w.ReserveLocalSymbols(nLocal - 1)
	w.ReserveGlobalSymbols(len(syms) - nLocal)
	w.ReserveSymtab(symtab.sec, strtab.sec)
	w.ReserveStringTable(strtab.sec, strs)
	for _, s := range secs {
		if s.rela != nil {
			w.ReserveRela(s.rela, len(s.relocs))
		}
	}
	shstrtab := w.ReserveShstrtab()
	w.ReserveSectionHeaders()
	if err := w.Err(); err != nil {
		return nil, fmt.Errorf("elfimage: internal error: %w", err)
	}
	w.WriteFileHeader(elfobj.FileHeader{Type: elf.ET_REL, Machine: l.a.Machine})
	for _, s := range secs {
		w.WriteSection(s.sec, s.data)
	}
	w.WriteSection(stack.sec, nil)
	w.WriteNullSymbol()
	for _, s := range syms[1:] {
		w.WriteSymbol(s)
	}
	w.WriteStringTable(strtab.sec)
	for _, s := range secs {
		if s.rela != nil {
			for _, r := range s.relocs {
				w.WriteRela(s.rela, r)
			}
		}
	}
	w.WriteStringTable(shstrtab)
	w.WriteSectionHeaders()
	out, err := w.Finish()
	if err != nil {
		return nil, fmt.Errorf("elfimage: internal error: %w", err)
	}
	return out, nil
}

// linkName is the symbol of procedure p.
func linkName(p *Proc) string {
	if p.LinkName != "" {
		return p.LinkName
	}
	return p.Name
}

// objRelocTypes are the ELF relocation types an object of one
// architecture holds: pc32 (S + A - P, 32 bits: RelocPC32 and the
// .eh_frame pc_begin fields), abs64 and abs32 (S + A: RelocAbs64 and the
// DWARF addresses and section offsets), and those of the AArch64
// instruction relocations of the model.
type objRelocTypes struct {
	machine             elf.Machine
	pc32, abs64, abs32  uint32
	call, jump          uint32
	adrPage, addLo, adr uint32
}

// objRelocTypesFor returns the relocation types of a's objects: the
// x86-64 psABI's (section 4.4.1) or AAELF64's (§5.7).
func objRelocTypesFor(a *arch.Arch) objRelocTypes {
	if a.Machine == elf.EM_AARCH64 {
		return objRelocTypes{
			machine: elf.EM_AARCH64,
			pc32:    uint32(elf.R_AARCH64_PREL32), abs64: uint32(elf.R_AARCH64_ABS64), abs32: uint32(elf.R_AARCH64_ABS32),
			call: uint32(elf.R_AARCH64_CALL26), jump: uint32(elf.R_AARCH64_JUMP26),
			adrPage: uint32(elf.R_AARCH64_ADR_PREL_PG_HI21), addLo: uint32(elf.R_AARCH64_ADD_ABS_LO12_NC), adr: uint32(elf.R_AARCH64_ADR_PREL_LO21),
		}
	}
	return objRelocTypes{machine: elf.EM_X86_64, pc32: uint32(elf.R_X86_64_PC32), abs64: uint32(elf.R_X86_64_64), abs32: uint32(elf.R_X86_64_32)}
}

// of is the ELF type of a relocation of type t against a section symbol
// (t was checked against the architecture).
func (o objRelocTypes) of(t RelocType) uint32 {
	switch t {
	case RelocPC32:
		return o.pc32
	case RelocAbs64:
		return o.abs64
	case RelocAArch64Call26:
		return o.call
	case RelocAArch64Jump26:
		return o.jump
	case RelocAArch64AdrPage21:
		return o.adrPage
	case RelocAArch64AddLo12:
		return o.addLo
	default:
		return o.adr
	}
}

// toGlobal is the ELF type of a relocation of type t against a global or
// undefined symbol: on x86-64 a PC32 one is a call or jump, R_X86_64_PLT32
// (which the linker binds through the PLT where the symbol may be
// preempted); otherwise as [objRelocTypes.of] (R_AARCH64_CALL26 and
// JUMP26 get a PLT entry or veneer from the linker as needed).
func (o objRelocTypes) toGlobal(t RelocType) uint32 {
	if o.machine == elf.EM_X86_64 && t == RelocPC32 {
		return uint32(elf.R_X86_64_PLT32)
	}
	return o.of(t)
}
