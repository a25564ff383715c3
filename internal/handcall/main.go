// Command handcall is what a runtime author writes first: a Go program that
// builds an elfimage.Module by hand (hand-assembled x86-64, line rows in a
// pretend source file, exact CFI), links and loads it, publishes it to the
// tools and calls it through native.Call. It writes nothing of its own for
// debuggers: the entry frame between its code and its Go caller is the
// library's (elfimage.EntryImage). The entry-frame tests of package elfimage
// run it under gdb, lldb and perf.
//
//	handcall [-gdb] [-perf-map] [-jitdump DIR] [-n N]
//
// It calls spin(N), which calls add(acc, i) for i = N down to 1, and prints
// the sum N(N+1)/2.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/jit/jitdump"
	"github.com/elfimage/elfimage/jit/perfmap"
	"github.com/elfimage/elfimage/native"
	"github.com/elfimage/elfimage/publish"
)

// Source is the pretend source file of the module: one line per
// instruction, which the line rows point at.
const Source = `add:
  push rbp
  mov rbp, rsp
  lea rax, [rdi+rsi]
  pop rbp
  ret
spin:
  push rbp
  mov rbp, rsp
  push rbx
  push r12
  mov rbx, rdi
  xor r12d, r12d
loop:
  test rbx, rbx
  je done
  mov rdi, r12
  mov rsi, rbx
  call add
  mov r12, rax
  dec rbx
  jmp loop
done:
  mov rax, r12
  pop r12
  pop rbx
  pop rbp
  ret
`

// add(a, b) returns a+b with a frame of its own.
var addCode = []byte{
	0x55,             // 0: push rbp
	0x48, 0x89, 0xe5, // 1: mov rbp, rsp
	0x48, 0x8d, 0x04, 0x37, // 4: lea rax, [rdi+rsi]
	0x5d, // 8: pop rbp
	0xc3, // 9: ret
}

// spin(n) returns the sum of n, n-1, ..., 1, adding with add.
var spinCode = []byte{
	0x55,             // 0x00: push rbp
	0x48, 0x89, 0xe5, // 0x01: mov rbp, rsp
	0x53,       // 0x04: push rbx
	0x41, 0x54, // 0x05: push r12
	0x48, 0x89, 0xfb, // 0x07: mov rbx, rdi
	0x45, 0x31, 0xe4, // 0x0a: xor r12d, r12d
	0x48, 0x85, 0xdb, // 0x0d: loop: test rbx, rbx
	0x74, 0x13, // 0x10: je done
	0x4c, 0x89, 0xe7, // 0x12: mov rdi, r12
	0x48, 0x89, 0xde, // 0x15: mov rsi, rbx
	0xe8, 0, 0, 0, 0, // 0x18: call add (relocated)
	0x49, 0x89, 0xc4, // 0x1d: mov r12, rax
	0x48, 0xff, 0xcb, // 0x20: dec rbx
	0xeb, 0xe8, // 0x23: jmp loop
	0x4c, 0x89, 0xe0, // 0x25: done: mov rax, r12
	0x41, 0x5c, // 0x28: pop r12
	0x5b, // 0x2a: pop rbx
	0x5d, // 0x2b: pop rbp
	0xc3, // 0x2c: ret
}

// lines gives one row per instruction: offsets[i] is on line first+i.
func lines(first uint32, offsets ...uint32) []elfimage.LineRow {
	var rows []elfimage.LineRow
	for i, off := range offsets {
		rows = append(rows, elfimage.LineRow{Offset: off, Line: first + uint32(i), Column: 3, IsStmt: true})
	}
	return rows
}

func reg(r arch.Reg) []byte { return []byte{byte(dwarf.DW_OP_reg0) + byte(r)} }

// Module returns the hand-built module. Its procedures are 256-byte
// aligned for perf: perf maps each function of a jitdump as its code plus
// its unwinding data (jitdump.Spacing), and a function placed closer to
// the previous one hides that one's unwinding data, which --call-graph
// dwarf then cannot use.
func Module() *elfimage.Module {
	rbp, rsp := arch.X86_64_RBP, arch.X86_64_RSP
	add := &elfimage.Proc{
		Name: "add", Code: addCode, Line: 1, Column: 1, Align: 256,
		Lines: lines(2, 0, 1, 4, 8, 9),
		CFI: []frame.Insn{
			{PC: 1, Op: frame.OpDefCFAOffset, Reg: rsp, Offset: 16},
			{PC: 1, Op: frame.OpOffset, Reg: rbp, Offset: -16},
			{PC: 4, Op: frame.OpDefCFARegister, Reg: rbp},
			{PC: 9, Op: frame.OpDefCFA, Reg: rsp, Offset: 8},
			{PC: 9, Op: frame.OpSameValue, Reg: rbp},
		},
		Params: []elfimage.Var{
			{Name: "a", Location: reg(arch.X86_64_RDI)},
			{Name: "b", Location: reg(arch.X86_64_RSI)},
		},
	}
	spin := &elfimage.Proc{
		Name: "spin", Code: spinCode, Line: 7, Column: 1, Align: 256,
		Lines: lines(8, 0x00, 0x01, 0x04, 0x05, 0x07, 0x0a, 0x0d, 0x10, 0x12, 0x15, 0x18, 0x1d, 0x20, 0x23, 0x25, 0x28, 0x2a, 0x2b, 0x2c),
		CFI: []frame.Insn{
			{PC: 0x01, Op: frame.OpDefCFAOffset, Reg: rsp, Offset: 16},
			{PC: 0x01, Op: frame.OpOffset, Reg: rbp, Offset: -16},
			{PC: 0x04, Op: frame.OpDefCFARegister, Reg: rbp},
			{PC: 0x05, Op: frame.OpOffset, Reg: arch.X86_64_RBX, Offset: -24},
			{PC: 0x07, Op: frame.OpOffset, Reg: arch.X86_64_R12, Offset: -32},
			{PC: 0x2a, Op: frame.OpSameValue, Reg: arch.X86_64_R12},
			{PC: 0x2b, Op: frame.OpSameValue, Reg: arch.X86_64_RBX},
			{PC: 0x2c, Op: frame.OpDefCFA, Reg: rsp, Offset: 8},
			{PC: 0x2c, Op: frame.OpSameValue, Reg: rbp},
		},
		Params: []elfimage.Var{{Name: "n", Live: []elfimage.LiveRange{{Start: 0, End: 0x0a, Location: reg(arch.X86_64_RDI)}}}},
		Relocs: []elfimage.Reloc{{Offset: 0x19, Type: elfimage.RelocPC32, Symbol: "add", Addend: -4}},
	}
	return &elfimage.Module{File: "hand.s", CompDir: "/handcall", Producer: "handcall", Entry: "spin", Procs: []*elfimage.Proc{add, spin}}
}

func main() {
	gdb := flag.Bool("gdb", false, "publish the image to gdb and lldb (GDB JIT interface)")
	perfMap := flag.Bool("perf-map", false, "announce the image in /tmp/perf-PID.map")
	dump := flag.String("jitdump", "", "announce the image in `DIR`/jit-PID.dump")
	n := flag.Uint64("n", 3, "spin's argument")
	flag.Parse()
	if err := run(*gdb, *perfMap, *dump, *n); err != nil {
		fmt.Fprintln(os.Stderr, "handcall:", err)
		os.Exit(1)
	}
}

func run(gdb, perfMap bool, dump string, n uint64) error {
	b, err := elfimage.Link(Module(), elfimage.LinkOptions{})
	if err != nil {
		return err
	}
	img, err := elfimage.Load("hand.elf", b, nil)
	if err != nil {
		return err
	}
	defer img.Close()
	if gdb {
		if err := publish.GDB(img); err != nil {
			return err
		}
	}
	if perfMap {
		w, err := perfmap.Default()
		if err != nil {
			return err
		}
		entries, err := publish.PerfMapEntries(img)
		if err != nil {
			return err
		}
		if err := w.AddBatch(entries); err != nil {
			return err
		}
	}
	if dump != "" {
		fns, err := publish.JitdumpFunctions(img)
		if err != nil {
			return err
		}
		w, err := jitdump.Open(dump, nil)
		if err != nil {
			return err
		}
		defer w.Close()
		for i := range fns {
			if _, err := w.Load(&fns[i]); err != nil {
				return err
			}
		}
	}
	s, err := native.NewStack(1 << 20)
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Println(native.Call(img.Entry(), s, uintptr(n)))
	return nil
}
