package info_test

import (
	"fmt"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/info"
)

// Encode a compile unit with one subprogram, then read it back.
func Example() {
	sub := &info.DIE{Tag: dwarf.DW_TAG_subprogram, Attrs: []info.Attr{
		{Name: dwarf.DW_AT_name, Value: info.String("fact")},
		{Name: dwarf.DW_AT_low_pc, Value: info.Addr(0x1000)},
		{Name: dwarf.DW_AT_high_pc, Value: info.Udata(0x40)},
	}}
	cu := &info.DIE{Tag: dwarf.DW_TAG_compile_unit, Attrs: []info.Attr{
		{Name: dwarf.DW_AT_name, Value: info.String("fact.scm")},
	}, Children: []*info.DIE{sub}}
	str := dwarf.NewStrTab()
	sec, abbrev, err := info.Encode([]*info.Unit{{Enc: dwarf.Default64, Root: cu}}, str)
	if err != nil {
		panic(err)
	}
	d, err := info.New(info.Sections{Info: sec, Abbrev: abbrev, Str: str.Bytes()})
	if err != nil {
		panic(err)
	}
	for r := d.Reader(); ; {
		e, err := r.Next()
		if err != nil || e == nil {
			break
		}
		if e.Tag == dwarf.DW_TAG_subprogram {
			name, _ := e.String(dwarf.DW_AT_name)
			lo, hi, _ := e.PCRange()
			fmt.Printf("%s [%#x, %#x)\n", name, lo, hi)
		}
	}
	// Output: fact [0x1000, 0x1040)
}
