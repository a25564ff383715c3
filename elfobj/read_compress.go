package elfobj

import (
	"bytes"
	"compress/zlib"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// MaxDecompressed bounds the size of one decompressed section: 1 GiB. A
// compression header (or GNU .zdebug_ header) claiming more is an error.
const MaxDecompressed = 1 << 30

// SectionData returns the contents of section i, decompressed: an SHF_COMPRESSED
// section (gABI "Compressed Sections", ELFCOMPRESS_ZLIB or
// ELFCOMPRESS_ZSTD) is inflated to its ch_size bytes, and so is a GNU
// section whose name starts with ".zdebug" (the bytes "ZLIB", an 8-byte
// big-endian size, then a zlib stream, as gcc -gz=zlib-gnu and older
// binutils write); any other section is returned as [File.Raw] returns it
// (a subslice for [NewBytes]: do not modify it). SHT_NOBITS gives nil.
//
// Errors are *formaterr.Error with Source the section's name: Field
// "sh_flags" for SHF_COMPRESSED on an SHF_ALLOC section, "ch_type" for an
// unknown compression, "ch_size" for a size above
// [MaxDecompressed] or a stream that inflates to another size, "ZLIB
// header" for a .zdebug_ section without it, "compressed data" for a
// corrupt stream; or r's error. Cost: O(decompressed size) time; the
// output buffer grows with the data actually produced, so a lying ch_size
// costs no more than the real output (bounded by MaxDecompressed).
func (f *File) SectionData(i int) ([]byte, error) {
	p, _, err := f.contents(i)
	return p, err
}

// contents is SectionData, and whether the result is a fresh buffer the caller may
// modify.
func (f *File) contents(i int) (p []byte, fresh bool, err error) {
	s, err := f.section(i)
	if err != nil || s.Type == elf.SHT_NOBITS {
		return nil, false, err
	}
	p, err = f.Raw(i)
	if err != nil {
		return nil, false, err
	}
	fresh = !f.mem
	name := f.secName(i)
	ferr := func(off uint64, field, format string, args ...any) error {
		return formatErr(name, s.Offset+off, field, format, args...)
	}
	var kind elf.CompressionType
	var size uint64
	var skip uint64
	switch {
	case s.Flags&elf.SHF_COMPRESSED != 0:
		if s.Flags&elf.SHF_ALLOC != 0 {
			return nil, false, ferr(0, "sh_flags", "SHF_COMPRESSED on an SHF_ALLOC section (gABI: only non-allocated sections may be compressed)")
		}
		ch := f.DecodeChdr(p) // readSections checked that it fits
		kind, size, skip = ch.Type, ch.Size, uint64(f.ChdrSize())
	case strings.HasPrefix(s.Name, ".zdebug"):
		if len(p) < 12 || string(p[:4]) != "ZLIB" {
			return nil, false, ferr(0, "ZLIB header", "GNU compressed section without its \"ZLIB\" header")
		}
		kind, size, skip = elf.COMPRESS_ZLIB, binary.BigEndian.Uint64(p[4:]), 12
	default:
		return p, fresh, nil
	}
	if kind != elf.COMPRESS_ZLIB && kind != elf.COMPRESS_ZSTD {
		return nil, false, ferr(0, "ch_type", "unknown compression %v", kind)
	}
	if size > MaxDecompressed {
		return nil, false, ferr(0, "ch_size", "%d bytes is more than the %d this reader accepts", size, MaxDecompressed)
	}
	out, err := inflate(kind, p[skip:], size)
	if err != nil {
		if fe, ok := err.(*inflateError); ok {
			e := formatErr(name, s.Offset, fe.field, "%s", fe.msg)
			e.Err = fe.err
			return nil, false, e
		}
		return nil, false, err
	}
	return out, true, nil
}

// inflateError is a decompression failure: the field at fault, what is
// wrong, and the decompressor's error when it gave one.
type inflateError struct {
	field, msg string
	err        error
}

func (e *inflateError) Error() string { return e.field + ": " + e.msg }

// inflate decompresses stream of the given kind, which must produce
// exactly size bytes.
func inflate(kind elf.CompressionType, stream []byte, size uint64) ([]byte, error) {
	var r io.Reader
	switch kind {
	case elf.COMPRESS_ZLIB:
		zr, err := zlib.NewReader(bytes.NewReader(stream))
		if err != nil {
			return nil, &inflateError{"compressed data", "zlib", err}
		}
		r = zr
	case elf.COMPRESS_ZSTD:
		zr, err := zstd.NewReader(bytes.NewReader(stream), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxDecompressed+1))
		if err != nil {
			return nil, &inflateError{"compressed data", "zstd", err}
		}
		defer zr.Close()
		r = zr
	default:
		return nil, &inflateError{"ch_type", fmt.Sprintf("unknown compression %v", kind), nil}
	}
	// Grow with the data actually produced, so that a lying size costs
	// no more than the real output; stop one byte past size.
	pre := min(size, 64*uint64(len(stream))+4096)
	buf := bytes.NewBuffer(make([]byte, 0, pre))
	n, err := io.Copy(buf, io.LimitReader(r, int64(size)+1))
	if err != nil {
		return nil, &inflateError{"compressed data", "decompressing", err}
	}
	if uint64(n) != size {
		return nil, &inflateError{"ch_size", fmt.Sprintf("decompressed to %d bytes, the header says %d", n, size), nil}
	}
	return buf.Bytes(), nil
}
