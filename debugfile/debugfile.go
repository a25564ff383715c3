// Package debugfile finds the separate debug file of an ELF file the way
// gdb, elfutils and LLVM find it (gdb manual, "Debugging Information in
// Separate Files"):
//
//  1. by build ID: DIR/.build-id/xx/yyyy.debug for each debug directory
//     DIR (default /usr/lib/debug), where xx is the first byte of the
//     file's NT_GNU_BUILD_ID in lowercase hexadecimal and yyyy the rest;
//     the candidate's own build ID must be the same;
//  2. by the .gnu_debuglink section (a file name and the CRC-32 of the
//     debug file): NAME in the file's directory, in its .debug
//     subdirectory, and DIR/FILEDIR/NAME for each debug directory, where
//     FILEDIR is the file's directory with symbolic links resolved; the
//     candidate's CRC-32 (the IEEE polynomial, as zlib's crc32) must be
//     the one recorded;
//  3. by build ID through a remote source, when the Finder has one
//     (package debugfile/debuginfod's Client, set from DEBUGINFOD_URLS).
//
// The first candidate that passes its check is the answer. A candidate
// that fails it (another build, a stale copy) is skipped and named in the
// error when nothing is found. This package reads files and never writes;
// it does no network I/O itself.
package debugfile

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/elfobj"
)

// ErrNotFound is wrapped by [Finder.Find] when no source holds a debug
// file that passes its check.
var ErrNotFound = errors.New("debugfile: no separate debug file found")

// DefaultDebugDir is the global debug directory of gdb, elfutils and LLVM
// on GNU/Linux (gdb's debug-file-directory).
const DefaultDebugDir = "/usr/lib/debug"

// MinBuildID and MaxBuildID bound the length in bytes of a build ID this
// package looks up: 2 so that xx/yyyy has both parts, 64 as elfutils'
// debuginfod client bounds it (ld writes 8, 16 or 20 bytes).
const (
	MinBuildID = 2
	MaxBuildID = 64
)

// MaxLinkName bounds the file name of a .gnu_debuglink section, in bytes
// (a file name: at most NAME_MAX, 255, on Linux file systems).
const MaxLinkName = 255

// Debuglink is the contents of a .gnu_debuglink section: the debug file's
// name (a base name, without directory) and the CRC-32 of its contents.
type Debuglink struct {
	Name string
	CRC  uint32
}

// ParseDebuglink decodes the contents of a .gnu_debuglink section: a
// NUL-terminated file name, zero padding to a multiple of 4 bytes, and the
// CRC-32 as a 4-byte word in the file's byte order (order). Bytes after
// the CRC are ignored, as gdb ignores them. Errors are *dwarf.FormatError
// (Section ".gnu_debuglink") for a name without its NUL, an empty name,
// a name longer than MaxLinkName or holding a '/', or a section too short
// for the CRC. Cost: O(len(b)), one allocation for the name.
func ParseDebuglink(b []byte, order binary.ByteOrder) (Debuglink, error) {
	bad := func(off int, field, msg string) (Debuglink, error) {
		return Debuglink{}, &dwarf.FormatError{Section: ".gnu_debuglink", Offset: uint64(off), Field: field, Msg: msg}
	}
	n := bytes.IndexByte(b, 0)
	switch {
	case n < 0:
		return bad(0, "file name", fmt.Sprintf("no NUL in the section's %d bytes", len(b)))
	case n == 0:
		return bad(0, "file name", "empty")
	case n > MaxLinkName:
		return bad(0, "file name", fmt.Sprintf("%d bytes, more than %d", n, MaxLinkName))
	case bytes.IndexByte(b[:n], '/') >= 0:
		return bad(0, "file name", fmt.Sprintf("%q holds a '/'", b[:n]))
	}
	off := (n + 4) &^ 3
	if len(b) < off+4 {
		return bad(off, "CRC-32", fmt.Sprintf("section of %d bytes ends before the CRC at %d", len(b), off))
	}
	return Debuglink{Name: string(b[:n]), CRC: order.Uint32(b[off:])}, nil
}

// AppendDebuglink appends the contents of a .gnu_debuglink section for l
// to b, as ParseDebuglink decodes them (the name, NUL, zero padding to 4
// bytes, the CRC in byte order order), and returns the extended slice.
// It does not check l.Name.
func AppendDebuglink(b []byte, l Debuglink, order binary.ByteOrder) []byte {
	b = append(b, l.Name...)
	for i := len(l.Name); i < (len(l.Name)+4)&^3; i++ {
		b = append(b, 0) // the NUL and the padding to 4 bytes
	}
	var crc [4]byte
	order.PutUint32(crc[:], l.CRC)
	return append(b, crc[:]...)
}

// CRC returns the CRC-32 (IEEE, zlib's) of everything r holds, the value
// a .gnu_debuglink records for a debug file. Cost: one pass over r in
// 64 KiB reads. Errors are r's.
func CRC(r io.Reader) (uint32, error) {
	h := crc32.NewIEEE()
	if _, err := io.CopyBuffer(h, r, make([]byte, 64<<10)); err != nil {
		return 0, err
	}
	return h.Sum32(), nil
}

// FileCRC is [CRC] of the file at path.
func FileCRC(path string) (uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return CRC(f)
}

// Target is what the lookup knows of the file whose debug file it seeks.
type Target struct {
	// Path is the file's path; its directory anchors the debuglink
	// search. Empty: no debuglink search.
	Path string
	// BuildID is the descriptor of its NT_GNU_BUILD_ID note; nil: none.
	BuildID []byte
	// Link is its .gnu_debuglink; nil: none.
	Link *Debuglink
}

// ReadTarget reads the build ID and the .gnu_debuglink section of the ELF
// file at path (package elfobj). A file with neither is not an error: the
// Target then has only its Path. Errors are elfobj's (*dwarf.FormatError,
// wrapping elfobj.ErrNotELF for a file that is not ELF), os.Open's, or
// ParseDebuglink's. Cost: reads the headers, the note sections and the
// debuglink section.
func ReadTarget(path string) (Target, error) {
	f, err := elfobj.Open(path)
	if err != nil {
		return Target{}, err
	}
	defer f.Close()
	return FileTarget(f, path)
}

// FileTarget is [ReadTarget] on a file already open, whose path is path.
func FileTarget(f *elfobj.File, path string) (Target, error) {
	t := Target{Path: path}
	id, err := f.BuildID()
	if err != nil {
		return t, err
	}
	if len(id) > 0 {
		t.BuildID = bytes.Clone(id)
	}
	if i := f.FindSection(".gnu_debuglink"); i >= 0 && f.Sections[i].Type != elf.SHT_NOBITS {
		b, err := f.Raw(i)
		if err != nil {
			return t, err
		}
		l, err := ParseDebuglink(b, f.ByteOrder)
		if err != nil {
			return t, fmt.Errorf("%s: %w", path, err)
		}
		t.Link = &l
	}
	return t, nil
}

// BuildIDHex returns id in lowercase hexadecimal, or an error when its
// length is outside [MinBuildID, MaxBuildID]: the only form of a build ID
// this package and package debuginfod put in a path or a URL.
func BuildIDHex(id []byte) (string, error) {
	if len(id) < MinBuildID || len(id) > MaxBuildID {
		return "", fmt.Errorf("debugfile: build ID of %d bytes: want %d to %d", len(id), MinBuildID, MaxBuildID)
	}
	return hex.EncodeToString(id), nil
}

// Remote fetches the debug file of a build ID from elsewhere and returns
// its local path (a file in a cache); (*debuginfod.Client).Debuginfo is
// one. It returns an error wrapping ErrNotFound when no server has it.
type Remote func(ctx context.Context, buildID []byte) (path string, err error)

// Finder finds separate debug files. Its zero value searches
// DefaultDebugDir and the file's directory, with no remote source. It is
// safe for concurrent use when its fields are not changed.
type Finder struct {
	// DebugDirs are the global debug directories, searched in order;
	// nil means {DefaultDebugDir}.
	DebugDirs []string
	// Remote, when set, is asked by build ID after every local place.
	Remote Remote
}

// Find returns the path of t's separate debug file, searched in the
// order of the package documentation. Errors: ErrNotFound (wrapped, with
// the places tried and why each candidate that exists was rejected, and
// the remote source's error), or ctx's error. Cost: a stat per place;
// the CRC-32 of each debuglink candidate found (a read of the whole
// file); the remote source's download when it is reached.
func (f *Finder) Find(ctx context.Context, t Target) (string, error) {
	dirs := f.DebugDirs
	if dirs == nil {
		dirs = []string{DefaultDebugDir}
	}
	var tried []string
	var why []error
	hexID, idErr := BuildIDHex(t.BuildID)
	if t.BuildID == nil {
		idErr = nil
	} else if idErr == nil {
		for _, d := range dirs {
			p := filepath.Join(d, ".build-id", hexID[:2], hexID[2:]+".debug")
			tried = append(tried, p)
			if err := checkBuildID(p, t.BuildID); err == nil {
				return p, nil
			} else if !errors.Is(err, os.ErrNotExist) {
				why = append(why, err)
			}
		}
	}
	if t.Link != nil && t.Path != "" {
		dir := filepath.Dir(t.Path)
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			dir = real
		}
		abs, err := filepath.Abs(dir)
		if err == nil {
			dir = abs
		}
		places := []string{filepath.Join(dir, t.Link.Name), filepath.Join(dir, ".debug", t.Link.Name)}
		for _, d := range dirs {
			places = append(places, filepath.Join(d, dir, t.Link.Name))
		}
		for _, p := range places {
			if err := ctx.Err(); err != nil {
				return "", err
			}
			if same(p, t.Path) {
				continue // the file names itself: not its debug file
			}
			tried = append(tried, p)
			if err := checkCRC(p, t.Link.CRC); err == nil {
				return p, nil
			} else if !errors.Is(err, os.ErrNotExist) {
				why = append(why, err)
			}
		}
	}
	if f.Remote != nil && t.BuildID != nil && idErr == nil {
		p, err := f.Remote(ctx, t.BuildID)
		if err == nil {
			if err = checkBuildID(p, t.BuildID); err == nil {
				return p, nil
			}
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		why = append(why, err)
	}
	msg := "tried " + strings.Join(tried, ", ")
	switch {
	case t.BuildID == nil && t.Link == nil:
		msg = "the file has neither a build ID nor a .gnu_debuglink"
	case len(tried) == 0:
		msg = "no local place to try"
	}
	if idErr != nil {
		why = append(why, idErr)
	}
	return "", fmt.Errorf("%w for %s: %s%s", ErrNotFound, t.Path, msg, joinWhy(why))
}

func joinWhy(why []error) string {
	var b strings.Builder
	for _, e := range why {
		b.WriteString("; ")
		b.WriteString(e.Error())
	}
	return b.String()
}

// same reports whether a and b name one existing file.
func same(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// checkBuildID checks that the file at p is ELF with build ID id. Errors
// wrap os.ErrNotExist when there is no file.
func checkBuildID(p string, id []byte) error {
	f, err := elfobj.Open(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return err
		}
		return fmt.Errorf("%s: not a debug file: %w", p, err)
	}
	defer f.Close()
	got, err := f.BuildID()
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if !bytes.Equal(got, id) {
		return fmt.Errorf("%s: build ID %x, want %x", p, got, id)
	}
	return nil
}

// checkCRC checks the CRC-32 of the regular file at p.
func checkCRC(p string, want uint32) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file (mode %v)", p, st.Mode())
	}
	got, err := FileCRC(p)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("%s: CRC-32 %#08x, the .gnu_debuglink records %#08x", p, got, want)
	}
	return nil
}
