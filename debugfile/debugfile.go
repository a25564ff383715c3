// Package debugfile finds the separate debug file of an ELF file the way
// gdb, elfutils and LLVM find it (GDB manual, "Debugging Information in
// Separate Files"), and reads and writes the .gnu_debuglink section that
// names it. [Finder.Find] tries, in gdb's order:
//
//  1. by build ID: DIR/.build-id/xx/yyyy.debug for each debug directory
//     DIR (default /usr/lib/debug), where xx is the first byte of the
//     file's NT_GNU_BUILD_ID in lowercase hexadecimal and yyyy the rest;
//     the candidate must be an ELF file with the same build ID;
//  2. by the .gnu_debuglink section (a file name and the CRC-32 of the
//     debug file): NAME in the file's directory, in its .debug
//     subdirectory, and DIR/FILEDIR/NAME for each debug directory, where
//     FILEDIR is the file's absolute directory with symbolic links
//     resolved; the candidate must be an ELF file other than the file
//     itself with the same build ID, or, when either has none, whose
//     CRC-32 is the one recorded (gdb checks only the CRC; the build ID
//     is the stronger identity and spares reading the whole file);
//  3. by build ID through a remote source, when the Finder has one
//     (package debugfile/debuginfod's Client, set from DEBUGINFOD_URLS);
//     its answer must have the same build ID too.
//
// The first candidate that passes its check is the answer. A candidate
// that fails it (another build, a stale copy, not ELF) is skipped and
// named with the reason in the *NotFoundError when nothing is found. This
// package is pure Go, reads files and never writes; it does no network
// I/O itself.
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

	"github.com/elfimage/elfimage/elfobj"
	"github.com/elfimage/elfimage/formaterr"
)

// SectionDebugLink is the name of the section that names a file's debug
// file: the file name, NUL-terminated and padded with NULs to a multiple
// of 4 bytes, then the CRC-32 of the debug file as a 4-byte word in the
// file's byte order (GDB manual, "Debugging Information in Separate
// Files"). Its type is SHT_PROGBITS, not loaded, aligned to 4.
const SectionDebugLink = ".gnu_debuglink"

// DefaultDebugDir is the global debug directory of gdb, elfutils and LLVM
// on GNU/Linux (gdb's debug-file-directory): where distributions install
// debug packages (libc6-dbg's files are
// /usr/lib/debug/.build-id/xx/yyyy.debug).
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

// ErrNotFound is wrapped by the error of [Finder.Find] (a
// *NotFoundError) when no source holds a debug file that passes its
// check, and by a [Remote]'s error when no server has the build ID.
var ErrNotFound = errors.New("debugfile: no separate debug file found")

// Debuglink is the contents of a .gnu_debuglink section: the debug file's
// name (a base name, without directory) and the CRC-32 of its contents.
type Debuglink struct {
	Name string
	CRC  uint32
}

// ParseDebuglink decodes the contents of a .gnu_debuglink section: a
// NUL-terminated file name, zero padding to a multiple of 4 bytes, and the
// CRC-32 as a 4-byte word in the file's byte order (order). Bytes after
// the CRC are ignored, as gdb ignores them. Errors are *formaterr.Error
// (Source ".gnu_debuglink") for a name without its NUL, an empty name,
// a name longer than MaxLinkName or holding a '/', or a section too short
// for the CRC. Cost: O(len(b)), one allocation for the name.
func ParseDebuglink(b []byte, order binary.ByteOrder) (Debuglink, error) {
	bad := func(off int, field, msg string) (Debuglink, error) {
		return Debuglink{}, &formaterr.Error{Source: SectionDebugLink, Offset: uint64(off), Field: field, Msg: msg}
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
		return bad(0, "file name", fmt.Sprintf("%q holds a '/' (a debuglink names a file, not a path)", b[:n]))
	}
	off := (n + 4) &^ 3
	if len(b) < off+4 {
		return bad(off, "CRC-32", fmt.Sprintf("section of %d bytes ends before the CRC at %d", len(b), off))
	}
	return Debuglink{Name: string(b[:n]), CRC: order.Uint32(b[off:])}, nil
}

// AppendDebuglink appends the contents of a .gnu_debuglink section for l
// to b, as objcopy --add-gnu-debuglink writes them and ParseDebuglink
// decodes them (the name, NUL, zero padding to 4 bytes, the CRC in byte
// order order: (len(l.Name)+4)&^3 + 4 bytes), and returns the extended
// slice. It does not check l.Name.
func AppendDebuglink(b []byte, l Debuglink, order binary.ByteOrder) []byte {
	b = append(b, l.Name...)
	for i := len(l.Name); i < (len(l.Name)+4)&^3; i++ {
		b = append(b, 0) // the NUL and the padding to 4 bytes
	}
	var crc [4]byte
	order.PutUint32(crc[:], l.CRC)
	return append(b, crc[:]...)
}

// CRC32 returns the CRC-32 that .gnu_debuglink records for a debug file
// whose contents are data: the ISO 3309 / ITU-T V.42 CRC (IEEE
// polynomial, reflected, initial value and final XOR 0xffffffff), as
// zlib's crc32 and gdb's gnu_debuglink_crc32 compute it. Cost: one pass.
func CRC32(data []byte) uint32 { return crc32.ChecksumIEEE(data) }

// FileCRC32 returns [CRC32] of the contents of the file at path, read in
// 64 KiB pieces. Errors are those of opening and reading it.
func FileCRC32(path string) (uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	h := crc32.NewIEEE()
	if _, err := io.CopyBuffer(h, f, make([]byte, 64<<10)); err != nil {
		return 0, fmt.Errorf("debugfile: read %s: %w", path, err)
	}
	return h.Sum32(), nil
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
// Target then has only its Path. Errors are elfobj's (*formaterr.Error,
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
	if i := f.FindSection(SectionDebugLink); i >= 0 && f.Sections[i].Type != elf.SHT_NOBITS {
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

// BuildIDPath returns the path of the debug file of build ID id under the
// debug directory dir: dir/.build-id/xx/yyyy.debug, xx the first byte of
// id and yyyy the others in lowercase hexadecimal. It returns "" for an
// ID whose length is outside [MinBuildID, MaxBuildID].
func BuildIDPath(dir string, id []byte) string {
	h, err := BuildIDHex(id)
	if err != nil {
		return ""
	}
	return filepath.Join(dir, ".build-id", h[:2], h[2:]+".debug")
}

// CheckBuildID checks that the file at path is an ELF file whose build ID
// is id. Errors do not name path (the caller does): os.Open's (wrapping
// fs.ErrNotExist when there is no file), elfobj's for a file that is not
// ELF or whose notes are damaged, or one saying "its build ID is X, want
// Y" or "it has no build ID". Cost: reads the headers and the notes.
func CheckBuildID(path string, id []byte) error {
	got, err := fileBuildID(path)
	if err != nil {
		return err
	}
	return sameBuildID(got, id)
}

// fileBuildID returns the build ID of the ELF file at path (nil: none).
func fileBuildID(path string) ([]byte, error) {
	f, err := elfobj.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	id, err := f.BuildID()
	if err != nil {
		return nil, fmt.Errorf("reading its build ID: %w", err)
	}
	return id, nil
}

// sameBuildID returns nil when got is want, else why not.
func sameBuildID(got, want []byte) error {
	switch {
	case bytes.Equal(got, want):
		return nil
	case got == nil:
		return fmt.Errorf("it has no build ID, want %x", want)
	}
	return fmt.Errorf("its build ID is %x, want %x", got, want)
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
	// nil means {DefaultDebugDir}, an empty slice none.
	DebugDirs []string
	// Remote, when set, is asked by build ID after every local place.
	Remote Remote
}

// NotFoundError is the error of [Finder.Find] when no source has the
// debug file: what was looked for, every local path tried, why each
// existing one was rejected, and the remote source's error. It wraps
// ErrNotFound and, when the remote source was asked, its error.
type NotFoundError struct {
	Path     string     // the file whose debug file was looked for
	BuildID  []byte     // its build ID (nil: none)
	Link     *Debuglink // its .gnu_debuglink (nil: none)
	Tried    []string   // every local candidate path, in the order tried
	Rejected []string   // "PATH: why" for each candidate that exists but is not the debug file
	BadID    error      // why the build ID was not looked up (its length), or nil
	Remote   error      // the remote source's error, nil when it was not asked
}

// Error says what was looked for and where, for example
// `debugfile: no separate debug file found for /bin/prog (build ID
// 3a5f..., .gnu_debuglink "prog.debug"): tried /usr/lib/debug/.build-id/3a/5f....debug,
// /bin/prog.debug, ...; rejected /bin/prog.debug: its build ID is ...`.
func (e *NotFoundError) Error() string {
	var what []string
	if e.BuildID != nil {
		what = append(what, "build ID "+hex.EncodeToString(e.BuildID))
	}
	if e.Link != nil {
		what = append(what, fmt.Sprintf("%s %q", SectionDebugLink, e.Link.Name))
	}
	var b strings.Builder
	b.WriteString(ErrNotFound.Error())
	if e.Path != "" {
		b.WriteString(" for " + e.Path)
	}
	switch {
	case len(what) == 0:
		b.WriteString(": the file has neither a build ID nor a " + SectionDebugLink)
	case len(e.Tried) == 0:
		fmt.Fprintf(&b, " (%s): tried no local place (no debug directory for the build ID, no %s to look for)", strings.Join(what, ", "), SectionDebugLink)
	default:
		fmt.Fprintf(&b, " (%s): tried %s", strings.Join(what, ", "), strings.Join(e.Tried, ", "))
	}
	if len(e.Rejected) > 0 {
		b.WriteString("; rejected " + strings.Join(e.Rejected, "; "))
	}
	if e.BadID != nil {
		b.WriteString("; " + e.BadID.Error())
	}
	if e.Remote != nil {
		b.WriteString("; remote: " + e.Remote.Error())
	}
	return b.String()
}

// Unwrap returns ErrNotFound and the remote source's error, if any.
func (e *NotFoundError) Unwrap() []error {
	if e.Remote != nil {
		return []error{ErrNotFound, e.Remote}
	}
	return []error{ErrNotFound}
}

// dirs returns the global debug directories.
func (f *Finder) dirs() []string {
	if f.DebugDirs == nil {
		return []string{DefaultDebugDir}
	}
	return f.DebugDirs
}

// Candidates returns the local paths [Finder.Find] tries for t, in its
// order: for each debug directory, its build-ID path (when t's build ID
// has a length in [MinBuildID, MaxBuildID]); then, when t has a
// debuglink and a Path, the debuglink name in t.Path's directory, in its
// .debug subdirectory, and under each debug directory followed by that
// directory (/usr/lib/debug/usr/bin/prog.debug for /usr/bin/prog), the
// directory made absolute with symbolic links resolved. nbuild is how
// many of them are build-ID paths. Cost: one EvalSymlinks.
func (f *Finder) Candidates(t Target) (paths []string, nbuild int) {
	dirs := f.dirs()
	for _, d := range dirs {
		if p := BuildIDPath(d, t.BuildID); p != "" {
			paths = append(paths, p)
		}
	}
	nbuild = len(paths)
	if t.Link == nil || t.Path == "" || t.Link.Name == "" || strings.IndexByte(t.Link.Name, '/') >= 0 {
		return paths, nbuild
	}
	dir := filepath.Dir(t.Path)
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	paths = append(paths, filepath.Join(dir, t.Link.Name), filepath.Join(dir, ".debug", t.Link.Name))
	for _, d := range dirs {
		paths = append(paths, filepath.Join(d, dir, t.Link.Name))
	}
	return paths, nbuild
}

// Find returns the path of t's separate debug file, searched in the
// order and with the checks of the package documentation. Errors: a
// *NotFoundError (wrapping ErrNotFound, and the remote source's error)
// listing every path tried and why each existing candidate was rejected,
// or ctx's error. Cost: a stat per candidate; for each existing one its
// ELF headers and notes, and for a debuglink candidate without a matching
// build ID the CRC-32 of the whole file; the remote source's download
// when it is reached.
func (f *Finder) Find(ctx context.Context, t Target) (string, error) {
	nf := &NotFoundError{Path: t.Path, BuildID: t.BuildID, Link: t.Link}
	if t.BuildID == nil && t.Link == nil {
		return "", nf
	}
	if t.BuildID != nil {
		_, nf.BadID = BuildIDHex(t.BuildID)
	}
	self, selfErr := os.Stat(t.Path)
	paths, nbuild := f.Candidates(t)
	for i, p := range paths {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		st, err := os.Stat(p)
		if err == nil && selfErr == nil && os.SameFile(self, st) {
			continue // a debuglink naming the file itself: not its debug file
		}
		nf.Tried = append(nf.Tried, p)
		if err != nil {
			continue
		}
		if !st.Mode().IsRegular() {
			nf.Rejected = append(nf.Rejected, fmt.Sprintf("%s: not a regular file (mode %v)", p, st.Mode()))
			continue
		}
		why := check(p, t, i >= nbuild)
		if why == nil {
			return p, nil
		}
		nf.Rejected = append(nf.Rejected, p+": "+why.Error())
	}
	if f.Remote != nil && t.BuildID != nil && nf.BadID == nil {
		p, err := f.Remote(ctx, t.BuildID)
		if err == nil {
			if err = CheckBuildID(p, t.BuildID); err == nil {
				return p, nil
			}
			err = fmt.Errorf("%s: %w", p, err)
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		nf.Remote = err
	}
	return "", nf
}

// check returns nil when the file at p is t's debug file, else why not;
// byLink says p was found through the debuglink.
func check(p string, t Target, byLink bool) error {
	id, err := fileBuildID(p)
	if err != nil {
		return err
	}
	if !byLink || t.BuildID != nil && id != nil {
		return sameBuildID(id, t.BuildID)
	}
	got, err := FileCRC32(p)
	if err != nil {
		return err
	}
	if got != t.Link.CRC {
		return fmt.Errorf("its CRC-32 is %#08x, the %s records %#08x", got, SectionDebugLink, t.Link.CRC)
	}
	return nil
}
