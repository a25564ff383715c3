// Command bf is a Brainfuck JIT built on elfimage, written only against its
// public API as a model of how a runtime adopts the library. It compiles a
// program to x86-64 or AArch64, links it into an image with a line row for every
// instruction, exact call frame information and the VM state as a typed
// parameter, loads the image and runs it through native.Call with
// standard input and output:
//
//	go run ./examples/bf [-gdb] [-perf-map] [-jitdump=DIR] [-o FILE] [-eof 0|255|keep] [-fold=false] [-arch amd64|arm64] PROG.b
//
// -gdb publishes the image to gdb and lldb (GDB JIT interface), -perf-map
// announces it in /tmp/perf-PID.map, -jitdump=DIR in DIR/jit-PID.dump for
// perf inject --jit, and -o FILE writes the image to FILE instead of
// running it. -arch chooses the machine (the running program's by
// default; another only with -o).
//
// # The language
//
// Eight commands; every other byte is a comment. The tape has 30,000 8-bit
// cells that wrap around, and the data pointer starts at the first. Moving
// the pointer off either end of the tape stops the program with an error
// naming the command. At the end of the input , stores 0 (-eof 255: 255,
// -eof keep: nothing).
//
// # The code
//
// The program becomes one procedure, named after the file ("hello.b" gives
// hello), with the System V calling convention: its one argument is a
// pointer to struct vm (vm.go), which holds the data pointer, the file
// descriptors of the input and output, an error number and the cells. The
// body keeps vm in r12 and the data pointer in rbx, callee-saved registers
// the prologue saves:
//
//	push rbp; mov rbp, rsp; push rbx; push r12    frame record, saved registers
//	mov r12, rdi; mov rbx, [r12+data]             r12 = vm, rbx = vm->data
//	... one block per command ...
//	xor eax, eax                                  the program ended: return 0
//	exit: pop r12; pop rbx; pop rbp; ret
//	... stubs: lea rax, [rip+command]; jmp exit   a command failed: return its address
//
// Commands become:
//
//	command   code
//	+ and -   add byte [rbx], n
//	> and <   add rbx, n; lea rax, [r12+end]; cmp rbx, rax; jae/jb stub; mov [r12+data], rbx
//	[         cmp byte [rbx], 0; je past the matching ]
//	]         cmp byte [rbx], 0; jne past the matching [
//	[-], [+]  mov byte [rbx], 0
//	.         write(vm->out, rbx, 1) as a raw system call, again on EINTR; not 1: stub
//	,         mov byte [rbx], EOF; read(vm->in, rbx, 1), again on EINTR; negative: stub
//
// With -fold (the default) a run of + and - on one line becomes one add of
// the net amount, a run of > and < one move and one check, and [-] one
// store; -fold=false compiles each command alone. Folding checks only a
// run's net move against the ends of the tape: <> on the first cell is an
// error without it, nothing with it.
//
// On AArch64 the program has the same structure, with the AAPCS64 calling
// convention: vm arrives in x0; the body keeps it in x19 and the data
// pointer in x20, callee-saved registers saved above the frame record:
//
//	stp x29, x30, [sp, #-32]!; mov x29, sp    frame record, x29 points at it
//	stp x19, x20, [sp, #16]                   saved registers
//	mov x19, x0; ldr x20, [x19, #data]        x19 = vm, x20 = vm->data
//	... one block per command ...
//	mov x0, #0                                the program ended: return 0
//	exit: ldp x19, x20, [sp, #16]; ldp x29, x30, [sp], #32; ret
//	... stubs: adr x0, .; mov x9, #d; movk ...; sub x0, x0, x9; b exit
//
// Commands become ldrb/add/strb on [x20] for + and -, strb wzr for [-],
// add or sub on x20 then cmp against the tape's end and b.lo/b.hs over a
// b to a stub for > and <, ldrb and cbnz/cbz over a b for [ and ], and
// svc #0 (x8 = 64, write, or 63, read) for . and ,. Every branch that may
// go far is a b (±128 MiB), so a program may compile to at most
// MaxCodeAArch64 bytes. The CFI says CFA = sp+32 after the first stp,
// x29+32 after the mov, x29 and x30 at CFA-32 and CFA-24, x19 and x20 at
// CFA-16 and CFA-8, and undoes it load by load; the tests check it with
// internal/a64sim, on any host.
//
// # Input and output
//
// The generated code cannot call Go (native.Call runs it as a system call
// would run: the goroutine is parked and Go's stacks may move). So . and ,
// are raw write(2) and read(2) system calls of one byte on the descriptors
// in vm->in and vm->out (standard input and output here; the tests pass
// files). This is the simplest honest design: nothing is buffered, so the
// output is in order with anything else the process writes, a program that
// prompts and reads works interactively, and no state goes back and forth
// between Go and the code. The price is one system call per byte: cat.b
// copies about 0.35 MB per second of CPU time on the machines these tests
// run on (two calls per byte, about 1.3 µs each); buffers in struct vm,
// filled and flushed by the code, would remove that cost at the price of
// flushing rules (before each read, at exit, on error). Go's signal
// handlers are installed with SA_RESTART, so signals do not interrupt the
// calls; EINTR is retried anyway. A failed
// call stores its errno in vm->errno and returns the command's address,
// which the Go side maps to the program's file, line and column with
// Image.PositionAt (a runtime's way to turn a pc into a source position).
//
// # Line rows, call frame information, variables
//
// Every instruction has a line row: a command's instructions have the
// command's line and column (a folded run: its first command's; the other
// commands of the run have no code of their own), the prologue has line 1
// column 1, the code that returns the position just past the program's
// last character, and a stub its command's position without is_stmt, so
// that "break hello.b:3" stops at the first command of line 3 only.
//
// The call frame information says where the CFA and the caller's rbp, rbx
// and r12 are at every instruction, through the prologue, the epilogue pop
// by pop, and the stubs after the ret (remember_state before the epilogue,
// restore_state for the stubs); the tests check it instruction by
// instruction against a simulation of the code. The library's entry frame
// takes every unwinder on from this procedure into the Go code that called
// native.Call.
//
// The parameter vm is a struct vm * (rdi at entry, r12 after the
// prologue); in the body two variables describe the cursor: cell, the
// current cell (memory at rbx), and index, the data pointer's index in the
// tape, computed by its location expression (rbx - (r12 + offset of
// cells), DW_OP_stack_value). In gdb: p *vm, p vm->cells[0]@8, p cell,
// p index.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/native"
	"github.com/elfimage/elfimage/publish"
)

func main() {
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: bf [flags] PROG.b\n\nCompile the Brainfuck program PROG.b to x86-64 or AArch64 machine code and run it on standard input and output.\n\n")
		flag.PrintDefaults()
	}
	gdb := flag.Bool("gdb", false, "publish the image to gdb and lldb (GDB JIT interface)")
	perfMap := flag.Bool("perf-map", false, "announce the code in /tmp/perf-PID.map for perf")
	dump := flag.String("jitdump", "", "announce the code in `DIR`/jit-PID.dump for perf inject --jit")
	out := flag.String("o", "", "write the image to `FILE` instead of running it")
	eof := flag.String("eof", "0", "what , stores at the end of the input: 0, 255 or keep (leave the cell)")
	fold := flag.Bool("fold", true, "fold runs of + and - (and of > and <) on one line, and [-], into one instruction")
	archName := flag.String("arch", runtime.GOARCH, "the machine to compile for: amd64 (x86-64) or arm64 (aarch64); another than the running one's only with -o")
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	opts := Options{Fold: *fold, Arch: archNamed(*archName)}
	if opts.Arch == nil {
		fmt.Fprintf(os.Stderr, "bf: -arch %q: want amd64 (x86-64) or arm64 (aarch64)\n", *archName)
		os.Exit(2)
	}
	switch host := arch.Host(); {
	case opts.Arch.Machine == host.Machine:
		opts.Arch = host // with the running kernel's page size
	case *out == "":
		fmt.Fprintf(os.Stderr, "bf: -arch %s: code for another machine than this one (%v) can only be written to an image (-o)\n", *archName, host.Name)
		os.Exit(2)
	}
	switch *eof {
	case "keep":
		opts.EOF = KeepCell
	default:
		v, err := strconv.Atoi(*eof)
		if err != nil || v < 0 || v > 255 {
			fmt.Fprintf(os.Stderr, "bf: -eof %q: want 0 to 255, or keep\n", *eof)
			os.Exit(2)
		}
		opts.EOF = v
	}
	if err := run(flag.Arg(0), opts, *out, *gdb, *perfMap, *dump); err != nil {
		fmt.Fprintln(os.Stderr, "bf:", err)
		os.Exit(1)
	}
}

// archNamed returns the Arch a -arch value names (a GOARCH or an
// arch.Arch name), or nil.
func archNamed(name string) *arch.Arch {
	switch name {
	case "x86-64", "x86_64":
		return arch.X86_64
	case "aarch64":
		return arch.AArch64
	}
	return arch.ForGOARCH(name)
}

// run compiles the program in path and writes its image to out, or runs
// it on standard input and output.
func run(path string, opts Options, out string, gdb, perfMap bool, dump string) error {
	src, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	mod, err := Compile(path, dir, src, opts)
	if err != nil {
		return err
	}
	if out != "" {
		return elfimage.WriteFile(out, mod, elfimage.LinkOptions{})
	}
	b, err := elfimage.Link(mod, elfimage.LinkOptions{})
	if err != nil {
		return err
	}
	img, err := elfimage.Load(ProcName(path)+".elf", b, nil)
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
		if err := publish.PerfMap(img); err != nil {
			return err
		}
	}
	if dump != "" {
		w, err := publish.Jitdump(dump, img)
		if err != nil {
			return err
		}
		defer w.Close()
	}
	return Execute(img, path, src, 0, 1)
}

// Execute runs the compiled program of img (src is its source, read from
// file) on a fresh tape with , reading file descriptor in and . writing
// out, which must be in blocking mode. A command that fails comes back as
// an error naming its position in the source, "file:line:column: ...".
func Execute(img *elfimage.Image, file string, src []byte, in, out int) error {
	mem, err := native.Alloc(vmSize)
	if err != nil {
		return err
	}
	defer native.Free(mem)
	v := (*vm)(unsafe.Pointer(unsafe.SliceData(mem)))
	v.data = uintptr(unsafe.Pointer(&v.cells[0]))
	v.in, v.out = int32(in), int32(out)

	stack, err := native.NewStack(64 << 10)
	if err != nil {
		return err
	}
	defer stack.Close()
	pc := native.Call(img.Entry(), stack, uintptr(unsafe.Pointer(v)))
	if pc == 0 {
		return nil
	}

	// The code returned the run-time address of the command that
	// failed: the image knows its source position.
	pos, err := img.PositionAt(img.LinkAddr(pc))
	if err != nil {
		return fmt.Errorf("a command at %#x failed: %w", pc, err)
	}
	at := fmt.Sprintf("%s:%d:%d", file, pos.Line, pos.Column)
	errno := syscall.Errno(v.errno)
	switch commandAt(src, pos.Line, pos.Column) {
	case '.':
		if errno == 0 {
			return fmt.Errorf("%s: write: wrote nothing", at)
		}
		return fmt.Errorf("%s: write: %w", at, errno)
	case ',':
		return fmt.Errorf("%s: read: %w", at, errno)
	case '<', '>':
		return fmt.Errorf("%s: %w", at, ErrOffTape)
	}
	return fmt.Errorf("%s: failed, errno %d", at, v.errno)
}

// ErrOffTape is the error of a move of the data pointer off the tape.
var ErrOffTape = errors.New("the data pointer left the tape")

// commandAt returns the byte at line and col (1-based) of src, or 0.
func commandAt(src []byte, line, col int) byte {
	start := 0
	for l := 1; l < line; l++ {
		i := bytes.IndexByte(src[start:], '\n')
		if i < 0 {
			return 0
		}
		start += i + 1
	}
	if col < 1 || start+col-1 >= len(src) {
		return 0
	}
	return src[start+col-1]
}
