package main

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/expr"
	"github.com/elfimage/elfimage/dwarf/frame"
)

// MaxSource is the largest program compile accepts, in bytes. Every
// command becomes at most 46 bytes of x86-64 code (84 of AArch64, whose
// code is bounded by MaxCodeAArch64 too) and a line row, so this bounds
// what a hostile source can make the compiler allocate.
const MaxSource = 16 << 20

// KeepCell is the Options.EOF value that leaves the cell unchanged when
// , finds the end of the input.
const KeepCell = -1

// Options tune the compiler.
type Options struct {
	// Fold folds each run of + and - (and of > and <) on one line into one
	// instruction, and [-] and [+] (a loop whose body is one run of an odd
	// net count, on one line) into "set the cell to zero".
	Fold bool
	// EOF is the value , stores in the cell at the end of the input: 0 to
	// 255, or KeepCell.
	EOF int
	// Arch is the machine to generate code for: arch.X86_64 or
	// arch.AArch64; nil means the running program's
	// (arch.ForGOARCH(runtime.GOARCH)).
	Arch *arch.Arch
}

// A command is one unit of generated code: a bf command, or a run of
// commands folded into one.
type command struct {
	op byte // + > [ ] . , or z (a folded [-]: set the cell to zero)
	// n is a + run's net amount (wrapped to a byte when emitted) and a >
	// run's net move in cells (negative for <).
	n int
	// line and col are the position of the command, or of the first
	// command of a folded run: 1-based, col in bytes.
	line, col int
}

// A SyntaxError is an unmatched bracket or an oversized program.
type SyntaxError struct {
	File      string
	Line, Col int
	Msg       string
}

// Error returns "file:line:column: message".
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
}

// parse reads src into commands; every byte that is not one of the eight
// commands is a comment. It returns the commands and the position just
// past the last character of the program, where the code that returns is
// placed.
func parse(file string, src []byte, fold bool) (cmds []command, endLine, endCol int, err error) {
	if len(src) > MaxSource {
		return nil, 0, 0, &SyntaxError{file, 1, 1, fmt.Sprintf("program of %d bytes, more than %d", len(src), MaxSource)}
	}
	var open []int // indexes in cmds of the [ not yet matched
	line, col := 1, 0
	endLine, endCol = 1, 1
	for _, b := range src {
		col++
		if b == '\n' {
			line, col = line+1, 0
			continue
		}
		endLine, endCol = line, col+1
		var c command
		switch b {
		case '+', '-', '>', '<':
			c = command{op: '+', n: 1, line: line, col: col}
			if b == '>' || b == '<' {
				c.op = '>'
			}
			if b == '-' || b == '<' {
				c.n = -1
			}
			if last := len(cmds) - 1; fold && last >= 0 && cmds[last].op == c.op && cmds[last].line == line &&
				(c.op == '+' || abs(cmds[last].n+c.n) < TapeLen) {
				cmds[last].n += c.n
				continue
			}
		case '[':
			open = append(open, len(cmds))
			c = command{op: '[', line: line, col: col}
		case ']':
			if len(open) == 0 {
				return nil, 0, 0, &SyntaxError{file, line, col, "] without a matching ["}
			}
			o := open[len(open)-1]
			open = open[:len(open)-1]
			// [-]: a body of one run of an odd count ends at zero
			// whatever the cell held (an odd step is invertible modulo
			// 256); an even one may never get there.
			if fold && o == len(cmds)-2 && cmds[o+1].op == '+' && cmds[o+1].n%2 != 0 &&
				cmds[o].line == line && cmds[o+1].line == line {
				cmds = append(cmds[:o], command{op: 'z', line: cmds[o].line, col: cmds[o].col})
				continue
			}
			c = command{op: ']', line: line, col: col}
		case '.', ',':
			c = command{op: b, line: line, col: col}
		default:
			continue
		}
		cmds = append(cmds, c)
	}
	if len(open) > 0 {
		c := cmds[open[len(open)-1]]
		return nil, 0, 0, &SyntaxError{file, c.line, c.col, "[ without a matching ]"}
	}
	return cmds, endLine, endCol, nil
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// asm is the code being generated, with its line rows.
type asm struct {
	code  []byte
	lines []elfimage.LineRow
}

// at starts a line row at the next instruction.
func (a *asm) at(line, col int, stmt bool) {
	a.lines = append(a.lines, elfimage.LineRow{Offset: uint32(len(a.code)), Line: uint32(line), Column: uint32(col), IsStmt: stmt})
}

func (a *asm) emit(b ...byte) { a.code = append(a.code, b...) }

func (a *asm) imm32(v int32) { a.emit(byte(v), byte(v>>8), byte(v>>16), byte(v>>24)) }

// jump emits a branch with a 32-bit displacement (opcode bytes op...) and
// returns the offset of the displacement, for patch.
func (a *asm) jump(op ...byte) int {
	a.emit(op...)
	a.imm32(0)
	return len(a.code) - 4
}

// patch makes the branch whose displacement is at rel jump to target.
func (a *asm) patch(rel, target int) {
	d := int32(target - (rel + 4))
	copy(a.code[rel:], []byte{byte(d), byte(d >> 8), byte(d >> 16), byte(d >> 24)})
}

// A stub is the out-of-line code that returns a failing command's address.
type stub struct {
	branch    int  // displacement of the branch to the stub
	site      int  // offset of the command's first instruction
	io        bool // a failed system call: store its errno first
	line, col int
}

// Opcodes of the conditional branches with a 32-bit displacement (0F 8x).
const (
	jb  = 0x82
	jae = 0x83
	je  = 0x84
	jne = 0x85
	js  = 0x88
)

// Linux x86-64 system call numbers and the error number the code retries.
const (
	sysRead  = 0
	sysWrite = 1
	eintr    = 4
)

// Compile compiles the bf program src, read from file, into a Module
// with one procedure, named after the file (see ProcName), that runs the
// program on the struct vm its one argument points to and returns 0, or
// the run-time address of the command that failed. See the package
// documentation for the code, its line rows, call frame information and
// variables. opts.Arch chooses the machine (x86-64 or AArch64; nil:
// the running program's). Errors are *SyntaxError (for AArch64 also a
// program that needs more than MaxCodeAArch64 bytes of code), or an error
// naming an architecture without a code generator.
func Compile(file, compDir string, src []byte, opts Options) (*elfimage.Module, error) {
	a := opts.Arch
	if a == nil {
		a = arch.ForGOARCH(runtime.GOARCH)
	}
	if a == nil || (a.Machine != arch.X86_64.Machine && a.Machine != arch.AArch64.Machine) {
		name := runtime.GOARCH
		if a != nil {
			name = a.Name
		}
		return nil, fmt.Errorf("bf: no code generator for %s (x86-64 and aarch64 only)", name)
	}
	cmds, endLine, endCol, err := parse(file, src, opts.Fold)
	if err != nil {
		return nil, err
	}
	var p *elfimage.Proc
	if a.Machine == arch.AArch64.Machine {
		p, err = compileAArch64(file, cmds, endLine, endCol, opts)
	} else {
		p = compileX86_64(cmds, endLine, endCol, opts)
	}
	if err != nil {
		return nil, err
	}
	name := ProcName(file)
	p.Name, p.Line, p.Column = name, 1, 1
	p.Doc = "the Brainfuck program " + file
	p.Result = elfimage.PointerTo(nil)
	p.Params[0].Type = elfimage.PointerTo(vmType())
	return &elfimage.Module{
		Arch: a, File: file, CompDir: compDir, Producer: "elfimage examples/bf",
		Entry: name, Procs: []*elfimage.Proc{p},
	}, nil
}

// compileX86_64 generates the x86-64 code of cmds: the procedure's code,
// line rows, CFI, the parameter's live ranges and the scope of the body,
// for Compile to complete.
func compileX86_64(cmds []command, endLine, endCol int, opts Options) *elfimage.Proc {
	var a asm
	// Prologue: a frame record (perf -g and frame-pointer unwinders walk
	// it), the two callee-saved registers the body uses, and the VM's
	// registers: r12 = vm, rbx = vm->data.
	a.at(1, 1, true)
	a.emit(0x55)                                  // 0x0: push rbp
	a.emit(0x48, 0x89, 0xe5)                      // 0x1: mov rbp, rsp
	a.emit(0x53)                                  // 0x4: push rbx
	a.emit(0x41, 0x54)                            // 0x5: push r12
	a.emit(0x49, 0x89, 0xfc)                      // 0x7: mov r12, rdi
	a.emit(0x49, 0x8b, 0x5c, 0x24, byte(offData)) // 0xa: mov rbx, [r12+data]
	const vmInR12, bodyStart = 0xa, 0xf
	if len(a.code) != bodyStart {
		panic("bf: prologue size")
	}

	var (
		stubs []stub
		loops []int // displacement of each open ['s branch
		heads []int // offset of each open loop's body
	)
	for _, c := range cmds {
		site := len(a.code)
		if (c.op == '+' && byte(c.n) == 0) || (c.op == '>' && c.n == 0) {
			continue // folded to nothing: no code, no row
		}
		a.at(c.line, c.col, true)
		switch c.op {
		case '+':
			a.emit(0x80, 0x03, byte(c.n)) // add byte [rbx], n
		case 'z':
			a.emit(0xc6, 0x03, 0x00) // mov byte [rbx], 0
		case '>':
			// Move, then check the pointer against the end of the tape
			// it moved towards (jae/jb to a stub), then store it back.
			if c.n >= -128 && c.n < 128 {
				a.emit(0x48, 0x83, 0xc3, byte(c.n)) // add rbx, n (imm8)
			} else {
				a.emit(0x48, 0x81, 0xc3) // add rbx, n (imm32)
				a.imm32(int32(c.n))
			}
			bound, cc := offCells+TapeLen, byte(jae)
			if c.n < 0 {
				bound, cc = offCells, jb
			}
			a.emit(0x49, 0x8d, 0x84, 0x24) // lea rax, [r12+bound]
			a.imm32(bound)
			a.emit(0x48, 0x39, 0xc3) // cmp rbx, rax
			stubs = append(stubs, stub{branch: a.jump(0x0f, cc), site: site, line: c.line, col: c.col})
			a.emit(0x49, 0x89, 0x5c, 0x24, byte(offData)) // mov [r12+data], rbx
		case '[':
			a.emit(0x80, 0x3b, 0x00) // cmp byte [rbx], 0
			loops = append(loops, a.jump(0x0f, je))
			heads = append(heads, len(a.code))
		case ']':
			a.emit(0x80, 0x3b, 0x00) // cmp byte [rbx], 0
			a.patch(a.jump(0x0f, jne), heads[len(heads)-1])
			a.patch(loops[len(loops)-1], len(a.code))
			loops, heads = loops[:len(loops)-1], heads[:len(heads)-1]
		case '.', ',':
			// write(vm->out, rbx, 1) or read(vm->in, rbx, 1), again on
			// EINTR; anything but one byte written, or a read error,
			// goes to a stub. A read at the end of the input returns 0
			// and leaves the cell as it was before the call.
			nr, fd := sysWrite, offOut
			if c.op == ',' {
				nr, fd = sysRead, offIn
				if opts.EOF != KeepCell {
					a.emit(0xc6, 0x03, byte(opts.EOF)) // mov byte [rbx], EOF
				}
			}
			retry := len(a.code)
			a.emit(0xb8) // mov eax, nr
			a.imm32(int32(nr))
			a.emit(0x41, 0x8b, 0x7c, 0x24, byte(fd))    // mov edi, [r12+fd]
			a.emit(0x48, 0x89, 0xde)                    // mov rsi, rbx
			a.emit(0xba, 0x01, 0x00, 0x00, 0x00)        // mov edx, 1
			a.emit(0x0f, 0x05)                          // syscall
			a.emit(0x48, 0x83, 0xf8, byte(-eintr&0xff)) // cmp rax, -EINTR
			a.emit(0x74, byte(retry-(len(a.code)+2)))   // je retry
			cc := byte(js)
			if c.op == '.' {
				a.emit(0x48, 0x83, 0xf8, 0x01) // cmp rax, 1
				cc = jne
			} else {
				a.emit(0x48, 0x85, 0xc0) // test rax, rax
			}
			stubs = append(stubs, stub{branch: a.jump(0x0f, cc), site: site, io: true, line: c.line, col: c.col})
		}
	}

	// The program ended: return 0. The epilogue restores what the
	// prologue saved; its row is just past the program's last character.
	a.at(endLine, endCol, true)
	a.emit(0x31, 0xc0) // xor eax, eax
	exit := len(a.code)
	a.emit(0x41, 0x5c) // pop r12
	a.emit(0x5b)       // pop rbx
	a.emit(0x5d)       // pop rbp
	a.emit(0xc3)       // ret

	// Stubs, after the ret, in the body's frame: each returns its
	// command's address in rax (and a failed system call's errno in
	// vm->errno). Their rows are the command's, not statements, so
	// that a breakpoint on the line does not stop in them.
	stubsStart := len(a.code)
	for _, s := range stubs {
		a.at(s.line, s.col, false)
		a.patch(s.branch, len(a.code))
		if s.io {
			a.emit(0x48, 0xf7, 0xd8)                       // neg rax
			a.emit(0x49, 0x89, 0x44, 0x24, byte(offErrno)) // mov [r12+errno], rax
		}
		a.emit(0x48, 0x8d, 0x05) // lea rax, [rip+site]
		a.imm32(int32(s.site - (len(a.code) + 4)))
		a.patch(a.jump(0xe9), exit) // jmp exit
	}
	end := uint32(len(a.code))
	a.lines[1].PrologueEnd = true // the first row after the prologue's

	// Call frame information, exact at every instruction: the CFA is
	// rsp+8 at entry (the standard CIE), rsp+16 after push rbp, rbp+16
	// once rbp is set; rbx and r12 are saved below the frame record; the
	// epilogue undoes it pop by pop. The stubs run in the body's frame,
	// after the ret: the row before the epilogue is remembered and
	// restored for them.
	rsp, rbp, rbx, r12 := arch.X86_64_RSP, arch.X86_64_RBP, arch.X86_64_RBX, arch.X86_64_R12
	cfi := []frame.Insn{
		{PC: 1, Op: frame.OpDefCFAOffset, Reg: rsp, Offset: 16}, // after push rbp
		{PC: 1, Op: frame.OpOffset, Reg: rbp, Offset: -16},
		{PC: 4, Op: frame.OpDefCFARegister, Reg: rbp},      // after mov rbp, rsp
		{PC: 5, Op: frame.OpOffset, Reg: rbx, Offset: -24}, // after push rbx
		{PC: 7, Op: frame.OpOffset, Reg: r12, Offset: -32}, // after push r12
		{PC: uint64(exit + 2), Op: frame.OpRememberState},
		{PC: uint64(exit + 2), Op: frame.OpSameValue, Reg: r12}, // after pop r12
		{PC: uint64(exit + 3), Op: frame.OpSameValue, Reg: rbx}, // after pop rbx
		{PC: uint64(exit + 4), Op: frame.OpDefCFA, Reg: rsp, Offset: 8},
		{PC: uint64(exit + 4), Op: frame.OpSameValue, Reg: rbp}, // after pop rbp: at ret
	}
	// vm is in rdi on entry, then in r12 until the epilogue pops it.
	entry := []elfimage.LiveRange{
		{Start: 0, End: vmInR12, Location: expr.Reg(arch.X86_64_RDI)},
		{Start: vmInR12, End: uint32(exit + 2), Location: expr.Reg(r12)},
	}
	return programProc(a.code, a.lines, cfi, entry, bodyStart, uint32(exit), len(stubs) > 0, uint32(stubsStart), end, rbx, r12)
}

// ProcName returns the procedure name of the program in file: its base
// name without the extension, with every byte that is not a letter, digit
// or underscore replaced by an underscore ("hello.b" gives "hello"), and
// "bf_" in front of a name that would not start with a letter or
// underscore.
func ProcName(file string) string {
	base := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	b := []byte(base)
	for i, c := range b {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	if len(b) == 0 || b[0] >= '0' && b[0] <= '9' {
		b = append([]byte("bf_"), b...)
	}
	return string(b)
}

// programProc is the Proc of a compiled program, for either backend: its
// code, line rows and CFI; vm's live ranges up to the epilogue (entry);
// the body [bodyStart, exit) and, when hasStubs, the stubs [stubsStart,
// end), where data (the DWARF register of the data pointer) and vm (that
// of the VM pointer) hold the program's registers. The stubs run in the
// body's frame: a DW_CFA_restore_state at stubsStart brings back the row
// the CFI remembered before the epilogue. Its variables: the parameter
// vm, cell (the current cell, in memory at data) and index (the data
// pointer's index in cells, computed: data - (vm + offsetof(struct vm,
// cells))).
func programProc(code []byte, lines []elfimage.LineRow, cfi []frame.Insn, entry []elfimage.LiveRange,
	bodyStart, exit uint32, hasStubs bool, stubsStart, end uint32, data, vm arch.Reg) *elfimage.Proc {
	vmLive := entry
	body := []elfimage.CodeRange{{Start: bodyStart, End: exit}}
	if hasStubs {
		cfi = append(cfi, frame.Insn{PC: uint64(stubsStart), Op: frame.OpRestoreState})
		vmLive = append(vmLive, elfimage.LiveRange{Start: stubsStart, End: end, Location: expr.Reg(vm)})
		body = append(body, elfimage.CodeRange{Start: stubsStart, End: end})
	}
	return &elfimage.Proc{
		Code:   code,
		Lines:  lines,
		CFI:    cfi,
		Params: []elfimage.Var{{Name: "vm", Live: vmLive}},
		Scopes: []*elfimage.Scope{{Ranges: body, Vars: []elfimage.Var{
			{Name: "cell", Type: elfimage.UintType(1), Location: expr.Breg(data, 0)},
			{Name: "index", Type: elfimage.IntType(8),
				Location: expr.Breg(data, 0).Breg(vm, int64(offCells)).Op(dwarf.DW_OP_minus).StackValue()},
		}}},
	}
}
