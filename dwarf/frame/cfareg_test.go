package frame

import (
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
)

// TestDefCFARegisterFirst: a CIE whose first instruction is
// DW_CFA_def_cfa_register, before any CFA rule (what gcc writes for MIPS
// and RISC-V: "DW_CFA_def_cfa_register: r29"), makes the CFA
// register+0, as readelf ("r29+0") and llvm-dwarfdump ("CFA=X2") take
// it; a later DW_CFA_def_cfa_offset then changes only the offset. So does
// one after a DW_CFA_def_cfa_expression rule. DW_CFA_def_cfa_offset
// without a register rule stays an error (TestInstructionErrors).
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
	})
	sec := NewDebugFrame(s.b, le, 8)
	var e Exec
	var row Row
	c, err := sec.CIEAt(cie)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.InitialRow(sec, &c, &row); err != nil {
		t.Fatal(err)
	}
	if row.CFA.Kind != RuleCFA || row.CFA.Reg != 29 || row.CFA.Offset != 0 {
		t.Errorf("CIE row CFA %+v, want r29+0", row.CFA)
	}
	var fde *ParsedFDE
	if err := sec.Entries(func(_ *ParsedCIE, f *ParsedFDE) bool {
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
	want := []string{"r29+0", "r29+32", "exp", "r30+0"}
	if !equalStrings(got, want) {
		t.Errorf("CFA rules %q, want %q", got, want)
	}
}
