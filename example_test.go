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

	// Run it: main calls (square 7). scheme.Run calls the image's entry
	// procedure on a native stack through package native.
	res, err := scheme.Run(img, scheme.RunOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("main returned", res.Value)

	// Some run-time pc in the image (a sampled or faulting instruction
	// pointer): here, 8 bytes into square, found by name.
	procs, err := img.Procedures()
	if err != nil {
		log.Fatal(err)
	}
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
	proc, err := im.Procedure(addr) // name, range, arity, argument names, defaults, docstring, properties
	if err != nil {
		log.Fatal(err)
	}
	pos, err := im.PositionAt(addr) // file, line, column
	if err != nil {
		log.Fatal(err)
	}
	locals, err := im.Locals(addr) // live parameters and variables, each with its DWARF location here
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(proc.Name, proc.Args, filepath.Base(pos.File), pos.Line, pos.Column)
	for _, l := range locals {
		fmt.Println(l.Name, l.Param)
	}
	// Output:
	// main returned 49
	// square [x] square.scm 1 1
	// x true
}
