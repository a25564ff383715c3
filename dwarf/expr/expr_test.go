package expr

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
)

type ctx struct {
	regs map[arch.Reg]uint64
	mem  map[uint64]uint64
	cfa  uint64
	fb   uint64
}

func (c *ctx) Reg(r arch.Reg) (uint64, bool) { v, ok := c.regs[r]; return v, ok }
func (c *ctx) ReadMemory(a uint64, n int) (uint64, error) {
	v, ok := c.mem[a]
	if !ok {
		return 0, fmt.Errorf("unmapped %#x", a)
	}
	if n < 8 {
		v &= 1<<(8*n) - 1
	}
	return v, nil
}
func (c *ctx) CFA() (uint64, bool)       { return c.cfa, c.cfa != 0 }
func (c *ctx) FrameBase() (uint64, bool) { return c.fb, c.fb != 0 }

var p64 = Params{Section: ".debug_info", Offset: 0x100, AddrSize: 8, Order: binary.LittleEndian}

func op(o dwarf.Op, operands ...byte) []byte { return append([]byte{byte(o)}, operands...) }

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func lit(n int) []byte { return op(dwarf.DW_OP_lit0 + dwarf.Op(n)) }

func TestEval(t *testing.T) {
	c := &ctx{
		regs: map[arch.Reg]uint64{arch.X86_64_RSP: 0x7000, arch.X86_64_RBP: 0x7100, arch.X86_64_RA: 0x40100b},
		mem:  map[uint64]uint64{0x7008: 0x1122334455667788, 0x7100: 0x7200},
		cfa:  0x7010, fb: 0x7100,
	}
	breg := func(r arch.Reg, off byte) []byte { return op(dwarf.DW_OP_breg0+dwarf.Op(r), off) }
	// GNU ld's PLT CFA expression: rsp + 8 + (((rip & 15) >= 11) << 3).
	plt := cat(breg(arch.X86_64_RSP, 8), breg(arch.X86_64_RA, 0), lit(15), op(dwarf.DW_OP_and), lit(11), op(dwarf.DW_OP_ge), lit(3), op(dwarf.DW_OP_shl), op(dwarf.DW_OP_plus))
	for _, tc := range []struct {
		name    string
		code    []byte
		initial []uint64
		want    Result
	}{
		{"lit", lit(7), nil, Result{Kind: Memory, Addr: 7}},
		{"addr", op(dwarf.DW_OP_addr, 1, 2, 3, 4, 5, 6, 7, 8), nil, Result{Kind: Memory, Addr: 0x0807060504030201}},
		{"const1s", op(dwarf.DW_OP_const1s, 0xff), nil, Result{Kind: Memory, Addr: ^uint64(0)}},
		{"const2u", op(dwarf.DW_OP_const2u, 0x34, 0x12), nil, Result{Kind: Memory, Addr: 0x1234}},
		{"consts", op(dwarf.DW_OP_consts, 0x7f), nil, Result{Kind: Memory, Addr: ^uint64(0)}},
		{"reg", op(dwarf.DW_OP_reg0 + 6), nil, Result{Kind: Register, Reg: 6}},
		{"regx piece", op(dwarf.DW_OP_regx, 17, byte(dwarf.DW_OP_piece), 8), nil, Result{Kind: Register, Reg: 17, PieceSize: 8}},
		{"fbreg", op(dwarf.DW_OP_fbreg, 0x70), nil, Result{Kind: Memory, Addr: 0x7100 - 16}},
		{"breg deref", cat(breg(arch.X86_64_RSP, 8), op(dwarf.DW_OP_deref)), nil, Result{Kind: Memory, Addr: 0x1122334455667788}},
		{"deref_size", cat(breg(arch.X86_64_RSP, 8), op(dwarf.DW_OP_deref_size, 2)), nil, Result{Kind: Memory, Addr: 0x7788}},
		{"cfa", op(dwarf.DW_OP_call_frame_cfa), nil, Result{Kind: Memory, Addr: 0x7010}},
		{"initial", cat(lit(8), op(dwarf.DW_OP_minus)), []uint64{0x7010}, Result{Kind: Memory, Addr: 0x7008}},
		{"plt", plt, nil, Result{Kind: Memory, Addr: 0x7010}},
		{"stack_value", cat(lit(3), lit(4), op(dwarf.DW_OP_mul), op(dwarf.DW_OP_stack_value)), nil, Result{Kind: Value, Value: 12}},
		{"implicit", op(dwarf.DW_OP_implicit_value, 2, 0xaa, 0xbb), nil, Result{Kind: Implicit, Bytes: []byte{0xaa, 0xbb}}},
		{"rot", cat(lit(1), lit(2), lit(3), op(dwarf.DW_OP_rot), op(dwarf.DW_OP_drop)), nil, Result{Kind: Memory, Addr: 1}},
		{"rot top", cat(lit(1), lit(2), lit(3), op(dwarf.DW_OP_rot)), nil, Result{Kind: Memory, Addr: 2}},
		{"swap over pick", cat(lit(1), lit(2), op(dwarf.DW_OP_swap), op(dwarf.DW_OP_over), op(dwarf.DW_OP_pick, 2), op(dwarf.DW_OP_plus), op(dwarf.DW_OP_plus)), nil, Result{Kind: Memory, Addr: 2 + 1 + 2}},
		{"div signed", cat(op(dwarf.DW_OP_const1s, 0xf8), lit(2), op(dwarf.DW_OP_div)), nil, Result{Kind: Memory, Addr: ^uint64(3)}},
		{"mod", cat(lit(17), lit(5), op(dwarf.DW_OP_mod)), nil, Result{Kind: Memory, Addr: 2}},
		{"shra", cat(op(dwarf.DW_OP_const1s, 0xf0), lit(2), op(dwarf.DW_OP_shra)), nil, Result{Kind: Memory, Addr: ^uint64(3)}},
		{"shr", cat(op(dwarf.DW_OP_const1u, 0xf0), lit(4), op(dwarf.DW_OP_shr)), nil, Result{Kind: Memory, Addr: 0xf}},
		{"abs neg not", cat(lit(5), op(dwarf.DW_OP_neg), op(dwarf.DW_OP_abs), op(dwarf.DW_OP_not)), nil, Result{Kind: Memory, Addr: ^uint64(5)}},
		{"lt", cat(op(dwarf.DW_OP_const1s, 0xff), lit(1), op(dwarf.DW_OP_lt)), nil, Result{Kind: Memory, Addr: 1}},
		{"xor or", cat(lit(6), lit(3), op(dwarf.DW_OP_xor), lit(8), op(dwarf.DW_OP_or)), nil, Result{Kind: Memory, Addr: 13}},
		{"plus_uconst", cat(lit(1), op(dwarf.DW_OP_plus_uconst, 0x80, 1)), nil, Result{Kind: Memory, Addr: 129}},
		// if 1 then 10 else 20, with bra/skip
		{"bra", cat(lit(1), op(dwarf.DW_OP_bra, 4, 0), lit(20), op(dwarf.DW_OP_skip, 1, 0), lit(10), op(dwarf.DW_OP_nop)), nil, Result{Kind: Memory, Addr: 10}},
		{"bra not taken", cat(lit(0), op(dwarf.DW_OP_bra, 4, 0), lit(20), op(dwarf.DW_OP_skip, 1, 0), lit(10)), nil, Result{Kind: Memory, Addr: 20}},
		{"piece", cat(op(dwarf.DW_OP_fbreg, 8), op(dwarf.DW_OP_piece, 4)), nil, Result{Kind: Memory, Addr: 0x7108, PieceSize: 4}},
		{"eq ne gt le", cat(lit(2), lit(2), op(dwarf.DW_OP_eq), lit(1), op(dwarf.DW_OP_ne), lit(0), op(dwarf.DW_OP_gt), lit(1), op(dwarf.DW_OP_le)), nil, Result{Kind: Memory, Addr: 1}},
	} {
		got, err := Eval(tc.code, p64, c, tc.initial...)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestEval32(t *testing.T) {
	p := p64
	p.AddrSize = 4
	got, err := Eval(cat(lit(0), lit(1), op(dwarf.DW_OP_minus)), p, &ctx{})
	if err != nil || got.Addr != 0xffffffff {
		t.Fatalf("0-1 with 4-byte addresses: %+v %v", got, err)
	}
	got, err = Eval(cat(op(dwarf.DW_OP_const4u, 0, 0, 0, 0x80), lit(1), op(dwarf.DW_OP_shra)), p, &ctx{})
	if err != nil || got.Addr != 0xc0000000 {
		t.Fatalf("shra: %+v %v", got, err)
	}
}

func TestEvalErrors(t *testing.T) {
	c := &ctx{regs: map[arch.Reg]uint64{}}
	for _, tc := range []struct {
		name        string
		code        []byte
		off         uint64 // offset within the expression of the failing op
		unsupported bool
	}{
		{"underflow", cat(lit(1), op(dwarf.DW_OP_plus)), 1, false},
		{"div zero", cat(lit(1), lit(0), op(dwarf.DW_OP_div)), 2, false},
		{"mod zero", cat(lit(1), lit(0), op(dwarf.DW_OP_mod)), 2, false},
		{"no reg", op(dwarf.DW_OP_breg0+3, 0), 0, false},
		{"no mem", cat(lit(8), op(dwarf.DW_OP_deref)), 1, false},
		{"no cfa", op(dwarf.DW_OP_call_frame_cfa), 0, false},
		{"no fb", op(dwarf.DW_OP_fbreg, 0), 0, false},
		{"truncated", op(dwarf.DW_OP_const4u, 1, 2), 1, false},
		{"empty", nil, 0, false},
		{"reg then more", cat(op(dwarf.DW_OP_reg0), lit(1)), 1, false},
		{"loop", op(dwarf.DW_OP_skip, 0xfd, 0xff), 0, false},
		{"branch out", op(dwarf.DW_OP_skip, 0x10, 0), 0, false},
		{"pick deep", cat(lit(1), op(dwarf.DW_OP_pick, 1)), 1, false},
		{"deref_size 9", cat(lit(1), op(dwarf.DW_OP_deref_size, 9)), 1, false},
		{"two pieces", cat(op(dwarf.DW_OP_reg0), op(dwarf.DW_OP_piece, 8), op(dwarf.DW_OP_reg0+1), op(dwarf.DW_OP_piece, 8)), 3, true},
		{"xderef", cat(lit(1), op(dwarf.DW_OP_xderef)), 1, true},
		{"call2", op(dwarf.DW_OP_call2, 0, 0), 0, true},
	} {
		_, err := Eval(tc.code, p64, c)
		var fe *dwarf.FormatError
		if !errors.As(err, &fe) {
			t.Errorf("%s: err %v, want a FormatError", tc.name, err)
			continue
		}
		if fe.Source != ".debug_info" || (tc.name != "empty" && tc.name != "loop" && fe.Offset != 0x100+tc.off) {
			t.Errorf("%s: error %v, want offset %#x", tc.name, err, 0x100+tc.off)
		}
		if errors.Is(err, ErrUnsupported) != tc.unsupported {
			t.Errorf("%s: err %v, unsupported should be %v", tc.name, err, tc.unsupported)
		}
	}
	// A stack deeper than MaxStack.
	var deep []byte
	for range MaxStack + 1 {
		deep = append(deep, lit(1)...)
	}
	if _, err := Eval(deep, p64, c); err == nil {
		t.Error("stack overflow: no error")
	}
}

type fixedCtx struct{ rsp uint64 }

func (c *fixedCtx) Reg(r arch.Reg) (uint64, bool)              { return c.rsp, r == arch.X86_64_RSP }
func (c *fixedCtx) ReadMemory(a uint64, n int) (uint64, error) { return a + 1, nil }
func (c *fixedCtx) CFA() (uint64, bool)                        { return 0x1000, true }
func (c *fixedCtx) FrameBase() (uint64, bool)                  { return 0x2000, true }

func TestEvalNoAlloc(t *testing.T) {
	c := &fixedCtx{rsp: 0x7000}
	code := cat(op(dwarf.DW_OP_breg0+7, 8), op(dwarf.DW_OP_deref), lit(3), op(dwarf.DW_OP_plus), op(dwarf.DW_OP_call_frame_cfa), op(dwarf.DW_OP_minus))
	n := testing.AllocsPerRun(100, func() {
		if _, err := Eval(code, p64, c, 0x10); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations per Eval", n)
	}
}

func FuzzEval(f *testing.F) {
	f.Add(cat(op(dwarf.DW_OP_breg0+7, 8), op(dwarf.DW_OP_deref), lit(3), op(dwarf.DW_OP_plus)), uint64(0x10), true)
	f.Add(cat(lit(1), op(dwarf.DW_OP_bra, 4, 0), lit(20), op(dwarf.DW_OP_skip, 1, 0), lit(10), op(dwarf.DW_OP_stack_value)), uint64(0), false)
	f.Add(op(dwarf.DW_OP_implicit_value, 2, 0xaa, 0xbb), uint64(0), true)
	f.Add(cat(op(dwarf.DW_OP_regx, 17, byte(dwarf.DW_OP_piece), 8)), uint64(0), true)
	f.Fuzz(func(t *testing.T, code []byte, initial uint64, addr8 bool) {
		p := p64
		if !addr8 {
			p.AddrSize = 4
		}
		r, err := Eval(code, p, &fixedCtx{rsp: 0x7000}, initial)
		if err == nil && r.Kind == 0 {
			t.Fatal("no result kind")
		}
	})
}
