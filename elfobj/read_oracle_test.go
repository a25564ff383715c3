package elfobj

import (
	"bytes"
	"compress/zlib"
	"io"

	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/klauspost/compress/zstd"
	"slices"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/dwarf"
)

// The oracle of this package's tests is debug/elf, an independent reader:
// on the same bytes both must see the same headers, sections, program
// headers, symbols and section contents. Where this reader is stricter
// (documented in NewFile), its refusal must be justified by what debug/elf
// decoded.

// maxCompared bounds the section bytes compared per file, so that the
// real-file tests stay fast.
const maxCompared = 1 << 20

// compareFile checks f against ef, both read from data, and returns the
// first difference.
func compareFile(f *File, ef *elf.File, data []byte) error {
	if f.Class != ef.Class || f.Header.Data != ef.Data || f.Version != ef.Version || f.OSABI != ef.OSABI ||
		f.ABIVersion != ef.ABIVersion || f.Type != ef.Type || f.Machine != ef.Machine || f.Entry != ef.Entry ||
		f.ByteOrder != ef.ByteOrder {
		return fmt.Errorf("header %+v, debug/elf %+v", f.Header.FileHeader, ef.FileHeader)
	}
	if len(f.Progs) != len(ef.Progs) {
		return fmt.Errorf("%d program headers, debug/elf %d", len(f.Progs), len(ef.Progs))
	}
	for i, p := range ef.Progs {
		if f.Progs[i] != p.ProgHeader {
			return fmt.Errorf("program header %d: %+v, debug/elf %+v", i, f.Progs[i], p.ProgHeader)
		}
	}
	if len(f.Sections) != len(ef.Sections) {
		return fmt.Errorf("%d sections, debug/elf %d", len(f.Sections), len(ef.Sections))
	}
	compared := 0
	for i, s := range ef.Sections {
		if strings.HasPrefix(s.Name, ".zdebug") {
			s.Open() // debug/elf learns a .zdebug_ section's size from its header here
		}
		wantHdr := s.SectionHeader
		if s.Type == elf.SHT_NOBITS && s.Flags&elf.SHF_COMPRESSED != 0 {
			// debug/elf reads a compression header from the file for a
			// section that has no bytes in it; this reader does not.
			wantHdr.Size, wantHdr.Addralign = f.Sections[i].Size, f.Sections[i].Addralign
		}
		if f.Sections[i] != wantHdr {
			return fmt.Errorf("section %d: %+v, debug/elf %+v", i, f.Sections[i], s.SectionHeader)
		}
		if s.Type == elf.SHT_NOBITS || compared+int(s.Size) > maxCompared {
			continue
		}
		want, werr := s.Data()
		got, err := f.SectionData(i)
		if werr != nil {
			// debug/elf refuses what it cannot inflate; so must we,
			// except a .zdebug_ section without its header, which
			// debug/elf returns as is and this reader refuses.
			if err == nil && !(len(want) == int(s.FileSize) && s.Flags&elf.SHF_COMPRESSED == 0) {
				return fmt.Errorf("section %d (%s): read %d bytes, debug/elf: %v", i, s.Name, len(got), werr)
			}
			continue
		}
		compared += len(want)
		if err != nil {
			var fe *dwarf.FormatError
			if errors.As(err, &fe) && fe.Field == "ZLIB header" && (len(want) < 12 || !bytes.HasPrefix(want, []byte("ZLIB"))) {
				continue // documented: a .zdebug_ section must start with "ZLIB"
			}
			if n, ierr := inflatedSize(f, i); errors.As(err, &fe) && (fe.Field == "ch_size" || fe.Field == "compressed data") &&
				uint64(len(want)) == s.Size && (n > s.Size || ierr != nil) {
				// debug/elf stops reading at ch_size: it accepts a stream
				// that goes on, or whose end (the checksum) is corrupt;
				// this reader refuses both.
				continue
			}
			if errors.As(err, &fe) && s.Size == 0 && len(want) == 0 {
				continue // debug/elf reads nothing of an empty section, not even its compression type
			}
			return fmt.Errorf("section %d (%s): %v; debug/elf read %d bytes", i, s.Name, err, len(want))
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("section %d (%s): %d bytes differ from debug/elf's %d", i, s.Name, len(got), len(want))
		}
		if raw, err := f.Raw(i); err != nil || uint64(len(raw)) != s.FileSize {
			return fmt.Errorf("section %d (%s): Raw %d bytes, %v; want %d", i, s.Name, len(raw), err, s.FileSize)
		} else if f.mem && s.FileSize > 0 && &raw[0] != &data[s.Offset] {
			return fmt.Errorf("section %d (%s): Raw copied the mapped bytes", i, s.Name)
		}
	}
	for _, typ := range []elf.SectionType{elf.SHT_SYMTAB, elf.SHT_DYNSYM} {
		if err := compareSymbols(f, ef, typ); err != nil {
			return err
		}
	}
	for i, s := range ef.Sections {
		if s.Type != elf.SHT_NOTE || s.Flags&elf.SHF_COMPRESSED != 0 {
			continue
		}
		b, err := s.Data()
		if err != nil {
			continue
		}
		if err := compareNotes(f, i, b, s.Offset, s.Addralign, ef.ByteOrder); err != nil {
			return err
		}
	}
	return nil
}

func compareSymbols(f *File, ef *elf.File, typ elf.SectionType) error {
	var want []elf.Symbol
	var werr error
	if typ == elf.SHT_SYMTAB {
		want, werr = ef.Symbols()
	} else {
		want, werr = ef.DynamicSymbols()
	}
	t, err := f.SymbolsOfType(typ)
	switch {
	case errors.Is(werr, elf.ErrNoSymbols):
		// debug/elf also says so for a table holding only symbol 0.
		if err == nil && t.Len() > 1 {
			return fmt.Errorf("%v: %d symbols, debug/elf: none", typ, t.Len())
		}
		return nil
	case werr != nil:
		if err == nil && t.Len() > 1 {
			// debug/elf refuses a missing or bad string table (sh_link)
			// before reading names; this reader reports names one by one.
			for i := 1; i < t.Len(); i++ {
				if _, err := t.Name(i); err != nil {
					return nil
				}
			}
			return fmt.Errorf("%v: %d symbols, debug/elf: %v", typ, t.Len(), werr)
		}
		return nil
	case err != nil:
		compressed := func(j int) bool {
			return j >= 0 && j < len(f.Sections) && (f.Sections[j].Flags&elf.SHF_COMPRESSED != 0 || strings.HasPrefix(f.Sections[j].Name, ".zdebug"))
		}
		if i := f.FindSectionType(typ); compressed(i) || compressed(int(f.Sections[i].Link)) {
			return nil // a decompression refusal, which compareFile judged
		}
		return fmt.Errorf("%v: %v; debug/elf read %d symbols", typ, err, len(want))
	}
	if t.Len() != len(want)+1 {
		return fmt.Errorf("%v: %d symbols, debug/elf %d (and symbol 0)", typ, t.Len(), len(want))
	}
	for i, w := range want {
		s := t.Sym(i + 1)
		sec := s.Section
		name, err := t.Name(i + 1)
		if err != nil {
			// debug/elf gives "" for a name it cannot read.
			name = ""
		}
		if name != w.Name || s.Info != w.Info || s.Other != w.Other || sec != w.Section || s.Value != w.Value || s.Size != w.Size {
			return fmt.Errorf("%v symbol %d: %+v %q, debug/elf %+v", typ, i+1, s, name, w)
		}
	}
	return nil
}

// compareNotes checks the notes of section i against an independent walk
// of the section's bytes b.
func compareNotes(f *File, i int, b []byte, off, align uint64, order binary.ByteOrder) error {
	r, err := f.SectionNotes(i)
	if err != nil {
		return fmt.Errorf("notes of section %d: %v", i, err)
	}
	a := uint64(4)
	if align == 8 {
		a = 8
	}
	pad := func(n uint64) uint64 { return (n + a - 1) / a * a }
	for pos := uint64(0); ; {
		n, ok := r.Next()
		rest := uint64(len(b)) - pos
		if rest == 0 {
			if ok || r.Err() != nil {
				return fmt.Errorf("notes of section %d: past the end: %v, %v", i, ok, r.Err())
			}
			return nil
		}
		bad := rest < 12
		var namesz, descsz, dOff uint64
		if !bad {
			namesz, descsz = uint64(order.Uint32(b[pos:])), uint64(order.Uint32(b[pos+4:]))
			dOff = pad(12 + namesz) // gABI: the descriptor is aligned from the note's start
			bad = namesz > rest-12 || dOff > rest || descsz > rest-dOff
		}
		if bad {
			if ok || r.Err() == nil {
				return fmt.Errorf("notes of section %d: malformed note at %#x read as %+v", i, off+pos, n)
			}
			return nil
		}
		if !ok {
			return fmt.Errorf("notes of section %d: note at %#x refused: %v", i, off+pos, r.Err())
		}
		name := bytes.TrimRight(b[pos+12:pos+12+namesz], "\x00")
		desc := b[pos+dOff : pos+dOff+descsz]
		if !bytes.Equal(n.Name, name) || n.Type != elf.NType(order.Uint32(b[pos+8:])) || !bytes.Equal(n.Desc, desc) || n.Offset != off+pos {
			return fmt.Errorf("note of section %d at %#x: %q %d %x at %#x, want %q %x", i, off+pos, n.Name, n.Type, n.Desc, n.Offset, name, desc)
		}
		pos = min(uint64(len(b)), pos+pad(dOff+descsz))
	}
}

// justifyRefusal checks that err, this reader's refusal of data which
// debug/elf read as ef, is one of the documented stricter rules and that
// ef's view of the file bears it out.
func justifyRefusal(err error, ef *elf.File, data []byte) error {
	var fe *dwarf.FormatError
	if !errors.As(err, &fe) {
		return fmt.Errorf("error %v (%T) is not a *dwarf.FormatError", err, err)
	}
	h, herr := DecodeHeader(data)
	if herr != nil {
		return fmt.Errorf("debug/elf read a file whose header is refused: %v", herr)
	}
	size := uint64(len(data))
	var n int
	switch {
	case fe.Section == "ELF header" && fe.Field == "e_phentsize":
		if h.Phentsize != uint16(h.ProgHeaderSize()) {
			return nil // debug/elf takes larger entries
		}
	case fe.Section == "ELF header" && fe.Field == "e_shentsize":
		if h.Shentsize != uint16(h.SectionHeaderSize()) {
			return nil
		}
	case fe.Section == "ELF header" && (fe.Field == "e_phnum" || fe.Field == "e_shoff" || fe.Field == "e_phoff") && h.Phnum == PN_XNUM:
		return nil // debug/elf does not know PN_XNUM
	case fe.Section == "ELF header" && (fe.Field == "e_shoff" || fe.Field == "e_shstrndx" || fe.Field == "e_shnum"):
		// The escapes, which debug/elf resolves differently (only with
		// e_shnum 0), or a table that debug/elf reads short.
		if h.Shnum == 0 || h.Shstrndx == uint16(elf.SHN_XINDEX) {
			return nil
		}
	case fscan(fe.Section, "section header %d", &n) && (fe.Field == "sh_offset" || fe.Field == "sh_size"):
		if n < len(ef.Sections) {
			s := ef.Sections[n]
			if s.Offset > size || s.FileSize > size-s.Offset {
				return nil // debug/elf does not check sections against the file size
			}
		}
	case fscan(fe.Section, "section header %d", &n) && (fe.Field == "sh_name" || fe.Field == "sh_type"):
		if h.Shstrndx == uint16(elf.SHN_XINDEX) || h.Shnum == 0 {
			return nil // another name table than debug/elf's
		}
	}
	return fmt.Errorf("refused what debug/elf reads: %v", err)
}

func fscan(s, format string, n *int) bool {
	_, err := fmt.Sscanf(s, format, n)
	return err == nil
}

// checkOracle reads data with NewBytes and NewFile and with debug/elf, and
// fails t on any difference.
func checkOracle(t testing.TB, name string, data []byte) {
	t.Helper()
	ef, eerr := elf.NewFile(bytes.NewReader(data))
	for _, mem := range []bool{true, false} {
		var f *File
		var err error
		if mem {
			f, err = NewBytes(data)
		} else {
			f, err = NewFile(bytes.NewReader(data), int64(len(data)))
		}
		switch {
		case err != nil && eerr != nil:
			var fe *dwarf.FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("%s: error %v (%T) is not a *dwarf.FormatError", name, err, err)
			}
		case err != nil:
			if jerr := justifyRefusal(err, ef, data); jerr != nil {
				t.Fatalf("%s (mem %v): %v", name, mem, jerr)
			}
		case eerr != nil:
			// debug/elf refuses some files this reader reads (the
			// escapes, e_shstrndx 0 with sections); nothing to compare.
		default:
			if cerr := compareFile(f, ef, data); cerr != nil {
				t.Fatalf("%s (mem %v): %v", name, mem, cerr)
			}
		}
	}
}

// sortedKeys is for stable test output.
func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// inflatedSize decompresses section i of f with compress/zlib or zstd
// directly (not through the reader's inflate) and returns the stream's
// whole length and the error that ended it (for a section that is not
// compressed: 0 and an error).
func inflatedSize(f *File, i int) (uint64, error) {
	raw, err := f.Raw(i)
	if err != nil {
		return 0, err
	}
	s := f.Sections[i]
	var kind elf.CompressionType
	switch {
	case s.Flags&elf.SHF_COMPRESSED != 0:
		kind = elf.CompressionType(f.ByteOrder.Uint32(raw))
		raw = raw[f.ChdrSize():]
	case strings.HasPrefix(s.Name, ".zdebug") && len(raw) >= 12:
		kind, raw = elf.COMPRESS_ZLIB, raw[12:]
	default:
		return 0, errors.New("not compressed")
	}
	var r io.Reader
	switch kind {
	case elf.COMPRESS_ZLIB:
		zr, err := zlib.NewReader(bytes.NewReader(raw))
		if err != nil {
			return 0, err
		}
		r = zr
	case elf.COMPRESS_ZSTD:
		zr, err := zstd.NewReader(bytes.NewReader(raw))
		if err != nil {
			return 0, err
		}
		defer zr.Close()
		r = zr
	default:
		return 0, errors.New("unknown compression")
	}
	n, err := io.Copy(io.Discard, io.LimitReader(r, MaxDecompressed+1))
	return uint64(n), err
}
