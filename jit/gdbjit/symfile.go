package gdbjit

import (
	"debug/elf"
	"fmt"
	"runtime"
	"slices"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/dwarf/info"
	"github.com/elfimage/elfimage/dwarf/line"
	"github.com/elfimage/elfimage/elfobj"
)

// Proc is one procedure of a symbol file built by [Symfile]: machine code
// at its run-time address with, optionally, its source positions.
type Proc struct {
	// Name is the symbol name gdb shows and breaks on; not empty.
	Name string
	// Addr is the run-time address of the first byte and Size the length
	// in bytes (> 0): the procedure is [Addr, Addr+Size).
	Addr, Size uint64
	// File is the source file (an absolute path reads best in gdb); ""
	// means no line information for this procedure.
	File string
	// Line is the 1-based source line of the first byte (used only with
	// File).
	Line int
	// Lines are further line-table rows at byte offsets from Addr, sorted
	// by Offset, each in (0, Size) (used only with File).
	Lines []Line
	// CFI, if not nil, gives the procedure an FDE in the symbol file's
	// .eh_frame: the call frame instructions (DWARF 5 section 6.4.2,
	// package dwarf/frame) after the CIE's initial ones, each PC a byte
	// offset from Addr in [0, Size], sorted by PC. An empty non-nil slice
	// describes code in which the CIE's initial row holds throughout
	// (code that never moves rsp). Debuggers unwind out of the procedure
	// with these rules, so they must be exact at every instruction. With
	// nil CFI there is no FDE: gdb then guesses from the procedure's
	// prologue (it recognises push %rbp; mov %rsp,%rbp) and LLDB from
	// its instructions.
	CFI []frame.Insn
	// CIE is the CIE for CFI; nil means frame.StandardCIE of the running
	// program's ABI (arch.ForGOARCH(runtime.GOARCH), x86-64 on any GOARCH
	// without one): on x86-64 CFA = rsp+8 and the return address at
	// CFA-8, on AArch64 CFA = sp and the return address in x30, the state
	// at the first instruction of a procedure entered by a call.
	CIE *frame.CIE
}

// Line is a line-table row of a [Proc]: from byte Offset of the procedure
// on (until the next row), the code belongs to source line Line (1-based).
type Line struct {
	Offset uint64
	Line   int
}

// Symfile builds an in-memory ELF symbol file for procs, to hand to
// [Register]: every address in it is the run-time address (gdb does not
// relocate JIT symbol files). Layout:
//
//   - one SHF_ALLOC section, .text (SHT_NOBITS, SHF_ALLOC|SHF_EXECINSTR),
//     whose address range [min Addr, max Addr+Size) is the real one; the
//     code itself is not copied (debuggers read it from the process), and
//     one PT_LOAD (R+X, no file bytes) over the same range;
//   - .symtab/.strtab: one STB_GLOBAL STT_FUNC symbol per procedure with its
//     address and size;
//   - when some procedure has CFI: .eh_frame (SHT_X86_64_UNWIND on
//     x86-64, SHT_PROGBITS elsewhere) with one
//     CIE per distinct CIE and one FDE per such procedure (LSB 5.0 section
//     10.6.1), its FDE pointers DW_EH_PE_absptr (absolute 8-byte
//     addresses: the section is not loaded and has no address of its own
//     to be relative to), so that gdb and LLDB unwind out of the
//     procedure at every instruction; no .eh_frame_hdr (neither debugger
//     reads one from a JIT symbol file; they index .eh_frame themselves);
//   - .note.gnu.build-id (SHT_NOTE): an NT_GNU_BUILD_ID note whose
//     descriptor is the SHA-1 of the whole file with the descriptor
//     zeroed, as elfimage's linker computes it; LLDB shows it as the JIT
//     module's UUID and gdb as the objfile's build ID. Files that differ
//     in any byte (names, addresses, lines, CFI) get different IDs;
//   - when some procedure has a File: DWARF 5 .debug_info (one compile
//     unit with DW_AT_low_pc/high_pc over .text and one DW_TAG_subprogram
//     per procedure), .debug_abbrev, .debug_str, .debug_line (one sequence
//     per procedure with a File, its first row at its first byte) and
//     .debug_line_str.
//
// Every section but .text is non-ALLOC at address 0.
//
// Batching: one symbol file may hold any number of procedures and costs
// one debugger notification when registered, so a JIT that publishes
// procedures in batches builds one Symfile per batch. The .text range
// spans every procedure of the file: keep a file's procedures close
// together (one code region), since symbol files whose .text ranges
// overlap make gdb's section lookup slower and ambiguous.
//
// Errors wrap [ErrInvalidProc] (empty name, Size 0, a range that wraps,
// overlapping procedures, a Line row out of order or out of range, a
// non-positive Line with a File, CFI that package dwarf/frame refuses to
// encode: unsorted or out-of-range PCs, offsets that are not multiples of
// the data alignment factor; then also [frame.ErrInvalid]). Cost: linear
// in the procedures, their names and CFI, plus a sort and a SHA-1 of the
// file.
func Symfile(procs []Proc) ([]byte, error) {
	if len(procs) == 0 {
		return nil, fmt.Errorf("%w: no procedures", ErrInvalidProc)
	}
	ps := slices.Clone(procs)
	slices.SortStableFunc(ps, func(a, b Proc) int {
		switch {
		case a.Addr < b.Addr:
			return -1
		case a.Addr > b.Addr:
			return 1
		}
		return 0
	})
	for i, p := range ps {
		if err := p.validate(); err != nil {
			return nil, err
		}
		if i > 0 && ps[i-1].Addr+ps[i-1].Size > p.Addr {
			return nil, fmt.Errorf("%w: %q [%#x, %#x) overlaps %q", ErrInvalidProc,
				p.Name, p.Addr, p.Addr+p.Size, ps[i-1].Name)
		}
	}
	return symfileGroups([][]Proc{ps})
}

// symfileGroups builds a symbol file with one .text section, one
// PT_LOAD and (when some procedure has a File) one compile unit per group.
// Each group must be non-empty, sorted by Addr, made of validated
// procedures that do not overlap, and the groups' ranges [first Addr, max
// end) must be pairwise disjoint. [Publisher] uses groups to keep the
// SHF_ALLOC sections of its symbol files from overlapping one another.
func symfileGroups(groups [][]Proc) ([]byte, error) {
	loads := make([][2]uint64, len(groups))
	hasLines := false
	nsym := 0
	for gi, g := range groups {
		lo := g[0].Addr
		var hi uint64
		for _, p := range g {
			hi = max(hi, p.Addr+p.Size)
			if p.File != "" {
				hasLines = true
			}
		}
		loads[gi] = [2]uint64{lo, hi}
		nsym += len(g)
	}
	// Every address in the file is absolute: the contents are built
	// first, then laid out.
	eh, err := symfileEHFrame(groups)
	if err != nil {
		return nil, err
	}
	var dw []elf.SectionHeader
	var dwData [][]byte
	if hasLines {
		if dw, dwData, err = symfileDWARF(groups, loads); err != nil {
			return nil, err
		}
	}

	// The sections: one SHT_NOBITS .text per group (debuggers read the
	// code from the process), the symbols, .eh_frame, the build ID and
	// DWARF; every section but .text is non-ALLOC at address 0.
	w := elfobj.NewWriter(elf.ELFCLASS64, elf.ELFDATA2LSB)
	texts := make([]*elfobj.Section, len(groups))
	for gi, l := range loads {
		texts[gi] = w.AddSection(elf.SectionHeader{Name: ".text", Type: elf.SHT_NOBITS,
			Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Addr: l[0], Addralign: 1})
	}
	symtab := w.AddSection(elf.SectionHeader{Name: ".symtab", Type: elf.SHT_SYMTAB, Addralign: 8})
	strtab := w.AddSection(elf.SectionHeader{Name: ".strtab", Type: elf.SHT_STRTAB, Addralign: 1})
	var ehSec *elfobj.Section
	if eh != nil {
		ehSec = w.AddSection(elf.SectionHeader{Name: ".eh_frame", Type: ehFrameType(hostArch), Addralign: 8})
	}
	note := w.AddSection(elf.SectionHeader{Name: ".note.gnu.build-id", Type: elf.SHT_NOTE, Addralign: 4})
	dwSecs := make([]*elfobj.Section, len(dw))
	for i, h := range dw {
		dwSecs[i] = w.AddSection(h)
	}
	var strs elfobj.StringTable
	names := make([]uint32, 0, nsym)
	for _, g := range groups {
		for _, p := range g {
			names = append(names, strs.Add(p.Name))
		}
	}
	w.ReserveGlobalSymbols(nsym)

	w.ReserveFileHeader()
	w.ReserveProgramHeaders(len(loads))
	for gi, l := range loads {
		w.ReserveSectionData(texts[gi], l[1]-l[0])
	}
	w.ReserveSymtab(symtab, strtab)
	w.ReserveStringTable(strtab, &strs)
	if ehSec != nil {
		w.ReserveSectionData(ehSec, uint64(len(eh)))
	}
	w.ReserveSectionData(note, elfobj.BuildIDNoteSize)
	for i, s := range dwSecs {
		w.ReserveSectionData(s, uint64(len(dwData[i])))
	}
	shstrtab := w.ReserveShstrtab()
	w.ReserveSectionHeaders()

	w.WriteFileHeader(elfobj.FileHeader{Type: elf.ET_EXEC, Machine: hostArch.Machine})
	for _, l := range loads {
		// The code's real range, no file bytes (p_offset 0, p_align 1 so
		// no congruence is implied).
		w.WriteProgramHeader(elf.ProgHeader{Type: elf.PT_LOAD, Flags: elf.PF_R | elf.PF_X,
			Vaddr: l[0], Paddr: l[0], Memsz: l[1] - l[0], Align: 1})
	}
	w.WriteNullSymbol()
	for gi, g := range groups {
		for _, p := range g {
			w.WriteSymbol(elf.Sym64{Name: names[0], Info: elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC),
				Shndx: uint16(texts[gi].Index()), Value: p.Addr, Size: p.Size})
			names = names[1:]
		}
	}
	w.WriteStringTable(strtab)
	if ehSec != nil {
		w.WriteSection(ehSec, eh)
	}
	w.WriteBuildID(note)
	for i, s := range dwSecs {
		w.WriteSection(s, dwData[i])
	}
	w.WriteStringTable(shstrtab)
	w.WriteSectionHeaders()
	out, err := w.Finish()
	if err != nil {
		return nil, fmt.Errorf("gdbjit: internal error: %w", err)
	}
	return out, nil
}

// shtX86_64Unwind is SHT_X86_64_UNWIND, the section type the x86-64
// psABI gives .eh_frame (debug/elf has no name for it).
const shtX86_64Unwind = elf.SectionType(0x70000001)

// hostArch is the ABI of the symbol files: the running program's, whose
// code the JIT generates (x86-64 on a GOARCH arch does not know).
var hostArch = func() *arch.Arch {
	if a := arch.ForGOARCH(runtime.GOARCH); a != nil {
		return a
	}
	return arch.X86_64
}()

// ehFrameType is the section type of .eh_frame for a: the x86-64 psABI's
// SHT_X86_64_UNWIND, SHT_PROGBITS elsewhere (AArch64 has no type of its
// own).
func ehFrameType(a *arch.Arch) elf.SectionType {
	if a.Machine == elf.EM_X86_64 {
		return shtX86_64Unwind
	}
	return elf.SHT_PROGBITS
}

// ehEnc is the encoding of the symbol files' .eh_frame: 8-byte
// addresses, little-endian (the version and offset format are ignored
// for .eh_frame).
var ehEnc = dwarf.Default64

// cie returns the CIE of p's FDE.
func (p *Proc) cie() frame.CIE {
	if p.CIE != nil {
		return *p.CIE
	}
	return frame.StandardCIE(hostArch)
}

// symfileEHFrame returns the .eh_frame of the procedures of groups that
// have CFI (nil when none has): one FDE each, in address order, with the
// FDE pointer encoding DW_EH_PE_absptr. The section is not SHF_ALLOC:
// it has no run-time address of its own (the bytes are read from the
// symbol file, wherever its copy lies), so its pointers may not be
// relative to one; absolute pc_begin values need none, and gdb and LLDB
// both read such an .eh_frame from a JIT symbol file (tested).
func symfileEHFrame(groups [][]Proc) ([]byte, error) {
	var fdes []frame.FDE
	std := frame.StandardCIE(hostArch)
	for _, g := range groups {
		for i := range g {
			p := &g[i]
			if p.CFI == nil {
				continue
			}
			f := frame.FDE{Start: p.Addr, Size: p.Size, Insns: p.CFI}
			if p.CIE != nil {
				f.CIE = p.CIE
			}
			fdes = append(fdes, f)
		}
	}
	if len(fdes) == 0 {
		return nil, nil
	}
	eh, _, err := frame.EncodeEHFrameAbsolute(std, fdes, ehEnc)
	if err != nil {
		return nil, fmt.Errorf("%w: call frame information: %w", ErrInvalidProc, err)
	}
	return eh, nil
}

// clone returns a deep copy of p: its slices, CIE and instruction
// expressions are its own (a nil CFI stays nil, an empty one empty).
func (p *Proc) clone() Proc {
	q := *p
	q.Lines = slices.Clone(p.Lines)
	q.CFI = cloneInsns(p.CFI)
	if p.CIE != nil {
		c := *p.CIE
		c.Initial = cloneInsns(c.Initial)
		q.CIE = &c
	}
	return q
}

func cloneInsns(in []frame.Insn) []frame.Insn {
	if in == nil {
		return nil
	}
	out := make([]frame.Insn, len(in))
	for i, x := range in {
		x.Expr = slices.Clone(x.Expr)
		out[i] = x
	}
	return out
}

func (p *Proc) validate() error {
	switch {
	case p.Name == "":
		return fmt.Errorf("%w: empty name at %#x", ErrInvalidProc, p.Addr)
	case p.Size == 0:
		return fmt.Errorf("%w: %q has size 0", ErrInvalidProc, p.Name)
	case p.Addr+p.Size < p.Addr:
		return fmt.Errorf("%w: %q [%#x, +%#x) wraps around", ErrInvalidProc, p.Name, p.Addr, p.Size)
	}
	if p.CFI != nil {
		// The encoder's checks (sorted PCs within [0, Size], offsets
		// that factor, registers that fit), made here so that a flush
		// never fails on a procedure Add accepted.
		if _, _, err := frame.EncodeEHFrameAbsolute(p.cie(), []frame.FDE{{Start: p.Addr, Size: p.Size, Insns: p.CFI}}, ehEnc); err != nil {
			return fmt.Errorf("%w: %q: call frame information: %w", ErrInvalidProc, p.Name, err)
		}
	}
	if p.File == "" {
		return nil
	}
	if p.Line <= 0 || int64(p.Line) > 1<<32-1 {
		return fmt.Errorf("%w: %q has line %d", ErrInvalidProc, p.Name, p.Line)
	}
	var prev uint64
	for _, l := range p.Lines {
		if l.Offset <= prev || l.Offset >= p.Size || l.Line <= 0 || int64(l.Line) > 1<<32-1 {
			return fmt.Errorf("%w: %q: line row {%#x, %d} out of order or range", ErrInvalidProc, p.Name, l.Offset, l.Line)
		}
		prev = l.Offset
	}
	return nil
}

// symfileDWARF returns the headers and contents of the DWARF 5 sections
// for groups (see symfileGroups): one compile unit per group, covering
// the group's code range loads[i], with its own line program (when a
// procedure of the group has a File) at the unit's DW_AT_stmt_list.
func symfileDWARF(groups [][]Proc, loads [][2]uint64) ([]elf.SectionHeader, [][]byte, error) {
	enc := dwarf.Default64
	lineStr := dwarf.NewStrTab()
	var lineSec []byte
	var units []*info.Unit
	for gi, ps := range groups {
		// File table: entry 0 and 1 are the first file (DWARF 5
		// numbering, as package line documents), then the others in
		// order of appearance.
		var files []line.File
		index := map[string]uint64{}
		for _, p := range ps {
			if p.File == "" {
				continue
			}
			if _, ok := index[p.File]; !ok {
				if len(files) == 0 {
					files = append(files, line.File{Name: p.File})
				}
				index[p.File] = uint64(len(files))
				files = append(files, line.File{Name: p.File})
			}
		}
		prog := &line.Program{Enc: enc, Files: files}
		var subs []*info.DIE
		for _, p := range ps {
			attrs := []info.Attr{
				{Name: dwarf.DW_AT_name, Value: info.String(p.Name)},
				{Name: dwarf.DW_AT_external, Value: info.Flag(true)},
				{Name: dwarf.DW_AT_low_pc, Value: info.Addr(p.Addr)},
				{Name: dwarf.DW_AT_high_pc, Value: info.Udata(p.Size)},
			}
			if p.File != "" {
				attrs = append(attrs,
					info.Attr{Name: dwarf.DW_AT_decl_file, Value: info.Udata(index[p.File])},
					info.Attr{Name: dwarf.DW_AT_decl_line, Value: info.Udata(uint64(p.Line))})
				rows := []line.Row{{Address: p.Addr, File: index[p.File], Line: uint32(p.Line), IsStmt: true}}
				for _, l := range p.Lines {
					rows = append(rows, line.Row{Address: p.Addr + l.Offset, File: index[p.File], Line: uint32(l.Line), IsStmt: true})
				}
				prog.Sequences = append(prog.Sequences, line.Sequence{Start: p.Addr, End: p.Addr + p.Size, Rows: rows})
			}
			subs = append(subs, &info.DIE{Tag: dwarf.DW_TAG_subprogram, Attrs: attrs})
		}
		lo, hi := loads[gi][0], loads[gi][1]
		attrs := []info.Attr{{Name: dwarf.DW_AT_producer, Value: info.String("elfimage jit/gdbjit")}}
		if len(files) > 0 {
			attrs = append(attrs, info.Attr{Name: dwarf.DW_AT_name, Value: info.String(files[0].Name)})
		}
		attrs = append(attrs,
			info.Attr{Name: dwarf.DW_AT_low_pc, Value: info.Addr(lo)},
			info.Attr{Name: dwarf.DW_AT_high_pc, Value: info.Udata(hi - lo)})
		if len(files) > 0 {
			b, err := prog.Encode(lineStr)
			if err != nil {
				return nil, nil, fmt.Errorf("gdbjit: line program: %w", err)
			}
			attrs = append(attrs, info.Attr{Name: dwarf.DW_AT_stmt_list, Value: info.SecOffset(uint64(len(lineSec)))})
			lineSec = append(lineSec, b...)
		}
		units = append(units, &info.Unit{Enc: enc, Root: &info.DIE{Tag: dwarf.DW_TAG_compile_unit, Attrs: attrs, Children: subs}})
	}
	str := dwarf.NewStrTab()
	infoSec, abbrev, err := info.Encode(units, str)
	if err != nil {
		return nil, nil, fmt.Errorf("gdbjit: debug info: %w", err)
	}
	debug := func(name string, strings bool) elf.SectionHeader {
		h := elf.SectionHeader{Name: name, Type: elf.SHT_PROGBITS, Addralign: 1}
		if strings {
			h.Flags, h.Entsize = elf.SHF_MERGE|elf.SHF_STRINGS, 1
		}
		return h
	}
	hdrs := []elf.SectionHeader{debug(".debug_abbrev", false), debug(".debug_info", false), debug(".debug_str", true)}
	data := [][]byte{abbrev, infoSec, str.Bytes()}
	if len(lineSec) > 0 {
		hdrs = append(hdrs, debug(".debug_line", false), debug(".debug_line_str", true))
		data = append(data, lineSec, lineStr.Bytes())
	}
	return hdrs, data, nil
}
