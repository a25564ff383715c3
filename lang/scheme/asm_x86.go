package scheme

import (
	"encoding/binary"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/frame"
)

// reg is an x86-64 general register in instruction-encoding order (not
// DWARF order; see dwarfReg).
type reg uint8

const (
	rax reg = iota
	rcx
	rdx
	rbx
	rsp
	rbp
	rsi
	rdi
	r8
	r9
	r10
	r11
	r12
	r13
	r14
	r15
)

// dwarfReg returns the DWARF register number of r (psABI figure 3.36).
func dwarfReg(r reg) arch.Reg {
	switch r {
	case rax:
		return arch.X86_64_RAX
	case rcx:
		return arch.X86_64_RCX
	case rdx:
		return arch.X86_64_RDX
	case rbx:
		return arch.X86_64_RBX
	case rsp:
		return arch.X86_64_RSP
	case rbp:
		return arch.X86_64_RBP
	case rsi:
		return arch.X86_64_RSI
	case rdi:
		return arch.X86_64_RDI
	}
	return arch.Reg(r) // r8-r15 have their own numbers
}

// argRegs are the SysV argument registers in order.
var argRegs = [6]reg{rdi, rsi, rdx, rcx, r8, r9}

// cond is an x86 condition code (the low nibble of Jcc/SETcc).
type cond uint8

const (
	condB  cond = 0x2
	condAE cond = 0x3
	condE  cond = 0x4
	condNE cond = 0x5
	condBE cond = 0x6
	condA  cond = 0x7
	condS  cond = 0x8
	condNS cond = 0x9
	condL  cond = 0xc
	condGE cond = 0xd
	condLE cond = 0xe
	condG  cond = 0xf
)

func (c cond) not() cond { return c ^ 1 }

// label is a code position inside one procedure, bound once.
type label struct {
	off   int // -1 until bound
	used  bool
	fixup []int // offsets of rel32 fields that jump here
}

// asm assembles one procedure: machine code with its relocations, CFI
// and line rows. Jumps to labels always use rel32 forms.
type asm struct {
	code   []byte
	relocs []elfimage.Reloc
	cfi    []frame.Insn
	lines  []elfimage.LineRow
	labels []*label
	// reachable is false after an unconditional transfer (jmp, ret, ud2)
	// until a used label is bound.
	reachable bool
	// saved are the callee-saved registers the prologue pushes (after
	// rbp, so saved[i] is at CFA-24-8i) and every epilogue restores.
	saved []reg
	// kills are the code ranges in epilogues where a saved register
	// already holds the caller's value again.
	kills []kill
}

// kill says that from code offset from (the end of the instruction that
// restored reg) up to to (the end of the epilogue's ret or jmp), reg
// holds the caller's value, not the procedure's.
type kill struct {
	reg      reg
	from, to int
}

func newAsm() *asm { return &asm{reachable: true} }

func (a *asm) off() int { return len(a.code) }

func (a *asm) emit(b ...byte) { a.code = append(a.code, b...) }

func (a *asm) imm32(v int32) { a.code = binary.LittleEndian.AppendUint32(a.code, uint32(v)) }

func (a *asm) newLabel() *label {
	l := &label{off: -1}
	a.labels = append(a.labels, l)
	return l
}

// bind places l at the current offset and patches the jumps to it.
func (a *asm) bind(l *label) {
	l.off = a.off()
	for _, f := range l.fixup {
		binary.LittleEndian.PutUint32(a.code[f:], uint32(int32(l.off-(f+4))))
	}
	l.fixup = nil
	if l.used {
		a.reachable = true
	}
}

func (a *asm) rel32To(l *label) {
	l.used = true
	if l.off >= 0 {
		a.imm32(int32(l.off - (a.off() + 4)))
		return
	}
	l.fixup = append(l.fixup, a.off())
	a.imm32(0)
}

// rel32Sym emits a rel32 field resolved by the linker against symbol
// (S + A - P with A = -4: the field ends the instruction).
func (a *asm) rel32Sym(symbol string) {
	a.relocs = append(a.relocs, elfimage.Reloc{Offset: uint32(a.off()), Type: elfimage.RelocPC32, Symbol: symbol, Addend: -4})
	a.imm32(0)
}

// addCFI records a call frame instruction taking effect at the current
// offset.
func (a *asm) addCFI(in frame.Insn) {
	in.PC = uint64(a.off())
	a.cfi = append(a.cfi, in)
}

// row records a line-table row at the current offset. When the previous
// row is at the same offset it is kept (the outer expression's position
// wins, the code starts there) and only gains IsStmt; a row repeating the
// previous position is dropped.
func (a *asm) row(p srcPos, stmt bool) {
	r := elfimage.LineRow{Offset: uint32(a.off()), Line: uint32(p.Line), Column: uint32(p.Column), IsStmt: stmt}
	if n := len(a.lines); n > 0 {
		last := &a.lines[n-1]
		if last.Offset == r.Offset {
			last.IsStmt = last.IsStmt || stmt
			return
		}
		if last.Line == r.Line && last.Column == r.Column && (last.IsStmt || !stmt) {
			return
		}
	}
	a.lines = append(a.lines, r)
}

// Encoding helpers.

func rex(w bool, r, x, b reg) byte {
	v := byte(0x40)
	if w {
		v |= 8
	}
	if r >= 8 {
		v |= 4
	}
	if x >= 8 {
		v |= 2
	}
	if b >= 8 {
		v |= 1
	}
	return v
}

// modrmReg emits ModRM for a register-direct operand.
func (a *asm) modrmReg(regField, rm reg) { a.emit(0xc0 | byte(regField&7)<<3 | byte(rm&7)) }

// modrmMem emits ModRM (+SIB, disp) for [base + disp].
func (a *asm) modrmMem(regField, base reg, disp int32) {
	var mod byte
	switch {
	case disp == 0 && base&7 != 5:
		mod = 0
	case disp >= -128 && disp <= 127:
		mod = 1
	default:
		mod = 2
	}
	a.emit(mod<<6 | byte(regField&7)<<3 | byte(base&7))
	if base&7 == 4 {
		a.emit(0x24) // SIB: base only
	}
	switch mod {
	case 1:
		a.emit(byte(int8(disp)))
	case 2:
		a.imm32(disp)
	}
}

// rr emits a REX.W op with register operands: op r/m=dst, reg=src.
func (a *asm) rr(op byte, dst, src reg) {
	a.emit(rex(true, src, 0, dst), op)
	a.modrmReg(src, dst)
}

// rm emits a REX.W op with reg and a memory operand.
func (a *asm) rm(op byte, r, base reg, disp int32) {
	a.emit(rex(true, r, 0, base), op)
	a.modrmMem(r, base, disp)
}

// Instructions. Names follow Intel syntax: destination first.

func (a *asm) push(r reg) {
	if r >= 8 {
		a.emit(0x41)
	}
	a.emit(0x50 + byte(r&7))
}

func (a *asm) pop(r reg) {
	if r >= 8 {
		a.emit(0x41)
	}
	a.emit(0x58 + byte(r&7))
}

func (a *asm) movRR(dst, src reg)                  { a.rr(0x89, dst, src) }
func (a *asm) load(dst, base reg, disp int32)      { a.rm(0x8b, dst, base, disp) }
func (a *asm) store(base reg, disp int32, src reg) { a.rm(0x89, src, base, disp) }
func (a *asm) lea(dst, base reg, disp int32)       { a.rm(0x8d, dst, base, disp) }

// storeByte emits mov byte [base+disp], src (src one of al, cl, dl, bl).
func (a *asm) storeByte(base reg, disp int32, src reg) {
	if base >= 8 {
		a.emit(rex(false, src, 0, base))
	}
	a.emit(0x88)
	a.modrmMem(src, base, disp)
}

// storeImmByte emits mov byte [base+disp], imm8.
func (a *asm) storeImmByte(base reg, disp int32, v byte) {
	if base >= 8 {
		a.emit(rex(false, 0, 0, base))
	}
	a.emit(0xc6)
	a.modrmMem(0, base, disp)
	a.emit(v)
}

// movImm loads a 64-bit constant with the shortest of the three forms.
func (a *asm) movImm(dst reg, v int64) {
	switch {
	case v == 0:
		// xor r32, r32 (zero-extends)
		if dst >= 8 {
			a.emit(rex(false, dst, 0, dst))
		}
		a.emit(0x31)
		a.modrmReg(dst, dst)
	case v > 0 && v <= 0xffffffff:
		if dst >= 8 {
			a.emit(0x41)
		}
		a.emit(0xb8 + byte(dst&7))
		a.imm32(int32(uint32(v)))
	case v >= -1<<31 && v < 1<<31:
		a.emit(rex(true, 0, 0, dst), 0xc7)
		a.modrmReg(0, dst)
		a.imm32(int32(v))
	default:
		a.emit(rex(true, 0, 0, dst), 0xb8+byte(dst&7))
		a.code = binary.LittleEndian.AppendUint64(a.code, uint64(v))
	}
}

// leaRIP emits lea dst, [rip + symbol] resolved by the linker.
func (a *asm) leaRIP(dst reg, symbol string) {
	a.emit(rex(true, dst, 0, 0), 0x8d, byte(dst&7)<<3|5)
	a.rel32Sym(symbol)
}

// ALU ops in the "op r/m, reg" form; the "op reg, r/m" form is op+2.
const (
	aluAdd byte = 0x01
	aluOr  byte = 0x09
	aluAnd byte = 0x21
	aluSub byte = 0x29
	aluXor byte = 0x31
	aluCmp byte = 0x39
)

// aluRR emits op dst, src.
func (a *asm) aluRR(op byte, dst, src reg) { a.rr(op, dst, src) }

// aluRM emits op dst, [base+disp].
func (a *asm) aluRM(op byte, dst, base reg, disp int32) { a.rm(op+2, dst, base, disp) }

// aluImm emits op r, imm with the /n extension matching op.
func (a *asm) aluImm(op byte, r reg, v int32) {
	ext := reg(op >> 3) // 0x01→0 add, 0x09→1 or, 0x21→4 and, 0x29→5 sub, 0x31→6 xor, 0x39→7 cmp
	if v >= -128 && v <= 127 {
		a.emit(rex(true, 0, 0, r), 0x83)
		a.modrmReg(ext, r)
		a.emit(byte(int8(v)))
		return
	}
	a.emit(rex(true, 0, 0, r), 0x81)
	a.modrmReg(ext, r)
	a.imm32(v)
}

// subRSPImm32 emits sub rsp, imm32 always in the 4-byte form (patched
// once the frame size is known) and returns the immediate's offset.
func (a *asm) subRSPImm32() int {
	a.emit(0x48, 0x81, 0xec)
	at := a.off()
	a.imm32(0)
	return at
}

// imulMem emits imul dst, [base+disp].
func (a *asm) imulMem(dst, base reg, disp int32) {
	a.emit(rex(true, dst, 0, base), 0x0f, 0xaf)
	a.modrmMem(dst, base, disp)
}

func (a *asm) unary(ext reg, r reg) { a.emit(rex(true, 0, 0, r), 0xf7); a.modrmReg(ext, r) }
func (a *asm) neg(r reg)            { a.unary(3, r) }
func (a *asm) div(r reg)            { a.unary(6, r) }
func (a *asm) idiv(r reg)           { a.unary(7, r) }
func (a *asm) cqo()                 { a.emit(0x48, 0x99) }
func (a *asm) test(x, y reg)        { a.rr(0x85, x, y) }

// incMem/decMem emit inc/dec qword [base+disp].
func (a *asm) incMem(base reg, disp int32) { a.rm(0xff, 0, base, disp) }

// shlImm emits shl r, imm8.
func (a *asm) shlImm(r reg, n byte) { a.emit(rex(true, 0, 0, r), 0xc1); a.modrmReg(4, r); a.emit(n) }

func (a *asm) decR(r reg) { a.emit(rex(true, 0, 0, r), 0xff); a.modrmReg(1, r) }

// setcc sets al from c and zero-extends it into rax.
func (a *asm) setccRAX(c cond) {
	a.emit(0x0f, 0x90+byte(c), 0xc0) // setcc al
	a.emit(0x0f, 0xb6, 0xc0)         // movzx eax, al
}

func (a *asm) jcc(c cond, l *label) { a.emit(0x0f, 0x80+byte(c)); a.rel32To(l) }

func (a *asm) jmp(l *label) {
	a.emit(0xe9)
	a.rel32To(l)
	a.reachable = false
}

func (a *asm) jmpSym(symbol string) {
	a.emit(0xe9)
	a.rel32Sym(symbol)
	a.reachable = false
}

func (a *asm) call(symbol string) { a.emit(0xe8); a.rel32Sym(symbol) }

func (a *asm) ret()      { a.emit(0xc3); a.reachable = false }
func (a *asm) leave()    { a.emit(0xc9) }
func (a *asm) syscall()  { a.emit(0x0f, 0x05) }
func (a *asm) ud2()      { a.emit(0x0f, 0x0b); a.reachable = false }
func (a *asm) repMovsb() { a.emit(0xf3, 0xa4) }

// CFI-carrying sequences shared by every procedure.

// prologue emits push rbp; mov rbp, rsp; push saved... with exact CFI
// (the CFA is rbp+16 from the mov on, saved[i] at CFA-24-8i).
func (a *asm) prologue() {
	a.push(rbp)
	a.addCFI(frame.Insn{Op: frame.OpDefCFAOffset, Reg: arch.X86_64_RSP, Offset: 16})
	a.addCFI(frame.Insn{Op: frame.OpOffset, Reg: arch.X86_64_RBP, Offset: -16})
	a.movRR(rbp, rsp)
	a.addCFI(frame.Insn{Op: frame.OpDefCFARegister, Reg: arch.X86_64_RBP})
	for i, r := range a.saved {
		a.push(r)
		a.addCFI(frame.Insn{Op: frame.OpOffset, Reg: dwarfReg(r), Offset: int64(-24 - 8*i)})
	}
}

// epilogueLeave restores the saved registers (mov r, [rbp-8(i+1)], each
// followed by its same-value rule) and emits leave with its CFI (CFA =
// rsp+8, rbp same value), remembering the body's row first; the transfer
// that follows must be followed by endEpilogue.
func (a *asm) epilogueLeave() {
	a.addCFI(frame.Insn{Op: frame.OpRememberState})
	for i, r := range a.saved {
		a.load(r, rbp, int32(-8*(i+1)))
		a.addCFI(frame.Insn{Op: frame.OpSameValue, Reg: dwarfReg(r)})
		a.kills = append(a.kills, kill{reg: r, from: a.off(), to: -1})
	}
	a.leave()
	a.addCFI(frame.Insn{Op: frame.OpDefCFA, Reg: arch.X86_64_RSP, Offset: 8})
	a.addCFI(frame.Insn{Op: frame.OpSameValue, Reg: arch.X86_64_RBP})
}

// endEpilogue closes the kill ranges of the epilogue just emitted and
// restores the row remembered by epilogueLeave for the code after a
// mid-procedure return (finish drops it when nothing follows).
func (a *asm) endEpilogue() {
	for i := len(a.kills) - 1; i >= 0 && a.kills[i].to < 0; i-- {
		a.kills[i].to = a.off()
	}
	a.addCFI(frame.Insn{Op: frame.OpRestoreState})
}

// epilogueRet emits the epilogue and ret.
func (a *asm) epilogueRet() {
	a.epilogueLeave()
	a.ret()
	a.endEpilogue()
}

// tailJump emits the epilogue and jmp symbol: a proper tail call.
func (a *asm) tailJump(symbol string) {
	a.epilogueLeave()
	a.jmpSym(symbol)
	a.endEpilogue()
}

// finish checks labels and drops CFI that would take effect at or after
// the end of the code. It returns false if a used label was never bound.
func (a *asm) finish() bool {
	for _, l := range a.labels {
		if l.used && l.off < 0 {
			return false
		}
	}
	n := len(a.cfi)
	for n > 0 && a.cfi[n-1].PC >= uint64(len(a.code)) {
		n--
	}
	a.cfi = a.cfi[:n]
	return true
}
