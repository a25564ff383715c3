package elfobj_test

import (
	"bytes"
	"crypto/sha1"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/elfobj"
)

// sample is what writeSample puts in a file, for the checks to compare
// with what a reader finds.
type sample struct {
	class elf.Class
	order binary.ByteOrder
	text  []byte
	syms  []elf.Symbol // in table order, without the null symbol
	relas []elf.Rela64
	dyns  []elf.Dyn64
}

// writeSample writes a file of every kind of range the writer reserves:
// ELF header, two program headers, .text filled in place, .bss
// (SHT_NOBITS), a note section with a build ID and another note,
// .rela.text, .dynstr and .dynamic, .symtab with local and global symbols,
// .strtab, .shstrtab and the section headers, with a page boundary before
// .text. Addresses equal file offsets.
func writeSample(t *testing.T, class elf.Class, data elf.Data) ([]byte, *sample) {
	t.Helper()
	w := elfobj.NewWriter(class, data)
	s := &sample{class: class, order: binary.LittleEndian}
	if data == elf.ELFDATA2MSB {
		s.order = binary.BigEndian
	}
	add := func(name string, typ elf.SectionType, flags elf.SectionFlag, align uint64) *elfobj.Section {
		return w.AddSection(elf.SectionHeader{Name: name, Type: typ, Flags: flags, Addralign: align})
	}
	note := add(".note", elf.SHT_NOTE, elf.SHF_ALLOC, 4)
	text := add(".text", elf.SHT_PROGBITS, elf.SHF_ALLOC|elf.SHF_EXECINSTR, 16)
	bss := add(".bss", elf.SHT_NOBITS, elf.SHF_ALLOC|elf.SHF_WRITE, 32)
	rela := add(".rela.text", elf.SHT_RELA, elf.SHF_INFO_LINK, 0)
	dynstr := add(".dynstr", elf.SHT_STRTAB, elf.SHF_ALLOC, 1)
	dynamic := add(".dynamic", elf.SHT_DYNAMIC, elf.SHF_ALLOC|elf.SHF_WRITE, 0)
	symtab := add(".symtab", elf.SHT_SYMTAB, 0, 0)
	strtab := add(".strtab", elf.SHT_STRTAB, 0, 1)
	rela.Info = uint32(text.Index())
	dynamic.Link = uint32(dynstr.Index())

	var strs, dstrs elfobj.StringTable
	libc := dstrs.Add("libc.so.6")
	type sym struct {
		name string
		info byte
		sec  *elfobj.Section
		v, n uint64
	}
	locals := []sym{
		{"sample.c", elf.ST_INFO(elf.STB_LOCAL, elf.STT_FILE), nil, 0, 0},
		{"", elf.ST_INFO(elf.STB_LOCAL, elf.STT_SECTION), text, 0, 0},
		{"helper", elf.ST_INFO(elf.STB_LOCAL, elf.STT_FUNC), text, 0x10, 6},
	}
	globals := []sym{
		{"main", elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC), text, 0, 16},
		{"weak", elf.ST_INFO(elf.STB_WEAK, elf.STT_OBJECT), bss, 8, 8},
		{"ext", elf.ST_INFO(elf.STB_GLOBAL, elf.STT_NOTYPE), nil, 0, 0},
	}
	names := map[string]uint32{}
	for _, x := range append(append([]sym{}, locals...), globals...) {
		names[x.name] = strs.Add(x.name)
	}
	firstLocal := w.ReserveLocalSymbols(len(locals))
	firstGlobal := w.ReserveGlobalSymbols(len(globals))
	if firstLocal != 1 || firstGlobal != elfobj.SymbolIndex(1+len(locals)) || w.SymbolCount() != 1+len(locals)+len(globals) {
		t.Fatalf("symbol indices %d, %d, count %d", firstLocal, firstGlobal, w.SymbolCount())
	}
	rela.Link = uint32(symtab.Index())
	ext := firstGlobal + 2
	s.relas = []elf.Rela64{
		{Off: 1, Info: elf.R_INFO(uint32(ext), uint32(elf.R_X86_64_PLT32)), Addend: -4},
		{Off: 8, Info: elf.R_INFO(uint32(firstLocal+1), uint32(elf.R_X86_64_32)), Addend: 0x10},
	}

	w.ReserveFileHeader()
	w.ReserveProgramHeaders(3)
	noteSize := elfobj.BuildIDNoteSize + elfobj.NoteSize("Go", 3)
	w.ReserveSectionData(note, noteSize)
	w.ReserveAlign(4096)
	w.ReserveSectionData(text, 22)
	w.ReserveStringTable(dynstr, &dstrs)
	w.ReserveDynamic(dynamic, 3)
	w.ReserveSectionData(bss, 64)
	w.ReserveRela(rela, len(s.relas))
	w.ReserveSymtab(symtab, strtab)
	w.ReserveStringTable(strtab, &strs)
	shstrtab := w.ReserveShstrtab()
	w.ReserveSectionHeaders()
	if err := w.Err(); err != nil {
		t.Fatal(err)
	}
	if text.Offset != 4096 || text.Size != 22 || dynstr.Offset != 4096+22 || bss.Offset != dynamic.Offset+dynamic.Size || bss.Size != 64 {
		t.Fatalf(".text at %#x+%#x, .dynstr at %#x, .bss at %#x+%#x", text.Offset, text.Size, dynstr.Offset, bss.Offset, bss.Size)
	}
	for _, sec := range []*elfobj.Section{note, text, dynstr, dynamic} {
		sec.Addr = sec.Offset
	}
	bss.Addr = (bss.Offset + 31) &^ 31
	s.dyns = []elf.Dyn64{
		{Tag: int64(elf.DT_NEEDED), Val: uint64(libc)},
		{Tag: int64(elf.DT_STRTAB), Val: dynstr.Addr},
		{Tag: int64(elf.DT_NULL)},
	}

	w.WriteFileHeader(elfobj.FileHeader{Type: elf.ET_DYN, Machine: elf.EM_X86_64, Entry: text.Addr, OSABI: elf.ELFOSABI_LINUX})
	w.WriteProgramHeader(elf.ProgHeader{Type: elf.PT_LOAD, Flags: elf.PF_R | elf.PF_W | elf.PF_X, Off: 0, Vaddr: 0, Paddr: 0,
		Filesz: dynamic.Offset + dynamic.Size, Memsz: bss.Addr + bss.Size, Align: 4096})
	w.WriteProgramHeader(elf.ProgHeader{Type: elf.PT_NOTE, Flags: elf.PF_R, Off: note.Offset, Vaddr: note.Addr,
		Filesz: note.Size, Memsz: note.Size, Align: 4})
	w.WriteProgramHeader(elf.ProgHeader{Type: elf.PT_DYNAMIC, Flags: elf.PF_R | elf.PF_W, Off: dynamic.Offset, Vaddr: dynamic.Addr,
		Filesz: dynamic.Size, Memsz: dynamic.Size, Align: 8})
	w.WriteBuildID(note)
	w.WriteNote(note, "Go", 4, []byte{1, 2, 3})
	b := w.SectionBytes(text)
	if len(b) != 22 {
		t.Fatalf("SectionBytes: %d bytes", len(b))
	}
	for i := range b {
		b[i] = byte(0x90 + i)
	}
	s.text = append([]byte(nil), b...)
	w.WriteStringTable(dynstr)
	for _, d := range s.dyns {
		w.WriteDynamic(dynamic, d)
	}
	for _, r := range s.relas {
		w.WriteRela(rela, r)
	}
	w.WriteNullSymbol()
	for _, x := range append(append([]sym{}, locals...), globals...) {
		shndx := uint16(elf.SHN_UNDEF)
		switch {
		case x.sec != nil:
			shndx = uint16(x.sec.Index())
		case elf.ST_TYPE(x.info) == elf.STT_FILE:
			shndx = uint16(elf.SHN_ABS)
		}
		w.WriteSymbol(elf.Sym64{Name: names[x.name], Info: x.info, Shndx: shndx, Value: x.v, Size: x.n})
		s.syms = append(s.syms, elf.Symbol{Name: x.name, Info: x.info, Section: elf.SectionIndex(shndx), Value: x.v, Size: x.n})
	}
	w.WriteStringTable(strtab)
	w.WriteStringTable(shstrtab)
	w.WriteSectionHeaders()
	out, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(out)) != w.ReservedSize() {
		t.Fatalf("%d bytes, %d reserved", len(out), w.ReservedSize())
	}
	return out, s
}

var classes = []struct {
	class elf.Class
	data  elf.Data
}{
	{elf.ELFCLASS64, elf.ELFDATA2LSB},
	{elf.ELFCLASS64, elf.ELFDATA2MSB},
	{elf.ELFCLASS32, elf.ELFDATA2LSB},
	{elf.ELFCLASS32, elf.ELFDATA2MSB},
}

// TestRoundTrip reads what the writer wrote, in each class and byte
// order, with debug/elf as the independent reader: header, program
// headers, section headers, contents, symbols, relocations, dynamic
// entries, notes and the build ID.
func TestRoundTrip(t *testing.T) {
	for _, c := range classes {
		t.Run(fmt.Sprint(c.class, c.data), func(t *testing.T) {
			out, s := writeSample(t, c.class, c.data)
			f, err := elf.NewFile(bytes.NewReader(out))
			if err != nil {
				t.Fatal(err)
			}
			if f.Class != c.class || f.Data != c.data || f.Type != elf.ET_DYN || f.Machine != elf.EM_X86_64 ||
				f.OSABI != elf.ELFOSABI_LINUX || f.Entry != 4096 || f.Version != elf.EV_CURRENT {
				t.Errorf("header %+v", f.FileHeader)
			}
			dyn, bss := f.Section(".dynamic"), f.Section(".bss")
			if len(f.Progs) != 3 || f.Progs[0].Type != elf.PT_LOAD || f.Progs[0].Filesz != dyn.Offset+dyn.Size || f.Progs[0].Memsz != bss.Addr+64 ||
				f.Progs[1].Type != elf.PT_NOTE || f.Progs[1].Align != 4 || f.Progs[2].Type != elf.PT_DYNAMIC || f.Progs[2].Off != dyn.Offset {
				for _, p := range f.Progs {
					t.Logf("%+v", p.ProgHeader)
				}
				t.Errorf("program headers")
			}
			want := []string{"", ".note", ".text", ".bss", ".rela.text", ".dynstr", ".dynamic", ".symtab", ".strtab", ".shstrtab"}
			var got []string
			for _, sec := range f.Sections {
				got = append(got, sec.Name)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("sections %q, want %q", got, want)
			}
			text, _ := f.Section(".text").Data()
			if !bytes.Equal(text, s.text) {
				t.Errorf(".text % x, want % x", text, s.text)
			}
			if bss.Offset != dyn.Offset+dyn.Size || bss.Size != 64 || bss.Addralign != 32 || bss.Addr%32 != 0 {
				t.Errorf(".bss %+v", bss.SectionHeader)
			}
			addr, symSize, relaSize := uint64(8), uint64(24), uint64(24)
			if c.class == elf.ELFCLASS32 {
				addr, symSize, relaSize = 4, 16, 12
			}
			symtab := f.Section(".symtab")
			if symtab.Link != 8 || symtab.Info != 4 || symtab.Addralign != addr || symtab.Entsize != symSize {
				t.Errorf(".symtab link %d info %d align %d entsize %d", symtab.Link, symtab.Info, symtab.Addralign, symtab.Entsize)
			}
			syms, err := f.Symbols()
			if err != nil {
				t.Fatal(err)
			}
			for i := range syms {
				syms[i].Version, syms[i].Library = "", ""
			}
			if !reflect.DeepEqual(syms, s.syms) {
				t.Errorf("symbols\n%+v\nwant\n%+v", syms, s.syms)
			}
			// Relocations: debug/elf reads them only to apply them to
			// DWARF, so decode the entries here.
			rela := f.Section(".rela.text")
			if rela.Link != 7 || rela.Info != 2 || rela.Flags != elf.SHF_INFO_LINK || rela.Entsize != relaSize || rela.Addralign != addr {
				t.Errorf(".rela.text %+v", rela.SectionHeader)
			}
			rb, _ := rela.Data()
			var relas []elf.Rela64
			for i := 0; i < len(rb); i += int(rela.Entsize) {
				if c.class == elf.ELFCLASS64 {
					relas = append(relas, elf.Rela64{Off: s.order.Uint64(rb[i:]), Info: s.order.Uint64(rb[i+8:]), Addend: int64(s.order.Uint64(rb[i+16:]))})
				} else {
					info := s.order.Uint32(rb[i+4:])
					relas = append(relas, elf.Rela64{Off: uint64(s.order.Uint32(rb[i:])),
						Info: elf.R_INFO(elf.R_SYM32(info), elf.R_TYPE32(info)), Addend: int64(int32(s.order.Uint32(rb[i+8:])))})
				}
			}
			if !reflect.DeepEqual(relas, s.relas) {
				t.Errorf("relocations %+v, want %+v", relas, s.relas)
			}
			libs, err := f.ImportedLibraries()
			if err != nil || !reflect.DeepEqual(libs, []string{"libc.so.6"}) {
				t.Errorf("DT_NEEDED %q, %v", libs, err)
			}
			if v, err := f.DynValue(elf.DT_STRTAB); err != nil || len(v) != 1 || v[0] != f.Section(".dynstr").Addr {
				t.Errorf("DT_STRTAB %v, %v", v, err)
			}
			// Notes: the build ID, then the "Go" note, each padded to 4.
			nb, _ := f.Section(".note").Data()
			o := s.order
			if len(nb) != elfobj.BuildIDNoteSize+20 || o.Uint32(nb) != 4 || o.Uint32(nb[4:]) != elfobj.BuildIDSize ||
				elf.NType(o.Uint32(nb[8:])) != elfobj.NT_GNU_BUILD_ID || string(nb[12:16]) != "GNU\x00" {
				t.Fatalf(".note % x", nb)
			}
			goNote := nb[elfobj.BuildIDNoteSize:]
			if o.Uint32(goNote) != 3 || o.Uint32(goNote[4:]) != 3 || o.Uint32(goNote[8:]) != 4 ||
				!bytes.Equal(goNote[12:], []byte{'G', 'o', 0, 0, 1, 2, 3, 0}) {
				t.Errorf("second note % x", goNote)
			}
			zeroed := bytes.Clone(out)
			desc := f.Section(".note").Offset + 16
			clear(zeroed[desc : desc+elfobj.BuildIDSize])
			if sum := sha1.Sum(zeroed); !bytes.Equal(sum[:], out[desc:desc+elfobj.BuildIDSize]) {
				t.Errorf("build ID % x, want SHA-1 % x", out[desc:desc+elfobj.BuildIDSize], sum)
			}
		})
	}
}

// TestBuildIDChanges: any byte written changes the build ID.
func TestBuildIDChanges(t *testing.T) {
	id := func(code byte) []byte {
		w := elfobj.NewWriter(elf.ELFCLASS64, elf.ELFDATA2LSB)
		n := w.AddSection(elf.SectionHeader{Name: ".note.gnu.build-id", Type: elf.SHT_NOTE, Addralign: 4})
		c := w.AddSection(elf.SectionHeader{Name: ".text", Type: elf.SHT_PROGBITS})
		w.ReserveFileHeader()
		w.ReserveSectionData(n, elfobj.BuildIDNoteSize)
		w.ReserveSectionData(c, 1)
		sh := w.ReserveShstrtab()
		w.ReserveSectionHeaders()
		w.WriteFileHeader(elfobj.FileHeader{Type: elf.ET_EXEC})
		w.WriteBuildID(n)
		w.WriteSection(c, []byte{code})
		w.WriteStringTable(sh)
		w.WriteSectionHeaders()
		out, err := w.Finish()
		if err != nil {
			t.Fatal(err)
		}
		return out[n.Offset+16 : n.Offset+16+elfobj.BuildIDSize]
	}
	if a, b := id(1), id(2); bytes.Equal(a, b) || bytes.Equal(a, make([]byte, elfobj.BuildIDSize)) {
		t.Errorf("build IDs % x and % x", a, b)
	}
}

// TestExtendedNumbering writes more sections than e_shnum holds, with
// .shstrtab past SHN_LORESERVE, and more program headers than e_phnum
// holds: the counts go to section 0 (gABI), which debug/elf reads.
func TestExtendedNumbering(t *testing.T) {
	const nsec = 0xff10
	const nph = 0xffff + 2
	w := elfobj.NewWriter(elf.ELFCLASS64, elf.ELFDATA2LSB)
	w.ReserveFileHeader()
	w.ReserveProgramHeaders(nph)
	secs := make([]*elfobj.Section, nsec)
	for i := range secs {
		secs[i] = w.AddSection(elf.SectionHeader{Name: ".s", Type: elf.SHT_PROGBITS, Addralign: 1})
		w.ReserveSectionData(secs[i], uint64(i%2))
	}
	sh := w.ReserveShstrtab()
	w.ReserveSectionHeaders()
	w.WriteFileHeader(elfobj.FileHeader{Type: elf.ET_EXEC})
	for range nph {
		w.WriteProgramHeader(elf.ProgHeader{Type: elf.PT_NULL})
	}
	for i, s := range secs {
		w.WriteSection(s, make([]byte, i%2))
	}
	w.WriteStringTable(sh)
	w.WriteSectionHeaders()
	out, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	if phnum, shnum, shstrndx := le.Uint16(out[56:]), le.Uint16(out[60:]), le.Uint16(out[62:]); phnum != 0xffff || shnum != 0 || shstrndx != uint16(elf.SHN_XINDEX) {
		t.Errorf("e_phnum %#x e_shnum %d e_shstrndx %#x", phnum, shnum, shstrndx)
	}
	f, err := elf.NewFile(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Sections) != nsec+2 || f.Sections[nsec+1].Name != ".shstrtab" || f.Sections[nsec].Name != ".s" {
		t.Fatalf("%d sections", len(f.Sections))
	}
	s0 := f.Sections[0]
	if s0.Size != nsec+2 || s0.Link != nsec+1 || s0.Info != nph {
		t.Errorf("section 0: sh_size %d sh_link %d sh_info %d", s0.Size, s0.Link, s0.Info)
	}
}

// TestMismatch: every way the write phase can depart from the reserve
// phase is an error wrapping ErrLayout (or ErrRange for values that do
// not fit) naming what differs, and nothing is returned.
func TestMismatch(t *testing.T) {
	type file struct {
		w                    *elfobj.Writer
		text, symtab, strtab *elfobj.Section
		note, rela, shstrtab *elfobj.Section
		strs                 *elfobj.StringTable
		local, global        elfobj.SymbolIndex
	}
	// reserve reserves a small ELF64 file; the cases then write it.
	reserve := func(class elf.Class) *file {
		f := &file{w: elfobj.NewWriter(class, elf.ELFDATA2LSB), strs: &elfobj.StringTable{}}
		w := f.w
		f.text = w.AddSection(elf.SectionHeader{Name: ".text", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Addralign: 16})
		f.note = w.AddSection(elf.SectionHeader{Name: ".note", Type: elf.SHT_NOTE, Addralign: 4})
		f.rela = w.AddSection(elf.SectionHeader{Name: ".rela.text", Type: elf.SHT_RELA})
		f.symtab = w.AddSection(elf.SectionHeader{Name: ".symtab", Type: elf.SHT_SYMTAB})
		f.strtab = w.AddSection(elf.SectionHeader{Name: ".strtab", Type: elf.SHT_STRTAB})
		f.strs.Add("f")
		f.local = w.ReserveLocalSymbols(1)
		f.global = w.ReserveGlobalSymbols(1)
		w.ReserveFileHeader()
		w.ReserveProgramHeaders(1)
		w.ReserveSectionData(f.text, 16)
		w.ReserveSectionData(f.note, elfobj.BuildIDNoteSize)
		w.ReserveRela(f.rela, 2)
		w.ReserveSymtab(f.symtab, f.strtab)
		w.ReserveStringTable(f.strtab, f.strs)
		f.shstrtab = w.ReserveShstrtab()
		w.ReserveSectionHeaders()
		return f
	}
	local := elf.Sym64{Name: 1, Info: elf.ST_INFO(elf.STB_LOCAL, elf.STT_FUNC), Shndx: 1}
	global := elf.Sym64{Name: 1, Info: elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC), Shndx: 1}
	load := elf.ProgHeader{Type: elf.PT_LOAD, Flags: elf.PF_R, Filesz: 64, Memsz: 64, Align: 4096}
	// step is one write call; the good file is these in order.
	type step func(f *file)
	good := []step{
		func(f *file) { f.w.WriteFileHeader(elfobj.FileHeader{Type: elf.ET_REL, Machine: elf.EM_X86_64}) },
		func(f *file) { f.w.WriteProgramHeader(load) },
		func(f *file) { f.w.WriteSection(f.text, make([]byte, 16)) },
		func(f *file) { f.w.WriteBuildID(f.note) },
		func(f *file) { f.w.WriteRela(f.rela, elf.Rela64{}); f.w.WriteRela(f.rela, elf.Rela64{}) },
		func(f *file) { f.w.WriteNullSymbol(); f.w.WriteSymbol(local); f.w.WriteSymbol(global) },
		func(f *file) { f.w.WriteStringTable(f.strtab) },
		func(f *file) { f.w.WriteStringTable(f.shstrtab) },
		func(f *file) { f.w.WriteSectionHeaders() },
	}
	with := func(i int, s step) []step {
		steps := append([]step{}, good...)
		steps[i] = s
		return steps
	}
	without := func(i int) []step {
		return append(append([]step{}, good[:i]...), good[i+1:]...)
	}
	cases := []struct {
		name  string
		class elf.Class
		pre   func(f *file) // after reserving, before writing
		steps []step
		want  error
		msg   string
	}{
		{name: "good", steps: good},
		{name: "program header missing", steps: with(1, func(*file) {}), want: elfobj.ErrLayout,
			msg: "WriteSection(.text), but the next range reserved is the program header table"},
		{name: "header written twice", steps: with(1, func(f *file) {}), pre: func(f *file) {
			f.w.WriteFileHeader(elfobj.FileHeader{})
			f.w.WriteProgramHeader(load)
		}, want: elfobj.ErrLayout, msg: "WriteFileHeader, but the next range reserved is the contents of section 1 (.text)"},
		{name: "two program headers", steps: with(1, func(f *file) { f.w.WriteProgramHeader(load); f.w.WriteProgramHeader(load) }),
			want: elfobj.ErrLayout, msg: "WriteProgramHeader, but the next range reserved is the contents of section 1 (.text)"},
		{name: "section too short", steps: with(2, func(f *file) { f.w.WriteSection(f.text, make([]byte, 15)) }),
			want: elfobj.ErrLayout, msg: "section 1 (.text): 15 bytes written, 16 reserved"},
		{name: "sections swapped", steps: append(append(append([]step{}, good[:2]...), good[3], good[2]), good[4:]...),
			want: elfobj.ErrLayout, msg: "WriteNote(.note), but the next range reserved is the contents of section 1 (.text)"},
		{name: "range skipped", steps: without(2), want: elfobj.ErrLayout,
			msg: "but the next range reserved is the contents of section 1 (.text)"},
		{name: "header last", steps: append(append([]step{}, good[1:]...), good[0]), want: elfobj.ErrLayout,
			msg: "WriteProgramHeader, but the next range reserved is the ELF header"},
		{name: "section headers missing", steps: without(len(good) - 1), want: elfobj.ErrLayout,
			msg: "Finish: the section header table was reserved but not written"},
		{name: "one relocation", steps: with(4, func(f *file) { f.w.WriteRela(f.rela, elf.Rela64{}) }), want: elfobj.ErrLayout,
			msg: "section 3 (.rela.text): 1 entries written, 2 reserved"},
		{name: "three relocations", steps: with(4, func(f *file) {
			f.w.WriteRela(f.rela, elf.Rela64{})
			f.w.WriteRela(f.rela, elf.Rela64{})
			f.w.WriteRela(f.rela, elf.Rela64{})
		}), want: elfobj.ErrLayout, msg: "WriteRela(.rela.text), but the next range reserved is the contents of section 4 (.symtab)"},
		{name: "symbols without the null symbol", steps: with(5, func(f *file) { f.w.WriteSymbol(local); f.w.WriteSymbol(global) }),
			want: elfobj.ErrLayout, msg: "WriteSymbol outside the symbol table"},
		{name: "symbol missing", steps: with(5, func(f *file) { f.w.WriteNullSymbol(); f.w.WriteSymbol(local) }),
			want: elfobj.ErrLayout, msg: "section 4 (.symtab): 2 entries written, 3 reserved"},
		{name: "symbol too many", steps: with(5, func(f *file) {
			f.w.WriteNullSymbol()
			f.w.WriteSymbol(local)
			f.w.WriteSymbol(global)
			f.w.WriteSymbol(global)
		}), want: elfobj.ErrLayout, msg: "WriteSymbol: symbol 3, but 3 symbols were reserved"},
		{name: "global where a local was reserved", steps: with(5, func(f *file) {
			f.w.WriteNullSymbol()
			f.w.WriteSymbol(global)
			f.w.WriteSymbol(global)
		}), want: elfobj.ErrLayout, msg: "symbol 1 has binding STB_GLOBAL but was reserved as a local one"},
		{name: "local after the globals began", steps: with(5, func(f *file) {
			f.w.WriteNullSymbol()
			f.w.WriteSymbol(local)
			f.w.WriteSymbol(local)
		}), want: elfobj.ErrLayout, msg: "symbol 2 is STB_LOCAL but was reserved as a global one"},
		{name: "symbol name outside .strtab", steps: with(5, func(f *file) {
			f.w.WriteNullSymbol()
			f.w.WriteSymbol(local)
			f.w.WriteSymbol(elf.Sym64{Name: 3, Info: global.Info})
		}), want: elfobj.ErrRange, msg: "symbol 2: st_name 3 outside the 3-byte string table"},
		{name: "symbol section past the last", steps: with(5, func(f *file) {
			f.w.WriteNullSymbol()
			f.w.WriteSymbol(local)
			f.w.WriteSymbol(elf.Sym64{Info: global.Info, Shndx: 7})
		}), want: elfobj.ErrRange, msg: "symbol 2: st_shndx 7 but the file has 7 sections"},
		{name: "note overruns", steps: with(3, func(f *file) { f.w.WriteNote(f.note, "GNU", 1, make([]byte, 21)) }),
			want: elfobj.ErrLayout, msg: "a note of 40 bytes overruns the 36 bytes reserved"},
		{name: "note short", steps: with(3, func(f *file) { f.w.WriteNote(f.note, "GNU", 1, make([]byte, 16)) }),
			want: elfobj.ErrLayout, msg: "section 2 (.note): 32 bytes of notes written, 36 reserved"},
		{name: "offset changed", pre: func(f *file) { f.text.Offset++ }, steps: good, want: elfobj.ErrLayout,
			msg: "section 1 (.text): sh_offset 0x81 and sh_size 0x10, but [0x80, +0x10) was reserved"},
		{name: "symtab info changed", pre: func(f *file) { f.symtab.Info = 3 }, steps: good, want: elfobj.ErrLayout,
			msg: "sh_info 3, but 2 local symbols were reserved"},
		{name: "reserve in the write phase", steps: with(2, func(f *file) { f.w.ReserveAlign(8) }), want: elfobj.ErrLayout,
			msg: "ReserveAlign called in the write phase"},
		{name: "write after finish", steps: append(append([]step{}, good...), func(f *file) { f.w.Finish() }),
			want: elfobj.ErrLayout, msg: "Finish called twice"},
		{name: "PT_LOAD not congruent", steps: with(1, func(f *file) {
			p := load
			p.Vaddr = 0x1001
			f.w.WriteProgramHeader(p)
		}), want: elfobj.ErrRange, msg: "PT_LOAD p_offset 0x0 and p_vaddr 0x1001 not congruent modulo p_align 0x1000"},
		{name: "PT_LOAD filesz above memsz", steps: with(1, func(f *file) {
			p := load
			p.Memsz = 1
			f.w.WriteProgramHeader(p)
		}), want: elfobj.ErrRange, msg: "PT_LOAD p_filesz 0x40 > p_memsz 0x1"},
		{name: "segment past the end", steps: with(1, func(f *file) {
			p := load
			p.Filesz, p.Memsz = 1<<20, 1<<20
			f.w.WriteProgramHeader(p)
		}), want: elfobj.ErrRange, msg: "file bytes [0x0, +0x100000) past the end of the file"},
		{name: "ELF32 address too large", class: elf.ELFCLASS32, steps: with(1, func(f *file) {
			p := load
			p.Vaddr, p.Off = 1<<32, 0
			p.Align = 1
			f.w.WriteProgramHeader(p)
		}), want: elfobj.ErrRange, msg: "p_vaddr 0x100000000 does not fit ELF32"},
		{name: "ELF32 relocation symbol too large", class: elf.ELFCLASS32, steps: with(4, func(f *file) {
			f.w.WriteRela(f.rela, elf.Rela64{Info: elf.R_INFO(1<<24, 1)})
		}), want: elfobj.ErrRange, msg: "relocation 0 (symbol 16777216, type 1, addend 0) does not fit ELF32"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			class := c.class
			if class == 0 {
				class = elf.ELFCLASS64
			}
			f := reserve(class)
			if err := f.w.Err(); err != nil {
				t.Fatal(err)
			}
			if c.pre != nil {
				c.pre(f)
			}
			for _, s := range c.steps {
				s(f)
			}
			out, err := f.w.Finish()
			if c.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := elf.NewFile(bytes.NewReader(out)); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) || out != nil {
				t.Errorf("err = %v (%d bytes), want %v containing %q", err, len(out), c.want, c.msg)
			}
			if !errors.Is(f.w.Err(), c.want) {
				t.Errorf("Err() = %v", f.w.Err())
			}
		})
	}
}

// TestReserveErrors: misuses of the reserve phase are errors wrapping
// ErrLayout or ErrRange, and later calls change nothing.
func TestReserveErrors(t *testing.T) {
	cases := []struct {
		name string
		do   func(w *elfobj.Writer)
		want error
		msg  string
	}{
		{"header not first", func(w *elfobj.Writer) {
			w.ReserveProgramHeaders(1)
			w.ReserveFileHeader()
		}, elfobj.ErrLayout, "the ELF header must be the first range"},
		{"program headers twice", func(w *elfobj.Writer) {
			w.ReserveProgramHeaders(1)
			w.ReserveProgramHeaders(1)
		}, elfobj.ErrLayout, "ReserveProgramHeaders called twice"},
		{"contents twice", func(w *elfobj.Writer) {
			s := w.AddSection(elf.SectionHeader{Name: ".a", Type: elf.SHT_PROGBITS})
			w.ReserveSectionData(s, 1)
			w.ReserveSectionData(s, 1)
		}, elfobj.ErrLayout, "the contents of section 1 (.a) are already reserved"},
		{"alignment", func(w *elfobj.Writer) {
			s := w.AddSection(elf.SectionHeader{Name: ".a", Type: elf.SHT_PROGBITS, Addralign: 12})
			w.ReserveSectionData(s, 1)
		}, elfobj.ErrRange, "sh_addralign 12 is not a power of two"},
		{"section after .shstrtab", func(w *elfobj.Writer) {
			w.ReserveShstrtab()
			w.AddSection(elf.SectionHeader{Name: ".late"})
		}, elfobj.ErrLayout, "AddSection(.late) after ReserveShstrtab"},
		{"local after global", func(w *elfobj.Writer) {
			w.ReserveGlobalSymbols(1)
			w.ReserveLocalSymbols(1)
		}, elfobj.ErrLayout, "local symbols come first"},
		{"symbols after the table", func(w *elfobj.Writer) {
			s := w.AddSection(elf.SectionHeader{Name: ".symtab", Type: elf.SHT_SYMTAB})
			st := w.AddSection(elf.SectionHeader{Name: ".strtab", Type: elf.SHT_STRTAB})
			w.ReserveSymtab(s, st)
			w.ReserveGlobalSymbols(1)
		}, elfobj.ErrLayout, "symbols reserved after ReserveSymtab"},
		{"symbols without a table", func(w *elfobj.Writer) {
			w.ReserveGlobalSymbols(1)
			w.Finish()
		}, elfobj.ErrLayout, "2 symbols reserved but no symbol table"},
		{"wrong type", func(w *elfobj.Writer) {
			s := w.AddSection(elf.SectionHeader{Name: ".rela", Type: elf.SHT_REL})
			w.ReserveRela(s, 1)
		}, elfobj.ErrLayout, "section 1 (.rela) is SHT_REL, want SHT_RELA"},
		{"section headers before .shstrtab", func(w *elfobj.Writer) {
			w.ReserveSectionHeaders()
		}, elfobj.ErrLayout, "ReserveSectionHeaders before ReserveShstrtab"},
		{"PN_XNUM without sections", func(w *elfobj.Writer) {
			w.ReserveProgramHeaders(0xffff)
			w.WriteFileHeader(elfobj.FileHeader{})
		}, elfobj.ErrLayout, "65535 program headers need a section header table"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := elfobj.NewWriter(elf.ELFCLASS64, elf.ELFDATA2LSB)
			c.do(w)
			err := w.Err()
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("err = %v, want %v containing %q", err, c.want, c.msg)
			}
			size := w.ReservedSize()
			w.ReserveAlign(4096)
			if w.ReservedSize() != size || w.Err() != err {
				t.Errorf("a call after the error changed the writer")
			}
		})
	}
}

// TestStringTable: Add shares identical strings, AddUnique does not look
// them up, Grow pre-sizes, and a reserved table may not change.
func TestStringTable(t *testing.T) {
	var s elfobj.StringTable
	if s.Size() != 1 || !bytes.Equal(s.Bytes(), []byte{0}) {
		t.Fatalf("empty table %q", s.Bytes())
	}
	if a, b, c, e := s.Add("main"), s.Add("f"), s.Add("main"), s.Add(""); a != 1 || b != 6 || c != 1 || e != 0 {
		t.Errorf("offsets %d %d %d %d", a, b, c, e)
	}
	if u := s.AddUnique("main"); u != 8 || string(s.Bytes()) != "\x00main\x00f\x00main\x00" {
		t.Errorf("AddUnique %d, table %q", u, s.Bytes())
	}
	var g elfobj.StringTable
	g.Grow(4000)
	names := make([]string, 100)
	for i := range names {
		names[i] = fmt.Sprintf("sym%05d", i)
	}
	if n := testing.AllocsPerRun(1, func() {
		for _, n := range names {
			g.AddUnique(n)
		}
	}); n != 0 {
		t.Errorf("AddUnique after Grow allocates %v times", n)
	}

	w := elfobj.NewWriter(elf.ELFCLASS64, elf.ELFDATA2LSB)
	st := w.AddSection(elf.SectionHeader{Name: ".strtab", Type: elf.SHT_STRTAB})
	w.ReserveStringTable(st, &s)
	if st.Size != uint64(s.Size()) {
		t.Errorf(".strtab size %d, table %d", st.Size, s.Size())
	}
	if s.Add("main") != 1 {
		t.Errorf("a string already in the table moved")
	}
	defer func() {
		if recover() == nil {
			t.Errorf("Add of a new string after ReserveStringTable did not panic")
		}
	}()
	s.Add("new")
}

// TestNoteSize: the gABI note layout, names and descriptors padded to 4.
func TestNoteSize(t *testing.T) {
	for _, c := range []struct {
		name string
		desc int
		want uint64
	}{{"GNU", 20, 36}, {"", 0, 12}, {"Go", 3, 20}, {"LINUX", 4, 24}, {"abc", 0, 16}} {
		if got := elfobj.NoteSize(c.name, c.desc); got != c.want {
			t.Errorf("NoteSize(%q, %d) = %d, want %d", c.name, c.desc, got, c.want)
		}
	}
}

// TestSectionLinks: a relocation section reserved for no entries needs
// no write call, and sh_link and sh_info fields that must name a section
// are checked when the section headers are written.
func TestSectionLinks(t *testing.T) {
	write := func(link, info uint32) ([]byte, error) {
		w := elfobj.NewWriter(elf.ELFCLASS64, elf.ELFDATA2LSB)
		text := w.AddSection(elf.SectionHeader{Name: ".text", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR})
		rela := w.AddSection(elf.SectionHeader{Name: ".rela.text", Type: elf.SHT_RELA, Flags: elf.SHF_INFO_LINK, Link: link, Info: info})
		w.ReserveFileHeader()
		w.ReserveSectionData(text, 1)
		w.ReserveRela(rela, 0)
		sh := w.ReserveShstrtab()
		w.ReserveSectionHeaders()
		w.WriteFileHeader(elfobj.FileHeader{Type: elf.ET_REL, Machine: elf.EM_X86_64})
		w.WriteSection(text, []byte{0xc3})
		w.WriteStringTable(sh)
		w.WriteSectionHeaders()
		return w.Finish()
	}
	out, err := write(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if r := f.Section(".rela.text"); r == nil || r.Size != 0 || r.Entsize != 24 || r.Info != 1 {
		t.Errorf(".rela.text %+v", r)
	}
	for _, c := range []struct {
		link, info uint32
		msg        string
	}{
		{4, 1, "section 2 (.rela.text): sh_link 4 is not a section index (1-3)"},
		{0, 0, "SHF_INFO_LINK but sh_info 0 is not a section index"},
		{0, 9, "SHF_INFO_LINK but sh_info 9 is not a section index"},
	} {
		if _, err := write(c.link, c.info); !errors.Is(err, elfobj.ErrRange) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("link %d info %d: err = %v, want ErrRange containing %q", c.link, c.info, err, c.msg)
		}
	}
}

// TestTooLarge: a reservation past MaxFileSize is an ErrRange at the first
// write, naming the size, and no output is allocated.
func TestTooLarge(t *testing.T) {
	w := elfobj.NewWriter(elf.ELFCLASS64, elf.ELFDATA2LSB)
	text := w.AddSection(elf.SectionHeader{Name: ".text", Type: elf.SHT_PROGBITS, Addralign: 1})
	w.ReserveFileHeader()
	w.ReserveSectionData(text, elfobj.MaxFileSize)
	w.WriteFileHeader(elfobj.FileHeader{Type: elf.ET_REL, Machine: elf.EM_X86_64})
	err := w.Err()
	if !errors.Is(err, elfobj.ErrRange) || !strings.Contains(err.Error(), fmt.Sprint(elfobj.MaxFileSize+64)) {
		t.Fatalf("err = %v, want ErrRange naming the file's %d bytes", err, elfobj.MaxFileSize+64)
	}
	if b, err := w.Finish(); b != nil || err == nil {
		t.Errorf("Finish = %d bytes, %v", len(b), err)
	}
}
