package ccache

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Entry is one entry of a cache directory, as [Cache.Entries] finds it.
type Entry struct {
	// Path is the entry's file.
	Path string
	// Size is its size in bytes, trailer included.
	Size int64
	// Used is its modification time: when it was last stored or loaded.
	Used time.Time
	// Key is what it was built from; valid when Err is nil.
	Key Key
	// Err is why the entry would not be loaded: it wraps ErrCorrupt,
	// ErrStale (another format version) or ErrUntrusted, or is a read
	// error.
	Err error
}

// Stale returns why e would not be reused today by a program whose
// compiler identity is compiler ("" means [ExecutableID]()), or "" when it
// would be: Err is set, the source file is gone or its bytes changed, or
// another compiler built it. The link and extra options are not checked
// (they depend on the caller). Cost: reads and hashes the source.
func (e *Entry) Stale(compiler string) string {
	if e.Err != nil {
		return e.Err.Error()
	}
	if compiler == "" {
		compiler = ExecutableID()
	}
	text, err := os.ReadFile(e.Key.Source)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "source removed"
	case err != nil:
		return "source unreadable: " + err.Error()
	case sha256.Sum256(text) != e.Key.SourceSHA256:
		return "source changed"
	case e.Key.Compiler != compiler:
		return "built by another compiler (" + e.Key.Compiler + ")"
	}
	return ""
}

// Entries returns the entries of the cache directory, most recently used
// first, each read whole and checked as [Cache.Load] checks it (owner,
// mode, trailer, digest; not the loader's validation). Files that are not
// named like entries are left out. Errors: the directory cannot be read.
// Cost: reads every entry.
func (c *Cache) Entries() ([]Entry, error) {
	des, err := os.ReadDir(c.dir)
	if err != nil {
		return nil, fmt.Errorf("ccache: %w", err)
	}
	var out []Entry
	for _, de := range des {
		if !isEntryName(de.Name()) {
			continue
		}
		e := Entry{Path: filepath.Join(c.dir, de.Name())}
		if fi, err := os.Lstat(e.Path); err == nil {
			e.Size, e.Used = fi.Size(), fi.ModTime()
		}
		_, e.Key, e.Err = readEntry(e.Path)
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return b.Used.Compare(a.Used) })
	return out, nil
}

// file is an entry or temporary file of the directory, for trimming.
type file struct {
	path string
	size int64
	used time.Time
	temp bool
}

// staleTemp is the age after which a temporary file is taken as left by
// a killed writer.
const staleTemp = time.Hour

// files lists the entries and temporary files of the directory.
func (c *Cache) files() ([]file, error) {
	des, err := os.ReadDir(c.dir)
	if err != nil {
		return nil, fmt.Errorf("ccache: %w", err)
	}
	var out []file
	for _, de := range des {
		name := de.Name()
		temp := strings.HasPrefix(name, ".") && strings.Contains(name, ".elf.tmp-")
		if !temp && !isEntryName(name) {
			continue
		}
		fi, err := de.Info()
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		out = append(out, file{filepath.Join(c.dir, name), fi.Size(), fi.ModTime(), temp})
	}
	return out, nil
}

// Clear removes every entry and temporary file of the cache directory
// (other files are left alone) and returns how many files and bytes it
// removed. A temporary file being written by another process is removed
// too; that process then falls back to a temporary image.
func (c *Cache) Clear() (files int, bytes int64, err error) {
	all, err := c.files()
	if err != nil {
		return 0, 0, err
	}
	for _, f := range all {
		if err := os.Remove(f.path); err == nil {
			files++
			bytes += f.size
		} else if !errors.Is(err, os.ErrNotExist) {
			return files, bytes, fmt.Errorf("ccache: %w", err)
		}
	}
	return files, bytes, nil
}

// Trim removes temporary files older than an hour and then the least
// recently used entries until the entries total at most maxBytes bytes (0:
// no bound), and returns how many entries and bytes it removed. Load calls
// it after storing an entry. Removing an entry another process has mapped
// is safe: the mapping stays valid.
func (c *Cache) Trim(maxBytes int64) (entries int, bytes int64, err error) {
	return c.trim(maxBytes, "")
}

// trim is Trim that never removes keep.
func (c *Cache) trim(maxBytes int64, keep string) (entries int, bytes int64, err error) {
	all, err := c.files()
	if err != nil {
		return 0, 0, err
	}
	var total int64
	var ents []file
	for _, f := range all {
		if f.temp {
			if time.Since(f.used) > staleTemp {
				os.Remove(f.path)
			}
			continue
		}
		total += f.size
		if f.path != keep {
			ents = append(ents, f)
		}
	}
	if maxBytes <= 0 {
		return 0, 0, nil
	}
	slices.SortFunc(ents, func(a, b file) int { return a.used.Compare(b.used) })
	for _, f := range ents {
		if total <= maxBytes {
			break
		}
		if err := os.Remove(f.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return entries, bytes, fmt.Errorf("ccache: %w", err)
		}
		total -= f.size
		entries++
		bytes += f.size
	}
	return entries, bytes, nil
}
