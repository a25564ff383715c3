package elfimage_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/elfimage/elfimage"
)

// ExampleOpen links a one-procedure module, writes it, loads it with one
// mmap and finds it again from a PC inside it.
func ExampleOpen() {
	m := &elfimage.Module{
		File:  "answer.scm",
		Entry: "answer",
		Procs: []*elfimage.Proc{{Name: "answer", Code: []byte{0xb8, 0x2a, 0, 0, 0, 0xc3}}}, // mov eax, 42; ret
	}
	dir, err := os.MkdirTemp("", "elfimage-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "answer.elf")
	if err := elfimage.WriteFile(path, m, elfimage.LinkOptions{}); err != nil {
		log.Fatal(err)
	}

	im, err := elfimage.Open(path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer im.Close()
	for _, s := range im.Segments() {
		fmt.Println(s.Flags)
	}
	found, err := elfimage.Lookup(im.Entry())
	fmt.Println(found == im, err)
	// Output:
	// PF_R
	// PF_X+PF_R
	// true <nil>
}
