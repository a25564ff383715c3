package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/internal/typedemo"
	"github.com/elfimage/elfimage/lang/scheme"
)

// TestPrintBacktraceTyped: a capture taken in a procedure with typed
// arguments prints each as its type shows it (a pointer in hex, the
// fixnum untagged by its location), not as the integer of its bits.
func TestPrintBacktraceTyped(t *testing.T) {
	b, err := elfimage.Link(typedemo.Module(), elfimage.LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// typedemo is x86-64 code, only read here: loaded as x86-64 on any
	// machine, its capture's registers x86-64's.
	im, err := elfimage.Load("typedemo.elf", b, &elfimage.LoadOptions{Arch: arch.X86_64})
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	p, err := im.ProcedureByName(typedemo.Proc)
	if err != nil {
		t.Fatal(err)
	}
	const vm, stack = 0x7f0000100000, 0x7ffc00001000
	c := &scheme.Capture{Arch: arch.X86_64, StackAddr: stack, Stack: make([]byte, 64)}
	binary.LittleEndian.PutUint64(c.Stack[8:], 0x1234) // the return address, in the host
	c.Regs[arch.X86_64_RA] = uint64(im.Base()) + p.Start + typedemo.BodyStart + 1
	c.Regs[arch.X86_64_RSP], c.Regs[arch.X86_64_RBP] = stack, stack
	c.Regs[arch.X86_64_RDI], c.Regs[arch.X86_64_RSI], c.Regs[arch.X86_64_RDX] = vm, typedemo.N, typedemo.Fix
	var out bytes.Buffer
	printBacktrace(&out, c, false)
	if want := fmt.Sprintf("in (inspect vm=%#x n=5 fix=21)  at %s:4:2", vm, typedemo.File); !strings.Contains(out.String(), want) {
		t.Errorf("backtrace:\n%s\nwant a frame %q", out.String(), want)
	}
}
