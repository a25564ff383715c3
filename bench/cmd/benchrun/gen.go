package main

import (
	"fmt"
	"strings"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/lang/scheme"
)

// schemeSource is n procedures shaped like query_bench_test.go's
// benchImage (an optional argument, a docstring, nested lets), each
// docstring padded to at least docLen bytes with text unique to the
// procedure (the string tables would share identical docstrings).
func schemeSource(n, docLen int) string {
	var src strings.Builder
	for i := range n {
		doc := fmt.Sprintf("Procedure %d.", i)
		if pad := docLen - len(doc); pad > 0 {
			unit := fmt.Sprintf(" p%d", i)
			doc += strings.Repeat(unit, pad/len(unit)+1)[:pad]
		}
		fmt.Fprintf(&src, "(define* (p%d a #:optional (b %d))\n  %q\n  (let ((c (+ a b)))\n    (let* ((d (* c 2)) (e (- d a)))\n      (+ c d e))))\n", i, i, doc)
	}
	src.WriteString("(define (main) (p0 1))\n")
	return src.String()
}

// schemeImage compiles schemeSource(n, docLen) and links it.
func schemeImage(n, docLen int) ([]byte, error) {
	m, err := scheme.Compile("bench.scm", []byte(schemeSource(n, docLen)))
	if err != nil {
		return nil, err
	}
	return elfimage.Link(m, elfimage.LinkOptions{})
}

// The procedure body of the Link rows, with the x86-64 encoding of each
// instruction and its GNU assembler spelling:
//
//	0  55                 push %rbp
//	1  48 89 e5           mov %rsp, %rbp
//	4  48 8d 04 37        lea (%rdi,%rsi), %rax
//	8  48 0f af c7        imul %rdi, %rax
//	12 48 05 imm32        add $imm32, %rax
//	18 5d                 pop %rbp
//	19 c3                 ret
var linkBody = []byte{0x55, 0x48, 0x89, 0xe5, 0x48, 0x8d, 0x04, 0x37, 0x48, 0x0f, 0xaf, 0xc7, 0x48, 0x05, 0, 0, 0, 0, 0x5d, 0xc3}

// linkModule is n procedures of linkBody, each with five line rows
// (columns included), the CFI of a frame-pointer frame, two parameters
// with register locations and a docstring: what a compiler hands Link.
// Procedure i is declared at line 6i+1 of bench.src.
func linkModule(n int) *elfimage.Module {
	m := &elfimage.Module{File: "bench.src", CompDir: "/tmp/elfimage-bench", Producer: "benchrun", Language: dwarf.DW_LANG_C11}
	rdi := []byte{byte(dwarf.DW_OP_reg0) + byte(arch.X86_64_RDI)}
	rsi := []byte{byte(dwarf.DW_OP_reg0) + byte(arch.X86_64_RSI)}
	cfi := []frame.Insn{
		{PC: 1, Op: frame.OpDefCFAOffset, Offset: 16},
		{PC: 1, Op: frame.OpOffset, Reg: arch.X86_64_RBP, Offset: -16},
		{PC: 4, Op: frame.OpDefCFARegister, Reg: arch.X86_64_RBP},
		{PC: 19, Op: frame.OpDefCFA, Reg: arch.X86_64_RSP, Offset: 8},
	}
	m.Procs = make([]*elfimage.Proc, n)
	for i := range n {
		code := make([]byte, len(linkBody))
		copy(code, linkBody)
		k := uint32(1000 + i)
		code[14], code[15], code[16], code[17] = byte(k), byte(k>>8), byte(k>>16), byte(k>>24)
		l := uint32(6*i + 1)
		m.Procs[i] = &elfimage.Proc{
			Name: fmt.Sprintf("p%d", i), Code: code, Line: int(l), Column: 1,
			Lines: []elfimage.LineRow{
				{Offset: 0, Line: l, Column: 1, IsStmt: true},
				{Offset: 4, Line: l + 1, Column: 3, IsStmt: true, PrologueEnd: true},
				{Offset: 8, Line: l + 2, Column: 3, IsStmt: true},
				{Offset: 12, Line: l + 3, Column: 3, IsStmt: true},
				{Offset: 18, Line: l + 4, Column: 1, IsStmt: true},
			},
			CFI: cfi,
			Params: []elfimage.Var{
				{Name: "a", Location: rdi, Line: int(l), Column: 10},
				{Name: "b", Location: rsi, Line: int(l), Column: 17},
			},
		}
	}
	return m
}

// asmSource is linkModule(n) as GNU assembler source: the same
// instructions, symbols, .loc rows and .cfi_* directives, for
// `as --gdwarf-5` and `llvm-mc -filetype=obj -dwarf-version=5`. The
// assembler writes a line table and CFI but no DIE per procedure; Link
// writes subprograms and parameters too.
func asmSource(n int) string {
	var b strings.Builder
	b.Grow(n * 400)
	// One .file with a directory: GNU as then makes it entry 0 and 1 of a
	// DWARF 5 line table; llvm-mc refuses .loc 1 after an explicit .file 0
	// naming the same file.
	b.WriteString("\t.file 1 \"/tmp/elfimage-bench\" \"bench.src\"\n\t.text\n")
	for i := range n {
		l := 6*i + 1
		fmt.Fprintf(&b, "\t.globl p%[1]d\n\t.type p%[1]d, @function\n\t.p2align 4\np%[1]d:\n\t.cfi_startproc\n", i)
		fmt.Fprintf(&b, "\t.loc 1 %d 1\n\tpushq %%rbp\n\t.cfi_def_cfa_offset 16\n\t.cfi_offset %%rbp, -16\n\tmovq %%rsp, %%rbp\n\t.cfi_def_cfa_register %%rbp\n", l)
		fmt.Fprintf(&b, "\t.loc 1 %d 3 prologue_end\n\tleaq (%%rdi,%%rsi), %%rax\n", l+1)
		fmt.Fprintf(&b, "\t.loc 1 %d 3\n\timulq %%rdi, %%rax\n", l+2)
		fmt.Fprintf(&b, "\t.loc 1 %d 3\n\taddq $%d, %%rax\n", l+3, 1000+i)
		fmt.Fprintf(&b, "\t.loc 1 %d 1\n\tpopq %%rbp\n\t.cfi_def_cfa %%rsp, 8\n\tret\n\t.cfi_endproc\n\t.size p%d, .-p%d\n", l+4, i, i)
	}
	b.WriteString("\t.section .note.GNU-stack,\"\",@progbits\n")
	return b.String()
}
