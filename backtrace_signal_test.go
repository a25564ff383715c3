package elfimage

import (
	"fmt"
	"testing"

	"github.com/elfimage/elfimage/arch"
)

// wordMemory is an unwind.Memory of 8-byte words by address.
type wordMemory map[uint64]uint64

func (m wordMemory) ReadUint64(addr uint64) (uint64, error) {
	v, ok := m[addr]
	if !ok {
		return 0, fmt.Errorf("no word at %#x", addr)
	}
	return v, nil
}

// TestBacktraceAfterSignalFrame: the caller of a signal frame (CIE
// augmentation "S", as the entry image's FDE has) has an exact pc, which
// unwind.Step looks its CFI up at; Backtrace describes that frame at the
// same pc, not pc-1. Here the signal frame "returns" to the first
// instruction of "after", right behind "before": at pc-1 the frame would
// be attributed to "before".
func TestBacktraceAfterSignalFrame(t *testing.T) {
	nops := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = 0x90
		}
		b[n-1] = 0xc3
		return b
	}
	m := &Module{File: "sig.s", Procs: []*Proc{
		{Name: "sig", Code: nops(16), SignalFrame: true},
		{Name: "before", Code: nops(16)},
		{Name: "after", Code: nops(16)},
	}}
	b, err := Link(m, LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	im, err := Load("sig.elf", b, &LoadOptions{Arch: arch.X86_64}) // x86-64 CFI, unwound, never run
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	addr := map[string]uint64{}
	for _, name := range []string{"sig", "before", "after"} {
		p, err := im.ProcedureByName(name)
		if err != nil {
			t.Fatal(err)
		}
		addr[name] = uint64(im.Base()) + p.Start
	}
	if p, err := im.ProcedureAt(addr["after"] - 1 - uint64(im.Base())); err != nil || p.Name != "before" {
		t.Fatalf("the byte before after is in %q (%v), want before: the test needs them adjacent", p.Name, err)
	}
	// At sig's first instruction: CFA = rsp+8, the return address at
	// CFA-8 (the standard CIE); the caller, after, returns to 0.
	const sp = 0x7000_0000
	mem := wordMemory{sp: addr["after"], sp + 8: 0}
	regs := make([]uint64, arch.X86_64.NumRegs)
	regs[arch.X86_64_RSP] = sp
	regs[arch.X86_64_RA] = addr["sig"]
	frames, err := Backtrace(regs, mem, BacktraceOptions{})
	if err != nil {
		t.Fatalf("Backtrace: %v (frames %+v)", err, frames)
	}
	if len(frames) != 2 || frames[0].Proc.Name != "sig" || frames[1].PC != addr["after"] {
		t.Fatalf("frames %+v, want sig then the frame at after's first instruction", frames)
	}
	if frames[1].Proc.Name != "after" || frames[1].Image != im {
		t.Errorf("the caller of the signal frame is described as %q, want after (its exact pc, as unwind.Step looks it up)", frames[1].Proc.Name)
	}
}
