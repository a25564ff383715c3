package jitdump_test

import (
	"fmt"
	"log"
	"os"

	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/jit/jitdump"
)

// A JIT announces each function before it first runs, spacing functions by
// their footprint in perf's address space.
func Example() {
	dir, _ := os.MkdirTemp("", "jitdump")
	defer os.RemoveAll(dir)
	w, err := jitdump.Open(dir, nil) // dir/jit-PID.dump, mapped PROT_READ|PROT_EXEC
	if err != nil {
		log.Fatal(err)
	}
	f := &jitdump.Function{
		Name:  "square",
		Addr:  0x7f0000001000,                                         // where the code runs
		Code:  []byte{0x48, 0x89, 0xf8, 0x48, 0x0f, 0xaf, 0xc7, 0xc3}, // mov rax,rdi; imul rax,rdi; ret
		Lines: []jitdump.Line{{Offset: 0, Line: 1, File: "/src/square.scm"}, {Offset: 3, Line: 2, File: "/src/square.scm"}},
		CFI:   []frame.Insn{}, // the CIE's row (CFA = rsp+8) holds throughout
	}
	next, _ := w.Footprint(f) // the next function may start at f.Addr+next
	if _, err := w.Load(f); err != nil {
		log.Fatal(err)
	}
	w.Close()

	d, err := jitdump.ReadFile(w.Path())
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range d.Records {
		fmt.Println(r.RecordPrefix().ID)
	}
	c := d.Code()[0]
	fmt.Printf("%s [%#x, +%d) line %d at %#x; next function at +%d\n", c.Name, c.CodeAddr, c.CodeSize,
		c.DebugInfo.Entries[1].Line, c.DebugInfo.Entries[1].Addr, next)
	// Output:
	// JIT_CODE_DEBUG_INFO
	// JIT_CODE_UNWINDING_INFO
	// JIT_CODE_LOAD
	// JIT_CODE_CLOSE
	// square [0x7f0000001000, +8) line 2 at 0x7f0000001003; next function at +80
}
