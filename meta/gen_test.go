package meta

import (
	"fmt"
	"testing"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/line"
)

var argPool = []string{"x", "y", "n", "lst", "proc", "acc", "k", "str"}

// genProcs returns n procedures laid out from 0x401000 with 16-byte
// alignment gaps: 2 required parameters each; every third has an optional
// one with a default, a docstring and a property; sizes 32 to 431 bytes.
func genProcs(n int) []Proc {
	ps := make([]Proc, n)
	addr := uint64(0x401000)
	for i := range ps {
		size := uint64(32 + (i*37)%400)
		p := Proc{Name: fmt.Sprintf("module/procedure-%d", i), Start: addr, Size: size,
			Required: 2, Args: []string{argPool[i%len(argPool)], argPool[(i+3)%len(argPool)]}}
		if i%3 == 0 {
			p.Optional = 1
			p.Args = append(p.Args, "k")
			p.Defaults = []string{"10"}
			p.Doc = fmt.Sprintf("Return the %d-th thing.", i)
			p.Props = []Prop{{"inline", "#f"}}
		}
		ps[i] = p
		addr = (addr + size + 15) &^ 15
	}
	return ps
}

// genLines builds one line program with a sequence per procedure (a row
// every 8 bytes, 4 to 54 rows), encoded as DWARF 5 at .debug_line offset
// 0, and sets each procedure's LineUnit and LineSeq.
func genLines(t testing.TB, ps []Proc) (sec line.Sections, prog *line.Program) {
	prog = &line.Program{Enc: dwarf.Default64, CompDir: "/home/user/src",
		Files: []line.File{{Name: "big.scm"}, {Name: "big.scm"}}}
	for i := range ps {
		p := &ps[i]
		s := line.Sequence{Start: p.Start, End: p.Start + p.Size}
		for off := uint64(0); off < p.Size; off += 8 {
			s.Rows = append(s.Rows, line.Row{Address: p.Start + off, File: 1,
				Line: uint32(10*i + int(off/8)), Column: uint32(1 + off%5), IsStmt: true})
		}
		prog.Sequences = append(prog.Sequences, s)
	}
	lineStr := dwarf.NewStrTab()
	data, offs, err := prog.EncodeOffsets(lineStr)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ps {
		ps[i].LineUnit, ps[i].LineSeq, ps[i].HasLineSeq = 0, offs[i], true
	}
	return line.Sections{Line: data, LineStr: lineStr.Bytes()}, prog
}
