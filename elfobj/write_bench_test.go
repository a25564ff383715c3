package elfobj_test

import (
	"debug/elf"
	"fmt"
	"testing"

	"github.com/elfimage/elfimage/elfobj"
)

// BenchmarkWriter writes the ELF structure of a 10,000-procedure image as
// the linker does (section contents other than code left to their
// builders): the headers, .text, .symtab and .strtab with a symbol per
// procedure, .shstrtab and a build ID. It measures the writer's own cost
// per procedure, SHA-1 of the file included.
func BenchmarkWriter(b *testing.B) {
	const n = 10000
	names := make([]string, n)
	size := 0
	for i := range names {
		names[i] = fmt.Sprintf("procedure_%05d", i)
		size += len(names[i]) + 1
	}
	offs := make([]uint32, n)
	code := make([]byte, 20)
	b.ReportAllocs()
	for b.Loop() {
		w := elfobj.NewWriter(elf.ELFCLASS64, elf.ELFDATA2LSB)
		add := func(name string, typ elf.SectionType, flags elf.SectionFlag, align uint64) *elfobj.Section {
			return w.AddSection(elf.SectionHeader{Name: name, Type: typ, Flags: flags, Addralign: align})
		}
		note := add(".note.gnu.build-id", elf.SHT_NOTE, elf.SHF_ALLOC, 4)
		text := add(".text", elf.SHT_PROGBITS, elf.SHF_ALLOC|elf.SHF_EXECINSTR, 16)
		symtab := add(".symtab", elf.SHT_SYMTAB, 0, 8)
		strtab := add(".strtab", elf.SHT_STRTAB, 0, 1)
		var strs elfobj.StringTable
		strs.Grow(size)
		for i, s := range names {
			offs[i] = strs.AddUnique(s)
		}
		w.ReserveGlobalSymbols(n)
		w.ReserveFileHeader()
		w.ReserveProgramHeaders(2)
		w.ReserveSectionData(note, elfobj.BuildIDNoteSize)
		w.ReserveAlign(4096)
		w.ReserveSectionData(text, 32*n)
		w.ReserveAlign(4096)
		w.ReserveSymtab(symtab, strtab)
		w.ReserveStringTable(strtab, &strs)
		shstrtab := w.ReserveShstrtab()
		w.ReserveSectionHeaders()
		note.Addr, text.Addr = note.Offset, text.Offset

		w.WriteFileHeader(elfobj.FileHeader{Type: elf.ET_DYN, Machine: elf.EM_X86_64})
		w.WriteProgramHeader(elf.ProgHeader{Type: elf.PT_LOAD, Flags: elf.PF_R, Filesz: note.Offset + note.Size, Memsz: note.Offset + note.Size, Align: 4096})
		w.WriteProgramHeader(elf.ProgHeader{Type: elf.PT_LOAD, Flags: elf.PF_R | elf.PF_X, Off: text.Offset, Vaddr: text.Addr, Filesz: text.Size, Memsz: text.Size, Align: 4096})
		w.WriteBuildID(note)
		t := w.SectionBytes(text)
		for i := range n {
			copy(t[32*i:], code)
		}
		w.WriteNullSymbol()
		for i := range n {
			w.WriteSymbol(elf.Sym64{Name: offs[i], Info: elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC), Shndx: uint16(text.Index()), Value: text.Addr + 32*uint64(i), Size: 20})
		}
		w.WriteStringTable(strtab)
		w.WriteStringTable(shstrtab)
		w.WriteSectionHeaders()
		if _, err := w.Finish(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/proc")
}
