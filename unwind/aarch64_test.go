package unwind

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/frame"
)

const (
	a64Leaf  = 0x40000 // no frame: CFA = sp, return address in x30
	a64Mid   = 0x41000 // paciasp; stp x29, x30, [sp, #-32]!; mov x29, sp; ...
	a64Outer = 0x42000 // x30 undefined: the outermost frame
	x29      = arch.AArch64_FP
	x30      = arch.AArch64_LR
	a64SP    = arch.AArch64_SP
)

// a64Source builds an AArch64 .eh_frame (code alignment 4, data alignment
// -8, return-address column 30) and .eh_frame_hdr, hand-specified.
func a64Source(t testing.TB) *Source {
	a := arch.AArch64
	cie := frame.StandardCIE(a)
	if cie.CodeAlign != 4 || cie.DataAlign != -8 || cie.RA != 30 {
		t.Fatalf("AArch64 CIE %+v", cie)
	}
	fdes := []frame.FDE{
		{Start: a64Leaf, Size: 0x20},
		{Start: a64Mid, Size: 0x40, Insns: []frame.Insn{
			{PC: 4, Op: frame.OpNegateRAState},            // after paciasp
			{PC: 8, Op: frame.OpDefCFAOffset, Offset: 32}, // after stp
			{PC: 8, Op: frame.OpOffset, Reg: x29, Offset: -32},
			{PC: 8, Op: frame.OpOffset, Reg: x30, Offset: -24},
			{PC: 12, Op: frame.OpDefCFARegister, Reg: x29}, // after mov x29, sp
		}},
		{Start: a64Outer, Size: 0x40, Insns: []frame.Insn{{Op: frame.OpUndefined, Reg: x30}}},
	}
	eh, offs, err := frame.EncodeEHFrame(cie, fdes, ehAddr, dwarf.Default64)
	if err != nil {
		t.Fatal(err)
	}
	hdr, err := frame.EncodeEHFrameHdr(hdrAddr, ehAddr, fdes, offs)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSource(a, hdr, hdrAddr, eh, ehAddr)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// a64Stack: outer+0x10 called mid (return address outer+0x14, signed with
// a PAC in bits 48-63 when mid saved it); mid+0x20 called leaf (x30 =
// mid+0x24); leaf is at +8.
func a64Stack() (*Snapshot, Frame) {
	const top = 0x8000 // sp in outer before the call
	m := &Snapshot{Base: 0x7000, Data: make([]byte, 0x1000)}
	put := func(a, v uint64) { binary.LittleEndian.PutUint64(m.Data[a-m.Base:], v) }
	put(top-32, 0x8100)                              // outer's x29
	put(top-24, 0x002d_0000_0000_0000|a64Outer+0x14) // signed return address
	var regs Regs
	regs.Set(a64SP, top-32-16)
	regs.Set(x29, top-32)
	regs.Set(x30, a64Mid+0x24)
	regs.Set(19, 0x1919) // a callee-saved register nobody touches
	return m, FirstFrame(arch.AArch64, a64Leaf+8, regs)
}

func TestAArch64Walk(t *testing.T) {
	if arch.AArch64.RA != 30 || arch.AArch64.SP != 31 || arch.AArch64.CodeAlign != 4 || arch.AArch64.DataAlign != -8 || arch.AArch64.RegName(5) != "x5" {
		t.Fatalf("arch.AArch64 %+v", arch.AArch64)
	}
	m, f := a64Stack()
	u := New(arch.AArch64, a64Source(t), m)
	var caller Frame
	cur := f
	// leaf: CFA = sp, caller pc = x30.
	if err := u.Step(&cur, &caller); err != nil {
		t.Fatal(err)
	}
	if cur.CFA != 0x8000-48 || caller.PC != a64Mid+0x24 || caller.SP != 0x8000-48 {
		t.Fatalf("leaf step: cfa %#x caller pc %#x sp %#x", cur.CFA, caller.PC, caller.SP)
	}
	// mid: CFA = x29+32, x29 and x30 restored, the PAC stripped.
	cur = caller
	if err := u.Step(&cur, &caller); err != nil {
		t.Fatal(err)
	}
	fp, _ := caller.Regs.Get(x29)
	r19, _ := caller.Regs.Get(19)
	if cur.CFA != 0x8000 || caller.PC != a64Outer+0x14 || caller.SP != 0x8000 || fp != 0x8100 || r19 != 0x1919 {
		t.Fatalf("mid step: cfa %#x caller pc %#x sp %#x x29 %#x x19 %#x", cur.CFA, caller.PC, caller.SP, fp, r19)
	}
	// With an explicit, narrower mask, only those bits go.
	u.PACMask = 0x00ff_0000_0000_0000
	cur2 := cur
	if err := u.Step(&cur2, &caller); err != nil || caller.PC != a64Outer+0x14 {
		t.Fatalf("PACMask: pc %#x %v", caller.PC, err)
	}
	u.PACMask = 0
	// outer: undefined x30 ends the walk.
	cur = caller
	if err := u.Step(&cur, &caller); !errors.Is(err, ErrOutermost) {
		t.Fatalf("outer step: %v", err)
	}
	pcs := make([]uint64, 8)
	n, err := u.Walk(f, pcs)
	if err != nil || n != 3 || pcs[0] != a64Leaf+8 || pcs[1] != a64Mid+0x24 || pcs[2] != a64Outer+0x14 {
		t.Fatalf("Walk: %#x %v", pcs[:n], err)
	}
	// Before paciasp (mid+0), the return address is still in x30 and not
	// signed; at mid+4 the row says signed but nothing is saved yet.
	var row frame.Row
	var e frame.Exec
	var fde frame.ParsedFDE
	src := a64Source(t)
	for _, w := range []struct {
		pc     uint64
		signed bool
	}{{a64Mid, false}, {a64Mid + 4, true}, {a64Mid + 0x3c, true}, {a64Leaf, false}} {
		if err := src.FindFDE(w.pc, &fde); err != nil {
			t.Fatal(err)
		}
		if err := e.RowAt(&fde, w.pc, &row); err != nil || row.RASigned != w.signed {
			t.Errorf("row at %#x: RASigned %v, want %v (%v)", w.pc, row.RASigned, w.signed, err)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = u.Walk(f, pcs) }); n != 0 {
		t.Errorf("AArch64 Walk: %v allocations", n)
	}
}
