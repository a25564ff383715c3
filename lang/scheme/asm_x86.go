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

// x86cond is the encoding (the low nibble of Jcc/SETcc) of each cond.
var x86cond = [...]byte{
	condEq: 0x4, condNe: 0x5, condLt: 0xc, condGe: 0xd, condLe: 0xe, condGt: 0xf,
	condLo: 0x2, condHs: 0x3, condLs: 0x6, condHi: 0x7, condMi: 0x8, condPl: 0x9,
}

// x86 assembles one x86-64 procedure. Jumps to labels always use rel32
// forms.
type x86 struct {
	asm
	// saved are the callee-saved registers the prologue pushes (after
	// rbp, so saved[i] is at CFA-24-8i) and every epilogue restores.
	saved []reg
	// frameAt is the offset of the prologue's sub rsp immediate.
	frameAt int
}

func newX86() *x86 {
	a := &x86{}
	a.reachable = true
	a.patch = func(code []byte, f, target int) {
		binary.LittleEndian.PutUint32(code[f:], uint32(int32(target-(f+4))))
	}
	return a
}

func (a *x86) imm32(v int32) { a.code = binary.LittleEndian.AppendUint32(a.code, uint32(v)) }

func (a *x86) rel32To(l *label) {
	a.imm32(0)
	a.branchTo(l, a.off()-4)
}

// rel32Sym emits a rel32 field resolved by the linker against symbol
// (S + A - P with A = -4: the field ends the instruction).
func (a *x86) rel32Sym(symbol string) {
	a.reloc(elfimage.RelocPC32, symbol, -4)
	a.imm32(0)
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
func (a *x86) modrmReg(regField, rm reg) { a.emit(0xc0 | byte(regField&7)<<3 | byte(rm&7)) }

// modrmMem emits ModRM (+SIB, disp) for [base + disp].
func (a *x86) modrmMem(regField, base reg, disp int32) {
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
func (a *x86) rr(op byte, dst, src reg) {
	a.emit(rex(true, src, 0, dst), op)
	a.modrmReg(src, dst)
}

// rm emits a REX.W op with reg and a memory operand.
func (a *x86) rm(op byte, r, base reg, disp int32) {
	a.emit(rex(true, r, 0, base), op)
	a.modrmMem(r, base, disp)
}

// Instructions. Names follow Intel syntax: destination first.

func (a *x86) push(r reg) {
	if r >= 8 {
		a.emit(0x41)
	}
	a.emit(0x50 + byte(r&7))
}

func (a *x86) pop(r reg) {
	if r >= 8 {
		a.emit(0x41)
	}
	a.emit(0x58 + byte(r&7))
}

func (a *x86) movRR(dst, src reg)                  { a.rr(0x89, dst, src) }
func (a *x86) load(dst, base reg, disp int32)      { a.rm(0x8b, dst, base, disp) }
func (a *x86) store(base reg, disp int32, src reg) { a.rm(0x89, src, base, disp) }
func (a *x86) lea(dst, base reg, disp int32)       { a.rm(0x8d, dst, base, disp) }

// storeByte emits mov byte [base+disp], src (src one of al, cl, dl, bl).
func (a *x86) storeByte(base reg, disp int32, src reg) {
	if base >= 8 {
		a.emit(rex(false, src, 0, base))
	}
	a.emit(0x88)
	a.modrmMem(src, base, disp)
}

// storeImmByte emits mov byte [base+disp], imm8.
func (a *x86) storeImmByte(base reg, disp int32, v byte) {
	if base >= 8 {
		a.emit(rex(false, 0, 0, base))
	}
	a.emit(0xc6)
	a.modrmMem(0, base, disp)
	a.emit(v)
}

// movImm loads a 64-bit constant with the shortest of the three forms.
func (a *x86) movImm(dst reg, v int64) {
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
func (a *x86) leaRIP(dst reg, symbol string) {
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
func (a *x86) aluRR(op byte, dst, src reg) { a.rr(op, dst, src) }

// aluRM emits op dst, [base+disp].
func (a *x86) aluRM(op byte, dst, base reg, disp int32) { a.rm(op+2, dst, base, disp) }

// aluImm emits op r, imm with the /n extension matching op.
func (a *x86) aluImm(op byte, r reg, v int32) {
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
func (a *x86) subRSPImm32() int {
	a.emit(0x48, 0x81, 0xec)
	at := a.off()
	a.imm32(0)
	return at
}

// imulMem emits imul dst, [base+disp].
func (a *x86) imulMem(dst, base reg, disp int32) {
	a.emit(rex(true, dst, 0, base), 0x0f, 0xaf)
	a.modrmMem(dst, base, disp)
}

func (a *x86) unary(ext reg, r reg) { a.emit(rex(true, 0, 0, r), 0xf7); a.modrmReg(ext, r) }
func (a *x86) neg(r reg)            { a.unary(3, r) }
func (a *x86) div(r reg)            { a.unary(6, r) }
func (a *x86) idiv(r reg)           { a.unary(7, r) }
func (a *x86) cqo()                 { a.emit(0x48, 0x99) }
func (a *x86) test(x, y reg)        { a.rr(0x85, x, y) }

// incMem/decMem emit inc/dec qword [base+disp].
func (a *x86) incMem(base reg, disp int32) { a.rm(0xff, 0, base, disp) }

// shlImm emits shl r, imm8.
func (a *x86) shlImm(r reg, n byte) { a.emit(rex(true, 0, 0, r), 0xc1); a.modrmReg(4, r); a.emit(n) }

func (a *x86) decR(r reg) { a.emit(rex(true, 0, 0, r), 0xff); a.modrmReg(1, r) }

// setcc sets al from c and zero-extends it into rax.
func (a *x86) setccRAX(c cond) {
	a.emit(0x0f, 0x90+x86cond[c], 0xc0) // setcc al
	a.emit(0x0f, 0xb6, 0xc0)            // movzx eax, al
}

func (a *x86) jcc(c cond, l *label) { a.emit(0x0f, 0x80+x86cond[c]); a.rel32To(l) }

func (a *x86) jmp(l *label) {
	a.emit(0xe9)
	a.rel32To(l)
	a.reachable = false
}

func (a *x86) jmpSym(symbol string) {
	a.emit(0xe9)
	a.rel32Sym(symbol)
	a.reachable = false
}

func (a *x86) call(symbol string) { a.emit(0xe8); a.rel32Sym(symbol) }

func (a *x86) ret()      { a.emit(0xc3); a.reachable = false }
func (a *x86) leave()    { a.emit(0xc9) }
func (a *x86) syscall()  { a.emit(0x0f, 0x05) }
func (a *x86) ud2()      { a.emit(0x0f, 0x0b); a.reachable = false }
func (a *x86) repMovsb() { a.emit(0xf3, 0xa4) }

// CFI-carrying sequences shared by every procedure.

// pushFrame emits push rbp; mov rbp, rsp; push saved... with exact CFI
// (the CFA is rbp+16 from the mov on, saved[i] at CFA-24-8i).
func (a *x86) pushFrame() {
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
func (a *x86) epilogueLeave() {
	a.addCFI(frame.Insn{Op: frame.OpRememberState})
	for i, r := range a.saved {
		a.load(r, rbp, int32(-8*(i+1)))
		a.addCFI(frame.Insn{Op: frame.OpSameValue, Reg: dwarfReg(r)})
		a.kills = append(a.kills, kill{home: i, from: a.off(), to: -1})
	}
	a.leave()
	a.addCFI(frame.Insn{Op: frame.OpDefCFA, Reg: arch.X86_64_RSP, Offset: 8})
	a.addCFI(frame.Insn{Op: frame.OpSameValue, Reg: arch.X86_64_RBP})
}

// endEpilogue closes the kill ranges of the epilogue just emitted and
// restores the row remembered by epilogueLeave for the code after a
// mid-procedure return (finish drops it when nothing follows).
func (a *x86) endEpilogue() {
	a.closeKills()
	a.addCFI(frame.Insn{Op: frame.OpRestoreState})
}

// epilogueRet emits the epilogue and ret.
func (a *x86) epilogueRet() {
	a.epilogueLeave()
	a.ret()
	a.endEpilogue()
}

// tailJump emits the epilogue and jmp symbol: a proper tail call.
func (a *x86) tailJump(symbol string) {
	a.epilogueLeave()
	a.jmpSym(symbol)
	a.endEpilogue()
}

// The x86-64 backend: the machine methods of the front end.

// x86Homes are the homes of let bindings, by nesting depth.
var x86Homes = [numHomes]reg{rbx, r12, r13, r14}

func (a *x86) base() *asm                  { return &a.asm }
func (a *x86) homeReg(h int) uint8         { return uint8(dwarfReg(x86Homes[h])) }
func (a *x86) argReg(i int) uint8          { return uint8(dwarfReg(argRegs[i])) }
func (a *x86) trap()                       { a.ud2() }
func (a *x86) jump(l *label)               { a.jmp(l) }
func (a *x86) loadImm(v int64)             { a.movImm(rax, v) }
func (a *x86) loadSlot(d int32)            { a.load(rax, rbp, d) }
func (a *x86) loadHome(h int)              { a.movRR(rax, x86Homes[h]) }
func (a *x86) loadArg(i int, d int32)      { a.load(argRegs[i], rbp, d) }
func (a *x86) argImm(i int, v int64)       { a.movImm(argRegs[i], v) }
func (a *x86) argAddr(i int, s string)     { a.leaRIP(argRegs[i], s) }
func (a *x86) argFrameAddr(i int, d int32) { a.lea(argRegs[i], rbp, d) }
func (a *x86) accToArg0()                  { a.movRR(rdi, rax) }
func (a *x86) setArgCount(n int)           { a.movImm(rax, int64(n)) }
func (a *x86) negAcc()                     { a.neg(rax) }

func (a *x86) storeSlot(d int32) int { at := a.off(); a.store(rbp, d, rax); return at }
func (a *x86) storeHome(h int) int   { at := a.off(); a.movRR(x86Homes[h], rax); return at }
func (a *x86) storeArg(i int, d int32) int {
	at := a.off()
	a.store(rbp, d, argRegs[i])
	return at
}

// prologue emits push rbp; mov rbp, rsp; push rbx ...; sub rsp, imm32.
func (a *x86) prologue(nsaved int) {
	a.saved = x86Homes[:nsaved]
	a.pushFrame()
	a.frameAt = a.subRSPImm32()
}

func (a *x86) setFrameSize(size int) {
	binary.LittleEndian.PutUint32(a.code[a.frameAt:], uint32(size))
}

// stackCheck emits cmp rsp, [r15]; jb overflow.
func (a *x86) stackCheck(overflow *label) {
	a.aluRM(aluCmp, rsp, r15, ctlStackLimit)
	a.jcc(condLo, overflow)
}

// argCountBelow emits cmp rax, n; jb l.
func (a *x86) argCountBelow(n int, l *label) {
	a.aluImm(aluCmp, rax, int32(n))
	a.jcc(condLo, l)
}

// jumpIfZero emits test rax, rax; je/jne l.
func (a *x86) jumpIfZero(zero bool, l *label) {
	a.test(rax, rax)
	if zero {
		a.jcc(condEq, l)
	} else {
		a.jcc(condNe, l)
	}
}

func (a *x86) cmpSlotsJump(da, db int32, c cond, l *label) {
	a.load(rax, rbp, da)
	a.aluRM(aluCmp, rax, rbp, db)
	a.jcc(c, l)
}

func (a *x86) cmpSlotsSet(da, db int32, c cond) {
	a.load(rax, rbp, da)
	a.aluRM(aluCmp, rax, rbp, db)
	a.setccRAX(c)
}

func (a *x86) notAcc() {
	a.test(rax, rax)
	a.setccRAX(condEq)
}

func (a *x86) arithSlot(op string, d int32) {
	switch op {
	case "+":
		a.aluRM(aluAdd, rax, rbp, d)
	case "*":
		a.imulMem(rax, rbp, d)
	case "-":
		a.movRR(rcx, rax)
		a.load(rax, rbp, d)
		a.aluRR(aluSub, rax, rcx)
	}
}

// divLoad emits mov rax, [da]; mov rcx, [db]; test rcx, rcx; jne nonzero.
func (a *x86) divLoad(da, db int32, nonzero *label) {
	a.load(rax, rbp, da)
	a.load(rcx, rbp, db)
	a.test(rcx, rcx)
	a.jcc(condNe, nonzero)
}

// divide emits the division of rax by rcx: -1 is handled apart (idiv
// traps on the most negative integer divided by -1), the rest with cqo;
// idiv, modulo correcting the remainder's sign to the divisor's.
func (a *x86) divide(op string) {
	normal, done := a.newLabel(), a.newLabel()
	a.aluImm(aluCmp, rcx, -1)
	a.jcc(condNe, normal)
	if op == "quotient" {
		a.neg(rax)
	} else {
		a.movImm(rax, 0)
	}
	a.jmp(done)
	a.bind(normal)
	a.cqo()
	a.idiv(rcx)
	switch op {
	case "remainder":
		a.movRR(rax, rdx)
	case "modulo":
		a.movRR(rax, rdx)
		a.test(rax, rax)
		a.jcc(condEq, done)
		a.aluRR(aluXor, rdx, rcx)
		a.jcc(condPl, done)
		a.aluRR(aluAdd, rax, rcx)
	}
	a.bind(done)
}
