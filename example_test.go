package elfimage_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/lang/scheme"
)

// Example compiles a Scheme procedure, writes its image, loads it with one
// mmap and asks, for a run-time pc inside the code, which image, procedure
// and source position it belongs to. The README's library example is this
// code.
func Example() {
	src := []byte("(define (square x)\n  (* x x))\n(define (main) (square 7))\n")
	dir, err := os.MkdirTemp("", "elfimage-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	mod, err := scheme.Compile("square.scm", src) // or build an elfimage.Module yourself
	if err != nil {
		log.Fatal(err)
	}
	path := filepath.Join(dir, "square.elf")
	if err := elfimage.WriteFile(path, mod, elfimage.LinkOptions{}); err != nil {
		log.Fatal(err)
	}

	img, err := elfimage.Open(path, nil) // one mmap, mprotect, relocate, register
	if err != nil {
		log.Fatal(err)
	}
	defer img.Close()

	// Some run-time pc in the image: here, 8 bytes into square.
	procs, _ := img.Procedures()
	var pc uintptr
	for _, p := range procs {
		if p.Name == "square" {
			pc = img.Base() + uintptr(p.Start) + 8
		}
	}

	// Any run-time pc finds its image by bisection, then its procedure and
	// source position from the image's own tables, read lazily.
	im, err := elfimage.Lookup(pc)
	if err != nil {
		log.Fatal(err)
	}
	addr := im.LinkAddr(pc)
	proc, _ := im.Procedure(addr) // name, range, arity, argument names, defaults, docstring, properties
	pos, _ := im.PositionAt(addr) // file, line, column
	locals, _ := im.Locals(addr)  // live parameters and variables, each with its location here
	fmt.Println(proc.Name, proc.Args, filepath.Base(pos.File), pos.Line, pos.Column)
	for _, l := range locals {
		fmt.Println(l.Name, l.Param)
	}
	// Output:
	// square [x] square.scm 1 1
	// x true
}
