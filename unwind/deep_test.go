package unwind

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/frame"
)

// A realistic workload for the unwinder: a module of nFuncs procedures
// (one FDE each, found through .eh_frame_hdr's binary search table),
// alternating frame-pointer procedures (push rbp; mov rbp, rsp; sub rsp, N)
// and frameless ones (sub rsp, N; procedure 0, the outermost, too), and a stack of depth frames, each in a
// different procedure, called at +0x1f and looked up at the return address
// +0x20 minus one.
const (
	nFuncs    = 1000
	funcSize  = 0x80
	textStart = 0x400000
	deepBase  = 0x10000000
)

func deepSource(t testing.TB) *Source {
	cie := frame.StandardCIE(arch.X86_64)
	fdes := make([]frame.FDE, nFuncs)
	for i := range fdes {
		start := uint64(textStart + i*funcSize)
		n := int64(16 * (1 + i%4)) // local area
		if i%2 == 0 && i != 0 {
			fdes[i] = frame.FDE{Start: start, Size: funcSize, Insns: []frame.Insn{
				{PC: 1, Op: frame.OpDefCFAOffset, Offset: 16},
				{PC: 1, Op: frame.OpOffset, Reg: rbp, Offset: -16},
				{PC: 4, Op: frame.OpDefCFARegister, Reg: rbp},
				{PC: funcSize - 1, Op: frame.OpDefCFA, Reg: rsp, Offset: 8},
			}}
		} else {
			fdes[i] = frame.FDE{Start: start, Size: funcSize, Insns: []frame.Insn{
				{PC: 4, Op: frame.OpDefCFAOffset, Offset: n + 8},
				{PC: funcSize - 1, Op: frame.OpDefCFAOffset, Offset: 8},
			}}
		}
		if i == 0 { // the outermost procedure
			fdes[i].Insns = append([]frame.Insn{{Op: frame.OpUndefined, Reg: ra}}, fdes[i].Insns...)
		}
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

// deepStack builds a stack of depth frames: frame 0 (outermost) is in
// procedure 0, frame k in procedure (k*389) % nFuncs (spread over the
// table). It returns the memory, the innermost frame and the expected pcs
// innermost first.
func deepStack(depth int) (*Snapshot, Frame, []uint64) {
	size := depth*96 + 0x100
	m := &Snapshot{Base: deepBase, Data: make([]byte, size)}
	put := func(a, v uint64) { binary.LittleEndian.PutUint64(m.Data[a-m.Base:], v) }
	sp := uint64(deepBase + size - 0x40)
	rbpV := uint64(0)
	pcs := make([]uint64, depth)
	fn := 0
	for k := range depth {
		pc := uint64(textStart + fn*funcSize + 0x20)
		pcs[depth-1-k] = pc
		if k == depth-1 {
			break
		}
		next := (k + 1) * 389 % nFuncs
		if next == 0 {
			next = 1
		}
		put(sp-8, pc) // call: push the return address
		sp -= 8
		if next%2 == 0 { // push rbp; mov rbp, rsp; sub rsp, 32
			put(sp-8, rbpV)
			sp -= 8
			rbpV = sp
			sp -= 32
		} else {
			sp -= uint64(16 * (1 + next%4))
		}
		fn = next
	}
	var regs Regs
	regs.Set(rsp, sp)
	regs.Set(rbp, rbpV)
	return m, FirstFrame(arch.X86_64, pcs[0], regs), pcs
}

func TestDeepWalk(t *testing.T) {
	u := New(arch.X86_64, deepSource(t), nil)
	for _, depth := range []int{1, 2, 3, 64, 500} {
		m, f, want := deepStack(depth)
		u.Mem = m
		// The innermost frame is exact, not a return address: look it up
		// as a return address like the others by clearing First.
		f.First = false
		pcs := make([]uint64, depth+5)
		n, err := u.Walk(f, pcs)
		if err != nil || n != depth {
			t.Fatalf("depth %d: %d frames, %v", depth, n, err)
		}
		for i := range want {
			if pcs[i] != want[i] {
				t.Fatalf("depth %d: frame %d pc %#x, want %#x", depth, i, pcs[i], want[i])
			}
		}
	}
	m, f, _ := deepStack(64)
	u.Mem = m
	pcs := make([]uint64, 80)
	if n := testing.AllocsPerRun(20, func() { _, _ = u.Walk(f, pcs) }); n != 0 {
		t.Fatalf("Walk of 64 frames: %v allocations", n)
	}
}

// BenchmarkUnwindSteps measures unwind steps per second over a 64-frame
// stack of distinct procedures in a 1,000-FDE module: each step is an
// .eh_frame_hdr binary search, an FDE and CIE parse, the CFA program up to
// the pc, and the register rules. It reports steps/s and ns/step; allocs/op
// must be 0.
func BenchmarkUnwindSteps(b *testing.B) {
	const depth = 64
	u := New(arch.X86_64, deepSource(b), nil)
	m, f, _ := deepStack(depth)
	u.Mem = m
	f.First = false
	pcs := make([]uint64, depth+1)
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		if n, err := u.Walk(f, pcs); err != nil || n != depth {
			b.Fatal(n, err)
		}
	}
	steps := float64(b.N) * (depth - 1)
	el := time.Since(start).Seconds()
	b.ReportMetric(steps/el, "steps/s")
	b.ReportMetric(el*1e9/steps, "ns/step")
}
