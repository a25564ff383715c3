package procview

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/elfimage/elfimage/jit/perfmap"
	"github.com/elfimage/elfimage/symbolize"
	"github.com/elfimage/elfimage/unwind"
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
	// PerfMap is the perf map of the process (see View.LoadPerfMap),
	// which names code outside every module and gives the frame-pointer
	// fallback its function starts. Empty: /tmp/perf-PID.map for the
	// core's PID when there is one, trusted when owned by root or by the
	// core's user (NT_PRPSINFO pr_uid), and used only when one of its
	// entries lies in executable memory of the core (the file of a later
	// process with the same PID describes other addresses). A given
	// PerfMap is also trusted when owned by the calling user, and a
	// problem with it is an error of CoreStacks. Options.NoPerfMap reads
	// none.
	PerfMap string
	// Sysroot is the directory the files of the core's machine are under,
	// as gdb's "set sysroot": an absolute path the core names (NT_FILE's,
	// or the dynamic linker's list) is opened under it when the file is
	// there (/usr/aarch64-linux-gnu for a core of qemu-aarch64 -L
	// /usr/aarch64-linux-gnu, a copy of an arm64 machine's root). Empty:
	// the paths as they are.
	Sysroot string
}

// CoreStacks unwinds every thread of the core c as Stacks does for a live
// process: the View of c's modules (NewCoreView with opts.Exe) and the
// process's perf map (CoreOptions.PerfMap), then each thread from its
// NT_PRSTATUS registers over the core's memory, with the walk of
// View.Backtrace (frame-pointer fallback against the core's mappings,
// signal frames without CFI recognised by their code; code in executable
// mappings the core left out is read from the files mapped there, as gdb
// reads text from the executable and its libraries); and, unless
// opts.NoSymbolize, every frame symbolized with its arguments read from
// the core's memory (View.DescribeFrames; opts.NoArgs leaves them out).
// The threads are in the core's order (the one that received the signal
// first); a thread's Name is c.Command for the main thread (tid equal to
// the pid: NT_PRPSINFO names only the process) and empty for the others.
// A read of other memory the core does not hold ends that thread's walk with an
// error wrapping unwind.ErrMemory (and ErrNotDumped where the core left
// the bytes out) in its Thread.Err; other threads are walked all the
// same. The caller closes the View, then c. Errors: those of NewCoreView,
// and a given CoreOptions.PerfMap that cannot be read or is not trusted.
// Cost: the View's (reads the JIT symbol files), then one unwind step per
// frame (a read of the core file per stack slot) and one description per
// frame.
func CoreStacks(c *Core, opts *CoreOptions) ([]Thread, *View, error) {
	if opts == nil {
		opts = &CoreOptions{}
	}
	v, err := newCoreView(c, opts.Exe, opts.Sysroot)
	if err != nil {
		return nil, nil, err
	}
	v.DebugFiles = opts.DebugFiles
	if !opts.NoPerfMap {
		if err := v.loadCorePerfMap(c, opts.PerfMap); err != nil {
			v.Close()
			return nil, nil, err
		}
	}
	threads := make([]Thread, 0, len(c.Threads))
	for i := range c.Threads {
		ct := &c.Threads[i]
		th := Thread{TID: ct.TID}
		if ct.TID == c.PID {
			th.Name = c.Command
		}
		th.Frames, th.Err = v.walk(coreMemory{c, v}, ct.Frame(), opts.MaxFrames)
		if !opts.NoSymbolize {
			var mem unwind.Memory
			if !opts.NoArgs {
				mem = c
			}
			v.DescribeFrames(th.Frames, mem)
		}
		threads = append(threads, th)
	}
	return threads, v, nil
}

// coreMemory is the memory a core's threads are unwound with: the core's
// and, at addresses in executable mappings whose bytes it left out (the
// text of mapped files, which neither the kernel nor gcore dumps by
// default), the mapped file's bytes through the View's codeReader. The
// frame-pointer fallback reads code, the instructions at the innermost
// pc (its prologue and epilogue analysis) and the call before a return
// address (the plausibility check); without the files those reads fail
// in a core where they succeed live, and frames the live process walks
// through (a thread just past the system call in glibc's clone3, which
// has no CFI there) end in errors. Data outside executable mappings is
// read from the core alone.
type coreMemory struct {
	c *Core
	v *View
}

// ReadUint64 implements unwind.Memory.
func (m coreMemory) ReadUint64(addr uint64) (uint64, error) { return m.ReadSized(addr, 8) }

// ReadSized implements unwind.SizedMemory: size (1 to 8) bytes at addr,
// little-endian, from the core, else (an executable mapping the core
// left out) from the file mapped there. Errors are the core's.
func (m coreMemory) ReadSized(addr uint64, size int) (uint64, error) {
	x, err := m.c.ReadSized(addr, size)
	if err == nil || m.v.code == nil || size < 1 || size > 8 || addr+uint64(size) < addr {
		return x, err
	}
	space := addressSpace{m.v}
	if !space.Executable(addr) || !space.Executable(addr+uint64(size)-1) {
		return x, err
	}
	var b [8]byte
	if !m.v.code.read(b[:size], addr) {
		return x, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// loadCorePerfMap loads the perf map of core c's process: path when not
// empty (an error if it cannot be used), else /tmp/perf-PID.map if there
// is one (a problem with it is a warning); see CoreOptions.PerfMap.
func (v *View) loadCorePerfMap(c *Core, path string) error {
	given := path != ""
	uids := []int{c.UID}
	if given {
		uids = append(uids, os.Geteuid())
	} else {
		path = fmt.Sprintf("/tmp/perf-%d.map", c.PID)
		if c.UID < 0 {
			uids = append(uids, os.Geteuid()) // no NT_PRPSINFO: the user reading the core
		}
	}
	err := v.LoadPerfMap(path, uids...)
	switch {
	case err != nil && given:
		return err
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		v.warn = append(v.warn, err)
		return nil
	}
	space := addressSpace{v}
	if slices.ContainsFunc(v.ext.perf.Entries, func(e perfmap.Entry) bool { return space.Executable(e.Start) }) {
		return nil
	}
	v.warn = append(v.warn, fmt.Errorf("procview: %s: none of its %d entries is in executable memory of the core: not this process's perf map", path, len(v.ext.perf.Entries)))
	if !given {
		v.ext.perf, v.ext.perfPath = nil, ""
	}
	return nil
}

// NewCoreView builds the module View of the process core c was dumped
// from, as Open does for a live one, with c as the View's memory:
//
//   - every executable file mapping of NT_FILE, or, for a core without
//     NT_FILE (qemu-user's), of the executable (exe, else the path at
//     AT_EXECFN) at the bias AT_PHDR gives and of the shared objects of
//     the dynamic linker's list in the core's memory (Core.LinkMap), each
//     PT_LOAD of the file a mapping (executable when the
//     core's PT_LOAD segment at its start has PF_X, or, when the core has
//     no segment there, when the file's PT_LOAD holding its offset has),
//     opened by the path NT_FILE names, with its load bias from the file's
//     program headers (LoadBias). The executable is the mapping holding
//     AT_ENTRY (else AT_PHDR, else the first file whose name starts with
//     c.Command); exe, when not empty, is opened in its place. A file for
//     another machine than the core's is not used (a warning wrapping
//     ErrMachine); neither is a file whose
//     build ID (NT_GNU_BUILD_ID, or Go's "Go" note 4) differs from the one
//     in the core's copy of its first page is not used (a warning), and
//     neither is a file that cannot be opened;
//   - the vDSO, read from the core at AT_SYSINFO_EHDR;
//   - the GDB JIT interface's symbol files, found through
//     __jit_debug_descriptor of the executable's symbol table and read
//     from the core's memory (ReadJITList);
//   - the address space the frame-pointer fallback checks return
//     addresses and frame records against, as /proc/PID/maps showed it
//     (Core.Mappings).
//
// Errors: exe was given but the core's NT_FILE names no executable
// mapping (none that AT_ENTRY points into), or exe's build ID
// differs from the core's (wrapping ErrBuildIDMismatch); exe cannot be read.
// Other problems are listed by View.Warnings, with c.Warnings. Cost:
// reads the program headers and notes of every mapped file; module files
// are opened for symbols and CFI on first use.
func NewCoreView(c *Core, exe string) (*View, error) {
	return newCoreView(c, exe, "")
}

// NewCoreViewSysroot is NewCoreView opening the files the core names
// under sysroot (see CoreOptions.Sysroot).
func NewCoreViewSysroot(c *Core, exe, sysroot string) (*View, error) {
	return newCoreView(c, exe, sysroot)
}

func newCoreView(c *Core, exe, sysroot string) (*View, error) {
	v := &View{PID: c.PID, Mem: c, arch: c.Arch}
	v.warn = append(v.warn, c.Warnings()...)
	files := c.Files
	var exePath string
	resolved := map[string]string{} // core path → file opened for it
	if len(files) == 0 {
		files, exePath = v.linkMapFiles(c, exe, sysroot, resolved)
		if exe != "" && exePath == "" {
			return nil, fmt.Errorf("procview: the core has no NT_FILE note, and %s could not be placed: %w", exe, errors.Join(v.warn...))
		}
	} else {
		exePath = c.exePath(files)
		if exe != "" && exePath == "" {
			return nil, fmt.Errorf("procview: no mapping of the core holds the entry point (AT_ENTRY): which file is the executable is unknown")
		}
	}
	type fileInfo struct {
		open  string
		phdrs []ProgHeader
		ok    bool
	}
	infos := map[string]*fileInfo{}
	info := func(path string) (*fileInfo, error) {
		if fi := infos[path]; fi != nil {
			return fi, nil
		}
		fi := &fileInfo{open: sysrootPath(sysroot, path)}
		if r, ok := resolved[path]; ok {
			fi.open = r
		}
		infos[path] = fi
		given := path == exePath && exe != ""
		if given {
			fi.open = exe
		} else if _, err := os.Stat(fi.open); err != nil && strings.HasSuffix(path, " (deleted)") {
			fi.open = sysrootPath(sysroot, strings.TrimSuffix(path, " (deleted)"))
		}
		var err error
		if st, serr := os.Stat(fi.open); serr == nil && !st.Mode().IsRegular() {
			// A core names any path: never open a FIFO or a device.
			err = fmt.Errorf("not a regular file (%v)", st.Mode().Type())
		} else {
			fi.phdrs, err = filePhdrs(fi.open, c.Arch)
		}
		if err != nil {
			if given {
				return nil, fmt.Errorf("procview: executable %s: %w", exe, err)
			}
			v.warn = append(v.warn, fmt.Errorf("procview: %s (mapped in the core): %w", fi.open, err))
			return fi, nil
		}
		if err := c.checkFile(files, path, fi.open, fi.phdrs); err != nil {
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
	for _, m := range files {
		if m.Start >= m.End || m.Path == "" {
			continue
		}
		if s := c.Segment(m.Start); s != nil && s.Flags&elf.PF_X == 0 {
			continue // data, not code: not opened (it may not be ELF)
		}
		fi, err := info(m.Path)
		if err != nil {
			v.Close()
			return nil, err
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
			o = &object{bias: bias, path: path, name: m.Path, load: func() (*symbolize.Symbolizer, error) { return symbolize.Open(path) }}
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
	v.maps = c.mappings(files, v.mods)
	// Code for recognising signal frames: from the core, else from the
	// files it could use, where it left their text out.
	v.code = &codeReader{c: c, mapped: files, opened: map[string]string{}, files: map[string]*os.File{}}
	for p, fi := range infos {
		if fi.ok {
			v.code.opened[p] = fi.open
		}
	}
	return v, nil
}

// exePath returns the NT_FILE path of the process's executable: the
// mapping holding AT_ENTRY, else AT_PHDR, else the first file whose base
// name starts with the process's name; "" when none is found.
func (c *Core) exePath(files []CoreFile) string {
	for _, at := range []uint64{atEntry, atPHDR} {
		if a, ok := c.Aux(at); ok && a != 0 {
			for _, m := range files {
				if a >= m.Start && a < m.End {
					return m.Path
				}
			}
		}
	}
	if c.Command != "" {
		for _, m := range files {
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
func (c *Core) checkFile(files []CoreFile, path, open string, phdrs []ProgHeader) error {
	var start, end uint64
	found := false
	for _, m := range files {
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

// Mappings returns the address space of the process as /proc/PID/maps
// showed it when the core was written, sorted by Start: a Mapping per
// PT_LOAD segment (the kernel and gcore write one per mapping, also those
// whose bytes they leave out), with the permissions of its p_flags
// ("r-xp": whether the mapping was private or shared is not recorded, and
// reads as private) and, where an NT_FILE entry covers it, that file's
// path and the offset in it. Device and inode are unknown (0). Cost:
// O(segments log files); allocates the result.
func (c *Core) Mappings() []Mapping { return c.mappings(c.Files, nil) }

// mappings is Mappings with, for code a module covers but no segment
// does (a file mapping the core left out altogether), a mapping "r-xp"
// named for the module, so that the address space agrees with the
// modules on what is code.
func (c *Core) mappings(mapped []CoreFile, mods []Module) []Mapping {
	files := append([]CoreFile(nil), mapped...)
	sort.SliceStable(files, func(i, j int) bool { return files[i].Start < files[j].Start })
	out := make([]Mapping, 0, len(c.Segments))
	for _, s := range c.Segments {
		m := Mapping{Start: s.Addr, End: s.End(), Perms: segmentPerms(s.Flags)}
		i := sort.Search(len(files), func(i int) bool { return files[i].End > s.Addr })
		if i < len(files) && files[i].Start <= s.Addr {
			m.Path, m.Offset = files[i].Path, files[i].Offset+(s.Addr-files[i].Start)
		}
		out = append(out, m)
	}
	if vdso, ok := c.Aux(atSysinfoEHDR); ok {
		for i := range out {
			if out[i].Start == vdso && out[i].Path == "" {
				out[i].Path = "[vdso]"
			}
		}
	}
	var extra []Mapping
	for _, md := range mods {
		lo := md.Start
		i := sort.Search(len(out), func(i int) bool { return out[i].End > lo })
		for lo < md.End {
			hi := md.End
			if i < len(out) && out[i].Start <= lo {
				lo, i = out[i].End, i+1 // covered up to there
				continue
			}
			if i < len(out) && out[i].Start < hi {
				hi = out[i].Start
			}
			extra = append(extra, Mapping{Start: lo, End: hi, Perms: "r-xp", Path: md.Name})
			lo = hi
		}
	}
	if len(extra) > 0 {
		out = append(out, extra...)
		sort.Slice(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	}
	return out
}

// segmentPerms spells a segment's p_flags as /proc/PID/maps does.
func segmentPerms(f elf.ProgFlag) string {
	b := []byte("---p")
	if f&elf.PF_R != 0 {
		b[0] = 'r'
	}
	if f&elf.PF_W != 0 {
		b[1] = 'w'
	}
	if f&elf.PF_X != 0 {
		b[2] = 'x'
	}
	return string(b)
}
