package ccache

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/internal/atomicfile"
)

// Cache is a cache directory and how to use it. The zero Cache stores
// nothing: [Cache.Load] then writes each image to a temporary file, which
// [Result.Close] removes. A Cache may be used by several goroutines and
// processes at once, once its fields are set.
type Cache struct {
	dir string

	// MaxBytes bounds the total size in bytes of the entries (see the
	// package comment); 0 means unbounded. [Open] sets it to
	// [DefaultMaxBytes].
	MaxBytes int64
	// Warn, when set, receives one-line warnings (no final newline): an
	// entry ignored as corrupt or untrusted, a cache that cannot be
	// written and the temporary file used instead.
	Warn func(msg string)
	// Track, when set, is called with the path of every temporary file
	// or directory the cache is about to create; the function it returns
	// is called once that path is renamed or removed. A program uses it
	// to remove them when it is interrupted.
	Track func(path string) (untrack func())
}

// Open returns the cache in dir, creating dir and its missing parents with
// mode 0700 first. The directory must be owned by the effective user and
// not writable by group or others: otherwise the error wraps
// [ErrUntrusted] and says why. A directory that exists but cannot be
// written is accepted (entries are read from it; new ones go to
// temporary files, with a warning). Cost: a mkdir and a stat.
func Open(dir string) (*Cache, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("ccache: %w", err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("ccache: %w", err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("ccache: %w", err)
	}
	if why := untrusted(fi, true); why != "" {
		return nil, fmt.Errorf("ccache: %w: cache directory %s is %s", ErrUntrusted, abs, why)
	}
	return &Cache{dir: abs, MaxBytes: DefaultMaxBytes}, nil
}

// Dir returns the cache directory, absolute, or "" for the zero Cache.
func (c *Cache) Dir() string { return c.dir }

// untrusted returns why a cache directory (dir) or entry may not be
// used, or "" when it may: it must be a directory or a regular file,
// owned by the effective user, not writable by group or others.
func untrusted(fi fs.FileInfo, dir bool) string {
	switch {
	case dir && !fi.IsDir():
		return "not a directory (" + fi.Mode().String() + ")"
	case !dir && !fi.Mode().IsRegular():
		return "not a regular file (" + fi.Mode().String() + ")"
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if euid := os.Geteuid(); int(st.Uid) != euid {
			return fmt.Sprintf("owned by uid %d, not by you (uid %d)", st.Uid, euid)
		}
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return "writable by group or others (" + fi.Mode().Perm().String() + ")"
	}
	return ""
}

// Source is a source file to load through the cache and how to build it.
type Source struct {
	// Path is the source file; it is made absolute, and the cache entry
	// is named after it.
	Path string
	// Compile compiles the source's bytes (read by Load) into a module;
	// path is the absolute path, which the module should record as its
	// file (DWARF's DW_AT_name) so that tools find the source.
	Compile func(path string, src []byte) (*elfimage.Module, error)
	// Link is the link options, part of the key.
	Link elfimage.LinkOptions
	// Compiler identifies the compiler for the key; "" means
	// [ExecutableID]().
	Compiler string
	// Extra is the caller's compile options for the key, "" when none.
	Extra string
}

// Result is an image loaded by [Cache.Load].
type Result struct {
	// Image is the loaded image, mapped from Path (unless the load
	// options asked for the read fallback).
	Image *elfimage.Image
	// Path is the image file: the cache entry, or a temporary file when
	// Temporary is set.
	Path string
	// Hit reports that an existing entry was reused.
	Hit bool
	// Temporary reports that the image is in a temporary file, removed
	// by Close: the cache is the zero Cache or could not be written.
	Temporary bool

	remove func()
}

// Close closes the image and removes its temporary file, if any.
func (r *Result) Close() error {
	err := r.Image.Close()
	if r.remove != nil {
		r.remove()
		r.remove = nil
	}
	return err
}

// errChanged: the file mapped is not the file checked (another process
// replaced the entry in between).
var errChanged = errors.New("entry replaced while loading")

// loadError is elfimage.Open's refusal of an entry.
type loadError struct{ err error }

func (e *loadError) Error() string { return e.err.Error() }

// attempts bounds how often Load re-reads an entry that other processes
// keep replacing before it gives up on the cache for this load.
const attempts = 3

// Load returns the image of src loaded with lopts (nil: defaults), from
// the cache entry when it holds src's key and passes every check of the
// package comment; otherwise it compiles and links src, stores the entry,
// and loads it. A corrupt or untrusted entry is reported through Warn and
// replaced; a stale one is replaced silently. When the entry cannot be
// written (a read-only directory, a full disk), the image is written to a
// temporary file instead, with a warning. After storing, entries beyond
// MaxBytes are evicted, least recently used first.
//
// Errors: reading the source, compiling, linking and loading the freshly
// linked image (publishing it, to gdb for example, is the caller's: package
// publish); errors of the cache
// itself are warnings. Cost on a hit: reading and hashing the entry once
// (SHA-256), one mmap, and one comparison of the mapped bytes with those
// read; the source is read and hashed every time.
func (c *Cache) Load(src Source, lopts *elfimage.LoadOptions) (*Result, error) {
	abs, err := filepath.Abs(src.Path)
	if err != nil {
		return nil, err
	}
	text, err := os.ReadFile(abs)
	if err != nil {
		return nil, err
	}
	key := KeyOf(src, abs, text)
	if c.dir == "" {
		image, err := build(src, abs, text)
		if err != nil {
			return nil, err
		}
		return c.loadTemp(abs, image, lopts)
	}
	path := filepath.Join(c.dir, EntryName(&key))
	var entry []byte // built by this call, once
	var imageLen int
	for range attempts {
		data, err := c.read(path, &key)
		switch {
		case err == nil:
			r, err := c.openChecked(path, data, lopts)
			if err == nil {
				touch(path) // "recently used"; best effort
				r.Hit = true
				return r, nil
			}
			var le *loadError
			switch {
			case errors.As(err, &le):
				c.warn("cached image %s does not load (%v); rebuilding", path, le.err)
			case !errors.Is(err, errChanged):
				return nil, err // publishing failed: not the entry's fault
			}
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, ErrStale):
		default:
			c.warn("ignoring cached image %s: %v; rebuilding", path, err)
		}
		if entry == nil {
			image, err := build(src, abs, text)
			if err != nil {
				return nil, err
			}
			imageLen = len(image)
			entry = appendEntry(image, &key)
		}
		if err := atomicfile.Write(path, entry, atomicfile.Options{Mode: 0o644, Track: c.Track}); err != nil {
			c.warn("cannot write the compile cache %s (%v); the image goes to a temporary file, removed at exit, which perf, addr2line and gdb will not find afterwards", c.dir, unwrapPath(err))
			return c.loadTemp(abs, entry[:imageLen], lopts)
		}
		r, err := c.openChecked(path, entry, lopts)
		if err == nil {
			c.trim(c.MaxBytes, path)
			return r, nil
		}
		if le := (*loadError)(nil); errors.As(err, &le) {
			return nil, le.err
		}
		if !errors.Is(err, errChanged) {
			return nil, err
		}
	}
	c.warn("cached image %s keeps being replaced by other processes; the image goes to a temporary file, removed at exit", path)
	return c.loadTemp(abs, entry[:imageLen], lopts)
}

// unwrapPath drops the temporary file's name from a *PathError, whose
// operation and cause are what the user needs.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

// KeyOf returns the key of src for the source file at the absolute path
// abs holding text.
func KeyOf(src Source, abs string, text []byte) Key {
	compiler := src.Compiler
	if compiler == "" {
		compiler = ExecutableID()
	}
	return Key{
		Source:       abs,
		SourceSHA256: sha256.Sum256(text),
		Compiler:     compiler,
		Link:         fmt.Sprintf("%+v", src.Link),
		Extra:        src.Extra,
	}
}

// EntryName returns the file name of k's entry: BASE-HASH.elf, where BASE
// is the source's base name without extension (characters other than
// letters, digits and ._+- replaced by _, at most 64 bytes) and HASH the
// first 16 hex digits of the SHA-256 of the source path, link options and
// extra options.
func EntryName(k *Key) string {
	base := filepath.Base(k.Source)
	base = strings.TrimSuffix(base, filepath.Ext(base))
	b := []byte(base)
	for i, ch := range b {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '_' || ch == '+' || ch == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	h := sha256.New()
	io.WriteString(h, k.Source)
	h.Write([]byte{0})
	io.WriteString(h, k.Link)
	h.Write([]byte{0})
	io.WriteString(h, k.Extra)
	return string(b) + "-" + hex.EncodeToString(h.Sum(nil)[:8]) + ".elf"
}

// isEntryName reports whether name is shaped as EntryName makes them.
func isEntryName(name string) bool {
	stem, ok := strings.CutSuffix(name, ".elf")
	if !ok || len(stem) < 18 || stem[len(stem)-17] != '-' || strings.HasPrefix(name, ".") {
		return false
	}
	for _, ch := range stem[len(stem)-16:] {
		if !(ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'f') {
			return false
		}
	}
	return true
}

// build compiles and links src.
func build(src Source, abs string, text []byte) ([]byte, error) {
	mod, err := src.Compile(abs, text)
	if err != nil {
		return nil, err
	}
	return elfimage.Link(mod, src.Link)
}

// read returns the content of the entry at path after checking its
// owner and mode, its trailer and digest, and its key against want.
// Errors wrap fs.ErrNotExist, ErrUntrusted, ErrCorrupt or ErrStale.
func (c *Cache) read(path string, want *Key) ([]byte, error) {
	data, have, err := readEntry(path)
	if err != nil {
		return nil, err
	}
	if why := diff(&have, want); why != "" {
		return nil, fmt.Errorf("%w: %s", ErrStale, why)
	}
	return data, nil
}

// maxEntry bounds the size of an entry a reader reads.
const maxEntry = 4 << 30

// readEntry opens the entry at path without following a symbolic link,
// checks its owner and mode on the open file, reads it whole and decodes
// its trailer.
func readEntry(path string) ([]byte, Key, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, Key{}, fmt.Errorf("%w: a symbolic link", ErrUntrusted)
		}
		return nil, Key{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, Key{}, err
	}
	if why := untrusted(fi, false); why != "" {
		return nil, Key{}, fmt.Errorf("%w: %s; a cached image is executed, so it must be yours and writable only by you", ErrUntrusted, why)
	}
	if fi.Size() > maxEntry {
		return nil, Key{}, fmt.Errorf("%w: %d bytes, more than the %d-byte limit", ErrCorrupt, fi.Size(), int64(maxEntry))
	}
	data := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, Key{}, fmt.Errorf("%w: read: %v", ErrCorrupt, err)
	}
	n, k, err := decodeEntry(data)
	if err != nil {
		return nil, k, err
	}
	return data[:n:n], k, nil
}

// openChecked opens the image file at path, whose first len(image) bytes
// must be image (the rest is the cache trailer), and returns it once the
// mapped file equals image everywhere but in its writable segments.
// Errors: *loadError when Open refuses the file, errChanged when the
// mapped file differs or is gone.
func (c *Cache) openChecked(path string, image []byte, lopts *elfimage.LoadOptions) (*Result, error) {
	im, err := elfimage.Open(path, lopts)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errChanged // removed since (cache -clear, eviction)
	}
	if err != nil {
		return nil, &loadError{err}
	}
	if !sameImage(im, image) {
		im.Close()
		return nil, errChanged
	}
	return &Result{Image: im, Path: path}, nil
}

// sameImage reports whether the loaded image im holds want: the file is
// at least as long (the trailer follows) and every byte of want outside
// im's writable segments, whose relocated words differ from the file,
// equals the mapped byte.
func sameImage(im *elfimage.Image, want []byte) bool {
	got := im.Bytes()
	if len(got) < len(want) || im.BuildID() == nil {
		return false
	}
	got = got[:len(want)]
	at := uint64(0)
	for _, s := range im.Segments() {
		if s.Flags&elf.PF_W == 0 {
			continue
		}
		if s.Addr < at || s.Addr+s.Size > uint64(len(want)) {
			return false
		}
		if !bytes.Equal(got[at:s.Addr], want[at:s.Addr]) {
			return false
		}
		at = s.Addr + s.Size
	}
	return bytes.Equal(got[at:], want[at:])
}

// loadTemp writes image into a new temporary directory and loads it from
// there; Close removes the directory.
func (c *Cache) loadTemp(abs string, image []byte, lopts *elfimage.LoadOptions) (*Result, error) {
	base := strings.TrimSuffix(filepath.Base(abs), filepath.Ext(abs))
	var dir string
	untrack := func() {}
	var err error
	for range 100 {
		dir = filepath.Join(os.TempDir(), fmt.Sprintf("elfimage-%s-%08x", base, rand.Uint32()))
		if c.Track != nil {
			untrack = c.Track(dir)
		}
		if err = os.Mkdir(dir, 0o700); !os.IsExist(err) {
			break
		}
		untrack()
	}
	if err != nil {
		untrack()
		return nil, err
	}
	remove := func() { os.RemoveAll(dir); untrack() }
	path := filepath.Join(dir, base+".elf")
	if err := os.WriteFile(path, image, 0o644); err != nil {
		remove()
		return nil, err
	}
	im, err := elfimage.Open(path, lopts)
	if err != nil {
		remove()
		return nil, err
	}
	return &Result{Image: im, Path: path, Temporary: true, remove: remove}, nil
}

func (c *Cache) warn(format string, args ...any) {
	if c.Warn != nil {
		c.Warn(fmt.Sprintf(format, args...))
	}
}

// touch sets path's access and modification times to the kernel's current
// time (utimensat(2) with UTIME_NOW), the clock that also stamps a newly
// written entry: with time.Now() instead, a hit could look more recent
// than an entry written after it, since the kernel's file timestamps come
// from a coarser clock that lags time.Now() by up to a tick.
func touch(path string) {
	now := unix.Timespec{Nsec: unix.UTIME_NOW}
	unix.UtimesNanoAt(unix.AT_FDCWD, path, []unix.Timespec{now, now}, 0)
}
