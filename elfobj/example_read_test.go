package elfobj_test

import (
	"debug/elf"
	"fmt"
	"os"

	"github.com/elfimage/elfimage/elfobj"
)

// Read a relocatable object's sections and symbols.
func ExampleOpen() {
	f, err := elfobj.Open("testdata/gcc-i386-dwarf5.o")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	fmt.Println(f.Class, f.Header.Data, f.Type, f.Machine)
	st, err := f.SymbolsOfType(elf.SHT_SYMTAB)
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := range st.Len() {
		if s := st.Sym(i); s.Type() == elf.STT_FUNC {
			name, _ := st.Name(i)
			fmt.Println(name, s.Bind(), f.Sections[s.Section].Name)
		}
	}
	// Output:
	// ELFCLASS32 ELFDATA2LSB ET_REL EM_386
	// add STB_GLOBAL .text
	// cold STB_GLOBAL .text.cold
	// compute STB_GLOBAL .text
	// __x86.get_pc_thunk.bp STB_GLOBAL .text.__x86.get_pc_thunk.bp
}

// A relocatable object's DWARF must be relocated before it is decoded:
// here the first string offset (DW_AT_producer, DW_FORM_strp) of the
// only compile unit of a DWARF 4 object.
func ExampleFile_DebugSection() {
	data, err := os.ReadFile("testdata/gcc-x86-64-dwarf4-sections.o")
	if err != nil {
		fmt.Println(err)
		return
	}
	f, err := elfobj.NewBytes(data) // sections are used in place
	if err != nil {
		fmt.Println(err)
		return
	}
	info, err := f.DebugSection(".debug_info") // relocated copy
	if err != nil {
		fmt.Println(err)
		return
	}
	raw, _ := f.SectionData(f.FindSection(".debug_info"))
	// DWARF 4 unit header: length 4, version 2, abbrev offset 4, address
	// size 1, then the first attribute of the unit DIE after its code.
	fmt.Println(f.ByteOrder.Uint32(raw[12:]), f.ByteOrder.Uint32(info[12:]) != 0)
	// Output:
	// 0 true
}
