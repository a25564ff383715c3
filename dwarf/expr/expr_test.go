package expr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
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

// FuzzEval evaluates arbitrary expressions: a result has a kind, errors
// are the documented ones, and Decode accepts what Eval accepted (when no
// branch could have skipped an operation). FuzzEvalReference checks the
// values.
func FuzzEval(f *testing.F) {
	f.Add(cat(op(dwarf.DW_OP_breg0+7, 8), op(dwarf.DW_OP_deref), lit(3), op(dwarf.DW_OP_plus)), uint64(0x10), true)
	f.Add(cat(lit(1), op(dwarf.DW_OP_bra, 4, 0), lit(20), op(dwarf.DW_OP_skip, 1, 0), lit(10), op(dwarf.DW_OP_stack_value)), uint64(0), false)
	f.Add(op(dwarf.DW_OP_implicit_value, 2, 0xaa, 0xbb), uint64(0), true)
	f.Add(cat(op(dwarf.DW_OP_regx, 17, byte(dwarf.DW_OP_piece), 8)), uint64(0), true)
	f.Add(cat(op(dwarf.DW_OP_entry_value, 1, byte(dwarf.DW_OP_reg0)+5), op(dwarf.DW_OP_stack_value)), uint64(0), true)
	f.Fuzz(func(t *testing.T, code []byte, initial uint64, addr8 bool) {
		p := p64
		if !addr8 {
			p.AddrSize = 4
		}
		r, err := Eval(code, p, &fixedCtx{rsp: 0x7000}, initial)
		if err == nil && r.Kind == 0 {
			t.Fatal("no result kind")
		}
		var fe *dwarf.FormatError
		if err != nil && !errors.As(err, &fe) && !errors.Is(err, ErrUnsupported) {
			t.Fatalf("error %v (%T) is neither a *dwarf.FormatError nor ErrUnsupported", err, err)
		}
		// Decode accepts what Eval ran to the end without branching.
		if err == nil && bytes.IndexByte(code, byte(dwarf.DW_OP_skip)) < 0 && bytes.IndexByte(code, byte(dwarf.DW_OP_bra)) < 0 {
			if _, derr := Decode(code, p); derr != nil {
				t.Fatalf("Eval accepts % x, Decode refuses it: %v", code, derr)
			}
		}
	})
}

// refOps are the operations refEval implements: the stack and arithmetic
// operations of DWARF 5 sections 2.5.1.1 to 2.5.1.4 on 64-bit values.
var refOps = []dwarf.Op{
	dwarf.DW_OP_lit0, dwarf.DW_OP_const1u, dwarf.DW_OP_const1s, dwarf.DW_OP_const8u, dwarf.DW_OP_dup, dwarf.DW_OP_drop,
	dwarf.DW_OP_swap, dwarf.DW_OP_over, dwarf.DW_OP_rot, dwarf.DW_OP_pick, dwarf.DW_OP_plus, dwarf.DW_OP_minus,
	dwarf.DW_OP_mul, dwarf.DW_OP_div, dwarf.DW_OP_mod, dwarf.DW_OP_and, dwarf.DW_OP_or, dwarf.DW_OP_xor,
	dwarf.DW_OP_neg, dwarf.DW_OP_not, dwarf.DW_OP_abs, dwarf.DW_OP_shl, dwarf.DW_OP_shr, dwarf.DW_OP_shra,
	dwarf.DW_OP_plus_uconst, dwarf.DW_OP_eq, dwarf.DW_OP_ne, dwarf.DW_OP_lt, dwarf.DW_OP_gt, dwarf.DW_OP_le,
	dwarf.DW_OP_ge, dwarf.DW_OP_deref, dwarf.DW_OP_breg0,
}

// refEval is an independent evaluator of the operations in refOps, built
// from spec (two bytes an operation: which, and an operand), written
// straight from the spec's definitions. It returns the encoded expression
// (ending in DW_OP_stack_value), the value on top of the stack, and ok;
// ok is false when the expression fails here (stack underflow, division
// by zero); defined is false when the spec leaves a result open (a shift
// by 64 or more, the absolute value or quotient that overflows): the
// reference goes on with a stand-in (0 for a shift), so its value and a
// failure after that point (a division by the stand-in) say nothing, and
// only the encoding is usable. ctx is fixedCtx: memory at a holds a+1, rsp is
// 0x7000.
func refEval(spec []byte) (code []byte, top uint64, ok, defined bool) {
	var st []uint64
	ok, defined = true, true
	pop := func() uint64 {
		if len(st) == 0 {
			ok = false
			return 0
		}
		v := st[len(st)-1]
		st = st[:len(st)-1]
		return v
	}
	push := func(v uint64) { st = append(st, v) }
	b2 := func(x bool) uint64 {
		if x {
			return 1
		}
		return 0
	}
	for i := 0; i+1 < len(spec) && ok && len(st) < MaxStack-1; i += 2 {
		o, n := refOps[int(spec[i])%len(refOps)], spec[i+1]
		code = append(code, byte(o))
		switch o {
		case dwarf.DW_OP_lit0:
			code[len(code)-1] += n % 32
			push(uint64(n % 32))
		case dwarf.DW_OP_const1u:
			code = append(code, n)
			push(uint64(n))
		case dwarf.DW_OP_const1s:
			code = append(code, n)
			push(uint64(int64(int8(n))))
		case dwarf.DW_OP_const8u:
			v := uint64(n) * 0x0101010101010101
			code = binary.LittleEndian.AppendUint64(code, v)
			push(v)
		case dwarf.DW_OP_plus_uconst:
			code = dwarf.AppendUleb128(code, uint64(n)<<20)
			push(pop() + uint64(n)<<20)
		case dwarf.DW_OP_pick:
			code = append(code, n%4)
			if int(n%4) >= len(st) {
				ok = false
				break
			}
			push(st[len(st)-1-int(n%4)])
		case dwarf.DW_OP_breg0: // DW_OP_breg7 (rsp) + offset
			code[len(code)-1] += 7
			code = dwarf.AppendSleb128(code, int64(int8(n)))
			push(0x7000 + uint64(int64(int8(n))))
		case dwarf.DW_OP_dup:
			v := pop()
			push(v)
			push(v)
		case dwarf.DW_OP_drop:
			pop()
		case dwarf.DW_OP_swap:
			a, b := pop(), pop()
			push(a)
			push(b)
		case dwarf.DW_OP_over:
			a, b := pop(), pop()
			push(b)
			push(a)
			push(b)
		case dwarf.DW_OP_rot: // top three: (c b a) -> (a c b), a on top first
			a, b, c := pop(), pop(), pop()
			push(a)
			push(c)
			push(b)
		case dwarf.DW_OP_neg:
			push(-pop())
		case dwarf.DW_OP_not:
			push(^pop())
		case dwarf.DW_OP_abs:
			v := int64(pop())
			if v == math.MinInt64 {
				defined = false
			}
			if v < 0 {
				v = -v
			}
			push(uint64(v))
		case dwarf.DW_OP_deref:
			push(pop() + 1)
		default: // binary: a is the former second entry, b the top
			b, a := pop(), pop()
			if !ok {
				break
			}
			sa, sb := int64(a), int64(b)
			var r uint64
			switch o {
			case dwarf.DW_OP_plus:
				r = a + b
			case dwarf.DW_OP_minus:
				r = a - b
			case dwarf.DW_OP_mul:
				r = a * b
			case dwarf.DW_OP_div: // signed
				if b == 0 {
					ok = false
					break
				}
				if sa == math.MinInt64 && sb == -1 {
					defined = false
				}
				r = uint64(sa / sb)
			case dwarf.DW_OP_mod: // unsigned
				if b == 0 {
					ok = false
					break
				}
				r = a % b
			case dwarf.DW_OP_and:
				r = a & b
			case dwarf.DW_OP_or:
				r = a | b
			case dwarf.DW_OP_xor:
				r = a ^ b
			case dwarf.DW_OP_shl, dwarf.DW_OP_shr, dwarf.DW_OP_shra:
				if b >= 64 {
					defined = false
					break
				}
				r = map[dwarf.Op]uint64{dwarf.DW_OP_shl: a << b, dwarf.DW_OP_shr: a >> b, dwarf.DW_OP_shra: uint64(sa >> b)}[o]
			case dwarf.DW_OP_eq:
				r = b2(sa == sb)
			case dwarf.DW_OP_ne:
				r = b2(sa != sb)
			case dwarf.DW_OP_lt:
				r = b2(sa < sb)
			case dwarf.DW_OP_gt:
				r = b2(sa > sb)
			case dwarf.DW_OP_le:
				r = b2(sa <= sb)
			case dwarf.DW_OP_ge:
				r = b2(sa >= sb)
			}
			push(r)
		}
	}
	code = append(code, byte(dwarf.DW_OP_stack_value))
	if ok && len(st) == 0 {
		ok = false
	}
	if !ok || len(st) == 0 {
		return code, 0, ok, defined
	}
	return code, st[len(st)-1], ok, defined
}

// FuzzEvalReference compares Eval with refEval on stack and arithmetic
// programs: the same value, or an error exactly where the reference
// fails, and always a *dwarf.FormatError.
func FuzzEvalReference(f *testing.F) {
	f.Add([]byte{0, 3, 0, 5, 10, 0})                     // 3 5 plus
	f.Add([]byte{2, 0xfb, 0, 2, 13, 0, 1, 7, 14, 0})     // -5 2 div 7 mod
	f.Add([]byte{32, 8, 31, 0, 4, 0, 8, 0, 9, 2, 29, 0}) // breg7 deref dup ... pick ge
	f.Add([]byte{0, 1, 0, 63, 21, 0, 19, 0, 0, 4, 23, 0})
	f.Fuzz(func(t *testing.T, spec []byte) {
		if len(spec) > 200 {
			spec = spec[:200]
		}
		code, want, ok, defined := refEval(spec)
		r, err := Eval(code, p64, &fixedCtx{rsp: 0x7000})
		if err != nil {
			var fe *dwarf.FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("Eval(% x): error %v (%T) is not a *dwarf.FormatError", code, err, err)
			}
			if ok && defined {
				t.Fatalf("Eval(% x): %v; the reference computes %#x", code, err, want)
			}
			return
		}
		if !ok && defined {
			t.Fatalf("Eval(% x) = %+v; the reference fails", code, r)
		}
		if defined && (r.Kind != Value || r.Value != want) {
			t.Fatalf("Eval(% x) = %+v; the reference computes %#x", code, r, want)
		}
	})
}
