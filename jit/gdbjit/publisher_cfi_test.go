//go:build linux && amd64

package gdbjit

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/elfimage/elfimage/dwarf/frame"
)

// TestPublisherCFI publishes procedures one at a time, every other one
// with CFI, flushing after each so that repacking merges files, and reads
// the symbol files back from the list as a debugger does: each procedure
// with CFI has exactly one FDE over its range with the rows given at Add
// (the caller's slice is changed after Add, which must not show), none
// without CFI has one, and every file's build ID is the SHA-1 of its
// bytes.
func TestPublisherCFI(t *testing.T) {
	const n, base = 12, 0x7f4000000000
	pub := NewPublisher(PublisherOptions{})
	defer pub.Close()
	for i := range n {
		p := Proc{Name: fmt.Sprintf("cfi%d", i), Addr: base + uint64(i)*32, Size: 16}
		if i%2 == 0 {
			cfi := []frame.Insn{{PC: 4, Op: frame.OpDefCFAOffset, Offset: 16 * int64(i+1)}}
			p.CFI = cfi
			if err := pub.Add(p); err != nil {
				t.Fatal(err)
			}
			cfi[0].Offset = 8 // after Add: must not reach the symbol file
		} else if err := pub.Add(p); err != nil {
			t.Fatal(err)
		}
		if err := pub.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	st := pub.Stats()
	if st.Registrations <= n {
		t.Errorf("%d registrations for %d procedures flushed one by one: no file was merged", st.Registrations, n)
	}
	fdes := map[uint64]int{}
	for i, b := range readView(t).files {
		checkBuildID(t, b)
		f, err := elf.NewFile(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("symbol file %d: %v", i, err)
		}
		s := f.Section(".eh_frame")
		if s == nil {
			continue
		}
		data, err := s.Data()
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := frame.NewEHFrame(data, 0, binary.LittleEndian, 8).FDEs()
		if err != nil {
			t.Fatalf("symbol file %d .eh_frame: %v", i, err)
		}
		for j := range parsed {
			fd := &parsed[j]
			fdes[fd.Start]++
			k := int(fd.Start-base) / 32
			rows, err := frame.Table(fd)
			if err != nil {
				t.Fatal(err)
			}
			if fd.Size != 16 || len(rows) != 2 || rows[1].Loc != fd.Start+4 || rows[1].CFA.Offset != 16*int64(k+1) {
				t.Errorf("FDE at %#x: size %d, rows %+v, want size 16 and CFA offset %d from +4", fd.Start, fd.Size, rows, 16*(k+1))
			}
		}
	}
	for i := range n {
		addr := base + uint64(i)*32
		if want := 1 - i%2; fdes[addr] != want {
			t.Errorf("cfi%d at %#x: %d FDEs in the registered files, want %d", i, addr, fdes[addr], want)
		}
	}
}
