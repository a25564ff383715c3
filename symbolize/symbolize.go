// Package symbolize maps code addresses of any ELF file to functions,
// source positions and inlined frames: elfimage images, gcc and clang
// output with DWARF 2 to 5, Go binaries, files whose debug sections are
// compressed (SHF_COMPRESSED with zlib or zstd, and GNU .zdebug_), and,
// without DWARF, the symbol table. Files of either class (ELF32, ELF64)
// and byte order are read: x86-64, i386, AArch64, Arm and Thumb, RISC-V,
// PowerPC, MIPS, SPARC and s390x ones are tested.
//
// Answers follow `llvm-symbolizer --inlining` (LLVM 14) with its default
// options, which the tests check on gcc -O2 builds (DWARF 4 and 5) and Go
// binaries for 10,000 addresses each, and on every code address of 56
// classes of files (TestParity: machines of both byte orders and classes,
// gcc, clang, GNU ld and lld, -O0 and -O2 with -ffunction-sections
// -Wl,--gc-sections, Go's debug/elf and debug/dwarf test executables):
//
//   - The compile unit comes from the units' DW_AT_low_pc/DW_AT_high_pc or
//     DW_AT_ranges (where they overlap the first unit wins); a unit without
//     either is covered by its line program's sequences. .debug_aranges is
//     not read.
//   - Frames are the innermost DW_TAG_subprogram or
//     DW_TAG_inlined_subroutine whose ranges hold the address, then each
//     enclosing DW_TAG_inlined_subroutine up to the DW_TAG_subprogram:
//     innermost first. The innermost frame's file, line and column come from
//     the line table (the last row at or before the address in its
//     sequence); each outer frame's come from DW_AT_call_file, call_line and
//     call_column of the frame inside it.
//   - A frame's function is its DW_AT_linkage_name (or
//     DW_AT_MIPS_linkage_name), else its DW_AT_name, searched through
//     DW_AT_specification and DW_AT_abstract_origin, in any unit. Linkage
//     names are not demangled (llvm-symbolizer demangles C++ names; C and Go
//     names need no demangling).
//   - As llvm-symbolizer does by default, the outermost frame's function
//     is replaced by the symbol table's name for the address when there is
//     one (so gcc clones read "f.constprop.0", "main.cold"); without DWARF
//     that name is the only answer. Symbols are the STT_NOTYPE, STT_FUNC,
//     STT_OBJECT and STT_GNU_IFUNC ones of a defined section, from .symtab,
//     or from .dynsym when there is no .symtab; of several at one address
//     the largest wins; a symbol of size 0 reaches the next symbol (so an
//     address past the end of everything may be named "_end", as
//     llvm-symbolizer names it). Symbols that mark code rather than name
//     it are left out, as LLVM leaves them out: Arm's mapping symbols $a,
//     $d, $t (and $a.N...), AArch64's $d and $x, and RISC-V's unnamed
//     labels; we also leave out RISC-V's .L labels (kept for linker
//     relaxation), which llvm-symbolizer 14 names basic blocks by and
//     binutils addr2line does not. A big-endian PowerPC64 function symbol
//     (ELFv1, pointing at its .opd descriptor) is at the descriptor's code
//     address. When the outermost frame has no file (no DWARF for the
//     address), a local symbol's file is the STT_FILE symbol before it in
//     the table ("crtstuff.c"), as llvm-symbolizer gives it.
//   - Code the linker discarded (-ffunction-sections -Wl,--gc-sections,
//     COMDAT) leaves DWARF ranges and line sequences at a tombstone: 0
//     (or 1 in .debug_ranges) with GNU ld and lld 14, -1 or -2 with newer
//     linkers. A range or sequence that starts below the file's lowest
//     code address (the lowest SHF_EXECINSTR section, or PF_X segment),
//     or at -2 or -1, is ignored, as binutils addr2line ignores it
//     (llvm-symbolizer 14 answers the discarded function near 0); a
//     tombstone in .debug_addr does not cost its unit's other ranges.
//   - File names are absolute when the line table allows it: the entry's
//     name, prefixed with its directory and, when that is relative, the
//     unit's DW_AT_comp_dir.
//   - In a relocatable object (ET_REL: gcc -c, clang -c) every section
//     is at address 0 and the debug sections' relocations are applied
//     (elfobj.File.Relocated) before they are read. An address is, as
//     llvm-symbolizer numbers it, an offset in the first non-empty
//     SHF_EXECINSTR section (in section header order) longer than the
//     offset; lines, frames and symbols come from that section alone.
//     (llvm-symbolizer keeps to the section for lines but not for
//     functions, so where .text and .text.startup both cover an offset it
//     may name main for code of .text; binutils addr2line -j .text and
//     we name the function of .text. The tests compare with both.)
//
// Debug information may live elsewhere:
//
//   - OpenDebug reads a file with its separate debug file (objcopy
//     --only-keep-debug's, a distribution's debug package, a debuginfod
//     download; package debugfile finds it): DWARF from the debug file,
//     symbol names from the file, as llvm-symbolizer pairs them.
//   - Split DWARF (DWARF 5 section 3.1.3, gcc and clang -gsplit-dwarf): a
//     DW_UT_skeleton unit's DIEs are read from the split unit of the same
//     dwo_id, in the DWARF package file beside the file (FILE.dwp, its
//     .debug_cu_index, section 7.3.5) or else in the .dwo file that
//     DW_AT_dwo_name names (under DW_AT_comp_dir when relative, then beside
//     the file), with the skeleton's line table, .debug_addr contribution
//     and base address. Without them, a skeleton's addresses get its line
//     table's row and the symbol table's name. GNU DWARF 4 split units
//     (gcc -gdwarf-4 -gsplit-dwarf: DW_AT_GNU_dwo_name, DW_AT_GNU_dwo_id,
//     DW_AT_GNU_addr_base, DW_AT_GNU_ranges_base) are followed the same
//     way, from .dwo files (version 2 .dwp indexes are not read). A
//     .dwo path is the file's to choose, as for gdb and LLVM: only a
//     regular ELF file of at most 1 GiB there is read, with the same
//     checks as the file itself.
//
// Indexes are lazy: Open reads only the ELF header and section table; the
// first Symbolize reads (and decompresses) the debug sections and the unit
// headers. The first address asked in a unit is answered by one walk of
// the unit's DIEs that keeps nothing but the unit's decoded line table (a
// lone address, as in a crash report, costs little); the second indexes
// the unit's DIE tree, and the index is kept. After that a lookup is a few
// bisections and allocates nothing. A caller with a batch of addresses can
// have their units indexed up front on all CPUs with Prepare, and answer
// them with SymbolizeBatch, whose lookups of ascending addresses start
// where the previous one ended; one that knows a large batch is coming
// before it has the addresses can start the work that needs none of them
// with PrepareCommon.
//
// Input is treated as hostile: the reader never panics, every loop and
// allocation is bounded by the input's size, and malformed input yields a
// *formaterr.Error naming the section, offset and field.
package symbolize

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrNoInfo is returned by Symbolize for an address about which the
	// file says nothing: no compile unit, no line and no symbol covers it.
	ErrNoInfo = errors.New("symbolize: no information for the address")
	// ErrNotELF is wrapped by Open and New for input that is not an
	// ELF32 or ELF64 file of either byte order.
	ErrNotELF = errors.New("not an ELF file")
	// ErrClosed is returned by Symbolize after Close.
	ErrClosed = errors.New("symbolize: symbolizer closed")
	// ErrFault is returned when the mapped file could not be read (it
	// was truncated after Open mapped it).
	ErrFault = errors.New("symbolize: fault reading the mapped file")
)

// Frame is one source-level frame at an address.
type Frame struct {
	// Function is the function's name: the symbol table's name for the
	// outermost frame when the symbol table covers the address, otherwise
	// the DWARF linkage name or name. Empty when unknown.
	Function string
	// File is the source file's path; empty when unknown.
	File string
	// Line and Column are 1-based; 0 means unknown (a line-table row with
	// line 0 also gives 0).
	Line, Column uint32
	// Inlined is set on every frame but the last of an address's frames:
	// the code of this frame was inlined into the next frame.
	Inlined bool
	// FileFromSymbol is set when File is not from the DWARF but the name
	// of the STT_FILE symbol before the function's local symbol in the
	// symbol table (as llvm-symbolizer and addr2line name it, for
	// example "crtstuff.c"); Line and Column are then 0. Debuggers (gdb)
	// show no file for such a frame.
	FileFromSymbol bool
}

// Symbolizer answers symbolization queries for one ELF file. It is safe
// for concurrent use, except Close.
type Symbolizer struct {
	f      *elfFile
	unmap  func() error
	mapped bool
	mapLo  uintptr // the mapping [mapLo, mapHi), for telling faults on it
	mapHi  uintptr
	closed bool
	// slab holds the indexes' large arrays (see slab); set for a large
	// file mapped by Open, whose Close releases it. New's Symbolizer need
	// not be closed, so its arrays stay on the heap.
	slab *slab

	dwarfOnce sync.Once
	d         *dwarfData
	dwarfErr  error

	symOnce sync.Once
	syms    *symtab
	symErr  error
	// sortClaimed is set by the first Prepare or PrepareCommon that
	// sorts the symbol table (the others leave it to that one).
	sortClaimed atomic.Bool

	// debug, when set (OpenDebug), is the separate debug file: its DWARF
	// answers, and its symbol table when the file has none.
	debug     *Symbolizer
	debugPath string
	path      string // Open's file, for its .dwo and .dwp files
}

// Open maps the ELF file at path and returns its Symbolizer. It reads
// only the ELF header and the section table. Close unmaps it and, for a
// file of 1 MiB or more, the anonymous mappings that then hold the
// indexes' large arrays (on Linux; advised for transparent huge pages,
// they grow in chunks of 2 MiB doubling to 64 MiB, and the garbage
// collector never frees them: a Symbolizer of Open that is dropped
// without Close keeps its file and its indexes mapped). Errors wrap
// ErrNotELF or a *formaterr.Error for a malformed section table, prefixed
// with path, or are the *os.PathError of opening the file.
func Open(path string) (*Symbolizer, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	if fi, err := file.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("symbolize: %s: not a regular file (mode %v)", path, fi.Mode())
	}
	data, unmap, err := mapFile(file)
	if err != nil {
		return nil, err
	}
	s, err := newSymbolizer(data, nil, 0)
	if err != nil {
		unmap()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s.unmap, s.mapped = unmap, true
	if len(data) >= slabMinFile {
		s.slab = newSlab()
	}
	s.path = path
	if len(data) > 0 {
		s.mapLo = uintptr(unsafe.Pointer(&data[0]))
		s.mapHi = s.mapLo + uintptr(len(data))
	}
	return s, nil
}

// OpenDebug is Open for a file whose debug information is in a separate
// debug file at debugPath (what objcopy --only-keep-debug or elfimage
// strip writes; package debugfile finds it by build ID, .gnu_debuglink or
// debuginfod): frames come from the debug file's DWARF, function names from
// the file's own symbol table (.symtab, else .dynsym, as llvm-symbolizer
// takes them), or from the debug file's when the file has neither, and
// for an address that neither the DWARF nor the file's table covers (as
// gdb names it from the debug file's minimal symbols; llvm-symbolizer
// answers "??" there); Section
// returns the file's section, or the debug file's when the file has none
// by that name (or only SHT_NOBITS). The two must be of one build (the
// caller checks the build ID or CRC; debugfile.Finder does). Close closes
// both. Errors are those of Open for either file, the debug file's wrapped
// with its path.
func OpenDebug(path, debugPath string) (*Symbolizer, error) {
	s, err := Open(path)
	if err != nil {
		return nil, err
	}
	d, err := Open(debugPath)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("symbolize: debug file %s: %w", debugPath, err)
	}
	s.debug, s.debugPath = d, debugPath
	return s, nil
}

// DebugPath returns the path of the separate debug file given to
// OpenDebug, or "" for a Symbolizer that reads one file.
func (s *Symbolizer) DebugPath() string { return s.debugPath }

// New returns a Symbolizer for an ELF file held in data, which it uses in
// place: do not modify data while the Symbolizer is in use. Errors are
// those of Open.
func New(data []byte) (*Symbolizer, error) {
	return newSymbolizer(data, nil, 0)
}

// NewReaderAt returns a Symbolizer reading an ELF file of size bytes
// through r: the section table now, and each section it needs, once, on
// first use. Errors are those of Open, or r's.
func NewReaderAt(r io.ReaderAt, size int64) (*Symbolizer, error) {
	if size < 0 {
		return nil, fmt.Errorf("%w: negative size", ErrNotELF)
	}
	return newSymbolizer(nil, r, size)
}

func newSymbolizer(data []byte, r io.ReaderAt, size int64) (s *Symbolizer, err error) {
	f, err := parseELF(data, r, size)
	if err != nil {
		return nil, err
	}
	return &Symbolizer{f: f}, nil
}

// Close releases the mapping made by Open and, for a file of 1 MiB or
// more, the mappings that hold its indexes' large arrays (on Linux,
// advised for transparent huge pages; a Symbolizer made by New or
// NewReaderAt keeps them on the heap). Strings of frames returned earlier
// stay valid. It must not run concurrently with Symbolize or Prepare.
func (s *Symbolizer) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	var err error
	if s.debug != nil {
		err = s.debug.Close()
	}
	err = errors.Join(s.slab.release(), err)
	if s.unmap != nil {
		return errors.Join(s.unmap(), err)
	}
	return err
}

// HasDWARF reports whether the file has a .debug_info section. Errors
// are those of Symbolize's first use of the debug sections.
func (s *Symbolizer) HasDWARF() (ok bool, err error) {
	if s.closed {
		return false, ErrClosed
	}
	if s.mapped {
		defer s.guard(&err)
	}
	d, err := s.dwarf()
	return d != nil, err
}

// dwarf and symbols load the debug sections and the symbol table once.
// The error is set to ErrFault first: a fault on the mapped file panics
// out of the Once (which then counts as done), and every later call must
// report it rather than see a nil table without an error.
func (s *Symbolizer) dwarf() (*dwarfData, error) {
	if s.debug != nil {
		return s.debug.dwarf()
	}
	s.dwarfOnce.Do(func() {
		s.dwarfErr = fmt.Errorf("%w: loading the debug sections", ErrFault)
		s.d, s.dwarfErr = loadDWARF(s.f)
		if s.d != nil && s.path != "" {
			s.d.dir, s.d.dwpPath = filepath.Dir(s.path), s.path+".dwp"
		}
		if s.d != nil {
			s.d.slab = s.slab
		}
	})
	return s.d, s.dwarfErr
}

func (s *Symbolizer) symbols() (*symtab, error) {
	s.symOnce.Do(func() {
		s.symErr = fmt.Errorf("%w: reading the symbol table", ErrFault)
		s.syms, s.symErr = readSymtab(s.f)
		if s.syms != nil {
			s.syms.slab = s.slab
		}
	})
	if s.debug != nil && s.symErr == nil && s.syms.empty() {
		return s.debug.symbols()
	}
	return s.syms, s.symErr
}

// guard turns a fault on the mapped file (SIGBUS after truncation) into
// ErrFault. It runs deferred, with panic-on-fault enabled by the caller.
func (s *Symbolizer) guard(err *error) {
	r := recover()
	if r == nil {
		return
	}
	if re, ok := r.(runtime.Error); ok && s.isFault(re) {
		*err = fmt.Errorf("%w: %v", ErrFault, re)
		return
	}
	panic(r)
}

// Symbolize appends the frames for the link-time address addr to frames,
// innermost first, and returns the extended slice (see the package
// documentation for how they are found). In a relocatable object (ET_REL)
// addr is an offset in a section, as llvm-symbolizer numbers them: the
// offset in the first non-empty SHF_EXECINSTR section (in section header
// order) whose size exceeds addr, and only that section's lines, functions
// and symbols answer (so an object whose .text and .text.startup both
// start at 0 answers from .text). Every frame but the last has
// Inlined set.
//
// For an address nothing covers it returns frames unchanged and
// ErrNoInfo. Malformed debug information returns a *formaterr.Error
// (possibly wrapped); malformed data of one compile unit fails only the
// addresses in that unit. After Close it returns ErrClosed.
//
// Cost: the first address in a compile unit walks the unit's DIEs and
// decodes its line program; the second indexes the unit (also linear in
// its DIEs, and the index is kept); later addresses cost a few bisections
// and, when frames has room, no allocation. Units indexed by Prepare are
// never walked again. When GOMAXPROCS allows, indexing a unit of 64 KiB
// or more of .debug_info decodes its line program on a second goroutine
// while the DIEs are walked.
func (s *Symbolizer) Symbolize(addr uint64, frames []Frame) (out []Frame, err error) {
	if s.closed {
		return frames, ErrClosed
	}
	if !s.mapped {
		return s.symbolize(addr, frames)
	}
	// Few returns, so that the compiler open-codes the defers (a
	// deferred call through the runtime costs more than a warm lookup's
	// bisections).
	defer s.guard(&err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	return s.symbolize(addr, frames)
}

// symbolize is Symbolize without the fault guard.
func (s *Symbolizer) symbolize(addr uint64, frames []Frame) ([]Frame, error) {
	n0 := len(frames)
	addr, ok := s.f.linkAddr(addr)
	if !ok {
		return frames, ErrNoInfo
	}
	d, err := s.dwarf()
	if err != nil {
		return frames, err
	}
	if d != nil {
		ui := d.unitFor(addr)
		if ui >= 0 {
			if u := &d.units[ui]; u.split != nil {
				if dd, sui, serr := d.splitUnit(u); serr == nil {
					d, ui = dd, sui
				} else {
					// Without its .dwo a skeleton unit has only its
					// line table, as llvm-symbolizer then answers.
					lt, _ := d.lineTable(u)
					frames = appendLineFrame(frames, lt, addr)
					ui = -1
				}
			}
		}
		if ui >= 0 {
			u := &d.units[ui]
			if scanAlways.Load() || u.idx.Load() == nil && u.scanned.CompareAndSwap(false, true) {
				if frames, err = d.scanFrames(u, addr, frames); err != nil {
					return frames, err
				}
			} else {
				x := d.index(ui)
				if x.err != nil {
					return frames, x.err
				}
				frames = x.frames(addr, frames)
			}
		}
	}
	syms, err := s.symbols()
	if err != nil {
		return frames[:n0], err
	}
	name, file, ok := syms.lookup(addr)
	if !ok && len(frames) == n0 && s.debug != nil {
		// Code the DWARF does not describe (assembly such as
		// __restore_rt) may be named by the debug file's full symbol
		// table when the file's own (.dynsym) does not name it.
		if ds, err := s.debug.symbols(); err == nil {
			name, file, ok = ds.lookup(addr)
		}
	}
	if len(frames) == n0 {
		if !ok {
			return frames, ErrNoInfo
		}
		frames = append(frames, Frame{})
	}
	if ok {
		f := &frames[len(frames)-1]
		f.Function = name
		if f.File == "" && file != "" {
			f.File, f.FileFromSymbol = file, true // the symbol's STT_FILE, as llvm-symbolizer
		}
	}
	return frames, nil
}

// PrepareCommon does, on the calling goroutine, the part of Prepare's
// work that does not depend on a batch's addresses, for a caller that
// knows a large batch is coming before it has the addresses (a command
// still reading them): it loads the debug sections and unit headers,
// sorts the symbol table (as Prepare does for more than a few addresses)
// and copies .debug_str (as Prepare does for a batch of units together at
// least as large as that section: here when all the units not indexed
// yet are), the copy first. It may run concurrently with Prepare and
// Symbolize: a Prepare that starts meanwhile waits for the copy of
// .debug_str in its first job, and leaves the symbol table's sort to
// PrepareCommon, waiting for it after its other jobs. Close must not run
// until it has returned. Calling it is optional, and a batch of a few
// addresses gains nothing from it.
//
// Errors are Prepare's: those of the first use of the debug sections or
// of the symbol table, ErrClosed, and ErrFault when the mapped file
// faults. Cost: the symbol table's sort and the copy of .debug_str, once
// per Symbolizer; nothing on later calls.
func (s *Symbolizer) PrepareCommon() (err error) {
	if s.closed {
		return ErrClosed
	}
	if s.mapped {
		defer s.guard(&err)
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	}
	d, err := s.dwarf()
	if err != nil {
		return err
	}
	syms, err := s.symbols()
	if err != nil {
		return err
	}
	if d != nil && d.strCopy.Load() == nil && len(d.sec.Str) > 0 {
		size := uint64(0)
		for i := range d.units {
			if u := &d.units[i]; u.idx.Load() == nil {
				size += u.hdr.End - u.hdr.Offset
			}
		}
		if size >= uint64(len(d.sec.Str)) {
			d.copyStr()
		}
	}
	if !syms.sorted.Load() {
		s.sortClaimed.Store(true)
		syms.once.Do(syms.sort)
	}
	return nil
}

// Prepare builds, on up to runtime.GOMAXPROCS(0) goroutines at once,
// what Symbolize needs for the link-time addresses addrs: the debug
// sections and unit headers, the index of every compile unit that holds
// one of the addresses and, for more than a few addresses, the sorted
// symbol table. Calling it is optional (Symbolize indexes on demand); it
// pays off for a batch of addresses spread over many units, whose indexes
// are then built in parallel, largest unit first.
//
// Errors are those of Symbolize's first use of the debug sections or of
// the symbol table, ErrClosed, and ErrFault when the mapped file faults.
// A unit whose index cannot be built is not an error here: Symbolize
// reports it for the addresses in that unit. Prepare may run concurrently
// with Symbolize, and with PrepareCommon, whose sort of the symbol table
// it then waits for instead of sorting.
//
// Cost: a bisection per address and a byte per unit, plus the indexes not
// built yet, divided among the goroutines (each unit's line program is a
// job of its own, beside its DIE walk's), and, for a batch of units
// together at least as large as .debug_str, one copy of that section, in
// which their subroutines' names then lie (no copy of each unit's names);
// nothing per address once every unit is indexed.
func (s *Symbolizer) Prepare(addrs []uint64) (err error) {
	if s.closed {
		return ErrClosed
	}
	if s.mapped {
		defer s.guard(&err)
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	}
	d, err := s.dwarf()
	if err != nil {
		return err
	}
	syms, err := s.symbols()
	if err != nil {
		return err
	}
	var jobs []func()
	// The symbol table's sort is a job, unless PrepareCommon sorts it:
	// then Prepare waits for that sort after its jobs.
	if len(addrs) > scanLimit && !syms.sorted.Load() {
		if s.sortClaimed.CompareAndSwap(false, true) {
			jobs = append(jobs, func() { syms.once.Do(syms.sort) })
		} else {
			defer func() {
				if err == nil {
					syms.once.Do(syms.sort)
				}
			}()
		}
	}
	if d != nil && d.indexed.Load() < int64(len(d.units)) {
		seen := make([]bool, len(d.units))
		var units []int
		// The units not indexed yet: once all are seen the rest of the
		// addresses can add none.
		left := 0
		for i := range d.units {
			if d.units[i].idx.Load() == nil {
				left++
			}
		}
		for _, a := range addrs {
			if len(units) == left {
				break
			}
			a, ok := s.f.linkAddr(a)
			if !ok {
				continue
			}
			if ui := d.unitFor(a); ui >= 0 && !seen[ui] && d.units[ui].idx.Load() == nil {
				seen[ui] = true
				units = append(units, ui)
			}
		}
		// A batch indexing at least as many bytes of units as
		// .debug_str has names its subroutines in one copy of the
		// section (copyStr), made first.
		size := uint64(0)
		for _, ui := range units {
			size += d.units[ui].hdr.End - d.units[ui].hdr.Offset
		}
		if d.strCopy.Load() == nil && len(d.sec.Str) > 0 && size >= uint64(len(d.sec.Str)) {
			jobs = slices.Insert(jobs, 0, d.copyStr)
		}
		// Largest first, so that no goroutine is left with a big unit
		// at the end.
		slices.SortFunc(units, func(a, b int) int {
			sa, sb := d.units[a].hdr.End-d.units[a].hdr.Offset, d.units[b].hdr.End-d.units[b].hdr.Offset
			return cmp(sb, sa)
		})
		for _, ui := range units {
			u := &d.units[ui]
			if u.split != nil {
				jobs = append(jobs, func() {
					if dd, sui, err := d.splitUnit(u); err == nil {
						dd.index(sui)
					}
				})
				continue
			}
			// A unit's line program is a job of its own, just before
			// its DIE walk's: with two workers the walk usually runs
			// beside it, and otherwise finds the table decoded, with no
			// goroutine per unit (one started by build waits for a
			// core while both workers walk).
			if u.root.hasStmt {
				jobs = append(jobs, func() { _, _ = d.lineTable(u) })
			}
			jobs = append(jobs, func() { d.indexLines(ui, u.root.hasStmt) })
		}
	}
	n := min(runtime.GOMAXPROCS(0), len(jobs))
	if n <= 1 {
		for _, job := range jobs {
			job()
		}
		return nil
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, n)
	work := func(w int) {
		defer wg.Done()
		if s.mapped {
			defer s.guard(&errs[w])
			defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		}
		for i := next.Add(1) - 1; i < int64(len(jobs)); i = next.Add(1) - 1 {
			jobs[i]()
		}
	}
	wg.Add(n)
	for w := 1; w < n; w++ {
		go work(w)
	}
	// A goroutine just started waits in this processor's next slot,
	// which an idle one steals only after a pause, or not before this
	// goroutine blocks: on a VM its jobs then started up to milliseconds
	// late. Yielding runs it here at once; this goroutine goes to the
	// global queue, which an idle processor takes from at once.
	runtime.Gosched()
	work(0)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err // the same fault seen by several workers is one error
		}
	}
	return nil
}

// frames appends the DWARF frames of addr in this unit.
func (x *unitIndex) frames(addr uint64, frames []Frame) []Frame {
	leaf := x.leaf(addr)
	if leaf < 0 {
		return appendLineFrame(frames, x.lines, addr)
	}
	i, n := leaf, 0
	return appendSubrFrames(frames, x.lines, addr, func() (*subr, string) {
		if i < 0 || n > len(x.subrs) { // n: no cycle through hostile parents
			return nil, ""
		}
		s, name := &x.subrs[i], x.name(i)
		i, n = s.parent(), n+1
		return s, name
	})
}

// appendSubrFrames appends the frames of addr for a chain of subroutines
// that next yields innermost first (nil after the last): each frame's
// function is its subroutine's name; the innermost frame's position is
// the line table's for addr, each outer frame's the call site recorded in
// the frame inside it. The chain stops after its first subroutine that
// was not inlined.
func appendSubrFrames(frames []Frame, lines *lineTable, addr uint64, next func() (*subr, string)) []Frame {
	var call *subr
	for s, name := next(); s != nil; s, name = next() {
		f := Frame{Function: name}
		if call == nil {
			f.File, f.Line, f.Column = lineAt(lines, addr)
		} else {
			f.File = lines.file(uint64(call.callFile))
			f.Line, f.Column = call.callLine, call.callCol
			frames[len(frames)-1].Inlined = true
		}
		frames = append(frames, f)
		if !s.inlined() {
			break
		}
		call = s
	}
	return frames
}

// lineAt returns the file, line and column of the line-table row that
// holds for addr; "" and zeros when there is none or it names no file.
func lineAt(t *lineTable, addr uint64) (file string, line, col uint32) {
	if t == nil {
		return "", 0, 0
	}
	r, ok := t.lookup(addr)
	if !ok {
		return "", 0, 0
	}
	if file = t.file(uint64(r.file)); file == "" {
		return "", 0, 0
	}
	return file, r.line, r.col
}

// appendLineFrame appends the frame of addr's line-table row alone (for
// an address no subroutine covers), when the row names a file.
func appendLineFrame(frames []Frame, t *lineTable, addr uint64) []Frame {
	if f, l, c := lineAt(t, addr); f != "" {
		frames = append(frames, Frame{File: f, Line: l, Column: c})
	}
	return frames
}

// isFault reports whether a runtime error is a memory fault on the
// mapping, turned into a panic by debug.SetPanicOnFault.
func (s *Symbolizer) isFault(e runtime.Error) bool {
	a, ok := e.(interface{ Addr() uintptr })
	if ok && s.debug != nil && s.debug.isFault(e) {
		return true
	}
	return ok && a.Addr() >= s.mapLo && a.Addr() < s.mapHi
}
