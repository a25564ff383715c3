package procview

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/debugfile"
	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/formaterr"
	"github.com/elfimage/elfimage/symbolize"
	"github.com/elfimage/elfimage/unwind"
)

// Bounds on what is read from the process (its memory is untrusted).
const (
	// MaxJITEntries bounds the jit_code_entry records walked.
	MaxJITEntries = 1 << 16
	// MaxSymfileSize bounds one JIT symbol file or the vDSO, in bytes.
	MaxSymfileSize = 256 << 20
	// MaxFDEIndex bounds the FDEs indexed for one section without an
	// .eh_frame_hdr table (.debug_frame).
	MaxFDEIndex = 1 << 22
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrNoModule is wrapped when an address is outside every module of
	// the snapshot. Errors wrapping it from View.FindFDE also wrap
	// unwind.ErrNoFDE.
	ErrNoModule = errors.New("procview: address outside every module")
	// ErrSelf is returned by Stacks for the calling process, whose
	// threads it cannot stop with ptrace.
	ErrSelf = errors.New("procview: cannot ptrace the calling process")
	// ErrMachine is wrapped by the warning about a module file (or memory
	// image) for another machine than the process's (View.Arch): an
	// x86-64 library found for an AArch64 core when no sysroot says where
	// the core's files are (CoreOptions.Sysroot).
	ErrMachine = errors.New("procview: ELF file for another machine")
)

// ModuleKind says where a module comes from.
type ModuleKind uint8

// Module kinds.
const (
	ModuleFile ModuleKind = iota // a file-backed executable mapping
	ModuleVDSO                   // the kernel's vDSO, read from memory
	ModuleJIT                    // a symbol file of the GDB JIT interface
)

// String returns "file", "vdso" or "jit".
func (k ModuleKind) String() string {
	switch k {
	case ModuleFile:
		return "file"
	case ModuleVDSO:
		return "vdso"
	case ModuleJIT:
		return "jit"
	}
	return fmt.Sprintf("ModuleKind(%d)", uint8(k))
}

// Module is one range of executable code in the process: [Start, End)
// run-time addresses, whose link-time addresses are the run-time ones
// minus Bias. Name is the file's path (as /proc/PID/maps gives it),
// "[vdso]", or "[jit@0xADDR]" for a GDB JIT symbol file at address ADDR.
// Several Modules (one per executable mapping or segment) may share one
// file.
type Module struct {
	Name       string
	Kind       ModuleKind
	Start, End uint64
	Bias       uint64
	obj        *object
}

// Contains reports whether pc is in [Start, End).
func (m *Module) Contains(pc uint64) bool { return pc >= m.Start && pc < m.End }

// Symbolizer returns the module's symbolizer (built on first use, then
// kept; it takes link-time addresses: pc - Bias). Errors are those of
// opening the module's file or memory image.
func (m *Module) Symbolizer() (*symbolize.Symbolizer, error) {
	o := m.obj.get()
	return o.sym, o.err
}

// object is one ELF file (or memory image) at one bias: its symbolizer and
// FDE finder, made on first use.
type object struct {
	once sync.Once
	load func() (*symbolize.Symbolizer, error)
	bias uint64
	// path is the file the object was opened from ("" for a memory
	// image), name the module's path, whose directory anchors the
	// .gnu_debuglink search.
	path, name string
	sym        *symbolize.Symbolizer // the module's file: CFI
	dbg        *symbolize.Symbolizer // its debug information: sym or a separate file
	finder     unwind.Sources
	err        error

	symsOnce sync.Once
	syms     []symEntry

	dbgOnce sync.Once
}

// debug returns the symbolizer of the object's debug information: the
// file itself, or, when it has no DWARF, the file paired with its
// separate debug file (symbolize.OpenDebug) as finder finds it (build ID,
// .gnu_debuglink, and the remote source the finder has). Found on first
// use.
func (o *object) debug(finder *debugfile.Finder) *symbolize.Symbolizer {
	o.dbgOnce.Do(func() {
		o.dbg = o.sym
		if o.path == "" || finder == nil {
			return
		}
		if ok, err := o.sym.HasDWARF(); err != nil || ok {
			return
		}
		t, err := debugfile.ReadTarget(o.path)
		if err != nil {
			return
		}
		if o.name != "" && o.name[0] == '/' {
			t.Path = o.name
		}
		p, err := finder.Find(context.Background(), t)
		if err != nil {
			return
		}
		if d, err := symbolize.OpenDebug(o.path, p); err == nil {
			o.dbg = d
		}
	})
	return o.dbg
}

// symbols returns the object's function symbols (.symtab, else .dynsym),
// indexed on first use.
func (o *object) symbols() []symEntry {
	o.symsOnce.Do(func() {
		for _, n := range [][2]string{{".symtab", ".strtab"}, {".dynsym", ".dynstr"}} {
			st, _, err1 := o.sym.Section(n[0])
			str, _, err2 := o.sym.Section(n[1])
			if err1 == nil && err2 == nil && len(st) > 0 {
				o.syms = funcSymbols(st, str)
				return
			}
		}
	})
	return o.syms
}

func (o *object) get() *object {
	o.once.Do(o.init)
	return o
}

func (o *object) init() {
	o.sym, o.err = o.load()
	o.load = nil
	if o.err != nil {
		return
	}
	eh, ehAddr, err := o.sym.Section(".eh_frame")
	if err == nil && len(eh) > 0 {
		hdr, hdrAddr, herr := o.sym.Section(".eh_frame_hdr")
		if herr != nil {
			hdr = nil
		}
		f, ferr := frame.NewFinder(eh, ehAddr+o.bias, hdr, hdrAddr+o.bias, binary.LittleEndian, 8)
		if ferr != nil { // a malformed header: index the section instead
			f, _ = frame.NewFinder(eh, ehAddr+o.bias, nil, 0, binary.LittleEndian, 8)
		}
		if f.Hdr != nil && f.Hdr.HasTable() {
			o.finder = append(o.finder, f)
		} else {
			o.finder = append(o.finder, newIndexFinder(f.Sec, 0))
		}
	}
	if df, _, err := o.sym.Section(".debug_frame"); err == nil && len(df) > 0 {
		o.finder = append(o.finder, newIndexFinder(frame.NewDebugFrame(df, binary.LittleEndian, 8), o.bias))
	}
}

// indexFinder finds FDEs of a section without a search table by bisection
// over an index built once; for .debug_frame it moves link-time FDE ranges
// by bias to run-time ones. (A DW_CFA_set_loc operand in such an FDE is
// not moved, and fails when bias is not 0.)
type indexFinder struct {
	sec  *frame.Section
	bias uint64
	idx  []fdeRange
}

type fdeRange struct{ start, end, off uint64 }

func newIndexFinder(sec *frame.Section, bias uint64) *indexFinder {
	f := &indexFinder{sec: sec, bias: bias}
	// Entries stops at the first malformed entry: the FDEs before it stay
	// usable.
	_ = sec.Entries(func(_ *frame.ParsedCIE, fde *frame.ParsedFDE) bool {
		if fde != nil && fde.Size > 0 {
			f.idx = append(f.idx, fdeRange{fde.Start, fde.Start + fde.Size, fde.Offset})
		}
		return len(f.idx) < MaxFDEIndex
	})
	sort.Slice(f.idx, func(i, j int) bool { return f.idx[i].start < f.idx[j].start })
	return f
}

// FindFDE implements unwind.Finder. Cost: O(log n); no allocation on a
// hit.
func (f *indexFinder) FindFDE(pc uint64, fde *frame.ParsedFDE) error {
	lpc := pc - f.bias
	i := sort.Search(len(f.idx), func(i int) bool { return f.idx[i].start > lpc }) - 1
	// Overlapping FDEs are rare: look back a little for one that covers.
	for j := i; j >= 0 && j > i-4; j-- {
		if r := f.idx[j]; lpc >= r.start && lpc < r.end {
			p, err := f.sec.FDEAt(r.off)
			if err != nil {
				return err
			}
			*fde = p
			fde.Start += f.bias
			return nil
		}
	}
	return fmt.Errorf("%w %#x in %s", frame.ErrNoFDE, pc, f.sec.Name())
}

// View is a snapshot of a process's modules (see the package
// documentation). It is safe for concurrent use. Close releases the files
// it opened.
type View struct {
	// PID is the process's id.
	PID int
	// Mem reads the process's memory at run-time addresses: a Memory for
	// a live process (Open), the *Core for a core file (NewCoreView).
	Mem  io.ReaderAt
	mods []Module // sorted by Start, disjoint
	objs []*object
	warn []error
	// maps is the address space the frame-pointer fallback checks
	// (every mapping, sorted by Start); ext what walks and frame
	// descriptions keep beside the modules (fallback.go).
	maps []Mapping
	ext  extras
	// code reads code for recognising signal frames (sigreturn.go):
	// nil reads Mem; for a core, also the mapped files.
	code *codeReader
	// arch is the ABI of the process's code (Arch).
	arch *arch.Arch
	// DebugFiles finds the separate debug file of a module whose file
	// has no DWARF, when the module's debug information is first used
	// (nil: DefaultDebugFiles). Set it before the first query.
	DebugFiles *debugfile.Finder
}

// Open takes a snapshot of the modules of process pid (os.Getpid() for the
// calling process): its file-backed executable mappings, the vDSO and the
// GDB JIT symbol files. It reads /proc/PID/maps, the executable's program
// headers and symbol table, and the JIT list and the program headers of
// each symbol file from the process's memory; module files are opened, and
// symbol files read whole, only when a module is first used (except for
// JIT symbol files, read at once). Problems with one module (an unreadable
// file, a malformed JIT entry) do not fail Open: they are listed by
// Warnings. Errors: reading or parsing /proc/PID/maps (*os.PathError,
// *formaterr.Error). Cost: O(mappings + JIT entries + JIT symbol file
// bytes).
func Open(pid int) (*View, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, err
	}
	maps, err := ParseMaps(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("procview: /proc/%d/maps: %w", pid, err)
	}
	return newView(pid, maps), nil
}

// Arch returns the ABI of the process's code, which its modules must
// have and Backtrace unwinds: a core's (Core.Arch), or for a live
// process its executable's (e_machine of /proc/PID/exe), else the
// host's.
func (v *View) Arch() *arch.Arch {
	if v.arch == nil {
		if a := arch.ForGOARCH(runtime.GOARCH); a != nil {
			return a
		}
		return arch.X86_64
	}
	return v.arch
}

func newView(pid int, maps []Mapping) *View {
	v := &View{PID: pid, Mem: Memory{PID: pid}, maps: maps}
	exe := fmt.Sprintf("/proc/%d/exe", pid)
	if f, err := os.Open(exe); err == nil {
		if m, _, err := machineProgHeaders(f); err == nil {
			v.arch = arch.ForMachine(m)
		}
		f.Close()
	}
	var exeIno uint64
	var exeDev uint64
	haveExe := false
	if st, err := os.Stat(exe); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			exeIno, exeDev, haveExe = sys.Ino, sys.Dev, true
		}
	}
	type fileKey struct {
		path string
		ino  uint64
		bias uint64
	}
	objs := map[fileKey]*object{}
	phdrCache := map[string][]ProgHeader{}
	var exeBias uint64
	var exeObj *object
	for i := range maps {
		m := &maps[i]
		if !m.Exec() || m.Start >= m.End {
			continue
		}
		if m.Path == "[vdso]" {
			v.addMemModule("[vdso]", ModuleVDSO, m.Start, m.End-m.Start, m.Start, m.End)
			continue
		}
		if m.Inode == 0 || m.Path == "" || m.Path[0] != '/' {
			continue
		}
		isExe := haveExe && m.Inode == exeIno && uint64(unix.Mkdev(m.Major, m.Minor)) == exeDev
		open := m.Path
		if isExe {
			open = exe
		} else if st, err := os.Stat(m.Path); err != nil || !sameInode(st, m.Inode) {
			open = fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.Start, m.End)
		}
		phdrs, ok := phdrCache[open]
		if !ok {
			var err error
			if phdrs, err = filePhdrs(open, v.Arch()); err != nil {
				v.warn = append(v.warn, fmt.Errorf("procview: %s: %w", m.Path, err))
			}
			phdrCache[open] = phdrs
		}
		bias, ok := LoadBias(phdrs, m.Start, m.Offset)
		if !ok {
			continue
		}
		k := fileKey{m.Path, m.Inode, bias}
		o := objs[k]
		if o == nil {
			path := open
			o = &object{bias: bias, path: path, name: m.Path, load: func() (*symbolize.Symbolizer, error) { return symbolize.Open(path) }}
			objs[k] = o
			v.objs = append(v.objs, o)
		}
		if isExe && exeObj == nil {
			exeObj, exeBias = o, bias
		}
		v.mods = append(v.mods, Module{Name: m.Path, Kind: ModuleFile, Start: m.Start, End: m.End, Bias: bias, obj: o})
	}
	sort.Slice(v.mods, func(i, j int) bool { return v.mods[i].Start < v.mods[j].Start })
	v.mods = dropOverlaps(v.mods)
	if exeObj != nil {
		v.addJIT(exeObj, exeBias)
	}
	return v
}

// filePhdrs reads the program headers of the file at path, which must be
// for ABI a.
func filePhdrs(path string, a *arch.Arch) ([]ProgHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, phdrs, err := machineProgHeaders(f)
	if err != nil {
		return nil, err
	}
	if m != a.Machine {
		return nil, fmt.Errorf("%w: its machine is %v, the process's %v", ErrMachine, m, a.Machine)
	}
	return phdrs, nil
}

// dropOverlaps keeps, of modules sorted by Start, those that do not
// overlap an earlier kept one.
func dropOverlaps(mods []Module) []Module {
	out := mods[:0]
	for _, m := range mods {
		if n := len(out); n > 0 && m.Start < out[n-1].End {
			continue
		}
		out = append(out, m)
	}
	return out
}

// addMemModule adds the modules of an ELF image at [addr, addr+size) in
// the process's memory, for its executable PT_LOAD segments, moved so that
// they lie in [lo, hi) when hi > lo (the vDSO: bias from its mapping at
// lo), else with bias 0 (JIT symbol files). Modules overlapping existing
// ones are dropped.
func (v *View) addMemModule(name string, kind ModuleKind, addr, size, lo, hi uint64) {
	if size > MaxSymfileSize {
		v.warn = append(v.warn, fmt.Errorf("procview: %s: %d bytes is more than %d", name, size, MaxSymfileSize))
		return
	}
	img := sectionReader{v.Mem, addr, size}
	m, phdrs, err := machineProgHeaders(img)
	if err == nil && m != v.Arch().Machine {
		err = fmt.Errorf("%w: its machine is %v, the process's %v", ErrMachine, m, v.Arch().Machine)
	}
	if err != nil {
		v.warn = append(v.warn, fmt.Errorf("procview: %s: %w", name, err))
		return
	}
	var bias uint64
	if kind == ModuleVDSO {
		var ok bool
		if bias, ok = LoadBias(phdrs, lo, 0); !ok {
			return
		}
	}
	var segs []Module
	for _, p := range phdrs {
		if p.Type != ptLoad || p.Flags&pfX == 0 || p.Memsz == 0 || p.Vaddr+p.Memsz < p.Vaddr {
			continue
		}
		s, e := p.Vaddr+bias, p.Vaddr+p.Memsz+bias
		if hi > lo {
			s, e = max(s, lo), min(e, hi)
		}
		if s < e && !v.overlaps(s, e) {
			segs = append(segs, Module{Name: name, Kind: kind, Start: s, End: e, Bias: bias})
		}
	}
	if len(segs) == 0 {
		return
	}
	o := &object{bias: bias, load: func() (*symbolize.Symbolizer, error) {
		data := make([]byte, size)
		if err := readFull(v.Mem, data, addr); err != nil {
			return nil, err
		}
		return symbolize.New(data)
	}}
	v.objs = append(v.objs, o)
	// Read the image now, while the caller may have the process stopped.
	if o.get().err != nil {
		v.warn = append(v.warn, fmt.Errorf("procview: %s: %w", name, o.err))
	}
	for i := range segs {
		segs[i].obj = o
	}
	v.mods = append(v.mods, segs...)
	sort.Slice(v.mods, func(i, j int) bool { return v.mods[i].Start < v.mods[j].Start })
	v.mods = dropOverlaps(v.mods)
}

// overlaps reports whether [s, e) overlaps a module.
func (v *View) overlaps(s, e uint64) bool {
	i := sort.Search(len(v.mods), func(i int) bool { return v.mods[i].End > s })
	return i < len(v.mods) && v.mods[i].Start < e
}

// addJIT walks the GDB JIT interface's list of the process whose
// executable is exe (at bias) and adds a module for each symbol file.
func (v *View) addJIT(exe *object, bias uint64) {
	o := exe.get()
	if o.err != nil {
		v.warn = append(v.warn, fmt.Errorf("procview: executable: %w", o.err))
		return
	}
	symtab, _, err1 := o.sym.Section(".symtab")
	strtab, _, err2 := o.sym.Section(".strtab")
	if err := errors.Join(err1, err2); err != nil {
		v.warn = append(v.warn, fmt.Errorf("procview: executable: %w", err))
		return
	}
	val, ok := LookupSymbol(symtab, strtab, "__jit_debug_descriptor")
	if !ok {
		return // no JIT interface
	}
	entries, err := ReadJITList(v.Mem, val+bias)
	if err != nil {
		v.warn = append(v.warn, err)
	}
	for _, e := range entries {
		v.addMemModule(fmt.Sprintf("[jit@%#x]", e.SymfileAddr), ModuleJIT, e.SymfileAddr, e.SymfileSize, 0, 0)
	}
}

// JITEntry is one struct jit_code_entry of the GDB JIT interface (GDB
// manual, "JIT Declarations"): the address of the entry and of its symbol
// file, and the file's size in bytes.
type JITEntry struct {
	Addr        uint64
	SymfileAddr uint64
	SymfileSize uint64
}

// ReadJITList reads the GDB JIT interface's descriptor at address desc
// (struct jit_descriptor {uint32 version, uint32 action_flag, uint64
// relevant_entry, uint64 first_entry}) and the list of entries (struct
// jit_code_entry {uint64 next_entry, prev_entry, symfile_addr,
// symfile_size}) from first_entry through r, a reader of the process's
// memory. It stops at a null next_entry, at an entry already visited (a
// cycle), or after MaxJITEntries entries. The entries read before an error
// are returned with it. Errors: a descriptor whose version is not 1, an
// entry whose prev_entry is not the entry before it, unreadable memory
// (wrapping unwind.ErrMemory); they are *formaterr.Error with Source
// "jit_descriptor" or "jit_code_entry" where the data are malformed. Cost:
// one read per entry; allocates the result.
func ReadJITList(r io.ReaderAt, desc uint64) ([]JITEntry, error) {
	var d [24]byte
	if err := readFull(r, d[:], desc); err != nil {
		return nil, fmt.Errorf("procview: reading jit_descriptor at %#x: %w", desc, err)
	}
	le := binary.LittleEndian
	if ver := le.Uint32(d[:]); ver != 1 {
		return nil, jitErr("jit_descriptor", desc, "version", fmt.Sprintf("%d, want 1", ver))
	}
	var out []JITEntry
	seen := map[uint64]bool{}
	prev := uint64(0)
	for e := le.Uint64(d[16:]); e != 0; {
		if seen[e] {
			return out, jitErr("jit_code_entry", e, "next_entry", "the list has a cycle")
		}
		if len(out) == MaxJITEntries {
			return out, jitErr("jit_code_entry", e, "next_entry", fmt.Sprintf("more than %d entries", MaxJITEntries))
		}
		seen[e] = true
		var b [32]byte
		if err := readFull(r, b[:], e); err != nil {
			return out, fmt.Errorf("procview: reading jit_code_entry at %#x: %w", e, err)
		}
		if p := le.Uint64(b[8:]); p != prev {
			return out, jitErr("jit_code_entry", e, "prev_entry", fmt.Sprintf("%#x, want %#x", p, prev))
		}
		out = append(out, JITEntry{Addr: e, SymfileAddr: le.Uint64(b[16:]), SymfileSize: le.Uint64(b[24:])})
		prev, e = e, le.Uint64(b[:])
	}
	return out, nil
}

// Warnings returns the problems Open met with single modules (unreadable
// files, malformed JIT entries or symbol files), which it skipped.
func (v *View) Warnings() []error { return v.warn }

// Modules returns the snapshot's modules sorted by Start (a copy).
func (v *View) Modules() []Module { return append([]Module(nil), v.mods...) }

// Lookup returns the module holding pc. A miss returns an error wrapping
// ErrNoModule. Cost: O(log modules); no allocation on a hit.
func (v *View) Lookup(pc uint64) (*Module, error) {
	i := sort.Search(len(v.mods), func(i int) bool { return v.mods[i].End > pc })
	if i < len(v.mods) && v.mods[i].Start <= pc {
		return &v.mods[i], nil
	}
	return nil, fmt.Errorf("%w: %#x", ErrNoModule, pc)
}

// FindFDE implements unwind.Finder: it finds the FDE covering pc in the
// call frame information of pc's module (.eh_frame through .eh_frame_hdr,
// else .debug_frame), with run-time addresses. A pc outside every module
// returns an error wrapping both ErrNoModule and unwind.ErrNoFDE.
// Cost: the module lookup and one FDE lookup (O(log FDEs)); the first use
// of a module opens its file; no allocation on a hit after that.
func (v *View) FindFDE(pc uint64, fde *frame.ParsedFDE) error {
	m, err := v.Lookup(pc)
	if err != nil {
		return fmt.Errorf("%w: %w", frame.ErrNoFDE, err)
	}
	o := m.obj.get()
	if o.err != nil {
		return fmt.Errorf("%w %#x: module %s: %w", frame.ErrNoFDE, pc, m.Name, o.err)
	}
	if len(o.finder) == 0 {
		return fmt.Errorf("%w %#x: module %s has no call frame information", frame.ErrNoFDE, pc, m.Name)
	}
	return o.finder.FindFDE(pc, fde)
}

// Symbolize appends to frames the source frames of run-time address pc,
// innermost first (see symbolize.Symbolizer.Symbolize, which it calls with
// pc minus the module's bias), and returns them with pc's module. When the
// module's debug information is malformed (Symbolize fails with another
// error than symbolize.ErrNoInfo), the answer is the symbol table's
// function name alone and the error is returned with it. Errors wrap
// ErrNoModule, symbolize.ErrNoInfo, or those of opening the module or of
// its debug information. Cost: a module lookup and a symbolize lookup.
func (v *View) Symbolize(pc uint64, frames []symbolize.Frame) ([]symbolize.Frame, *Module, error) {
	m, err := v.Lookup(pc)
	if err != nil {
		return frames, nil, err
	}
	o := m.obj.get()
	if o.err != nil {
		return frames, m, o.err
	}
	n0 := len(frames)
	frames, err = o.debug(v.finder()).Symbolize(pc-m.Bias, frames)
	if err != nil && !errors.Is(err, symbolize.ErrNoInfo) && len(frames) == n0 {
		if name, ok := lookupSymbol(o.symbols(), pc-m.Bias); ok {
			frames = append(frames, symbolize.Frame{Function: name})
		}
	}
	return frames, m, err
}

// Close releases the files the View's modules opened. The View must not
// be used afterwards.
func (v *View) Close() error {
	var errs []error
	if v.code != nil {
		v.code.close()
	}
	for _, o := range v.objs {
		o.once.Do(func() { o.err = errors.New("procview: view closed") })
		o.dbgOnce.Do(func() {})
		if o.dbg != nil && o.dbg != o.sym {
			errs = append(errs, o.dbg.Close())
		}
		if o.sym != nil {
			errs = append(errs, o.sym.Close())
		}
	}
	return errors.Join(errs...)
}

func jitErr(section string, off uint64, field, msg string) error {
	return &formaterr.Error{Source: section, Offset: off, Field: field, Msg: msg}
}

// finder returns the View's debug file finder.
func (v *View) finder() *debugfile.Finder {
	if v.DebugFiles != nil {
		return v.DebugFiles
	}
	return DefaultDebugFiles
}

// DefaultDebugFiles is the debug file finder of a View whose DebugFiles is
// nil: the build-ID directory and .gnu_debuglink places under
// debugfile.DefaultDebugDir, no remote source (a program that wants
// debuginfod sets View.DebugFiles or Options.DebugFiles to a Finder whose
// Remote is a debuginfod.Client's Debuginfo).
var DefaultDebugFiles = &debugfile.Finder{}

func sameInode(st os.FileInfo, ino uint64) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && sys.Ino == ino
}
