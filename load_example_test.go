package elfimage_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
)

// ExampleOpen links a one-procedure module for the running machine,
// writes it, loads it with one mmap and finds it again from a PC inside
// it.
func ExampleOpen() {
	// answer returns 42, in the running machine's code: Open loads
	// images of its own architecture (LoadOptions.Arch).
	a, code := arch.X86_64, []byte{0xb8, 0x2a, 0, 0, 0, 0xc3} // mov eax, 42; ret
	if runtime.GOARCH == "arm64" {
		a, code = arch.AArch64, []byte{0x40, 0x05, 0x80, 0x52, 0xc0, 0x03, 0x5f, 0xd6} // movz w0, #42; ret
	}
	m := &elfimage.Module{
		File:  "answer.scm",
		Entry: "answer",
		Arch:  a,
		Procs: []*elfimage.Proc{{Name: "answer", Code: code}},
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
	// PF_R
	// true <nil>
}
