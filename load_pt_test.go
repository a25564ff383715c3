package elfimage

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// TestTailProgramHeaders: the program headers that point into the tail
// (PTProcTable, PTLineProgram, PTLineStrings) are found at load, only
// their bounds are checked, corrupt ones are refused with an error that
// names the field, and ones pointing past the end of the file (as
// eu-strip leaves them) or empty (objcopy) are ignored with a note, the
// queries then finding the section through the section headers.
func TestTailProgramHeaders(t *testing.T) {
	m := &Module{File: "t.s", Arch: hostArch, Procs: []*Proc{{Name: "f", Code: []byte{0xc3}, Lines: []LineRow{{Line: 1, Column: 1}}}}}
	b, err := Link(m, LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	phoff, phnum := le.Uint64(b[32:]), int(le.Uint16(b[56:]))
	find := func(img []byte, typ elf.ProgType) int {
		for i := range phnum {
			if elf.ProgType(le.Uint32(img[phoff+uint64(i)*phdrSize:])) == typ {
				return int(phoff) + i*phdrSize
			}
		}
		t.Fatalf("no program header of type %#x", uint32(typ))
		return 0
	}
	im, err := Load("t.elf", b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []elf.ProgType{PTProcTable, PTLineProgram, PTLineStrings} {
		if im.tail.get(typ) == nil {
			t.Errorf("program header %#x not found at load", uint32(typ))
		}
	}
	if p, err := im.Procedure(0x1000); err != nil || p.Name != "f" {
		t.Errorf("Procedure through PTProcTable = %+v, %v", p, err)
	}
	im.Close()

	for _, c := range []struct {
		name  string
		patch func(img []byte)
		field string
	}{
		{"loaded size", func(img []byte) { le.PutUint64(img[find(img, PTLineStrings)+40:], 8) }, "p_memsz of program header"},
		{"twice", func(img []byte) { le.PutUint32(img[find(img, elf.PT_GNU_STACK):], uint32(PTProcTable)) }, "p_type of program header"},
	} {
		img := append([]byte(nil), b...)
		c.patch(img)
		_, err := Load("bad.elf", img, nil)
		var fe *FormatError
		if !errors.As(err, &fe) || !strings.HasPrefix(fe.Field, c.field) {
			t.Errorf("%s: err = %v, want a FormatError on %q", c.name, err, c.field)
		}
	}
	for _, c := range []struct {
		name  string
		patch func(img []byte)
	}{
		{"past end of file", func(img []byte) { le.PutUint64(img[find(img, PTProcTable)+32:], uint64(len(img))) }},
		{"offset past end", func(img []byte) { le.PutUint64(img[find(img, PTProcTable)+8:], uint64(len(img))+1) }},
		{"empty", func(img []byte) { le.PutUint64(img[find(img, PTProcTable)+32:], 0) }},
	} {
		img := append([]byte(nil), b...)
		c.patch(img)
		im, err := Load("stripped.elf", img, nil)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if n := im.LoadNotes(); len(n) != 1 || !strings.Contains(n[0], "PTProcTable") || !strings.Contains(n[0], "ignored") {
			t.Errorf("%s: notes %q", c.name, n)
		}
		if im.tail.get(PTProcTable) != nil {
			t.Errorf("%s: the program header was used", c.name)
		}
		if p, err := im.Procedure(0x1000); err != nil || p.Name != "f" {
			t.Errorf("%s: Procedure through the section headers = %+v, %v", c.name, p, err)
		}
		im.Close()
	}
}
