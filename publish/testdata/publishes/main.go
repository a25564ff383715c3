// Command publishes links, loads and publishes an image to gdb: the GDB
// JIT interface is linked in (publish's TestLoadOnlyLinksNoGDBJIT checks
// its symbols are present).
package main

import (
	"fmt"
	"os"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/publish"
)

func main() {
	m := &elfimage.Module{File: "publishes.s", Procs: []*elfimage.Proc{{Name: "f", Code: []byte{0xc3}}}}
	b, err := elfimage.Link(m, elfimage.LinkOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// x86-64 code (Module.Arch nil), never run: loaded as x86-64 on any
	// machine.
	im, err := elfimage.Load("publishes.elf", b, &elfimage.LoadOptions{Arch: arch.X86_64})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer im.Close()
	if err := publish.GDB(im); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(publish.GDBPublished(im))
}
