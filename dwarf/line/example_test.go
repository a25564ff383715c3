package line_test

import (
	"fmt"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/line"
)

// A linker encodes one line program per compile unit, then a symbolizer
// decodes it and looks addresses up.
func Example() {
	lineStr := dwarf.NewStrTab()
	p := &line.Program{
		Enc:     dwarf.Default64,
		CompDir: "/src",
		Files:   []line.File{{Name: "fact.scm"}, {Name: "fact.scm"}},
		Sequences: []line.Sequence{{Start: 0x1000, End: 0x1040, Rows: []line.Row{
			{Address: 0x1000, File: 1, Line: 1, Column: 1, IsStmt: true},
			{Address: 0x1010, File: 1, Line: 2, Column: 3, IsStmt: true, PrologueEnd: true},
		}}},
	}
	sec, err := p.Encode(lineStr)
	if err != nil {
		panic(err)
	}
	tab, err := line.Decode(line.Sections{Line: sec, LineStr: lineStr.Bytes()}, 0, "/src")
	if err != nil {
		panic(err)
	}
	row, ok := tab.Lookup(0x1018)
	f, _ := tab.File(row.File)
	fmt.Println(f.Path, row.Line, row.Column, ok)
	_, ok = tab.Lookup(0x1040)
	fmt.Println(ok)
	// Output:
	// /src/fact.scm 2 3 true
	// false
}
