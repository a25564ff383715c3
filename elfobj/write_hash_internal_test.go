package elfobj

import (
	"crypto/sha1"
	"debug/elf"
	"testing"
)

// TestHashWrittenPrefix: each HashWritten call hands the goroutines the
// bytes up to the end of the last range begun, short of a table still
// being written, and the hash they compute is the SHA-1 of that prefix.
func TestHashWrittenPrefix(t *testing.T) {
	w := NewWriter(elf.ELFCLASS64, elf.ELFDATA2LSB)
	note := w.AddSection(elf.SectionHeader{Name: ".note", Type: elf.SHT_NOTE, Flags: elf.SHF_ALLOC, Addralign: 4})
	text := w.AddSection(elf.SectionHeader{Name: ".text", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Addralign: 16})
	w.ReserveFileHeader()
	w.ReserveSectionData(note, BuildIDNoteSize+NoteSize("Go", 1))
	w.ReserveSectionData(text, 100)
	shstrtab := w.ReserveShstrtab()
	w.ReserveSectionHeaders()
	prefix := func(want uint64) {
		t.Helper()
		w.HashWritten()
		if uint64(w.ahead.upTo) != want {
			t.Fatalf("hashed ahead up to %#x, want %#x", w.ahead.upTo, want)
		}
		if want == 0 {
			return
		}
		<-w.ahead.done
		var got [sha1.Size]byte
		w.ahead.h.Sum(got[:0])
		if sha1.Sum(w.out[:want]) != got {
			t.Fatalf("hash of the first %#x bytes differs", want)
		}
	}
	w.WriteFileHeader(FileHeader{Type: elf.ET_DYN, Machine: elf.EM_X86_64})
	prefix(0) // no build ID yet
	w.WriteBuildID(note)
	prefix(note.Offset) // the note section is still being written
	w.WriteNote(note, "Go", 1, []byte{7})
	b := w.SectionBytes(text)
	for i := range b {
		b[i] = 0xcc
	}
	prefix(text.Offset + text.Size)
	w.WriteStringTable(shstrtab)
	w.WriteSectionHeaders()
	prefix(uint64(len(w.out)))
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}
