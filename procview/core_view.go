package procview

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/elfimage/elfimage/symbolize"
)

// ErrBuildIDMismatch is wrapped by NewCoreView's error when the executable
// it was given is not the one the core was dumped from, and by its
// warnings for other mapped files: the build ID of the file differs from
// the one in the core's copy of the file's first page.
var ErrBuildIDMismatch = errors.New("procview: the file is not the one the core was dumped from")

// CoreOptions tune CoreStacks. The zero value is the default.
type CoreOptions struct {
	Options
	// Exe is the path of the process's executable. Empty: the path the
	// core's NT_FILE note names for the mapping that holds the entry point
	// (AT_ENTRY), as it was when the process ran.
	Exe string
}

// CoreStacks unwinds every thread of the core c as Stacks does for a live
// process: the View of c's modules (NewCoreView with opts.Exe), then each
// thread from its NT_PRSTATUS registers over the core's memory, with the
// same walk as View.Backtrace, carried across signal frames that have no
// CFI: a frame whose code is the x86-64 rt_sigreturn trampoline (mov $15,
// %rax; syscall, as gdb recognises it) is a signal frame, and the walk
// goes on from the registers the kernel saved in its struct rt_sigframe;
// and, unless opts.NoSymbolize, every frame symbolized. The threads are in the core's order (the one that received
// the signal first); a thread's Name is c.Command for the main thread (tid
// equal to the pid: NT_PRPSINFO names only the process) and empty for the
// others. A read of memory the core does not hold ends that thread's walk
// with an error wrapping unwind.ErrMemory (and ErrNotDumped where the core
// left the bytes out) in its Thread.Err; other threads are walked all the
// same. The caller closes the View, then c. Errors: those of NewCoreView.
// Cost: the View's (reads the JIT symbol files), then one unwind step per
// frame (a read of the core file per stack slot) and one symbolization per
// frame.
func CoreStacks(c *Core, opts *CoreOptions) ([]Thread, *View, error) {
	if opts == nil {
		opts = &CoreOptions{}
	}
	v, opened, err := newCoreView(c, opts.Exe)
	if err != nil {
		return nil, nil, err
	}
	code := &codeReader{c: c, opened: opened, files: map[string]*os.File{}}
	defer code.close()
	threads := make([]Thread, 0, len(c.Threads))
	for i := range c.Threads {
		ct := &c.Threads[i]
		th := Thread{TID: ct.TID}
		if ct.TID == c.PID {
			th.Name = c.Command
		}
		th.Frames, th.Err = v.walkCore(c, code, ct.Frame(), opts.MaxFrames)
		if !opts.NoSymbolize {
			v.SymbolizeFrames(th.Frames)
		}
		threads = append(threads, th)
	}
	return threads, v, nil
}

// NewCoreView builds the module View of the process core c was dumped
// from, as Open does for a live one, with c as the View's memory:
//
//   - every executable file mapping of NT_FILE (executable when the
//     core's PT_LOAD segment at its start has PF_X, or, when the core has
//     no segment there, when the file's PT_LOAD holding its offset has),
//     opened by the path NT_FILE names, with its load bias from the file's
//     program headers (LoadBias). The executable is the mapping holding
//     AT_ENTRY (else AT_PHDR, else the first file whose name starts with
//     c.Command); exe, when not empty, is opened in its place. A file whose
//     build ID (NT_GNU_BUILD_ID, or Go's "Go" note 4) differs from the one
//     in the core's copy of its first page is not used (a warning), and
//     neither is a file that cannot be opened;
//   - the vDSO, read from the core at AT_SYSINFO_EHDR;
//   - the GDB JIT interface's symbol files, found through
//     __jit_debug_descriptor of the executable's symbol table and read
//     from the core's memory (ReadJITList).
//
// Errors: exe was given but the core names no executable mapping
// (no NT_FILE, or none that AT_ENTRY points into), or exe's build ID
// differs from the core's (wrapping ErrBuildIDMismatch); exe cannot be read.
// Other problems are listed by View.Warnings, with c.Warnings. Cost:
// reads the program headers and notes of every mapped file; module files
// are opened for symbols and CFI on first use.
func NewCoreView(c *Core, exe string) (*View, error) {
	v, _, err := newCoreView(c, exe)
	return v, err
}

// newCoreView is NewCoreView; it also returns, for each NT_FILE path it
// could use, the path of the file it opened in its place.
func newCoreView(c *Core, exe string) (*View, map[string]string, error) {
	v := &View{PID: c.PID, Mem: c}
	v.warn = append(v.warn, c.Warnings()...)
	exePath := c.exePath()
	if exe != "" && exePath == "" {
		if len(c.Files) == 0 {
			return nil, nil, fmt.Errorf("procview: the core has no NT_FILE note: where %s was mapped is unknown", exe)
		}
		return nil, nil, fmt.Errorf("procview: no mapping of the core holds the entry point (AT_ENTRY): which file is the executable is unknown")
	}
	type fileInfo struct {
		open  string
		phdrs []ProgHeader
		ok    bool
	}
	files := map[string]*fileInfo{}
	info := func(path string) (*fileInfo, error) {
		if fi := files[path]; fi != nil {
			return fi, nil
		}
		fi := &fileInfo{open: path}
		files[path] = fi
		given := path == exePath && exe != ""
		if given {
			fi.open = exe
		} else if _, err := os.Stat(path); err != nil && strings.HasSuffix(path, " (deleted)") {
			fi.open = strings.TrimSuffix(path, " (deleted)")
		}
		var err error
		if st, serr := os.Stat(fi.open); serr == nil && !st.Mode().IsRegular() {
			// A core names any path: never open a FIFO or a device.
			err = fmt.Errorf("not a regular file (%v)", st.Mode().Type())
		} else {
			fi.phdrs, err = filePhdrs(fi.open)
		}
		if err != nil {
			if given {
				return nil, fmt.Errorf("procview: executable %s: %w", exe, err)
			}
			v.warn = append(v.warn, fmt.Errorf("procview: %s (mapped in the core): %w", fi.open, err))
			return fi, nil
		}
		if err := c.checkFile(path, fi.open, fi.phdrs); err != nil {
			if given {
				return nil, err
			}
			v.warn = append(v.warn, err)
			return fi, nil
		}
		fi.ok = true
		return fi, nil
	}
	type objKey struct {
		path string
		bias uint64
	}
	objs := map[objKey]*object{}
	var exeObj *object
	var exeBias uint64
	for _, m := range c.Files {
		if m.Start >= m.End || m.Path == "" {
			continue
		}
		if s := c.Segment(m.Start); s != nil && s.Flags&elf.PF_X == 0 {
			continue // data, not code: not opened (it may not be ELF)
		}
		fi, err := info(m.Path)
		if err != nil {
			v.Close()
			return nil, nil, err
		}
		if !fi.ok || !c.executable(m, fi.phdrs) {
			continue
		}
		bias, ok := LoadBias(fi.phdrs, m.Start, m.Offset)
		if !ok {
			continue
		}
		k := objKey{fi.open, bias}
		o := objs[k]
		if o == nil {
			path := fi.open
			o = &object{bias: bias, load: func() (*symbolize.Symbolizer, error) { return symbolize.Open(path) }}
			objs[k] = o
			v.objs = append(v.objs, o)
		}
		if m.Path == exePath && exeObj == nil {
			exeObj, exeBias = o, bias
		}
		v.mods = append(v.mods, Module{Name: fi.open, Kind: ModuleFile, Start: m.Start, End: m.End, Bias: bias, obj: o})
	}
	sort.Slice(v.mods, func(i, j int) bool { return v.mods[i].Start < v.mods[j].Start })
	v.mods = dropOverlaps(v.mods)
	if addr, ok := c.Aux(atSysinfoEHDR); ok && addr != 0 {
		if s := c.Segment(addr); s != nil {
			v.addMemModule("[vdso]", ModuleVDSO, addr, s.End()-addr, addr, s.End())
		} else {
			v.warn = append(v.warn, fmt.Errorf("procview: the vDSO at %#x (AT_SYSINFO_EHDR) is not in the core", addr))
		}
	}
	if exeObj != nil {
		v.addJIT(exeObj, exeBias)
	}
	opened := map[string]string{}
	for p, fi := range files {
		if fi.ok {
			opened[p] = fi.open
		}
	}
	return v, opened, nil
}

// exePath returns the NT_FILE path of the process's executable: the
// mapping holding AT_ENTRY, else AT_PHDR, else the first file whose base
// name starts with the process's name; "" when none is found.
func (c *Core) exePath() string {
	for _, at := range []uint64{atEntry, atPHDR} {
		if a, ok := c.Aux(at); ok && a != 0 {
			for _, m := range c.Files {
				if a >= m.Start && a < m.End {
					return m.Path
				}
			}
		}
	}
	if c.Command != "" {
		for _, m := range c.Files {
			if strings.HasPrefix(filepath.Base(m.Path), c.Command) {
				return m.Path
			}
		}
	}
	return ""
}

// executable reports whether mapping m of a file with program headers
// phdrs was executable: from the core's segment at its start, else from
// the file's PT_LOAD holding its offset.
func (c *Core) executable(m CoreFile, phdrs []ProgHeader) bool {
	if s := c.Segment(m.Start); s != nil {
		return s.Flags&elf.PF_X != 0
	}
	for _, p := range phdrs {
		if p.Type == ptLoad && m.Offset >= p.Offset&^0xfff && m.Offset < p.Offset+p.Filesz {
			return p.Flags&pfX != 0
		}
	}
	return false
}

// checkFile compares the build IDs of the file at open (program headers
// phdrs), used for the core's mapping of path, with those in the core's
// copy of the mapping of path at file offset 0 (the ELF header and, in
// the first page, usually the notes: the kernel dumps that page of every
// ELF mapping, coredump_filter bit 4), or, when they have no kind of build
// ID in common, the program headers. Nothing to compare (the page was not
// dumped) is no error; a difference is an error wrapping
// ErrBuildIDMismatch.
func (c *Core) checkFile(path, open string, phdrs []ProgHeader) error {
	var start, end uint64
	found := false
	for _, m := range c.Files {
		if m.Path == path && m.Offset == 0 && m.End > m.Start {
			start, end, found = m.Start, m.End, true
			break
		}
	}
	if !found {
		return nil
	}
	img := sectionReader{c, start, end - start}
	memPhdrs, err := ProgHeaders(img)
	if err != nil {
		return nil
	}
	f, err := os.Open(open)
	if err != nil {
		return nil // reported by the caller's later opening
	}
	defer f.Close()
	inCore, inFile := buildIDs(img, memPhdrs), buildIDs(f, phdrs)
	common := false
	for k := range inCore {
		_, ok := inFile[k]
		common = common || ok
	}
	if !common {
		// No build ID to compare: the program headers must be the same.
		if !slices.Equal(memPhdrs, phdrs) {
			return fmt.Errorf("%w: %s: its program headers differ from those in the core's copy of its first page", ErrBuildIDMismatch, open)
		}
		return nil
	}
	for k, id := range inCore {
		if fid, ok := inFile[k]; ok && fid != id {
			show := func(id string) string {
				if k == "Go" {
					return id // Go's build ID is text
				}
				return hex.EncodeToString([]byte(id))
			}
			return fmt.Errorf("%w: %s: %s build ID %s in the core, %s in the file", ErrBuildIDMismatch, open, k, show(id), show(fid))
		}
	}
	return nil
}

// maxNoteSegment bounds the bytes of one PT_NOTE segment buildIDs reads.
const maxNoteSegment = 64 << 10

// buildIDs returns the build IDs in the PT_NOTE segments (read at their
// p_offset in r) of an ELF file or image: "GNU" for NT_GNU_BUILD_ID
// ("GNU", type 3) and "Go" for Go's build ID note ("Go", type 4). Notes
// that do not fit or segments that cannot be read are skipped.
func buildIDs(r io.ReaderAt, phdrs []ProgHeader) map[string]string {
	out := map[string]string{}
	le := binary.LittleEndian
	for _, p := range phdrs {
		if p.Type != uint32(elf.PT_NOTE) || p.Filesz == 0 || p.Filesz > maxNoteSegment || p.Offset >= 1<<62 {
			continue
		}
		b := make([]byte, p.Filesz)
		if n, _ := r.ReadAt(b, int64(p.Offset)); n < len(b) {
			continue
		}
		for len(b) >= 12 {
			namesz, descsz, typ := uint64(le.Uint32(b)), uint64(le.Uint32(b[4:])), le.Uint32(b[8:])
			descOff := 12 + (namesz+3)&^3
			if descOff+descsz > uint64(len(b)) {
				break
			}
			name := string(bytes.TrimRight(b[12:12+namesz], "\x00"))
			desc := b[descOff : descOff+descsz]
			if name == "GNU" && typ == 3 || name == "Go" && typ == 4 {
				if _, dup := out[name]; !dup && len(desc) > 0 {
					out[name] = string(desc)
				}
			}
			next := descOff + (descsz+3)&^3
			if next >= uint64(len(b)) {
				break
			}
			b = b[next:]
		}
	}
	return out
}
