package jitdump

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/frame"
)

// maxCodeSize is the largest code size perf handles: it keeps code_size in
// an int.
const maxCodeSize = math.MaxInt32

// Errors of the writer.
var (
	// ErrClosed is returned by a Writer after [Writer.Close].
	ErrClosed = errors.New("jitdump: writer closed")
	// ErrAlreadyOpen is returned by [Open] when this process already has
	// a Writer open on the same file.
	ErrAlreadyOpen = errors.New("jitdump: file already open in this process")
	// ErrInvalid is wrapped by the errors for functions [Writer.Load]
	// refuses: empty or too large code, NULs in names, unsorted or
	// out-of-range lines, lines < 1.
	ErrInvalid = errors.New("jitdump: invalid function")
)

// FileName returns the base name perf requires for the jitdump of process
// pid: "jit-PID.dump".
func FileName(pid int) string { return "jit-" + strconv.Itoa(pid) + ".dump" }

// DefaultDir returns the directory [Open] uses when given "": $JITDUMPDIR
// if set, else $HOME/.debug/jit (where perf's own JVMTI agent writes), else
// the system's temporary directory. `perf inject --jit` writes the
// jitted-PID-N.so files next to the dump.
func DefaultDir() string {
	if d := os.Getenv("JITDUMPDIR"); d != "" {
		return d
	}
	if h, err := os.UserHomeDir(); err == nil && h != "" {
		return filepath.Join(h, ".debug", "jit")
	}
	return os.TempDir()
}

// Options configure a [Writer]. The zero value (or nil) is what perf
// expects.
type Options struct {
	// Arch is the ABI of the code: the header's e_machine, the byte
	// order of the file and the CIE of the unwinding information. Nil
	// means the machine Go runs on if [arch] knows it, else x86-64.
	Arch *arch.Arch
	// Clock returns record timestamps. Nil means CLOCK_MONOTONIC
	// nanoseconds, what perf requires with flags 0; set it only in tests.
	Clock func() uint64
	// UnmappedUnwinding writes mapped_size 0 in JIT_CODE_UNWINDING_INFO
	// records: perf then maps only the code, so functions may be packed
	// tightly, but perf's libunwind-based unwinder cannot read the
	// .eh_frame_hdr table. By default mapped_size is the unwinding data's
	// size and functions must be spaced by [Writer.Footprint].
	UnmappedUnwinding bool
}

// Function is one function to announce to perf.
type Function struct {
	// Name is the symbol perf shows. It must not contain NUL.
	Name string
	// Addr is the run-time address of the first byte of the code.
	Addr uint64
	// Code is the machine code as it runs at Addr (after relocation);
	// 1 to 2^31-1 bytes.
	Code []byte
	// Lines, if any, become a JIT_CODE_DEBUG_INFO record: each says that
	// from Code[Offset] on the code comes from File:Line. They are sorted
	// by Offset (equal offsets allowed), each Offset < len(Code).
	Lines []Line
	// CFI, if not nil, becomes a JIT_CODE_UNWINDING_INFO record: the call
	// frame instructions after the CIE's initial ones, PCs being offsets
	// into Code (see [frame.Insn]). An empty non-nil slice describes code
	// in which the CIE's initial row holds throughout.
	CFI []frame.Insn
	// CIE is the CIE for CFI; nil means frame.StandardCIE of the writer's
	// Arch (on x86-64: CFA = rsp+8, return address at CFA-8).
	CIE *frame.CIE
}

// Line is one source position of a [Function].
type Line struct {
	Offset  uint64 // byte offset into Function.Code
	Line    uint32 // 1-based, at most 2^31-1
	Discrim uint32 // DWARF discriminator, usually 0; perf ignores it
	File    string // source file name, not empty, without NUL
}

// Writer appends records to one jitdump file. It is safe for concurrent
// use: records are serialized by a mutex, and all the records of one
// [Writer.Load] go to the file in one write(2).
type Writer struct {
	path     string
	arch     *arch.Arch
	order    binary.ByteOrder
	clock    func() uint64
	pid      uint32
	unmapped bool

	mu     sync.Mutex
	f      *os.File
	marker []byte // the PROT_READ|PROT_EXEC mapping perf finds the file by
	index  uint64 // next code_index
	buf    []byte
	closed bool
}

var (
	registryMu sync.Mutex
	openPaths  = map[string]bool{}
)

// Open creates dir/jit-PID.dump (dir "" means [DefaultDir]; it is created
// with mode 0755 if missing), writes the header and maps the file's first
// page PROT_READ|PROT_EXEC, MAP_PRIVATE, keeping the mapping until
// [Writer.Close]: this mapping is how `perf record` finds the file (it
// records executable mappings only). A stale file of the same name is
// removed first and the new one created with mode 0644, O_EXCL|O_NOFOLLOW,
// owned by the process user.
//
// Errors: [ErrAlreadyOpen], file-system errors, and the mmap error (EPERM
// on a file system mounted noexec). Cost: a few system calls.
func Open(dir string, opts *Options) (*Writer, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Arch == nil {
		o.Arch = hostArch()
	}
	if o.Clock == nil {
		o.Clock = monotonicClock()
	}
	if dir == "" {
		dir = DefaultDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("jitdump: %w", err)
	}
	path := filepath.Join(dir, FileName(os.Getpid()))
	registryMu.Lock()
	defer registryMu.Unlock()
	if openPaths[path] {
		return nil, fmt.Errorf("%w: %s", ErrAlreadyOpen, path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("jitdump: remove stale %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("jitdump: create: %w", err)
	}
	w := &Writer{path: path, arch: o.Arch, order: binary.NativeEndian, clock: o.Clock, unmapped: o.UnmappedUnwinding, f: f, pid: uint32(os.Getpid())}
	h := Header{
		Magic:     Magic,
		Version:   Version,
		TotalSize: HeaderSize,
		Machine:   o.Arch.Machine,
		PID:       uint32(os.Getpid()),
		Timestamp: w.clock(),
	}
	if _, err := f.Write(appendHeader(nil, w.order, &h)); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("jitdump: write header: %w", err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE)
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("jitdump: map %s PROT_READ|PROT_EXEC (perf finds the file by this mapping): %w", path, err)
	}
	w.marker = m
	openPaths[path] = true
	return w, nil
}

// hostArch returns the Arch of the machine Go runs on, or x86-64.
func hostArch() *arch.Arch {
	if a := arch.ForMachine(hostMachine); a != nil {
		return a
	}
	return arch.X86_64
}

// Monotonic returns CLOCK_MONOTONIC in nanoseconds, the clock of `perf
// record -k 1` (clockid 1) and of every timestamp the writer writes by
// default.
func Monotonic() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return uint64(ts.Sec)*1e9 + uint64(ts.Nsec)
}

// monotonicClock returns a clock equal to [Monotonic] that costs no
// system call per reading: CLOCK_MONOTONIC read once, plus the time
// elapsed since on Go's monotonic clock, which is CLOCK_MONOTONIC too
// (read through the vDSO).
func monotonicClock() func() uint64 {
	base, at := Monotonic(), time.Now()
	return func() uint64 { return base + uint64(time.Since(at)) }
}

// Path returns the path of the dump file.
func (w *Writer) Path() string { return w.path }

// Footprint returns the bytes from f.Addr that perf will attribute to f
// once loaded ([Spacing] of its code size and the mapped_size the writer
// will write): the next function's code must start at f.Addr+Footprint or
// later. It encodes f's CFI to learn its size (the size does not depend on
// any address). Errors are those of [EncodeUnwinding]. Cost: O(len(f.CFI)).
func (w *Writer) Footprint(f *Function) (uint64, error) {
	var mapped uint64
	if f.CFI != nil && !w.unmapped {
		eh, hdr, err := EncodeUnwinding(w.arch, w.cie(f), f.Addr, uint64(len(f.Code)), f.CFI)
		if err != nil {
			return 0, err
		}
		mapped = uint64(len(eh) + len(hdr))
	}
	return Spacing(uint64(len(f.Code)), mapped), nil
}

func (w *Writer) cie(f *Function) frame.CIE {
	if f.CIE != nil {
		return *f.CIE
	}
	return frame.StandardCIE(w.arch)
}

// Load announces f: it writes, in this order and in one write(2), a
// JIT_CODE_DEBUG_INFO record if f has Lines (one entry per line plus a
// closing entry repeating the last line at the end of the code, see the
// package documentation), a JIT_CODE_UNWINDING_INFO
// record if f has CFI, and the JIT_CODE_LOAD record, all with the same
// timestamp, and returns the code_index it gave the load (0, 1, 2, ... in
// the order of Loads). Call it before the code first runs: perf ignores
// samples older than the load. Debug entries carry absolute addresses
// f.Addr+Offset (no +0x40; see the package documentation).
//
// Errors: [ErrClosed]; an error wrapping [ErrInvalid] for a function the
// format cannot carry; errors of [EncodeUnwinding]; the write's error.
// Nothing is written on error. Cost: O(size of f); the writer's buffer is
// reused.
func (w *Writer) Load(f *Function) (codeIndex uint64, err error) {
	if err := w.check(f); err != nil {
		return 0, err
	}
	var eh, hdr []byte
	if f.CFI != nil {
		if eh, hdr, err = EncodeUnwinding(w.arch, w.cie(f), f.Addr, uint64(len(f.Code)), f.CFI); err != nil {
			return 0, err
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, ErrClosed
	}
	ts := w.clock()
	b := w.buf[:0]
	if len(f.Lines) > 0 {
		b = w.appendDebugInfo(b, ts, f)
	}
	if f.CFI != nil {
		b = w.appendUnwinding(b, ts, eh, hdr)
	}
	codeIndex = w.index
	b = w.appendCodeLoad(b, ts, f, codeIndex)
	w.buf = b
	if _, err := w.f.Write(b); err != nil {
		return 0, fmt.Errorf("jitdump: %w", err)
	}
	w.index++
	return codeIndex, nil
}

// Move writes a JIT_CODE_MOVE record: the code of load codeIndex, size
// bytes, moved from oldAddr to newAddr. perf gives the moved code a new
// mapping; its unwinding information is not moved (perf uses the
// mapped_size of the last UNWINDING_INFO it read). Errors: [ErrClosed], the
// write's error.
func (w *Writer) Move(oldAddr, newAddr, size, codeIndex uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	o := w.order.(binary.AppendByteOrder)
	b := appendPrefix(w.buf[:0], o, JIT_CODE_MOVE, CodeMoveSize, w.clock())
	b = o.AppendUint32(b, w.pid)                 // pid
	b = o.AppendUint32(b, uint32(unix.Gettid())) // tid
	b = o.AppendUint64(b, newAddr)               // vma
	b = o.AppendUint64(b, oldAddr)               // old_code_addr
	b = o.AppendUint64(b, newAddr)               // new_code_addr
	b = o.AppendUint64(b, size)                  // code_size
	b = o.AppendUint64(b, codeIndex)             // code_index
	w.buf = b
	_, err := w.f.Write(b)
	return err
}

// Close writes a JIT_CODE_CLOSE record, unmaps the marker mapping and
// closes the file, which stays on disk for `perf inject --jit`. Close is
// idempotent; later calls of other methods return [ErrClosed].
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	registryMu.Lock()
	delete(openPaths, w.path)
	registryMu.Unlock()
	o := w.order.(binary.AppendByteOrder)
	_, err := w.f.Write(appendPrefix(nil, o, JIT_CODE_CLOSE, CodeCloseSize, w.clock()))
	if e := unix.Munmap(w.marker); err == nil {
		err = e
	}
	w.marker = nil
	if e := w.f.Close(); err == nil {
		err = e
	}
	return err
}

func (w *Writer) check(f *Function) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q at %#x: %s", ErrInvalid, f.Name, f.Addr, fmt.Sprintf(format, args...))
	}
	n := uint64(len(f.Code))
	switch {
	case n == 0 || n > maxCodeSize:
		return bad("code size %d not in [1, 2^31-1]", n)
	case n > math.MaxUint64-f.Addr:
		return bad("code runs past the address space")
	case strings.IndexByte(f.Name, 0) >= 0:
		return bad("name contains NUL")
	}
	for i, l := range f.Lines {
		switch {
		case l.Offset >= n:
			return bad("line %d: offset %#x not inside the code", i, l.Offset)
		case i > 0 && l.Offset < f.Lines[i-1].Offset:
			return bad("line %d: offset %#x before the previous one", i, l.Offset)
		case l.Line < 1 || l.Line > math.MaxInt32:
			return bad("line %d: line number %d not in [1, 2^31-1]", i, l.Line)
		case l.Discrim > math.MaxInt32:
			return bad("line %d: discriminator %d too large", i, l.Discrim)
		case l.File == "" || strings.IndexByte(l.File, 0) >= 0 || l.File == "\xff":
			return bad("line %d: file name %q empty, with NUL, or the repeat marker", i, l.File)
		}
	}
	return nil
}

func appendHeader(b []byte, order binary.ByteOrder, h *Header) []byte {
	o := order.(binary.AppendByteOrder)
	b = o.AppendUint32(b, h.Magic)            // magic
	b = o.AppendUint32(b, h.Version)          // version
	b = o.AppendUint32(b, h.TotalSize)        // total_size
	b = o.AppendUint32(b, uint32(h.Machine))  // elf_mach
	b = o.AppendUint32(b, h.Pad1)             // pad1
	b = o.AppendUint32(b, h.PID)              // pid
	b = o.AppendUint64(b, h.Timestamp)        // timestamp
	return o.AppendUint64(b, uint64(h.Flags)) // flags
}

func appendPrefix(b []byte, o binary.AppendByteOrder, id RecordID, size uint64, ts uint64) []byte {
	b = o.AppendUint32(b, uint32(id))   // id
	b = o.AppendUint32(b, uint32(size)) // total_size
	return o.AppendUint64(b, ts)        // timestamp
}

func pad8(b []byte, start int) []byte {
	for (len(b)-start)%8 != 0 {
		b = append(b, 0)
	}
	return b
}

// appendDebugInfo writes f.Lines and then the closing entry: the last
// line again, at the end of the code (f.Addr+len(f.Code)). perf's
// genelf_debug.c ends the line sequence it synthesizes at the address of
// the last entry, so without it the code from the last entry to the end
// (an epilogue, say) would have no line in perf.
func (w *Writer) appendDebugInfo(b []byte, ts uint64, f *Function) []byte {
	o := w.order.(binary.AppendByteOrder)
	last := f.Lines[len(f.Lines)-1]
	size := uint64(DebugInfoSize)
	for _, l := range f.Lines {
		size += DebugEntrySize + uint64(len(l.File)) + 1
	}
	size += DebugEntrySize + uint64(len(last.File)) + 1
	start := len(b)
	b = appendPrefix(b, o, JIT_CODE_DEBUG_INFO, align8(size), ts)
	b = o.AppendUint64(b, f.Addr)                 // code_addr
	b = o.AppendUint64(b, uint64(len(f.Lines)+1)) // nr_entry
	for _, l := range f.Lines {
		b = appendDebugEntry(b, o, f.Addr+l.Offset, &l)
	}
	b = appendDebugEntry(b, o, f.Addr+uint64(len(f.Code)), &last)
	return pad8(b, start)
}

func appendDebugEntry(b []byte, o binary.AppendByteOrder, addr uint64, l *Line) []byte {
	b = o.AppendUint64(b, addr)      // addr
	b = o.AppendUint32(b, l.Line)    // lineno
	b = o.AppendUint32(b, l.Discrim) // discrim
	b = append(b, l.File...)         // name
	return append(b, 0)
}

func (w *Writer) appendUnwinding(b []byte, ts uint64, eh, hdr []byte) []byte {
	o := w.order.(binary.AppendByteOrder)
	usize := uint64(len(eh) + len(hdr))
	mapped := usize
	if w.unmapped {
		mapped = 0
	}
	start := len(b)
	b = appendPrefix(b, o, JIT_CODE_UNWINDING_INFO, align8(UnwindingInfoSize+usize), ts)
	b = o.AppendUint64(b, usize)            // unwinding_size
	b = o.AppendUint64(b, uint64(len(hdr))) // eh_frame_hdr_size
	b = o.AppendUint64(b, mapped)           // mapped_size
	b = append(b, eh...)                    // .eh_frame
	b = append(b, hdr...)                   // .eh_frame_hdr
	return pad8(b, start)
}

// appendCodeLoad pads between the name's NUL and the code: perf takes the
// code as the record's last code_size bytes.
func (w *Writer) appendCodeLoad(b []byte, ts uint64, f *Function, index uint64) []byte {
	o := w.order.(binary.AppendByteOrder)
	n := uint64(len(f.Code))
	nameField := uint64(len(f.Name)) + 1
	size := CodeLoadSize + nameField + n
	nameField += align8(size) - size
	b = appendPrefix(b, o, JIT_CODE_LOAD, align8(size), ts)
	b = o.AppendUint32(b, w.pid)                 // pid
	b = o.AppendUint32(b, uint32(unix.Gettid())) // tid
	b = o.AppendUint64(b, f.Addr)                // vma
	b = o.AppendUint64(b, f.Addr)                // code_addr
	b = o.AppendUint64(b, n)                     // code_size
	b = o.AppendUint64(b, index)                 // code_index
	b = append(b, f.Name...)                     // name, NUL, padding
	b = append(b, make([]byte, nameField-uint64(len(f.Name)))...)
	return append(b, f.Code...) // code
}

// mappedMarker reports whether the marker mapping is in place (for tests).
func (w *Writer) mappedMarker() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.marker != nil
}

// hostMachine is the ELF machine Go runs on (0 if arch does not know it).
var hostMachine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[runtime.GOARCH]
