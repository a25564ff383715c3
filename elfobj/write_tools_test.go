package elfobj_test

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/elfobj"
	"github.com/elfimage/elfimage/internal/readelf"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// writeObject writes the relocatable object (ET_REL, x86-64) of this C
// program, as a compiler would:
//
//	static const char msg[] = "hello from elfobj";
//	static void greet(void) { puts(msg); }       // lea msg(%rip),%rdi; jmp puts@PLT
//	static void (*table)(void) = greet;          // .data, R_X86_64_64
//	int main(void) { table(); return 0; }        // call *table(%rip)
//
// Sections: .text, .rela.text, .rodata, .data, .rela.data (SHF_INFO_LINK,
// sh_link the symbol table, sh_info the section they apply to),
// .note.GNU-stack, .symtab (the file, section and static symbols first,
// sh_info the first global), .strtab, .shstrtab.
func writeObject(t *testing.T) []byte {
	t.Helper()
	greet := []byte{
		0x48, 0x8d, 0x3d, 0, 0, 0, 0, // lea 0(%rip),%rdi   R_X86_64_PC32 .rodata-4
		0xe9, 0, 0, 0, 0, // jmp puts            R_X86_64_PLT32 puts-4
		0xcc, 0xcc, 0xcc, 0xcc, // to main's alignment
	}
	main := []byte{
		0x48, 0x83, 0xec, 0x08, // sub $8,%rsp
		0xff, 0x15, 0, 0, 0, 0, // call *0(%rip)       R_X86_64_PC32 table-4
		0x31, 0xc0, // xor %eax,%eax
		0x48, 0x83, 0xc4, 0x08, // add $8,%rsp
		0xc3, // ret
	}
	msg := []byte("hello from elfobj\x00")

	w := elfobj.NewWriter(elf.ELFCLASS64, elf.ELFDATA2LSB)
	add := func(name string, typ elf.SectionType, flags elf.SectionFlag, align uint64) *elfobj.Section {
		return w.AddSection(elf.SectionHeader{Name: name, Type: typ, Flags: flags, Addralign: align})
	}
	text := add(".text", elf.SHT_PROGBITS, elf.SHF_ALLOC|elf.SHF_EXECINSTR, 16)
	relaText := add(".rela.text", elf.SHT_RELA, elf.SHF_INFO_LINK, 8)
	rodata := add(".rodata", elf.SHT_PROGBITS, elf.SHF_ALLOC, 1)
	data := add(".data", elf.SHT_PROGBITS, elf.SHF_ALLOC|elf.SHF_WRITE, 8)
	relaData := add(".rela.data", elf.SHT_RELA, elf.SHF_INFO_LINK, 8)
	stack := add(".note.GNU-stack", elf.SHT_PROGBITS, 0, 1)
	symtab := add(".symtab", elf.SHT_SYMTAB, 0, 8)
	strtab := add(".strtab", elf.SHT_STRTAB, 0, 1)
	relaText.Info, relaData.Info = uint32(text.Index()), uint32(data.Index())
	relaText.Link, relaData.Link = uint32(symtab.Index()), uint32(symtab.Index())

	var strs elfobj.StringTable
	type sym struct {
		name string
		bind elf.SymBind
		typ  elf.SymType
		sec  *elfobj.Section
		v, n uint64
	}
	locals := []sym{
		{"hello.c", elf.STB_LOCAL, elf.STT_FILE, nil, 0, 0},
		{"", elf.STB_LOCAL, elf.STT_SECTION, text, 0, 0},
		{"", elf.STB_LOCAL, elf.STT_SECTION, rodata, 0, 0},
		{"", elf.STB_LOCAL, elf.STT_SECTION, data, 0, 0},
		{"greet", elf.STB_LOCAL, elf.STT_FUNC, text, 0, 12},
		{"table", elf.STB_LOCAL, elf.STT_OBJECT, data, 0, 8},
	}
	globals := []sym{
		{"main", elf.STB_GLOBAL, elf.STT_FUNC, text, uint64(len(greet)), uint64(len(main))},
		{"puts", elf.STB_GLOBAL, elf.STT_NOTYPE, nil, 0, 0},
	}
	first := w.ReserveLocalSymbols(len(locals))
	w.ReserveGlobalSymbols(len(globals))
	index := func(name string, typ elf.SymType) uint32 {
		for i, s := range append(append([]sym{}, locals...), globals...) {
			if s.name == name && (typ == 0 || s.typ == typ) {
				return uint32(first) + uint32(i)
			}
		}
		t.Fatalf("no symbol %s", name)
		return 0
	}
	rodataSym := uint32(first) + 2
	textRelas := []elf.Rela64{
		{Off: 3, Info: elf.R_INFO(rodataSym, uint32(elf.R_X86_64_PC32)), Addend: -4},
		{Off: 8, Info: elf.R_INFO(index("puts", 0), uint32(elf.R_X86_64_PLT32)), Addend: -4},
		{Off: uint64(len(greet)) + 6, Info: elf.R_INFO(index("table", 0), uint32(elf.R_X86_64_PC32)), Addend: -4},
	}
	dataRelas := []elf.Rela64{{Off: 0, Info: elf.R_INFO(index("greet", 0), uint32(elf.R_X86_64_64))}}
	names := make([]uint32, 0, len(locals)+len(globals))
	for _, s := range append(append([]sym{}, locals...), globals...) {
		names = append(names, strs.Add(s.name))
	}

	w.ReserveFileHeader()
	w.ReserveSectionData(text, uint64(len(greet)+len(main)))
	w.ReserveRela(relaText, len(textRelas))
	w.ReserveSectionData(rodata, uint64(len(msg)))
	w.ReserveSectionData(data, 8)
	w.ReserveRela(relaData, len(dataRelas))
	w.ReserveSectionData(stack, 0)
	w.ReserveSymtab(symtab, strtab)
	w.ReserveStringTable(strtab, &strs)
	shstrtab := w.ReserveShstrtab()
	w.ReserveSectionHeaders()

	w.WriteFileHeader(elfobj.FileHeader{Type: elf.ET_REL, Machine: elf.EM_X86_64})
	w.WriteSection(text, append(append([]byte{}, greet...), main...))
	for _, r := range textRelas {
		w.WriteRela(relaText, r)
	}
	w.WriteSection(rodata, msg)
	w.WriteSection(data, make([]byte, 8))
	for _, r := range dataRelas {
		w.WriteRela(relaData, r)
	}
	w.WriteSection(stack, nil)
	w.WriteNullSymbol()
	for i, s := range append(append([]sym{}, locals...), globals...) {
		shndx := uint16(elf.SHN_UNDEF)
		switch {
		case s.sec != nil:
			shndx = uint16(s.sec.Index())
		case s.typ == elf.STT_FILE:
			shndx = uint16(elf.SHN_ABS)
		}
		w.WriteSymbol(elf.Sym64{Name: names[i], Info: elf.ST_INFO(s.bind, s.typ), Shndx: shndx, Value: s.v, Size: s.n})
	}
	w.WriteStringTable(strtab)
	w.WriteStringTable(shstrtab)
	w.WriteSectionHeaders()
	out, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRelocatable: the ET_REL object is accepted by readelf and
// eu-elflint --gnu-ld, gcc links it into a program that prints its
// message, and ld -r combines it.
func TestRelocatable(t *testing.T) {
	obj := writeObject(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "hello.o")
	if err := os.WriteFile(path, obj, 0o644); err != nil {
		t.Fatal(err)
	}

	out, stderr := readelf.Run(t, obj, "-W", "-a")
	if stderr != "" {
		t.Errorf("readelf warns:\n%s", stderr)
	}
	for _, re := range []string{
		`Type:\s+REL \(Relocatable file\)`,
		`\[ 2\] \.rela\.text\s+RELA\s+0+ [0-9a-f]+ 000048 18\s+I\s+7\s+1\s+8`,
		`\[ 5\] \.rela\.data\s+RELA\s+0+ [0-9a-f]+ 000018 18\s+I\s+7\s+4\s+8`,
		`\[ 6\] \.note\.GNU-stack\s+PROGBITS\s+0+ [0-9a-f]+ 000000 00\s+0\s+0\s+1`,
		`\[ 7\] \.symtab\s+SYMTAB\s+0+ [0-9a-f]+ 0000d8 18\s+8\s+7\s+8`,
		`R_X86_64_PC32\s+0+ \.rodata - 4`,
		`R_X86_64_PLT32\s+0+ puts - 4`,
		`R_X86_64_PC32\s+0+ table - 4`,
		`R_X86_64_64\s+0+ greet \+ 0`,
		`5: 0+ +12 FUNC +LOCAL +DEFAULT +1 greet`,
		`7: 0+10 +17 FUNC +GLOBAL +DEFAULT +1 main`,
		`8: 0+ +0 NOTYPE +GLOBAL +DEFAULT +UND puts`,
		`There are no program headers in this file`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("readelf -W -a: no match for %s in\n%s", re, out)
		}
	}

	elflint := tooltest.Require(t, "eu-elflint")
	if b, err := exec.Command(elflint, "--gnu-ld", path).CombinedOutput(); err != nil || !strings.Contains(string(b), "No errors") {
		t.Errorf("eu-elflint --gnu-ld: %v\n%s", err, b)
	}

	gcc := tooltest.Require(t, "gcc")
	exe := filepath.Join(dir, "hello")
	if b, err := exec.Command(gcc, "-o", exe, path).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	if b, err := exec.Command(exe).CombinedOutput(); err != nil || string(b) != "hello from elfobj\n" {
		t.Errorf("the linked program printed %q, %v", b, err)
	}
	ld := tooltest.Require(t, "ld")
	merged := filepath.Join(dir, "merged.o")
	if b, err := exec.Command(ld, "-r", "-o", merged, path).CombinedOutput(); err != nil {
		t.Errorf("ld -r: %v\n%s", err, b)
	}
	_, syms := tooltest.ELFSymbols(t, merged)
	var got []string
	for _, s := range syms {
		if s.Name != "" {
			got = append(got, s.Name)
		}
	}
	slices.Sort(got)
	if want := "greet hello.c main puts table"; strings.Join(got, " ") != want {
		t.Errorf("ld -r symbols %q, want %q", got, want)
	}
}

// TestReadelfSample: readelf reads the sample file of every class and
// byte order without a warning, with the sections, segments, symbols,
// relocations, dynamic entries and notes the writer was given.
func TestReadelfSample(t *testing.T) {
	for _, c := range classes {
		t.Run(fmt.Sprint(c.class, c.data), func(t *testing.T) {
			out, _ := writeSample(t, c.class, c.data)
			text, stderr := readelf.Run(t, out, "-W", "-a", "-n")
			if stderr != "" {
				t.Errorf("readelf warns:\n%s", stderr)
			}
			for _, re := range []string{
				`Type:\s+DYN`,
				`OS/ABI:\s+UNIX - GNU`,
				`Number of section headers:\s+10`,
				`\[ 3\] \.bss\s+NOBITS`,
				`LOAD\s+0x0+ 0x0+ 0x0+ 0x0*10\w\w 0x0*10\w\w RWE 0x1000`,
				`DYNAMIC\s+0x0*10\w\w`,
				`Build ID: [0-9a-f]{40}`,
				`\(NEEDED\)\s+Shared library: \[libc\.so\.6\]`,
				`R_X86_64_PLT32\s+0+\s+ext - 4`,
				`FUNC +LOCAL +DEFAULT +2 helper`,
				`OBJECT +WEAK +DEFAULT +3 weak`,
			} {
				if !regexp.MustCompile(re).MatchString(text) {
					t.Errorf("readelf: no match for %s in\n%s", re, text)
				}
			}
		})
	}
}

// TestELF32Relocatable: eu-elflint accepts the ELF32 little- and
// big-endian variants of a relocatable object (i386 and SPARC have none of
// x86-64's relocation types, so the object has a symbol table only).
func TestELF32Relocatable(t *testing.T) {
	elflint := tooltest.Require(t, "eu-elflint")
	for _, c := range []struct {
		data    elf.Data
		machine elf.Machine
	}{{elf.ELFDATA2LSB, elf.EM_386}, {elf.ELFDATA2MSB, elf.EM_PPC}} {
		w := elfobj.NewWriter(elf.ELFCLASS32, c.data)
		text := w.AddSection(elf.SectionHeader{Name: ".text", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Addralign: 4})
		symtab := w.AddSection(elf.SectionHeader{Name: ".symtab", Type: elf.SHT_SYMTAB})
		strtab := w.AddSection(elf.SectionHeader{Name: ".strtab", Type: elf.SHT_STRTAB, Addralign: 1})
		var strs elfobj.StringTable
		name := strs.Add("f")
		w.ReserveLocalSymbols(1)
		w.ReserveGlobalSymbols(1)
		w.ReserveFileHeader()
		w.ReserveSectionData(text, 4)
		w.ReserveSymtab(symtab, strtab)
		w.ReserveStringTable(strtab, &strs)
		sh := w.ReserveShstrtab()
		w.ReserveSectionHeaders()
		w.WriteFileHeader(elfobj.FileHeader{Type: elf.ET_REL, Machine: c.machine})
		w.WriteSection(text, []byte{0xc3, 0x90, 0x90, 0x90})
		w.WriteNullSymbol()
		w.WriteSymbol(elf.Sym64{Info: elf.ST_INFO(elf.STB_LOCAL, elf.STT_SECTION), Shndx: uint16(text.Index())})
		w.WriteSymbol(elf.Sym64{Name: name, Info: elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC), Shndx: uint16(text.Index()), Size: 1})
		w.WriteStringTable(strtab)
		w.WriteStringTable(sh)
		w.WriteSectionHeaders()
		out, err := w.Finish()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "o.o")
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		if b, err := exec.Command(elflint, "--gnu-ld", path).CombinedOutput(); err != nil || !bytes.Contains(b, []byte("No errors")) {
			t.Errorf("%v: eu-elflint --gnu-ld: %v\n%s", c.data, err, b)
		}
	}
}
