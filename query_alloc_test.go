package elfimage

import (
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/frame"
)

// TestHotPathsDoNotAllocate: after the first query built its index, the
// run-time lookups (image by pc, procedure, source position, FDE through
// the registry) allocate nothing.
func TestHotPathsDoNotAllocate(t *testing.T) {
	m := &Module{
		File: "hot.s",
		Procs: []*Proc{{
			Name: "f",
			Code: []byte{0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3}, // push rbp; mov rbp, rsp; pop rbp; ret
			CFI: []frame.Insn{
				{PC: 1, Op: frame.OpDefCFAOffset, Offset: 16},
				{PC: 1, Op: frame.OpOffset, Reg: arch.X86_64_RBP, Offset: -16},
				{PC: 4, Op: frame.OpDefCFARegister, Reg: arch.X86_64_RBP},
				{PC: 5, Op: frame.OpDefCFA, Reg: arch.X86_64_RSP, Offset: 8},
			},
			Lines: []LineRow{{Offset: 0, Line: 1, Column: 1, IsStmt: true}, {Offset: 4, Line: 2, Column: 3}},
		}},
	}
	b, err := Link(m, LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	im, err := Load("hot.elf", b, &LoadOptions{Arch: arch.X86_64}) // x86-64 CFI, queried, never run
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	procs, err := im.Procedures()
	if err != nil || len(procs) != 1 {
		t.Fatalf("Procedures = %v, %v", procs, err)
	}
	addr := procs[0].Start + 4
	pc := im.Base() + uintptr(addr)
	var fde frame.ParsedFDE
	var finder imageFinder
	check := func(name string, f func() error) {
		if err := f(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n := testing.AllocsPerRun(100, func() { f() }); n != 0 {
			t.Errorf("%s allocates %.1f times per call", name, n)
		}
	}
	check("Lookup", func() error { _, err := Lookup(pc); return err })
	check("ProcedureAt", func() error { _, err := im.ProcedureAt(addr); return err })
	check("PositionAt", func() error {
		p, err := im.PositionAt(addr)
		if err == nil && (p.Line != 2 || p.Column != 3) {
			t.Errorf("PositionAt = %v, want line 2 column 3", p)
		}
		return err
	})
	check("FindFDE through the registry", func() error { return finder.FindFDE(uint64(pc), &fde) })
}
