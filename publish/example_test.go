package publish_test

import (
	"fmt"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/publish"
)

// A loaded image published to gdb stays published until it is closed (or
// unpublished): a gdb attached now or later sees its procedures, lines and
// frames at their run-time addresses.
func ExampleGDB() {
	m := &elfimage.Module{File: "example.s", Procs: []*elfimage.Proc{{Name: "f", Code: []byte{0xc3}}}}
	b, err := elfimage.Link(m, elfimage.LinkOptions{})
	if err != nil {
		panic(err)
	}
	// The module is x86-64 code (Module.Arch nil); Load checks the image
	// is for its Arch, by default the running program's.
	im, err := elfimage.Load("example.elf", b, &elfimage.LoadOptions{Arch: arch.X86_64})
	if err != nil {
		panic(err)
	}
	if err := publish.GDB(im); err != nil {
		panic(err)
	}
	fmt.Println(publish.GDBPublished(im))
	im.Close() // unregisters it from gdb, then unmaps it
	fmt.Println(publish.GDBPublished(im))
	// Output:
	// true
	// false
}

// Perf maps name the code of images loaded from memory for perf report.
func ExamplePerfMapEntries() {
	m := &elfimage.Module{File: "example.s", Procs: []*elfimage.Proc{{Name: "f", Code: []byte{0x90, 0xc3}}}}
	b, err := elfimage.Link(m, elfimage.LinkOptions{})
	if err != nil {
		panic(err)
	}
	im, err := elfimage.Load("example.elf", b, &elfimage.LoadOptions{Arch: arch.X86_64})
	if err != nil {
		panic(err)
	}
	defer im.Close()
	entries, err := publish.PerfMapEntries(im)
	if err != nil {
		panic(err)
	}
	p, err := im.ProcedureByName("f")
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		if e.Name == "f" { // the other entry is the library's entry routine
			fmt.Println(e.Name, e.Size, e.Start == uint64(im.Base())+p.Start)
		}
	}
	// Output:
	// f 2 true
}
