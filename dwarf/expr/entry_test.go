package expr

import (
	"errors"
	"fmt"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
)

// entryCtx gives a value on entry for the registers in entry (size 0),
// and for a size > 0 the register's entry value plus the size.
type entryCtx struct {
	ctx
	entry map[arch.Reg]uint64
	asked []string
}

func (c *entryCtx) EntryValue(r arch.Reg, size int) (uint64, error) {
	c.asked = append(c.asked, fmt.Sprintf("r%d/%d", r, size))
	v, ok := c.entry[r]
	if !ok {
		return 0, fmt.Errorf("%w: no call site parameter for register %d", ErrNoEntryValue, r)
	}
	return v + uint64(size), nil
}

func entry(o dwarf.Op, sub ...byte) []byte {
	return cat(op(o, byte(len(sub))), sub)
}

// TestEvalEntryValue: DW_OP_entry_value and DW_OP_GNU_entry_value of a
// register (DW_OP_regN, DW_OP_regx) and of the memory a register pointed
// to (DW_OP_bregN 0 and DW_OP_deref, DW_OP_deref_size), as gcc emits them
// (DW_OP_entry_value(DW_OP_reg5) DW_OP_stack_value, and arithmetic after
// it), pushed where the EntryValuer says; sub-expressions gdb does not
// take are unsupported; without an EntryValuer or its answer the error
// wraps ErrNoEntryValue and names the operation's offset.
func TestEvalEntryValue(t *testing.T) {
	rdi, rsi := arch.X86_64_RDI, arch.X86_64_RSI
	c := &entryCtx{entry: map[arch.Reg]uint64{rdi: 5, rsi: 0x7000}}
	for _, tc := range []struct {
		name  string
		code  []byte
		want  uint64
		asked string
	}{
		{"reg", cat(entry(dwarf.DW_OP_entry_value, byte(dwarf.DW_OP_reg0)+byte(rdi)), op(dwarf.DW_OP_stack_value)), 5, "r5/0"},
		{"GNU", cat(entry(dwarf.DW_OP_GNU_entry_value, byte(dwarf.DW_OP_reg0)+byte(rdi)), op(dwarf.DW_OP_stack_value)), 5, "r5/0"},
		{"regx", cat(entry(dwarf.DW_OP_entry_value, byte(dwarf.DW_OP_regx), byte(rsi)), op(dwarf.DW_OP_plus_uconst, 4), op(dwarf.DW_OP_stack_value)), 0x7004, "r4/0"},
		{"deref", cat(entry(dwarf.DW_OP_entry_value, byte(dwarf.DW_OP_breg0)+byte(rsi), 0, byte(dwarf.DW_OP_deref)), op(dwarf.DW_OP_stack_value)), 0x7008, "r4/8"},
		{"deref_size", cat(entry(dwarf.DW_OP_entry_value, byte(dwarf.DW_OP_bregx), byte(rsi), 0, byte(dwarf.DW_OP_deref_size), 4), op(dwarf.DW_OP_stack_value)), 0x7004, "r4/4"},
		{"memory", entry(dwarf.DW_OP_entry_value, byte(dwarf.DW_OP_reg0)+byte(rsi)), 0x7000, "r4/0"},
		{"two", cat(entry(dwarf.DW_OP_entry_value, byte(dwarf.DW_OP_reg0)+byte(rsi)), entry(dwarf.DW_OP_entry_value, byte(dwarf.DW_OP_reg0)+byte(rdi)), op(dwarf.DW_OP_minus), op(dwarf.DW_OP_stack_value)), 0x7000 - 5, "r4/0 r5/0"},
	} {
		c.asked = nil
		r, err := Eval(tc.code, p64, c)
		got := r.Value
		if r.Kind == Memory {
			got = r.Addr
		}
		if err != nil || got != tc.want || fmt.Sprint(c.asked) != "["+tc.asked+"]" {
			t.Errorf("%s: %+v, %v, asked %v; want %#x, asked %s", tc.name, r, err, c.asked, tc.want, tc.asked)
		}
	}
	for _, tc := range []struct {
		name        string
		code        []byte
		ctx         Context
		unsupported bool
	}{
		{"unknown register", cat(lit(1), entry(dwarf.DW_OP_entry_value, byte(dwarf.DW_OP_reg0)+3)), c, false},
		{"no EntryValuer", cat(lit(1), entry(dwarf.DW_OP_entry_value, byte(dwarf.DW_OP_reg0))), &c.ctx, false},
		{"breg offset", cat(lit(1), entry(dwarf.DW_OP_entry_value, byte(dwarf.DW_OP_breg0), 8, byte(dwarf.DW_OP_deref))), c, true},
		{"breg without deref", cat(lit(1), entry(dwarf.DW_OP_entry_value, byte(dwarf.DW_OP_breg0), 0)), c, true},
		{"deref_size 9", cat(lit(1), entry(dwarf.DW_OP_entry_value, byte(dwarf.DW_OP_breg0), 0, byte(dwarf.DW_OP_deref_size), 9)), c, true},
		{"two regs", cat(lit(1), entry(dwarf.DW_OP_entry_value, byte(dwarf.DW_OP_reg0), byte(dwarf.DW_OP_reg0))), c, true},
		{"empty", cat(lit(1), entry(dwarf.DW_OP_entry_value)), c, true},
		{"fbreg", cat(lit(1), entry(dwarf.DW_OP_entry_value, byte(dwarf.DW_OP_fbreg), 0)), c, true},
	} {
		_, err := Eval(tc.code, p64, tc.ctx)
		var fe *dwarf.FormatError
		if !errors.As(err, &fe) || fe.Offset != 0x101 || fe.Field != "DW_OP_entry_value" {
			t.Errorf("%s: err %v, want a FormatError at 0x101 naming DW_OP_entry_value", tc.name, err)
		}
		if errors.Is(err, ErrUnsupported) != tc.unsupported || errors.Is(err, ErrNoEntryValue) == tc.unsupported {
			t.Errorf("%s: err %v: unsupported %v, want %v (and ErrNoEntryValue otherwise)", tc.name, err, errors.Is(err, ErrUnsupported), tc.unsupported)
		}
	}
	// A truncated block is a malformed expression.
	if _, err := Eval(op(dwarf.DW_OP_entry_value, 3, byte(dwarf.DW_OP_reg0)), p64, c); err == nil || errors.Is(err, ErrNoEntryValue) {
		t.Errorf("truncated block: %v", err)
	}
}

// entryRegisterRef classifies a DW_OP_entry_value sub-expression from its
// operations as Decode splits them: one register location, or a base
// register with offset 0 and one dereference of 1 to addrSize bytes.
func entryRegisterRef(sub []byte, addrSize uint8) (arch.Reg, int, bool) {
	p := p64
	p.AddrSize = addrSize
	ops, err := Decode(sub, p)
	if err != nil {
		return 0, 0, false
	}
	reg := func(o Operation) (uint64, bool) {
		switch {
		case o.Op >= dwarf.DW_OP_reg0 && o.Op <= dwarf.DW_OP_reg31:
			return uint64(o.Op - dwarf.DW_OP_reg0), true
		case o.Op == dwarf.DW_OP_regx:
			return o.Args[0], true
		}
		return 0, false
	}
	if len(ops) == 1 {
		if r, ok := reg(ops[0]); ok && r <= 0xffff {
			return arch.Reg(r), 0, true
		}
		return 0, 0, false
	}
	if len(ops) != 2 {
		return 0, 0, false
	}
	var r, off uint64
	switch o := ops[0]; {
	case o.Op >= dwarf.DW_OP_breg0 && o.Op <= dwarf.DW_OP_breg31:
		r, off = uint64(o.Op-dwarf.DW_OP_breg0), o.Args[0]
	case o.Op == dwarf.DW_OP_bregx:
		r, off = o.Args[0], o.Args[1]
	default:
		return 0, 0, false
	}
	size := 0
	switch o := ops[1]; o.Op {
	case dwarf.DW_OP_deref:
		size = int(addrSize)
	case dwarf.DW_OP_deref_size:
		size = int(o.Args[0])
	}
	if off != 0 || r > 0xffff || size < 1 || size > int(addrSize) {
		return 0, 0, false
	}
	return arch.Reg(r), size, true
}

// FuzzEntryRegister: EntryRegister against entryRegisterRef on arbitrary
// sub-expressions, and Eval of DW_OP_entry_value(sub) DW_OP_stack_value
// pushes what the EntryValuer gives exactly when they accept sub.
func FuzzEntryRegister(f *testing.F) {
	f.Add([]byte{byte(dwarf.DW_OP_reg0) + 5}, true)
	f.Add([]byte{byte(dwarf.DW_OP_regx), 0x80, 0x01}, true)
	f.Add([]byte{byte(dwarf.DW_OP_breg0) + 7, 0, byte(dwarf.DW_OP_deref)}, true)
	f.Add([]byte{byte(dwarf.DW_OP_bregx), 3, 0x80, 0, byte(dwarf.DW_OP_deref_size), 4}, false)
	f.Add([]byte{byte(dwarf.DW_OP_breg0), 1, byte(dwarf.DW_OP_deref)}, true)
	f.Fuzz(func(t *testing.T, sub []byte, addr8 bool) {
		as := uint8(4)
		if addr8 {
			as = 8
		}
		r, size, ok := EntryRegister(sub, as)
		rr, rsize, rok := entryRegisterRef(sub, as)
		if ok != rok || r != rr || size != rsize {
			t.Fatalf("EntryRegister(% x, %d) = %d, %d, %v; reference %d, %d, %v", sub, as, r, size, ok, rr, rsize, rok)
		}
		if len(sub) > 127 {
			return
		}
		p := p64
		p.AddrSize = as
		c := &entryCtx{entry: map[arch.Reg]uint64{r: 0x40}}
		res, err := Eval(cat(entry(dwarf.DW_OP_entry_value, sub...), op(dwarf.DW_OP_stack_value)), p, c)
		if ok && (err != nil || res.Kind != Value || res.Value != 0x40+uint64(size)) {
			t.Fatalf("entry value of % x: %+v, %v; want %#x", sub, res, err, 0x40+size)
		}
		if !ok && !errors.Is(err, ErrUnsupported) {
			t.Fatalf("entry value of % x: %+v, %v; want unsupported", sub, res, err)
		}
	})
}

// TestEvalAddrBias: DW_OP_addr is a link-time address, moved by
// Params.AddrBias (a position-independent executable's load bias).
func TestEvalAddrBias(t *testing.T) {
	p := p64
	p.AddrBias = 0x5500_0000_0000
	code := cat(op(dwarf.DW_OP_addr, 0x04, 0x20, 0, 0, 0, 0, 0, 0), op(dwarf.DW_OP_stack_value))
	if r, err := Eval(code, p, &ctx{}); err != nil || r.Value != 0x5500_0000_2004 {
		t.Errorf("%+v, %v; want %#x", r, err, 0x5500_0000_2004)
	}
	p.AddrSize = 4
	p.AddrBias = 0x1000
	if r, err := Eval(cat(op(dwarf.DW_OP_addr, 0xff, 0xff, 0xff, 0xff), op(dwarf.DW_OP_stack_value)), p, &ctx{}); err != nil || r.Value != 0xfff {
		t.Errorf("32-bit: %+v, %v; want 0xfff (wrapped)", r, err)
	}
}

// paramCtx gives the parameter at unit offset 0x2a as 77.
type paramCtx struct{ ctx }

func (paramCtx) ParameterValue(off uint64) (uint64, error) {
	if off == 0x2a {
		return 77, nil
	}
	return 0, fmt.Errorf("%w: no call site parameter for %#x", ErrNoEntryValue, off)
}

// TestEvalParameterRef: DW_OP_GNU_parameter_ref pushes what the
// ParameterValuer gives for the DIE offset; without one, or without its
// answer, the error wraps ErrNoEntryValue and names the operation.
func TestEvalParameterRef(t *testing.T) {
	ref := func(off byte) []byte { return op(dwarf.DW_OP_GNU_parameter_ref, off, 0, 0, 0) }
	if r, err := Eval(cat(ref(0x2a), op(dwarf.DW_OP_plus_uconst, 3), op(dwarf.DW_OP_stack_value)), p64, &paramCtx{}); err != nil || r.Value != 80 {
		t.Errorf("%+v, %v; want 80", r, err)
	}
	for _, c := range []Context{&paramCtx{}, &ctx{}} {
		_, err := Eval(cat(lit(0), ref(0x2b), op(dwarf.DW_OP_stack_value)), p64, c)
		var fe *dwarf.FormatError
		if !errors.Is(err, ErrNoEntryValue) || !errors.As(err, &fe) || fe.Offset != 0x101 || fe.Field != "DW_OP_GNU_parameter_ref" {
			t.Errorf("%T: %v; want ErrNoEntryValue at 0x101", c, err)
		}
	}
	if ops, err := Decode(ref(0x2a), p64); err != nil || len(ops) != 1 || ops[0].Args[0] != 0x2a {
		t.Errorf("Decode: %+v, %v", ops, err)
	}
}
