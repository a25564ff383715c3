package elfimage_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	edwarf "github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/expr"
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
		{"CFI at code end", "proc f", "CFI instruction 3 (def_cfa_offset at pc 0x6): PC is at or past the end of the code", func(m *elfimage.Module) { f(m).CFI[3].PC = 6 }},
		{"CFI PC max", "proc f", "CFI instruction 3", func(m *elfimage.Module) { f(m).CFI[3].PC = ^uint64(0) }},
		{"CFI restore_state without remember_state", "proc f", "restore_state", func(m *elfimage.Module) { f(m).CFI[2].Op = frame.OpNop }},
		{"CFI unknown op", "proc f", "CFI: ", func(m *elfimage.Module) { f(m).CFI[0].Op = 200 }},
		{"CFI expression empty", "proc f", "CFI instruction 0 (def_cfa_expression at pc 0x1): empty expression (Expr)", func(m *elfimage.Module) {
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
		{"unnamed datum", "module", "datum 0 of Module.Data has no Name", func(m *elfimage.Module) { m.Data[0].Name = "" }},
		{"unnamed procedure", "module", "procedure 0 (Module.Procs[0]) has no Name", func(m *elfimage.Module) { f(m).Name = "" }},
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

// TestLinkRefusesInvalidModelsTyped covers what issue 13 (point 3) asks
// Link to refuse: each invalid model gives a *LinkError whose Object names
// the procedure (or datum) and whose message names the field at fault.
func TestLinkRefusesInvalidModelsTyped(t *testing.T) {
	valid := func() *elfimage.Module {
		node := &elfimage.Type{Kind: elfimage.KindStruct, Name: "node", Size: 16}
		node.Members = []elfimage.Member{{Name: "value", Type: elfimage.IntType(8)}, {Name: "next", Offset: 8, Type: elfimage.PointerTo(node)}}
		vm := elfimage.StructOf("vm", 24,
			elfimage.Member{Name: "data", Type: elfimage.PointerTo(elfimage.UintType(1))},
			elfimage.Member{Name: "cells", Offset: 8, Type: elfimage.ArrayOf(elfimage.IntType(4), 2)},
			elfimage.Member{Name: "list", Offset: 16, Type: elfimage.PointerTo(node)})
		return &elfimage.Module{
			File: "m.s",
			Procs: []*elfimage.Proc{{
				Name: "f", Code: []byte{0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3},
				CFI: []frame.Insn{
					{PC: 1, Op: frame.OpDefCFAOffset, Offset: 16},
					{PC: 1, Op: frame.OpOffset, Reg: arch.X86_64_RBP, Offset: -16},
					{PC: 4, Op: frame.OpDefCFA, Reg: arch.X86_64_RSP, Offset: 8},
				},
				Result: elfimage.IntType(4),
				Params: []elfimage.Var{
					{Name: "vm", Type: elfimage.PointerTo(vm), Location: expr.Reg(arch.X86_64_RDI)},
					{Name: "n", Type: elfimage.UintType(8), Location: expr.Reg(arch.X86_64_RSI)},
				},
				Scopes: []*elfimage.Scope{
					{Ranges: []elfimage.CodeRange{{Start: 1, End: 3}}, Vars: []elfimage.Var{
						{Name: "cells", Type: &elfimage.Type{Kind: elfimage.KindArray, Elem: elfimage.IntType(8), CountVar: "n"}, Location: expr.Breg(arch.X86_64_RDI, 8)},
						{Name: "k", Type: elfimage.EnumOf("color", 1, elfimage.Enumerator{Name: "red"}, elfimage.Enumerator{Name: "blue", Value: 255}), Location: expr.Fbreg(-8)},
					}},
					{Ranges: []elfimage.CodeRange{{Start: 3, End: 5}}},
				},
			}},
			Data: []*elfimage.Datum{{Name: "tab", Bytes: make([]byte, 8)}},
		}
	}
	if _, err := elfimage.Link(valid(), elfimage.LinkOptions{}); err != nil {
		t.Fatalf("valid model refused: %v", err)
	}
	f := func(m *elfimage.Module) *elfimage.Proc { return m.Procs[0] }
	vmType := func(m *elfimage.Module) *elfimage.Type { return f(m).Params[0].Type.Elem }
	member := func(m *elfimage.Module, i int) *elfimage.Member { return &vmType(m).Members[i] }
	for _, c := range []struct {
		name, object, msg string
		breakIt           func(m *elfimage.Module)
	}{
		// Registers outside the ABI, CFI past the code.
		{"CFI register 999", "proc f", "CFI instruction 1 (offset at pc 0x1): Reg 999 is outside the x86-64 ABI's registers 0-66", func(m *elfimage.Module) { f(m).CFI[1].Reg = 999 }},
		{"CFI register 67", "proc f", "Reg 67", func(m *elfimage.Module) { f(m).CFI[2].Reg = 67 }},
		{"CFI Reg2 999", "proc f", "Reg2 999", func(m *elfimage.Module) {
			f(m).CFI[1] = frame.Insn{PC: 1, Op: frame.OpRegister, Reg: arch.X86_64_RBP, Reg2: 999}
		}},
		{"CFI expression register 200", "proc f", "CFI instruction 2 (def_cfa_expression at pc 0x4): expression (Expr): DW_OP_bregx 200 8 names register 200", func(m *elfimage.Module) {
			f(m).CFI[2] = frame.Insn{PC: 4, Op: frame.OpDefCFAExpression, Expr: expr.Breg(200, 8)}
		}},
		{"CFI past the code", "proc f", "CFI instruction 2 (def_cfa at pc 0x9): PC is at or past the end of the code (0x6 bytes)", func(m *elfimage.Module) { f(m).CFI[2].PC = 9 }},
		{"location register 999", "proc f", "parameter vm: Location: DW_OP_regx 999 names register 999", func(m *elfimage.Module) { f(m).Params[0].Location = expr.Reg(999) }},
		{"location undecodable", "proc f", "parameter n: Location: unknown operation", func(m *elfimage.Module) { f(m).Params[1].Location = []byte{0xff} }},
		{"location truncated", "proc f", "variable k: Location:", func(m *elfimage.Module) { f(m).Scopes[0].Vars[1].Location = []byte{byte(edwarf.DW_OP_const4u), 1} }},
		{"live range register 999", "proc f", "parameter n: live range 0: Location: DW_OP_regx 999", func(m *elfimage.Module) {
			f(m).Params[1].Live = []elfimage.LiveRange{{Start: 1, End: 4, Location: expr.Reg(999)}}
		}},
		// More parameters than native passes.
		{"seven parameters", "proc f", "Params: 7 parameters, more than the 6 native.Call passes", func(m *elfimage.Module) {
			for i := range 5 {
				f(m).Params = append(f(m).Params, elfimage.Var{Name: fmt.Sprint("p", i)})
			}
		}},
		// Duplicate names.
		{"duplicate procedure", "proc f", `Name "f" of procedure 1 (Module.Procs[1]) is also the Name of procedure 0 (Module.Procs[0])`, func(m *elfimage.Module) {
			m.Procs = append(m.Procs, &elfimage.Proc{Name: "f", Code: []byte{0xc3}})
		}},
		{"datum named like a procedure", "datum f", "is also the Name of procedure 0", func(m *elfimage.Module) { m.Data[0].Name = "f" }},
		{"duplicate parameter", "proc f", "parameter vm: the name is used twice", func(m *elfimage.Module) { f(m).Params[1].Name = "vm" }},
		{"duplicate variable in a scope", "proc f", "variable cells: the name is used twice in the scope", func(m *elfimage.Module) { f(m).Scopes[0].Vars[1].Name = "cells" }},
		{"unnamed parameter", "proc f", "parameter with no name", func(m *elfimage.Module) { f(m).Params[1].Name = "" }},
		{"nil procedure", "module", "procedure 1 (Module.Procs[1]) is nil", func(m *elfimage.Module) { m.Procs = append(m.Procs, nil) }},
		// Scopes.
		{"sibling scopes overlap", "proc f", "scope [0x2, 0x5) overlaps its sibling scope [0x1, 0x3)", func(m *elfimage.Module) {
			f(m).Scopes[1].Ranges[0].Start = 2
		}},
		{"scope leaves its procedure", "proc f", "scope [0x3, 0x7): range 0 [0x3, 0x7) is empty or outside the code", func(m *elfimage.Module) {
			f(m).Scopes[1].Ranges[0].End = 7
		}},
		{"nil scope", "proc f", "scope is nil", func(m *elfimage.Module) { f(m).Scopes = append(f(m).Scopes, nil) }},
		// Types that refer to nothing.
		{"typedef without Elem", "proc f", "parameter n: type nameless: Elem is nil", func(m *elfimage.Module) {
			f(m).Params[1].Type = &elfimage.Type{Kind: elfimage.KindTypedef, Name: "nameless"}
		}},
		{"array without Elem", "proc f", "member cells: type ?[2]: Elem is nil", func(m *elfimage.Module) { member(m, 1).Type.Elem = nil }},
		{"member without type", "proc f", "parameter vm: type struct vm: member list has no type", func(m *elfimage.Module) { member(m, 2).Type = nil }},
		{"CountVar names nothing", "proc f", "variable cells: type int64[len]: CountVar len names no other parameter or variable visible there", func(m *elfimage.Module) {
			f(m).Scopes[0].Vars[0].Type.CountVar = "len"
		}},
		{"CountVar in another scope", "proc f", "CountVar k names no other", func(m *elfimage.Module) {
			f(m).Scopes[1].Vars = []elfimage.Var{{Name: "a", Type: &elfimage.Type{Kind: elfimage.KindArray, Elem: elfimage.IntType(8), CountVar: "k"}, Location: expr.Fbreg(-16)}}
		}},
		// Invalid types.
		{"unknown kind", "proc f", "parameter n: type \"\": unknown Kind 99", func(m *elfimage.Module) { f(m).Params[1].Type = &elfimage.Type{Kind: 99} }},
		{"kind 0", "proc f", "unknown Kind 0", func(m *elfimage.Module) { f(m).Params[1].Type = &elfimage.Type{Name: "x", Size: 8} }},
		{"struct of size 0", "proc f", "type struct vm: Size 0: a struct has 1 to 2^40 bytes", func(m *elfimage.Module) { vmType(m).Size = 0 }},
		{"member past the end", "proc f", "type struct vm: member list at offset 20 (8 bytes) runs past the end of the 24-byte struct", func(m *elfimage.Module) {
			member(m, 2).Offset = 20
		}},
		{"member at a negative offset", "proc f", "member data at offset -1", func(m *elfimage.Module) { member(m, 0).Offset = -1 }},
		{"duplicate member", "proc f", "member data appears twice", func(m *elfimage.Module) { member(m, 1).Name = "data" }},
		{"unnamed member", "proc f", "member 1 has no name", func(m *elfimage.Module) { member(m, 1).Name = "" }},
		{"cycle without a pointer", "proc f", "type struct node: it contains itself (a type can refer to itself only through a pointer)", func(m *elfimage.Module) {
			node := member(m, 2).Type.Elem
			node.Members[1].Type = node
		}},
		{"cycle through an array and a typedef", "proc f", "contains itself", func(m *elfimage.Module) {
			node := member(m, 2).Type.Elem
			node.Members[1].Type = elfimage.TypedefOf("nodes", elfimage.ArrayOf(node, 1))
		}},
		{"int of 3 bytes", "proc f", "type int24: Size 3: a signed type has 1, 2, 4, 8 bytes", func(m *elfimage.Module) { f(m).Params[1].Type = elfimage.IntType(3) }},
		{"float of 2 bytes", "proc f", "Size 2: a float type has 4, 8 bytes", func(m *elfimage.Module) { f(m).Params[1].Type = elfimage.FloatType(2) }},
		{"base type without a name", "proc f", "an unsigned type needs a Name", func(m *elfimage.Module) { f(m).Params[1].Type.Name = "" }},
		{"pointer of 4 bytes", "proc f", "Size 4: pointers have the architecture's size, 8 bytes", func(m *elfimage.Module) { f(m).Params[0].Type.Size = 4 }},
		{"base type with members", "proc f", "an unsigned type has no Members", func(m *elfimage.Module) {
			f(m).Params[1].Type.Members = []elfimage.Member{{Name: "x", Type: elfimage.IntType(1)}}
		}},
		{"array with Size", "proc f", "an array type has no Size", func(m *elfimage.Module) { member(m, 1).Type.Size = 8 }},
		{"negative count", "proc f", "Count -1 is negative", func(m *elfimage.Module) { member(m, 1).Type.Count = -1 }},
		{"huge array", "proc f", "exceed 2^40 bytes", func(m *elfimage.Module) {
			f(m).Params[1].Type = elfimage.ArrayOf(elfimage.IntType(8), 1<<40)
		}},
		{"variable-length array in a struct", "proc f", "member cells: type int32[n]: an array whose length is variable n can only be a variable's own type", func(m *elfimage.Module) {
			member(m, 1).Type.Count, member(m, 1).Type.CountVar = 0, "n"
		}},
		{"union member at an offset", "proc f", "union members are at offset 0", func(m *elfimage.Module) {
			f(m).Params[1].Type = elfimage.UnionOf("u", 8, elfimage.Member{Name: "i", Type: elfimage.IntType(4)}, elfimage.Member{Name: "j", Offset: 4, Type: elfimage.IntType(4)})
		}},
		{"enumerator too large", "proc f", "type enum color: enumerator blue = 256 does not fit in 1 bytes", func(m *elfimage.Module) {
			f(m).Scopes[0].Vars[1].Type.Enumerators[1].Value = 256
		}},
		{"duplicate enumerator", "proc f", "enumerator red appears twice", func(m *elfimage.Module) {
			f(m).Scopes[0].Vars[1].Type.Enumerators[1].Name = "red"
		}},
		{"enum over a float", "proc f", "the underlying type of an enumeration is an integer", func(m *elfimage.Module) {
			f(m).Scopes[0].Vars[1].Type.Elem = elfimage.FloatType(4)
		}},
		{"void variable", "proc f", "parameter n: type void: void has no size", func(m *elfimage.Module) { f(m).Params[1].Type = elfimage.VoidType() }},
		{"void member", "proc f", "member data: type void: void has no size", func(m *elfimage.Module) { member(m, 0).Type = elfimage.VoidType() }},
		{"name with NUL", "proc f", "contains a NUL byte", func(m *elfimage.Module) { vmType(m).Name = "v\x00m" }},
		{"two types of one name", "proc f", "type struct vm: defined twice with different contents", func(m *elfimage.Module) {
			f(m).Params[1].Type = elfimage.StructOf("vm", 8, elfimage.Member{Name: "x", Type: elfimage.IntType(8)})
		}},
		{"invalid Result", "proc f", "Result: type struct {...}: Size 0", func(m *elfimage.Module) { f(m).Result = &elfimage.Type{Kind: elfimage.KindStruct} }},
	} {
		m := valid()
		c.breakIt(m)
		img, err := elfimage.Link(m, elfimage.LinkOptions{})
		var le *elfimage.LinkError
		switch {
		case err == nil:
			t.Errorf("%s: accepted", c.name)
		case !errors.As(err, &le):
			t.Errorf("%s: err = %v (%T), want *LinkError", c.name, err, err)
		case img != nil:
			t.Errorf("%s: an image came with the error", c.name)
		case le.Object != c.object || !strings.Contains(le.Msg, c.msg):
			t.Errorf("%s: %v\nwant object %q and %q in the message", c.name, err, c.object, c.msg)
		case strings.Contains(le.Msg, "FDE 0") || strings.Contains(le.Msg, "kind 1"):
			t.Errorf("%s: %v names an internal index", c.name, err)
		}
	}
}
