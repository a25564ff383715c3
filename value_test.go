package elfimage_test

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/expr"
	"github.com/elfimage/elfimage/unwind"
)

// TestFormatLocation checks each rule of FormatLocation on values in
// memory, registers and computed values, against what gdb prints for the
// same C types.
func TestFormatLocation(t *testing.T) {
	const base = 0x10000
	mem := make([]byte, 4096)
	le := binary.LittleEndian
	put := func(off int, v uint64) { le.PutUint64(mem[off:], v) }
	for i := range 16 {
		put(8*i, 0) // 16 zero words at base
	}
	for i := range 11 {
		put(128+8*i, 1)
	}
	put(128+88, 2)
	copy(mem[256:], "ab")
	for i := range 250 {
		mem[512+i] = byte(i)
	}
	copy(mem[1024:], "hi\n\"\x01\xff")
	put(1100, base+1024)
	m := fakeMem{base, mem}
	var regs = regsOf(map[arch.Reg]uint64{arch.X86_64_RAX: math.Float64bits(-2.5), arch.X86_64_RDX: uint64(0xfffffffe)})
	st := &elfimage.FrameState{Regs: regs, Mem: m, CFA: base + 2048}
	at := func(off int64) []byte { return expr.Const(base + off) }
	i64 := elfimage.IntType(8)
	for _, c := range []struct {
		name string
		loc  []byte
		t    *elfimage.Type
		want string
	}{
		{"zeros repeat", at(0), elfimage.ArrayOf(i64, 16), "{0 <repeats 16 times>}"},
		{"ten equal are shown", at(0), elfimage.ArrayOf(i64, 10), "{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}"},
		{"run then one", at(128), elfimage.ArrayOf(i64, 12), "{1 <repeats 11 times>, 2}"},
		{"string with NUL tail", at(256), elfimage.ArrayOf(elfimage.CharType(), 20), `"ab", '\000' <repeats 17 times>`},
		{"string full", at(1024), elfimage.ArrayOf(elfimage.CharType(), 6), `"hi\n\"\001\377"`},
		{"bytes bounded", at(512), elfimage.ArrayOf(elfimage.UintType(1), 250), "{0, 1, 2, "},
		{"char pointer", at(1100), elfimage.PointerTo(elfimage.CharType()), `0x10400 "hi\n\"\001\377"`},
		{"const char pointer", at(1100), elfimage.PointerTo(elfimage.ConstOf(elfimage.CharType())), `0x10400 "hi\n\"\001\377"`},
		{"double in a register", expr.Reg(arch.X86_64_RAX), elfimage.FloatType(8), "-2.5"},
		{"int32 in a register", expr.Reg(arch.X86_64_RDX), elfimage.IntType(4), "-2"},
		{"uint32 in a register", expr.Reg(arch.X86_64_RDX), elfimage.UintType(4), "4294967294"},
		{"computed bool", expr.Const(1).StackValue(), elfimage.BoolType(), "true"},
		{"bool 2", expr.Const(2).StackValue(), elfimage.BoolType(), "2"},
		{"enum without a name for the value", expr.Const(7).StackValue(), elfimage.EnumOf("e", 4, elfimage.Enumerator{Name: "A"}), "7"},
		{"char newline", expr.Const('\n').StackValue(), elfimage.CharType(), `10 '\n'`},
		{"unicode char", expr.Const(0x263a).StackValue(), &elfimage.Type{Kind: elfimage.KindChar, Name: "char32", Size: 4}, `9786 '☺'`},
		{"void pointer", expr.Const(0).StackValue(), elfimage.PointerTo(nil), "0x0"},
		{"implicit value", expr.Code{}.ImplicitValue([]byte{0, 0, 0xc0, 0x3f}), elfimage.FloatType(4), "1.5"},
		{"unreadable member", at(8000), elfimage.StructOf("s", 8, elfimage.Member{Name: "x", Type: i64}), "{x = <unreadable: address 0x11f40 not mapped>}"},
	} {
		got, err := elfimage.FormatLocation(c.loc, c.t, st)
		if err != nil || !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: %q %v, want %q", c.name, got, err, c.want)
		}
	}
	long, _ := elfimage.FormatLocation(at(512), elfimage.ArrayOf(elfimage.UintType(1), 250), st)
	if strings.Count(long, ",") != 199 || !strings.HasSuffix(long, "199...}") {
		t.Errorf("250 bytes: %d elements shown: %s", strings.Count(long, ",")+1, long)
	}
	// A 16-byte value cannot be in one register.
	if got, err := elfimage.FormatLocation(expr.Reg(arch.X86_64_RAX), elfimage.ArrayOf(i64, 2), st); err == nil {
		t.Errorf("16 bytes in RAX: %q", got)
	}
	// A variable-length array takes its length from Vars.
	vla := &elfimage.Type{Kind: elfimage.KindArray, Elem: i64, CountVar: "n"}
	if got, _ := elfimage.FormatLocation(at(128), vla, st); got != "<length n unknown>" {
		t.Errorf("no n: %q", got)
	}
	st.Vars = map[string]int64{"n": 3}
	if got, _ := elfimage.FormatLocation(at(128), vla, st); got != "{1, 1, 1}" {
		t.Errorf("n = 3: %q", got)
	}
	// Output is bounded.
	big := elfimage.ArrayOf(elfimage.ArrayOf(i64, 200), 200)
	if got, _ := elfimage.FormatLocation(at(0), big, &elfimage.FrameState{Mem: addrMem{}}); len(got) > 4200 || !strings.HasSuffix(got, "...") {
		t.Errorf("200x200 array: %d bytes, ends %q", len(got), got[max(0, len(got)-20):])
	}
}

// addrMem holds at each address its own value: no two words are equal.
type addrMem struct{}

func (addrMem) ReadUint64(a uint64) (uint64, error) { return a, nil }

func regsOf(m map[arch.Reg]uint64) unwind.Regs {
	var r unwind.Regs
	for k, v := range m {
		r.Set(k, v)
	}
	return r
}

// TestFormatLocationBounded: nested arrays of repeated elements, which
// print short, still format a bounded number of values.
func TestFormatLocationBounded(t *testing.T) {
	i64 := elfimage.IntType(8)
	cube := elfimage.ArrayOf(elfimage.ArrayOf(elfimage.ArrayOf(elfimage.ArrayOf(i64, 200), 200), 200), 200)
	reads := 0
	got, err := elfimage.FormatLocation(expr.Const(0x1000), cube, &elfimage.FrameState{Mem: countMem{&reads}})
	if err != nil || reads > 1<<16 || !strings.HasSuffix(got, "...") {
		t.Errorf("200^4 zeros: %d reads, %q %v", reads, got, err)
	}
}

type countMem struct{ n *int }

func (m countMem) ReadUint64(uint64) (uint64, error) { *m.n++; return 0, nil }
