package elfobj

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
)

// Note is one note (gABI "Note Section"): owner name, type and
// descriptor. Name and Desc alias the bytes the [NoteReader] reads.
type Note struct {
	// Name is the owner's name without its terminating NUL bytes
	// ("GNU", "CORE", "LINUX", "Go").
	Name []byte
	Type elf.NType // n_type
	Desc []byte
	// Offset is the offset of the note header, DescOffset that of the
	// descriptor: the reader's base plus their place in its bytes (file
	// offsets for a [File]'s notes).
	Offset, DescOffset uint64
}

// NoteReader iterates over the notes of one SHT_NOTE section or PT_NOTE
// segment without allocating: each note is a header (n_namesz, n_descsz,
// n_type, 4 bytes each in the file's byte order), the name and the
// descriptor, each padded to the alignment (4, or 8 for sections and
// segments aligned to 8, as .note.gnu.property is). The padding after the
// last descriptor may be missing. Use it as
//
//	for n, ok := r.Next(); ok; n, ok = r.Next() { ... }
//	if err := r.Err(); err != nil { ... }
type NoteReader struct {
	b       []byte
	base    uint64
	pos     uint64
	align   uint64
	section string
	err     error
	big     bool // ELFDATA2MSB
}

// NewNoteReader returns a reader of the notes in b, whose first byte is at
// offset base (for errors and [Note].Offset), in the byte order of data,
// aligned to align bytes (8 when align is 8, else 4). section names b in
// errors ("PT_NOTE", ".note.gnu.build-id"). A data encoding other than
// ELFDATA2LSB/MSB is reported by the first Next. Cost: constant.
func NewNoteReader(b []byte, base uint64, data elf.Data, align uint64, section string) NoteReader {
	r := NoteReader{b: b, base: base, align: 4, section: section}
	switch data {
	case elf.ELFDATA2LSB:
	case elf.ELFDATA2MSB:
		r.big = true
	default:
		r.err = formatErr(section, base, "e_ident[EI_DATA]", "unknown data encoding %v", data)
	}
	if align == 8 {
		r.align = 8
	}
	return r
}

// Next returns the next note, or false at the end of the bytes or at the
// first malformed note (then [NoteReader.Err] says what). Errors are
// *formaterr.Error with the reader's section name, Offset the base plus
// the field's place: Field "note header" for fewer than 12 bytes left,
// "n_namesz" or "n_descsz" for a name or descriptor running past the end.
// Cost: constant; no allocation.
func (r *NoteReader) Next() (Note, bool) {
	n := uint64(len(r.b))
	if r.err != nil || r.pos >= n {
		return Note{}, false
	}
	at := r.pos
	if n-at < noteHdrSize {
		r.err = formatErr(r.section, r.base+at, "note header", "truncated note header (%d bytes left, %d needed)", n-at, noteHdrSize)
		return Note{}, false
	}
	hdr := r.b[at : at+noteHdrSize]
	le := binary.LittleEndian
	namesz, descsz, typ := uint64(le.Uint32(hdr)), uint64(le.Uint32(hdr[4:])), elf.NType(le.Uint32(hdr[8:]))
	if r.big {
		be := binary.BigEndian
		namesz, descsz, typ = uint64(be.Uint32(hdr)), uint64(be.Uint32(hdr[4:])), elf.NType(be.Uint32(hdr[8:]))
	}
	off := at + noteHdrSize
	if namesz > n-off {
		r.err = formatErr(r.section, r.base+at, "n_namesz", "note name of %d bytes runs past the end of %s (%d bytes left)", namesz, r.section, n-off)
		return Note{}, false
	}
	name := r.b[off : off+namesz : off+namesz]
	// The descriptor starts at the next multiple of the alignment after
	// the name, counted from the start of the notes (with 8-byte
	// alignment a 4-byte name "GNU" after the 12-byte header needs no
	// padding: the descriptor is at 16).
	off = (off + namesz + r.align - 1) &^ (r.align - 1) // off + namesz <= n: no overflow
	if off > n || descsz > n-off {
		r.err = formatErr(r.section, r.base+at+4, "n_descsz", "note descriptor of %d bytes (type %#x) runs past the end of %s", descsz, typ, r.section)
		return Note{}, false
	}
	desc := r.b[off : off+descsz : off+descsz]
	next := (off + descsz + r.align - 1) &^ (r.align - 1)
	r.pos = min(next, n) // the last note's padding may be missing
	return Note{Name: bytes.TrimRight(name, "\x00"), Type: typ, Desc: desc, Offset: r.base + at, DescOffset: r.base + off}, true
}

// Err returns the error that ended the iteration, or nil.
func (r *NoteReader) Err() error { return r.err }

// SectionNotes returns a reader of the notes of section i (of type
// SHT_NOTE; its data as [File.SectionData] returns it, alignment from
// sh_addralign). Errors: another section type (a *formaterr.Error on
// sh_type), and those of SectionData.
func (f *File) SectionNotes(i int) (NoteReader, error) {
	s, err := f.section(i)
	if err != nil {
		return NoteReader{}, err
	}
	if s.Type != elf.SHT_NOTE {
		return NoteReader{}, formatErr(f.secName(i), f.SectionHeaderOffset(i)+secType[f.cls()], "sh_type", "section of type %v holds no notes", s.Type)
	}
	b, err := f.SectionData(i)
	if err != nil {
		return NoteReader{}, err
	}
	return NewNoteReader(b, s.Offset, f.Header.Data, s.Addralign, f.secName(i)), nil
}

// ProgNotes returns a reader of the notes of segment i (of type PT_NOTE;
// its bytes as [File.ProgData] returns them, alignment from p_align).
// Errors: another segment type (a *formaterr.Error on p_type), and those
// of ProgData.
func (f *File) ProgNotes(i int) (NoteReader, error) {
	if i < 0 || i >= len(f.Progs) {
		return NoteReader{}, fmt.Errorf("elfobj: program header index %d out of range (%d program headers)", i, len(f.Progs))
	}
	p := &f.Progs[i]
	label := fmt.Sprintf("program header %d", i)
	if p.Type != elf.PT_NOTE {
		return NoteReader{}, formatErr(label, f.ProgHeaderOffset(i), "p_type", "segment of type %v holds no notes", p.Type)
	}
	b, err := f.ProgData(i)
	if err != nil {
		return NoteReader{}, err
	}
	return NewNoteReader(b, p.Off, f.Header.Data, p.Align, "PT_NOTE"), nil
}

// BuildID returns the descriptor of the file's first NT_GNU_BUILD_ID note
// of owner "GNU" (its build ID: 20 bytes for the SHA-1 that ld
// --build-id writes), searched in the SHT_NOTE sections, then, when the
// file has no section headers, in the PT_NOTE segments. It returns nil
// and no error when there is none. Errors: those of the note readers (a
// malformed note before the build ID). Cost: reads the note sections.
func (f *File) BuildID() ([]byte, error) {
	for i := range f.Sections {
		if f.Sections[i].Type != elf.SHT_NOTE {
			continue
		}
		r, err := f.SectionNotes(i)
		if err != nil {
			return nil, err
		}
		if id, err := buildID(&r); id != nil || err != nil {
			return id, err
		}
	}
	if len(f.Sections) > 0 {
		return nil, nil
	}
	for i := range f.Progs {
		if f.Progs[i].Type != elf.PT_NOTE {
			continue
		}
		r, err := f.ProgNotes(i)
		if err != nil {
			return nil, err
		}
		if id, err := buildID(&r); id != nil || err != nil {
			return id, err
		}
	}
	return nil, nil
}

func buildID(r *NoteReader) ([]byte, error) {
	for n, ok := r.Next(); ok; n, ok = r.Next() {
		if n.Type == NT_GNU_BUILD_ID && string(n.Name) == "GNU" {
			return n.Desc, nil
		}
	}
	return nil, r.Err()
}
