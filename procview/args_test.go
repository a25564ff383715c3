package procview

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/info"
	"github.com/elfimage/elfimage/symbolize"
	"github.com/elfimage/elfimage/unwind"
)

// argCase is one generated parameter: its type (kind: 0 signed, 1
// unsigned, 2 bool, 3 float, 4 signed char, 5 unsigned char, 6 pointer, 7
// enumeration, 8 structure; size 1, 2, 4 or 8), its raw value and where
// it is (loc: 0 in memory at DW_OP_fbreg 8*off, 1 in rbx, 2 a
// DW_OP_stack_value, 3 no location). off is in [-100, 100] but not -1,
// where k is.
type argCase struct {
	kind, size, loc uint8
	raw             uint64
	off             int8
	inlined         bool
}

const (
	argCFA  = 0x8000
	argLow  = 0x1000
	argHigh = 0x1100
	argPC   = 0x1018 // in the inlined subroutine [0x1010, 0x1020)
)

// build encodes a unit with the case's types, a subprogram "f" with
// parameters "p" (the case) and "k" (a 2-byte unsigned at fbreg -2, the
// constant 0x1234), and, when inlined, an inlined subroutine of the
// abstract function "g(q, r)" whose concrete DIE has a location for q
// only. It returns the sections and the memory and frame to read them
// with.
func (c argCase) build(t testing.TB) (func(string) []byte, *Frame, unwind.Memory) {
	size := []uint64{1, 2, 4, 8}[c.size%4]
	kind := c.kind % 9
	if kind == 3 && size < 4 {
		size = 4
	}
	if kind == 6 {
		size = 8
	}
	var typ *info.DIE
	encs := []dwarf.ATE{dwarf.DW_ATE_signed, dwarf.DW_ATE_unsigned, dwarf.DW_ATE_boolean, dwarf.DW_ATE_float, dwarf.DW_ATE_signed_char, dwarf.DW_ATE_unsigned_char}
	u16 := &info.DIE{Tag: dwarf.DW_TAG_base_type, Attrs: []info.Attr{
		{Name: dwarf.DW_AT_name, Value: info.String("u16")},
		{Name: dwarf.DW_AT_encoding, Value: info.Udata(uint64(dwarf.DW_ATE_unsigned))},
		{Name: dwarf.DW_AT_byte_size, Value: info.Udata(2)}}}
	switch {
	case kind < 6:
		typ = &info.DIE{Tag: dwarf.DW_TAG_base_type, Attrs: []info.Attr{
			{Name: dwarf.DW_AT_name, Value: info.String("t")},
			{Name: dwarf.DW_AT_encoding, Value: info.Udata(uint64(encs[kind]))},
			{Name: dwarf.DW_AT_byte_size, Value: info.Udata(size)}}}
	case kind == 6:
		typ = &info.DIE{Tag: dwarf.DW_TAG_pointer_type, Attrs: []info.Attr{{Name: dwarf.DW_AT_type, Value: info.Ref(u16)}}}
	case kind == 7:
		typ = &info.DIE{Tag: dwarf.DW_TAG_enumeration_type, Attrs: []info.Attr{
			{Name: dwarf.DW_AT_name, Value: info.String("color")},
			{Name: dwarf.DW_AT_byte_size, Value: info.Udata(size)}}, Children: []*info.DIE{
			{Tag: dwarf.DW_TAG_enumerator, Attrs: []info.Attr{{Name: dwarf.DW_AT_name, Value: info.String("RED")}, {Name: dwarf.DW_AT_const_value, Value: info.Sdata(0)}}},
			{Tag: dwarf.DW_TAG_enumerator, Attrs: []info.Attr{{Name: dwarf.DW_AT_name, Value: info.String("GREEN")}, {Name: dwarf.DW_AT_const_value, Value: info.Sdata(5)}}},
		}}
	default:
		typ = &info.DIE{Tag: dwarf.DW_TAG_structure_type, Attrs: []info.Attr{{Name: dwarf.DW_AT_byte_size, Value: info.Udata(16)}}}
	}
	// Behind a typedef and a const, which the reader follows.
	td := &info.DIE{Tag: dwarf.DW_TAG_typedef, Attrs: []info.Attr{{Name: dwarf.DW_AT_name, Value: info.String("T")}, {Name: dwarf.DW_AT_type, Value: info.Ref(typ)}}}
	ct := &info.DIE{Tag: dwarf.DW_TAG_const_type, Attrs: []info.Attr{{Name: dwarf.DW_AT_type, Value: info.Ref(td)}}}

	fbreg := func(off int64) []byte { return dwarf.AppendSleb128([]byte{byte(dwarf.DW_OP_fbreg)}, off) }
	p := &info.DIE{Tag: dwarf.DW_TAG_formal_parameter, Attrs: []info.Attr{
		{Name: dwarf.DW_AT_name, Value: info.String("p")},
		{Name: dwarf.DW_AT_type, Value: info.Ref(ct)}}}
	switch c.loc % 4 {
	case 0:
		p.Attrs = append(p.Attrs, info.Attr{Name: dwarf.DW_AT_location, Value: info.Exprloc(fbreg(int64(c.off) * 8))})
	case 1:
		p.Attrs = append(p.Attrs, info.Attr{Name: dwarf.DW_AT_location, Value: info.Exprloc([]byte{byte(dwarf.DW_OP_reg0) + byte(arch.X86_64_RBX)})})
	case 2:
		p.Attrs = append(p.Attrs, info.Attr{Name: dwarf.DW_AT_location, Value: info.Exprloc(append(dwarf.AppendUleb128([]byte{byte(dwarf.DW_OP_constu)}, c.raw), byte(dwarf.DW_OP_stack_value)))})
	}
	k := &info.DIE{Tag: dwarf.DW_TAG_formal_parameter, Attrs: []info.Attr{
		{Name: dwarf.DW_AT_name, Value: info.String("k")},
		{Name: dwarf.DW_AT_type, Value: info.Ref(u16)},
		{Name: dwarf.DW_AT_location, Value: info.Exprloc(fbreg(-2))}}}
	f := &info.DIE{Tag: dwarf.DW_TAG_subprogram, Attrs: []info.Attr{
		{Name: dwarf.DW_AT_name, Value: info.String("f")},
		{Name: dwarf.DW_AT_low_pc, Value: info.Addr(argLow)},
		{Name: dwarf.DW_AT_high_pc, Value: info.Udata(argHigh - argLow)},
		{Name: dwarf.DW_AT_frame_base, Value: info.Exprloc([]byte{byte(dwarf.DW_OP_call_frame_cfa)})}},
		Children: []*info.DIE{p, k}}
	absQ := &info.DIE{Tag: dwarf.DW_TAG_formal_parameter, Attrs: []info.Attr{{Name: dwarf.DW_AT_name, Value: info.String("q")}, {Name: dwarf.DW_AT_type, Value: info.Ref(u16)}}}
	absR := &info.DIE{Tag: dwarf.DW_TAG_formal_parameter, Attrs: []info.Attr{{Name: dwarf.DW_AT_name, Value: info.String("r")}, {Name: dwarf.DW_AT_type, Value: info.Ref(u16)}}}
	g := &info.DIE{Tag: dwarf.DW_TAG_subprogram, Attrs: []info.Attr{
		{Name: dwarf.DW_AT_name, Value: info.String("g")},
		{Name: dwarf.DW_AT_inline, Value: info.Udata(1)}}, Children: []*info.DIE{absQ, absR}}
	kids := []*info.DIE{u16, typ, td, ct, g, f}
	if c.inlined {
		f.Children = append(f.Children, &info.DIE{Tag: dwarf.DW_TAG_lexical_block, Attrs: []info.Attr{
			{Name: dwarf.DW_AT_low_pc, Value: info.Addr(0x1008)},
			{Name: dwarf.DW_AT_high_pc, Value: info.Udata(0x20)}}, Children: []*info.DIE{
			{Tag: dwarf.DW_TAG_inlined_subroutine, Attrs: []info.Attr{
				{Name: dwarf.DW_AT_abstract_origin, Value: info.Ref(g)},
				{Name: dwarf.DW_AT_low_pc, Value: info.Addr(0x1010)},
				{Name: dwarf.DW_AT_high_pc, Value: info.Udata(0x10)}}, Children: []*info.DIE{
				{Tag: dwarf.DW_TAG_formal_parameter, Attrs: []info.Attr{
					{Name: dwarf.DW_AT_abstract_origin, Value: info.Ref(absQ)},
					{Name: dwarf.DW_AT_location, Value: info.Exprloc(fbreg(-2))}}},
			}},
		}})
	}
	cu := &info.DIE{Tag: dwarf.DW_TAG_compile_unit, Attrs: []info.Attr{
		{Name: dwarf.DW_AT_name, Value: info.String("a.c")},
		{Name: dwarf.DW_AT_low_pc, Value: info.Addr(argLow)},
		{Name: dwarf.DW_AT_high_pc, Value: info.Udata(argHigh - argLow)}}, Children: kids}
	str := dwarf.NewStrTab()
	infoSec, abbrev, err := info.Encode([]*info.Unit{{Enc: dwarf.Default64, Root: cu}}, str)
	if err != nil {
		t.Fatal(err)
	}
	secs := map[string][]byte{".debug_info": infoSec, ".debug_abbrev": abbrev, ".debug_str": str.Bytes()}

	mem := make([]byte, 4096)
	const base = argCFA - 2048
	if c.loc%4 == 0 {
		binary.LittleEndian.PutUint64(mem[argCFA-base+int(c.off)*8:], c.raw)
	}
	binary.LittleEndian.PutUint16(mem[argCFA-2-base:], 0x1234)
	fr := &Frame{CFA: argCFA, Funcs: []symbolize.Frame{{Function: "f"}}}
	if c.inlined {
		fr.Funcs = []symbolize.Frame{{Function: "g", Inlined: true}, {Function: "f"}}
	}
	fr.Regs.Set(arch.X86_64_RSP, argCFA-64)
	if c.loc%4 == 1 {
		fr.Regs.Set(arch.X86_64_RBX, c.raw)
	}
	return func(n string) []byte { return secs[n] }, fr, &unwind.Snapshot{Base: base, Data: mem}
}

// want formats the case's value independently of format: with Go's own
// conversions and fmt verbs.
func (c argCase) want() string {
	size := []uint{1, 2, 4, 8}[c.size%4]
	kind := c.kind % 9
	if kind == 3 && size < 4 {
		size = 4
	}
	if kind == 6 {
		size = 8
	}
	if c.loc%4 == 3 && kind != 8 {
		return "<optimized out>"
	}
	v := c.raw
	if size < 8 {
		v &= 1<<(8*size) - 1
	}
	signed := map[uint]int64{1: int64(int8(v)), 2: int64(int16(v)), 4: int64(int32(v)), 8: int64(v)}[size]
	switch kind {
	case 0:
		return fmt.Sprint(signed)
	case 1:
		return fmt.Sprint(v)
	case 2:
		if v <= 1 {
			return fmt.Sprint(v == 1)
		}
		return fmt.Sprint(v)
	case 3:
		if size == 4 {
			return fmt.Sprintf("%.9g", math.Float32frombits(uint32(v)))
		}
		return fmt.Sprintf("%.17g", math.Float64frombits(v))
	case 4, 5:
		n := fmt.Sprint(v)
		if kind == 4 {
			n = fmt.Sprint(signed)
		}
		if size > 1 {
			// A character encoding wider than a byte is an integer, as
			// gdb's C printer shows it (only one-byte integers print as
			// characters).
			return n
		}
		b := byte(v)
		q := fmt.Sprintf(`'\%03o'`, b)
		if b >= ' ' && b < 0x7f && b != '\\' && b != '\'' {
			q = "'" + string(rune(b)) + "'"
		} else if e, ok := map[byte]string{'\a': `\a`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`, '\v': `\v`, '\\': `\\`, '\'': `\'`}[b]; ok {
			q = "'" + e + "'"
		}
		return n + " " + q
	case 6:
		return fmt.Sprintf("0x%x", v)
	case 7:
		switch signed {
		case 0:
			return "RED"
		case 5:
			return "GREEN"
		}
		return fmt.Sprint(signed)
	}
	return "..."
}

func (c argCase) check(t *testing.T) {
	if c.off == -1 || c.off < -100 || c.off > 100 {
		c.off = -2
	}
	sect, fr, mem := c.build(t)
	x := newArgIndex(sect)
	if x.err != nil {
		t.Fatal(x.err)
	}
	x.frameArgs(fr, argPC, mem, nil)
	args := fr.Args
	fArgs := args[len(args)-1]
	if len(fArgs) != 2 || fArgs[0].Name != "p" || fArgs[1].Name != "k" {
		t.Fatalf("f's arguments %+v", fArgs)
	}
	if got, want := fArgs[0].Value, c.want(); got != want {
		t.Errorf("%+v: p=%s, want %s", c, got, want)
	}
	if fArgs[1].Value != "4660" {
		t.Errorf("k=%s, want 4660", fArgs[1].Value)
	}
	if c.inlined {
		// The abstract function's parameters in its order: q from its
		// concrete DIE, r without one.
		if len(args) != 2 || len(args[0]) != 2 || args[0][0].Name != "q" || args[0][0].Value != "4660" ||
			args[0][1].Name != "r" || args[0][1].Value != "<optimized out>" {
			t.Errorf("inlined g's arguments %+v", args[0])
		}
	}
}

// TestArgValues: values of every scalar kind and size, in memory, in a
// register, as a stack value or without a location, in a subprogram and
// an inlined subroutine, as gdb prints them.
func TestArgValues(t *testing.T) {
	raws := []uint64{0, 1, 5, 10, 0x27, 0x7f, 0x80, 0xff, 0xfffe, 0x3ff8000000000000, 0x40490fdb, 0xffffffffffffffd6}
	for kind := uint8(0); kind < 9; kind++ {
		for size := uint8(0); size < 4; size++ {
			for loc := uint8(0); loc < 4; loc++ {
				for i, raw := range raws {
					argCase{kind: kind, size: size, loc: loc, raw: raw, off: int8(i) - 6, inlined: i%2 == 0}.check(t)
				}
			}
		}
	}
}

// FuzzArgValues checks generated parameters against the independent
// formatting of argCase.want.
func FuzzArgValues(f *testing.F) {
	f.Add(uint8(0), uint8(3), uint8(0), uint64(0xffffffffffffffd6), int8(-3), true)
	f.Add(uint8(3), uint8(3), uint8(1), uint64(0x400921fb54442d18), int8(0), false)
	f.Add(uint8(4), uint8(0), uint8(2), uint64('\n'), int8(1), true)
	f.Fuzz(func(t *testing.T, kind, size, loc uint8, raw uint64, off int8, inlined bool) {
		argCase{kind: kind, size: size, loc: loc, raw: raw, off: off, inlined: inlined}.check(t)
	})
}

// FuzzArgIndex feeds hostile .debug_info and .debug_abbrev sections (and
// location lists) to the argument reader: it must not panic or loop, and
// what it returns keeps its invariants: at least the subprogram's scope,
// at most MaxArgs parameters each, every parameter with a value or a
// reason.
func FuzzArgIndex(f *testing.F) {
	c := argCase{kind: 7, size: 2, loc: 0, raw: 5, off: -1, inlined: true}
	sect, _, _ := c.build(f)
	f.Add(sect(".debug_info"), sect(".debug_abbrev"), []byte(nil), uint64(argPC))
	f.Fuzz(func(t *testing.T, infoSec, abbrev, loclists []byte, addr uint64) {
		secs := map[string][]byte{".debug_info": infoSec, ".debug_abbrev": abbrev, ".debug_loclists": loclists, ".debug_loc": loclists, ".debug_rnglists": loclists}
		x := newArgIndex(func(n string) []byte { return secs[n] })
		scopes, _, err := x.scopes(addr)
		if err != nil {
			return
		}
		if len(scopes) == 0 {
			t.Fatal("no error and no scope")
		}
		fr := &Frame{CFA: argCFA, Funcs: make([]symbolize.Frame, len(scopes))}
		x.frameArgs(fr, addr, &unwind.Snapshot{Base: argCFA - 64, Data: make([]byte, 128)}, nil)
		for _, as := range fr.Args {
			if len(as) > MaxArgs {
				t.Fatalf("%d arguments", len(as))
			}
			for _, a := range as {
				if a.Value == "" || a.Err != nil && !strings.HasPrefix(a.Value, "<") {
					t.Fatalf("argument %+v", a)
				}
			}
		}
	})
}

// TestArgTypeCycles: types that refer to themselves (a typedef cycle, an
// enumeration whose underlying type is itself) end after maxTypeHops.
func TestArgTypeCycles(t *testing.T) {
	enum := &info.DIE{Tag: dwarf.DW_TAG_enumeration_type, Attrs: []info.Attr{{Name: dwarf.DW_AT_byte_size, Value: info.Udata(4)}}}
	enum.Attrs = append(enum.Attrs, info.Attr{Name: dwarf.DW_AT_type, Value: info.Ref(enum)})
	t1 := &info.DIE{Tag: dwarf.DW_TAG_typedef}
	t2 := &info.DIE{Tag: dwarf.DW_TAG_typedef, Attrs: []info.Attr{{Name: dwarf.DW_AT_type, Value: info.Ref(t1)}}}
	t1.Attrs = []info.Attr{{Name: dwarf.DW_AT_type, Value: info.Ref(t2)}}
	param := func(name string, typ *info.DIE) *info.DIE {
		return &info.DIE{Tag: dwarf.DW_TAG_formal_parameter, Attrs: []info.Attr{
			{Name: dwarf.DW_AT_name, Value: info.String(name)},
			{Name: dwarf.DW_AT_type, Value: info.Ref(typ)},
			{Name: dwarf.DW_AT_location, Value: info.Exprloc([]byte{byte(dwarf.DW_OP_reg0)})}}}
	}
	f := &info.DIE{Tag: dwarf.DW_TAG_subprogram, Attrs: []info.Attr{
		{Name: dwarf.DW_AT_low_pc, Value: info.Addr(argLow)},
		{Name: dwarf.DW_AT_high_pc, Value: info.Udata(argHigh - argLow)}},
		Children: []*info.DIE{param("e", enum), param("c", t1)}}
	cu := &info.DIE{Tag: dwarf.DW_TAG_compile_unit, Attrs: []info.Attr{
		{Name: dwarf.DW_AT_low_pc, Value: info.Addr(argLow)},
		{Name: dwarf.DW_AT_high_pc, Value: info.Udata(argHigh - argLow)}}, Children: []*info.DIE{enum, t1, t2, f}}
	str := dwarf.NewStrTab()
	infoSec, abbrev, err := info.Encode([]*info.Unit{{Enc: dwarf.Default64, Root: cu}}, str)
	if err != nil {
		t.Fatal(err)
	}
	secs := map[string][]byte{".debug_info": infoSec, ".debug_abbrev": abbrev, ".debug_str": str.Bytes()}
	x := newArgIndex(func(n string) []byte { return secs[n] })
	fr := &Frame{Funcs: []symbolize.Frame{{Function: "f"}}}
	fr.Regs.Set(arch.X86_64_RAX, 5)
	x.frameArgs(fr, argPC, &unwind.Snapshot{}, nil)
	if len(fr.Args) != 1 || len(fr.Args[0]) != 2 || fr.Args[0][0].Value != "5" || fr.Args[0][1].Value != "5" {
		t.Errorf("arguments %+v", fr.Args)
	}
}
