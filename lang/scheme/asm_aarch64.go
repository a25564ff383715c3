package scheme

import (
	"encoding/binary"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/frame"
)

// xreg is an AArch64 general register X0-X30; 31 is SP or XZR, by
// instruction. Its number is also its DWARF register number (DWARF for
// the Arm 64-bit Architecture, §4.1).
type xreg uint8

const (
	x0  xreg = 0
	x1  xreg = 1
	x2  xreg = 2
	x3  xreg = 3
	x4  xreg = 4
	x5  xreg = 5
	x8  xreg = 8  // the syscall number
	x9  xreg = 9  // the argument count of a define* call
	x16 xreg = 16 // IP0: scratch for the stack check and far slots
	x19 xreg = 19 // x19-x22: the homes of let bindings
	x27 xreg = 27 // the control block, in all generated code
	x28 xreg = 28 // Go's g: never written (native.Call's rule; Go's signal handler reads it)
	x29 xreg = 29 // the frame pointer
	x30 xreg = 30 // the link register, the return-address column
	xsp xreg = 31 // SP, in the instructions that take it
	xzr xreg = 31 // XZR, in the others
)

// a64cond is the AArch64 encoding of each cond (ARM ARM C1.2.4).
var a64cond = [...]uint32{
	condEq: 0, condNe: 1, condLt: 11, condGe: 10, condLe: 13, condGt: 12,
	condLo: 3, condHs: 2, condLs: 9, condHi: 8, condMi: 4, condPl: 5,
}

// a64 assembles one AArch64 procedure: 4-byte instructions, branches to
// labels patched when the label is bound (imm26, imm19 or imm14 fields),
// calls and addresses of symbols relocated by the linker (BL/B with
// RelocAArch64Call26/Jump26, ADRP+ADD with RelocAArch64AdrPage21 and
// RelocAArch64AddLo12). The frame (AAPCS64 §6.4.6, a frame record):
//
//	stp x29, x30, [sp, #-16]!        ; CFA = sp+16; x29 at CFA-16, x30 at CFA-8
//	mov x29, sp                      ; CFA = x29+16
//	sub sp, sp, #hi, lsl #12         ; the frame, N bytes (a multiple of 16),
//	sub sp, sp, #lo                  ;   patched when known
//	stur x19, [x29, #-8] ...         ; the homes used, at CFA-24-8i
//
// so that slots are at the same frame-pointer offsets as on x86-64, and
//
//	ldur x19, [x29, #-8] ...; mov sp, x29; ldp x29, x30, [sp], #16; ret
//
// or b callee for a tail call.
type a64 struct {
	asm
	nsaved  int
	frameAt int // offset of the two sub sp instructions
}

func newA64() *a64 {
	a := &a64{}
	a.reachable = true
	a.patch = patchA64
	return a
}

// patchA64 sets the branch at code[at:] to go to target, by its form:
// B/BL (imm26), B.cond/CBZ/CBNZ (imm19), TBZ/TBNZ (imm14).
func patchA64(code []byte, at, target int) {
	w := binary.LittleEndian.Uint32(code[at:])
	d := uint32(int32(target-at) >> 2)
	switch {
	case w&0x7c000000 == 0x14000000:
		w = w&^0x03ffffff | d&0x03ffffff
	case w&0xff000010 == 0x54000000, w&0x7e000000 == 0x34000000:
		w = w&^(0x7ffff<<5) | (d&0x7ffff)<<5
	case w&0x7e000000 == 0x36000000:
		w = w&^(0x3fff<<5) | (d&0x3fff)<<5
	default:
		panic("scheme: patch of a non-branch")
	}
	binary.LittleEndian.PutUint32(code[at:], w)
}

func (a *a64) ins(w uint32) { a.code = binary.LittleEndian.AppendUint32(a.code, w) }

// Instructions (ARM ARM, "A64 Base Instruction Descriptions"), 64-bit
// forms; names and operand order as the assembler's.

func (a *a64) movRR(d, m xreg)            { a.ins(0xaa0003e0 | uint32(m)<<16 | uint32(d)) } // orr d, xzr, m
func (a *a64) movSP(d, n xreg)            { a.addImm(d, n, 0) }                             // mov to or from sp
func (a *a64) addImm(d, n xreg, v uint32) { a.ins(0x91000000 | v<<10 | uint32(n)<<5 | uint32(d)) }
func (a *a64) subImm(d, n xreg, v uint32) { a.ins(0xd1000000 | v<<10 | uint32(n)<<5 | uint32(d)) }
func (a *a64) cmpImm(n xreg, v uint32)    { a.ins(0xf1000000 | v<<10 | uint32(n)<<5 | 31) }
func (a *a64) cmnImm(n xreg, v uint32)    { a.ins(0xb1000000 | v<<10 | uint32(n)<<5 | 31) }
func (a *a64) add(d, n, m xreg)           { a.ins(0x8b000000 | uint32(m)<<16 | uint32(n)<<5 | uint32(d)) }
func (a *a64) sub(d, n, m xreg)           { a.ins(0xcb000000 | uint32(m)<<16 | uint32(n)<<5 | uint32(d)) }
func (a *a64) cmp(n, m xreg)              { a.ins(0xeb000000 | uint32(m)<<16 | uint32(n)<<5 | 31) }
func (a *a64) eor(d, n, m xreg)           { a.ins(0xca000000 | uint32(m)<<16 | uint32(n)<<5 | uint32(d)) }
func (a *a64) mul(d, n, m xreg)           { a.ins(0x9b007c00 | uint32(m)<<16 | uint32(n)<<5 | uint32(d)) }
func (a *a64) sdiv(d, n, m xreg)          { a.ins(0x9ac00c00 | uint32(m)<<16 | uint32(n)<<5 | uint32(d)) }
func (a *a64) udiv(d, n, m xreg)          { a.ins(0x9ac00800 | uint32(m)<<16 | uint32(n)<<5 | uint32(d)) }
func (a *a64) neg(d, m xreg)              { a.sub(d, xzr, m) }

// msub emits msub d, n, m, s: d = s - n*m.
func (a *a64) msub(d, n, m, s xreg) {
	a.ins(0x9b008000 | uint32(m)<<16 | uint32(s)<<10 | uint32(n)<<5 | uint32(d))
}

// cmpSP emits cmp sp, m (subs xzr, sp, m, uxtx).
func (a *a64) cmpSP(m xreg) { a.ins(0xeb206000 | uint32(m)<<16 | uint32(xsp)<<5 | 31) }

// cset emits cset d, c (csinc d, xzr, xzr, !c).
func (a *a64) cset(d xreg, c cond) { a.ins(0x9a9f07e0 | a64cond[c.not()]<<12 | uint32(d)) }

// ldur/stur: [n, #v] with v in [-256, 256); ldr/str: [n, #v] with v a
// multiple of 8 in [0, 32768).
func (a *a64) ldur(t, n xreg, v int32) {
	a.ins(0xf8400000 | uint32(v&0x1ff)<<12 | uint32(n)<<5 | uint32(t))
}
func (a *a64) stur(t, n xreg, v int32) {
	a.ins(0xf8000000 | uint32(v&0x1ff)<<12 | uint32(n)<<5 | uint32(t))
}
func (a *a64) ldr(t, n xreg, v int32) { a.ins(0xf9400000 | uint32(v/8)<<10 | uint32(n)<<5 | uint32(t)) }
func (a *a64) str(t, n xreg, v int32) { a.ins(0xf9000000 | uint32(v/8)<<10 | uint32(n)<<5 | uint32(t)) }

// ldrPost and strPost emit ldr/str t, [n], #v (post-index).
func (a *a64) ldrPost(t, n xreg, v int32) {
	a.ins(0xf8400400 | uint32(v&0x1ff)<<12 | uint32(n)<<5 | uint32(t))
}
func (a *a64) strPost(t, n xreg, v int32) {
	a.ins(0xf8000400 | uint32(v&0x1ff)<<12 | uint32(n)<<5 | uint32(t))
}

// strbPre emits strb wt, [n, #v]! (pre-index).
func (a *a64) strbPre(t, n xreg, v int32) {
	a.ins(0x38000c00 | uint32(v&0x1ff)<<12 | uint32(n)<<5 | uint32(t))
}

// movImm loads a 64-bit constant: movz or movn, then movk per remaining
// 16-bit chunk.
func (a *a64) movImm(d xreg, v int64) {
	u := uint64(v)
	ones := 0
	for i := range 4 {
		if u>>(16*i)&0xffff == 0xffff {
			ones++
		}
	}
	fill := uint64(0)
	if ones > 2 {
		fill = 0xffff
	}
	var chunks []int
	for i := range 4 {
		if u>>(16*i)&0xffff != fill {
			chunks = append(chunks, i)
		}
	}
	if chunks == nil {
		chunks = []int{0} // 0 or -1
	}
	for k, i := range chunks {
		c := uint32(u>>(16*i)) & 0xffff
		switch {
		case k > 0:
			a.ins(0xf2800000 | uint32(i)<<21 | c<<5 | uint32(d)) // movk
		case fill == 0:
			a.ins(0xd2800000 | uint32(i)<<21 | c<<5 | uint32(d)) // movz
		default:
			a.ins(0x92800000 | uint32(i)<<21 | (c^0xffff)<<5 | uint32(d)) // movn
		}
	}
}

// adr emits adrp d, symbol; add d, d, :lo12:symbol.
func (a *a64) adr(d xreg, symbol string) {
	a.reloc(elfimage.RelocAArch64AdrPage21, symbol, 0)
	a.ins(0x90000000 | uint32(d))
	a.reloc(elfimage.RelocAArch64AddLo12, symbol, 0)
	a.addImm(d, d, 0)
}

func (a *a64) b(l *label) { a.ins(0x14000000); a.branchTo(l, a.off()-4); a.reachable = false }
func (a *a64) bcond(c cond, l *label) {
	a.ins(0x54000000 | a64cond[c])
	a.branchTo(l, a.off()-4)
}
func (a *a64) cbz(t xreg, l *label)  { a.ins(0xb4000000 | uint32(t)); a.branchTo(l, a.off()-4) }
func (a *a64) cbnz(t xreg, l *label) { a.ins(0xb5000000 | uint32(t)); a.branchTo(l, a.off()-4) }

// tbz emits tbz t, #bit, l (bit < 64).
func (a *a64) tbz(t xreg, bit uint32, l *label) {
	a.ins(0x36000000 | bit>>5<<31 | (bit&31)<<19 | uint32(t))
	a.branchTo(l, a.off()-4)
}

func (a *a64) bl(symbol string) { a.reloc(elfimage.RelocAArch64Call26, symbol, 0); a.ins(0x94000000) }
func (a *a64) bSym(symbol string) {
	a.reloc(elfimage.RelocAArch64Jump26, symbol, 0)
	a.ins(0x14000000)
	a.reachable = false
}
func (a *a64) ret() { a.ins(0xd65f03c0); a.reachable = false }
func (a *a64) svc() { a.ins(0xd4000001) }
func (a *a64) udf() { a.ins(0); a.reachable = false } // udf #0: SIGILL

// pushFrame emits stp x29, x30, [sp, #-16]!; mov x29, sp with exact CFI.
func (a *a64) pushFrame() {
	a.ins(0xa9bf7bfd)
	a.addCFI(frame.Insn{Op: frame.OpDefCFAOffset, Reg: arch.AArch64_SP, Offset: 16})
	a.addCFI(frame.Insn{Op: frame.OpOffset, Reg: arch.AArch64_FP, Offset: -16})
	a.addCFI(frame.Insn{Op: frame.OpOffset, Reg: arch.AArch64_LR, Offset: -8})
	a.movSP(x29, xsp)
	a.addCFI(frame.Insn{Op: frame.OpDefCFARegister, Reg: arch.AArch64_FP})
}

// popFrame restores the homes saved (each followed by its same-value
// rule) and pops the frame record with its CFI (CFA = sp, x29 and x30
// same value), remembering the body's row first; the transfer that
// follows must be followed by endEpilogue.
func (a *a64) popFrame() {
	a.addCFI(frame.Insn{Op: frame.OpRememberState})
	for i := range a.nsaved {
		a.ldur(x19+xreg(i), x29, int32(-8*(i+1)))
		a.addCFI(frame.Insn{Op: frame.OpSameValue, Reg: arch.Reg(x19) + arch.Reg(i)})
		a.kills = append(a.kills, kill{home: i, from: a.off(), to: -1})
	}
	a.movSP(xsp, x29)
	a.ins(0xa8c17bfd) // ldp x29, x30, [sp], #16
	a.addCFI(frame.Insn{Op: frame.OpDefCFA, Reg: arch.AArch64_SP, Offset: 0})
	a.addCFI(frame.Insn{Op: frame.OpSameValue, Reg: arch.AArch64_FP})
	a.addCFI(frame.Insn{Op: frame.OpSameValue, Reg: arch.AArch64_LR})
}

func (a *a64) endEpilogue() {
	a.closeKills()
	a.addCFI(frame.Insn{Op: frame.OpRestoreState})
}

// slot emits the access of op (ldur or stur) to [x29, #d]; beyond
// LDUR's reach it computes the address into x16 first. It returns the
// offset of the accessing instruction.
func (a *a64) slot(load bool, t xreg, d int32) int {
	base, v := x29, d
	if d < -256 {
		a.movImm(x16, int64(-d))
		a.sub(x16, x29, x16)
		base, v = x16, 0
	}
	at := a.off()
	if load {
		a.ldur(t, base, v)
	} else {
		a.stur(t, base, v)
	}
	return at
}

// The AArch64 backend: the machine methods of the front end.

func (a *a64) base() *asm            { return &a.asm }
func (a *a64) homeReg(h int) uint8   { return uint8(x19) + uint8(h) }
func (a *a64) argReg(i int) uint8    { return uint8(i) }
func (a *a64) trap()                 { a.udf() }
func (a *a64) jump(l *label)         { a.b(l) }
func (a *a64) call(symbol string)    { a.bl(symbol) }
func (a *a64) loadImm(v int64)       { a.movImm(x0, v) }
func (a *a64) loadSlot(d int32)      { a.slot(true, x0, d) }
func (a *a64) loadHome(h int)        { a.movRR(x0, x19+xreg(h)) }
func (a *a64) storeSlot(d int32) int { return a.slot(false, x0, d) }
func (a *a64) storeHome(h int) int {
	at := a.off()
	a.movRR(x19+xreg(h), x0)
	return at
}
func (a *a64) storeArg(i int, d int32) int { return a.slot(false, xreg(i), d) }
func (a *a64) loadArg(i int, d int32)      { a.slot(true, xreg(i), d) }
func (a *a64) argImm(i int, v int64)       { a.movImm(xreg(i), v) }
func (a *a64) argAddr(i int, s string)     { a.adr(xreg(i), s) }
func (a *a64) accToArg0()                  {} // the accumulator is x0
func (a *a64) setArgCount(n int)           { a.movImm(x9, int64(n)) }
func (a *a64) negAcc()                     { a.neg(x0, x0) }

func (a *a64) argFrameAddr(i int, d int32) {
	if -d < 4096 {
		a.subImm(xreg(i), x29, uint32(-d))
		return
	}
	a.movImm(x16, int64(-d))
	a.sub(xreg(i), x29, x16)
}

func (a *a64) prologue(nsaved int) {
	a.nsaved = nsaved
	a.pushFrame()
	a.frameAt = a.off()
	a.ins(0xd1400000 | uint32(xsp)<<5 | uint32(xsp)) // sub sp, sp, #hi, lsl #12
	a.subImm(xsp, xsp, 0)                            // sub sp, sp, #lo
	for i := range nsaved {
		a.stur(x19+xreg(i), x29, int32(-8*(i+1)))
		a.addCFI(frame.Insn{Op: frame.OpOffset, Reg: arch.Reg(x19) + arch.Reg(i), Offset: int64(-24 - 8*i)})
	}
}

// setFrameSize patches the two sub sp instructions; size excludes the
// homes, as on x86-64, where they are pushed.
func (a *a64) setFrameSize(size int) {
	n := uint32(size + 8*a.nsaved)
	for i, v := range []uint32{n >> 12, n & 0xfff} {
		w := binary.LittleEndian.Uint32(a.code[a.frameAt+4*i:])
		binary.LittleEndian.PutUint32(a.code[a.frameAt+4*i:], w|v<<10)
	}
}

// stackCheck emits ldr x16, [x27]; cmp sp, x16; b.lo overflow.
func (a *a64) stackCheck(overflow *label) {
	a.ldr(x16, x27, ctlStackLimit)
	a.cmpSP(x16)
	a.bcond(condLo, overflow)
}

func (a *a64) argCountBelow(n int, l *label) {
	a.cmpImm(x9, uint32(n))
	a.bcond(condLo, l)
}

func (a *a64) epilogueRet() {
	a.popFrame()
	a.ret()
	a.endEpilogue()
}

func (a *a64) tailJump(symbol string) {
	a.popFrame()
	a.bSym(symbol)
	a.endEpilogue()
}

func (a *a64) jumpIfZero(zero bool, l *label) {
	if zero {
		a.cbz(x0, l)
	} else {
		a.cbnz(x0, l)
	}
}

func (a *a64) cmpSlots(da, db int32) {
	a.slot(true, x0, da)
	a.slot(true, x1, db)
	a.cmp(x0, x1)
}

func (a *a64) cmpSlotsJump(da, db int32, c cond, l *label) { a.cmpSlots(da, db); a.bcond(c, l) }
func (a *a64) cmpSlotsSet(da, db int32, c cond)            { a.cmpSlots(da, db); a.cset(x0, c) }

func (a *a64) notAcc() {
	a.cmpImm(x0, 0)
	a.cset(x0, condEq)
}

func (a *a64) arithSlot(op string, d int32) {
	a.slot(true, x1, d)
	switch op {
	case "+":
		a.add(x0, x1, x0)
	case "*":
		a.mul(x0, x1, x0)
	case "-":
		a.sub(x0, x1, x0)
	}
}

func (a *a64) divLoad(da, db int32, nonzero *label) {
	a.slot(true, x0, da)
	a.slot(true, x1, db)
	a.cbnz(x1, nonzero)
}

// divide divides x0 by x1 (not 0) with sdiv, which wraps the most
// negative integer divided by -1 and does not trap; the remainder is
// x0 - q*x1, and modulo adds the divisor to a nonzero remainder whose sign
// differs from it.
func (a *a64) divide(op string) {
	a.sdiv(x2, x0, x1)
	if op == "quotient" {
		a.movRR(x0, x2)
		return
	}
	a.msub(x0, x2, x1, x0)
	if op == "modulo" {
		done := a.newLabel()
		a.cbz(x0, done)
		a.eor(x3, x0, x1)
		a.tbz(x3, 63, done)
		a.add(x0, x0, x1)
		a.bind(done)
	}
}
