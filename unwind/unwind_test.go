package unwind

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/frame"
)

// stackMem is a fake memory: a little-endian byte slice at address base.
type stackMem struct {
	base uint64
	b    []byte
}

func (m *stackMem) ReadUint64(a uint64) (uint64, error) {
	if a < m.base || a-m.base > uint64(len(m.b)) || a-m.base+8 > uint64(len(m.b)) {
		return 0, fmt.Errorf("unmapped address %#x", a)
	}
	return binary.LittleEndian.Uint64(m.b[a-m.base:]), nil
}

func (m *stackMem) put(a, v uint64) { binary.LittleEndian.PutUint64(m.b[a-m.base:], v) }

const (
	rbx = arch.X86_64_RBX
	rbp = arch.X86_64_RBP
	rsp = arch.X86_64_RSP
	ra  = arch.X86_64_RA

	hdrAddr, ehAddr = 0x1000, 0x2000
	leaf            = 0x10000 // sub rsp, 24 at 0..4; body; add rsp, 24 at 0x20; ret at 0x24
	mid             = 0x10100 // push rbp; mov rbp, rsp; ...; leave; ret
	outer           = 0x10200 // entry point: RA undefined
	sig             = 0x10300 // signal trampoline: CFA from an expression, signal frame
)

func testSource(t testing.TB) *Source {
	cie := frame.StandardCIE(arch.X86_64)
	sigCIE := frame.StandardCIE(arch.X86_64)
	sigCIE.Signal = true
	fdes := []frame.FDE{
		{Start: leaf, Size: 0x25, Insns: []frame.Insn{
			{PC: 4, Op: frame.OpDefCFAOffset, Offset: 32},
			{PC: 0x24, Op: frame.OpDefCFAOffset, Offset: 8},
		}},
		{Start: mid, Size: 0x40, Insns: []frame.Insn{
			{PC: 1, Op: frame.OpDefCFAOffset, Offset: 16},
			{PC: 1, Op: frame.OpOffset, Reg: rbp, Offset: -16},
			{PC: 4, Op: frame.OpDefCFARegister, Reg: rbp},
			{PC: 0x3f, Op: frame.OpDefCFA, Reg: rsp, Offset: 8},
		}},
		{Start: outer, Size: 0x40, Insns: []frame.Insn{{PC: 0, Op: frame.OpUndefined, Reg: ra}}},
		// The "kernel" saved the interrupted rsp at [rsp+0] and rip at [rsp+8], rbx at [rsp+16].
		{Start: sig, Size: 0x10, CIE: &sigCIE, Insns: []frame.Insn{
			{Op: frame.OpDefCFAExpression, Expr: []byte{byte(dwarf.DW_OP_breg0) + 7, 0, byte(dwarf.DW_OP_deref)}},
			{Op: frame.OpExpression, Reg: ra, Expr: []byte{byte(dwarf.DW_OP_breg0) + 7, 8}},
			{Op: frame.OpExpression, Reg: rbx, Expr: []byte{byte(dwarf.DW_OP_breg0) + 7, 16}},
		}},
	}
	eh, offs, err := frame.EncodeEHFrame(cie, fdes, ehAddr, dwarf.Default64)
	if err != nil {
		t.Fatal(err)
	}
	hdr, err := frame.EncodeEHFrameHdr(hdrAddr, ehAddr, fdes, offs)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSource(arch.X86_64, hdr, hdrAddr, eh, ehAddr)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testStack builds: outer+0x10 called mid, mid+0x20 called leaf, leaf is at
// +8 (after its prologue). It returns the memory and the first frame.
func testStack() (*stackMem, Frame) {
	m := &stackMem{base: 0x7000, b: make([]byte, 0x1000)}
	const outerSP = 0x7800 // rsp in outer before its call
	// call mid: push return address
	m.put(outerSP-8, outer+0x15)
	// mid: push rbp (outer's rbp = 0x7900)
	m.put(outerSP-16, 0x7900)
	midRBP := uint64(outerSP - 16)
	midSP := midRBP - 0x30 // locals
	// call leaf
	m.put(midSP-8, mid+0x25)
	leafSP := midSP - 8 - 24
	var regs Regs
	regs.Set(rsp, leafSP)
	regs.Set(rbp, midRBP)
	regs.Set(rbx, 0xb0b)
	return m, FirstFrame(arch.X86_64, leaf+8, regs)
}

func TestWalk(t *testing.T) {
	src := testSource(t)
	m, f := testStack()
	u := New(arch.X86_64, Sources{src}, m)
	var frames []Frame
	cur := f
	for {
		var caller Frame
		err := u.Step(&cur, &caller)
		frames = append(frames, cur)
		if errors.Is(err, ErrOutermost) {
			break
		}
		if err != nil {
			t.Fatalf("step from %#x: %v", cur.PC, err)
		}
		cur = caller
		if len(frames) > 10 {
			t.Fatal("walk does not end")
		}
	}
	want := []struct{ pc, cfa, sp, rbp uint64 }{
		{leaf + 8, 0x7800 - 16 - 0x30, 0x7800 - 16 - 0x30 - 32, 0x7800 - 16},
		{mid + 0x25, 0x7800, 0x7800 - 16 - 0x30, 0x7800 - 16},
		{outer + 0x15, 0x7808, 0x7800, 0x7900},
	}
	if len(frames) != len(want) {
		t.Fatalf("%d frames, want %d", len(frames), len(want))
	}
	for i, w := range want {
		f := frames[i]
		rbpV, _ := f.Regs.Get(rbp)
		rbxV, ok := f.Regs.Get(rbx)
		if f.PC != w.pc || f.CFA != w.cfa || f.SP != w.sp || rbpV != w.rbp || !ok || rbxV != 0xb0b {
			t.Errorf("frame %d: pc %#x cfa %#x sp %#x rbp %#x rbx %#x, want pc %#x cfa %#x sp %#x rbp %#x rbx 0xb0b",
				i, f.PC, f.CFA, f.SP, rbpV, rbxV, w.pc, w.cfa, w.sp, w.rbp)
		}
		if f.First != (i == 0) {
			t.Errorf("frame %d: First %v", i, f.First)
		}
	}
	pcs := make([]uint64, 8)
	n, err := u.Walk(f, pcs)
	if err != nil || n != 3 || pcs[0] != leaf+8 || pcs[1] != mid+0x25 || pcs[2] != outer+0x15 {
		t.Fatalf("Walk: %#x %v", pcs[:n], err)
	}
}

// TestReturnAddressAtEnd: a call as the last instruction of a function
// returns just past its FDE; lookup uses pc-1.
func TestReturnAddressAtEnd(t *testing.T) {
	src := testSource(t)
	m := &stackMem{base: 0x7000, b: make([]byte, 0x1000)}
	m.put(0x7500, 0x10300+0x10) // "return" into the byte after sig's FDE: looked up as sig+0xf
	var regs Regs
	regs.Set(rsp, 0x7500)
	u := New(arch.X86_64, src, m)
	cur := Frame{PC: mid + 0x40, SP: 0x7500, Regs: regs} // not First: looked up at mid+0x3f
	var caller Frame
	if err := u.Step(&cur, &caller); err != nil {
		t.Fatal(err)
	}
	if caller.PC != 0x10310 || caller.SP != 0x7508 {
		t.Fatalf("caller pc %#x sp %#x", caller.PC, caller.SP)
	}
	cur.First = true // exact pc: mid+0x40 is outside every FDE
	if err := u.Step(&cur, &caller); !errors.Is(err, ErrNoFDE) {
		t.Fatalf("first frame at end of FDE: %v, want ErrNoFDE", err)
	}
}

func TestSignalFrame(t *testing.T) {
	src := testSource(t)
	m := &stackMem{base: 0x7000, b: make([]byte, 0x1000)}
	// The trampoline's frame: at rsp, the saved context.
	m.put(0x7100, 0x7600)    // interrupted rsp
	m.put(0x7108, leaf+0x24) // interrupted rip: the ret of leaf (CFA rsp+8)
	m.put(0x7110, 0x5ca1ab1e)
	m.put(0x7600, mid+0x25) // leaf's return address
	var regs Regs
	regs.Set(rsp, 0x7100)
	regs.Set(rbp, 0x7700)
	u := New(arch.X86_64, src, m)
	cur := Frame{PC: sig + 4, SP: 0x7100, Regs: regs}
	var caller Frame
	if err := u.Step(&cur, &caller); err != nil {
		t.Fatal(err)
	}
	if !cur.Signal || !caller.AfterSignal || caller.PC != leaf+0x24 || caller.SP != 0x7600 || cur.CFA != 0x7600 {
		t.Fatalf("signal step: cur %+v caller pc %#x sp %#x after %v", cur, caller.PC, caller.SP, caller.AfterSignal)
	}
	if v, _ := caller.Regs.Get(rbx); v != 0x5ca1ab1e {
		t.Fatalf("rbx %#x", v)
	}
	// The interrupted frame is looked up at its exact pc (leaf+0x24, the
	// ret: CFA rsp+8); pc-1 would give CFA rsp+32.
	next := caller
	if err := u.Step(&next, &caller); err != nil {
		t.Fatal(err)
	}
	if caller.PC != mid+0x25 || caller.SP != 0x7608 {
		t.Fatalf("after signal: pc %#x sp %#x", caller.PC, caller.SP)
	}
}

func TestErrors(t *testing.T) {
	src := testSource(t)
	m, f := testStack()
	u := New(arch.X86_64, src, m)
	var caller Frame
	bad := f
	bad.PC = 0x5000
	if err := u.Step(&bad, &caller); !errors.Is(err, ErrNoFDE) {
		t.Errorf("pc without CFI: %v", err)
	}
	zero := f
	zero.PC = 0
	if err := u.Step(&zero, &caller); !errors.Is(err, ErrOutermost) {
		t.Errorf("pc 0: %v", err)
	}
	noSP := f
	noSP.Regs.Clear(rsp)
	if err := u.Step(&noSP, &caller); !errors.Is(err, ErrUnknownRegister) {
		t.Errorf("no rsp: %v", err)
	}
	wild := f
	wild.Regs.Set(rsp, 0x100)
	if err := u.Step(&wild, &caller); err == nil || errors.Is(err, ErrOutermost) {
		t.Errorf("unreadable stack: %v", err)
	}
}

func TestStepNoAlloc(t *testing.T) {
	src := testSource(t)
	m, f := testStack()
	u := New(arch.X86_64, src, m)
	var caller Frame
	n := testing.AllocsPerRun(100, func() {
		cur := f
		if err := u.Step(&cur, &caller); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Fatalf("Step: %v allocations", n)
	}
	pcs := make([]uint64, 8)
	n = testing.AllocsPerRun(100, func() {
		if _, err := u.Walk(f, pcs); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Fatalf("Walk: %v allocations", n)
	}
}

func BenchmarkStep(b *testing.B) {
	src := testSource(b)
	m, f := testStack()
	u := New(arch.X86_64, src, m)
	var caller Frame
	b.ReportAllocs()
	for b.Loop() {
		cur := f
		_ = u.Step(&cur, &caller)
	}
}

// FuzzStep walks arbitrary CFI over arbitrary stack memory, for x86-64 or
// AArch64, with and without an .eh_frame_hdr, and checks every step
// against the call frame table computed independently (frame.Exec on the
// FDE the finder returns): the frame's CFA is the CFA rule applied to its
// registers, a caller's SP is the CFA unless a rule says otherwise, a
// return address saved at CFA+offset is the caller's pc, and Walk reports
// the pcs of repeated Steps. Errors must be the documented ones.
func FuzzStep(f *testing.F) {
	src := testSource(f)
	eh := src.Sec.Data()
	m, fr := testStack()
	f.Add(eh, m.b, fr.PC, uint64(0x7800-16-0x30-32), false)
	f.Add(eh, m.b, uint64(sig+4), uint64(0x7100), false)
	a64 := a64Source(f)
	sm, af := a64Stack()
	sp, _ := af.Regs.Get(a64SP)
	f.Add(a64.Sec.Data(), sm.Data, af.PC, sp, true)
	f.Fuzz(func(t *testing.T, eh, stack []byte, pc, sp uint64, aarch64 bool) {
		fi, err := frame.NewFinder(eh, ehAddr, nil, 0, binary.LittleEndian, 8)
		if err != nil {
			return
		}
		a := arch.X86_64
		if aarch64 {
			a = arch.AArch64
		}
		var regs Regs
		regs.Set(a.SP, sp)
		regs.Set(a.FP, sp+16)
		regs.Set(a.RA, pc+4)
		mem := &Snapshot{Base: 0x7000, Data: stack}
		u := New(a, fi, mem)
		cur := FirstFrame(a, pc, regs)
		var pcs []uint64
		var exec frame.Exec
		var fde frame.ParsedFDE
		var row frame.Row
		for len(pcs) < 16 {
			pcs = append(pcs, cur.PC)
			if len(pcs) == 16 {
				break
			}
			var caller Frame
			err := u.Step(&cur, &caller)
			if err != nil {
				var fe *dwarf.FormatError
				if !errors.Is(err, ErrOutermost) && !errors.Is(err, ErrNoFDE) && !errors.Is(err, ErrNoProgress) &&
					!errors.Is(err, ErrUnknownRegister) && !errors.Is(err, ErrMemory) && !errors.As(err, &fe) && !strings.HasPrefix(err.Error(), "unwind: ") {
					t.Fatalf("Step at pc %#x: undocumented error %v (%T)", cur.PC, err, err)
				}
				break
			}
			// The oracle: the row in effect, from the FDE the finder gives.
			look := cur.PC
			if !cur.First && !cur.AfterSignal {
				look--
			}
			if err := fi.FindFDE(look, &fde); err != nil {
				t.Fatalf("Step at pc %#x succeeded, FindFDE(%#x): %v", cur.PC, look, err)
			}
			if err := exec.RowAt(&fde, look, &row); err != nil {
				t.Fatalf("Step at pc %#x succeeded, RowAt(%#x): %v", cur.PC, look, err)
			}
			if row.CFA.Kind == frame.RuleCFA {
				v, _ := cur.Regs.Get(row.CFA.Reg)
				if want := v + uint64(row.CFA.Offset); cur.CFA != want {
					t.Fatalf("pc %#x: CFA %#x, want %s = %#x", cur.PC, cur.CFA, row.CFA.Format(a.RegName), want)
				}
			}
			if k := row.Rule(a.SP).Kind; (k == frame.RuleUnspecified || k == frame.RuleSameValue) && caller.SP != cur.CFA {
				t.Fatalf("pc %#x: caller SP %#x, want the CFA %#x", cur.PC, caller.SP, cur.CFA)
			}
			if r := row.Rule(a.RA); r.Kind == frame.RuleOffset && !row.RASigned {
				want, err := mem.ReadUint64(cur.CFA + uint64(r.Offset))
				if err != nil || caller.PC != want {
					t.Fatalf("pc %#x: caller pc %#x, want [CFA%+d] = %#x (%v)", cur.PC, caller.PC, r.Offset, want, err)
				}
			}
			cur = caller
		}
		walked := make([]uint64, 16)
		n, _ := New(a, fi, mem).Walk(FirstFrame(a, pc, regs), walked)
		if !slices.Equal(walked[:n], pcs) {
			t.Fatalf("Walk gave pcs %#x, Step %#x", walked[:n], pcs)
		}
		// Remembered rows: u, which remembers the rows of the walk above,
		// twice, and an Unwinder made with the same registers and pc
		// whose Finder is searched on every step (no remembered rows)
		// give the same frames and errors.
		want, wantErr := stepAll(New(a, plainFinder{fi}, mem), FirstFrame(a, pc, regs))
		for range 2 {
			got, gotErr := stepAll(u, FirstFrame(a, pc, regs))
			if !slices.Equal(got, want) || gotErr != wantErr {
				t.Fatalf("remembered rows: frames %+v, error %q; searched: frames %+v, error %q", got, gotErr, want, wantErr)
			}
		}
	})
}

// plainFinder hides the type of a Finder from Step, so that it searches
// on every step instead of remembering rows.
type plainFinder struct{ f Finder }

func (p plainFinder) FindFDE(pc uint64, fde *frame.ParsedFDE) error { return p.f.FindFDE(pc, fde) }

// stepAll steps from start up to 16 times and returns every frame (each
// after Step filled in its CFA and Signal, then the caller) and the text
// of the error that ended the walk.
func stepAll(u *Unwinder, start Frame) ([]Frame, string) {
	cur := start
	var out []Frame
	for range 16 {
		var caller Frame
		err := u.Step(&cur, &caller)
		out = append(out, cur)
		if err != nil {
			return out, err.Error()
		}
		cur = caller
	}
	return append(out, cur), ""
}

// synthStack builds, from spec (two bytes a frame, at most 8 frames), a
// call chain of x86-64 functions of three shapes with their CFI, the stack
// memory they would leave, and the frames a correct unwinder must find,
// computed from the shapes alone (not from the CFI):
//   - 0: push rbp; mov rbp, rsp; sub rsp, n: CFA = rbp+16, rbp saved at
//     CFA-16;
//   - 1: sub rsp, n without a frame pointer: CFA = rsp+n+8, rbp untouched;
//   - 2 (innermost frame only): stopped just after push rbp: CFA = rsp+16.
//
// Function i (frame i, 0 innermost) is at synthText+i*0x100; the outermost
// has an undefined return address.
func synthStack(spec []byte) (fdes []frame.FDE, mem *Snapshot, want []Frame) {
	const synthText, fnSize = 0x20000, 0x100
	nf := min(max(len(spec)/2, 1), 8)
	spec = append(spec, make([]byte, 2*nf)...)
	mem = &Snapshot{Base: 0x70000, Data: make([]byte, 0x4000)}
	put := func(a, v uint64) { binary.LittleEndian.PutUint64(mem.Data[a-mem.Base:], v) }
	kinds := make([]byte, nf)
	want = make([]Frame, nf)
	for i := range nf {
		k, b := spec[2*i]%3, spec[2*i+1]
		if i > 0 && k == 2 {
			k = 0 // a caller is stopped at a call, past its prologue
		}
		kinds[i] = k
		start := uint64(synthText + i*fnSize)
		off := uint64(0x10 + b>>5*0x18) // in the body: [0x10, 0xc8]
		if k == 2 {
			off = 1 + uint64(b)%3
		}
		want[i].PC = start + off
		fde := frame.FDE{Start: start, Size: fnSize}
		if i == nf-1 {
			fde.Insns = append(fde.Insns, frame.Insn{Op: frame.OpUndefined, Reg: ra})
		}
		if k == 1 {
			fde.Insns = append(fde.Insns,
				frame.Insn{PC: 4, Op: frame.OpDefCFAOffset, Offset: int64(8*uint64(b%32) + 8)},
				frame.Insn{PC: 0xf0, Op: frame.OpDefCFAOffset, Offset: 8})
		} else {
			fde.Insns = append(fde.Insns,
				frame.Insn{PC: 1, Op: frame.OpDefCFAOffset, Offset: 16},
				frame.Insn{PC: 1, Op: frame.OpOffset, Reg: rbp, Offset: -16},
				frame.Insn{PC: 4, Op: frame.OpDefCFARegister, Reg: rbp},
				frame.Insn{PC: 0xf0, Op: frame.OpDefCFA, Reg: rsp, Offset: 8})
		}
		fdes = append(fdes, fde)
	}
	cfa, rbpIn := mem.Base+uint64(len(mem.Data))-0x100, uint64(0x1111)
	for i := nf - 1; i >= 0; i-- {
		n := 8 * uint64(spec[2*i+1]%32)
		var ret uint64
		if i < nf-1 {
			ret = want[i+1].PC
		}
		put(cfa-8, ret)
		var sp, rbpV uint64
		switch kinds[i] {
		case 0:
			put(cfa-16, rbpIn)
			rbpV, sp = cfa-16, cfa-16-n
		case 1:
			rbpV, sp = rbpIn, cfa-8-n
		case 2:
			put(cfa-16, rbpIn)
			rbpV, sp = rbpIn, cfa-16
		}
		want[i].SP, want[i].CFA = sp, cfa
		want[i].Regs.Set(rsp, sp)
		want[i].Regs.Set(rbp, rbpV)
		want[i].Regs.Set(rbx, 0xb0b)
		cfa, rbpIn = sp, rbpV
	}
	return fdes, mem, want
}

// FuzzStepSynth unwinds synthesized call chains (synthStack) and compares
// every frame's pc, SP, CFA and frame pointer with the chain's model.
func FuzzStepSynth(f *testing.F) {
	f.Add([]byte{0, 3})
	f.Add([]byte{2, 1, 1, 4, 0, 0x27, 1, 0xff, 0, 0x80})
	f.Add([]byte{1, 0, 1, 31, 1, 0xe0, 0, 5, 0, 9, 1, 2, 0, 0, 1, 1})
	f.Fuzz(func(t *testing.T, spec []byte) {
		fdes, mem, want := synthStack(spec)
		eh, offs, err := frame.EncodeEHFrame(frame.StandardCIE(arch.X86_64), fdes, ehAddr, dwarf.Default64)
		if err != nil {
			t.Fatal(err)
		}
		hdr, err := frame.EncodeEHFrameHdr(hdrAddr, ehAddr, fdes, offs)
		if err != nil {
			t.Fatal(err)
		}
		src, err := NewSource(arch.X86_64, hdr, hdrAddr, eh, ehAddr)
		if err != nil {
			t.Fatal(err)
		}
		u := New(arch.X86_64, src, mem)
		cur := FirstFrame(arch.X86_64, want[0].PC, want[0].Regs)
		for i, w := range want {
			var caller Frame
			err := u.Step(&cur, &caller)
			if i == len(want)-1 {
				if !errors.Is(err, ErrOutermost) {
					t.Fatalf("frame %d (outermost): %v, want ErrOutermost", i, err)
				}
			} else if err != nil {
				t.Fatalf("frame %d at pc %#x: %v", i, cur.PC, err)
			}
			rbpV, _ := cur.Regs.Get(rbp)
			wrbp, _ := w.Regs.Get(rbp)
			rbxV, _ := cur.Regs.Get(rbx)
			if cur.PC != w.PC || cur.SP != w.SP || cur.CFA != w.CFA || rbpV != wrbp || rbxV != 0xb0b {
				t.Fatalf("frame %d: pc %#x sp %#x cfa %#x rbp %#x rbx %#x; want pc %#x sp %#x cfa %#x rbp %#x rbx 0xb0b",
					i, cur.PC, cur.SP, cur.CFA, rbpV, rbxV, w.PC, w.SP, w.CFA, wrbp)
			}
			cur = caller
		}
		pcs := make([]uint64, 16)
		n, err := u.Walk(FirstFrame(arch.X86_64, want[0].PC, want[0].Regs), pcs)
		if err != nil || n != len(want) {
			t.Fatalf("Walk: %d frames, %v; want %d", n, err, len(want))
		}
		for i, w := range want {
			if pcs[i] != w.PC {
				t.Fatalf("Walk frame %d: pc %#x, want %#x", i, pcs[i], w.PC)
			}
		}
	})
}
