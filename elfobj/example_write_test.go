package elfobj_test

import (
	"bytes"
	"debug/elf"
	"fmt"

	"github.com/elfimage/elfimage/elfobj"
)

// A relocatable object with one function, f, that returns: its section,
// the symbol table (the null and section symbols local, f global) and the
// section name table, reserved then written in the same order.
func ExampleWriter() {
	code := []byte{0xc3} // ret
	w := elfobj.NewWriter(elf.ELFCLASS64, elf.ELFDATA2LSB)
	text := w.AddSection(elf.SectionHeader{Name: ".text", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Addralign: 16})
	symtab := w.AddSection(elf.SectionHeader{Name: ".symtab", Type: elf.SHT_SYMTAB})
	strtab := w.AddSection(elf.SectionHeader{Name: ".strtab", Type: elf.SHT_STRTAB, Addralign: 1})
	var strs elfobj.StringTable
	name := strs.Add("f")
	w.ReserveLocalSymbols(1) // the STT_SECTION symbol of .text
	w.ReserveGlobalSymbols(1)

	w.ReserveFileHeader()
	w.ReserveSectionData(text, uint64(len(code)))
	w.ReserveSymtab(symtab, strtab)
	w.ReserveStringTable(strtab, &strs)
	shstrtab := w.ReserveShstrtab()
	w.ReserveSectionHeaders()

	w.WriteFileHeader(elfobj.FileHeader{Type: elf.ET_REL, Machine: elf.EM_X86_64})
	w.WriteSection(text, code)
	w.WriteNullSymbol()
	w.WriteSymbol(elf.Sym64{Info: elf.ST_INFO(elf.STB_LOCAL, elf.STT_SECTION), Shndx: uint16(text.Index())})
	w.WriteSymbol(elf.Sym64{Name: name, Info: elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC), Shndx: uint16(text.Index()), Size: uint64(len(code))})
	w.WriteStringTable(strtab)
	w.WriteStringTable(shstrtab)
	w.WriteSectionHeaders()
	file, err := w.Finish()
	if err != nil {
		fmt.Println(err)
		return
	}

	f, err := elf.NewFile(bytes.NewReader(file))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f.Type, len(file), "bytes")
	for _, s := range f.Sections[1:] {
		fmt.Printf("%-9s %-12v offset %#x size %d link %d info %d\n", s.Name, s.Type, s.Offset, s.Size, s.Link, s.Info)
	}
	syms, _ := f.Symbols()
	for _, s := range syms {
		fmt.Printf("symbol %q %v %v\n", s.Name, elf.ST_BIND(s.Info), elf.ST_TYPE(s.Info))
	}
	// Output:
	// ET_REL 504 bytes
	// .text     SHT_PROGBITS offset 0x40 size 1 link 0 info 0
	// .symtab   SHT_SYMTAB   offset 0x48 size 72 link 3 info 2
	// .strtab   SHT_STRTAB   offset 0x90 size 3 link 0 info 0
	// .shstrtab SHT_STRTAB   offset 0x93 size 33 link 0 info 0
	// symbol "" STB_LOCAL STT_SECTION
	// symbol "f" STB_GLOBAL STT_FUNC
}
