// Command a64prog is the program the AArch64 gdb test cross-builds for
// linux/arm64 and runs under qemu-aarch64 -g: it links an image of
// hand-written AArch64 code (a64_twice(a, b) = 2*(a+b), with a frame
// record, exact CFI, line rows and argument locations), loads it,
// publishes it through publish.GDB, calls a64_twice(20, 1) through
// native.Call and prints "a64_twice(20, 1) = 42".
package main

import (
	"encoding/binary"
	"fmt"
	"os"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/expr"
	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/native"
	"github.com/elfimage/elfimage/publish"
)

// words encodes AArch64 instruction words little-endian.
func words(ws ...uint32) []byte {
	var b []byte
	for _, w := range ws {
		b = binary.LittleEndian.AppendUint32(b, w)
	}
	return b
}

// module: a64_twice, assembled with aarch64-linux-gnu-as:
//
//	0: stp x29, x30, [sp, #-16]!   line 10
//	4: mov x29, sp
//	8: add x0, x0, x1              line 11 (prologue end)
//	12: add x0, x0, x0             line 12
//	16: ldp x29, x30, [sp], #16    line 13
//	20: ret
func module() *elfimage.Module {
	return &elfimage.Module{
		Arch: arch.AArch64,
		File: "/src/a64.scm",
		Procs: []*elfimage.Proc{{
			Name: "a64_twice", Line: 10,
			Code: words(0xa9bf7bfd, 0x910003fd, 0x8b010000, 0x8b000000, 0xa8c17bfd, 0xd65f03c0),
			Params: []elfimage.Var{
				{Name: "a", Live: []elfimage.LiveRange{{Start: 0, End: 12, Location: expr.Reg(arch.AArch64_X0)}}},
				{Name: "b", Location: expr.Reg(arch.AArch64_X0 + 1)},
			},
			Lines: []elfimage.LineRow{{Offset: 0, Line: 10, IsStmt: true}, {Offset: 8, Line: 11, IsStmt: true, PrologueEnd: true},
				{Offset: 12, Line: 12, IsStmt: true}, {Offset: 16, Line: 13, IsStmt: true}},
			CFI: []frame.Insn{
				{PC: 4, Op: frame.OpDefCFAOffset, Offset: 16},
				{PC: 4, Op: frame.OpOffset, Reg: arch.AArch64_FP, Offset: -16},
				{PC: 4, Op: frame.OpOffset, Reg: arch.AArch64_LR, Offset: -8},
				{PC: 20, Op: frame.OpDefCFAOffset, Offset: 0},
				{PC: 20, Op: frame.OpRestore, Reg: arch.AArch64_FP},
				{PC: 20, Op: frame.OpRestore, Reg: arch.AArch64_LR},
			},
		}},
	}
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "a64prog:", err)
		os.Exit(1)
	}
}

func run() error {
	b, err := elfimage.Link(module(), elfimage.LinkOptions{})
	if err != nil {
		return err
	}
	im, err := elfimage.Load("a64.elf", b, &elfimage.LoadOptions{Arch: arch.AArch64})
	if err != nil {
		return err
	}
	defer im.Close()
	if err := publish.GDB(im); err != nil {
		return err
	}
	p, err := im.ProcedureByName("a64_twice")
	if err != nil {
		return err
	}
	s, err := native.NewStack(1 << 20)
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Printf("a64_twice(20, 1) = %d\n", native.Call(im.Base()+uintptr(p.Start), s, 20, 1))
	return nil
}
