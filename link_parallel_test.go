package elfimage

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/frame"
)

// parallelModule is n procedures with parameters, a docstring on some,
// a scope with a variable on others and, every 50th, a variable-length
// array whose type entry (kept in the unit) refers to a variable of its
// procedure (transient): every kind of entry the pipelined .debug_info
// path hands from the builder to the encoder across batches.
func parallelModule(n int) *Module {
	m := &Module{File: "par.src", CompDir: "/par", Producer: "par", Language: dwarf.DW_LANG_C11}
	long := &Type{Kind: KindSigned, Name: "long", Size: 8}
	rdi := []byte{byte(dwarf.DW_OP_reg0) + byte(arch.X86_64_RDI)}
	rsi := []byte{byte(dwarf.DW_OP_reg0) + byte(arch.X86_64_RSI)}
	for i := range n {
		code := []byte{0x55, 0x48, 0x89, 0xe5, 0x48, 0x8d, 0x04, 0x37, 0x5d, 0xc3}
		p := &Proc{Name: fmt.Sprintf("f%d", i), Code: code, Line: i + 1,
			Lines:  []LineRow{{Offset: 0, Line: uint32(i + 1), IsStmt: true}, {Offset: 4, Line: uint32(i + 2), IsStmt: true}},
			CFI:    []frame.Insn{{PC: 1, Op: frame.OpDefCFAOffset, Offset: 16}},
			Params: []Var{{Name: "a", Location: rdi, Type: long}, {Name: "n", Location: rsi}}}
		if i%3 == 0 {
			p.Doc = fmt.Sprintf("doc %d", i)
		}
		if i%4 == 1 {
			p.Scopes = []*Scope{{Ranges: []CodeRange{{Start: 4, End: 8}}, Vars: []Var{{Name: "t", Location: []byte{byte(dwarf.DW_OP_reg0)}}}}}
		}
		if i%50 == 7 {
			p.Scopes = []*Scope{{Ranges: []CodeRange{{Start: 4, End: 8}}, Vars: []Var{{Name: "v",
				Location: []byte{byte(dwarf.DW_OP_breg0) + byte(arch.X86_64_RSP), 0},
				Type:     &Type{Kind: KindArray, Elem: long, CountVar: "n"}}}}}
		}
		m.Procs = append(m.Procs, p)
	}
	return m
}

// TestLinkPipelinedSame: the pipelined build of .debug_info and the line
// program (other goroutines, batches handed over) writes the same bytes
// as the sequential build, in every DWARF version and format, and as an
// object.
func TestLinkPipelinedSame(t *testing.T) {
	defer func(p int) { parallelProcs = p }(parallelProcs)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2)) // the pipeline even on one core
	m := parallelModule(3*infoBatchSize + 17)
	for _, enc := range []dwarf.Encoding{{Version: 5, Format: dwarf.Format32}, {Version: 4, Format: dwarf.Format64}, {Version: 3, Format: dwarf.Format32}} {
		for _, obj := range []bool{false, true} {
			link := func() []byte {
				var b []byte
				var err error
				if obj {
					b, err = LinkObject(m, LinkOptions{DWARF: enc})
				} else {
					b, err = Link(m, LinkOptions{DWARF: enc})
				}
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			parallelProcs = 1 << 30
			seq := link()
			parallelProcs = 1
			par := link()
			if !bytes.Equal(seq, par) {
				t.Errorf("v%d %v object=%v: the pipelined link differs from the sequential one", enc.Version, enc.Format, obj)
			}
		}
	}
	// A model error in a late procedure, with batches in flight: the same
	// error, and the encoder goroutine stopped (the race detector and the
	// test's end would see it otherwise).
	bad := parallelModule(3*infoBatchSize + 17)
	bad.Procs[2*infoBatchSize+5].Params[1].Name = "a"
	parallelProcs = 1 << 30
	_, errSeq := Link(bad, LinkOptions{})
	parallelProcs = 1
	_, errPar := Link(bad, LinkOptions{})
	if errSeq == nil || errPar == nil || errSeq.Error() != errPar.Error() {
		t.Errorf("duplicate parameter: sequential %v, pipelined %v", errSeq, errPar)
	}
}

// TestLinkCFIBesideChecks: with newCFI on its own goroutine beside the
// checks of the names (startCFI), a model with errors of both kinds
// reports the error the sequential link reports, for Link and LinkObject.
func TestLinkCFIBesideChecks(t *testing.T) {
	defer func(p int) { parallelProcs = p }(parallelProcs)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	n := 3*infoBatchSize + 17
	badCFI := func(m *Module) { m.Procs[n-3].CFI = []frame.Insn{{PC: 100, Op: frame.OpDefCFAOffset, Offset: 16}} }
	cases := map[string]func(m *Module){
		"CFI":                 badCFI,
		"CFI and a duplicate": func(m *Module) { badCFI(m); m.Procs[n-1].Name = m.Procs[5].Name },
		"CFI and a nil":       func(m *Module) { badCFI(m); m.Procs[n-2] = nil },
		"nil only":            func(m *Module) { m.Procs[7] = nil },
		"restore_state":       func(m *Module) { m.Procs[n-1].CFI = []frame.Insn{{PC: 1, Op: frame.OpRestoreState}} },
		"CFI, AArch64 object": func(m *Module) { badCFI(m); m.Arch = arch.AArch64 },
	}
	for name, spoil := range cases {
		for _, obj := range []bool{false, true} {
			link := func() error {
				m := parallelModule(n)
				spoil(m)
				var err error
				if obj {
					_, err = LinkObject(m, LinkOptions{})
				} else {
					_, err = Link(m, LinkOptions{})
				}
				return err
			}
			parallelProcs = 1 << 30
			errSeq := link()
			parallelProcs = 1
			errPar := link()
			if errSeq == nil || errPar == nil || errSeq.Error() != errPar.Error() {
				t.Errorf("%s, object=%v: sequential %v, concurrent %v", name, obj, errSeq, errPar)
			}
		}
	}
}
