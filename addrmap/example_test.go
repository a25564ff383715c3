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

// ExampleMap_Acquire shows safe unload: the value of a held Ref stays valid
// after its range is removed, and the owner's free function runs when the
// last Ref is released.
func ExampleMap_Acquire() {
	var m addrmap.Map[string]
	m.Insert(0x4000, 0x5000, "jit code")

	ref, err := m.Acquire(0x4abc) // a profiler or unwinder starts using the value
	if err != nil {
		panic(err)
	}

	// The owner unloads: later lookups miss, but free waits for the reader.
	m.RemoveFunc(0x4000, func(v string) { fmt.Println("free", v) })
	_, err = m.Acquire(0x4abc)
	fmt.Println(err == addrmap.ErrNotFound)
	fmt.Println("still using", ref.Value(), ref.Range())

	ref.Release() // the last reader lets go: free runs here
	// Output:
	// true
	// still using jit code {16384 20480}
	// free jit code
}
