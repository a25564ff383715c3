package elfimage

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/elfimage/elfimage/formaterr"

	"github.com/elfimage/elfimage/addrmap"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/debugfile"
	"github.com/elfimage/elfimage/dwarf/line"
	"github.com/elfimage/elfimage/elfobj"
	"github.com/elfimage/elfimage/meta"
)

// FormatError is the error every elfimage decoder returns for malformed
// input, [formaterr.Error], under the root package's name, so that one
// errors.As catches the errors of the loader, the section-table reader,
// the queries, the rebase table and every decoder below them (ELF reader,
// DWARF, procedure table, jitdump, perf maps, core files). The loader sets
// Source to the file path (or the name given to [Load]), Offset to the file
// offset of the offending field (or of the structure holding it) and Field
// to its ELF spelling ("e_phoff", "p_filesz of program header 2",
// "r_offset of relocation 5"); the queries' DWARF errors name the section
// instead.
type FormatError = formaterr.Error

// ErrNoSection is wrapped by the error [Image.Section] returns when the image
// has no section of that name (or no section header table at all).
var ErrNoSection = errors.New("elfimage: no such section")

// Segment is one PT_LOAD segment of a loaded image: its link-time address
// (which equals its file offset), its size in bytes (file size = memory
// size) and its permissions. At run time it occupies
// [Image.Base()+Addr, Image.Base()+Addr+Size).
type Segment struct {
	Addr  uint64
	Size  uint64
	Flags elf.ProgFlag
}

// SectionHeader describes one entry of the section header table, read
// lazily from the non-loaded tail by [Image.Sections]. Offset and Size give
// the section's bytes [Offset, Offset+Size) in the file; since images map
// the file with offsets equal to link-time addresses, the same range
// relative to [Image.Base] is where the bytes are in memory.
type SectionHeader struct {
	Name      string
	Type      elf.SectionType
	Flags     elf.SectionFlag
	Addr      uint64 // link-time address (sh_addr)
	Offset    uint64 // file offset (sh_offset)
	Size      uint64 // bytes (sh_size); the file holds none for SHT_NOBITS
	Link      uint32
	Info      uint32
	Addralign uint64
	Entsize   uint64
}

// Image is an ELF image loaded into memory by [Open] or [Load]: the whole
// file mapped at [Image.Base] with per-segment protections applied,
// load-time relocations applied and the loaded range registered for
// [Lookup]. Its methods are safe for concurrent use. After [Image.Close]
// the memory is gone: no slice returned by an Image, nor any address inside
// it, may be used any more.
type Image struct {
	path       string
	arch       *arch.Arch
	mem        []byte // the whole mapping (whole pages)
	data       []byte // mem[:file size]
	mapped     bool
	anchor     unsafe.Pointer    // the page-table anchor below mem (place.go), or nil
	plan                         // what the loader validated: segments, tables, tail sections, notes
	debugFiles *debugfile.Finder // where a stripped image's debug file is looked for

	closeMu    sync.Mutex
	closed     bool
	closeHooks []closeHook // run by Close, latest first (OnClose)
	hookSeq    uint64      // identifies the next closeHook
	unmapErr   error       // munmap's, set by freeImage; read by Close when it ran there

	// debug holds the lazily built indexes of the debug queries
	// (query.go), allocated by the first query (dbg): an image that is
	// never asked about its debug information does not carry them.
	debug atomic.Pointer[debugState]
	// firstAsked is set by the first PositionAt, which may answer
	// without making the debug state (Image.firstPosition): an image
	// asked once pays for no state and no answer cache. Every later
	// query makes the state, so that answers are remembered from the
	// second on (the first's is not).
	firstAsked atomic.Bool

	// ref is the image's registry entry (addrmap.Map.InsertRef), part of
	// the Image so that a load allocates the Image alone. The registry
	// owns it once the image is registered.
	ref addrmap.Ref[*Image]
}

// dbg returns the image's debug query state, allocating it on first use.
func (im *Image) dbg() *debugState {
	if d := im.debug.Load(); d != nil {
		return d
	}
	im.debug.CompareAndSwap(nil, new(debugState))
	return im.debug.Load()
}

// positionState is the debug query state as [Image.PositionAt] allocates
// it when it is an image's first query: with the reader of the first line
// unit (debugState.seq0Mem) and the bytes of the first file path
// (debugState.pathMem) beside it, one allocation instead of three on the
// first PositionAt. The other queries allocate the debugState alone,
// and do not zero a reader they do not use.
type positionState struct {
	debugState
	line0 line.Reader
	path0 [filePathRoom]byte // the first file path's bytes (debugState.pathMem)
}

// indexPositionState is positionState for an image whose procedure
// table has a position index (meta.FlagPositions): PositionAt reads no
// line program there, so no reader is allocated (or zeroed) with it.
type indexPositionState struct {
	debugState
	path0 [filePathRoom]byte
}

// filePathRoom is the longest first file path that positionState holds
// in place; a longer one is allocated.
const filePathRoom = 128

// dbgPosition is dbg for PositionAt: a state allocated here is a
// positionState.
func (im *Image) dbgPosition() *debugState {
	if d := im.debug.Load(); d != nil {
		return d
	}
	// The table header's flags (the first query reads the header anyway)
	// say whether the query will read the line program.
	if sec := im.tail.get(PTProcTable); len(sec) >= meta.HeaderSize && sec[7]&meta.FlagPositions != 0 {
		ps := new(indexPositionState)
		ps.pathMem = ps.path0[:0]
		im.debug.CompareAndSwap(nil, &ps.debugState)
		return im.debug.Load()
	}
	ps := new(positionState)
	ps.seq0Mem = &ps.line0
	ps.pathMem = ps.path0[:0]
	im.debug.CompareAndSwap(nil, &ps.debugState)
	return im.debug.Load()
}

// Path returns the path given to [Open], or the name given to [Load].
func (im *Image) Path() string { return im.path }

// Arch returns the ABI the image was loaded for.
func (im *Image) Arch() *arch.Arch { return im.arch }

// Base returns the run-time address of link-time address 0: the image's
// byte at link-time address a is at Base()+a.
func (im *Image) Base() uintptr { return uintptr(unsafePointer(im.mem)) }

// Size returns the size in bytes of the loaded part, the end of the last
// PT_LOAD segment; [Base, Base+Size) is the range registered for [Lookup].
func (im *Image) Size() uint64 { return im.size }

// Entry returns the run-time address of the entry procedure (Base +
// e_entry), or 0 when the image has none (e_entry 0).
func (im *Image) Entry() uintptr {
	if im.entry == 0 {
		return 0
	}
	return im.Base() + uintptr(im.entry)
}

// Mapped reports whether the image was loaded by mapping its file (true)
// or by reading it into anonymous memory (false: the read fallback,
// LoadOptions.ForceRead, or [Load]).
func (im *Image) Mapped() bool { return im.mapped }

// Bytes returns the whole file as it is in memory: byte i is at Base()+i,
// loaded segments carry their relocations, and the non-loaded tail is paged
// in by the kernel only when touched. The slice must not be written (most
// of its pages are read-only: a write faults) and must not be used after
// Close.
func (im *Image) Bytes() []byte { return im.data }

// Segments returns a copy of the PT_LOAD segments in file order.
func (im *Image) Segments() []Segment { return append([]Segment(nil), im.segs...) }

// BuildID returns the descriptor of the NT_GNU_BUILD_ID note found through
// PT_NOTE, or nil when the image has none. The slice aliases the image.
func (im *Image) BuildID() []byte { return im.buildID }

// EHFrameHdr returns the bytes of the PT_GNU_EH_FRAME segment
// (.eh_frame_hdr, LSB "Exception Frames"), or nil when the image has none.
// The slice aliases the image; its first byte is at link-time address
// [Image.EHFrameHdrAddr].
func (im *Image) EHFrameHdr() []byte { return im.ehFrameHdr }

// EHFrameHdrAddr returns the link-time address of the PT_GNU_EH_FRAME
// segment (add [Image.Base] for its run-time address), or 0 when absent.
func (im *Image) EHFrameHdrAddr() uint64 { return im.ehFrameHdrAddr }

// Close unregisters the image from [Lookup] and [Acquire] at once and
// unmaps it once no reader holds it: before Close returns when no
// addrmap.Ref obtained from [Acquire] is held, otherwise in the goroutine
// whose Ref.Release drops the last one (Close does not wait; an munmap
// error is then discarded). Before that, while the image is still mapped,
// it runs the functions registered with [Image.OnClose], latest first, and
// returns their errors joined with its own. It is idempotent: later calls
// return nil. A value obtained from [Lookup] is not protected: its user
// must make sure Close is not called meanwhile.
func (im *Image) Close() error {
	if im.isEntry() {
		return ErrEntryImage
	}
	im.closeMu.Lock()
	defer im.closeMu.Unlock()
	if im.closed {
		return nil
	}
	im.closed = true
	var hookErrs []error
	for i := len(im.closeHooks) - 1; i >= 0; i-- {
		hookErrs = append(hookErrs, im.closeHooks[i].f())
	}
	im.closeHooks = nil
	hookErr := errors.Join(hookErrs...)
	notifyDebuggerUnloaded(im)
	switch removed, freed := registry.RemoveFunc(im.Base(), freeImage); {
	case !removed: // not registered
		im.closeDebugFile()
		return errors.Join(hookErr, im.unmap())
	case freed:
		return errors.Join(hookErr, im.unmapErr)
	default: // a reader holds the image: its last Release unmaps it
		return hookErr
	}
}

// freeImage unmaps an image removed from the registry, once no reader
// holds it (a function, not a closure: Close allocates nothing).
func freeImage(im *Image) {
	im.closeDebugFile()
	im.unmapErr = im.unmap()
}

// unmap unmaps the image and gives its page-table anchor back for the
// next Open (not after a failed munmap: the image may still be there).
func (im *Image) unmap() error {
	err := unmap(im.mem)
	if err == nil {
		putAnchor(im.anchor)
	}
	return err
}

// ErrClosed is returned by [Image.OnClose] for an image already closed.
var ErrClosed = errors.New("elfimage: image closed")

// closeHook is a function registered with OnClose.
type closeHook struct {
	id uint64
	f  func() error
}

// OnClose registers f to be run by [Image.Close] first, while the image is
// still mapped and registered (but marked closed: OnClose refuses new
// functions), before the loader's debugger hook and the unmapping: this
// is how a package that depends on images (publishers such as package
// publish, which must unregister an image from the GDB JIT interface
// before its memory goes) ties its state to an image's life without the
// image knowing of it. Functions run latest first, once, with the image's
// close lock held: f must not call Close, OnClose or a remove function of
// this image. Its error is joined into Close's.
//
// remove unregisters f (it then never runs); it may be called any number
// of times, also after Close. Errors: [ErrClosed] when the image is closed
// already (f is not registered). The entry image ([EntryImage]) is never
// closed, so its functions never run. Cost: O(1) amortized; remove is
// linear in the registered functions.
func (im *Image) OnClose(f func() error) (remove func(), err error) {
	im.closeMu.Lock()
	defer im.closeMu.Unlock()
	if im.closed {
		return nil, fmt.Errorf("%w: %s", ErrClosed, im.path)
	}
	im.hookSeq++
	id := im.hookSeq
	im.closeHooks = append(im.closeHooks, closeHook{id: id, f: f})
	return func() {
		im.closeMu.Lock()
		defer im.closeMu.Unlock()
		for i, h := range im.closeHooks {
			if h.id == id {
				im.closeHooks = append(im.closeHooks[:i], im.closeHooks[i+1:]...)
				return
			}
		}
	}, nil
}

// Section returns the bytes [sh_offset, sh_offset+sh_size) of the first
// section named name (empty for SHT_NOBITS), aliasing the image. The first
// call of Section or Sections parses and validates the section header table
// in the non-loaded tail (the kernel pages it in); later calls reuse the
// result and cost one linear scan of the section list. The error is a
// *FormatError when the table is malformed, or wraps ErrNoSection.
func (im *Image) Section(name string) ([]byte, error) {
	secs, err := im.Sections()
	if err != nil {
		return nil, err
	}
	for i := range secs {
		s := &secs[i]
		if s.Name != name {
			continue
		}
		if s.Type == elf.SHT_NOBITS {
			return im.data[s.Offset:s.Offset:s.Offset], nil
		}
		return im.data[s.Offset : s.Offset+s.Size : s.Offset+s.Size], nil
	}
	return nil, fmt.Errorf("elfimage: %s: section %q: %w", im.path, name, ErrNoSection)
}

// Sections returns the section header table (including the null section 0)
// with names resolved from .shstrtab. It is parsed once, on first use, and
// validated: e_shentsize is 64, the table and every section's
// [sh_offset, sh_offset+sh_size) lie inside the file without overflow, and
// every name is NUL-terminated inside .shstrtab. An image with no table
// (e_shoff 0, e_shnum 0) has no sections. The returned slice is shared:
// do not modify it. Errors are *FormatError.
func (im *Image) Sections() (_ []SectionHeader, err error) {
	defer im.guardFaults(&err, debug.SetPanicOnFault(true))
	d := im.dbg()
	d.secOnce.Do(func() {
		d.secErr = errIndexFault
		d.secs, d.secErr = parseSections(im.path, im.data)
	})
	return d.secs, d.secErr
}

// parseSections decodes and validates the section header table of the ELF64
// little-endian file data (whose ELF header the loader already checked, but
// it is checked again here so that the fuzzer can call this alone).
func parseSections(path string, data []byte) ([]SectionHeader, error) {
	_, secs, err := parseSectionTable(path, data)
	return secs, err
}

// parseSectionTable is parseSections, also returning the file as the ELF
// reader sees it. The reader (elfobj) decodes the tables and checks what
// any ELF file must satisfy; the image's own rules are checked here: an
// ELF64 little-endian file whose section header table, if any, has no
// extended numbering, a section name table, 8-byte alignment after the
// ELF header, and no SHT_NOBITS section placed past the end of the file.
func parseSectionTable(path string, data []byte) (*elfobj.File, []SectionHeader, error) {
	d := decoder{path: path, data: data}
	if len(data) < ehdrSize {
		return nil, nil, d.errorf(0, "ELF header", "file is %d bytes, shorter than the ELF header", len(data))
	}
	h, err := elfobj.DecodeHeader(data)
	if err != nil {
		return nil, nil, objError(path, err)
	}
	switch {
	case h.Class != elf.ELFCLASS64:
		return nil, nil, d.errorf(uint64(elf.EI_CLASS), "e_ident[EI_CLASS]", "class %v, want ELFCLASS64", h.Class)
	case h.Data != elf.ELFDATA2LSB:
		return nil, nil, d.errorf(uint64(elf.EI_DATA), "e_ident[EI_DATA]", "data encoding %v, want ELFDATA2LSB", h.Data)
	}
	if h.Shoff != 0 {
		switch {
		case h.Shentsize != shdrSize:
			return nil, nil, d.errorf(offShentsize, "e_shentsize", "is %d, want %d", h.Shentsize, shdrSize)
		case h.Shnum == 0:
			return nil, nil, d.errorf(offShnum, "e_shnum", "extended section numbering (e_shnum 0) not supported")
		case h.Shstrndx == uint16(elf.SHN_XINDEX):
			return nil, nil, d.errorf(offShstrndx, "e_shstrndx", "extended section numbering (SHN_XINDEX) not supported")
		case h.Shstrndx == uint16(elf.SHN_UNDEF) || h.Shstrndx >= h.Shnum:
			return nil, nil, d.errorf(offShstrndx, "e_shstrndx", "index %d not in [1, %d)", h.Shstrndx, h.Shnum)
		case h.Shoff < ehdrSize:
			return nil, nil, d.errorf(offShoff, "e_shoff", "section header table at %#x overlaps the ELF header", h.Shoff)
		case h.Shoff%8 != 0:
			return nil, nil, d.errorf(offShoff, "e_shoff", "section header table at %#x not 8-byte aligned", h.Shoff)
		}
	}
	f, err := elfobj.NewBytes(data)
	if err != nil {
		return nil, nil, objError(path, err)
	}
	if len(f.Sections) == 0 {
		return f, nil, nil
	}
	out := make([]SectionHeader, len(f.Sections))
	for i, s := range f.Sections {
		if s.Type == elf.SHT_NOBITS && s.Offset > uint64(len(data)) {
			return nil, nil, d.errorf(f.SectionHeaderOffset(i)+24, fmt.Sprintf("sh_offset of section %d", i), "offset %#x past end of file (%#x bytes)", s.Offset, len(data))
		}
		out[i] = SectionHeader{
			Name: s.Name, Type: s.Type, Flags: s.Flags, Addr: s.Addr, Offset: s.Offset, Size: s.FileSize,
			Link: s.Link, Info: s.Info, Addralign: s.Addralign, Entsize: s.Entsize,
		}
	}
	return f, out, nil
}

// objError turns an error of the ELF reader (a *FormatError whose
// Source names the structure) into the loader's *FormatError for path:
// fields of section and program headers are named "sh_size of section 5",
// "p_offset of program header 2"; fields of the ELF header and of notes
// keep their name; others are prefixed with their section's name
// (".symtab sh_size"). Other errors are returned wrapped with the path.
func objError(path string, err error) error {
	var fe *FormatError
	if !errors.As(err, &fe) {
		return fmt.Errorf("elfimage: %s: %w", path, err)
	}
	field := fe.Field
	switch {
	case fe.Source == "ELF header", fe.Source == "PT_NOTE":
	case strings.HasPrefix(fe.Source, "section header "):
		field += " of section " + strings.TrimPrefix(fe.Source, "section header ")
	case strings.HasPrefix(fe.Source, "program header "):
		field += " of " + fe.Source
	default:
		field = fe.Source + " " + field
	}
	return &FormatError{Source: path, Offset: fe.Offset, Field: field, Msg: fe.Msg}
}

// ELF64 structure sizes and ELF header field offsets (System V gABI, "ELF
// Header", "Program Header", "Sections").
const (
	ehdrSize = 64
	phdrSize = 56
	shdrSize = 64
	dynSize  = 16
	relaSize = 24

	offType      = 16
	offMachine   = 18
	offVersion   = 20
	offEntry     = 24
	offPhoff     = 32
	offShoff     = 40
	offEhsize    = 52
	offPhentsize = 54
	offPhnum     = 56
	offShentsize = 58
	offShnum     = 60
	offShstrndx  = 62
)

var le = binary.LittleEndian

// decoder builds *FormatError values for one file.
type decoder struct {
	path string
	data []byte
}

func (d *decoder) errorf(off uint64, field, format string, args ...any) *FormatError {
	return &FormatError{Source: d.path, Offset: off, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// check checks, without overflow, that [off, off+n) lies inside the
// file; what names the structure in the message.
func (d *decoder) check(off, n uint64, field, what string) *FormatError {
	size := uint64(len(d.data))
	if off > size || n > size-off {
		return d.errorf(off, field, "%s [%#x, +%#x) runs past end of file (%#x bytes)", what, off, n, size)
	}
	return nil
}
