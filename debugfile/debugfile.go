// Package debugfile finds the separate debug file of an ELF file the way
// gdb, elfutils and LLVM do (GDB manual, "Separate Debug Files"), and
// reads and writes the .gnu_debuglink section that names it.
//
// A stripped file identifies its debug file in two ways: its build ID
// (the NT_GNU_BUILD_ID note, kept by every strip tool), looked up as
// DIR/.build-id/xx/rest.debug under each debug directory DIR (xx the
// first byte of the ID in hexadecimal, rest the others), and its
// .gnu_debuglink section, a file name and the CRC-32 of that file, looked
// up beside the stripped file, in its .debug directory and under each
// debug directory followed by the stripped file's own directory. [Find]
// tries them in that order, which is gdb's, and accepts a candidate only
// when it is an ELF file with the same build ID (or, found through the
// debuglink, the same CRC-32). The package is pure Go and reads only the
// candidates' headers and notes (and, for a debuglink candidate without a
// matching build ID, its bytes for the CRC).
//
// A debuginfod client is one more source: a caller that finds nothing
// with Find asks it for the same build ID.
package debugfile

import (
	"bytes"
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
// file's byte order (GDB manual, "Separate Debug Files"). Its type is
// SHT_PROGBITS, not loaded, aligned to 4.
const SectionDebugLink = ".gnu_debuglink"

// DefaultDirs is the debug directory gdb, elfutils and LLVM use when none
// is configured: where distributions install debug packages (libc6-dbg's
// files are /usr/lib/debug/.build-id/xx/rest.debug).
var DefaultDirs = []string{"/usr/lib/debug"}

// ErrNotFound is wrapped by the error of [Find] when no candidate is the
// debug file.
var ErrNotFound = errors.New("debugfile: debug file not found")

// NotFoundError is the error of [Find] when no candidate is the debug
// file: what was looked for, every path tried, and why each existing one
// was rejected. It wraps ErrNotFound.
type NotFoundError struct {
	BuildID  []byte   // the build ID looked for (nil: none)
	Link     string   // the .gnu_debuglink name looked for ("" : none)
	Tried    []string // every candidate path, in the order tried
	Rejected []string // "PATH: why" for each candidate that exists but is not the debug file
}

// Error says what was looked for and where, for example
// `debug file not found (build ID 3a5f..., .gnu_debuglink "prog.debug"):
// tried /usr/lib/debug/.build-id/3a/5f....debug, /dir/prog.debug, ...`.
func (e *NotFoundError) Error() string {
	var what []string
	if len(e.BuildID) > 0 {
		what = append(what, "build ID "+hex.EncodeToString(e.BuildID))
	}
	if e.Link != "" {
		what = append(what, fmt.Sprintf("%s %q", SectionDebugLink, e.Link))
	}
	if len(what) == 0 {
		return "debugfile: debug file not found: the file has neither a build ID nor a " + SectionDebugLink
	}
	msg := fmt.Sprintf("debug file not found (%s): tried %s", strings.Join(what, ", "), strings.Join(e.Tried, ", "))
	if len(e.Rejected) > 0 {
		msg += "; rejected " + strings.Join(e.Rejected, "; ")
	}
	return "debugfile: " + msg
}

// Unwrap returns ErrNotFound.
func (e *NotFoundError) Unwrap() error { return ErrNotFound }

// BuildIDPath returns the path of the debug file of build ID id under the
// debug directory dir: dir/.build-id/xx/rest.debug, xx the first byte of
// id and rest the others in lower-case hexadecimal. It returns "" for an
// ID shorter than 2 bytes (no tool writes one).
func BuildIDPath(dir string, id []byte) string {
	if len(id) < 2 {
		return ""
	}
	h := hex.EncodeToString(id)
	return filepath.Join(dir, ".build-id", h[:2], h[2:]+".debug")
}

// CRC32 returns the CRC-32 that .gnu_debuglink records: the ISO 3309 /
// ITU-T V.42 CRC (IEEE polynomial, reflected, initial value and final XOR
// 0xffffffff), as zlib's crc32 and gdb's gnu_debuglink_crc32 compute it,
// of the whole file data.
func CRC32(data []byte) uint32 { return crc32.ChecksumIEEE(data) }

// FileCRC32 returns [CRC32] of the file at path, read in pieces. Errors
// are those of opening and reading it.
func FileCRC32(path string) (uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	h := crc32.NewIEEE()
	if _, err := io.Copy(h, f); err != nil {
		return 0, fmt.Errorf("debugfile: read %s: %w", path, err)
	}
	return h.Sum32(), nil
}

// LinkSize returns the size in bytes of the [SectionDebugLink] contents
// for a debug file named name: the name and its NUL padded to 4, plus 4.
func LinkSize(name string) int { return (len(name)+1+3)&^3 + 4 }

// AppendLink appends the contents of a [SectionDebugLink] section naming
// the debug file name (a file name, without directory) whose CRC-32 is
// crc, with the CRC in byte order order, and returns the extended slice.
func AppendLink(b []byte, name string, crc uint32, order binary.AppendByteOrder) []byte {
	b = append(b, name...)
	for n := len(name) + 1; ; n++ {
		b = append(b, 0)
		if n%4 == 0 {
			break
		}
	}
	return order.AppendUint32(b, crc)
}

// ParseLink decodes the contents of a [SectionDebugLink] section: the
// debug file's name and CRC-32. Errors are *formaterr.Error (source
// .gnu_debuglink): a name without its NUL, empty, or holding a '/'; no
// room for the CRC after the padding.
func ParseLink(b []byte, order binary.ByteOrder) (name string, crc uint32, err error) {
	fail := func(off int, field, msg string) error {
		return &formaterr.Error{Source: SectionDebugLink, Offset: uint64(off), Field: field, Msg: msg}
	}
	n := bytes.IndexByte(b, 0)
	switch {
	case n < 0:
		return "", 0, fail(0, "file name", fmt.Sprintf("no NUL in the %d bytes", len(b)))
	case n == 0:
		return "", 0, fail(0, "file name", "empty")
	case bytes.IndexByte(b[:n], '/') >= 0:
		return "", 0, fail(0, "file name", fmt.Sprintf("%q has a directory (a debuglink names a file)", b[:n]))
	}
	at := (n + 1 + 3) &^ 3
	if at+4 > len(b) {
		return "", 0, fail(at, "CRC", fmt.Sprintf("section of %d bytes ends before the CRC at offset %d", len(b), at))
	}
	return string(b[:n]), order.Uint32(b[at:]), nil
}

// ReadLink returns the debuglink of the ELF file f: the name and CRC-32
// of its [SectionDebugLink] section, ok false when it has none. Errors
// are those of reading and of [ParseLink].
func ReadLink(f *elfobj.File) (name string, crc uint32, ok bool, err error) {
	i := f.FindSection(SectionDebugLink)
	if i < 0 {
		return "", 0, false, nil
	}
	b, err := f.SectionData(i)
	if err != nil {
		return "", 0, false, err
	}
	order := binary.ByteOrder(binary.LittleEndian)
	if f.Header.Data == elf.ELFDATA2MSB {
		order = binary.BigEndian
	}
	name, crc, err = ParseLink(b, order)
	return name, crc, err == nil, err
}

// Candidates returns the paths [Find] tries, in its order: for each
// debug directory, its build-ID path (when buildID has at least 2
// bytes); then, when debuglink is not "", the debuglink name in the
// directory of imagePath, in its .debug subdirectory, and under each
// debug directory followed by imagePath's absolute directory
// (/usr/lib/debug/usr/bin/prog.debug for /usr/bin/prog). dirs nil means
// [DefaultDirs]; a relative imagePath is made absolute for the last form
// only.
func Candidates(buildID []byte, debuglink, imagePath string, dirs []string) []string {
	if dirs == nil {
		dirs = DefaultDirs
	}
	var out []string
	for _, d := range dirs {
		if p := BuildIDPath(d, buildID); p != "" {
			out = append(out, p)
		}
	}
	if debuglink == "" || strings.IndexByte(debuglink, '/') >= 0 {
		return out
	}
	dir := filepath.Dir(imagePath)
	out = append(out, filepath.Join(dir, debuglink), filepath.Join(dir, ".debug", debuglink))
	abs, err := filepath.Abs(dir)
	if err == nil {
		for _, d := range dirs {
			out = append(out, filepath.Join(d, abs, debuglink))
		}
	}
	return out
}

// Find returns the path of the debug file of the ELF file at imagePath
// whose build ID is buildID (nil when it has none) and whose
// .gnu_debuglink names debuglink with CRC-32 crc ("" when it has none),
// trying [Candidates] in order. A build-ID path is accepted when it is an
// ELF file whose build ID is buildID; a debuglink path when it is an ELF
// file other than imagePath itself whose build ID is buildID, or, when
// either has none, whose CRC-32 is crc (gdb's rule, which lets an
// old debug file without a build ID be found by name). Nothing is
// accepted without a build ID or a debuglink to match.
//
// Errors: a *NotFoundError (wrapping [ErrNotFound]) listing every path
// tried and why each existing candidate was rejected. Cost: one stat per
// candidate; for each existing one, its ELF headers and notes, and for a
// debuglink candidate without a matching build ID one read of the file.
func Find(buildID []byte, debuglink string, crc uint32, imagePath string, dirs []string) (string, error) {
	nf := &NotFoundError{BuildID: buildID, Link: debuglink}
	if len(buildID) < 2 && debuglink == "" {
		return "", nf
	}
	self, selfErr := os.Stat(imagePath)
	nbuild := 0
	if len(buildID) >= 2 {
		if dirs == nil {
			nbuild = len(DefaultDirs)
		} else {
			nbuild = len(dirs)
		}
	}
	for i, p := range Candidates(buildID, debuglink, imagePath, dirs) {
		nf.Tried = append(nf.Tried, p)
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		if selfErr == nil && os.SameFile(self, st) {
			continue // a debuglink naming the file itself
		}
		why := check(p, buildID, crc, i >= nbuild)
		if why == "" {
			return p, nil
		}
		nf.Rejected = append(nf.Rejected, p+": "+why)
	}
	return "", nf
}

// check returns "" when the file at p is the debug file, else why not.
func check(p string, buildID []byte, crc uint32, byLink bool) string {
	f, err := elfobj.Open(p)
	if err != nil {
		return err.Error()
	}
	id, err := f.BuildID()
	f.Close()
	if err != nil {
		return "reading its build ID: " + err.Error()
	}
	switch {
	case len(buildID) > 0 && bytes.Equal(id, buildID):
		return ""
	case !byLink:
		if id == nil {
			return "it has no build ID"
		}
		return "its build ID is " + hex.EncodeToString(id)
	case len(buildID) > 0 && id != nil:
		return "its build ID is " + hex.EncodeToString(id)
	}
	got, err := FileCRC32(p)
	if err != nil {
		return err.Error()
	}
	if got != crc {
		return fmt.Sprintf("its CRC-32 is %#08x, the debuglink's %#08x", got, crc)
	}
	return ""
}
