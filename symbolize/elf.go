package symbolize

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/klauspost/compress/zstd"
)

// ELF constants used here (System V gABI, "Sections" and "Symbol Table").
const (
	shtNobits    = 8
	shtSymtab    = 2
	shtDynsym    = 11
	shfCompr     = 0x800 // SHF_COMPRESSED
	compZlib     = 1     // ELFCOMPRESS_ZLIB
	compZstd     = 2     // ELFCOMPRESS_ZSTD
	shnXindex    = 0xffff
	shnLoreserve = 0xff00
)

// maxDecompressed bounds the size of one decompressed section (1 GiB).
const maxDecompressed = 1 << 30

// section is one section header.
type section struct {
	name            string
	typ             uint32
	flags           uint64
	addr, off, size uint64
	link            uint32
	entsize         uint64
}

// elfFile is a parsed ELF header and section table over a source.
type elfFile struct {
	src      source
	class64  bool
	order    binary.ByteOrder
	typ      uint16
	sections []section
}

// source gives bytes of the file: a subslice of an in-memory image (no
// copy) or a fresh buffer read from an io.ReaderAt.
type source interface {
	read(off, n uint64) ([]byte, error)
	size() uint64
}

type byteSource []byte

func (b byteSource) size() uint64 { return uint64(len(b)) }
func (b byteSource) read(off, n uint64) ([]byte, error) {
	if off > uint64(len(b)) || n > uint64(len(b))-off {
		return nil, io.ErrUnexpectedEOF
	}
	return b[off : off+n : off+n], nil
}

type readerSource struct {
	r io.ReaderAt
	n uint64
}

func (r readerSource) size() uint64 { return r.n }
func (r readerSource) read(off, n uint64) ([]byte, error) {
	if off > r.n || n > r.n-off {
		return nil, io.ErrUnexpectedEOF
	}
	p := make([]byte, n)
	if _, err := r.r.ReadAt(p, int64(off)); err != nil && !(errors.Is(err, io.EOF) && n > 0) {
		return nil, err
	}
	return p, nil
}

func elfErr(off uint64, field, msg string) error {
	return &dwarf.FormatError{Section: "ELF header", Offset: off, Field: field, Msg: msg}
}

// parseELF reads the ELF header and the section header table (gABI
// "ELF Header", "Sections"), checking that every table fits in the file.
func parseELF(src source) (*elfFile, error) {
	hdr, err := src.read(0, 52)
	if err != nil || !bytes.HasPrefix(hdr, []byte("\x7fELF")) {
		return nil, fmt.Errorf("%w: no ELF header", ErrNotELF)
	}
	f := &elfFile{src: src}
	switch hdr[4] {
	case 1:
	case 2:
		f.class64 = true
	default:
		return nil, fmt.Errorf("%w: ELF class %d", ErrNotELF, hdr[4])
	}
	if hdr[5] != 1 {
		return nil, fmt.Errorf("%w: only little-endian ELF is supported (EI_DATA %d)", ErrNotELF, hdr[5])
	}
	f.order = binary.LittleEndian
	le := binary.LittleEndian
	f.typ = le.Uint16(hdr[16:])
	var shoff uint64
	var shentsize, shnum, shstrndx uint64
	if f.class64 {
		if hdr, err = src.read(0, 64); err != nil {
			return nil, elfErr(0, "e_ident", "file shorter than an ELF64 header")
		}
		shoff = le.Uint64(hdr[40:])
		shentsize, shnum, shstrndx = uint64(le.Uint16(hdr[58:])), uint64(le.Uint16(hdr[60:])), uint64(le.Uint16(hdr[62:]))
	} else {
		shoff = uint64(le.Uint32(hdr[32:]))
		shentsize, shnum, shstrndx = uint64(le.Uint16(hdr[46:])), uint64(le.Uint16(hdr[48:])), uint64(le.Uint16(hdr[50:]))
	}
	if shoff == 0 {
		if shnum != 0 {
			return nil, elfErr(0, "e_shnum", "sections without a section header table")
		}
		return f, nil
	}
	want := uint64(40)
	if f.class64 {
		want = 64
	}
	if shentsize != want {
		return nil, elfErr(0, "e_shentsize", fmt.Sprintf("%d, want %d", shentsize, want))
	}
	readSH := func(i uint64) (section, uint32, error) {
		if shoff > src.size() || i > (src.size()-shoff)/shentsize {
			return section{}, 0, elfErr(shoff, "e_shoff", fmt.Sprintf("section header %d outside the file", i))
		}
		p, err := src.read(shoff+i*shentsize, shentsize)
		if err != nil {
			return section{}, 0, elfErr(shoff+i*shentsize, "section header", "outside the file")
		}
		var s section
		s.typ = le.Uint32(p[4:])
		if f.class64 {
			s.flags, s.addr, s.off, s.size = le.Uint64(p[8:]), le.Uint64(p[16:]), le.Uint64(p[24:]), le.Uint64(p[32:])
			s.link, s.entsize = le.Uint32(p[40:]), le.Uint64(p[56:])
		} else {
			s.flags, s.addr, s.off, s.size = uint64(le.Uint32(p[8:])), uint64(le.Uint32(p[12:])), uint64(le.Uint32(p[16:])), uint64(le.Uint32(p[20:]))
			s.link, s.entsize = le.Uint32(p[24:]), uint64(le.Uint32(p[36:]))
		}
		return s, le.Uint32(p), nil
	}
	if shnum == 0 || shstrndx == shnXindex {
		s0, _, err := readSH(0)
		if err != nil {
			return nil, err
		}
		if shnum == 0 {
			shnum = s0.size
		}
		if shstrndx == shnXindex {
			shstrndx = uint64(s0.link)
		}
	}
	if shoff > src.size() || shnum > (src.size()-shoff)/shentsize {
		return nil, elfErr(0, "e_shnum", fmt.Sprintf("%d section headers at %#x do not fit in the file", shnum, shoff))
	}
	names := make([]uint32, shnum)
	f.sections = make([]section, shnum)
	for i := uint64(0); i < shnum; i++ {
		s, nameOff, err := readSH(i)
		if err != nil {
			return nil, err
		}
		if s.typ != shtNobits && (s.off > src.size() || s.size > src.size()-s.off) {
			return nil, elfErr(shoff+i*shentsize, "sh_offset", fmt.Sprintf("section %d [%#x, +%#x) outside the file", i, s.off, s.size))
		}
		names[i] = nameOff
		f.sections[i] = s
	}
	if shstrndx >= shnum && shstrndx != 0 {
		return nil, elfErr(0, "e_shstrndx", fmt.Sprintf("%d, only %d sections", shstrndx, shnum))
	}
	var strtab []byte
	if shstrndx < shnum && f.sections[shstrndx].typ != shtNobits {
		s := f.sections[shstrndx]
		if strtab, err = src.read(s.off, s.size); err != nil {
			return nil, elfErr(s.off, "e_shstrndx", "section name table outside the file")
		}
	}
	for i := range f.sections {
		f.sections[i].name = ""
		if off := uint64(names[i]); off < uint64(len(strtab)) {
			if j := bytes.IndexByte(strtab[off:], 0); j >= 0 {
				f.sections[i].name = string(strtab[off : off+uint64(j)])
			}
		}
	}
	return f, nil
}

// find returns the first section named name.
func (f *elfFile) find(name string) *section {
	for i := range f.sections {
		if f.sections[i].name == name {
			return &f.sections[i]
		}
	}
	return nil
}

// raw returns the bytes of s as stored (nil for SHT_NOBITS).
func (f *elfFile) raw(s *section) ([]byte, error) {
	if s.typ == shtNobits || s.size == 0 {
		return nil, nil
	}
	p, err := f.src.read(s.off, s.size)
	if err != nil {
		return nil, &dwarf.FormatError{Section: s.name, Offset: s.off, Field: "sh_offset", Msg: err.Error()}
	}
	return p, nil
}

// debugSection returns the contents of DWARF section name (".debug_info"),
// decompressed: SHF_COMPRESSED sections (gABI "Compressed Sections", zlib
// and zstd) and GNU .zdebug_ sections ("ZLIB" + 8-byte big-endian size).
// A missing section is nil, nil.
func (f *elfFile) debugSection(name string) ([]byte, error) {
	s := f.find(name)
	gnu := false
	if s == nil {
		if s = f.find(".z" + strings.TrimPrefix(name, ".")); s == nil {
			return nil, nil
		}
		gnu = true
	}
	p, err := f.raw(s)
	if err != nil || p == nil {
		return p, err
	}
	ferr := func(off uint64, field, msg string) error {
		return &dwarf.FormatError{Section: s.name, Offset: off, Field: field, Msg: msg}
	}
	var kind uint32
	var size uint64
	switch {
	case gnu:
		if len(p) < 12 || string(p[:4]) != "ZLIB" {
			return nil, ferr(0, "ZLIB header", "missing")
		}
		kind, size, p = compZlib, binary.BigEndian.Uint64(p[4:]), p[12:]
	case s.flags&shfCompr != 0:
		hl := 12
		if f.class64 {
			hl = 24
		}
		if len(p) < hl {
			return nil, ferr(0, "Elf_Chdr", "shorter than the compression header")
		}
		kind = f.order.Uint32(p)
		if f.class64 {
			size = f.order.Uint64(p[8:])
		} else {
			size = uint64(f.order.Uint32(p[4:]))
		}
		p = p[hl:]
	default:
		return p, nil
	}
	if size > maxDecompressed {
		return nil, ferr(0, "ch_size", fmt.Sprintf("%d bytes is more than the %d this reader accepts", size, maxDecompressed))
	}
	var r io.Reader
	switch kind {
	case compZlib:
		zr, err := zlib.NewReader(bytes.NewReader(p))
		if err != nil {
			return nil, ferr(0, "zlib stream", err.Error())
		}
		r = zr
	case compZstd:
		zr, err := zstd.NewReader(bytes.NewReader(p), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxDecompressed+1))
		if err != nil {
			return nil, ferr(0, "zstd stream", err.Error())
		}
		defer zr.Close()
		r = zr
	default:
		return nil, ferr(0, "ch_type", fmt.Sprintf("unknown compression %d", kind))
	}
	// Grow with the data actually produced, so that a lying ch_size costs
	// no more than the real output; stop one byte past ch_size.
	pre := size
	if lim := 64*uint64(len(p)) + 4096; pre > lim {
		pre = lim
	}
	buf := bytes.NewBuffer(make([]byte, 0, pre))
	n, err := io.Copy(buf, io.LimitReader(r, int64(size)+1))
	if err != nil {
		return nil, ferr(0, "compressed data", err.Error())
	}
	if uint64(n) != size {
		return nil, ferr(0, "ch_size", fmt.Sprintf("decompressed to %d bytes, header says %d", n, size))
	}
	return buf.Bytes(), nil
}
