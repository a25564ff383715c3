package elfimage_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	edwarf "github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/frame"
)

// TestLinkRefusesInvalidModelsMore extends TestLinkRefusesInvalidModels
// (issue 6, point 5): each invalid model gives a *LinkError naming the
// object at fault and saying what is wrong, and no image.
func TestLinkRefusesInvalidModelsMore(t *testing.T) {
	fbreg := []byte{byte(edwarf.DW_OP_fbreg), 0}
	valid := func() *elfimage.Module {
		return &elfimage.Module{
			File: "m.s",
			Procs: []*elfimage.Proc{{
				Name: "f", Code: []byte{0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3},
				Lines: []elfimage.LineRow{{Offset: 0, Line: 1, Column: 1}, {Offset: 4, Line: 2, Column: 1}},
				CFI: []frame.Insn{
					{PC: 1, Op: frame.OpDefCFAOffset, Offset: 16},
					{PC: 1, Op: frame.OpOffset, Reg: arch.X86_64_RBP, Offset: -16},
					{PC: 4, Op: frame.OpRememberState},
					{PC: 5, Op: frame.OpDefCFAOffset, Offset: 8},
					{PC: 5, Op: frame.OpRestoreState},
				},
				Params: []elfimage.Var{{Name: "x", Location: fbreg, Live: []elfimage.LiveRange{{Start: 1, End: 5, Location: fbreg}}}},
				Scopes: []*elfimage.Scope{{Ranges: []elfimage.CodeRange{{Start: 1, End: 5}},
					Vars:   []elfimage.Var{{Name: "y", Location: fbreg}},
					Scopes: []*elfimage.Scope{{Ranges: []elfimage.CodeRange{{Start: 2, End: 4}}}}}},
			}},
			Data: []*elfimage.Datum{{Name: "tab", Bytes: make([]byte, 16), Relocs: []elfimage.Reloc{{Offset: 8, Type: elfimage.RelocAbs64, Symbol: "f"}}}},
		}
	}
	if _, err := elfimage.Link(valid(), elfimage.LinkOptions{}); err != nil {
		t.Fatalf("valid model refused: %v", err)
	}
	f := func(m *elfimage.Module) *elfimage.Proc { return m.Procs[0] }
	for _, c := range []struct {
		name, object, msg string
		breakIt           func(m *elfimage.Module)
	}{
		// Relocations outside their section.
		{"Abs64 at the last byte", "", "", func(m *elfimage.Module) { m.Data[0].Relocs[0].Offset = 15 }},
		{"Abs64 offset max", "", "", func(m *elfimage.Module) { m.Data[0].Relocs[0].Offset = ^uint32(0) }},
		{"PC32 offset max", "", "", func(m *elfimage.Module) {
			f(m).Relocs = []elfimage.Reloc{{Offset: ^uint32(0), Type: elfimage.RelocPC32, Symbol: "f"}}
		}},
		{"PC32 in rodata to unknown symbol", "", "", func(m *elfimage.Module) {
			m.ROData = []*elfimage.Datum{{Name: "ro", Bytes: make([]byte, 8), Relocs: []elfimage.Reloc{{Type: elfimage.RelocPC32, Symbol: "nope"}}}}
		}},
		{"Abs64 in rodata", "datum ro", "only allowed in Module.Data", func(m *elfimage.Module) {
			m.ROData = []*elfimage.Datum{{Name: "ro", Bytes: make([]byte, 8), Relocs: []elfimage.Reloc{{Type: elfimage.RelocAbs64, Symbol: "f"}}}}
		}},
		// Line rows.
		{"line row backwards", "proc f", "backwards", func(m *elfimage.Module) { f(m).Lines[1].Offset = 0; f(m).Lines[0].Offset = 4 }},
		{"line row at code end", "proc f", "past the end", func(m *elfimage.Module) { f(m).Lines[1].Offset = 6 }},
		{"line row offset max", "proc f", "past the end", func(m *elfimage.Module) { f(m).Lines[1].Offset = ^uint32(0) }},
		// Call frame information: the FDE's instructions must fit its CIE
		// and code.
		{"CFI at code end", "module", "", func(m *elfimage.Module) { f(m).CFI[3].PC = 6 }},
		{"CFI PC max", "module", "", func(m *elfimage.Module) { f(m).CFI[3].PC = ^uint64(0) }},
		{"CFI restore_state without remember_state", "proc f", "restore_state", func(m *elfimage.Module) { f(m).CFI[2].Op = frame.OpNop }},
		{"CFI unknown op", "module", "", func(m *elfimage.Module) { f(m).CFI[0].Op = 200 }},
		{"CFI expression empty", "module", "", func(m *elfimage.Module) {
			f(m).CFI[0] = frame.Insn{PC: 1, Op: frame.OpDefCFAExpression}
		}},
		// Variables and scopes.
		{"live range past the code", "proc f", "", func(m *elfimage.Module) { f(m).Params[0].Live[0].End = 7 }},
		{"live range empty", "proc f", "", func(m *elfimage.Module) { f(m).Params[0].Live[0].End = 1 }},
		{"live range without location", "proc f", "no location", func(m *elfimage.Module) { f(m).Params[0].Live[0].Location = nil }},
		{"scope without ranges", "proc f", "scope without code ranges", func(m *elfimage.Module) { f(m).Scopes[0].Ranges = nil }},
		{"scope range past the code", "proc f", "", func(m *elfimage.Module) { f(m).Scopes[0].Ranges[0].End = 100 }},
		{"nested scope outside its parent", "proc f", "not inside its enclosing scope", func(m *elfimage.Module) {
			f(m).Scopes[0].Scopes[0].Ranges[0] = elfimage.CodeRange{Start: 0, End: 2}
		}},
		{"scope ranges overlapping", "proc f", "", func(m *elfimage.Module) {
			f(m).Scopes[0].Ranges = []elfimage.CodeRange{{Start: 1, End: 4}, {Start: 3, End: 5}}
		}},
		// Data.
		{"datum alignment not pow2", "datum tab", "alignment", func(m *elfimage.Module) { m.Data[0].Align = 3 }},
		{"datum alignment past a page", "datum tab", "alignment", func(m *elfimage.Module) { m.Data[0].Align = 1 << 20 }},
		{"unnamed datum", "module", "unnamed", func(m *elfimage.Module) { m.Data[0].Name = "" }},
		{"unnamed procedure", "module", "unnamed", func(m *elfimage.Module) { f(m).Name = "" }},
	} {
		m := valid()
		c.breakIt(m)
		img, err := elfimage.Link(m, elfimage.LinkOptions{})
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		var le *elfimage.LinkError
		if !errors.As(err, &le) {
			t.Errorf("%s: err = %v (%T), want *LinkError", c.name, err, err)
			continue
		}
		if img != nil {
			t.Errorf("%s: an image came with the error", c.name)
		}
		if c.object != "" && le.Object != c.object || !strings.Contains(le.Msg, c.msg) {
			t.Errorf("%s: %v; want object %q and %q in the message", c.name, err, c.object, c.msg)
		}
	}
}
