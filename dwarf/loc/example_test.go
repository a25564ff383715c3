package loc_test

import (
	"fmt"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/loc"
)

// A variable lives in rdi for the first 16 bytes of its function, then in
// the frame. The linker writes the list once, stores its offset in the
// variable's DW_AT_location, and a debugger finds the location at a PC.
func ExampleLocLists() {
	enc := dwarf.Default64
	b, err := loc.NewLocLists(enc, 0x401000)
	if err != nil {
		panic(err)
	}
	off, err := b.AddList([]loc.Entry{
		{Start: 0x401000, End: 0x401010, Expr: []byte{byte(dwarf.DW_OP_reg0) + 5}},    // DW_OP_reg5 (rdi)
		{Start: 0x401010, End: 0x401080, Expr: []byte{byte(dwarf.DW_OP_fbreg), 0x68}}, // DW_OP_fbreg -24
	})
	if err != nil {
		panic(err)
	}
	sec := loc.Sections{LocLists: b.Bytes()}
	fmt.Println(b.Section(), "offset", off)

	expr, ok, err := loc.LocationAt(sec, enc, off, 0x401000, 0x401020)
	fmt.Printf("at 0x401020: % x %v %v\n", expr, ok, err)
	_, ok, _ = loc.LocationAt(sec, enc, off, 0x401000, 0x401080)
	fmt.Println("at 0x401080:", ok)
	// Output:
	// .debug_loclists offset 12
	// at 0x401020: 91 68 true <nil>
	// at 0x401080: false
}

func ExampleRangeLists() {
	enc := dwarf.Default64
	b, _ := loc.NewRangeLists(enc, 0)
	off, _ := b.AddList([]loc.Range{{Start: 0x401010, End: 0x401020}, {Start: 0x401030, End: 0x401048}})
	rs, err := loc.ReadRangeList(loc.Sections{RngLists: b.Bytes()}, enc, off, 0)
	fmt.Printf("%x %v\n", rs, err)
	// Output:
	// [{401010 401020} {401030 401048}] <nil>
}

func ExampleEncodeAranges() {
	set, _ := loc.EncodeAranges(dwarf.Default64, 0, []loc.Range{{Start: 0x401000, End: 0x401100}})
	sets, err := loc.ReadAranges(set, nil)
	fmt.Printf("%d bytes; unit %#x covers %x %v\n", len(set), sets[0].CUOffset, sets[0].Ranges, err)
	// Output:
	// 48 bytes; unit 0x0 covers [{401000 401100}] <nil>
}
