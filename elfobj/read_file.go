package elfobj

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// File is an ELF file opened for reading by [NewFile], [NewBytes] or
// [Open]: its file header, program headers and section headers, decoded
// and checked against the file size, and the means to read what they
// describe. Its methods are safe for concurrent use (none changes the
// File), except Close.
type File struct {
	// Header is the file header as stored (counts and indices before the
	// extended numbering escapes are resolved).
	Header
	// Progs are the program headers: e_phnum of them, or section header
	// 0's sh_info when e_phnum is PN_XNUM. Their segments are not checked
	// against the file size (a core file may be cut short): [File.ProgData]
	// checks when asked.
	Progs []elf.ProgHeader
	// Sections are the section headers, including the null section 0:
	// e_shnum of them, or section header 0's sh_size when e_shnum is 0;
	// none when e_shoff is 0. Name is resolved in the section name string
	// table (e_shstrndx, or section header 0's sh_link when it is
	// SHN_XINDEX; names are empty when it is SHN_UNDEF). For SHF_COMPRESSED
	// sections Size and Addralign are those of the decompressed data (from
	// the compression header) and FileSize the bytes in the file, and so
	// are Size and FileSize of a GNU .zdebug_ section that starts with
	// its "ZLIB" header; for every other section Size == FileSize. The contents of
	// every section but SHT_NOBITS ones lie inside the file.
	Sections []elf.SectionHeader

	shstrndx int    // resolved section name table index, 0 for none
	size     uint64 // file size in bytes
	r        io.ReaderAt
	data     []byte // the whole file, for NewBytes
	mem      bool   // data is set: reads are subslices
	closer   io.Closer
}

// NewFile reads the ELF file of size bytes that r holds: its file header,
// program header table and section header table (and the section name
// string table), each with one read; sections are read when asked for,
// each through its own [io.SectionReader] (never a shared offset).
//
// What is checked (beyond [DecodeHeader]): e_ident[EI_VERSION] is
// EV_CURRENT; with program headers, e_phentsize is the class's size and
// the table lies inside the file; with e_shoff 0, e_shnum is 0; otherwise
// e_shentsize is the class's size, section header 0 lies inside the file
// when an escape needs it, the whole table lies inside the file, the
// resolved e_shstrndx is below the section count and names an SHT_STRTAB
// section, every name is NUL-terminated inside it, every section but
// SHT_NOBITS ones lies inside the file ([sh_offset, sh_offset+sh_size)
// without overflow), and every SHF_COMPRESSED section holds a whole
// compression header.
//
// Errors are *formaterr.Error (with [ErrNotELF] for input that is not
// ELF), Source "ELF header", "section header N" or a section's name,
// Offset the file offset of the field; an error of r other than io.EOF is
// returned wrapped. Cost: three reads plus one per compressed section;
// allocates the two tables (bounded by the file size) and the names.
func NewFile(r io.ReaderAt, size int64) (*File, error) {
	if size < 0 {
		return nil, fmt.Errorf("elfobj: negative file size %d", size)
	}
	f := &File{r: r, size: uint64(size)}
	var hb [header64Size]byte
	n := min(uint64(len(hb)), f.size)
	if _, err := f.readInto(hb[:n], 0); err != nil {
		return nil, fmt.Errorf("elfobj: reading the ELF header: %w", err)
	}
	h, err := DecodeHeader(hb[:n])
	if err != nil {
		return nil, err
	}
	f.Header = h
	if err := f.init(); err != nil {
		return nil, err
	}
	return f, nil
}

// NewBytes is [NewFile] on an ELF file held in data, which the File uses in
// place: [File.Raw] and [File.SectionData] of an uncompressed section, and
// [File.ProgData], return subslices of data (capacity limited to the
// section), not copies. data must not be modified while the File is in
// use. When data is a mapping of a file, a read of a page the file no
// longer holds faults (SIGBUS); callers that guard against truncation do
// so around every call (runtime/debug.SetPanicOnFault). Errors are those
// of NewFile. Cost: no read; allocates the two tables and the names.
func NewBytes(data []byte) (*File, error) {
	h, err := DecodeHeader(data)
	if err != nil {
		return nil, err
	}
	f := &File{Header: h, size: uint64(len(data)), r: bytes.NewReader(data), data: data, mem: true}
	if err := f.init(); err != nil {
		return nil, err
	}
	return f, nil
}

// Open opens the file at path and reads it with [NewFile]; the File keeps
// it open until [File.Close]. Errors are those of os.Open and NewFile.
func Open(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := fd.Stat()
	if err != nil {
		fd.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		fd.Close()
		return nil, fmt.Errorf("elfobj: %s: not a regular file (mode %v)", path, st.Mode())
	}
	f, err := NewFile(fd, st.Size())
	if err != nil {
		fd.Close()
		return nil, fmt.Errorf("elfobj: %s: %w", path, err)
	}
	f.closer = fd
	return f, nil
}

// Close closes the file [Open] opened; for a File from NewFile or NewBytes
// it does nothing. The File must not be used afterwards.
func (f *File) Close() error {
	if f.closer == nil {
		return nil
	}
	c := f.closer
	f.closer = nil
	return c.Close()
}

// Size returns the file size in bytes.
func (f *File) Size() uint64 { return f.size }

func (f *File) init() error {
	h := &f.Header
	if h.Version != elf.EV_CURRENT {
		return formatErr("ELF header", elf.EI_VERSION, "e_ident[EI_VERSION]", "version %d, want 1 (EV_CURRENT)", h.Version)
	}
	progs, err := h.readProgs(f, -1)
	if err != nil {
		return err
	}
	f.Progs = progs
	return f.readSections()
}

// readInto fills p from file offset off; reading past the end of the file
// fails with io.ErrUnexpectedEOF.
func (f *File) readInto(p []byte, off uint64) (int, error) {
	if off > f.size || uint64(len(p)) > f.size-off {
		return 0, io.ErrUnexpectedEOF
	}
	if f.mem {
		return copy(p, f.data[off:]), nil
	}
	n, err := f.r.ReadAt(p, int64(off))
	if n == len(p) {
		return n, nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// read returns the n bytes at file offset off: a subslice for NewBytes,
// else a fresh buffer. The caller has checked the range against the file
// size (reading past it fails with io.ErrUnexpectedEOF).
func (f *File) read(off, n uint64) ([]byte, error) {
	if off > f.size || n > f.size-off {
		return nil, io.ErrUnexpectedEOF
	}
	if f.mem {
		return f.data[off : off+n : off+n], nil
	}
	p := make([]byte, n)
	if _, err := f.readInto(p, off); err != nil {
		return nil, err
	}
	return p, nil
}

// source is what readProgs reads from: a File, or a bare io.ReaderAt
// whose size may be unknown.
type source interface {
	read(off, n uint64) ([]byte, error)
	fileSize() (uint64, bool)
}

func (f *File) fileSize() (uint64, bool) { return f.size, true }

type readerSource struct {
	r    io.ReaderAt
	size int64 // < 0: unknown
}

func (s readerSource) fileSize() (uint64, bool) { return uint64(s.size), s.size >= 0 }

func (s readerSource) read(off, n uint64) ([]byte, error) {
	if size, ok := s.fileSize(); ok && (off > size || n > size-off) {
		return nil, io.ErrUnexpectedEOF
	}
	if off > 1<<63-1 || n > 1<<63-1-off {
		return nil, io.ErrUnexpectedEOF
	}
	p := make([]byte, n)
	m, err := s.r.ReadAt(p, int64(off))
	if m == len(p) {
		return p, nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return nil, fmt.Errorf("read %d of %d bytes: %w", m, n, err)
}

// ReadProgs reads the program header table that h describes from r, an
// ELF file of size bytes (size < 0 when unknown, as for an image in
// another process's memory: reads are then bounded by max alone). With
// e_phnum PN_XNUM the count is section header 0's sh_info. At most max
// headers are read; more is an error. Errors are *formaterr.Error
// (Source "ELF header": e_phentsize not the class's size, e_phnum above
// max, e_shoff or e_shentsize not giving a section header 0 for PN_XNUM,
// e_phoff when the table does not fit in the file or a read comes back
// short: "truncated"); an error of r other than io.EOF is returned
// wrapped. Cost: one read (two for PN_XNUM); allocates the result, at most
// max headers.
func (h *Header) ReadProgs(r io.ReaderAt, size int64, max int) ([]elf.ProgHeader, error) {
	return h.readProgs(readerSource{r, size}, max)
}

// readProgs is ReadProgs on src; max < 0 means no bound but the file size.
func (h *Header) readProgs(src source, max int) ([]elf.ProgHeader, error) {
	L := h.layout()
	n := uint64(h.Phnum)
	if h.Phnum == PN_XNUM {
		s0, err := h.section0(src, "e_phnum is PN_XNUM")
		if err != nil {
			return nil, err
		}
		n = uint64(s0.Info)
	}
	if n == 0 {
		return nil, nil
	}
	if max >= 0 && n > uint64(max) {
		return nil, formatErr("ELF header", L.phnum, "e_phnum", "%d program headers, more than %d", n, max)
	}
	ent := uint64(h.ProgHeaderSize())
	if uint64(h.Phentsize) != ent {
		return nil, formatErr("ELF header", L.phentsize, "e_phentsize", "%d, want %d", h.Phentsize, ent)
	}
	if size, ok := src.fileSize(); ok && (h.Phoff > size || n > (size-h.Phoff)/ent) {
		return nil, formatErr("ELF header", L.phoff, "e_phoff",
			"%d program headers of %d bytes at %#x do not fit in the file (%d bytes): truncated file?", n, ent, h.Phoff, size)
	}
	if h.Phoff > 1<<62 || n*ent > 1<<62-h.Phoff {
		return nil, formatErr("ELF header", L.phoff, "e_phoff", "%d program headers of %d bytes at %#x: out of range", n, ent, h.Phoff)
	}
	tab, err := src.read(h.Phoff, n*ent)
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, formatErr("ELF header", L.phoff, "e_phoff",
				"%d program headers of %d bytes at %#x: %v: truncated file?", n, ent, h.Phoff, err)
		}
		return nil, fmt.Errorf("elfobj: reading the program headers at %#x: %w", h.Phoff, err)
	}
	progs := make([]elf.ProgHeader, n)
	for i := range progs {
		h.DecodeProgInto(&progs[i], tab[uint64(i)*ent:])
	}
	return progs, nil
}

// section0 reads section header 0, where the extended numbering escapes
// keep the real counts; why names the escape for errors.
func (h *Header) section0(src source, why string) (elf.SectionHeader, error) {
	L := h.layout()
	ent := uint64(h.SectionHeaderSize())
	if h.Shoff == 0 {
		return elf.SectionHeader{}, formatErr("ELF header", L.shoff, "e_shoff", "no section header table (e_shoff 0), but %s: the count is in section header 0", why)
	}
	if uint64(h.Shentsize) != ent {
		return elf.SectionHeader{}, formatErr("ELF header", L.shentsize, "e_shentsize", "%d, want %d (%s: the count is in section header 0)", h.Shentsize, ent, why)
	}
	if size, ok := src.fileSize(); ok && (h.Shoff > size || size-h.Shoff < ent) {
		return elf.SectionHeader{}, formatErr("ELF header", L.shoff, "e_shoff",
			"section header 0 at %#x is beyond the end of the file (%d bytes): truncated file?", h.Shoff, size)
	}
	b, err := src.read(h.Shoff, ent)
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return elf.SectionHeader{}, formatErr("ELF header", L.shoff, "e_shoff", "section header 0 at %#x: %v: truncated file?", h.Shoff, err)
		}
		return elf.SectionHeader{}, fmt.Errorf("elfobj: reading section header 0 at %#x: %w", h.Shoff, err)
	}
	s, _ := h.DecodeSection(b)
	return s, nil
}

func sectionLabel(i uint64) string { return fmt.Sprintf("section header %d", i) }

func (f *File) readSections() error {
	h := &f.Header
	L := h.layout()
	c := h.cls()
	if h.Shoff == 0 {
		if h.Shnum != 0 {
			return formatErr("ELF header", L.shnum, "e_shnum", "%d sections but e_shoff is 0", h.Shnum)
		}
		return nil
	}
	ent := uint64(h.SectionHeaderSize())
	if uint64(h.Shentsize) != ent {
		return formatErr("ELF header", L.shentsize, "e_shentsize", "is %d, want %d", h.Shentsize, ent)
	}
	n, strndx := uint64(h.Shnum), uint64(h.Shstrndx)
	if n == 0 || strndx == uint64(elf.SHN_XINDEX) {
		why := "e_shnum is 0"
		if n != 0 {
			why = "e_shstrndx is SHN_XINDEX"
		}
		s0, err := h.section0(f, why)
		if err != nil {
			return err
		}
		if n == 0 {
			n = s0.Size
		}
		if strndx == uint64(elf.SHN_XINDEX) {
			strndx = uint64(s0.Link)
		}
	}
	if h.Shoff > f.size || n > (f.size-h.Shoff)/ent {
		return formatErr("ELF header", L.shoff, "e_shoff", "section header table [%#x, +%d×%d) runs past end of file (%#x bytes)", h.Shoff, n, ent, f.size)
	}
	if n == 0 {
		return nil
	}
	if strndx >= n {
		return formatErr("ELF header", L.shstrndx, "e_shstrndx", "index %d not below the %d sections", strndx, n)
	}
	tab, err := f.read(h.Shoff, n*ent)
	if err != nil {
		return fmt.Errorf("elfobj: reading the section headers at %#x: %w", h.Shoff, err)
	}
	secs := make([]elf.SectionHeader, n)
	names := make([]uint32, n)
	for i := range secs {
		at := h.Shoff + uint64(i)*ent
		s, name := h.DecodeSection(tab[uint64(i)*ent:])
		if s.Type != elf.SHT_NOBITS {
			switch {
			case s.Offset > f.size:
				return formatErr(sectionLabel(uint64(i)), at+secOffset[c], "sh_offset", "offset %#x past end of file (%#x bytes)", s.Offset, f.size)
			case s.Size > f.size-s.Offset:
				return formatErr(sectionLabel(uint64(i)), at+secSize[c], "sh_size", "section [%#x, +%#x) runs past end of file (%#x bytes)", s.Offset, s.Size, f.size)
			}
		}
		secs[i], names[i] = s, name
	}
	if strndx != 0 {
		st := &secs[strndx]
		if st.Type != elf.SHT_STRTAB {
			return formatErr(sectionLabel(strndx), h.Shoff+strndx*ent+secType[c], "sh_type",
				"e_shstrndx names a section of type %v, not SHT_STRTAB", st.Type)
		}
		strs, err := f.read(st.Offset, st.Size)
		if err != nil {
			return fmt.Errorf("elfobj: reading the section name table at %#x: %w", st.Offset, err)
		}
		for i := range secs {
			at := h.Shoff + uint64(i)*ent
			name := uint64(names[i])
			if name >= uint64(len(strs)) {
				return formatErr(sectionLabel(uint64(i)), at, "sh_name", "name offset %#x outside the section name table (%#x bytes)", name, len(strs))
			}
			end := bytes.IndexByte(strs[name:], 0)
			if end < 0 {
				return formatErr(sectionLabel(uint64(i)), at, "sh_name", "name at offset %#x of the section name table is not NUL-terminated", name)
			}
			secs[i].Name = string(strs[name : name+uint64(end)])
		}
	}
	f.Sections, f.shstrndx = secs, int(strndx)
	for i := range secs {
		s := &secs[i]
		if s.Type == elf.SHT_NOBITS {
			continue
		}
		if s.Flags&elf.SHF_COMPRESSED == 0 {
			if strings.HasPrefix(s.Name, ".zdebug") && s.FileSize >= 12 {
				b, err := f.read(s.Offset, 12)
				if err != nil {
					return fmt.Errorf("elfobj: reading the header of %s: %w", f.secName(i), err)
				}
				if string(b[:4]) == "ZLIB" {
					s.Size = binary.BigEndian.Uint64(b[4:])
				}
			}
			continue
		}
		hs := uint64(h.ChdrSize())
		if s.FileSize < hs {
			return formatErr(f.secName(i), s.Offset, "Elf_Chdr", "SHF_COMPRESSED section of %d bytes, shorter than the %d-byte compression header", s.FileSize, hs)
		}
		b, err := f.read(s.Offset, hs)
		if err != nil {
			return fmt.Errorf("elfobj: reading the compression header of %s: %w", f.secName(i), err)
		}
		ch := h.DecodeChdr(b)
		s.Size, s.Addralign = ch.Size, ch.Addralign
	}
	return nil
}

// secName names section i for errors: its name, else "section N".
func (f *File) secName(i int) string {
	if i >= 0 && i < len(f.Sections) && f.Sections[i].Name != "" {
		return f.Sections[i].Name
	}
	return fmt.Sprintf("section %d", i)
}

// SectionHeaderOffset returns the file offset of section header i (e_shoff
// + i × e_shentsize), for tools that patch headers in place.
func (f *File) SectionHeaderOffset(i int) uint64 {
	return f.Shoff + uint64(i)*uint64(f.Shentsize)
}

// ProgHeaderOffset returns the file offset of program header i (e_phoff +
// i × e_phentsize), for tools that patch headers in place.
func (f *File) ProgHeaderOffset(i int) uint64 {
	return f.Phoff + uint64(i)*uint64(f.Phentsize)
}

// FindSection returns the index of the first section named name, or -1.
// Cost: a linear scan; no allocation.
func (f *File) FindSection(name string) int {
	for i := range f.Sections {
		if f.Sections[i].Name == name {
			return i
		}
	}
	return -1
}

// FindSectionType returns the index of the first section of type t, or
// -1. Cost: a linear scan; no allocation.
func (f *File) FindSectionType(t elf.SectionType) int {
	for i := range f.Sections {
		if f.Sections[i].Type == t {
			return i
		}
	}
	return -1
}

func (f *File) section(i int) (*elf.SectionHeader, error) {
	if i < 0 || i >= len(f.Sections) {
		return nil, fmt.Errorf("elfobj: section index %d out of range (%d sections)", i, len(f.Sections))
	}
	return &f.Sections[i], nil
}

// Raw returns the bytes of section i as stored in the file,
// [sh_offset, sh_offset+FileSize) (still compressed for a compressed
// section); nil for SHT_NOBITS. For a File from [NewBytes] it is a
// subslice of the file's bytes (do not modify it), otherwise a fresh
// buffer. Errors: an index out of range, or r's error. Cost: one read of
// the section (none for NewBytes).
func (f *File) Raw(i int) ([]byte, error) {
	s, err := f.section(i)
	if err != nil || s.Type == elf.SHT_NOBITS {
		return nil, err
	}
	p, err := f.read(s.Offset, s.FileSize)
	if err != nil {
		return nil, fmt.Errorf("elfobj: reading %s: %w", f.secName(i), err)
	}
	return p, nil
}

// SectionReader returns a reader of the bytes of section i as stored in the
// file (compressed for a compressed section; empty for SHT_NOBITS), with
// its own offset. It panics when i is out of range. Cost: constant.
func (f *File) SectionReader(i int) *io.SectionReader {
	s := &f.Sections[i]
	if s.Type == elf.SHT_NOBITS {
		return io.NewSectionReader(f.r, 0, 0)
	}
	return io.NewSectionReader(f.r, int64(s.Offset), int64(s.FileSize))
}

// ProgData returns the bytes of segment i in the file, [p_offset,
// p_offset+p_filesz): a subslice for a File from [NewBytes], otherwise a
// fresh buffer. Errors: an index out of range, a *formaterr.Error
// (Source "program header N", Field p_offset or p_filesz) when the
// segment does not lie inside the file, or r's error. Cost: one read of
// the segment (none for NewBytes).
func (f *File) ProgData(i int) ([]byte, error) {
	if i < 0 || i >= len(f.Progs) {
		return nil, fmt.Errorf("elfobj: program header index %d out of range (%d program headers)", i, len(f.Progs))
	}
	p := &f.Progs[i]
	at := f.ProgHeaderOffset(i)
	c := f.cls()
	label := fmt.Sprintf("program header %d", i)
	switch {
	case p.Off > f.size:
		return nil, formatErr(label, at+progOffset[c], "p_offset", "offset %#x past end of file (%#x bytes)", p.Off, f.size)
	case p.Filesz > f.size-p.Off:
		return nil, formatErr(label, at+progFilesz[c], "p_filesz", "segment [%#x, +%#x) runs past end of file (%#x bytes)", p.Off, p.Filesz, f.size)
	}
	b, err := f.read(p.Off, p.Filesz)
	if err != nil {
		return nil, fmt.Errorf("elfobj: reading %s: %w", label, err)
	}
	return b, nil
}
