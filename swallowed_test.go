package elfimage

import (
	"bytes"
	"debug/elf"
	"errors"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/info"
	"github.com/elfimage/elfimage/meta"
)

// Errors that used to be swallowed into wrong answers (issue 14): each
// corrupt input now gives its error.

// TestUnitBaseError: a unit whose root DIE cannot be read gives an error,
// not base address 0 (which would move every location and range list
// entry of the unit); a readable root without DW_AT_low_pc gives 0.
func TestUnitBaseError(t *testing.T) {
	abbrev, data := deepInfo(1)
	im := &Image{path: "base", data: elfWithSections([]tailSection{
		{".debug_abbrev", elf.SHT_PROGBITS, abbrev},
		{".debug_info", elf.SHT_PROGBITS, data},
	})}
	u := &info.UnitHeader{Offset: 0}
	if base, err := im.unitBase(u); err != nil || base != 0 {
		t.Fatalf("unitBase of a unit without DW_AT_low_pc = %#x, %v; want 0, nil", base, err)
	}
	bad := bytes.Clone(data)
	bad[11] = 99 // the root DIE's abbreviation code: not declared
	im = &Image{path: "base", data: elfWithSections([]tailSection{
		{".debug_abbrev", elf.SHT_PROGBITS, abbrev},
		{".debug_info", elf.SHT_PROGBITS, bad},
	})}
	var fe *FormatError
	if base, err := im.unitBase(u); !errors.As(err, &fe) || fe.Source != ".debug_info" {
		t.Errorf("unitBase of a unit whose root DIE is unreadable = %#x, %v; want a FormatError in .debug_info", base, err)
	}
}

// dwarf4Sections links a one-procedure module with DWARF 4 (whose line
// program takes the compilation directory from the unit) and returns its
// .debug_abbrev, .debug_info, .debug_line and .debug_str.
func dwarf4Sections(t *testing.T) (abbrev, infoSec, lineSec, str []byte) {
	t.Helper()
	enc := dwarf.Default64
	enc.Version = 4
	m := &Module{File: "f.scm", CompDir: "/the/comp/dir", Procs: []*Proc{{
		Name: "f", Code: []byte{0x90, 0xc3}, Lines: []LineRow{{Offset: 0, Line: 3}},
	}}}
	b, err := Link(m, LinkOptions{DWARF: enc})
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	get := func(name string) []byte {
		s := f.Section(name)
		if s == nil {
			t.Fatalf("no %s", name)
		}
		d, err := s.Data()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	return get(".debug_abbrev"), get(".debug_info"), get(".debug_line"), get(".debug_str")
}

// TestCompDirError: with DWARF 4 the line table's directory 0 is the
// unit's DW_AT_comp_dir; a unit whose root DIE cannot be read makes the
// line table fail instead of naming every file relative to "".
func TestCompDirError(t *testing.T) {
	abbrev, infoSec, lineSec, str := dwarf4Sections(t)
	image := func(infoSec []byte) *Image {
		return &Image{path: "dwarf4", data: elfWithSections([]tailSection{
			{".debug_abbrev", elf.SHT_PROGBITS, abbrev},
			{".debug_info", elf.SHT_PROGBITS, infoSec},
			{".debug_line", elf.SHT_PROGBITS, lineSec},
			{".debug_str", elf.SHT_PROGBITS, str},
		})}
	}
	tab, err := image(infoSec).LineTable()
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := tab.File(1); !ok || f.Path != "/the/comp/dir/f.scm" {
		t.Fatalf("file 1 = %+v, want /the/comp/dir/f.scm", f)
	}
	bad := bytes.Clone(infoSec)
	bad[11] = 99 // the root DIE's abbreviation code: not declared
	var fe *FormatError
	if tab, err := image(bad).LineTable(); !errors.As(err, &fe) || fe.Source != ".debug_info" {
		t.Errorf("LineTable with an unreadable unit = %v, %v; want a FormatError in .debug_info", tab, err)
	}
	im := image(bad)
	if _, err := im.lineUnit(0); !errors.As(err, &fe) {
		t.Errorf("line unit with an unreadable unit: %v, want a FormatError", err)
	}
}

// TestProcStringsError: a procedure table that keeps its strings in
// .elfimage.strs (meta.EncodeWith) in an image without that section gives
// an error wrapping ErrNoSection, not procedures with empty names.
func TestProcStringsError(t *testing.T) {
	st := dwarf.NewStrTab()
	st.Add("")
	procs, err := meta.EncodeWith([]meta.Proc{{Name: "hello", Start: 0x1000, Size: 16}}, st)
	if err != nil {
		t.Fatal(err)
	}
	if !meta.ExternalStrings(procs) {
		t.Fatal("EncodeWith's table does not say its strings are outside it")
	}
	with := &Image{path: "procs", data: elfWithSections([]tailSection{
		{meta.SectionProcs, elf.SHT_PROGBITS, procs},
		{meta.SectionStrs, elf.SHT_STRTAB, st.Bytes()},
	})}
	if p, err := with.Procedure(0x1008); err != nil || p.Name != "hello" {
		t.Fatalf("Procedure with the strings = %+v, %v; want hello", p, err)
	}
	without := &Image{path: "procs", data: elfWithSections([]tailSection{
		{meta.SectionProcs, elf.SHT_PROGBITS, procs},
	})}
	p, err := without.Procedure(0x1008)
	if !errors.Is(err, ErrNoSection) || !strings.Contains(err.Error(), "strings") {
		t.Errorf("Procedure without .elfimage.strs = %+v, %v; want an error wrapping ErrNoSection", p, err)
	}
	// Through the program header, as images are loaded.
	tail := &Image{path: "procs", data: without.data, plan: plan{tail: tailSections{procs}}} // [0]: PTProcTable
	if _, err := tail.Procedure(0x1008); !errors.Is(err, ErrNoSection) {
		t.Errorf("Procedure through PTProcTable without .elfimage.strs: %v, want ErrNoSection", err)
	}
}
