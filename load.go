package elfimage

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/bits"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/elfimage/elfimage/addrmap"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/debugfile"
	"github.com/elfimage/elfimage/elfobj"
	"github.com/elfimage/elfimage/native"
)

// LoadOptions tunes [Open] and [Load]. A nil *LoadOptions means the zero
// value.
type LoadOptions struct {
	// ForceRead makes Open skip mmap of the file and use the read()
	// fallback (anonymous memory filled from the file), as when mmap of
	// the file fails.
	ForceRead bool
	// Arch is the ABI the image must be for (e_machine); nil means the
	// running program's (arch.ForGOARCH(runtime.GOARCH): arch.X86_64 on
	// amd64, arch.AArch64 on arm64; arch.X86_64 on any other GOARCH).
	Arch *arch.Arch
	// DebugFiles finds the debug file of a stripped image (one without
	// .debug_info: [Strip], eu-strip, strip) for its debug queries, by
	// its build ID and .gnu_debuglink in gdb's order, then through its
	// Remote source (a debuginfod client, for example) when it has one
	// (package debugfile). nil means a zero debugfile.Finder:
	// debugfile.DefaultDebugDir (/usr/lib/debug) and the image's own
	// directory, no remote source.
	DebugFiles *debugfile.Finder
}

// defaultFinder is the finder of images loaded without
// LoadOptions.DebugFiles, shared (a Finder has no state of its own).
var defaultFinder = &debugfile.Finder{}

// debugFinder returns the debug file finder of opts.
func debugFinder(opts *LoadOptions) *debugfile.Finder {
	if opts == nil || opts.DebugFiles == nil {
		return defaultFinder
	}
	return opts.DebugFiles
}

// registry maps the loaded range [Base, Base+Size) of every open image to
// the image.
var registry addrmap.Map[*Image]

// liveMappings counts the mappings the loader holds (tests check that a
// failed load leaves none).
var liveMappings atomic.Int64

// Lookup returns the open image whose loaded range [Base, Base+Size)
// contains pc. When none does, it returns addrmap.ErrNotFound itself (not
// wrapped, so that a miss allocates nothing). Lookup takes no lock,
// allocates nothing and costs O(log n) in the number of open images.
//
// Lookup does not keep the image mapped: its owner may Close it at any time
// afterwards, and it must not be used after that. Use [Acquire] when another
// goroutine may close the image.
func Lookup(pc uintptr) (*Image, error) { return registry.Lookup(pc) }

// Acquire is [Lookup] that holds the image: it stays mapped, even if it is
// closed meanwhile, until the caller calls Release on the returned Ref
// (exactly once); ref.Value() is the image. When no open image contains pc
// it returns nil and addrmap.ErrNotFound itself. Acquire takes no lock,
// allocates nothing and costs O(log n) plus one compare-and-swap.
func Acquire(pc uintptr) (*addrmap.Ref[*Image], error) { return registry.Acquire(pc) }

// Images returns the open images in increasing address order (a snapshot;
// allocates the slice), without the library's entry image ([EntryImage]).
func Images() []*Image {
	var out []*Image
	for _, im := range registry.All() {
		if !im.isEntry() {
			out = append(out, im)
		}
	}
	return out
}

// Open loads the ELF image at path with one
// mmap(PROT_READ, MAP_PRIVATE) of the whole file (the file descriptor is
// closed before Open returns), validation of every ELF header and program
// header field the loader relies on, then mprotect of the R+W segments to
// PROT_READ|PROT_WRITE, application of the R_X86_64_RELATIVE or
// R_AARCH64_RELATIVE (arch RelocRelative) relocations found through PT_DYNAMIC (DT_RELA, DT_RELASZ,
// DT_RELAENT), mprotect of the R+X segments to PROT_READ|PROT_EXEC, and
// registration of [Base, Base+Size) for [Lookup]. No page is ever writable
// and executable at once. What the loader validates (the ELF and program
// headers, the dynamic table, the notes, the relocation table) it reads
// with pread(2) into a pooled buffer, not through the mapping: the
// file's first KiB, or as much of its first 4 KiB as the process's
// previous loads used (rounded up to a KiB), at once; the rest of those
// 4 KiB with a second pread when a table lies there; a table further out
// with one more (or, past 2 KiB, through the mapping). A load thus faults
// in no page of the file but one copy-on-write page per relocated data
// page (a read fault would also map up to 16 neighbouring pages, which
// munmap must tear down and which count in the process's RSS). The non-loaded tail (symbols, DWARF, section
// headers) is not read: the kernel pages it in when a query touches it.
// The file is mapped one page above a page-table anchor when one is free
// (a PROT_NONE page that outlives the image, at most 16 of them; see
// place.go), so that the page-table pages the copy-on-write store needs
// are still there from the previous image instead of being allocated at
// load and freed, with a flush of the whole TLB, at Close.
//
// When mmap of the file fails, when the kernel refuses PROT_EXEC on the
// file mapping (a noexec mount), or when opts.ForceRead is set, Open falls
// back to read(): it maps anonymous memory of the file size rounded up to
// pages, reads the whole file into it, makes it PROT_READ and continues as
// above; the result is byte-for-byte and behaviourally the same, except
// that [Image.Mapped] reports false.
//
// What is validated (System V gABI and the elfimage layout): e_ident magic,
// ELFCLASS64, ELFDATA2LSB, EV_CURRENT, OS ABI NONE or GNU; e_type ET_DYN;
// e_machine of the Arch; e_version; e_ehsize 64; e_phentsize 56; e_phnum
// non-zero and not PN_XNUM (extended numbering is refused); e_phoff at or
// after the ELF header and 8-byte aligned; the program header table inside
// the file and inside the first PT_LOAD; every PT_LOAD with p_offset == p_vaddr, page
// aligned, p_filesz == p_memsz, inside the file, flags PF_R plus at most one
// of PF_W and PF_X, in increasing order without sharing a page, the first
// at offset 0 and read-only; PT_DYNAMIC, PT_NOTE and PT_GNU_EH_FRAME inside
// a PT_LOAD; the dynamic table terminated by DT_NULL within its segment and
// free of unsupported tags (DT_NEEDED, DT_REL*, DT_JMPREL, DT_TEXTREL,
// DT_RELR); the relocation table 8-byte aligned, inside a non-writable
// PT_LOAD, with DT_RELAENT 24; each relocation of type RelocRelative, symbol 0, with
// [r_offset, r_offset+8) inside a writable PT_LOAD; e_entry 0 or inside an
// executable PT_LOAD. PT_INTERP and PT_TLS are refused.
//
// Errors: a malformed image gives a *FormatError naming the file offset and
// field; system call failures are returned wrapped with the path. On any
// error nothing stays mapped (but for an anchor page). Cost: open, fstat,
// mmap (plus an mmap and up to two munmaps when it makes an anchor), one
// pread (two when a table lies past what the previous loads read of the
// first 4 KiB, or the notes past those 4 KiB, which in the images Link
// writes happens only when .rela.dyn is large; more for tables
// elsewhere), one mprotect per writable and per executable segment and
// close, plus time linear in the number of program headers,
// dynamic entries and relocations; one allocation, the Image, which holds
// its registry entry (the registry's rebuild of its index, once every 16
// loads, aside); the read fallback also copies the file.
//
// Concurrent modification of the file while it is mapped is not guarded
// against (as with any mmap-based loader; truncation raises SIGBUS).
func Open(path string, opts *LoadOptions) (*Image, error) {
	if err := installEntry(); err != nil {
		return nil, err
	}
	return openImage(path, opts)
}

func openImage(path string, opts *LoadOptions) (*Image, error) {
	a, pageSize := options(opts)
	// Raw system calls, not an *os.File: os.OpenFile would also try to
	// register the descriptor with the runtime's poller (three fcntl and
	// an epoll_ctl for a regular file) and allocate the File and its
	// finalizer. O_NONBLOCK: opening a named pipe must not wait for a
	// writer (it is refused below as not a regular file); regular files
	// ignore it.
	fd, err := openFile(path)
	if err != nil {
		return nil, fmt.Errorf("elfimage: %w", err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := ignoringEINTR(func() error { return unix.Fstat(fd, &st) }); err != nil {
		return nil, fmt.Errorf("elfimage: %w", &fs.PathError{Op: "stat", Path: path, Err: err})
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, &FormatError{Source: path, Field: "file", Msg: fmt.Sprintf("not a regular file (mode %v)", fileMode(st.Mode))}
	}
	size := st.Size
	if size < ehdrSize {
		return nil, &FormatError{Source: path, Offset: uint64(size), Field: "ELF header",
			Msg: fmt.Sprintf("file is %d bytes, shorter than the %d-byte ELF header", size, ehdrSize)}
	}
	if uint64(size) > math.MaxInt-pageSize {
		return nil, &FormatError{Source: path, Offset: uint64(size), Field: "file", Msg: "file too large to map"}
	}
	if opts == nil || !opts.ForceRead {
		if mem, anchor, err := mapFileAnchored(fd, int(size)); err == nil {
			// The headers and the tables they point to are read with
			// pread, not through the mapping: a read fault would map up
			// to 16 pages around it (fault-around) that munmap must
			// tear down again and that count in the process's RSS.
			buf := ioBufs.Get().(*ioBuf)
			src := source{path: path, data: mem[:size:size], fd: fd, head: buf.head[:], first: firstRead(), scratch: buf.scratch[:], progs: buf.progs[:], anchor: anchor}
			im, err := finish(path, mem, &src, true, a, pageSize, opts)
			ioBufs.Put(buf)
			if err == nil {
				noteHeadUsed(src.used)
			}
			if err != nil {
				putAnchor(anchor) // finish unmapped mem
			}
			if err == nil || !errors.Is(err, errExecDenied) {
				return im, err
			}
		}
		// Fall back to read().
	}
	mem, err := mapAnon(int(size), pageSize)
	if err != nil {
		return nil, fmt.Errorf("elfimage: %s: %w", path, err)
	}
	if err := preadFull(fd, mem[:size], 0); err != nil {
		unmap(mem)
		return nil, fmt.Errorf("elfimage: read %s: %w", path, err)
	}
	if err := unix.Mprotect(mem, unix.PROT_READ); err != nil {
		unmap(mem)
		return nil, fmt.Errorf("elfimage: %s: mprotect: %w", path, err)
	}
	src := memSource(path, mem[:size:size])
	return finish(path, mem, &src, false, a, pageSize, opts)
}

// openFile opens path read-only, close-on-exec and non-blocking, retrying
// on EINTR; errors are *fs.PathError, as os.Open's. A path shorter than
// 512 bytes is made NUL-terminated on the stack (unix.Open would allocate
// the copy).
func openFile(path string) (int, error) {
	const flags = unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK
	var buf [512]byte
	short := len(path) < len(buf) && strings.IndexByte(path, 0) < 0
	if short {
		copy(buf[:], path)
	}
	dirfd := unix.AT_FDCWD
	for {
		var fd int
		var err error
		if short {
			r, _, e := unix.Syscall6(unix.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(&buf[0])), flags, 0, 0, 0)
			fd = int(r)
			if e != 0 {
				err = e
			}
		} else {
			fd, err = unix.Open(path, flags, 0)
		}
		if err == nil {
			return fd, nil
		}
		if err != unix.EINTR {
			return -1, &fs.PathError{Op: "open", Path: path, Err: err}
		}
	}
}

func ignoringEINTR(f func() error) error {
	for {
		if err := f(); err != unix.EINTR {
			return err
		}
	}
}

// fileMode gives the type bits of a stat mode as fs.FileMode, for errors.
func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	}
	return mode
}

// preadFull reads len(b) bytes of fd at off; a file shorter than that (it
// shrank since fstat) gives io.ErrUnexpectedEOF.
func preadFull(fd int, b []byte, off int64) error {
	for len(b) > 0 {
		n, err := unix.Pread(fd, b, off)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return err
		case n == 0:
			return io.ErrUnexpectedEOF
		}
		b, off = b[n:], off+int64(n)
	}
	return nil
}

// Load loads an image from bytes in memory (for example the output of
// [Link]) exactly as the read fallback of [Open] does: it copies data into
// fresh page-aligned anonymous memory, makes it read-only, validates it,
// applies protections and relocations and registers it. name is used as
// [Image.Path] and in errors. data is not retained. Errors and cost as for
// Open (plus the copy); on error nothing stays mapped.
func Load(name string, data []byte, opts *LoadOptions) (*Image, error) {
	if err := installEntry(); err != nil {
		return nil, err
	}
	return loadImage(name, data, opts)
}

func loadImage(name string, data []byte, opts *LoadOptions) (*Image, error) {
	a, pageSize := options(opts)
	if len(data) < ehdrSize {
		return nil, &FormatError{Source: name, Offset: uint64(len(data)), Field: "ELF header",
			Msg: fmt.Sprintf("image is %d bytes, shorter than the %d-byte ELF header", len(data), ehdrSize)}
	}
	if uint64(len(data)) > math.MaxInt-pageSize {
		return nil, &FormatError{Source: name, Offset: uint64(len(data)), Field: "file", Msg: "image too large to map"}
	}
	mem, err := mapAnon(len(data), pageSize)
	if err != nil {
		return nil, fmt.Errorf("elfimage: %s: %w", name, err)
	}
	copy(mem, data)
	if err := unix.Mprotect(mem, unix.PROT_READ); err != nil {
		unmap(mem)
		return nil, fmt.Errorf("elfimage: %s: mprotect: %w", name, err)
	}
	src := memSource(name, mem[:len(data):len(data)])
	return finish(name, mem, &src, false, a, pageSize, opts)
}

func options(opts *LoadOptions) (*arch.Arch, uint64) {
	a := hostArch
	if opts != nil && opts.Arch != nil {
		a = opts.Arch
	}
	ps := a.PageSize
	if sys := uint64(os.Getpagesize()); sys > ps {
		ps = sys
	}
	return a, ps
}

// errExecDenied marks a refused PROT_EXEC on a file mapping, after which
// Open retries with the read fallback.
var errExecDenied = errors.New("elfimage: executable mapping denied")

// finish validates the PROT_READ mapping mem holding the image src.data
// (read through src), applies protections and relocations and registers
// the image. On error it unmaps mem.
func finish(path string, mem []byte, src *source, mapped bool, a *arch.Arch, pageSize uint64, opts *LoadOptions) (im *Image, err error) {
	defer func() {
		if err != nil {
			unmap(mem)
			im = nil
		}
	}()
	data := src.data
	// The Image is allocated first so that the plan (segments, tail
	// sections) is written straight into what the image keeps.
	im = &Image{path: path, arch: a, mem: mem, data: data, mapped: mapped, anchor: src.anchor, debugFiles: debugFinder(opts)}
	p := &im.plan
	if err := parseFrom(src, a, pageSize, p); err != nil {
		return nil, err
	}
	base := uint64(uintptr(unsafePointer(mem)))
	for _, s := range p.segs {
		if s.Flags&elf.PF_W != 0 && s.Size > 0 {
			if err := mprotect(mem[s.Addr:s.Addr+s.Size], unix.PROT_READ|unix.PROT_WRITE); err != nil {
				return nil, fmt.Errorf("elfimage: %s: mprotect segment at %#x read-write: %w", path, s.Addr, err)
			}
		}
	}
	if err := relocateFrom(src, data, base, p, a, true); err != nil {
		return nil, err
	}
	for _, s := range p.segs {
		if s.Flags&elf.PF_X != 0 && s.Size > 0 {
			if !mapped {
				// The code was copied into anonymous memory by data
				// stores: make instruction fetches see it (AArch64;
				// a no-op on x86-64). File pages need nothing: the
				// kernel makes them coherent when it maps them
				// executable.
				native.SyncInstructionCache(uintptr(base+s.Addr), int(s.Size))
			}
			if err := mprotect(mem[s.Addr:s.Addr+s.Size], unix.PROT_READ|unix.PROT_EXEC); err != nil {
				if mapped && (errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)) {
					err = fmt.Errorf("%w: %w", errExecDenied, err)
				}
				return nil, fmt.Errorf("elfimage: %s: mprotect segment at %#x read-execute: %w", path, s.Addr, err)
			}
		}
	}
	// Tell debuggers before the image is reachable through Lookup, so
	// that no Close can come between registering and notifying.
	notifyDebuggerLoaded(im)
	if err := registry.InsertRef(uintptr(base), uintptr(base+p.size), im, &im.ref); err != nil {
		notifyDebuggerUnloaded(im)
		return nil, fmt.Errorf("elfimage: %s: register: %w", path, err)
	}
	return im, nil
}

func unsafePointer(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

// mapFile maps size bytes of fd from offset 0, PROT_READ, MAP_PRIVATE.
//
// The loader maps with unix.MmapPtr and unmaps with unix.MunmapPtr's
// raw equivalent, not with unix.Mmap and unix.Munmap, which record every
// mapping in a map under a mutex (about 80 bytes of heap per open image,
// a map insert and delete per load). Its mprotect and munmap are raw
// system calls (unix.RawSyscall), as the Go runtime makes its own: they
// change the address space and wait for no I/O, so they need not tell the
// scheduler that the goroutine may block (entersyscall and exitsyscall).
// open, fstat, pread and close, which may wait for a file system, and
// mmap (whose result vet will not let us turn into a pointer by hand) are
// ordinary system calls.
func mapFile(fd, size int) ([]byte, error) {
	p, err := unix.MmapPtr(fd, 0, nil, uintptr(size), unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		return nil, err
	}
	liveMappings.Add(1)
	return unsafe.Slice((*byte)(p), size), nil
}

// mapAnon maps size bytes rounded up to pageSize of zeroed read-write
// anonymous memory.
func mapAnon(size int, pageSize uint64) ([]byte, error) {
	n := int(alignUp(uint64(size), pageSize))
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("mmap %d anonymous bytes: %w", n, err)
	}
	liveMappings.Add(1)
	return unsafe.Slice((*byte)(p), n), nil
}

// unmap unmaps a mapping of mapFile or mapAnon (a raw system call, see
// mapFile).
func unmap(mem []byte) error {
	if _, _, e := unix.RawSyscall(unix.SYS_MUNMAP, uintptr(unsafePointer(mem)), uintptr(len(mem)), 0); e != 0 {
		return fmt.Errorf("elfimage: munmap: %w", e)
	}
	liveMappings.Add(-1)
	return nil
}

// mprotect is unix.Mprotect as a raw system call (see mapFile); b is not
// empty.
func mprotect(b []byte, prot int) error {
	if _, _, e := unix.RawSyscall(unix.SYS_MPROTECT, uintptr(unsafePointer(b)), uintptr(len(b)), uintptr(prot)); e != 0 {
		return e
	}
	return nil
}

// alignUp rounds x up to a multiple of the power of two a; x must be at
// most MaxUint64-a.
func alignUp(x, a uint64) uint64 { return (x + a - 1) &^ (a - 1) }

// plan is what parseImage learns from a valid image; an [Image] keeps it.
// Its slices alias the image's data: none of them is read at load.
type plan struct {
	size           uint64 // end of the last PT_LOAD
	entry          uint64
	segs           []Segment
	segBuf         [4]Segment // segs for up to four PT_LOADs (Link writes R, R+W, R+X, R)
	relaOff        uint64     // file offset of the Elf64_Rela table
	relaCount      uint64
	buildID        []byte
	ehFrameHdr     []byte
	ehFrameHdrAddr uint64
	tail           tailSections // PTProcTable etc.: bytes not read at load
	notes          []string     // what was ignored (Image.LoadNotes)
}

// tailSections holds the tail sections found through the program headers
// PTProcTable, PTLineProgram and PTLineStrings (nil: none).
type tailSections [3][]byte

// get returns the section of program header type t, nil when none.
func (ts *tailSections) get(t elf.ProgType) []byte {
	if i := uint64(t) - uint64(PTProcTable); i < uint64(len(ts)) {
		return ts[i]
	}
	return nil
}

// ioBuf is the scratch memory of one Open: the file's first bytes, room
// for one more table read with pread and the decoded program headers.
// Pooled, so that a load allocates only what its image keeps and zeroes
// none of it.
type ioBuf struct {
	head    [headSize]byte
	scratch [scratchSize]byte
	progs   [progStack]elf.ProgHeader
}

const (
	// headSize is how much of the file's start Open reads with pread
	// into the head, at most: the ELF header and program headers and, in
	// the images Link writes, .rela.dyn and .dynamic (at the start of the
	// first segment). The first pread reads headFirst bytes of it, the
	// rest with a second one when a table lies there.
	headSize = 4096
	// headStep is the unit of headFirst: the first read rounded up.
	headStep = 1024
	// scratchSize bounds one further pread of a table past the head (the
	// note segment; dynamic or relocation tables placed elsewhere, the
	// latter read in chunks). Larger tables are read through the mapping.
	scratchSize = 2048
	// progStack is how many program headers parseFrom decodes into a
	// table it does not allocate (Link writes 11).
	progStack = 16
)

var ioBufs = sync.Pool{New: func() any { return new(ioBuf) }}

// headFirst is how many bytes of the head the first pread of an Open
// reads: what the previous loads used of it, rounded up to headStep
// (starting at headStep; images Link writes with fewer than about ten
// relocations need 1 KiB). It grows at once to what a load used and
// shrinks a step after headShrink loads in a row that used less, so that
// a process loading images of one layout reads once per load what it
// needs and no more (a 4 KiB read copies three more KiB, about 1% of an
// Open), and one alternating layouts pays the second read rarely.
// Concurrent loads update the two counters without a lock, so that the
// size may lag or drop a step more than the rule says: that costs a load
// its second pread (the source reads what a table needs whatever the
// first read was), never a wrong byte.
var headFirst struct {
	n     atomic.Int32 // bytes: headStep to headSize
	below atomic.Int32 // loads in a row that used less than n
}

// headShrink is how many loads in a row must use less than headFirst
// before it shrinks by a step.
const headShrink = 16

// firstRead returns headFirst's current size.
func firstRead() int {
	if n := int(headFirst.n.Load()); n >= headStep {
		return n
	}
	return headStep
}

// noteHeadUsed updates headFirst with the bytes of the head a successful
// load used (its reads ended at used).
func noteHeadUsed(used int) {
	need := min(headSize, max(headStep, int(alignUp(uint64(used), headStep))))
	n := firstRead()
	switch {
	case need > n:
		headFirst.n.Store(int32(need))
		headFirst.below.Store(0)
	case need == n:
		if headFirst.below.Load() != 0 {
			headFirst.below.Store(0)
		}
	case headFirst.below.Add(1) >= headShrink:
		headFirst.n.Store(int32(n - headStep))
		headFirst.below.Store(0)
	}
}

// source gives the loader the bytes it validates of the image data: from
// head, the file's first bytes read with pread; with pread into scratch
// for a range past head that fits it; otherwise, or when the image is in
// memory already (fd < 0), from data itself.
type source struct {
	path    string
	data    []byte // the whole image, mapped
	fd      int    // the file mapped at data, or -1
	at      io.ReaderAt
	head    []byte // data[:len(head)] as read from the file, once read
	nhead   int    // bytes of head read (0: not read yet)
	first   int    // bytes the first read of head reads (0: all of head)
	used    int    // end of the bytes of head read served (for headFirst)
	scratch []byte
	progs   []elf.ProgHeader // room for the decoded program headers, or nil
	anchor  unsafe.Pointer   // the page-table anchor below data (place.go), or nil
}

// memSource reads the image data in memory.
func memSource(path string, data []byte) source { return source{path: path, data: data, fd: -1} }

// read returns the n bytes at off, which lie inside data (checked by the
// caller). The result is valid until the next call.
func (s *source) read(off, n uint64) ([]byte, error) {
	if s.fd < 0 && s.at == nil {
		return s.data[off : off+n : off+n], nil
	}
	if end := off + n; end > uint64(s.nhead) && end <= uint64(min(len(s.head), len(s.data))) {
		// Read the head, or the rest of it: what the first read left.
		want := min(len(s.head), len(s.data))
		if s.nhead == 0 && s.first > 0 && end <= uint64(s.first) {
			want = min(s.first, want)
		}
		if err := s.readAt(s.head[s.nhead:want], uint64(s.nhead)); err != nil {
			return nil, err
		}
		s.nhead = want
	}
	switch {
	case off+n <= uint64(s.nhead):
		s.used = max(s.used, int(off+n))
		return s.head[off : off+n : off+n], nil
	case n <= uint64(len(s.scratch)):
		b := s.scratch[:n:n]
		if err := s.readAt(b, off); err != nil {
			return nil, err
		}
		return b, nil
	}
	return s.data[off : off+n : off+n], nil
}

func (s *source) readAt(b []byte, off uint64) error {
	var err error
	if s.at != nil {
		_, err = s.at.ReadAt(b, int64(off))
	} else {
		err = preadFull(s.fd, b, int64(off))
	}
	if err != nil {
		return fmt.Errorf("elfimage: read %s at %#x: %w", s.path, off, err)
	}
	return nil
}

// tailName names a program header type of ours in notes.
func tailName(t elf.ProgType) string {
	switch t {
	case PTProcTable:
		return "PTProcTable"
	case PTLineProgram:
		return "PTLineProgram"
	case PTLineStrings:
		return "PTLineStrings"
	}
	return fmt.Sprintf("%#x", uint32(t))
}

// image64 decodes the tables of images, which are ELF64 little-endian.
var image64, _ = elfobj.HeaderFor(elf.ELFCLASS64, elf.ELFDATA2LSB)

// Program header field offsets.
const (
	offPFlags  = 4
	offPOffset = 8
	offPVaddr  = 16
	offPFilesz = 32
	offPMemsz  = 40
	offPAlign  = 48
)

const (
	elfOSABIGNU  = elf.ELFOSABI_LINUX // ELFOSABI_GNU
	ntGNUBuildID = 3                  // NT_GNU_BUILD_ID
	dtRELRSZ     = 35
	dtRELR       = 36
)

// parseImage validates the ELF image data in memory (see Open for the
// rules) and returns what the loader needs; see parseFrom.
func parseImage(path string, data []byte, a *arch.Arch, pageSize uint64) (*plan, error) {
	src := memSource(path, data)
	p := new(plan)
	if err := parseFrom(&src, a, pageSize, p); err != nil {
		return nil, err
	}
	return p, nil
}

// parseFrom validates the ELF image src.data, reading it through src
// (see Open for the rules), and fills p with what the loader needs. It
// reads only the ELF header, the program headers and what they point to,
// never the non-loaded tail; it never panics and allocates only the
// segment list past four segments, errors and notes.
func parseFrom(src *source, a *arch.Arch, pageSize uint64, p *plan) error {
	path, data := src.path, src.data
	d := &decoder{path: path, data: data}
	if len(data) < ehdrSize {
		return d.errorf(uint64(len(data)), "ELF header", "file is %d bytes, shorter than the %d-byte ELF header", len(data), ehdrSize)
	}
	hb, err := src.read(0, ehdrSize)
	if err != nil {
		return err
	}
	var h elfobj.Header
	if err := elfobj.DecodeHeaderInto(&h, hb); err != nil {
		return objError(path, err) // bad magic, class or data encoding
	}
	switch {
	case h.Class != elf.ELFCLASS64:
		return d.errorf(uint64(elf.EI_CLASS), "e_ident[EI_CLASS]", "class %v, want ELFCLASS64", h.Class)
	case h.Data != elf.ELFDATA2LSB:
		return d.errorf(uint64(elf.EI_DATA), "e_ident[EI_DATA]", "data encoding %v, want ELFDATA2LSB", h.Data)
	case h.Version != elf.EV_CURRENT:
		return d.errorf(uint64(elf.EI_VERSION), "e_ident[EI_VERSION]", "version %d, want 1", h.Version)
	case h.OSABI != elf.ELFOSABI_NONE && h.OSABI != elfOSABIGNU:
		return d.errorf(uint64(elf.EI_OSABI), "e_ident[EI_OSABI]", "OS ABI %v, want ELFOSABI_NONE or ELFOSABI_LINUX", h.OSABI)
	case h.Type != elf.ET_DYN:
		return d.errorf(offType, "e_type", "type %v, want ET_DYN", h.Type)
	case h.Machine != a.Machine:
		if arch.ForMachine(h.Machine) != nil {
			// An image of ours for the other architecture: say how it runs.
			return d.errorf(offMachine, "e_machine", "machine %v, want %v (an image for another architecture: it loads in a process of that architecture, such as a GOARCH=arm64 or amd64 build of the program, or one run under qemu-user)", h.Machine, a.Machine)
		}
		return d.errorf(offMachine, "e_machine", "machine %v, want %v", h.Machine, a.Machine)
	case h.ObjectVersion != uint32(elf.EV_CURRENT):
		return d.errorf(offVersion, "e_version", "version %d, want 1", h.ObjectVersion)
	case h.Ehsize != ehdrSize:
		return d.errorf(offEhsize, "e_ehsize", "is %d, want %d", h.Ehsize, ehdrSize)
	case h.Phentsize != phdrSize:
		return d.errorf(offPhentsize, "e_phentsize", "is %d, want %d", h.Phentsize, phdrSize)
	case h.Phnum == 0:
		return d.errorf(offPhnum, "e_phnum", "no program headers")
	case h.Phnum == elfobj.PN_XNUM:
		return d.errorf(offPhnum, "e_phnum", "extended numbering (PN_XNUM) not supported")
	}
	switch {
	case h.Phoff < ehdrSize:
		return d.errorf(offPhoff, "e_phoff", "program header table at %#x overlaps the ELF header", h.Phoff)
	case h.Phoff%8 != 0:
		return d.errorf(offPhoff, "e_phoff", "program header table at %#x not 8-byte aligned", h.Phoff)
	}
	if ferr := d.check(h.Phoff, uint64(h.Phnum)*phdrSize, "e_phoff", "program header table"); ferr != nil {
		ferr.Offset = offPhoff // the field, not where it points
		return ferr
	}
	phtab, err := src.read(h.Phoff, uint64(h.Phnum)*phdrSize)
	if err != nil {
		return err
	}

	// Decode the program headers once, each straight into its slot:
	// of the source's table (Open's pooled buffer, not zeroed again per
	// load), else on the stack for the usual handful.
	phs := src.progs
	if int(h.Phnum) > len(phs) {
		if h.Phnum <= progStack {
			var stack [progStack]elf.ProgHeader
			phs = stack[:]
		} else {
			phs = make([]elf.ProgHeader, h.Phnum)
		}
	}
	phs = phs[:h.Phnum]
	nload := 0
	for i := range phs {
		h.DecodeProgInto(&phs[i], phtab[i*phdrSize:])
		if phs[i].Type == elf.PT_LOAD {
			nload++
		}
	}
	*p = plan{entry: h.Entry}
	if nload == 0 {
		return d.errorf(h.Phoff, "program header table", "no PT_LOAD segment")
	}
	if nload <= len(p.segBuf) {
		p.segs = p.segBuf[:0:nload]
	} else {
		p.segs = make([]Segment, 0, nload)
	}
	var dynIdx, ehIdx = -1, -1
	var seenTail uint8 // bit t-PTProcTable: a program header of type t was seen
	var prevEnd, firstAt uint64
	for i := range phs {
		ph := &phs[i]
		at := h.Phoff + uint64(i)*phdrSize
		field := func(f string) string { return fmt.Sprintf("%s of program header %d", f, i) }
		switch ph.Type {
		case elf.PT_LOAD:
			flags := ph.Flags
			switch {
			case flags&^(elf.PF_R|elf.PF_W|elf.PF_X) != 0:
				return d.errorf(at+offPFlags, field("p_flags"), "unknown flags %#x", ph.Flags)
			case flags&elf.PF_W != 0 && flags&elf.PF_X != 0:
				return d.errorf(at+offPFlags, field("p_flags"), "PT_LOAD is writable and executable (W^X)")
			case flags&elf.PF_R == 0:
				return d.errorf(at+offPFlags, field("p_flags"), "PT_LOAD is not readable")
			case ph.Off%pageSize != 0:
				return d.errorf(at+offPOffset, field("p_offset"), "offset %#x not a multiple of the page size %#x", ph.Off, pageSize)
			case ph.Vaddr != ph.Off:
				return d.errorf(at+offPVaddr, field("p_vaddr"), "address %#x differs from p_offset %#x", ph.Vaddr, ph.Off)
			case ph.Filesz != ph.Memsz:
				return d.errorf(at+offPMemsz, field("p_memsz"), "memory size %#x differs from file size %#x", ph.Memsz, ph.Filesz)
			case ph.Align > 1 && ph.Align&(ph.Align-1) != 0:
				return d.errorf(at+offPAlign, field("p_align"), "alignment %#x not a power of two", ph.Align)
			case ph.Off > uint64(len(data)):
				return d.errorf(at+offPOffset, field("p_offset"), "offset %#x past end of file (%#x bytes)", ph.Off, len(data))
			case ph.Filesz > uint64(len(data))-ph.Off:
				return d.errorf(at+offPFilesz, field("p_filesz"), "segment [%#x, +%#x) runs past end of file (%#x bytes)", ph.Off, ph.Filesz, len(data))
			}
			if len(p.segs) == 0 {
				firstAt = at
				if ph.Off != 0 {
					return d.errorf(at+offPOffset, field("p_offset"), "first PT_LOAD at %#x, want 0 (it must hold the ELF header)", ph.Off)
				}
				if flags != elf.PF_R {
					return d.errorf(at+offPFlags, field("p_flags"), "first PT_LOAD is %v, want PF_R only", flags)
				}
			} else if ph.Off < alignUp(prevEnd, pageSize) {
				return d.errorf(at+offPOffset, field("p_offset"), "PT_LOAD at %#x overlaps, precedes or shares a page with the previous one ending at %#x", ph.Off, prevEnd)
			}
			prevEnd = ph.Off + ph.Filesz
			p.segs = append(p.segs, Segment{Addr: ph.Off, Size: ph.Filesz, Flags: flags})
		case elf.PT_DYNAMIC:
			if dynIdx >= 0 {
				return d.errorf(at, field("p_type"), "second PT_DYNAMIC")
			}
			dynIdx = i
		case elf.PT_GNU_EH_FRAME:
			if ehIdx >= 0 {
				return d.errorf(at, field("p_type"), "second PT_GNU_EH_FRAME")
			}
			ehIdx = i
		case elf.PT_INTERP, elf.PT_TLS:
			return d.errorf(at, field("p_type"), "%v not supported", ph.Type)
		case PTProcTable, PTLineProgram, PTLineStrings:
			// Only the bounds are checked: these point into the tail,
			// which is read on the first query. A strip tool that
			// removed the section they point at leaves them empty
			// (objcopy, strip) or past the end of the file (eu-strip):
			// such a header is ignored with a note, and the queries
			// look for the section through the section headers or in
			// the image's debug file.
			t := ph.Type
			bit := uint8(1) << (t - PTProcTable)
			switch {
			case seenTail&bit != 0:
				return d.errorf(at, field("p_type"), "second program header of type %#x", ph.Type)
			case ph.Memsz != 0:
				return d.errorf(at+offPMemsz, field("p_memsz"), "memory size %#x, want 0 (not loaded)", ph.Memsz)
			}
			seenTail |= bit
			switch {
			case ph.Filesz == 0:
				p.notes = append(p.notes, fmt.Sprintf("%s: program header %d (%s) is empty: ignored (its section was stripped)", path, i, tailName(t)))
				continue
			case ph.Off > uint64(len(data)) || ph.Filesz > uint64(len(data))-ph.Off:
				p.notes = append(p.notes, fmt.Sprintf("%s: program header %d (%s) [%#x, +%#x) runs past the end of the file (%#x bytes): ignored (its section was stripped)", path, i, tailName(t), ph.Off, ph.Filesz, len(data)))
				continue
			}
			p.tail[t-PTProcTable] = data[ph.Off : ph.Off+ph.Filesz : ph.Off+ph.Filesz]
		}
	}
	p.size = prevEnd
	first := p.segs[0]
	if first.Size < ehdrSize {
		return d.errorf(firstAt+offPFilesz, "p_filesz of first PT_LOAD", "first PT_LOAD (%#x bytes) does not hold the ELF header", first.Size)
	}
	if h.Phoff+uint64(h.Phnum)*phdrSize > first.Size {
		return d.errorf(offPhoff, "e_phoff", "program header table [%#x, +%#x) not inside the first PT_LOAD", h.Phoff, uint64(h.Phnum)*phdrSize)
	}
	if h.Entry != 0 {
		if s, ok := p.segmentOf(h.Entry, 1); !ok || s.Flags&elf.PF_X == 0 {
			return d.errorf(offEntry, "e_entry", "entry %#x not inside an executable PT_LOAD", h.Entry)
		}
	}

	// Second pass: the headers that point into loaded segments.
	for i := range phs {
		ph := &phs[i]
		at := h.Phoff + uint64(i)*phdrSize
		t := ph.Type
		if t != elf.PT_DYNAMIC && t != elf.PT_NOTE && t != elf.PT_GNU_EH_FRAME {
			continue
		}
		if ph.Vaddr != ph.Off {
			return d.errorf(at+offPVaddr, fmt.Sprintf("p_vaddr of program header %d", i), "%v address %#x differs from p_offset %#x", t, ph.Vaddr, ph.Off)
		}
		if _, ok := p.segmentOf(ph.Off, ph.Filesz); !ok {
			return d.errorf(at+offPOffset, fmt.Sprintf("p_offset of program header %d", i), "%v [%#x, +%#x) not inside a PT_LOAD segment", t, ph.Off, ph.Filesz)
		}
		if t == elf.PT_GNU_EH_FRAME { // kept, not read
			p.ehFrameHdr = data[ph.Off : ph.Off+ph.Filesz : ph.Off+ph.Filesz]
			p.ehFrameHdrAddr = ph.Vaddr
			continue
		}
		body, err := src.read(ph.Off, ph.Filesz)
		if err != nil {
			return err
		}
		switch t {
		case elf.PT_NOTE:
			if err := p.parseNotes(d, ph.Off, ph.Align, body, data[ph.Off:ph.Off+ph.Filesz]); err != nil {
				return err
			}
		case elf.PT_DYNAMIC:
			if err := p.parseDynamic(d, ph.Off, body); err != nil {
				return err
			}
		}
	}
	return relocateFrom(src, data, 0, p, a, false)
}

// segmentOf returns the PT_LOAD segment that holds [addr, addr+n) (n > 0),
// without overflow.
func (p *plan) segmentOf(addr, n uint64) (Segment, bool) {
	for _, s := range p.segs {
		if addr >= s.Addr && addr-s.Addr <= s.Size && n <= s.Size-(addr-s.Addr) {
			if n == 0 && addr == s.Addr+s.Size && s.Size != 0 {
				continue // an empty range at the end belongs to the next one, if any
			}
			return s, true
		}
	}
	return Segment{}, false
}

// parseNotes scans the notes of one PT_NOTE segment (gABI "Note Section")
// at file offset off, aligned to align, for the first NT_GNU_BUILD_ID of
// owner "GNU". body holds the segment's bytes (possibly a copy); keep is
// the same bytes as the image holds them, which the build ID aliases.
func (p *plan) parseNotes(d *decoder, off, align uint64, body, keep []byte) error {
	r := elfobj.NewNoteReader(body, off, elf.ELFDATA2LSB, align, "PT_NOTE")
	for n, ok := r.Next(); ok; n, ok = r.Next() {
		if n.Type == elfobj.NT_GNU_BUILD_ID && string(n.Name) == "GNU" && p.buildID == nil {
			at, end := n.DescOffset-off, n.DescOffset-off+uint64(len(n.Desc))
			p.buildID = keep[at:end:end]
		}
	}
	if err := r.Err(); err != nil {
		return objError(d.path, err)
	}
	return nil
}

// parseDynamic reads the dynamic table at file offset off until DT_NULL and
// records the relocation table.
func (p *plan) parseDynamic(d *decoder, off uint64, body []byte) error {
	var rela, relasz, relaent, relacount uint64
	var have [4]bool
	var where [4]uint64
	terminated := false
	for i := uint64(0); (i+1)*dynSize <= uint64(len(body)); i++ {
		tag, val := image64.DecodeDyn(body[i*dynSize:])
		at := off + i*dynSize
		k := -1
		switch tag {
		case elf.DT_NULL:
			terminated = true
		case elf.DT_RELA:
			k, rela = 0, val
		case elf.DT_RELASZ:
			k, relasz = 1, val
		case elf.DT_RELAENT:
			k, relaent = 2, val
		case elf.DT_RELACOUNT:
			k, relacount = 3, val
		case elf.DT_NEEDED, elf.DT_REL, elf.DT_RELSZ, elf.DT_RELENT, elf.DT_JMPREL, elf.DT_PLTRELSZ,
			elf.DT_TEXTREL, dtRELR, dtRELRSZ, elf.DT_INIT, elf.DT_FINI, elf.DT_INIT_ARRAY, elf.DT_FINI_ARRAY:
			return d.errorf(at, fmt.Sprintf("d_tag of dynamic entry %d", i), "%v not supported", tag)
		case elf.DT_FLAGS:
			if elf.DynFlag(val)&elf.DF_TEXTREL != 0 {
				return d.errorf(at+8, fmt.Sprintf("d_val of dynamic entry %d", i), "DF_TEXTREL not supported")
			}
		}
		if terminated {
			break
		}
		if k >= 0 {
			if have[k] {
				return d.errorf(at, fmt.Sprintf("d_tag of dynamic entry %d", i), "duplicate %v", tag)
			}
			have[k], where[k] = true, at+8
		}
	}
	if !terminated {
		return d.errorf(off, "PT_DYNAMIC", "dynamic table has no DT_NULL within its %d bytes", len(body))
	}
	if !have[0] && !have[1] {
		if have[3] && relacount != 0 {
			return d.errorf(where[3], "DT_RELACOUNT", "%d relocations but no DT_RELA", relacount)
		}
		return nil
	}
	switch {
	case !have[0]:
		return d.errorf(where[1], "DT_RELASZ", "DT_RELASZ without DT_RELA")
	case !have[1]:
		return d.errorf(where[0], "DT_RELA", "DT_RELA without DT_RELASZ")
	case !have[2]:
		return d.errorf(off, "DT_RELAENT", "DT_RELA without DT_RELAENT")
	case relaent != relaSize:
		return d.errorf(where[2], "DT_RELAENT", "entry size %d, want %d", relaent, relaSize)
	case relasz%relaSize != 0:
		return d.errorf(where[1], "DT_RELASZ", "size %#x not a multiple of %d", relasz, relaSize)
	case rela%8 != 0:
		return d.errorf(where[0], "DT_RELA", "relocation table at %#x not 8-byte aligned", rela)
	case have[3] && relacount > relasz/relaSize:
		return d.errorf(where[3], "DT_RELACOUNT", "count %d exceeds the %d relocations", relacount, relasz/relaSize)
	}
	s, ok := p.segmentOf(rela, relasz)
	if !ok {
		return d.errorf(where[0], "DT_RELA", "relocation table [%#x, +%#x) not inside a PT_LOAD segment", rela, relasz)
	}
	if s.Flags&elf.PF_W != 0 {
		return d.errorf(where[0], "DT_RELA", "relocation table at %#x is in a writable segment", rela)
	}
	p.relaOff, p.relaCount = rela, relasz/relaSize
	return nil
}

// relocate checks (write false) or applies (write true) the relocation
// table of p to the image data (in memory) mapped at base; see
// relocateFrom.
func relocate(path string, data []byte, base uint64, p *plan, a *arch.Arch, write bool) error {
	src := memSource(path, data)
	return relocateFrom(&src, data, base, p, a, write)
}

// relocChunk is how many relocations relocateFrom reads at once.
const relocChunk = scratchSize / relaSize

// relocateFrom checks (write false) or applies (write true) the relocation
// table of p, read through src, to the image data mapped at base: each
// Elf64_Rela must be of type a.RelocRelative with symbol 0, and
// [r_offset, r_offset+8) must lie in a writable segment; applying stores
// base + r_addend there (little endian). The table itself lies in a
// non-writable segment, so applying cannot change what was checked. A
// table past the head of src is read in chunks of relocChunk entries.
func relocateFrom(src *source, data []byte, base uint64, p *plan, a *arch.Arch, write bool) error {
	d := &decoder{path: src.path, data: data}
	var tab []byte
	var tabFirst uint64 // index of the first relocation in tab
	for i := range p.relaCount {
		at := p.relaOff + i*relaSize
		if uint64(len(tab)) <= (i-tabFirst)*relaSize {
			n := min(p.relaCount-i, relocChunk)
			var err error
			if tab, err = src.read(at, n*relaSize); err != nil {
				return err
			}
			tabFirst = i
		}
		k := (i - tabFirst) * relaSize
		r := image64.DecodeRel(tab[k:k+relaSize], true)
		off, addend := r.Off, uint64(r.Addend)
		if r.Type != a.RelocRelative {
			return d.errorf(at+8, fmt.Sprintf("r_info of relocation %d", i), "type %s, want %s",
				elfobj.RelocTypeName(a.Machine, r.Type), elfobj.RelocTypeName(a.Machine, a.RelocRelative))
		}
		if r.Sym != 0 {
			return d.errorf(at+8, fmt.Sprintf("r_info of relocation %d", i), "symbol %d, want 0 for a relative relocation", r.Sym)
		}
		s, ok := p.segmentOf(off, 8)
		if !ok || s.Flags&elf.PF_W == 0 {
			return d.errorf(at, fmt.Sprintf("r_offset of relocation %d", i), "field [%#x, +8) not inside a writable PT_LOAD segment", off)
		}
		if write {
			v, _ := bits.Add64(base, addend, 0)
			le.PutUint64(data[off:], v)
		}
	}
	return nil
}
