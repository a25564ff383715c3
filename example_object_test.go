package elfimage_test

import (
	"bytes"
	"debug/elf"
	"fmt"
	"log"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/lang/scheme"
)

// An object for the system linker: cc prog.c square.o links it, and C
// calls int64_t square(int64_t) and int64_t sum_of_squares(int64_t,
// int64_t).
func ExampleLinkObject() {
	src := []byte("(define (square x) (* x x))\n(define (sum-of-squares a b) (+ (square a) (square b)))\n")
	m, err := scheme.CompileObject("square.scm", src)
	if err != nil {
		log.Fatal(err)
	}
	obj, err := elfimage.LinkObject(m, elfimage.LinkOptions{})
	if err != nil {
		log.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(obj))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(f.Type)
	syms, _ := f.Symbols()
	for _, s := range syms {
		if elf.ST_BIND(s.Info) == elf.STB_GLOBAL {
			fmt.Println("global", s.Name)
		}
	}
	for _, s := range f.Sections {
		if s.Type == elf.SHT_RELA {
			fmt.Println(s.Name, "->", f.Sections[s.Info].Name)
		}
	}
	// Output:
	// ET_REL
	// global square
	// global sum_of_squares
	// .rela.text -> .text
	// .rela.data -> .data
	// .rela.eh_frame -> .eh_frame
	// .rela.debug_info -> .debug_info
	// .rela.debug_aranges -> .debug_aranges
	// .rela.debug_line -> .debug_line
	// .rela.debug_loclists -> .debug_loclists
}
