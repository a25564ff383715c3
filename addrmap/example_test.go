package addrmap_test

import (
	"errors"
	"fmt"

	"github.com/elfimage/elfimage/addrmap"
)

func ExampleMap() {
	var m addrmap.Map[string]
	m.Insert(0x1000, 0x2000, "libfoo")
	m.Insert(0x4000, 0x5000, "jit code")

	name, err := m.Lookup(0x4abc)
	fmt.Println(name, err)
	_, err = m.Lookup(0x3000)
	fmt.Println(errors.Is(err, addrmap.ErrNotFound))

	m.Remove(0x4000)
	for r, v := range m.All() {
		fmt.Printf("[%#x, %#x) %s\n", r.Start, r.End, v)
	}
	// Output:
	// jit code <nil>
	// true
	// [0x1000, 0x2000) libfoo
}
