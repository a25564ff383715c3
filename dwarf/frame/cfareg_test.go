package frame

import (
	"debug/elf"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/internal/readelf"
)

// TestDefCFARegisterFirst: a CIE whose first instruction is
// DW_CFA_def_cfa_register, before any CFA rule (what gcc writes for MIPS
// and RISC-V: "DW_CFA_def_cfa_register: r29"), makes the CFA
// register+0, as readelf ("r29+0") and llvm-dwarfdump ("CFA=X2") take
// it; a later DW_CFA_def_cfa_offset then changes only the offset. After a
// DW_CFA_def_cfa_expression, DW_CFA_def_cfa_offset records an offset and
// keeps the expression, and DW_CFA_def_cfa_register takes the last
// offset, as libgcc's execute_cfa_program and readelf do (llvm-dwarfdump
// takes 0 there; libgcrypt's hand-written assembly has this shape, and
// readelf prints "rsp+56" after it). DW_CFA_def_cfa_offset before any
// CFA rule is an error.
func TestDefCFARegisterFirst(t *testing.T) {
	s := &sec{}
	cie := s.entry32(func(uint64) uint32 { return 0xffffffff }, func() {
		s.u8(1)
		s.str("")
		s.uleb(1)
		s.sleb(-4)
		s.u8(31)
		s.u8(byte(dwarf.DW_CFA_def_cfa_register), 29)
	})
	s.entry32(func(uint64) uint32 { return uint32(cie) }, func() {
		s.u64(0x400)
		s.u64(0x40)
		s.u8(byte(dwarf.DW_CFA_advance_loc)|4, byte(dwarf.DW_CFA_def_cfa_offset), 32)
		s.u8(byte(dwarf.DW_CFA_advance_loc)|4, byte(dwarf.DW_CFA_def_cfa_expression), 2, byte(dwarf.DW_OP_breg0)+29, 8)
		s.u8(byte(dwarf.DW_CFA_advance_loc)|4, byte(dwarf.DW_CFA_def_cfa_register), 30)
		s.u8(byte(dwarf.DW_CFA_advance_loc)|4, byte(dwarf.DW_CFA_def_cfa_expression), 2, byte(dwarf.DW_OP_breg0)+29, 8)
		s.u8(byte(dwarf.DW_CFA_def_cfa_offset), 48)
		s.u8(byte(dwarf.DW_CFA_advance_loc)|4, byte(dwarf.DW_CFA_def_cfa_register), 31)
	})
	fs := NewDebugFrame(s.b, le, 8)
	var e Exec
	var row Row
	c, err := fs.CIEAt(cie)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.InitialRow(fs, &c, &row); err != nil {
		t.Fatal(err)
	}
	if row.CFA.Kind != RuleCFA || row.CFA.Reg != 29 || row.CFA.Offset != 0 {
		t.Errorf("CIE row CFA %+v, want r29+0", row.CFA)
	}
	var fde *ParsedFDE
	if err := fs.Entries(func(_ *ParsedCIE, f *ParsedFDE) bool {
		if f != nil {
			fde = f
		}
		return true
	}); err != nil || fde == nil {
		t.Fatalf("Entries: %v, FDE %v", err, fde)
	}
	rows, err := Table(fde)
	if err != nil {
		t.Fatal(err)
	}
	name := func(r arch.Reg) string { n, _ := arch.DWARFRegName(0, r); return n }
	var got []string
	for _, r := range rows {
		got = append(got, r.CFA.Format(name))
	}
	want := []string{"r29+0", "r29+32", "exp", "r30+32", "exp", "r31+48"}
	if !equalStrings(got, want) {
		t.Errorf("CFA rules %q, want %q", got, want)
	}

	// readelf agrees on every row.
	file := readelf.WriteELF(elf.EM_MIPS, []readelf.Section{{Name: ".debug_frame", Data: s.b}})
	text, _ := readelf.Run(t, file, "-W", "--debug-dump=frames-interp")
	var res []string
	for _, line := range strings.Split(text, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && len(f[0]) == 16 && f[0] != "0000000000000000" {
			res = append(res, f[1]) // the FDE's rows
		}
	}
	if !equalStrings(res, want) {
		t.Errorf("readelf's CFA rules %q, want %q\n%s", res, want, text)
	}

	// DW_CFA_def_cfa_offset with no CFA rule at all.
	s = &sec{}
	s.entry32(func(uint64) uint32 { return 0xffffffff }, func() {
		s.u8(1)
		s.str("")
		s.uleb(1)
		s.sleb(-4)
		s.u8(31)
		s.u8(byte(dwarf.DW_CFA_def_cfa_offset), 8)
	})
	fs = NewDebugFrame(s.b, le, 8)
	if c, err = fs.CIEAt(0); err != nil {
		t.Fatal(err)
	}
	if err := e.InitialRow(fs, &c, &row); err == nil || !strings.Contains(err.Error(), "not register+offset") {
		t.Errorf("def_cfa_offset first: err %v, want \"not register+offset\"", err)
	}
}
