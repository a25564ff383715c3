package procview

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"

	"github.com/elfimage/elfimage/elfobj"
)

// Bounds on what is read of the dynamic linker's state from a core (its
// memory is untrusted).
const (
	// MaxLinkMapEntries bounds the link_map entries walked (the shared
	// objects of a process).
	MaxLinkMapEntries = 1 << 12
	// maxDynamic bounds the bytes of the executable's dynamic section read.
	maxDynamic = 64 << 10
	// maxCString bounds a string read from a core's memory.
	maxCString = 4096
	// maxLinkNames bounds the bytes of all the names of a link map.
	maxLinkNames = 1 << 20
)

// Layouts of the dynamic linker's ELF64 structures (glibc <link.h>, the
// System V ABI's r_debug protocol), in bytes.
const (
	dtNull  = 0
	dtDebug = 21

	rDebugMap  = 8 // struct link_map *r_map (after int r_version, padded)
	linkAddr   = 0 // ElfW(Addr) l_addr: the load bias
	linkName   = 8 // char *l_name
	linkNext   = 24
	linkMinLen = 32
	atExecFn   = 31 // AT_EXECFN: the address of the executable's path
)

// LinkMapEntry is one shared object of the dynamic linker's list (glibc's
// struct link_map through r_debug.r_map): its load bias (l_addr) and its
// path (l_name, as the process named it: a path of the machine that ran
// it).
type LinkMapEntry struct {
	Bias uint64
	Path string
}

// cstring reads the NUL-terminated string at addr from the core's memory
// (at most maxCString bytes).
func (c *Core) cstring(addr uint64) (string, error) { return cstring(c.read, addr) }

// cstring reads the NUL-terminated string at addr with read (at most
// maxCString bytes).
func cstring(read func([]byte, uint64) (int, error), addr uint64) (string, error) {
	var out []byte
	var buf [64]byte
	for len(out) < maxCString {
		n, err := read(buf[:], addr+uint64(len(out)))
		if i := bytes.IndexByte(buf[:n], 0); i >= 0 {
			return string(append(out, buf[:i]...)), nil
		}
		out = append(out, buf[:n]...)
		if err != nil {
			// read returns the bytes before the memory it cannot read:
			// the string runs into it.
			return "", err
		}
	}
	return "", fmt.Errorf("string at %#x is longer than %d bytes", addr, maxCString)
}

// LinkMap returns the dynamic linker's list of shared objects in the
// core's memory, found as gdb finds it in a core without NT_FILE (such as
// qemu-user's): the executable's dynamic section at run-time address
// dynamic (its PT_DYNAMIC p_vaddr plus its load bias), its DT_DEBUG entry
// (the address of struct r_debug, which the dynamic linker fills in), and
// the link_map chain from r_debug.r_map, in the linker's order (the
// executable first, with an empty Path). A static executable, or one that
// died before the dynamic linker set DT_DEBUG, has no list: nil, nil.
// Errors: unreadable memory (wrapping unwind.ErrMemory), more than
// MaxLinkMapEntries entries (a cycle), a name longer than 4096 bytes, names
// of more than 1 MiB in all; the entries before the error are returned.
// Cost: one read per dynamic entry and three per shared object.
func (c *Core) LinkMap(dynamic uint64, dynamicSize uint64) ([]LinkMapEntry, error) {
	return c.linkMap(dynamic, dynamicSize, c.read)
}

// linkMap is LinkMap reading the names with readName (the dynamic
// linker's own name is in the executable's .interp, which a core may
// leave out).
func (c *Core) linkMap(dynamic uint64, dynamicSize uint64, readName func([]byte, uint64) (int, error)) ([]LinkMapEntry, error) {
	le := binary.LittleEndian
	size := min(dynamicSize, maxDynamic)
	var rdebug uint64
	for off := uint64(0); off+16 <= size; off += 16 {
		var e [16]byte
		if _, err := c.read(e[:], dynamic+off); err != nil {
			return nil, fmt.Errorf("reading the dynamic section at %#x: %w", dynamic+off, err)
		}
		tag, val := le.Uint64(e[:]), le.Uint64(e[8:])
		if tag == dtNull {
			break
		}
		if tag == dtDebug {
			rdebug = val
			break
		}
	}
	if rdebug == 0 {
		return nil, nil
	}
	lm, err := c.ReadUint64(rdebug + rDebugMap)
	if err != nil {
		return nil, fmt.Errorf("reading r_debug.r_map at %#x (DT_DEBUG): %w", rdebug+rDebugMap, err)
	}
	var out []LinkMapEntry
	names := 0
	for lm != 0 {
		if names > maxLinkNames {
			return out, fmt.Errorf("the names of the link_map entries exceed %d bytes", maxLinkNames)
		}
		if len(out) == MaxLinkMapEntries {
			return out, fmt.Errorf("more than %d link_map entries (a cycle?)", MaxLinkMapEntries)
		}
		var b [linkMinLen]byte
		if _, err := c.read(b[:], lm); err != nil {
			return out, fmt.Errorf("reading the link_map at %#x: %w", lm, err)
		}
		e := LinkMapEntry{Bias: le.Uint64(b[linkAddr:])}
		if p := le.Uint64(b[linkName:]); p != 0 {
			name, err := cstring(readName, p)
			if err != nil {
				return out, fmt.Errorf("reading l_name of the link_map at %#x: %w", lm, err)
			}
			e.Path = name
			names += len(name) + 1
		}
		out = append(out, e)
		lm = le.Uint64(b[linkNext:])
	}
	return out, nil
}

// sysrootPath returns where to open a file the core names by path: under
// sysroot when it is set, the path is absolute and the file is there,
// else path itself.
func sysrootPath(sysroot, path string) string {
	if sysroot == "" || !filepath.IsAbs(path) {
		return path
	}
	p := filepath.Join(sysroot, path)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return path
}

// linkMapFiles makes the file mappings of a core without NT_FILE: the
// executable (exe, else the path at AT_EXECFN, relative paths against
// the current directory, else under sysroot) at the bias AT_PHDR or
// AT_ENTRY gives, and the shared objects of the dynamic linker's list
// (LinkMap, read through the executable's PT_DYNAMIC), each PT_LOAD
// segment of each file as one CoreFile with the path the process used
// (opened as open says). Problems are warnings. It returns the mappings
// and the executable's path among them ("" when none).
func (v *View) linkMapFiles(c *Core, exe, sysroot string, open map[string]string) ([]CoreFile, string) {
	page := uint64(4096)
	if p, ok := c.Aux(atPageSize); ok && p >= 4096 && p <= 1<<30 && p&(p-1) == 0 {
		page = p
	}
	exePath := exe
	if exePath == "" {
		a, ok := c.Aux(atExecFn)
		if !ok || a == 0 {
			v.warn = append(v.warn, fmt.Errorf("procview: the core has no NT_FILE note and no AT_EXECFN: which file is the executable is unknown (give it)"))
			return nil, ""
		}
		s, err := c.cstring(a)
		if err != nil {
			v.warn = append(v.warn, fmt.Errorf("procview: the core has no NT_FILE note, and the executable's path at AT_EXECFN: %w", err))
			return nil, ""
		}
		exePath = s
		if _, err := os.Stat(s); err != nil {
			exePath = sysrootPath(sysroot, s)
		}
	}
	open[exePath] = exePath
	ef, err := os.Open(exePath)
	if err != nil {
		v.warn = append(v.warn, fmt.Errorf("procview: the core has no NT_FILE note, and its executable: %w", err))
		return nil, ""
	}
	h, herr := elfobj.ReadHeader(ef)
	m, phdrs, err := machineProgHeaders(ef)
	ef.Close()
	if err == nil && m != c.Arch.Machine {
		err = fmt.Errorf("%w: its machine is %v, the core's %v", ErrMachine, m, c.Arch.Machine)
	}
	if err != nil {
		v.warn = append(v.warn, fmt.Errorf("procview: executable %s: %w", exePath, err))
		return nil, ""
	}
	var bias uint64
	found := false
	for _, p := range phdrs {
		if p.Type == uint32(elf.PT_PHDR) {
			if a, ok := c.Aux(atPHDR); ok {
				bias, found = a-p.Vaddr, true
			}
		}
	}
	if !found && herr == nil {
		if a, ok := c.Aux(atEntry); ok {
			bias, found = a-h.Entry, true
		}
	}
	if !found {
		v.warn = append(v.warn, fmt.Errorf("procview: the core has no NT_FILE note and no AT_PHDR or AT_ENTRY: where %s was loaded is unknown", exePath))
		return nil, ""
	}
	var files []CoreFile
	add := func(path string, bias uint64, phdrs []ProgHeader) {
		for _, p := range phdrs {
			if p.Type != ptLoad || p.Memsz == 0 {
				continue
			}
			start := bias + p.Vaddr&^(page-1)
			end := bias + (p.Vaddr+p.Memsz+page-1)&^(page-1)
			if end <= start {
				continue
			}
			files = append(files, CoreFile{Start: start, End: end, Offset: p.Offset &^ (page - 1), Path: path})
		}
	}
	add(exePath, bias, phdrs)
	var dyn ProgHeader
	for _, p := range phdrs {
		if p.Type == uint32(elf.PT_DYNAMIC) {
			dyn = p
		}
	}
	if dyn.Memsz == 0 {
		return files, exePath // static: no shared objects
	}
	// Names the core did not dump (the dynamic linker's, in the
	// executable's .interp) are read from the executable's file.
	cr := &codeReader{c: c, mapped: files, opened: map[string]string{exePath: exePath}, files: map[string]*os.File{}}
	defer cr.close()
	readName := func(p []byte, addr uint64) (int, error) {
		n, err := c.read(p, addr)
		if err != nil && n == 0 {
			if m := min(len(p), 8); cr.read(p[:m], addr) {
				return m, nil
			}
		}
		return n, err
	}
	entries, err := c.linkMap(bias+dyn.Vaddr, dyn.Memsz, readName)
	if err != nil {
		v.warn = append(v.warn, fmt.Errorf("procview: the dynamic linker's list of shared objects (the core has no NT_FILE note): %w", err))
	}
	for _, e := range entries {
		if e.Path == "" || !filepath.IsAbs(e.Path) {
			continue // the executable, or the vDSO ("linux-vdso.so.1")
		}
		p := sysrootPath(sysroot, e.Path)
		lphdrs, err := filePhdrs(p, c.Arch)
		if err != nil {
			hint := ""
			if sysroot == "" {
				hint = " (the core is from another system: give the sysroot its files are under)"
			}
			v.warn = append(v.warn, fmt.Errorf("procview: %s (in the core's list of shared objects): %w%s", p, err, hint))
			continue
		}
		open[e.Path] = p
		add(e.Path, e.Bias, lphdrs)
	}
	return files, exePath
}
