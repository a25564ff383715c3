package perfmap

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// Entry is one symbol: the code addresses [Start, Start+Size) are named
// Name.
type Entry struct {
	Start uint64 // address of the first byte
	Size  uint64 // bytes
	Name  string
}

// End returns Start+Size, the first address after the entry.
func (e Entry) End() uint64 { return e.Start + e.Size }

// Errors returned by [Writer.Add] and [Writer.AddBatch].
var (
	// ErrClosed is returned by a Writer after [Writer.Close].
	ErrClosed = errors.New("perfmap: writer closed")
	// ErrEntry is wrapped by the errors for entries that cannot be
	// written: empty name, zero size, or a range past the end of the
	// address space.
	ErrEntry = errors.New("perfmap: invalid entry")
)

// DefaultDir is the directory perf reads perf maps from. perf hard-codes
// it.
const DefaultDir = "/tmp"

// FileName returns the base name of the perf map of process pid:
// "perf-PID.map".
func FileName(pid int) string { return "perf-" + strconv.Itoa(pid) + ".map" }

// maxWrite bounds one write(2) of a batch (bytes); a batch is split at line
// boundaries into writes of at most this size, or one line when a line is
// longer.
const maxWrite = 64 << 10

// Writer appends entries to one perf map file. It is safe for concurrent
// use: writes are serialized by a mutex and each line goes to the file in
// one write(2) (O_APPEND), so readers and other writers never see part of a
// line.
type Writer struct {
	path string

	mu     sync.Mutex
	f      *os.File
	buf    []byte
	closed bool
}

var (
	registryMu sync.Mutex
	open       = map[string]*Writer{} // open writers by path
	created    = map[string]bool{}    // paths this process has created
)

// Default returns the process's writer of /tmp/perf-PID.map, the file
// perf reads: Open(DefaultDir).
func Default() (*Writer, error) { return Open(DefaultDir) }

// Open returns the writer of dir/perf-PID.map for this process, creating
// the file on the first call in the process: a stale file of that name (a
// previous process with the same pid) is removed and a new one created with
// mode 0644 (less the umask), owned by the process user, with
// O_EXCL|O_NOFOLLOW. Later calls with the same dir return the same *Writer
// while it is open; after [Writer.Close], Open reopens the file for
// appending (the entries written before still describe live code) and checks
// that the process user still owns it.
//
// Errors are those of the file system (wrapped with the path), or an error
// when the file to append to is owned by another user (perf would ignore
// it). Cost: a few system calls on the first call, a map lookup after.
func Open(dir string) (*Writer, error) {
	path := filepath.Join(dir, FileName(os.Getpid()))
	registryMu.Lock()
	defer registryMu.Unlock()
	if w := open[path]; w != nil {
		return w, nil
	}
	var f *os.File
	var err error
	if !created[path] {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("perfmap: remove stale %s: %w", path, err)
		}
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o644)
		if err != nil {
			return nil, fmt.Errorf("perfmap: create: %w", err)
		}
		created[path] = true
	} else {
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("perfmap: reopen: %w", err)
		}
		if err := checkOwner(f); err != nil {
			f.Close()
			return nil, err
		}
	}
	w := &Writer{path: path, f: f}
	open[path] = w
	return w, nil
}

func checkOwner(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("perfmap: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("perfmap: %s is owned by uid %d, not %d: perf would ignore it", f.Name(), st.Uid, os.Geteuid())
	}
	return nil
}

// Path returns the path of the file the writer appends to.
func (w *Writer) Path() string { return w.path }

// Add appends the line for the code [start, start+size) named name. The
// name is sanitized as the package documentation says ('\n', '\r' and NUL
// become spaces; names shorter than 3 bytes are padded with spaces).
//
// Errors: [ErrClosed]; an error wrapping [ErrEntry] for an empty or blank name, a
// zero size or start+size past 2^64; or the write's error. Cost: one
// write(2); allocation only to grow the writer's line buffer.
func (w *Writer) Add(start, size uint64, name string) error {
	if err := check(Entry{start, size, name}); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	w.buf = appendLine(w.buf[:0], start, size, name)
	_, err := w.f.Write(w.buf)
	return err
}

// AddBatch appends the lines of entries in order, in as few write(2) calls
// as fit in 64 KiB each, every call ending at a line boundary. Every entry
// is checked before anything is written: if one is invalid, nothing is
// written and the error (wrapping [ErrEntry]) names its index. Other errors
// are [ErrClosed] and the write's. Cost: O(total bytes).
func (w *Writer) AddBatch(entries []Entry) error {
	for i, e := range entries {
		if err := check(e); err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	b := w.buf[:0]
	for _, e := range entries {
		n := len(b)
		b = appendLine(b, e.Start, e.Size, e.Name)
		if len(b) > maxWrite && n > 0 {
			if _, err := w.f.Write(b[:n]); err != nil {
				return err
			}
			b = append(b[:0], b[n:]...)
		}
	}
	var err error
	if len(b) > 0 {
		_, err = w.f.Write(b)
	}
	w.buf = b[:0]
	return err
}

// Close closes the file. The file stays on disk for perf to read after the
// process exits. Close is idempotent; later Adds return [ErrClosed].
func (w *Writer) Close() error {
	registryMu.Lock()
	if open[w.path] == w {
		delete(open, w.path)
	}
	registryMu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	return w.f.Close()
}

func check(e Entry) error {
	switch {
	case blank(e.Name):
		return fmt.Errorf("%w: empty or blank name at %#x", ErrEntry, e.Start)
	case e.Size == 0:
		return fmt.Errorf("%w: %q at %#x has size 0", ErrEntry, e.Name, e.Start)
	case e.Size > math.MaxUint64-e.Start:
		return fmt.Errorf("%w: %q at %#x size %#x runs past the address space", ErrEntry, e.Name, e.Start, e.Size)
	}
	return nil
}

// blank reports whether name has nothing but what the writer turns into
// spaces and what Parse trims.
func blank(name string) bool {
	for i := 0; i < len(name); i++ {
		switch name[i] {
		case ' ', '\t', '\n', '\r', 0:
		default:
			return false
		}
	}
	return true
}

// minName is the shortest name perf's reader keeps (bytes).
const minName = 3

// appendLine appends "START SIZE NAME\n" with the name sanitized.
func appendLine(b []byte, start, size uint64, name string) []byte {
	b = strconv.AppendUint(b, start, 16)
	b = append(b, ' ')
	b = strconv.AppendUint(b, size, 16)
	b = append(b, ' ')
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '\n' || c == '\r' || c == 0 {
			c = ' '
		}
		b = append(b, c)
	}
	for i := len(name); i < minName; i++ {
		b = append(b, ' ')
	}
	return append(b, '\n')
}
