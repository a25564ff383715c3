package scheme

import (
	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/frame"
)

// This file holds what the two backends (asm_x86.go, asm_arm64.go) share:
// the code buffer of one procedure with its relocations, call frame
// information and line rows, labels, and the abstract condition codes.
// Instruction selection is the backend's: the front end (compile.go) asks
// a [machine] for each step of an accumulator machine.

// cond is an abstract condition code, in complementary pairs (c^1 is the
// negation of c); each backend maps it to its encoding.
type cond uint8

const (
	condEq cond = iota // equal
	condNe             // not equal
	condLt             // signed less than
	condGe             // signed greater or equal
	condLe             // signed less or equal
	condGt             // signed greater than
	condLo             // unsigned below
	condHs             // unsigned above or same
	condLs             // unsigned below or same
	condHi             // unsigned above
	condMi             // negative
	condPl             // positive or zero
)

func (c cond) not() cond { return c ^ 1 }

// label is a code position inside one procedure, bound once.
type label struct {
	off   int // -1 until bound
	used  bool
	fixup []int // offsets of the branches to patch when bound
}

// asm assembles one procedure: machine code with its relocations, CFI
// and line rows. patch writes a branch at offset at to the label at
// target (the backend's encoding).
type asm struct {
	code   []byte
	relocs []elfimage.Reloc
	cfi    []frame.Insn
	lines  []elfimage.LineRow
	labels []*label
	// reachable is false after an unconditional transfer (jump, return,
	// trap) until a used label is bound.
	reachable bool
	// kills are the code ranges in epilogues where a saved register
	// already holds the caller's value again.
	kills []kill
	patch func(code []byte, at, target int)
}

// kill says that from code offset from (the end of the instruction that
// restored home register home) up to to (the end of the epilogue's return
// or jump), it holds the caller's value, not the procedure's.
type kill struct {
	home     int
	from, to int
}

func (a *asm) off() int { return len(a.code) }

func (a *asm) emit(b ...byte) { a.code = append(a.code, b...) }

func (a *asm) newLabel() *label {
	l := &label{off: -1}
	a.labels = append(a.labels, l)
	return l
}

// bind places l at the current offset and patches the branches to it.
func (a *asm) bind(l *label) {
	l.off = a.off()
	for _, f := range l.fixup {
		a.patch(a.code, f, l.off)
	}
	l.fixup = nil
	if l.used {
		a.reachable = true
	}
}

// branchTo records that the branch already emitted at offset at goes to
// l: patched now if l is bound, else when it is.
func (a *asm) branchTo(l *label, at int) {
	l.used = true
	if l.off >= 0 {
		a.patch(a.code, at, l.off)
		return
	}
	l.fixup = append(l.fixup, at)
}

// reloc records a link-time relocation of the field at the current
// offset.
func (a *asm) reloc(t elfimage.RelocType, symbol string, addend int64) {
	a.relocs = append(a.relocs, elfimage.Reloc{Offset: uint32(a.off()), Type: t, Symbol: symbol, Addend: addend})
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

// closeKills closes the kill ranges of the epilogue just emitted at the
// current offset (the end of its return or jump).
func (a *asm) closeKills() {
	for i := len(a.kills) - 1; i >= 0 && a.kills[i].to < 0; i-- {
		a.kills[i].to = a.off()
	}
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

// numHomes is the number of callee-saved registers that hold the first
// binding of a let or let*, by nesting depth (deeper bindings live in
// frame slots): rbx, r12, r13, r14 on x86-64, x19-x22 on AArch64.
const numHomes = 4

// machine is a backend: the instruction selection of the front end's
// accumulator machine for one procedure. The accumulator is the return
// value register (rax, x0); slots are frame-pointer relative
// displacements d (the frame base, the CFA, is the frame pointer + 16 on
// both); homes are the numHomes callee-saved registers, by index; args
// are the argument registers, by index. Methods that store a value into
// a variable's home return the offset of the storing instruction (the
// defMap's key).
type machine interface {
	base() *asm
	// homeReg and argReg are the DWARF register numbers of home h and
	// argument register i.
	homeReg(h int) uint8
	argReg(i int) uint8

	// prologue pushes the frame record, saves homes [0, nsaved) and
	// reserves the frame, whose size setFrameSize patches later.
	prologue(nsaved int)
	setFrameSize(size int)
	// stackCheck jumps to overflow when the stack pointer is below the
	// control block's limit.
	stackCheck(overflow *label)
	// argCountBelow jumps to l when the passed argument count (of a
	// define* call) is below n.
	argCountBelow(n int, l *label)
	epilogueRet()
	tailJump(symbol string)
	call(symbol string)
	jump(l *label)
	trap()

	loadImm(v int64)
	loadSlot(d int32)
	loadHome(h int)
	storeSlot(d int32) int
	storeHome(h int) int
	storeArg(i int, d int32) int
	loadArg(i int, d int32)
	// argImm, argAddr and argFrameAddr set argument register i to v,
	// to the address of symbol, to the address of slot d; accToArg0
	// moves the accumulator into the first argument register.
	argImm(i int, v int64)
	argAddr(i int, symbol string)
	argFrameAddr(i int, d int32)
	accToArg0()
	setArgCount(n int)

	// jumpIfZero jumps to l when the accumulator is zero (nonzero when
	// !zero).
	jumpIfZero(zero bool, l *label)
	// cmpSlotsJump jumps to l when [da] c [db]; cmpSlotsSet sets the
	// accumulator to 1 if [da] c [db], else 0.
	cmpSlotsJump(da, db int32, c cond, l *label)
	cmpSlotsSet(da, db int32, c cond)
	// notAcc is acc = acc == 0; negAcc is acc = -acc; arithSlot is
	// acc = [d] op acc for op "+", "*" or "-".
	notAcc()
	negAcc()
	arithSlot(op string, d int32)
	// divLoad loads dividend [da] and divisor [db] and jumps to nonzero
	// unless the divisor is 0; divide then computes op ("quotient",
	// "remainder", "modulo") into the accumulator.
	divLoad(da, db int32, nonzero *label)
	divide(op string)
}

// abortLosesHomes adds the CFI of an abort's first instruction in %start's
// frame (%capture's abort path, after the stack switch): the home
// registers (rbx, r12-r14; x19-x22) are undefined (DW_CFA_undefined,
// DWARF 5 section 6.4.2.3). The procedures between %start and %capture
// saved their callers' homes in their frames, which the abort discards
// without restoring them, and %start does not save them: their values
// in %start's caller are lost, and a same-value rule would show a
// debugger the discarded frames' values instead. (The library's entry
// routine and native.Call's trampoline rely on no register but the
// stack pointer: the homes clobbered is allowed, only the CFI must not
// claim them.)
func abortLosesHomes(m machine) {
	for h := range numHomes {
		m.base().addCFI(frame.Insn{Op: frame.OpUndefined, Reg: arch.Reg(m.homeReg(h))})
	}
}
