package elfobj_test

import (
	"bytes"
	"crypto/sha1"
	"debug/elf"
	"fmt"
	"testing"

	"github.com/elfimage/elfimage/elfobj"
)

// hashedFile writes a file with a build ID, a second note, .text, a
// symbol table and the section headers, calling hook between (and inside)
// the writes; it returns the file and the offset of the build ID's
// descriptor.
func hashedFile(t *testing.T, hook func(w *elfobj.Writer)) ([]byte, int) {
	const n = 300
	w := elfobj.NewWriter(elf.ELFCLASS64, elf.ELFDATA2LSB)
	add := func(name string, typ elf.SectionType, flags elf.SectionFlag, align uint64) *elfobj.Section {
		return w.AddSection(elf.SectionHeader{Name: name, Type: typ, Flags: flags, Addralign: align})
	}
	note := add(".note", elf.SHT_NOTE, elf.SHF_ALLOC, 4)
	text := add(".text", elf.SHT_PROGBITS, elf.SHF_ALLOC|elf.SHF_EXECINSTR, 16)
	symtab := add(".symtab", elf.SHT_SYMTAB, 0, 8)
	strtab := add(".strtab", elf.SHT_STRTAB, 0, 1)
	var strs elfobj.StringTable
	offs := make([]uint32, n)
	for i := range offs {
		offs[i] = strs.AddUnique(fmt.Sprintf("p%d", i))
	}
	hook(w) // reserve phase: nothing to hash
	w.ReserveGlobalSymbols(n)
	w.ReserveFileHeader()
	w.ReserveProgramHeaders(2)
	w.ReserveSectionData(note, elfobj.BuildIDNoteSize+elfobj.NoteSize("Go", 3))
	w.ReserveAlign(4096)
	w.ReserveSectionData(text, 32*n)
	w.ReserveSymtab(symtab, strtab)
	w.ReserveStringTable(strtab, &strs)
	shstrtab := w.ReserveShstrtab()
	w.ReserveSectionHeaders()
	note.Addr, text.Addr = note.Offset, text.Offset
	w.WriteFileHeader(elfobj.FileHeader{Type: elf.ET_DYN, Machine: elf.EM_X86_64})
	hook(w)
	w.WriteProgramHeader(elf.ProgHeader{Type: elf.PT_LOAD, Flags: elf.PF_R, Filesz: note.Offset + note.Size, Memsz: note.Offset + note.Size, Align: 4096})
	hook(w) // inside the program header table
	w.WriteProgramHeader(elf.ProgHeader{Type: elf.PT_LOAD, Flags: elf.PF_R | elf.PF_X, Off: text.Offset, Vaddr: text.Addr, Filesz: text.Size, Memsz: text.Size, Align: 4096})
	w.WriteBuildID(note)
	hook(w) // between the notes
	w.WriteNote(note, "Go", 4, []byte{1, 2, 3})
	b := w.SectionBytes(text)
	for i := range b {
		b[i] = byte(i * 7)
	}
	hook(w)
	hook(w) // nothing new
	w.WriteNullSymbol()
	for i := range n {
		w.WriteSymbol(elf.Sym64{Name: offs[i], Info: elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC), Shndx: uint16(text.Index()), Value: text.Addr + 32*uint64(i), Size: 20})
		if i == n/2 {
			hook(w) // inside the symbol table
		}
	}
	w.WriteStringTable(strtab)
	hook(w)
	w.WriteStringTable(shstrtab)
	w.WriteSectionHeaders()
	hook(w) // everything written
	out, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return out, int(note.Offset) + 16
}

// TestHashWritten: calling HashWritten anywhere (before the write phase,
// inside tables and notes, twice in a row, after the last write) leaves
// the file byte-identical, and the build ID is the SHA-1 of the file with
// the descriptor zeroed.
func TestHashWritten(t *testing.T) {
	plain, desc := hashedFile(t, func(*elfobj.Writer) {})
	ahead, _ := hashedFile(t, (*elfobj.Writer).HashWritten)
	if !bytes.Equal(plain, ahead) {
		t.Fatal("HashWritten changed the file")
	}
	zeroed := bytes.Clone(plain)
	clear(zeroed[desc : desc+elfobj.BuildIDSize])
	if sum := sha1.Sum(zeroed); !bytes.Equal(sum[:], plain[desc:desc+elfobj.BuildIDSize]) {
		t.Errorf("build ID % x, want % x", plain[desc:desc+elfobj.BuildIDSize], sum)
	}
	// Only some of the points: every prefix the goroutines are handed.
	for skip := range 9 {
		k := 0
		got, _ := hashedFile(t, func(w *elfobj.Writer) {
			if k++; k%(skip+2) == 0 {
				w.HashWritten()
			}
		})
		if !bytes.Equal(plain, got) {
			t.Errorf("HashWritten at every %dth point changed the file", skip+2)
		}
	}
}
