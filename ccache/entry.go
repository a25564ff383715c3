package ccache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/elfimage/elfimage/formaterr"
)

// FormatVersion is the version of the entry format (trailer, key record)
// and of what the key covers. It is part of every key: bump it when either
// changes, and every older entry becomes stale.
const FormatVersion = 1

// Key is what an entry was built from; an entry is reused only when its
// Key equals the wanted one.
//
// In the file it is the key record: text lines of a name and a Go-quoted
// value (strconv.Quote), in this order:
//
//	elfimage-ccache 1
//	source "/home/user/prog.scm"
//	source-sha256 6c0f…(64 hex digits)
//	compiler "github.com/elfimage/elfimage (devel) go-buildid …"
//	link "{DWARF:{Version:5 Format:32 AddrSize:0 ByteOrder:<nil>} DebugFrame:false}"
//	extra ""
type Key struct {
	// Source is the absolute path of the source file.
	Source string
	// SourceSHA256 is the SHA-256 of the source file's bytes.
	SourceSHA256 [sha256.Size]byte
	// Compiler identifies the compiler and linker that built the image
	// ([ExecutableID] unless the caller gives its own).
	Compiler string
	// Link is the link options, printed with %+v (every field, so an
	// option added later changes the key).
	Link string
	// Extra is the caller's compile options (for example an optimization
	// level); empty when none.
	Extra string
}

// Footer and trailer sizes.
const (
	footerSize   = 16 // magic (8), record length (4, LE), format version (4, LE)
	digestSize   = sha256.Size
	trailerFixed = digestSize + footerSize
	// maxRecord bounds the key record a reader accepts: four paths of
	// PATH_MAX bytes, quoted, fit well within.
	maxRecord = 64 << 10
)

// footerMagic starts an entry's footer.
var footerMagic = [8]byte{'E', 'L', 'F', 'I', 'M', 'G', 'C', 'C'}

// Errors an entry check returns, wrapped with the reason and the path;
// test them with errors.Is.
var (
	// ErrCorrupt: the entry is truncated or damaged (trailer, digest,
	// key record, or an image the loader refuses).
	ErrCorrupt = errors.New("corrupt")
	// ErrStale: the entry is intact but built from another key (another
	// source text, compiler, options or format version).
	ErrStale = errors.New("stale")
	// ErrUntrusted: the entry or the directory is not owned by the
	// effective user, is writable by group or others, or is not a
	// regular file or directory.
	ErrUntrusted = errors.New("untrusted")
)

// record returns the key record of k.
func (k *Key) record() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "elfimage-ccache %d\n", FormatVersion)
	fmt.Fprintf(&b, "source %s\n", strconv.Quote(k.Source))
	fmt.Fprintf(&b, "source-sha256 %s\n", hex.EncodeToString(k.SourceSHA256[:]))
	fmt.Fprintf(&b, "compiler %s\n", strconv.Quote(k.Compiler))
	fmt.Fprintf(&b, "link %s\n", strconv.Quote(k.Link))
	fmt.Fprintf(&b, "extra %s\n", strconv.Quote(k.Extra))
	return []byte(b.String())
}

// parseRecord decodes a key record written by record.
func parseRecord(rec []byte) (Key, error) {
	var k Key
	lines := strings.Split(string(rec), "\n")
	if len(lines) != 7 || lines[6] != "" {
		return k, fmt.Errorf("key record has %d lines, want 6", len(lines)-1)
	}
	want := []string{"elfimage-ccache", "source", "source-sha256", "compiler", "link", "extra"}
	vals := make([]string, len(want))
	for i, l := range lines[:6] {
		name, v, ok := strings.Cut(l, " ")
		if !ok || name != want[i] {
			return k, fmt.Errorf("key record line %d: want %q, got %q", i+1, want[i], trim(l))
		}
		vals[i] = v
	}
	if vals[0] != strconv.Itoa(FormatVersion) {
		return k, fmt.Errorf("key record of format %q, want %d", trim(vals[0]), FormatVersion)
	}
	sum, err := hex.DecodeString(vals[2])
	if err != nil || len(sum) != sha256.Size {
		return k, fmt.Errorf("key record: source-sha256 %q is not 64 hex digits", trim(vals[2]))
	}
	copy(k.SourceSHA256[:], sum)
	for _, f := range []struct {
		dst  *string
		i    int
		name string
	}{{&k.Source, 1, "source"}, {&k.Compiler, 3, "compiler"}, {&k.Link, 4, "link"}, {&k.Extra, 5, "extra"}} {
		if *f.dst, err = strconv.Unquote(vals[f.i]); err != nil {
			return k, fmt.Errorf("key record: %s %q is not a quoted string", f.name, trim(vals[f.i]))
		}
	}
	return k, nil
}

// trim shortens a hostile string for an error message.
func trim(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// appendEntry returns image followed by the trailer of k: the entry's
// whole content.
func appendEntry(image []byte, k *Key) []byte {
	rec := k.record()
	out := make([]byte, 0, len(image)+len(rec)+trailerFixed)
	out = append(append(out, image...), rec...)
	sum := sha256.Sum256(out)
	out = append(out, sum[:]...)
	out = append(out, footerMagic[:]...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(rec)))
	out = binary.LittleEndian.AppendUint32(out, FormatVersion)
	return out
}

// entrySource is the Source of decodeEntry's *formaterr.Error values;
// their offsets are file offsets of the entry.
const entrySource = "cache entry"

// badEntry returns the error of a malformed trailer: kind (ErrCorrupt or
// ErrStale) wrapping a *formaterr.Error naming the field and its offset.
func badEntry(kind error, off int, field, format string, args ...any) error {
	return fmt.Errorf("%w: %w", kind, &formaterr.Error{Source: entrySource, Offset: uint64(off), Field: field, Msg: fmt.Sprintf(format, args...)})
}

// decodeEntry checks an entry's trailer and returns the length of the
// image it holds and its key. Errors wrap ErrCorrupt (damaged or not an
// entry) or ErrStale (another format version) together with a
// *formaterr.Error (Source "cache entry") naming the field and its offset
// in the file. Cost: one SHA-256 pass over the entry.
func decodeEntry(data []byte) (imageLen int, k Key, err error) {
	n := len(data)
	if n < trailerFixed {
		return 0, k, badEntry(ErrCorrupt, n, "trailer", "%d bytes, shorter than the %d-byte trailer (truncated)", n, trailerFixed)
	}
	foot := data[n-footerSize:]
	if !bytes.Equal(foot[:8], footerMagic[:]) {
		return 0, k, badEntry(ErrCorrupt, n-footerSize, "trailer magic", "no cache trailer (truncated, or not written by the cache)")
	}
	recLen := uint64(binary.LittleEndian.Uint32(foot[8:]))
	if v := binary.LittleEndian.Uint32(foot[12:]); v != FormatVersion {
		return 0, k, badEntry(ErrStale, n-4, "format version", "cache format version %d, want %d", v, FormatVersion)
	}
	if recLen > maxRecord || recLen > uint64(n-trailerFixed) {
		return 0, k, badEntry(ErrCorrupt, n-8, "key record length", "%d exceeds the file or the %d-byte limit", recLen, maxRecord)
	}
	body := data[:n-trailerFixed]
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], data[n-trailerFixed:n-footerSize]) {
		return 0, k, badEntry(ErrCorrupt, n-trailerFixed, "SHA-256", "the SHA-256 of the image and key record differs from the one stored")
	}
	imageLen = len(body) - int(recLen)
	if k, err = parseRecord(body[imageLen:]); err != nil {
		return 0, k, badEntry(ErrCorrupt, imageLen, "key record", "%v", err)
	}
	return imageLen, k, nil
}

// diff returns why an entry of key have is stale for want, or "" when
// the keys are equal.
func diff(have, want *Key) string {
	switch {
	case have.Source != want.Source:
		return fmt.Sprintf("built from %s, not %s", have.Source, want.Source)
	case have.SourceSHA256 != want.SourceSHA256:
		return "source changed"
	case have.Compiler != want.Compiler:
		return "built by another compiler (" + have.Compiler + ")"
	case have.Link != want.Link:
		return "other link options (" + have.Link + ")"
	case have.Extra != want.Extra:
		return "other compile options (" + have.Extra + ")"
	}
	return ""
}
