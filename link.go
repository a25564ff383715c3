package elfimage

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/expr"
	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/dwarf/info"
	"github.com/elfimage/elfimage/elfobj"
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
	// DebugFile, when not "", splits the image (see [Strip]): [WriteFile]
	// writes the stripped image at its path and the debug file at
	// DebugFile (a path, relative to the working directory when not
	// absolute), and the stripped image's .gnu_debuglink names
	// filepath.Base(DebugFile); [LinkSplit] returns both. [Link], which
	// returns one file, refuses it.
	DebugFile string
	// DropProcTable, with DebugFile, leaves the procedure table out of
	// the stripped image (it stays in the debug file): the image is then
	// smaller, and [Image.Procedure] needs the debug file.
	DropProcTable bool
}

// Link lays out m as an mmap-ready ELF image and returns its bytes.
//
// The image is ET_DYN, linked at address 0, with the layout of
// DESIGN.md: page-aligned PT_LOAD segments whose file offsets equal their
// addresses and whose file and memory sizes are equal, in the order
// R (ELF and program headers, .rela.dyn, .dynstr, .dynamic,
// .note.gnu.build-id), R+W (.data, only when the module has Data), R+X
// (.text), R (.rodata, .eh_frame_hdr, .eh_frame); then a tail that is
// never loaded: .symtab, .strtab, the DWARF sections, .shstrtab and the
// section header table. Each segment starts on a page boundary
// (arch.PageSize), so the writable and the executable one share no page
// with anything else; the tail follows the last, read-only, segment
// without padding. The build ID is the SHA-1 of the whole file with the
// ID zeroed.
//
// The order puts what a loader reads first at the start, in the first
// page unless there are many relocations: the headers, .dynamic, the
// relocations and the note (one pread); and the data page, the one page
// a load writes, right after it, whatever the size of the code and
// read-only data, so that it lies within the first 2 MiB − 4 KiB of the
// file: [Open] maps the file one page above a page whose page tables it
// keeps, and a store within that span neither allocates a page-table
// page nor makes Close free one, which would flush the whole TLB of the
// process. One order serves every size, as it costs a small image
// nothing at load: one more program header (56 bytes, in the page read
// anyway), but the same system calls and as many mappings after load (the
// last R segment and the tail are one read-only mapping) and page gaps in
// the file as with the data after the code (the first gap is now nearly a
// page: small files grow by a KB or two, never touched).
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
// Cost: linear in the size of the output; it allocates the output once,
// and a few hundred other objects whatever the module's size. Its largest
// scratch buffers (line rows, procedure records, the symbol map,
// .debug_str; about 4 MB for 10,000 procedures) are kept for the next
// Link until the second garbage collection after it. From 512
// procedures on, it encodes .eh_frame while it checks the names, builds
// the line program and the procedure table, and encodes .debug_info, on
// goroutines beside the one building the procedures' entries (two cores
// or more: GOMAXPROCS); on any module it hashes the build ID of the
// loaded segments while it copies the tail in. The output is the same
// byte for byte either way.
func Link(m *Module, opts LinkOptions) ([]byte, error) {
	if opts.DebugFile != "" {
		return nil, &LinkError{"module", "LinkOptions.DebugFile is set: LinkSplit returns the two files, WriteFile writes them"}
	}
	if len(m.Externs) > 0 {
		return nil, &LinkError{"module", fmt.Sprintf("Module.Externs names %q: only an object (LinkObject) may refer to symbols outside the module", m.Externs[0])}
	}
	l, err := newLinker(m, opts)
	if err != nil {
		return nil, err
	}
	out, err := l.link()
	if err == nil {
		l.release()
	}
	return out, err
}

// WriteFile links m and writes the image to path atomically: the bytes go
// to a temporary file in the same directory, which is synced and renamed
// over path, so a reader never sees a partial image. The file mode is 0644.
// With opts.DebugFile it writes the stripped image at path and its debug
// file at opts.DebugFile ([LinkSplit]), the debug file first, each
// atomically.
func WriteFile(path string, m *Module, opts LinkOptions) error {
	if opts.DebugFile != "" {
		img, dbg, err := LinkSplit(m, opts)
		if err != nil {
			return err
		}
		if err := writeFileAtomic(opts.DebugFile, dbg); err != nil {
			return err
		}
		return writeFileAtomic(path, img)
	}
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
	index int // into Procs, ROData or Data
}

// addr returns the link-time address of s, once laid out.
func (l *linker) addr(s symbol) uint64 {
	switch s.kind {
	case symProc:
		return l.procAddr[s.index]
	case symROData:
		return l.roAddr[s.index]
	}
	return l.dataAddr[s.index]
}

type linker struct {
	m    *Module
	a    *arch.Arch
	enc  dwarf.Encoding
	opts LinkOptions
	syms map[string]symbol

	procAddr  []uint64
	roAddr    []uint64
	dataAddr  []uint64
	names     []uint32 // .strtab offsets: the file, then procedures, read-only data, data
	entry     uint64
	textStart uint64
	textEnd   uint64
	object    bool          // LinkObject: an ET_REL for the system linker
	slab      *dieSlab      // the current batch's (buildInfo)
	str       *dwarf.StrTab // .debug_str (buildDWARF)
	symsRoom  int           // the number of names syms was made for
	// newCFI's result when it runs on its own goroutine (startCFI): that
	// goroutine writes cfi and cfiErr, then closes cfiDone; nothing reads
	// them before cfiDone is closed.
	cfiDone chan struct{}
	cfi     *cfiState
	cfiErr  error
	// Reused from one procedure to the next by buildInfo.
	pv     procVars
	params varScope
	env0   [1]*varScope
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
	l := &linker{m: m, a: a, enc: enc, opts: opts}
	l.syms = l.newSyms(len(m.Procs) + len(m.ROData) + len(m.Data))
	l.startCFI()
	if err := l.checkModule(); err != nil {
		l.dropCFI() // newCFI reads the model: done before Link returns
		return nil, err
	}
	return l, nil
}

// startCFI starts newCFI on another goroutine for a large module, to run
// while checkModule checks the names: newCFI reads only the architecture,
// the encoding and the procedures, which nothing changes until Link
// returns, and writes only its own result. On a small module, or one
// core, newCFI runs when [linker.awaitCFI] asks for it, after the checks.
func (l *linker) startCFI() {
	if len(l.m.Procs) < parallelProcs || runtime.GOMAXPROCS(0) < 2 {
		return
	}
	l.cfiDone = make(chan struct{})
	go func() {
		defer close(l.cfiDone)
		l.cfi, l.cfiErr = l.newCFI()
	}()
}

// awaitCFI returns newCFI's result, waiting for the goroutine startCFI
// started, or running newCFI now. Its errors come where newCFI's came when
// it ran after the checks: the caller asks once the model has passed
// checkModule (and countRelative), so an error of the model is reported
// as before.
func (l *linker) awaitCFI() (*cfiState, error) {
	if l.cfiDone == nil {
		return l.newCFI()
	}
	<-l.cfiDone
	return l.cfi, l.cfiErr
}

// dropCFI waits for the goroutine startCFI started, if any, when the
// link stops before it asks for the result.
func (l *linker) dropCFI() {
	if l.cfiDone != nil {
		<-l.cfiDone
	}
}

// checkModule checks the names, sizes and alignments of the module's
// objects and fills l.syms.
func (l *linker) checkModule() error {
	m, a := l.m, l.a
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
		l.syms[name] = symbol{kind: k, index: i}
		return nil
	}
	if len(m.Procs) == 0 {
		return &LinkError{"module", "no procedures"}
	}
	linkNames := map[string]int{}
	for i, p := range m.Procs {
		if p == nil {
			return &LinkError{"module", fmt.Sprintf("%s is nil", objectAt(symProc, i))}
		}
		if err := add(p.Name, symProc, i); err != nil {
			return err
		}
		if p.LinkName != "" {
			if strings.IndexByte(p.LinkName, 0) >= 0 {
				return &LinkError{"proc " + p.Name, fmt.Sprintf("LinkName %q contains a NUL byte", p.LinkName)}
			}
			if prev, dup := linkNames[p.LinkName]; dup {
				return &LinkError{"proc " + p.Name, fmt.Sprintf("LinkName %q is also the LinkName of %s", p.LinkName, objectAt(symProc, prev))}
			}
			linkNames[p.LinkName] = i
		}
		if len(p.Code) == 0 {
			return &LinkError{"proc " + p.Name, "Code is empty"}
		}
		if err := checkAlign(p.Align, a.PageSize); err != nil {
			return &LinkError{"proc " + p.Name, "Align: " + err.Error()}
		}
		if len(p.Params) > native.MaxArgs {
			return &LinkError{"proc " + p.Name, fmt.Sprintf("Params: %d parameters, more than the %d native.Call passes in registers", len(p.Params), native.MaxArgs)}
		}
	}
	for i, d := range m.ROData {
		if d == nil {
			return &LinkError{"module", fmt.Sprintf("%s is nil", objectAt(symROData, i))}
		}
		if err := add(d.Name, symROData, i); err != nil {
			return err
		}
	}
	for i, d := range m.Data {
		if d == nil {
			return &LinkError{"module", fmt.Sprintf("%s is nil", objectAt(symData, i))}
		}
		if err := add(d.Name, symData, i); err != nil {
			return err
		}
	}
	for _, d := range append(append([]*Datum{}, m.ROData...), m.Data...) {
		if err := checkAlign(d.Align, a.PageSize); err != nil {
			return &LinkError{"datum " + d.Name, err.Error()}
		}
	}
	for i, p := range m.Procs {
		// A symbol names one object: a LinkName is no other's Name.
		if prev, dup := l.syms[p.LinkName]; p.LinkName != "" && dup && !(prev.kind == symProc && prev.index == i) {
			return &LinkError{"proc " + p.Name, fmt.Sprintf("LinkName %q is also the Name of %s", p.LinkName, objectAt(prev.kind, prev.index))}
		}
	}
	if m.Entry != "" {
		s, ok := l.syms[m.Entry]
		if !ok || s.kind != symProc {
			return &LinkError{"module", fmt.Sprintf("entry %q is not a procedure", m.Entry)}
		}
	}
	return nil
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
	if len(code) == 1 && code[0] >= byte(dwarf.DW_OP_reg0) && code[0] <= byte(dwarf.DW_OP_reg31) &&
		int(code[0]-byte(dwarf.DW_OP_reg0)) < l.a.NumDWARFRegs() {
		return nil // the common case, a register of the ABI: nothing to decode
	}
	ops, err := expr.Decode(code, expr.Params{AddrSize: uint8(l.a.PtrSize), Order: binary.LittleEndian, Format: l.enc.Format})
	if err != nil {
		var fe *FormatError
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

// layBlocks places blocks one after the other, each at its alignment, as
// the contents of a section whose start is aligned to the largest
// alignment and at least to minAlign (so that sh_addr % sh_addralign ==
// 0). It returns the blocks' offsets from the section's start, the
// section's size and its alignment; the offsets hold wherever the section
// starts.
func layBlocks(blocks []block, minAlign uint64) (offs []uint64, size, align uint64) {
	align = max(minAlign, 1)
	for _, b := range blocks {
		align = max(align, b.align)
	}
	offs = make([]uint64, len(blocks))
	for i, b := range blocks {
		size = alignUp(size, b.align)
		offs[i] = size
		size += b.size
	}
	return offs, size, align
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
// p_offset and p_filesz give the section; p_memsz is 0, as the tail is
// not loaded, and p_vaddr and p_paddr equal p_offset, past every loaded
// address: objcopy and strip, which place a segment's sections by their
// addresses, then find none of the loaded sections in it (with p_vaddr
// 0 a table longer than the ELF and program headers took in .rela.dyn,
// .dynstr and .dynamic, and the stripped image had a PTProcTable with
// p_memsz set, which Open refuses).
const (
	PTProcTable   = elf.ProgType(0x6e1f0001)
	PTLineProgram = elf.ProgType(0x6e1f0002)
	PTLineStrings = elf.ProgType(0x6e1f0003)
)

// symSize is sizeof(Elf64_Sym), for the readers of .symtab in this
// package; the other ELF structure sizes are in image.go.
const symSize = 24

// shtX86_64Unwind is SHT_X86_64_UNWIND, the x86-64 psABI's section type
// for .eh_frame (section 4.2.4), which debug/elf lacks.
const shtX86_64Unwind = elf.SectionType(0x70000001)

// builtSection is a non-loaded section built before the file is laid out:
// its header, its contents and the offsets in them of absolute addresses
// (for SectionRebase); sec is the writer's, once added.
type builtSection struct {
	hdr   elf.SectionHeader
	data  []byte
	addrs []uint64
	// offsets are the fields holding offsets into other sections, which
	// an object relocates (LinkObject).
	offsets []info.OffsetField
	sec     *elfobj.Section
}

// debugSection returns a tail section of debug information; strings
// marks a string section (SHF_MERGE|SHF_STRINGS, one-byte entries).
func debugSection(name string, data []byte, strings bool) builtSection {
	t := builtSection{hdr: elf.SectionHeader{Name: name, Type: elf.SHT_PROGBITS, Addralign: 1}, data: data}
	if strings {
		t.hdr.Flags = elf.SHF_MERGE | elf.SHF_STRINGS
		t.hdr.Entsize = 1
	}
	return t
}

// program is a program header of the image, planned before the layout:
// the segment runs from the start of section first (nil: the start of
// the file) to the end of section last; a tail program (not loaded) has
// p_vaddr and p_memsz 0 and names its section, which exists only once
// the tail is built; PT_GNU_STACK has neither.
type program struct {
	typ         elf.ProgType
	flags       elf.ProgFlag
	align       uint64
	first, last *elfobj.Section
	tail        string
}

// header returns the program header once the sections are laid out.
func (p *program) header() elf.ProgHeader {
	h := elf.ProgHeader{Type: p.typ, Flags: p.flags, Align: p.align}
	if p.last == nil {
		return h // PT_GNU_STACK
	}
	var start uint64
	if p.first != nil {
		start = p.first.Offset
	}
	h.Off = start
	h.Filesz = p.last.Offset + p.last.Size - start
	h.Vaddr, h.Paddr = start, start
	if p.tail == "" {
		h.Memsz = h.Filesz
	}
	return h
}

// patch is a resolved relocation: the value to store at a link-time
// address, in 4 (PC32) or 8 (Abs64) little-endian bytes.
type patch struct {
	at   uint64
	v    uint64
	size uint8
}

// link lays out and writes the image with the two phases of package
// elfobj's writer: reserve every range of the file in order (the loaded
// segments, then the tail built once addresses are known), then write
// each once in the same order.
//
// The goroutines of a large link (see parallelProcs), in the order they
// run, and what each one owns:
//   - newCFI (startCFI): the CFI's FDEs and the encoded .eh_frame, while
//     newLinker's goroutine checks the names; link waits for it
//     (awaitCFI) before the layout, whose tail offsets depend on the
//     size of .eh_frame.
//   - In buildDWARF, once addresses are known: the line program and the
//     procedure table (one goroutine, its own buffers), and the
//     .debug_info encoder (info.UnitWriter, .debug_str and the batches
//     handed to it), beside the builder of the procedures' entries, which
//     runs on link's goroutine; buildDWARF waits for both.
//   - The build-ID hash (elfobj.Writer.HashWritten): the SHA-1 of the
//     bytes already written, which nobody writes again, while link copies
//     the tail in; Finish waits for it.
//
// Each section is written by one goroutine in model order, so the output
// does not depend on scheduling; errors are reported in the order of the
// steps when they ran one after another.
func (l *linker) link() ([]byte, error) {
	m := l.m
	page := l.a.PageSize
	nRel, err := l.countRelative()
	if err != nil {
		return nil, err
	}
	// .eh_frame is encoded once, before any address is known: its size
	// decides where the tail goes; the writer fills in the addresses.
	cfi, err := l.awaitCFI()
	if err != nil {
		return nil, err
	}

	// The sections of the loaded segments, in file order (see Link): R
	// (.rela.dyn, .dynstr, .dynamic, the build ID note), R+W (.data),
	// R+X (.text), R (.rodata, .eh_frame_hdr, .eh_frame). What the loader
	// reads before it maps anything comes first: the headers, .dynamic,
	// the relocations and the note, in the file's first page unless
	// .rela.dyn is large, so that one pread has them. The note is not
	// first, as GNU ld puts it: GNU objcopy and strip then make the first
	// of the tail's program headers (whose section they remove) cover the
	// note instead of nothing.
	w := elfobj.NewWriter(elf.ELFCLASS64, elf.ELFDATA2LSB)
	add := func(name string, typ elf.SectionType, flags elf.SectionFlag, align uint64) *elfobj.Section {
		return w.AddSection(elf.SectionHeader{Name: name, Type: typ, Flags: flags, Addralign: align})
	}
	var rodata, rela, dynstr, dynamic, data *elfobj.Section
	if nRel > 0 {
		// RELATIVE relocations refer to no symbol and apply to any
		// allocated section: .rela.dyn has sh_link and sh_info 0.
		rela = add(".rela.dyn", elf.SHT_RELA, elf.SHF_ALLOC, 8)
		// .dynamic must link to a string table (gABI); ours holds only
		// the empty string, as no entry names anything.
		dynstr = add(".dynstr", elf.SHT_STRTAB, elf.SHF_ALLOC, 1)
		dynamic = add(".dynamic", elf.SHT_DYNAMIC, elf.SHF_ALLOC, 8)
		dynamic.Link = uint32(dynstr.Index())
	}
	note := add(".note.gnu.build-id", elf.SHT_NOTE, elf.SHF_ALLOC, 4)
	dataOffs, dataSize, dataAlign := layBlocks(datumBlocks(m.Data), 8)
	if len(m.Data) > 0 {
		data = add(".data", elf.SHT_PROGBITS, elf.SHF_ALLOC|elf.SHF_WRITE, dataAlign)
	}
	blocks := make([]block, len(m.Procs))
	for i, p := range m.Procs {
		blocks[i] = block{align: orDefault(p.Align, 16), size: uint64(len(p.Code))}
	}
	textOffs, textSize, textAlign := layBlocks(blocks, 16)
	text := add(".text", elf.SHT_PROGBITS, elf.SHF_ALLOC|elf.SHF_EXECINSTR, textAlign)
	roOffs, roSize, roAlign := layBlocks(datumBlocks(m.ROData), 1)
	if len(m.ROData) > 0 {
		rodata = add(".rodata", elf.SHT_PROGBITS, elf.SHF_ALLOC, roAlign)
	}
	ehHdr := add(".eh_frame_hdr", elf.SHT_PROGBITS, elf.SHF_ALLOC, 4)
	ehType := elf.SHT_PROGBITS
	if l.a.Machine == elf.EM_X86_64 {
		ehType = shtX86_64Unwind // the x86-64 psABI's type for .eh_frame
	}
	ehFrame := add(".eh_frame", ehType, elf.SHF_ALLOC, 8)

	// The program headers, planned once: their number is the table's
	// size, and the write phase emits exactly these.
	progs := []program{{typ: elf.PT_LOAD, flags: elf.PF_R, align: page, last: note}}
	if data != nil {
		progs = append(progs, program{typ: elf.PT_LOAD, flags: elf.PF_R | elf.PF_W, align: page, first: data, last: data})
	}
	roFirst := ehHdr
	if rodata != nil {
		roFirst = rodata
	}
	progs = append(progs,
		program{typ: elf.PT_LOAD, flags: elf.PF_R | elf.PF_X, align: page, first: text, last: text},
		program{typ: elf.PT_LOAD, flags: elf.PF_R, align: page, first: roFirst, last: ehFrame})
	if dynamic != nil {
		progs = append(progs, program{typ: elf.PT_DYNAMIC, flags: elf.PF_R, align: 8, first: dynamic, last: dynamic})
	}
	progs = append(progs,
		program{typ: elf.PT_GNU_EH_FRAME, flags: elf.PF_R, align: 4, first: ehHdr, last: ehHdr},
		program{typ: elf.PT_NOTE, flags: elf.PF_R, align: 4, first: note, last: note},
		program{typ: elf.PT_GNU_STACK, flags: elf.PF_R | elf.PF_W, align: 16},
		program{typ: PTLineProgram, flags: elf.PF_R, align: 1, tail: ".debug_line"})
	if l.enc.Version >= 5 {
		progs = append(progs, program{typ: PTLineStrings, flags: elf.PF_R, align: 1, tail: ".debug_line_str"})
	}
	progs = append(progs, program{typ: PTProcTable, flags: elf.PF_R, align: 1, tail: meta.SectionProcs})

	// Reserve the loaded segments; each starts on a page. The tail
	// follows the last one, read-only, without a gap: no tail byte
	// shares a page with a writable or executable segment.
	var dynstrTab elfobj.StringTable
	w.ReserveFileHeader()
	w.ReserveProgramHeaders(len(progs))
	if rela != nil {
		w.ReserveRela(rela, nRel)
		w.ReserveStringTable(dynstr, &dynstrTab)
		w.ReserveDynamic(dynamic, dynEntries)
	}
	w.ReserveSectionData(note, elfobj.BuildIDNoteSize)
	if data != nil {
		w.ReserveAlign(page)
		w.ReserveSectionData(data, dataSize)
	}
	w.ReserveAlign(page)
	w.ReserveSectionData(text, textSize)
	w.ReserveAlign(page)
	if rodata != nil {
		w.ReserveSectionData(rodata, roSize)
	}
	w.ReserveSectionData(ehHdr, uint64(cfi.hdrSize()))
	w.ReserveSectionData(ehFrame, uint64(cfi.eh.Size()))
	if err := w.Err(); err != nil {
		return nil, fmt.Errorf("elfimage: internal error: %w", err)
	}
	for _, s := range []*elfobj.Section{rela, dynstr, dynamic, note, data, text, rodata, ehHdr, ehFrame} {
		if s != nil {
			s.Addr = s.Offset // linked at 0: addresses are file offsets
		}
	}
	at := func(base *elfobj.Section, offs []uint64) []uint64 {
		for i := range offs {
			offs[i] += base.Addr
		}
		return offs
	}
	l.procAddr = at(text, textOffs)
	l.textStart, l.textEnd = text.Addr, text.Addr+text.Size
	if rodata != nil {
		l.roAddr = at(rodata, roOffs)
	}
	if data != nil {
		l.dataAddr = at(data, dataOffs)
	}
	if m.Entry != "" {
		l.entry = l.addr(l.syms[m.Entry])
	}
	cfi.setAddrs(l.procAddr)

	// The tail: symbols and DWARF depend on addresses only, so they are
	// built now, then added and reserved in file order.
	symtab := add(".symtab", elf.SHT_SYMTAB, 0, 8)
	strtab := add(".strtab", elf.SHT_STRTAB, 0, 1)
	strs := l.reserveSymbols(w)
	tail, err := l.buildDWARF()
	if err != nil {
		return nil, err
	}
	if l.opts.DebugFrame {
		df, addrs, err := cfi.debugFrame(l)
		if err != nil {
			return nil, err
		}
		tail = append(tail, builtSection{hdr: elf.SectionHeader{Name: ".debug_frame", Type: elf.SHT_PROGBITS, Addralign: 8}, data: df, addrs: addrs})
	}
	for i := range tail {
		tail[i].sec = w.AddSection(tail[i].hdr)
	}
	rebase := add(SectionRebase, elf.SHT_PROGBITS, 0, 1)
	rebaseData := encodeRebase(tail)
	w.ReserveSymtab(symtab, strtab)
	w.ReserveStringTable(strtab, strs)
	for _, t := range tail {
		w.ReserveSectionData(t.sec, uint64(len(t.data)))
	}
	w.ReserveSectionData(rebase, uint64(len(rebaseData)))
	shstrtab := w.ReserveShstrtab()
	w.ReserveSectionHeaders()
	for i := range progs {
		p := &progs[i]
		if p.tail == "" {
			continue
		}
		for _, t := range tail {
			if t.hdr.Name == p.tail {
				p.first, p.last = t.sec, t.sec
			}
		}
		if p.last == nil {
			return nil, fmt.Errorf("elfimage: internal error: no section %s for program header %v", p.tail, p.typ)
		}
	}
	if err := w.Err(); err != nil {
		return nil, fmt.Errorf("elfimage: internal error: %w", err)
	}
	patches, relative, err := l.resolve(nRel)
	if err != nil {
		return nil, err
	}
	hdr, err := frame.EncodeEHFrameHdr(ehHdr.Addr, ehFrame.Addr, cfi.fdes, cfi.eh.FDEOffsets())
	if err != nil {
		return nil, &LinkError{"module", fmt.Sprintf(".eh_frame_hdr: %v", err)}
	}

	// Write everything once, in file order.
	w.WriteFileHeader(elfobj.FileHeader{Type: elf.ET_DYN, Machine: l.a.Machine, Entry: l.entry})
	for i := range progs {
		w.WriteProgramHeader(progs[i].header())
	}
	if rela != nil {
		for _, r := range relative {
			w.WriteRela(rela, r)
		}
		w.WriteStringTable(dynstr)
		for _, d := range [dynEntries]elf.Dyn64{
			{Tag: int64(elf.DT_STRTAB), Val: dynstr.Addr},
			{Tag: int64(elf.DT_STRSZ), Val: dynstr.Size},
			{Tag: int64(elf.DT_RELA), Val: rela.Addr},
			{Tag: int64(elf.DT_RELASZ), Val: rela.Size},
			{Tag: int64(elf.DT_RELAENT), Val: rela.Entsize},
			{Tag: int64(elf.DT_RELACOUNT), Val: uint64(len(relative))},
			{Tag: int64(elf.DT_NULL)},
		} {
			w.WriteDynamic(dynamic, d)
		}
	}
	w.WriteBuildID(note)
	if data != nil {
		b := w.SectionBytes(data)
		for i, d := range m.Data {
			copy(b[l.dataAddr[i]-data.Addr:], d.Bytes)
		}
		patches = applyPatches(b, data.Addr, patches)
	}
	b := w.SectionBytes(text)
	fill := textFill(l.a)
	for i, p := range m.Procs {
		o := l.procAddr[i] - text.Addr
		copy(b[o:], p.Code)
		// Fill alignment gaps in .text so a stray jump traps (textFill).
		end := o + uint64(len(p.Code))
		next := text.Size
		if i+1 < len(m.Procs) {
			next = l.procAddr[i+1] - text.Addr
		}
		for j := end; j < next; j++ {
			b[j] = fill
		}
	}
	patches = applyPatches(b, text.Addr, patches)
	if rodata != nil {
		b := w.SectionBytes(rodata)
		for i, d := range m.ROData {
			copy(b[roOffs[i]-rodata.Addr:], d.Bytes)
		}
		applyPatches(b, rodata.Addr, patches)
	}
	w.WriteSection(ehHdr, hdr)
	if err := cfi.eh.Put(w.SectionBytes(ehFrame), ehFrame.Addr, cfi.fdes); err != nil {
		return nil, &LinkError{"module", fmt.Sprintf("call frame information: %v", err)}
	}
	// The loaded segments are final: their build-ID hash runs on another
	// goroutine while the tail is copied in (elfobj.Writer.HashWritten;
	// the ID is the SHA-1 of the same bytes either way).
	w.HashWritten()
	l.writeSymbols(w, text, rodata, data)
	w.WriteStringTable(strtab)
	w.HashWritten()
	for _, t := range tail {
		w.WriteSection(t.sec, t.data)
	}
	w.WriteSection(rebase, rebaseData)
	w.WriteStringTable(shstrtab)
	w.WriteSectionHeaders()
	out, err := w.Finish()
	if err != nil {
		return nil, fmt.Errorf("elfimage: internal error: %w", err)
	}
	return out, nil
}

// countRelative returns the number of load-time relocations: the Abs64
// relocations of Module.Data, the only place they are allowed.
func (l *linker) countRelative() (int, error) {
	n := 0
	for _, d := range l.m.Data {
		for _, r := range d.Relocs {
			if r.Type == RelocAbs64 {
				n++
			}
		}
	}
	for _, d := range l.m.ROData {
		for _, r := range d.Relocs {
			if r.Type == RelocAbs64 {
				return 0, &LinkError{"datum " + d.Name, "an Abs64 relocation needs load-time relocation and is only allowed in Module.Data"}
			}
		}
	}
	for _, p := range l.m.Procs {
		for _, r := range p.Relocs {
			if r.Type == RelocAbs64 {
				return 0, &LinkError{"proc " + p.Name, "an Abs64 relocation needs load-time relocation and is only allowed in Module.Data"}
			}
		}
	}
	return n, nil
}

// resolve checks the link-time relocations and computes their values, in
// the order of the sections that hold them (.data, .text, .rodata; see
// applyPatches), and the load-time relocations (R_*_RELATIVE) of the
// Abs64 ones.
func (l *linker) resolve(nRel int) (patches []patch, relative []elf.Rela64, err error) {
	// One patch per relocation, placed in file order (.data, .text,
	// .rodata) while the relocations are checked in the model's order
	// (procedures first), so that a model with several bad ones reports
	// the same one whatever the layout.
	count := func(rs func(int) []Reloc, n int) int {
		c := 0
		for i := range n {
			c += len(rs(i))
		}
		return c
	}
	m := l.m
	nText := count(func(i int) []Reloc { return m.Procs[i].Relocs }, len(m.Procs))
	nRO := count(func(i int) []Reloc { return m.ROData[i].Relocs }, len(m.ROData))
	nData := count(func(i int) []Reloc { return m.Data[i].Relocs }, len(m.Data))
	patches = make([]patch, nRO+nText+nData)
	relative = make([]elf.Rela64, 0, nRel)
	apply := func(obj string, base uint64, code []byte, size int, rs []Reloc, out []patch) ([]patch, error) {
		for _, r := range rs {
			s, ok := l.syms[r.Symbol]
			if !ok {
				return nil, &LinkError{obj, fmt.Sprintf("relocation at %#x: unknown symbol %q", r.Offset, r.Symbol)}
			}
			p := base + uint64(r.Offset)
			switch r.Type {
			case RelocPC32:
				if uint64(r.Offset)+4 > uint64(size) {
					return nil, &LinkError{obj, fmt.Sprintf("PC32 relocation at %#x runs past the end (%#x bytes)", r.Offset, size)}
				}
				v := int64(l.addr(s)) + r.Addend - int64(p)
				if v < math.MinInt32 || v > math.MaxInt32 {
					return nil, &LinkError{obj, fmt.Sprintf("PC32 relocation at %#x to %q: value %#x does not fit 32 bits", r.Offset, r.Symbol, v)}
				}
				out[0] = patch{at: p, v: uint64(uint32(int32(v))), size: 4}
			case RelocAbs64:
				if uint64(r.Offset)+8 > uint64(size) {
					return nil, &LinkError{obj, fmt.Sprintf("Abs64 relocation at %#x runs past the end (%#x bytes)", r.Offset, size)}
				}
				v := uint64(int64(l.addr(s)) + r.Addend)
				out[0] = patch{at: p, v: v, size: 8}
				relative = append(relative, elf.Rela64{Off: p, Info: uint64(l.a.RelocRelative), Addend: int64(v)})
			case RelocAArch64Call26, RelocAArch64Jump26, RelocAArch64AdrPage21, RelocAArch64AddLo12, RelocAArch64Adr21:
				w, err := relocAArch64(l.a, obj, code, r, p, int64(l.addr(s))+r.Addend)
				if err != nil {
					return nil, err
				}
				out[0] = patch{at: p, v: uint64(w), size: 4}
			default:
				return nil, &LinkError{obj, fmt.Sprintf("relocation at %#x: unknown type %d", r.Offset, r.Type)}
			}
			out = out[1:]
		}
		return out, nil
	}
	out := patches[nData:]
	for i, p := range m.Procs {
		if len(p.Relocs) == 0 {
			continue // no object name to build
		}
		if out, err = apply("proc "+p.Name, l.procAddr[i], p.Code, len(p.Code), p.Relocs, out); err != nil {
			return nil, nil, err
		}
	}
	out = patches[nData+nText:]
	for i, d := range m.ROData {
		if out, err = apply("datum "+d.Name, l.roAddr[i], nil, len(d.Bytes), d.Relocs, out); err != nil {
			return nil, nil, err
		}
	}
	out = patches
	for i, d := range m.Data {
		if out, err = apply("datum "+d.Name, l.dataAddr[i], nil, len(d.Bytes), d.Relocs, out); err != nil {
			return nil, nil, err
		}
	}
	return patches, relative, nil
}

// applyPatches applies the leading patches that fall in the section
// contents b at address addr and returns the rest.
func applyPatches(b []byte, addr uint64, patches []patch) []patch {
	for len(patches) > 0 {
		p := patches[0]
		o := p.at - addr
		if p.at < addr || o >= uint64(len(b)) {
			break
		}
		if p.size == 4 {
			binary.LittleEndian.PutUint32(b[o:], uint32(p.v))
		} else {
			binary.LittleEndian.PutUint64(b[o:], p.v)
		}
		patches = patches[1:]
	}
	return patches
}

// dynEntries is the number of .dynamic entries Link writes.
const dynEntries = 7

// reserveSymbols reserves the symbol table's entries and strings: the
// null symbol, an STT_FILE symbol for the source, local symbols (internal
// procedures, data), then global procedures; within each group in
// address order. The strings go in the order of the model (the file,
// procedures, read-only data, data), each once: the linker refused
// duplicate names, so no lookup is needed.
func (l *linker) reserveSymbols(w *elfobj.Writer) *elfobj.StringTable {
	m := l.m
	n, size := 0, 0
	if m.File != "" {
		n++
		size += len(filepath.Base(m.File)) + 1
	}
	globals := 0
	for _, p := range m.Procs {
		size += len(linkName(p)) + 1
		if !p.Internal {
			globals++
		}
	}
	for _, ds := range [][]*Datum{m.ROData, m.Data} {
		for _, d := range ds {
			size += len(d.Name) + 1
		}
	}
	n += len(m.Procs) - globals + len(m.ROData) + len(m.Data)
	strs := &elfobj.StringTable{}
	strs.Grow(size)
	l.names = make([]uint32, 0, len(m.Procs)+len(m.ROData)+len(m.Data)+1)
	if m.File != "" {
		l.names = append(l.names, strs.AddUnique(filepath.Base(m.File)))
	}
	for _, p := range m.Procs {
		l.names = append(l.names, strs.AddUnique(linkName(p)))
	}
	for _, ds := range [][]*Datum{m.ROData, m.Data} {
		for _, d := range ds {
			l.names = append(l.names, strs.AddUnique(d.Name))
		}
	}
	w.ReserveLocalSymbols(n)
	w.ReserveGlobalSymbols(globals)
	return strs
}

// writeSymbols writes the symbols reserveSymbols reserved, in its order.
func (l *linker) writeSymbols(w *elfobj.Writer, text, rodata, data *elfobj.Section) {
	m := l.m
	names := l.names
	w.WriteNullSymbol()
	if m.File != "" {
		w.WriteSymbol(elf.Sym64{Name: names[0], Info: elf.ST_INFO(elf.STB_LOCAL, elf.STT_FILE), Shndx: uint16(elf.SHN_ABS)})
		names = names[1:]
	}
	procNames, dataNames := names[:len(m.Procs)], names[len(m.Procs):]
	shndx := func(s *elfobj.Section) uint16 { return uint16(s.Index()) }
	for i, p := range m.Procs {
		if p.Internal {
			w.WriteSymbol(elf.Sym64{Name: procNames[i], Info: elf.ST_INFO(elf.STB_LOCAL, elf.STT_FUNC), Shndx: shndx(text), Value: l.procAddr[i], Size: uint64(len(p.Code))})
		}
	}
	for i, d := range m.ROData {
		w.WriteSymbol(elf.Sym64{Name: dataNames[i], Info: elf.ST_INFO(elf.STB_LOCAL, elf.STT_OBJECT), Shndx: shndx(rodata), Value: l.roAddr[i], Size: uint64(len(d.Bytes))})
	}
	dataNames = dataNames[len(m.ROData):]
	for i, d := range m.Data {
		w.WriteSymbol(elf.Sym64{Name: dataNames[i], Info: elf.ST_INFO(elf.STB_LOCAL, elf.STT_OBJECT), Shndx: shndx(data), Value: l.dataAddr[i], Size: uint64(len(d.Bytes))})
	}
	for i, p := range m.Procs {
		if !p.Internal {
			w.WriteSymbol(elf.Sym64{Name: procNames[i], Info: elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC), Shndx: shndx(text), Value: l.procAddr[i], Size: uint64(len(p.Code))})
		}
	}
}
