// Command loadonly links and loads an image and calls into it, publishing
// nothing: the GDB JIT interface must not be linked in (publish's
// TestLoadOnlyLinksNoGDBJIT checks its symbols are absent).
package main

import (
	"fmt"
	"os"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
)

func main() {
	m := &elfimage.Module{File: "loadonly.s", Procs: []*elfimage.Proc{{Name: "f", Code: []byte{0xc3}}}}
	b, err := elfimage.Link(m, elfimage.LinkOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// x86-64 code (Module.Arch nil), never run: loaded as x86-64 on any
	// machine.
	im, err := elfimage.Load("loadonly.elf", b, &elfimage.LoadOptions{Arch: arch.X86_64})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer im.Close()
	p, err := im.ProcedureByName("f")
	fmt.Println(p.Name, err)
}
