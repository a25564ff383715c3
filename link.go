package elfimage

import (
	"crypto/sha1"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/expr"
	"github.com/elfimage/elfimage/meta"
	"github.com/elfimage/elfimage/native"
)

// LinkOptions tunes what Link writes. The zero value writes DWARF 5 in the
// 32-bit format with .eh_frame and .eh_frame_hdr.
type LinkOptions struct {
	// DWARF is the encoding of the debug sections: Version 3, 4 or 5 and
	// Format 32- or 64-bit; the zero value means dwarf.Default64 (version
	// 5, 32-bit offsets). AddrSize and ByteOrder are always taken from the
	// Module's Arch. .eh_frame is always in the 32-bit format its
	// consumers expect (LSB 5.0, section 10.6.1).
	DWARF dwarf.Encoding
	// DebugFrame also emits .debug_frame beside .eh_frame (same rows).
	DebugFrame bool
}

// Link lays out m as an mmap-ready ELF image and returns its bytes.
//
// The image is ET_DYN, linked at address 0, with the layout of
// DESIGN.md: page-aligned PT_LOAD segments whose file offsets equal their
// addresses and whose file and memory sizes are equal, in the order
// R (ELF and program headers, .rodata, .rela.dyn, .dynamic, .eh_frame_hdr,
// .eh_frame, .note.gnu.build-id), R+X (.text), R+W (.data, only when the
// module has Data); then a tail that is never loaded: .symtab, .strtab, the
// DWARF sections, .shstrtab and the section header table. Each segment
// starts on a page boundary (arch.PageSize); a writable or executable last
// segment is padded to a page boundary so that no tail byte shares a page
// with it. The build ID is the SHA-1 of the whole file with the ID zeroed.
//
// Link returns a *LinkError naming the procedure or datum at fault and the
// field when the model is invalid: a missing, duplicate or unknown name; a
// relocation outside its code or data or whose value does not fit; an
// Abs64 relocation outside Module.Data; line rows or CFI out of order or
// at or past the end of the procedure's code; a register number outside
// the ABI's (in CFI or a location expression); a location expression that
// does not decode; more than native.MaxArgs parameters; two parameters, or
// two variables of one scope, with one name; scopes that leave their
// procedure or enclosing scope, or overlap a sibling; live ranges out of
// order or outside the code; an invalid Type (see [Type]: a missing Elem
// or member type, a size its kind cannot have, a member past the end of
// its structure, a type that holds itself other than through a pointer, a
// CountVar naming no visible variable, two different types of one name).
// Cost: linear in the size of the output; it allocates the output once.
func Link(m *Module, opts LinkOptions) ([]byte, error) {
	l, err := newLinker(m, opts)
	if err != nil {
		return nil, err
	}
	return l.link()
}

// WriteFile links m and writes the image to path atomically: the bytes go
// to a temporary file in the same directory, which is synced and renamed
// over path, so a reader never sees a partial image. The file mode is 0644.
func WriteFile(path string, m *Module, opts LinkOptions) error {
	b, err := Link(m, opts)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, b)
}

func writeFileAtomic(path string, b []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(b); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// LinkError reports an invalid Module: which object (procedure or datum)
// and what is wrong with it.
type LinkError struct {
	Object string // "proc fib", "datum str.0", "module"
	Msg    string
}

func (e *LinkError) Error() string { return "elfimage: link " + e.Object + ": " + e.Msg }

// symbolKind tells what a symbol name refers to.
type symbolKind uint8

const (
	symProc symbolKind = iota + 1
	symROData
	symData
)

type symbol struct {
	kind  symbolKind
	index int    // into Procs, ROData or Data
	addr  uint64 // link-time address, once laid out
}

// section is one output section: where it is and what it holds.
type section struct {
	name      string
	typ       elf.SectionType
	flags     elf.SectionFlag
	addr, off uint64
	size      uint64
	align     uint64
	link      uint32
	info      uint32
	entsize   uint64
	data      []byte   // contents, when built before layout; nil for sections written in place
	addrs     []uint64 // offsets in data of absolute addresses (for .elfimage.rebase)
	index     uint32   // section header index
	nameOff   uint32
}

type linker struct {
	m    *Module
	a    *arch.Arch
	enc  dwarf.Encoding
	opts LinkOptions
	syms map[string]*symbol

	procAddr  []uint64
	roAddr    []uint64
	dataAddr  []uint64
	relative  []elf.Rela64 // load-time relocations
	sections  []*section
	entry     uint64
	fileSize  uint64
	shoff     uint64
	textStart uint64
	textEnd   uint64
}

func newLinker(m *Module, opts LinkOptions) (*linker, error) {
	a := m.Arch
	if a == nil {
		a = arch.X86_64
	}
	enc := opts.DWARF
	if enc.Version == 0 {
		enc = dwarf.Default64
	}
	enc.AddrSize = uint8(a.PtrSize)
	enc.ByteOrder = binary.LittleEndian
	if err := enc.Validate(); err != nil {
		return nil, &LinkError{"module", err.Error()}
	}
	if enc.Version < 3 {
		// Frame bases are DW_OP_call_frame_cfa, which DWARF 3 introduced.
		return nil, &LinkError{"module", fmt.Sprintf("DWARF version %d: the linker writes versions 3 to 5", enc.Version)}
	}
	l := &linker{m: m, a: a, enc: enc, opts: opts, syms: make(map[string]*symbol)}
	add := func(name string, k symbolKind, i int) error {
		if name == "" {
			return &LinkError{"module", fmt.Sprintf("%s has no Name", objectAt(k, i))}
		}
		if strings.IndexByte(name, 0) >= 0 {
			return &LinkError{"module", fmt.Sprintf("%s: Name %q contains a NUL byte", objectAt(k, i), name)}
		}
		if prev, dup := l.syms[name]; dup {
			return &LinkError{objectName(k, name), fmt.Sprintf("Name %q of %s is also the Name of %s", name, objectAt(k, i), objectAt(prev.kind, prev.index))}
		}
		l.syms[name] = &symbol{kind: k, index: i}
		return nil
	}
	if len(m.Procs) == 0 {
		return nil, &LinkError{"module", "no procedures"}
	}
	for i, p := range m.Procs {
		if p == nil {
			return nil, &LinkError{"module", fmt.Sprintf("%s is nil", objectAt(symProc, i))}
		}
		if err := add(p.Name, symProc, i); err != nil {
			return nil, err
		}
		if len(p.Code) == 0 {
			return nil, &LinkError{"proc " + p.Name, "Code is empty"}
		}
		if err := checkAlign(p.Align, a.PageSize); err != nil {
			return nil, &LinkError{"proc " + p.Name, "Align: " + err.Error()}
		}
		if len(p.Params) > native.MaxArgs {
			return nil, &LinkError{"proc " + p.Name, fmt.Sprintf("Params: %d parameters, more than the %d native.Call passes in registers", len(p.Params), native.MaxArgs)}
		}
	}
	for i, d := range m.ROData {
		if d == nil {
			return nil, &LinkError{"module", fmt.Sprintf("%s is nil", objectAt(symROData, i))}
		}
		if err := add(d.Name, symROData, i); err != nil {
			return nil, err
		}
	}
	for i, d := range m.Data {
		if d == nil {
			return nil, &LinkError{"module", fmt.Sprintf("%s is nil", objectAt(symData, i))}
		}
		if err := add(d.Name, symData, i); err != nil {
			return nil, err
		}
	}
	for _, d := range append(append([]*Datum{}, m.ROData...), m.Data...) {
		if err := checkAlign(d.Align, a.PageSize); err != nil {
			return nil, &LinkError{"datum " + d.Name, err.Error()}
		}
	}
	if m.Entry != "" {
		s, ok := l.syms[m.Entry]
		if !ok || s.kind != symProc {
			return nil, &LinkError{"module", fmt.Sprintf("entry %q is not a procedure", m.Entry)}
		}
	}
	return l, nil
}

// objectAt names the i-th object of a kind by where the model holds it.
func objectAt(k symbolKind, i int) string {
	switch k {
	case symProc:
		return fmt.Sprintf("procedure %d (Module.Procs[%d])", i, i)
	case symROData:
		return fmt.Sprintf("datum %d of Module.ROData", i)
	}
	return fmt.Sprintf("datum %d of Module.Data", i)
}

// objectName is the LinkError.Object of a named object.
func objectName(k symbolKind, name string) string {
	if k == symProc {
		return "proc " + name
	}
	return "datum " + name
}

// checkExpr checks a location expression of the model: that it decodes
// (DWARF 5 section 7.7.1) and names only registers of the ABI.
func (l *linker) checkExpr(code []byte) error {
	ops, err := expr.Decode(code, expr.Params{AddrSize: uint8(l.a.PtrSize), Order: binary.LittleEndian, Format: l.enc.Format})
	if err != nil {
		var fe *dwarf.FormatError
		if errors.As(err, &fe) {
			return fmt.Errorf("%s at byte %d of % x", fe.Msg, fe.Offset, code)
		}
		return err
	}
	for _, o := range ops {
		if r, ok := o.Reg(); ok && int(r) >= l.a.NumDWARFRegs() {
			return fmt.Errorf("%v names register %d, outside the %s ABI's registers 0-%d", o, r, l.a.Name, l.a.NumDWARFRegs()-1)
		}
	}
	return nil
}

// block is a piece of a section to lay out: its alignment and size in
// bytes.
type block struct{ align, size uint64 }

// datumBlocks returns the blocks of data (default alignment 8).
func datumBlocks(ds []*Datum) []block {
	b := make([]block, len(ds))
	for i, d := range ds {
		b[i] = block{align: orDefault(d.Align, 8), size: uint64(len(d.Bytes))}
	}
	return b
}

// layBlocks places blocks one after the other from off, each at its
// alignment, as the contents of section s, whose start is aligned to the
// largest alignment (so that sh_addr % sh_addralign == 0). It returns the
// blocks' addresses and the end of the section.
func layBlocks(s *section, off uint64, blocks []block) (addrs []uint64, end uint64) {
	s.align = max(s.align, 1)
	for _, b := range blocks {
		s.align = max(s.align, b.align)
	}
	start := alignUp(off, s.align)
	off = start
	addrs = make([]uint64, len(blocks))
	for i, b := range blocks {
		off = alignUp(off, b.align)
		addrs[i] = off
		off += b.size
	}
	s.off, s.addr, s.size = start, start, off-start
	return addrs, off
}

// checkAlign accepts 0 (the default) and powers of two up to the page
// size: the loader maps images at a page-aligned base, so no larger
// alignment could be honoured at run time.
func checkAlign(a int, page uint64) error {
	if a < 0 || a&(a-1) != 0 || uint64(a) > page {
		return fmt.Errorf("alignment %d is not a power of two up to the page size %d", a, page)
	}
	return nil
}

func orDefault(a, d int) uint64 {
	if a == 0 {
		return uint64(d)
	}
	return uint64(a)
}

// Program header types, in the OS-specific range, that point at the tail
// sections a runtime queries, so that it finds them from the program
// headers it already read at load, without reading the section headers:
// PTProcTable at the procedure table (.elfimage.procs, package meta),
// PTLineProgram at .debug_line and PTLineStrings at .debug_line_str. Their
// p_offset and p_filesz give the section; p_vaddr and p_memsz are 0, as
// the tail is not loaded.
const (
	PTProcTable   = elf.ProgType(0x6e1f0001)
	PTLineProgram = elf.ProgType(0x6e1f0002)
	PTLineStrings = elf.ProgType(0x6e1f0003)
)

// tailPrograms maps the tail sections that get a program header to its type.
var tailPrograms = map[string]elf.ProgType{
	meta.SectionProcs: PTProcTable, ".debug_line": PTLineProgram, ".debug_line_str": PTLineStrings,
}

// symSize is sizeof(Elf64_Sym); the other ELF structure sizes are in image.go.
const symSize = 24

// shtX86_64Unwind is SHT_X86_64_UNWIND, the x86-64 psABI's section type
// for .eh_frame (section 4.2.4), which debug/elf lacks.
const shtX86_64Unwind = elf.SectionType(0x70000001)

// buildIDSize is the size of the SHA-1 build ID.
const buildIDSize = sha1.Size

// link runs the two phases: reserve (sizes and addresses), then write once.
func (l *linker) link() ([]byte, error) {
	m := l.m
	page := l.a.PageSize

	// Load-time relocations come from Abs64 relocations in Data; count
	// them first (their offsets are fixed once .data is placed).
	nRel := 0
	for _, d := range m.Data {
		for _, r := range d.Relocs {
			if r.Type == RelocAbs64 {
				nRel++
			}
		}
	}
	for _, d := range m.ROData {
		for _, r := range d.Relocs {
			if r.Type == RelocAbs64 {
				return nil, &LinkError{"datum " + d.Name, "an Abs64 relocation needs load-time relocation and is only allowed in Module.Data"}
			}
		}
	}
	for _, p := range m.Procs {
		for _, r := range p.Relocs {
			if r.Type == RelocAbs64 {
				return nil, &LinkError{"proc " + p.Name, "an Abs64 relocation needs load-time relocation and is only allowed in Module.Data"}
			}
		}
	}

	// The program headers: PT_LOAD R, PT_LOAD RX, [PT_LOAD RW], [PT_DYNAMIC],
	// PT_GNU_EH_FRAME, PT_NOTE, PT_GNU_STACK, PTProcTable, PTLineProgram,
	// [PTLineStrings].
	nPhdr := 7
	if l.enc.Version >= 5 {
		nPhdr++
	}
	if len(m.Data) > 0 {
		nPhdr++
	}
	if nRel > 0 {
		nPhdr++
	}

	// Phase 1: the sizes and addresses of the loaded segments.
	off := uint64(ehdrSize + nPhdr*phdrSize)
	newSec := func(name string, typ elf.SectionType, flags elf.SectionFlag, align uint64) *section {
		s := &section{name: name, typ: typ, flags: flags, align: align}
		l.sections = append(l.sections, s)
		return s
	}
	place := func(s *section, size uint64) {
		off = alignUp(off, s.align)
		s.off, s.addr, s.size = off, off, size
		off += size
	}

	var rodata *section
	if len(m.ROData) > 0 {
		rodata = newSec(".rodata", elf.SHT_PROGBITS, elf.SHF_ALLOC, 1)
		l.roAddr, off = layBlocks(rodata, off, datumBlocks(m.ROData))
	}
	var rela, dynstr, dynamic *section
	if nRel > 0 {
		rela = newSec(".rela.dyn", elf.SHT_RELA, elf.SHF_ALLOC, 8)
		rela.entsize = relaSize
		place(rela, uint64(nRel*relaSize))
		// .dynamic must link to a string table (gABI); ours holds only the
		// empty string, as no entry names anything.
		dynstr = newSec(".dynstr", elf.SHT_STRTAB, elf.SHF_ALLOC, 1)
		place(dynstr, 1)
		dynamic = newSec(".dynamic", elf.SHT_DYNAMIC, elf.SHF_ALLOC, 8)
		dynamic.entsize = dynSize
		place(dynamic, dynEntries*dynSize)
	}

	// The sizes of .eh_frame and .eh_frame_hdr do not depend on addresses;
	// encode once at address 0 to learn them.
	cfi, err := l.newCFI()
	if err != nil {
		return nil, err
	}
	ehHdr := newSec(".eh_frame_hdr", elf.SHT_PROGBITS, elf.SHF_ALLOC, 4)
	place(ehHdr, uint64(cfi.hdrSize()))
	ehFrame := newSec(".eh_frame", elf.SHT_PROGBITS, elf.SHF_ALLOC, 8)
	if l.a.Machine == elf.EM_X86_64 {
		// The x86-64 psABI gives .eh_frame its own section type.
		ehFrame.typ = shtX86_64Unwind
	}
	place(ehFrame, uint64(cfi.ehFrameSize))
	note := newSec(".note.gnu.build-id", elf.SHT_NOTE, elf.SHF_ALLOC, 4)
	place(note, 16+buildIDSize) // namesz, descsz, type, "GNU\0", desc
	rEnd := off

	// R+X: .text.
	off = alignUp(off, page)
	text := newSec(".text", elf.SHT_PROGBITS, elf.SHF_ALLOC|elf.SHF_EXECINSTR, 16)
	blocks := make([]block, len(m.Procs))
	for i, p := range m.Procs {
		blocks[i] = block{align: orDefault(p.Align, 16), size: uint64(len(p.Code))}
	}
	l.procAddr, off = layBlocks(text, off, blocks)
	l.textStart, l.textEnd = text.addr, off
	loadEnd := off

	// R+W: .data.
	var data *section
	if len(m.Data) > 0 {
		off = alignUp(off, page)
		data = newSec(".data", elf.SHT_PROGBITS, elf.SHF_ALLOC|elf.SHF_WRITE, 8)
		l.dataAddr, off = layBlocks(data, off, datumBlocks(m.Data))
		loadEnd = off
	}
	// No tail byte may share a page with a writable or executable segment.
	off = alignUp(loadEnd, page)

	for _, s := range l.syms {
		switch s.kind {
		case symProc:
			s.addr = l.procAddr[s.index]
		case symROData:
			s.addr = l.roAddr[s.index]
		case symData:
			s.addr = l.dataAddr[s.index]
		}
	}
	if m.Entry != "" {
		l.entry = l.syms[m.Entry].addr
	}
	cfi.setAddrs(l.procAddr)

	// Phase 1b: the tail. Symbols and DWARF depend on addresses only, so
	// they are built now and placed.
	symtab, strtab, err := l.buildSymtab(text, data, rodata)
	if err != nil {
		return nil, err
	}
	tail := []*section{symtab, strtab}
	symtab.link = 0 // set below, once indices are known
	dbg, err := l.buildDWARF()
	if err != nil {
		return nil, err
	}
	tail = append(tail, dbg...)
	if l.opts.DebugFrame {
		df, addrs, err := cfi.debugFrame(l)
		if err != nil {
			return nil, err
		}
		tail = append(tail, &section{name: ".debug_frame", typ: elf.SHT_PROGBITS, align: 8, data: df, addrs: addrs})
	}
	rebase := &section{name: SectionRebase, typ: elf.SHT_PROGBITS, align: 1}
	shstrtab := &section{name: ".shstrtab", typ: elf.SHT_STRTAB, align: 1}
	tail = append(tail, rebase, shstrtab)
	l.sections = append(l.sections, tail...)

	// Section indices and names.
	shstr := dwarf.NewStrTab()
	for i, s := range l.sections {
		s.index = uint32(i + 1)
		s.nameOff = uint32(shstr.Add(s.name))
	}
	shstrtab.data = shstr.Bytes()
	rebase.data = encodeRebase(l.sections)
	symtab.link = strtab.index
	if dynamic != nil {
		// RELATIVE relocations refer to no symbol and apply to any
		// allocated section: .rela.dyn has sh_link and sh_info 0.
		dynamic.link = dynstr.index
	}
	for _, s := range tail {
		s.size = uint64(len(s.data))
		off = alignUp(off, s.align)
		s.off = off
		off += s.size
	}
	l.shoff = alignUp(off, 8)
	nShdr := len(l.sections) + 1
	l.fileSize = l.shoff + uint64(nShdr*shdrSize)

	// Phase 2: write everything once.
	out := make([]byte, l.fileSize)
	for i, p := range m.Procs {
		copy(out[l.procAddr[i]:], p.Code)
		// Fill alignment gaps in .text with int3 so a stray jump traps.
		end := l.procAddr[i] + uint64(len(p.Code))
		next := l.textEnd
		if i+1 < len(m.Procs) {
			next = l.procAddr[i+1]
		}
		for j := end; j < next; j++ {
			out[j] = 0xcc
		}
	}
	for i, d := range m.ROData {
		copy(out[l.roAddr[i]:], d.Bytes)
	}
	for i, d := range m.Data {
		copy(out[l.dataAddr[i]:], d.Bytes)
	}
	if err := l.relocate(out); err != nil {
		return nil, err
	}
	if rela != nil {
		l.writeDynamic(out, rela, dynstr, dynamic)
	}
	if err := cfi.write(l, out, ehHdr, ehFrame, text); err != nil {
		return nil, err
	}
	for _, s := range tail {
		copy(out[s.off:], s.data)
	}

	// Program headers.
	le := binary.LittleEndian
	var phdrs []elf.Prog64
	load := func(flags elf.ProgFlag, start, end uint64) {
		phdrs = append(phdrs, elf.Prog64{Type: uint32(elf.PT_LOAD), Flags: uint32(flags), Off: start,
			Vaddr: start, Paddr: start, Filesz: end - start, Memsz: end - start, Align: page})
	}
	load(elf.PF_R, 0, rEnd)
	load(elf.PF_R|elf.PF_X, text.addr, text.addr+text.size)
	if data != nil {
		load(elf.PF_R|elf.PF_W, data.addr, data.addr+data.size)
	}
	if dynamic != nil {
		phdrs = append(phdrs, elf.Prog64{Type: uint32(elf.PT_DYNAMIC), Flags: uint32(elf.PF_R), Off: dynamic.off,
			Vaddr: dynamic.addr, Paddr: dynamic.addr, Filesz: dynamic.size, Memsz: dynamic.size, Align: 8})
	}
	phdrs = append(phdrs,
		elf.Prog64{Type: uint32(elf.PT_GNU_EH_FRAME), Flags: uint32(elf.PF_R), Off: ehHdr.off,
			Vaddr: ehHdr.addr, Paddr: ehHdr.addr, Filesz: ehHdr.size, Memsz: ehHdr.size, Align: 4},
		elf.Prog64{Type: uint32(elf.PT_NOTE), Flags: uint32(elf.PF_R), Off: note.off,
			Vaddr: note.addr, Paddr: note.addr, Filesz: note.size, Memsz: note.size, Align: 4},
		elf.Prog64{Type: uint32(elf.PT_GNU_STACK), Flags: uint32(elf.PF_R | elf.PF_W), Align: 16},
	)
	for _, s := range tail {
		if t, ok := tailPrograms[s.name]; ok {
			phdrs = append(phdrs, elf.Prog64{Type: uint32(t), Flags: uint32(elf.PF_R), Off: s.off, Filesz: s.size, Align: 1})
		}
	}
	if len(phdrs) != nPhdr {
		return nil, fmt.Errorf("elfimage: internal error: %d program headers, reserved %d", len(phdrs), nPhdr)
	}
	for i, p := range phdrs {
		putProg64(out[ehdrSize+i*phdrSize:], p)
	}

	// ELF header.
	h := out[:ehdrSize]
	copy(h, elf.ELFMAG)
	h[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	h[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	h[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	h[elf.EI_OSABI] = byte(elf.ELFOSABI_NONE)
	le.PutUint16(h[16:], uint16(elf.ET_DYN))
	le.PutUint16(h[18:], uint16(l.a.Machine))
	le.PutUint32(h[20:], uint32(elf.EV_CURRENT))
	le.PutUint64(h[24:], l.entry)
	le.PutUint64(h[32:], ehdrSize)
	le.PutUint64(h[40:], l.shoff)
	le.PutUint32(h[48:], 0) // e_flags
	le.PutUint16(h[52:], ehdrSize)
	le.PutUint16(h[54:], phdrSize)
	le.PutUint16(h[56:], uint16(nPhdr))
	le.PutUint16(h[58:], shdrSize)
	le.PutUint16(h[60:], uint16(nShdr))
	le.PutUint16(h[62:], uint16(shstrtab.index))

	// Section headers (index 0 is the null section).
	for _, s := range l.sections {
		b := out[l.shoff+uint64(s.index)*shdrSize:]
		le.PutUint32(b[0:], s.nameOff)
		le.PutUint32(b[4:], uint32(s.typ))
		le.PutUint64(b[8:], uint64(s.flags))
		le.PutUint64(b[16:], s.addr)
		le.PutUint64(b[24:], s.off)
		le.PutUint64(b[32:], s.size)
		le.PutUint32(b[40:], s.link)
		le.PutUint32(b[44:], s.info)
		le.PutUint64(b[48:], s.align)
		le.PutUint64(b[56:], s.entsize)
	}

	// The build-ID note, computed over the file with the ID zeroed.
	n := out[note.off:]
	le.PutUint32(n[0:], 4)
	le.PutUint32(n[4:], buildIDSize)
	le.PutUint32(n[8:], uint32(ntGNUBuildID))
	copy(n[12:], "GNU\x00")
	sum := sha1.Sum(out)
	copy(n[16:], sum[:])
	return out, nil
}

func putProg64(b []byte, p elf.Prog64) {
	le := binary.LittleEndian
	le.PutUint32(b[0:], p.Type)
	le.PutUint32(b[4:], p.Flags)
	le.PutUint64(b[8:], p.Off)
	le.PutUint64(b[16:], p.Vaddr)
	le.PutUint64(b[24:], p.Paddr)
	le.PutUint64(b[32:], p.Filesz)
	le.PutUint64(b[40:], p.Memsz)
	le.PutUint64(b[48:], p.Align)
}

// relocate applies link-time relocations in place and records the
// load-time ones.
func (l *linker) relocate(out []byte) error {
	apply := func(obj string, base uint64, size int, rs []Reloc) error {
		for _, r := range rs {
			s, ok := l.syms[r.Symbol]
			if !ok {
				return &LinkError{obj, fmt.Sprintf("relocation at %#x: unknown symbol %q", r.Offset, r.Symbol)}
			}
			p := base + uint64(r.Offset)
			switch r.Type {
			case RelocPC32:
				if uint64(r.Offset)+4 > uint64(size) {
					return &LinkError{obj, fmt.Sprintf("PC32 relocation at %#x runs past the end (%#x bytes)", r.Offset, size)}
				}
				v := int64(s.addr) + r.Addend - int64(p)
				if v < math.MinInt32 || v > math.MaxInt32 {
					return &LinkError{obj, fmt.Sprintf("PC32 relocation at %#x to %q: value %#x does not fit 32 bits", r.Offset, r.Symbol, v)}
				}
				binary.LittleEndian.PutUint32(out[p:], uint32(int32(v)))
			case RelocAbs64:
				if uint64(r.Offset)+8 > uint64(size) {
					return &LinkError{obj, fmt.Sprintf("Abs64 relocation at %#x runs past the end (%#x bytes)", r.Offset, size)}
				}
				v := uint64(int64(s.addr) + r.Addend)
				binary.LittleEndian.PutUint64(out[p:], v)
				l.relative = append(l.relative, elf.Rela64{Off: p, Info: uint64(l.a.RelocRelative), Addend: int64(v)})
			default:
				return &LinkError{obj, fmt.Sprintf("relocation at %#x: unknown type %d", r.Offset, r.Type)}
			}
		}
		return nil
	}
	for i, p := range l.m.Procs {
		if err := apply("proc "+p.Name, l.procAddr[i], len(p.Code), p.Relocs); err != nil {
			return err
		}
	}
	for i, d := range l.m.ROData {
		if err := apply("datum "+d.Name, l.roAddr[i], len(d.Bytes), d.Relocs); err != nil {
			return err
		}
	}
	for i, d := range l.m.Data {
		if err := apply("datum "+d.Name, l.dataAddr[i], len(d.Bytes), d.Relocs); err != nil {
			return err
		}
	}
	return nil
}

// dynEntries is the number of .dynamic entries Link writes.
const dynEntries = 7

// writeDynamic writes the load-time relocations and the .dynamic entries
// that point the loader at them (gABI "Dynamic Section").
func (l *linker) writeDynamic(out []byte, rela, dynstr, dynamic *section) {
	le := binary.LittleEndian
	b := out[rela.off:]
	for i, r := range l.relative {
		le.PutUint64(b[i*relaSize:], r.Off)
		le.PutUint64(b[i*relaSize+8:], r.Info)
		le.PutUint64(b[i*relaSize+16:], uint64(r.Addend))
	}
	entries := [dynEntries]elf.Dyn64{
		{Tag: int64(elf.DT_STRTAB), Val: dynstr.addr},
		{Tag: int64(elf.DT_STRSZ), Val: dynstr.size},
		{Tag: int64(elf.DT_RELA), Val: rela.addr},
		{Tag: int64(elf.DT_RELASZ), Val: rela.size},
		{Tag: int64(elf.DT_RELAENT), Val: relaSize},
		{Tag: int64(elf.DT_RELACOUNT), Val: uint64(len(l.relative))},
		{Tag: int64(elf.DT_NULL)},
	}
	d := out[dynamic.off:]
	for i, e := range entries {
		le.PutUint64(d[i*dynSize:], uint64(e.Tag))
		le.PutUint64(d[i*dynSize+8:], e.Val)
	}
}

// buildSymtab builds .symtab and .strtab: a null symbol, an STT_FILE
// symbol for the source, local symbols (internal procedures, data), then
// global procedures. Within each group symbols are in address order.
func (l *linker) buildSymtab(text, data, rodata *section) (symtab, strtab *section, err error) {
	strs := dwarf.NewStrTab()
	le := binary.LittleEndian
	var locals, globals []byte
	put := func(dst []byte, name string, info byte, shndx uint16, value, size uint64) []byte {
		var b [symSize]byte
		le.PutUint32(b[0:], uint32(strs.Add(name)))
		b[4] = info
		b[5] = byte(elf.STV_DEFAULT)
		le.PutUint16(b[6:], shndx)
		le.PutUint64(b[8:], value)
		le.PutUint64(b[16:], size)
		return append(dst, b[:]...)
	}
	// Section indices are assigned later, in the order of l.sections; the
	// symbols need them now, so compute them the same way.
	idx := func(s *section) uint16 {
		for i, t := range l.sections {
			if t == s {
				return uint16(i + 1)
			}
		}
		return 0
	}
	locals = put(locals, "", 0, 0, 0, 0)
	if l.m.File != "" {
		locals = put(locals, filepath.Base(l.m.File), elf.ST_INFO(elf.STB_LOCAL, elf.STT_FILE), uint16(elf.SHN_ABS), 0, 0)
	}
	for i, p := range l.m.Procs {
		if p.Internal {
			locals = put(locals, p.Name, elf.ST_INFO(elf.STB_LOCAL, elf.STT_FUNC), idx(text), l.procAddr[i], uint64(len(p.Code)))
		} else {
			globals = put(globals, p.Name, elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC), idx(text), l.procAddr[i], uint64(len(p.Code)))
		}
	}
	for i, d := range l.m.ROData {
		locals = put(locals, d.Name, elf.ST_INFO(elf.STB_LOCAL, elf.STT_OBJECT), idx(rodata), l.roAddr[i], uint64(len(d.Bytes)))
	}
	for i, d := range l.m.Data {
		locals = put(locals, d.Name, elf.ST_INFO(elf.STB_LOCAL, elf.STT_OBJECT), idx(data), l.dataAddr[i], uint64(len(d.Bytes)))
	}
	symtab = &section{name: ".symtab", typ: elf.SHT_SYMTAB, align: 8, entsize: symSize,
		info: uint32(len(locals) / symSize), data: append(locals, globals...)}
	strtab = &section{name: ".strtab", typ: elf.SHT_STRTAB, align: 1, data: strs.Bytes()}
	return symtab, strtab, nil
}
