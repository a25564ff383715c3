package elfobj

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// TestReadExtendedNumbering: an object with 66,000 sections, as GNU as writes
// it (e_shnum 0 with the count in section 0's sh_size, e_shstrndx
// SHN_XINDEX with the index in its sh_link, symbols in sections above
// SHN_LORESERVE through SHT_SYMTAB_SHNDX), reads as debug/elf reads it,
// and every symbol's section is resolved to the section of its name.
func TestReadExtendedNumbering(t *testing.T) {
	as := tooltest.Require(t, "as")
	const n = 66000
	var src strings.Builder
	for i := range n {
		fmt.Fprintf(&src, "\t.section .t%d,\"ax\",@progbits\n\t.globl f%d\nf%d:\n\tret\n", i, i, i)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "many.s"), []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	obj := filepath.Join(dir, "many.o")
	if out, err := exec.Command(as, "-o", obj, filepath.Join(dir, "many.s")).CombinedOutput(); err != nil {
		t.Fatalf("as: %v\n%s", err, out)
	}
	data, err := os.ReadFile(obj)
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	if f.Shnum != 0 || f.Shstrndx != uint16(elf.SHN_XINDEX) || len(f.Sections) < n {
		t.Fatalf("e_shnum %d, e_shstrndx %#x, %d sections: not the escapes this test is about", f.Shnum, f.Shstrndx, len(f.Sections))
	}
	if f.FindSectionType(elf.SHT_SYMTAB_SHNDX) < 0 {
		t.Fatal("no SHT_SYMTAB_SHNDX section")
	}
	checkOracle(t, obj, data)
	st, err := f.SymbolsOfType(elf.SHT_SYMTAB)
	if err != nil {
		t.Fatal(err)
	}
	found, escaped := 0, 0
	for i := 1; i < st.Len(); i++ {
		name, err := st.Name(i)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(name, "f") {
			continue
		}
		sec, ok := st.SectionOf(i)
		if !ok || sec >= len(f.Sections) || f.Sections[sec].Name != ".t"+name[1:] {
			t.Fatalf("symbol %s: section %d, %v", name, sec, ok)
		}
		if st.Sym(i).Section == elf.SHN_XINDEX {
			escaped++
		}
		found++
	}
	if found != n || escaped < n-int(elf.SHN_LORESERVE) {
		t.Errorf("%d symbols resolved, %d through SHT_SYMTAB_SHNDX", found, escaped)
	}
}

// testObject returns the bytes of an object of testdata.
func testObject(t *testing.T, name string) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEscapesPatched: the same file with its counts moved into section
// header 0 (e_shnum 0, e_shstrndx SHN_XINDEX, e_phnum PN_XNUM) reads the
// same, also through NewFile and ReadProgs.
func TestEscapesPatched(t *testing.T) {
	le := binary.LittleEndian
	exe, err := os.ReadFile(filepath.Join(goroot(t), "src/debug/elf/testdata/gcc-amd64-linux-exec"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := NewBytes(exe)
	if err != nil {
		t.Fatal(err)
	}
	b := bytes.Clone(exe)
	sh0 := want.Shoff
	le.PutUint64(b[sh0+32:], uint64(len(want.Sections))) // sh_size
	le.PutUint32(b[sh0+40:], uint32(want.Shstrndx))      // sh_link
	le.PutUint32(b[sh0+44:], uint32(len(want.Progs)))    // sh_info
	le.PutUint16(b[60:], 0)
	le.PutUint16(b[62:], uint16(elf.SHN_XINDEX))
	le.PutUint16(b[56:], PN_XNUM)
	for _, mem := range []bool{true, false} {
		var got *File
		if mem {
			got, err = NewBytes(b)
		} else {
			got, err = NewFile(bytes.NewReader(b), int64(len(b)))
		}
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Progs, want.Progs) || len(got.Sections) != len(want.Sections) {
			t.Fatalf("mem %v: %d program headers, %d sections; want %d, %d", mem, len(got.Progs), len(got.Sections), len(want.Progs), len(want.Sections))
		}
		for i := range want.Sections {
			w := want.Sections[i]
			if i == 0 {
				w.Size, w.Link, w.Info, w.FileSize = uint64(len(want.Sections)), uint32(want.Shstrndx), uint32(len(want.Progs)), uint64(len(want.Sections))
			}
			if got.Sections[i] != w {
				t.Fatalf("mem %v: section %d %+v, want %+v", mem, i, got.Sections[i], w)
			}
		}
	}
	h, err := ReadHeader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	progs, err := h.ReadProgs(bytes.NewReader(b), -1, 100)
	if err != nil || !reflect.DeepEqual(progs, want.Progs) {
		t.Fatalf("ReadProgs: %d headers, %v", len(progs), err)
	}
	if _, err := h.ReadProgs(bytes.NewReader(b), -1, len(want.Progs)-1); !hasField(err, "e_phnum") {
		t.Errorf("ReadProgs above max: %v, want an error on e_phnum", err)
	}
}

func hasField(err error, field string) bool {
	var fe *dwarf.FormatError
	return errors.As(err, &fe) && fe.Field == field
}

// TestHostile: each defect of a valid object gives a *dwarf.FormatError
// naming the structure, the field and its file offset, through NewBytes
// and NewFile (or, for section contents, through the method that reads
// them).
func TestHostile(t *testing.T) {
	le := binary.LittleEndian
	good := testObject(t, "gcc-x86-64-dwarf5.o")
	f, err := NewBytes(good)
	if err != nil {
		t.Fatal(err)
	}
	shdr := func(i int) uint64 { return f.SectionHeaderOffset(i) }
	symtab := f.FindSectionType(elf.SHT_SYMTAB)
	info := f.FindSection(".debug_info")
	rela := f.FindSection(".rela.debug_info")
	strtab := int(f.Sections[symtab].Link)
	put16 := func(off uint64, v uint16) func([]byte) { return func(b []byte) { le.PutUint16(b[off:], v) } }
	put32 := func(off uint64, v uint32) func([]byte) { return func(b []byte) { le.PutUint32(b[off:], v) } }
	put64 := func(off uint64, v uint64) func([]byte) { return func(b []byte) { le.PutUint64(b[off:], v) } }
	type read func(f *File) error
	relocated := func(i int) read { return func(f *File) error { _, err := f.Relocated(i); return err } }
	symbols := func(f *File) error { _, err := f.Symbols(symtab); return err }
	relaEntry := f.Sections[rela].Offset // entry 0
	for _, c := range []struct {
		name    string
		patch   func([]byte)
		cut     int  // keep only the first cut bytes (0: all)
		read    read // nil: NewBytes fails
		section string
		field   string
		off     uint64
	}{
		{"short", nil, 10, nil, "ELF header", "e_ident", 0},
		{"magic", put32(0, 0x464c457e), 0, nil, "ELF header", "e_ident[EI_MAG]", 0},
		{"class", put16(4, 0x0103), 0, nil, "ELF header", "e_ident[EI_CLASS]", 4},
		{"data", put16(4, 0x0302), 0, nil, "ELF header", "e_ident[EI_DATA]", 5},
		{"version", func(b []byte) { b[6] = 2 }, 0, nil, "ELF header", "e_ident[EI_VERSION]", 6},
		{"header cut", nil, 60, nil, "ELF header", "e_ident", 0},
		{"e_shentsize", put16(58, 40), 0, nil, "ELF header", "e_shentsize", 58},
		{"e_shoff 0 with sections", put64(40, 0), 0, nil, "ELF header", "e_shnum", 60},
		{"e_shoff past end", put64(40, 1<<40), 0, nil, "ELF header", "e_shoff", 40},
		{"e_shoff overflow", put64(40, ^uint64(0)-8), 0, nil, "ELF header", "e_shoff", 40},
		{"table cut", nil, int(f.Shoff) + 100, nil, "ELF header", "e_shoff", 40},
		{"e_shnum max", put16(60, 0xfeff), 0, nil, "ELF header", "e_shoff", 40},
		{"e_shstrndx", put16(62, 500), 0, nil, "ELF header", "e_shstrndx", 62},
		{"e_shstrndx not a string table", put16(62, 1), 0, nil, "section header 1", "sh_type", shdr(1) + 4},
		{"sh_offset", put64(shdr(3)+24, 1<<40), 0, nil, "section header 3", "sh_offset", shdr(3) + 24},
		{"sh_size", put64(shdr(3)+32, 1<<40), 0, nil, "section header 3", "sh_size", shdr(3) + 32},
		{"sh_size overflow", put64(shdr(3)+32, ^uint64(0)), 0, nil, "section header 3", "sh_size", shdr(3) + 32},
		{"sh_name", put32(shdr(2), 1<<20), 0, nil, "section header 2", "sh_name", shdr(2)},
		{"e_phnum without e_phentsize", put16(56, 1), 0, nil, "ELF header", "e_phentsize", 54},
		{"PN_XNUM count", func(b []byte) {
			le.PutUint16(b[54:], 56)
			le.PutUint16(b[56:], PN_XNUM)
			le.PutUint32(b[f.Shoff+44:], 1<<20)
		}, 0, nil, "ELF header", "e_phoff", 32},
		{"compression header cut", func(b []byte) {
			le.PutUint64(b[shdr(info)+8:], uint64(elf.SHF_COMPRESSED))
			le.PutUint64(b[shdr(info)+32:], 10)
		}, 0, nil, ".debug_info", "Elf_Chdr", f.Sections[info].Offset},
		{"ch_type", func(b []byte) {
			le.PutUint64(b[shdr(info)+8:], uint64(elf.SHF_COMPRESSED))
			le.PutUint32(b[f.Sections[info].Offset:], 9)
		}, 0, relocated(info), ".debug_info", "ch_type", f.Sections[info].Offset},
		{"ch_size", func(b []byte) {
			le.PutUint64(b[shdr(info)+8:], uint64(elf.SHF_COMPRESSED))
			le.PutUint32(b[f.Sections[info].Offset:], uint32(elf.COMPRESS_ZLIB))
			le.PutUint64(b[f.Sections[info].Offset+8:], 1<<40)
		}, 0, relocated(info), ".debug_info", "ch_size", f.Sections[info].Offset},
		{"zlib stream", func(b []byte) {
			le.PutUint64(b[shdr(info)+8:], uint64(elf.SHF_COMPRESSED))
			le.PutUint32(b[f.Sections[info].Offset:], uint32(elf.COMPRESS_ZLIB))
			le.PutUint64(b[f.Sections[info].Offset+8:], 100)
		}, 0, relocated(info), ".debug_info", "compressed data", f.Sections[info].Offset},
		{"symbol table size", put64(shdr(symtab)+32, f.Sections[symtab].Size-1), 0, symbols, ".symtab", "sh_size", shdr(symtab) + 32},
		{"symbol table link", put32(shdr(symtab)+40, 0), 0, symbols, ".symtab", "sh_link", shdr(symtab) + 40},
		{"string table NOBITS", put32(shdr(strtab)+4, uint32(elf.SHT_NOBITS)), 0, symbols, ".symtab", "sh_link", shdr(symtab) + 40},
		{"relocation type", put32(relaEntry+8, uint32(elf.R_X86_64_GOTPCREL)), 0, relocated(info), ".rela.debug_info", "r_info", relaEntry},
		{"relocation symbol", put32(relaEntry+12, 1<<20), 0, relocated(info), ".rela.debug_info", "r_info", relaEntry},
		{"relocation place", put64(relaEntry, 1<<20), 0, relocated(info), ".rela.debug_info", "r_offset", relaEntry},
		{"relocation overflow", put64(relaEntry+16, 1<<33), 0, relocated(info), ".rela.debug_info", "r_addend", relaEntry + 16},
		{"relocation section size", put64(shdr(rela)+32, f.Sections[rela].Size-1), 0, relocated(info), ".rela.debug_info", "sh_size", shdr(rela) + 32},
		{"relocation section link", put32(shdr(rela)+40, 0), 0, relocated(info), ".rela.debug_info", "sh_link", shdr(rela) + 40},
	} {
		b := bytes.Clone(good)
		if c.patch != nil {
			c.patch(b)
		}
		if c.cut > 0 {
			b = b[:c.cut]
		}
		for _, mem := range []bool{true, false} {
			var g *File
			var err error
			if mem {
				g, err = NewBytes(b)
			} else {
				g, err = NewFile(bytes.NewReader(b), int64(len(b)))
			}
			if c.read != nil {
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				err = c.read(g)
			}
			var fe *dwarf.FormatError
			if !errors.As(err, &fe) || fe.Source != c.section || fe.Field != c.field || fe.Offset != c.off {
				t.Errorf("%s (mem %v): %v; want %s+%#x: %s", c.name, mem, err, c.section, c.off, c.field)
			}
		}
	}
}

// TestNotes: the build ID of an object and of a Go test binary's notes,
// and a note stream cut at every byte gives either the notes before the
// cut or an error inside the stream, never a note past it.
func TestNotes(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	i := f.FindSection(".note.go.buildid")
	if i < 0 {
		tooltest.Skip(t, "test binary without .note.go.buildid")
	}
	r, err := f.SectionNotes(i)
	if err != nil {
		t.Fatal(err)
	}
	n, ok := r.Next()
	if !ok || string(n.Name) != "Go" || n.Type != 4 || len(n.Desc) < 20 {
		t.Fatalf("Go build ID note %+v, %v", n, r.Err())
	}
	body := make([]byte, 0, 64)
	le := binary.LittleEndian
	for _, note := range []struct {
		name string
		typ  elf.NType
		desc []byte
	}{{"GNU\x00", NT_GNU_BUILD_ID, bytes.Repeat([]byte{0xab}, 20)}, {"CORE\x00", 1, []byte{1, 2, 3}}} {
		body = le.AppendUint32(body, uint32(len(note.name)))
		body = le.AppendUint32(body, uint32(len(note.desc)))
		body = le.AppendUint32(body, uint32(note.typ))
		body = append(body, note.name...)
		for len(body)%4 != 0 {
			body = append(body, 0)
		}
		body = append(body, note.desc...)
		for len(body)%4 != 0 {
			body = append(body, 0)
		}
	}
	for cut := range len(body) + 1 {
		r := NewNoteReader(body[:cut], 0x1000, elf.ELFDATA2LSB, 4, "PT_NOTE")
		count := 0
		for n, ok := r.Next(); ok; n, ok = r.Next() {
			if n.Offset < 0x1000 || n.DescOffset+uint64(len(n.Desc)) > 0x1000+uint64(cut) {
				t.Fatalf("cut %d: note %+v past the cut", cut, n)
			}
			count++
		}
		var fe *dwarf.FormatError
		switch {
		case cut == len(body) || cut == len(body)-1: // the last padding may be missing
			if count != 2 || r.Err() != nil {
				t.Errorf("cut %d: %d notes, %v", cut, count, r.Err())
			}
		case r.Err() != nil && (!errors.As(r.Err(), &fe) || fe.Offset < 0x1000 || fe.Offset >= 0x1000+uint64(cut)):
			t.Errorf("cut %d: error %v outside the stream", cut, r.Err())
		}
	}
	r = NewNoteReader(body, 0, elf.ELFDATA2LSB, 4, "PT_NOTE")
	if id, err := buildID(&r); err != nil || !bytes.Equal(id, bytes.Repeat([]byte{0xab}, 20)) {
		t.Errorf("buildID = %x, %v", id, err)
	}
}

// TestZeroAlloc: the decoders the loader uses, symbol iteration and note
// iteration allocate nothing.
func TestZeroAlloc(t *testing.T) {
	data := testObject(t, "gcc-x86-64-dwarf5.o")
	f, err := NewBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.SymbolsOfType(elf.SHT_SYMTAB)
	if err != nil {
		t.Fatal(err)
	}
	notes := f.FindSectionType(elf.SHT_NOTE)
	var sink uint64
	if n := testing.AllocsPerRun(100, func() {
		h, err := DecodeHeader(data)
		if err != nil {
			panic(err)
		}
		sh, _ := h.DecodeSection(data[h.Shoff+64:])
		sink += sh.Size
		for i := range st.Len() {
			s := st.Sym(i)
			name, _ := st.NameBytes(i)
			sink += s.Value + uint64(len(name))
		}
		if notes >= 0 {
			r, _ := f.SectionNotes(notes)
			for n, ok := r.Next(); ok; n, ok = r.Next() {
				sink += uint64(len(n.Desc))
			}
		}
	}); n != 0 {
		t.Errorf("%v allocations per run", n)
	}
	_ = sink
}

// TestSymbolTableBytes: Bytes is the entries as stored, of the layout
// Is64 and BigEndian tell, for each class and byte order: entry i's
// fields read from Bytes()[i*SymSize:] by that layout are those Sym
// decodes.
func TestSymbolTableBytes(t *testing.T) {
	for _, c := range []struct {
		class elf.Class
		data  elf.Data
	}{{elf.ELFCLASS64, elf.ELFDATA2LSB}, {elf.ELFCLASS64, elf.ELFDATA2MSB}, {elf.ELFCLASS32, elf.ELFDATA2LSB}, {elf.ELFCLASS32, elf.ELFDATA2MSB}} {
		is64, big := c.class == elf.ELFCLASS64, c.data == elf.ELFDATA2MSB
		var order binary.ByteOrder = binary.LittleEndian
		if big {
			order = binary.BigEndian
		}
		ent := 16
		if is64 {
			ent = 24
		}
		syms := make([]byte, 3*ent)
		for i := range syms {
			syms[i] = byte(i*7 + 1)
		}
		st, err := NewSymbolTable(c.class, c.data, ".symtab", syms, nil)
		if err != nil {
			t.Fatal(err)
		}
		if st.Is64() != is64 || st.BigEndian() != big || len(st.Bytes()) != len(syms) || &st.Bytes()[0] != &syms[0] {
			t.Fatalf("%v %v: Is64 %v, BigEndian %v, %d bytes", c.class, c.data, st.Is64(), st.BigEndian(), len(st.Bytes()))
		}
		for i := range st.Len() {
			e, s := st.Bytes()[i*ent:], st.Sym(i)
			value, size, info, shndx := uint64(order.Uint32(e[4:])), uint64(order.Uint32(e[8:])), e[12], order.Uint16(e[14:])
			if is64 {
				value, size, info, shndx = order.Uint64(e[8:]), order.Uint64(e[16:]), e[4], order.Uint16(e[6:])
			}
			if s.Name != order.Uint32(e) || s.Value != value || s.Size != size || s.Info != info || uint16(s.Section) != shndx {
				t.Fatalf("%v %v: entry %d decodes to %+v; its bytes hold name %#x value %#x size %#x info %#x shndx %#x", c.class, c.data, i, s, order.Uint32(e), value, size, info, shndx)
			}
		}
	}
}
