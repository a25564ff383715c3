package elfimage_test

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	edwarf "github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/expr"
	"github.com/elfimage/elfimage/internal/tooltest"
	"github.com/elfimage/elfimage/internal/typedemo"
	"github.com/elfimage/elfimage/unwind"
)

// typeEncodings are the DWARF versions and formats the typed images are
// checked in.
var typeEncodings = func() []edwarf.Encoding {
	var out []edwarf.Encoding
	for _, v := range []uint16{3, 4, 5} {
		for _, f := range []edwarf.Format{edwarf.Format32, edwarf.Format64} {
			out = append(out, edwarf.Encoding{Version: v, Format: f})
		}
	}
	return out
}()

func encName(e edwarf.Encoding) string { return fmt.Sprintf("v%d-%v", e.Version, e.Format) }

// linkTypedemo links the typed fixture in encoding enc into dir and
// returns the image's path.
func linkTypedemo(t *testing.T, dir string, enc edwarf.Encoding) string {
	t.Helper()
	path := filepath.Join(dir, "typedemo-"+encName(enc)+".elf")
	if err := elfimage.WriteFile(path, typedemo.Module(), elfimage.LinkOptions{DWARF: enc, DebugFrame: true}); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTypesDwarfdump: llvm-dwarfdump --verify finds no error in the typed
// image in every version and format, and its own decoding of the entries
// shows each type once, the variable-length array's DW_AT_count referring
// to the parameter n, and the fixnum's location as the builders wrote it.
func TestTypesDwarfdump(t *testing.T) {
	dd := tooltest.Require(t, "llvm-dwarfdump", "llvm-dwarfdump-14")
	dir := t.TempDir()
	for _, enc := range typeEncodings {
		t.Run(encName(enc), func(t *testing.T) {
			path := linkTypedemo(t, dir, enc)
			out, err := exec.Command(dd, "--verify", path).CombinedOutput()
			if err != nil || !bytes.Contains(out, []byte("No errors.")) {
				t.Fatalf("llvm-dwarfdump --verify: %v\n%s", err, out)
			}
			out, err = exec.Command(dd, "--debug-info", path).CombinedOutput()
			if err != nil {
				t.Fatalf("llvm-dwarfdump --debug-info: %v\n%s", err, out)
			}
			text := string(out)
			for _, want := range []string{
				`DW_AT_location	(DW_OP_breg1 RDX+0, DW_OP_lit1, DW_OP_shra, DW_OP_stack_value)`,
				`DW_AT_location	(DW_OP_reg5 RDI)`,
				`DW_AT_location	(DW_OP_breg5 RDI+8)`,
				`DW_AT_name	("fixnum")`,
				`DW_AT_name	("color")`,
				`DW_AT_const_value	(0x02)`,
				`DW_AT_data_member_location	(0x88)`, // name, at 136
			} {
				if !strings.Contains(text, want) {
					t.Errorf("llvm-dwarfdump shows no %q", want)
				}
			}
			// Each type once, though two procedures use separately built
			// copies: one struct vm, one node, one int64.
			for _, c := range []struct {
				re string
				n  int
			}{
				{`DW_TAG_structure_type\s+DW_AT_name\s+\("vm"\)`, 1},
				{`DW_TAG_structure_type\s+DW_AT_name\s+\("node"\)`, 1},
				{`DW_TAG_base_type\s+DW_AT_name\s+\("int64"\)`, 1},
				{`DW_TAG_union_type`, 1},
				{`DW_TAG_enumeration_type`, 1},
			} {
				if got := len(regexp.MustCompile(c.re).FindAllString(text, -1)); got != c.n {
					t.Errorf("%d entries match %s, want %d", got, c.re, c.n)
				}
			}
			// The variable-length array counts with an artificial variable
			// holding the value of n, which is in RSI.
			m := regexp.MustCompile(`(0x[0-9a-f]+):\s+DW_TAG_variable\s+DW_AT_name\s+\("__vla_count_n"\)\s+DW_AT_type\s+\(0x[0-9a-f]+ "uint64"\)\s+` +
				`DW_AT_artificial\s+\((true|0x01)\)\s+DW_AT_location\s+\(DW_OP_breg4 RSI\+0, DW_OP_stack_value\)`).FindStringSubmatch(text)
			if m == nil {
				t.Fatalf("no artificial variable __vla_count_n in:\n%s", text)
			}
			if !regexp.MustCompile(`DW_AT_count\s+\(` + m[1] + `\)`).MatchString(text) {
				t.Errorf("no DW_AT_count referring to __vla_count_n at %s", m[1])
			}
		})
	}
}

// TestTypesDebugDWARF reads the typed image with Go's debug/dwarf, an
// independent reader, and checks what it makes of each type against the
// model.
func TestTypesDebugDWARF(t *testing.T) {
	dir := t.TempDir()
	vm, _, _ := typedemo.Types()
	for _, enc := range typeEncodings {
		t.Run(encName(enc), func(t *testing.T) {
			f, err := elf.Open(linkTypedemo(t, dir, enc))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			d, err := f.DWARF()
			if err != nil {
				t.Fatal(err)
			}
			params := map[string]dwarf.Type{}
			r := d.Reader()
			var proc string
			for {
				e, err := r.Next()
				if err != nil {
					t.Fatal(err)
				}
				if e == nil {
					break
				}
				switch e.Tag {
				case dwarf.TagSubprogram:
					proc, _ = e.Val(dwarf.AttrName).(string)
				case dwarf.TagFormalParameter, dwarf.TagVariable:
					if proc != typedemo.Proc {
						continue
					}
					off, _ := e.Val(dwarf.AttrType).(dwarf.Offset)
					ty, err := d.Type(off)
					if err != nil {
						t.Fatalf("type of %v: %v", e.Val(dwarf.AttrName), err)
					}
					params[e.Val(dwarf.AttrName).(string)] = ty
				}
			}
			for name, want := range map[string]string{"vm": "*struct vm", "n": "uint64", "fix": "fixnum", "ratio": "double"} {
				if got := params[name]; got == nil || got.String() != want {
					t.Errorf("%s: debug/dwarf type %v, want %s", name, got, want)
				}
			}
			st, ok := params["vm"].(*dwarf.PtrType).Type.(*dwarf.StructType)
			if !ok || st.StructName != "vm" || st.ByteSize != typedemo.VMSize || len(st.Field) != len(vm.Members) {
				t.Fatalf("vm points to %#v", params["vm"].(*dwarf.PtrType).Type)
			}
			wantTypes := map[string]string{"data": "*uint8", "cells": "[8]int64", "f": "double", "g": "float", "i32": "int32",
				"i16": "int16", "u16": "uint16", "i8": "int8", "ok": "bool", "c": "char", "u8": "uint8", "col": "enum color {RED=0; GREEN=1; BLUE=2}",
				"u32": "uint32", "u": "union num", "list": "*struct node", "k": "const int64", "w": "word", "name": "[8]char"}
			for i, fld := range st.Field {
				m := vm.Members[i]
				if fld.Name != m.Name || fld.ByteOffset != int64(m.Offset) || fld.Type.String() != wantTypes[m.Name] {
					t.Errorf("member %d: %s at %d of %s; want %s at %d of %s", i, fld.Name, fld.ByteOffset, fld.Type, m.Name, m.Offset, wantTypes[m.Name])
				}
			}
			// The list is recursive through its pointer.
			node := st.Field[14].Type.(*dwarf.PtrType).Type.(*dwarf.StructType)
			if next := node.Field[1].Type.(*dwarf.PtrType).Type; next != dwarf.Type(node) {
				t.Errorf("node.next points to %v, not node itself", next)
			}
			en := st.Field[11].Type.(*dwarf.EnumType)
			if en.ByteSize != 4 || len(en.Val) != 3 || en.Val[2].Name != "BLUE" || en.Val[2].Val != 2 {
				t.Errorf("enum color: %+v", en)
			}
			u := st.Field[13].Type.(*dwarf.StructType)
			if u.Kind != "union" || len(u.Field) != 2 || u.Field[1].Type.String() != "double" {
				t.Errorf("union num: %+v", u)
			}
			if c := params["cells"].(*dwarf.ArrayType); c.Type.String() != "int64" {
				t.Errorf("cells: %v", c)
			}
		})
	}
}

// sameType compares a type read back from an image with the model's,
// structurally, through cycles.
func sameType(got, want *elfimage.Type, seen map[[2]*elfimage.Type]bool) error {
	if got == nil || want == nil {
		if got != want {
			return fmt.Errorf("%v, want %v", got, want)
		}
		return nil
	}
	if seen[[2]*elfimage.Type{got, want}] {
		return nil
	}
	seen[[2]*elfimage.Type{got, want}] = true
	if got.Kind != want.Kind || got.Name != want.Name || got.Count != want.Count || got.CountVar != want.CountVar ||
		len(got.Members) != len(want.Members) || len(got.Enumerators) != len(want.Enumerators) {
		return fmt.Errorf("%v (%v, %d members), want %v (%v, %d members)", got, got.Kind, len(got.Members), want, want.Kind, len(want.Members))
	}
	if want.Kind != elfimage.KindPointer && want.Kind != elfimage.KindArray && want.Kind != elfimage.KindTypedef && want.Kind != elfimage.KindConst && got.Size != want.Size {
		return fmt.Errorf("%v: size %d, want %d", got, got.Size, want.Size)
	}
	for i := range want.Members {
		g, w := got.Members[i], want.Members[i]
		if g.Name != w.Name || g.Offset != w.Offset {
			return fmt.Errorf("%v member %d: %s at %d, want %s at %d", want, i, g.Name, g.Offset, w.Name, w.Offset)
		}
		if err := sameType(g.Type, w.Type, seen); err != nil {
			return fmt.Errorf("%v member %s: %v", want, w.Name, err)
		}
	}
	for i := range want.Enumerators {
		if got.Enumerators[i] != want.Enumerators[i] {
			return fmt.Errorf("%v: enumerator %v, want %v", want, got.Enumerators[i], want.Enumerators[i])
		}
	}
	return sameType(got.Elem, want.Elem, seen)
}

// fakeMem is memory at base holding b.
type fakeMem struct {
	base uint64
	b    []byte
}

func (m fakeMem) ReadUint64(a uint64) (uint64, error) {
	if a < m.base || len(m.b) < 8 || a-m.base > uint64(len(m.b)-8) {
		return 0, fmt.Errorf("address %#x not mapped", a)
	}
	return binary.LittleEndian.Uint64(m.b[a-m.base:]), nil
}

// TestTypesReadBack: the image's own queries read the types back as the
// model wrote them (a recursive type as a cycle), and FormatLocation and
// Backtrace's formatting show the fixture's values as gdb prints them.
func TestTypesReadBack(t *testing.T) {
	dir := t.TempDir()
	model := typedemo.Module()
	for _, enc := range typeEncodings {
		t.Run(encName(enc), func(t *testing.T) {
			im, err := elfimage.Open(linkTypedemo(t, dir, enc), x86Opts) // typedemo is x86-64 code, never run
			if err != nil {
				t.Fatal(err)
			}
			defer im.Close()
			p, err := im.ProcedureByName(typedemo.Proc)
			if err != nil {
				t.Fatal(err)
			}
			locals, err := im.Locals(p.Start + typedemo.BodyStart)
			if err != nil {
				t.Fatal(err)
			}
			mp := model.Procs[0]
			want := append(append([]elfimage.Var{}, mp.Params...), mp.Scopes[0].Vars...)
			if len(locals) != len(want) {
				t.Fatalf("%d locals, want %d", len(locals), len(want))
			}
			for i, l := range locals {
				if l.Name != want[i].Name {
					t.Fatalf("local %d is %s, want %s", i, l.Name, want[i].Name)
				}
				if err := sameType(l.Type, want[i].Type, map[[2]*elfimage.Type]bool{}); err != nil {
					t.Errorf("%s: %v", l.Name, err)
				}
			}
			sub, err := im.SubprogramAt(p.Start + typedemo.BodyStart)
			if err != nil || len(sub.Params) != 3 || sub.Params[0].Type.String() != "struct vm *" {
				t.Errorf("SubprogramAt: %+v %v", sub.Params, err)
			}
			node := locals[0].Type.Elem.Members[14].Type.Elem
			if node.Members[1].Type.Elem != node {
				t.Error("node.next does not point back to node")
			}

			// The values, from registers and the fixture in memory.
			const base = 0x7f0000100000
			mem := make([]byte, typedemo.FillSize+16)
			typedemo.Fill(mem, base)
			var regs unwind.Regs
			regs.Set(arch.X86_64_RDI, base)
			regs.Set(arch.X86_64_RSI, typedemo.N)
			regs.Set(arch.X86_64_RDX, typedemo.Fix)
			st := &elfimage.FrameState{Regs: regs, CFA: 0x7ffc0000, Mem: fakeMem{base, mem}, Vars: map[string]int64{"n": typedemo.N}}
			wantText := map[string]string{
				"vm":    fmt.Sprintf("%#x", base),
				"n":     "5",
				"fix":   "21",
				"cells": "{11, 22, 33, 44, 55}",
				"ratio": "3.5",
				"pair":  "{a = 5, b = 43}",
			}
			for _, l := range locals {
				got, err := elfimage.FormatLocation(l.Location, l.Type, st)
				if err != nil || got != wantText[l.Name] {
					t.Errorf("%s = %q (%v), want %q", l.Name, got, err, wantText[l.Name])
				}
			}
			// *vm: the structure through the pointer's value.
			got, err := elfimage.FormatLocation(elfimage.Var{}.Location, nil, st)
			if err == nil {
				t.Errorf("an empty location formats as %q", got)
			}
			vmType := locals[0].Type.Elem
			star, err := elfimage.FormatLocation(expr.Breg(arch.X86_64_RDI, 0), vmType, st)
			ui := int64(typedemo.UI)
			wantVM := fmt.Sprintf(`{data = %#x, cells = {11, 22, 33, 44, 55, 66, 77, 88}, f = 3.5, g = -0.25, i32 = -7, i16 = -300, u16 = 65000, i8 = -5, ok = true, c = 65 'A', u8 = 200, col = GREEN, u32 = 4000000000, u = {i = -1234567890123, d = %s}, list = %#x, k = 42, w = 3735928559, name = "vmname\000"}`,
				base+typedemo.VMSize+2*typedemo.NodeSize, strconv.FormatFloat(math.Float64frombits(uint64(ui)), 'g', -1, 64), base+typedemo.VMSize)
			if err != nil || star != wantVM {
				t.Errorf("*vm =\n %s (%v), want\n %s", star, err, wantVM)
			}
		})
	}
}

// TestTypesUntypedDefault: a variable without a Type reads back as the
// default 8-byte "integer" and prints in decimal, as before types existed.
func TestTypesUntypedDefault(t *testing.T) {
	m := &elfimage.Module{File: "d.s", Procs: []*elfimage.Proc{{Name: "d", Code: []byte{0xc3},
		Params: []elfimage.Var{{Name: "x", Location: expr.Reg(arch.X86_64_RDI)}}}}}
	b, err := elfimage.Link(m, elfimage.LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "d.elf")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	im, err := elfimage.Open(path, x86Opts)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	p, _ := im.ProcedureByName("d")
	ls, err := im.Locals(p.Start)
	if err != nil || len(ls) != 1 {
		t.Fatal(ls, err)
	}
	if ty := ls[0].Type; ty == nil || ty.Kind != elfimage.KindSigned || ty.Name != "integer" || ty.Size != 8 {
		t.Errorf("default type read back as %#v", ty)
	}
	var regs unwind.Regs
	regs.Set(arch.X86_64_RDI, uint64(1<<64-3))
	got, err := elfimage.FormatLocation(ls[0].Location, ls[0].Type, &elfimage.FrameState{Regs: regs})
	if err != nil || got != "-3" {
		t.Errorf("x = %q %v, want -3", got, err)
	}
}

// multiMem is memory in several places.
type multiMem []fakeMem

func (m multiMem) ReadUint64(a uint64) (uint64, error) {
	for _, r := range m {
		if a >= r.base && a+8 <= r.base+uint64(len(r.b)) {
			return r.ReadUint64(a)
		}
	}
	return 0, fmt.Errorf("address %#x not mapped", a)
}

// TestTypesBacktrace: Backtrace reads the typed fixture's arguments and
// variables in a frame of inspect and shows them as their types do, the
// variable-length array with the length of n.
func TestTypesBacktrace(t *testing.T) {
	path := linkTypedemo(t, t.TempDir(), edwarf.Encoding{Version: 5, Format: edwarf.Format32})
	im, err := elfimage.Open(path, x86Opts)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	p, err := im.ProcedureByName(typedemo.Proc)
	if err != nil {
		t.Fatal(err)
	}
	const vmBase, stack = 0x7f0000100000, 0x7ffc00001000
	vm := make([]byte, typedemo.FillSize+16)
	typedemo.Fill(vm, vmBase)
	st := make([]byte, 64)
	binary.LittleEndian.PutUint64(st[0:], 0)      // saved rbp
	binary.LittleEndian.PutUint64(st[8:], 0x1234) // return address, in no image
	regs := make([]uint64, arch.X86_64.NumRegs)
	regs[arch.X86_64_RA] = uint64(im.Base()) + p.Start + typedemo.BodyStart
	regs[arch.X86_64_RSP], regs[arch.X86_64_RBP] = stack, stack
	regs[arch.X86_64_RDI], regs[arch.X86_64_RSI], regs[arch.X86_64_RDX] = vmBase, typedemo.N, typedemo.Fix
	frames, err := elfimage.Backtrace(regs, multiMem{{vmBase, vm}, {stack, st}}, elfimage.BacktraceOptions{Locals: true})
	if err != nil || len(frames) < 1 {
		t.Fatalf("%v %v", frames, err)
	}
	f := frames[0]
	if f.Proc.Name != typedemo.Proc || f.Pos.Line != 4 {
		t.Fatalf("frame 0: %+v", f)
	}
	var got []string
	for _, a := range append(f.Args, f.Locals...) {
		got = append(got, fmt.Sprintf("%s %s = %s (%d)", a.Type, a.Name, a.Text, a.Value))
	}
	want := []string{
		fmt.Sprintf("struct vm * vm = %#x (%d)", vmBase, int64(vmBase)),
		"uint64 n = 5 (5)",
		"fixnum fix = 21 (21)",
		"int64[n] cells = {11, 22, 33, 44, 55} (11)",
		"double ratio = 3.5 (4615063718147915776)",
		"struct pair pair = {a = 5, b = 43} (5)",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("frame 0 values:\n got %q\nwant %q", got, want)
	}
}

// TestProceduresArity: Procedures lists every procedure with its arity
// and argument names from the procedure table (it used to give the symbol
// table's fields only), and ProcedureByName finds one by name or says
// ErrNoProcedure.
func TestProceduresArity(t *testing.T) {
	im, err := elfimage.Open(linkTypedemo(t, t.TempDir(), edwarf.Encoding{Version: 5, Format: edwarf.Format32}), x86Opts)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	procs, err := im.Procedures()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range procs {
		got = append(got, fmt.Sprintf("%s %d/%d %v %v", p.Name, p.Required, p.Optional, p.Args, p.Internal))
	}
	if want := "[inspect 3/0 [vm n fix] false other 1/0 [vm] false]"; fmt.Sprint(got) != want {
		t.Errorf("Procedures: %v, want %s", got, want)
	}
	p, err := im.ProcedureByName("other")
	if err != nil || p.Start != procs[1].Start || p.Size != 1 || fmt.Sprint(p.Args) != "[vm]" {
		t.Errorf("ProcedureByName(other) = %+v, %v", p, err)
	}
	if _, err := im.ProcedureByName("nope"); !errors.Is(err, elfimage.ErrNoProcedure) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("ProcedureByName(nope): %v", err)
	}
}

// x86Opts loads the x86-64 typedemo images on any machine: their code is
// never run, only queried and unwound with x86-64 registers.
var x86Opts = &elfimage.LoadOptions{Arch: arch.X86_64}
