// Command jitprog is the program the gdbjit tests build and run (under
// gdb): it makes a tiny function at run time, registers a symbol file for
// it through package gdbjit, calls it, and unregisters it.
//
//	jitprog addr   print the run-time address of __jit_debug_descriptor
//	jitprog run    the JIT scenario, see run
//	jitprog wait   register three symbol files, unregister the middle one,
//	               print "ready A B C" (their code addresses) and wait for
//	               standard input to close, for a debugger to attach
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/elfimage/elfimage/jit/gdbjit"
	"github.com/elfimage/elfimage/native"
	"golang.org/x/sys/unix"
)

// jitAddr is the address of the generated function, for the debugger
// (`info symbol 'main.jitAddr'`).
var jitAddr uintptr

// Source positions of the generated code in the symbol file.
const (
	srcFile   = "/jit/gdbjit/jitfunc.src"
	entryLine = 10 // mov eax, 42
	retLine   = 11 // ret
	func2Line = 20 // jitfunc2, never called
)

// code is the generated function: mov eax, 42; ret.
var code = []byte{0xb8, 0x2a, 0x00, 0x00, 0x00, 0xc3}

// codePage maps one page, writes code at each of offs and makes it
// read-only and executable.
func codePage(offs ...int) ([]byte, error) {
	mem, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	for _, o := range offs {
		copy(mem[o:], code)
	}
	if err := unix.Mprotect(mem, unix.PROT_READ|unix.PROT_EXEC); err != nil {
		return nil, err
	}
	return mem, nil
}

// afterRegister and afterUnregister exist for the debugger's breakpoints.
//
//go:noinline
func afterRegister() { fmt.Fprintln(os.Stderr, "jitprog: registered") }

//go:noinline
func afterUnregister() { fmt.Fprintln(os.Stderr, "jitprog: unregistered") }

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: jitprog addr|run")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "addr":
		fmt.Printf("%#x\n", gdbjit.DescriptorAddr())
	case "run", "wait":
		f := run
		if os.Args[1] == "wait" {
			f = wait
		}
		if err := f(); err != nil {
			fmt.Fprintln(os.Stderr, "jitprog:", err)
			os.Exit(1)
		}
	default:
		os.Exit(2)
	}
}

// run registers one symbol file with two procedures, jitfunc and
// jitfunc2, at 16 bytes from each other, calls jitfunc, unregisters the
// file and calls afterUnregister.
func run() error {
	mem, err := codePage(0, 16)
	if err != nil {
		return err
	}
	addr := uintptr(unixAddr(mem))
	jitAddr = addr
	fmt.Printf("jitprog: code at %#x\n", addr)

	e, err := gdbjit.RegisterProcs([]gdbjit.Proc{{
		Name: "jitfunc", Addr: uint64(addr), Size: uint64(len(code)),
		File: srcFile, Line: entryLine, Lines: []gdbjit.Line{{Offset: 5, Line: retLine}},
	}, {
		Name: "jitfunc2", Addr: uint64(addr) + 16, Size: uint64(len(code)),
		File: srcFile, Line: func2Line,
	}})
	if err != nil {
		return err
	}
	afterRegister()
	st, err := native.NewStack(64 << 10)
	if err != nil {
		return err
	}
	defer st.Close()
	r, err := native.CallErr(addr, st)
	if err != nil {
		return err
	}
	fmt.Printf("jitprog: jitfunc returned %d\n", r)
	if err := e.Unregister(); err != nil {
		return err
	}
	afterUnregister()
	if err := unix.Munmap(mem); err != nil {
		return err
	}
	fmt.Println("jitprog: done")
	return nil
}

// wait registers three symbol files of one procedure each (jitA, jitB,
// jitC) in one RegisterBatch, unregisters jitB's, prints their addresses
// and waits for standard input to close.
func wait() error {
	mem, err := codePage(0, 16, 32)
	if err != nil {
		return err
	}
	addr := uint64(unixAddr(mem))
	var files [][]byte
	for i, name := range []string{"jitA", "jitB", "jitC"} {
		b, err := gdbjit.Symfile([]gdbjit.Proc{{Name: name, Addr: addr + uint64(16*i), Size: uint64(len(code)), File: srcFile, Line: 30 + i}})
		if err != nil {
			return err
		}
		files = append(files, b)
	}
	es, err := gdbjit.RegisterBatch(files)
	if err != nil {
		return err
	}
	if err := es[1].Unregister(); err != nil {
		return err
	}
	fmt.Printf("ready %#x %#x %#x\n", addr, addr+16, addr+32)
	io.Copy(io.Discard, os.Stdin)
	return nil
}
