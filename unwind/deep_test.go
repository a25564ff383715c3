package unwind

import (
	"encoding/binary"
	"slices"
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

// BenchmarkUnwindStepsSearched is BenchmarkUnwindSteps with rows not
// remembered (a Finder Step does not know to be immutable): every step
// searches .eh_frame_hdr, parses the FDE and runs its CFA program.
func BenchmarkUnwindStepsSearched(b *testing.B) {
	benchUnwindSteps(b, plainFinder{deepSource(b)})
}

// BenchmarkUnwindSteps measures unwind steps per second over a 64-frame
// stack of distinct procedures in a 1,000-FDE module, walked again and
// again as a profiler walks repeated stacks: the first walk's steps are an
// .eh_frame_hdr binary search, an FDE and CIE parse, the CFA program up to
// the pc and the register rules; the Unwinder then remembers the 64 rows
// (a *Source's CFI does not change), and the later steps are the register
// rules of a remembered row. It reports steps/s and ns/step; allocs/op
// must be 0. BenchmarkUnwindStepsSearched measures every step searched.
func BenchmarkUnwindSteps(b *testing.B) { benchUnwindSteps(b, deepSource(b)) }

func benchUnwindSteps(b *testing.B, fi Finder) {
	const depth = 64
	u := New(arch.X86_64, fi, nil)
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

// TestRememberedRows: an Unwinder that remembers rows walks as one that
// searches every step, again and again, and forgets its rows when its
// Finder is set to another (CFI that differs at the same pcs).
func TestRememberedRows(t *testing.T) {
	src := deepSource(t)
	m, f, want := deepStack(64)
	f.First = false
	u := New(arch.X86_64, src, m)
	searched, searchedErr := stepAll(New(arch.X86_64, plainFinder{src}, m), f)
	for round := range 3 {
		got, err := stepAll(u, f)
		if !slices.Equal(got, searched) || err != searchedErr {
			t.Fatalf("round %d: remembered rows give %d frames (%q), searched %d (%q)", round, len(got), err, len(searched), searchedErr)
		}
	}
	if u.rows == nil {
		t.Fatal("a *Source's rows are not remembered")
	}
	pcs := make([]uint64, 70)
	if n, err := u.Walk(f, pcs); err != nil || !slices.Equal(pcs[:n], want) {
		t.Fatalf("Walk with remembered rows: %#x, %v; want %#x", pcs[:n], err, want)
	}
	// Another module at the same addresses whose procedures all keep
	// the CFA at rsp+8 (no frame): the walk must follow it.
	cie := frame.StandardCIE(arch.X86_64)
	fdes := make([]frame.FDE, nFuncs)
	for i := range fdes {
		fdes[i] = frame.FDE{Start: uint64(textStart + i*funcSize), Size: funcSize}
	}
	eh, offs, err := frame.EncodeEHFrame(cie, fdes, ehAddr, dwarf.Default64)
	if err != nil {
		t.Fatal(err)
	}
	hdr, err := frame.EncodeEHFrameHdr(hdrAddr, ehAddr, fdes, offs)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewSource(arch.X86_64, hdr, hdrAddr, eh, ehAddr)
	if err != nil {
		t.Fatal(err)
	}
	u.Finder = other
	got, gotErr := stepAll(u, f)
	wantOther, wantOtherErr := stepAll(New(arch.X86_64, plainFinder{other}, m), f)
	if !slices.Equal(got, wantOther) || gotErr != wantOtherErr {
		t.Fatalf("after a new Finder: %d frames (%q), want %d (%q)", len(got), gotErr, len(wantOther), wantOtherErr)
	}
	if slices.Equal(got, searched) {
		t.Fatal("the other module's CFI gives the same frames: the test proves nothing")
	}
	if n := testing.AllocsPerRun(20, func() { _, _ = u.Walk(f, pcs) }); n != 0 {
		t.Fatalf("Walk with remembered rows: %v allocations", n)
	}
	// A Finder whose rows are not remembered (and whose type is not
	// comparable) after one whose rows are: searched, as it should be.
	u.Finder = Sources{src}
	if got, err := stepAll(u, f); !slices.Equal(got, searched) || err != searchedErr {
		t.Fatalf("Sources after a *Source: %d frames (%q), want %d (%q)", len(got), err, len(searched), searchedErr)
	}
}
