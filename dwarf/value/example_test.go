package value_test

import (
	"encoding/binary"
	"fmt"

	"github.com/elfimage/elfimage/dwarf/value"
)

// A structure in the two styles: gdb's print shows its members, gdb's
// backtrace only that it is an aggregate; a scalar member reads the same
// in both.
func ExampleFormat() {
	i32 := &value.Type{Kind: value.KindSigned, Name: "int32", Size: 4}
	pair := &value.Type{Kind: value.KindStruct, Name: "pair", Size: 16, Members: []value.Member{
		{Name: "n", Type: i32},
		{Name: "ratio", Offset: 8, Type: &value.Type{Kind: value.KindFloat, Name: "double", Size: 8}},
	}}
	b := binary.LittleEndian.AppendUint64(nil, uint64(0xffffffff)) // n = -1
	b = binary.LittleEndian.AppendUint64(b, 0x400c000000000000)    // ratio = 3.5
	obj := value.Object{Bytes: b}
	text, _ := value.Format(pair, obj, &value.Options{Style: value.Print})
	fmt.Println(text)
	text, _ = value.Format(pair, obj, &value.Options{Style: value.Brief})
	fmt.Println(text)
	text, _ = value.Format(i32, obj, &value.Options{Style: value.Brief})
	fmt.Println(text, pair)
	// Output:
	// {n = -1, ratio = 3.5}
	// ...
	// -1 struct pair
}
