package expr

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
)

// TestBuildersEval evaluates what each builder writes with Eval and checks
// the bytes against the encodings of DWARF 5 section 7.7.1.
func TestBuildersEval(t *testing.T) {
	c := &ctx{
		regs: map[arch.Reg]uint64{arch.X86_64_RAX: 85, arch.X86_64_RDI: 0x7000, 40: 0x9000},
		mem:  map[uint64]uint64{0x7008: 0x1122334455667788, 0x7000: 0x7008},
		cfa:  0x7010, fb: 0x7100,
	}
	for _, tc := range []struct {
		name  string
		code  Code
		bytes []byte
		want  Result
	}{
		{"Reg", Reg(arch.X86_64_RDI), []byte{0x55}, Result{Kind: Register, Reg: arch.X86_64_RDI}},
		{"Reg regx", Reg(40), []byte{0x90, 40}, Result{Kind: Register, Reg: 40}},
		{"Breg", Breg(arch.X86_64_RDI, 8), []byte{0x75, 8}, Result{Kind: Memory, Addr: 0x7008}},
		{"Breg negative", Breg(arch.X86_64_RDI, -8), []byte{0x75, 0x78}, Result{Kind: Memory, Addr: 0x6ff8}},
		{"Breg bregx", Breg(40, -1), []byte{0x92, 40, 0x7f}, Result{Kind: Memory, Addr: 0x8fff}},
		{"Fbreg", Fbreg(-24), []byte{0x91, 0x68}, Result{Kind: Memory, Addr: 0x7100 - 24}},
		{"CallFrameCFA", CallFrameCFA(), []byte{0x9c}, Result{Kind: Memory, Addr: 0x7010}},
		{"CFA plus", CallFrameCFA().PlusUconst(16), []byte{0x9c, 0x23, 16}, Result{Kind: Memory, Addr: 0x7020}},
		{"Deref", Breg(arch.X86_64_RDI, 0).Deref(), []byte{0x75, 0, 0x06}, Result{Kind: Memory, Addr: 0x7008}},
		{"DerefSize", Breg(arch.X86_64_RDI, 8).DerefSize(2), []byte{0x75, 8, 0x94, 2}, Result{Kind: Memory, Addr: 0x7788}},
		// The fixnum: a value tagged in its low bit, untagged by
		// an arithmetic shift. RAX = 85 = 42<<1 | 1.
		{"untag", Breg(arch.X86_64_RAX, 0).Const(1).Op(dwarf.DW_OP_shra).StackValue(),
			[]byte{0x70, 0, 0x31, 0x26, 0x9f}, Result{Kind: Value, Value: 42}},
		{"mask", Breg(arch.X86_64_RAX, 0).Const(-8).Op(dwarf.DW_OP_and).StackValue(),
			[]byte{0x70, 0, 0x09, 0xf8, 0x1a, 0x9f}, Result{Kind: Value, Value: 80}},
		{"Const stack value", Const(-5).StackValue(), []byte{0x09, 0xfb, 0x9f}, Result{Kind: Value, Value: ^uint64(4)}},
		{"Uconst", Code{}.Uconst(math.MaxUint64).StackValue(), append(append([]byte{0x0e}, bytes.Repeat([]byte{0xff}, 8)...), 0x9f), Result{Kind: Value, Value: math.MaxUint64}},
		{"ImplicitValue", Code{}.ImplicitValue([]byte{1, 2, 3}), []byte{0x9e, 3, 1, 2, 3}, Result{Kind: Implicit, Bytes: []byte{1, 2, 3}}},
		{"Piece", Fbreg(8).Piece(4), []byte{0x91, 8, 0x93, 4}, Result{Kind: Memory, Addr: 0x7108, PieceSize: 4}},
		{"Reg Piece", Reg(arch.X86_64_RAX).Piece(8), []byte{0x50, 0x93, 8}, Result{Kind: Register, Reg: arch.X86_64_RAX, PieceSize: 8}},
	} {
		if !bytes.Equal(tc.code, tc.bytes) {
			t.Errorf("%s: bytes % x, want % x", tc.name, []byte(tc.code), tc.bytes)
		}
		got, err := Eval(tc.code, p64, c)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
		// Decode agrees and names the registers.
		ops, err := Decode(tc.code, p64)
		if err != nil {
			t.Errorf("%s: Decode: %v", tc.name, err)
		} else if end := ops[len(ops)-1].Offset; end >= uint64(len(tc.code)) {
			t.Errorf("%s: last operation at %d of %d bytes", tc.name, end, len(tc.code))
		}
	}
	// Two pieces: Decode reads both (Eval implements one).
	ops, err := Decode(Reg(arch.X86_64_RAX).Piece(8).Reg(arch.X86_64_RDX).Piece(8), p64)
	if err != nil || len(ops) != 4 || ops[2].Op != dwarf.DW_OP_reg0+1 || ops[3].Args[0] != 8 {
		t.Errorf("two pieces: %v %v", ops, err)
	}
}

// TestConstShortest checks, for values around every encoding boundary,
// that Const's expression evaluates to the value and is no longer than
// any other encoding of it.
func TestConstShortest(t *testing.T) {
	var vals []int64
	for _, b := range []int64{0, 31, 32, 0x7f, 0x80, 0xff, 0x100, 0x3fff, 0x4000, 0x7fff, 0x8000, 0xffff, 0x10000,
		1<<20 - 1, 1 << 20, 1<<27 - 1, 1 << 27, 0x7fffffff, 0x80000000, 0xffffffff, 1 << 32, 1<<34 - 1, 1 << 34, 1 << 48, 1<<62 - 1, 1 << 62, math.MaxInt64} {
		for d := int64(-1); d <= 1; d++ {
			vals = append(vals, b+d, -b+d)
		}
	}
	vals = append(vals, math.MinInt64, math.MinInt64+1)
	for _, v := range vals {
		code := Const(v)
		r, err := Eval(code.StackValue(), p64, &ctx{})
		if err != nil || r.Value != uint64(v) {
			t.Errorf("Const(%d) = % x: %+v %v", v, []byte(code), r, err)
			continue
		}
		if n := shortestConst(v); len(code) != n {
			t.Errorf("Const(%d) = % x, %d bytes; the shortest encoding has %d", v, []byte(code), len(code), n)
		}
	}
	// Uconst above MaxInt64 and below.
	for _, v := range []uint64{0, 1, math.MaxInt64, math.MaxInt64 + 1, math.MaxUint64} {
		r, err := Eval(Code{}.Uconst(v).StackValue(), p64, &ctx{})
		if err != nil || r.Value != v {
			t.Errorf("Uconst(%d): %+v %v", v, r, err)
		}
	}
}

// shortestConst is the length of the shortest expression that pushes v,
// by trying every constant operation.
func shortestConst(v int64) int {
	n := 1 + dwarf.Sleb128Size(v) // consts
	if v >= 0 {
		n = min(n, 1+dwarf.Uleb128Size(uint64(v)))
	}
	fits := func(bits uint, signed bool) bool {
		if signed {
			return bits == 64 || v >= -1<<(bits-1) && v < 1<<(bits-1)
		}
		return v >= 0 && (bits == 64 || v < 1<<bits)
	}
	for _, f := range []struct {
		bits   uint
		signed bool
	}{{8, false}, {8, true}, {16, false}, {16, true}, {32, false}, {32, true}, {64, true}} {
		if fits(f.bits, f.signed) {
			n = min(n, 1+int(f.bits/8))
		}
	}
	if v >= 0 && v < 32 {
		n = 1
	}
	return n
}

func TestOpPanicsOnOperands(t *testing.T) {
	for _, op := range []dwarf.Op{dwarf.DW_OP_const1u, dwarf.DW_OP_breg0, dwarf.DW_OP_fbreg, dwarf.DW_OP_piece, 0xff} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Op(%v) did not panic", op)
				}
			}()
			Code{}.Op(op)
		}()
	}
	if got := (Code{}).Op(dwarf.DW_OP_lit0 + 3).Op(dwarf.DW_OP_reg0 + 2).Op(dwarf.DW_OP_plus); !bytes.Equal(got, []byte{0x33, 0x52, 0x22}) {
		t.Errorf("Op: % x", []byte(got))
	}
}

func TestDecode(t *testing.T) {
	code := Code{}.Breg(arch.X86_64_RDI, -16).Deref().Const(-300).Op(dwarf.DW_OP_plus).Breg(40, 7).
		Op(dwarf.DW_OP_minus).Uconst(1 << 40).Op(dwarf.DW_OP_and).ImplicitValue([]byte{9}).Piece(3)
	ops, err := Decode(code, p64)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range ops {
		got = append(got, o.String())
	}
	want := "[DW_OP_breg5 -16 DW_OP_deref DW_OP_const2s -300 DW_OP_plus DW_OP_bregx 40 7 DW_OP_minus DW_OP_constu 1099511627776 DW_OP_and DW_OP_implicit_value [09] DW_OP_piece 3]"
	if fmt.Sprint(got) != want {
		t.Errorf("Decode:\n got %v\nwant %s", got, want)
	}
	if r, ok := ops[0].Reg(); !ok || r != arch.X86_64_RDI {
		t.Errorf("Reg of %v: %v %v", ops[0], r, ok)
	}
	if r, ok := ops[4].Reg(); !ok || r != 40 {
		t.Errorf("Reg of %v: %v %v", ops[4], r, ok)
	}
	if _, ok := ops[1].Reg(); ok {
		t.Errorf("Reg of %v: ok", ops[1])
	}
	// Offsets and the format-dependent operand.
	p := p64
	p.Format = dwarf.Format64
	ops, err = Decode([]byte{0x9a, 1, 0, 0, 0, 0, 0, 0, 0, 0x96}, p)
	if err != nil || len(ops) != 2 || ops[0].Args[0] != 1 || ops[1].Offset != 9 {
		t.Errorf("call_ref in the 64-bit format: %v %v", ops, err)
	}
	for _, bad := range []struct {
		code []byte
		off  uint64
	}{{[]byte{0x96, 0xff}, 1}, {[]byte{0x0c, 1, 2}, 1}, {[]byte{0x9e, 5, 1}, 2}, {[]byte{0x70}, 1}} {
		_, err := Decode(bad.code, p64)
		var fe *dwarf.FormatError
		if !asFormatError(err, &fe) || fe.Offset != p64.Offset+bad.off || fe.Source != ".debug_info" {
			t.Errorf("Decode(% x): %v, want a FormatError at %#x", bad.code, err, p64.Offset+bad.off)
		}
	}
}

// FuzzDecode checks Decode against the evaluator (an expression Eval
// accepts decodes) and against a re-encoding of what it decoded (decoding
// that gives the same operations).
func FuzzDecode(f *testing.F) {
	f.Add([]byte(Breg(arch.X86_64_RAX, 0).Const(1).Op(dwarf.DW_OP_shra).StackValue()))
	f.Add([]byte(Reg(arch.X86_64_RAX).Piece(8).Reg(arch.X86_64_RDX).Piece(8)))
	f.Add([]byte{0xa4, 3, 2, 0xaa, 0xbb, 0x9a, 1, 2, 3, 4})
	f.Fuzz(func(t *testing.T, code []byte) {
		ops, err := Decode(code, p64)
		// Eval reads every operation unless a branch jumps over some.
		branches := bytes.IndexByte(code, byte(dwarf.DW_OP_skip)) >= 0 || bytes.IndexByte(code, byte(dwarf.DW_OP_bra)) >= 0
		if _, eerr := Eval(code, p64, &fixedCtx{rsp: 0x7000}); eerr == nil && err != nil && !branches {
			t.Fatalf("Eval accepts % x, Decode refuses it: %v", code, err)
		}
		if err != nil {
			return
		}
		var re []byte
		for i, o := range ops {
			if code[o.Offset] != byte(o.Op) || i > 0 && o.Offset <= ops[i-1].Offset || i == 0 && o.Offset != 0 {
				t.Fatalf("operation %d at %d does not start with its opcode or is out of order", i, o.Offset)
			}
			re = appendOperation(re, o)
		}
		again, err := Decode(re, p64)
		if err != nil {
			t.Fatalf("re-encoded % x: %v", re, err)
		}
		if len(again) != len(ops) {
			t.Fatalf("re-encoded: %d operations, want %d", len(again), len(ops))
		}
		for i := range ops {
			a, b := ops[i], again[i]
			a.Offset, b.Offset = 0, 0
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("operation %d: %+v, re-encoded %+v", i, ops[i], again[i])
			}
		}
	})
}

// appendOperation is the test's own encoder of a decoded operation
// (minimal LEB128 operands).
func appendOperation(b []byte, o Operation) []byte {
	b = append(b, byte(o.Op))
	kinds := operandsOf[o.Op]
	if o.Op >= dwarf.DW_OP_breg0 && o.Op <= dwarf.DW_OP_breg31 {
		kinds = []operand{opSleb}
	}
	i := 0
	for _, k := range kinds {
		switch k {
		case opBlock:
			b = dwarf.AppendUleb128(b, uint64(len(o.Block)))
			b = append(b, o.Block...)
			continue
		case opBlock1:
			b = append(b, byte(len(o.Block)))
			b = append(b, o.Block...)
			continue
		}
		v := o.Args[i]
		i++
		switch k {
		case opU8, opS8:
			b = append(b, byte(v))
		case opU16, opS16:
			b = binary.LittleEndian.AppendUint16(b, uint16(v))
		case opU32, opS32, opOffset:
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		case opU64, opS64, opAddr:
			b = binary.LittleEndian.AppendUint64(b, v)
		case opUleb:
			b = dwarf.AppendUleb128(b, v)
		case opSleb:
			b = dwarf.AppendSleb128(b, int64(v))
		}
	}
	return b
}

func asFormatError(err error, fe **dwarf.FormatError) bool {
	e, ok := err.(*dwarf.FormatError)
	*fe = e
	return ok
}
