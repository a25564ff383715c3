package scheme

import (
	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/frame"
)

// This file generates the runtime support procedures every module
// carries. They follow the same frame discipline as compiled procedures
// (push rbp; mov rbp, rsp; ...; leave; ret with exact CFI) and use only
// caller-saved registers besides rbp; r15 holds the control block.

// genStart generates the procedure the host calls first, %start(ctl),
// through native.Call:
//
//	push rbp; mov rbp, rsp; push r15; sub rsp, 8
//	mov r15, rdi; mov [r15+savedSP], rsp
//	call main
//	mov r15, [rbp-8]; leave; ret
//
// Its CFI is that of any procedure. Its caller is the library's entry
// routine (elfimage.EntryName, in the entry image), whose CFI describes the
// stack switch: unwinders go on from there into the Go frames that called
// native.Call, with nothing the module has to provide.
func genStart() *elfimage.Proc {
	a := newX86()
	a.pushFrame()
	a.push(r15)
	a.addCFI(frame.Insn{Op: frame.OpOffset, Reg: arch.X86_64_R15, Offset: -24})
	a.aluImm(aluSub, rsp, 8)
	a.movRR(r15, rdi)
	a.store(r15, ctlSavedSP, rsp)
	a.call("main")
	a.load(r15, rbp, -8)
	a.addCFI(frame.Insn{Op: frame.OpSameValue, Reg: arch.X86_64_R15})
	a.epilogueRet()
	a.finish()
	return &elfimage.Proc{Name: symStart, Code: a.code, CFI: a.cfi, Relocs: a.relocs, Internal: true}
}

// genRuntime generates %capture, %display-int, %display-string and %write.
func genRuntime() []*elfimage.Proc {
	return []*elfimage.Proc{genCapture(), genDisplayInt(), genDisplayString(), genWrite()}
}

// overflowStub binds l and emits the stack-overflow exit shared by every
// procedure with a stack check: mov edi, 3; call %capture; ud2.
func overflowStub(a *x86, l *label) {
	a.bind(l)
	a.movImm(rdi, int64(KindStackOverflow))
	a.call(symCapture)
	a.ud2()
}

// checkedPrologue emits push rbp; mov rbp, rsp; sub rsp, size; cmp rsp,
// [r15+limit]; jb overflow and returns the overflow label.
func checkedPrologue(a *x86, size int32) *label {
	a.pushFrame()
	if size != 0 {
		a.aluImm(aluSub, rsp, size)
	}
	l := a.newLabel()
	a.aluRM(aluCmp, rsp, r15, ctlStackLimit)
	a.jcc(condLo, l)
	return l
}

func internalProc(name string, a *x86) *elfimage.Proc {
	if !a.finish() {
		panic("scheme: unbound label in " + name)
	}
	return &elfimage.Proc{Name: name, Code: a.code, CFI: a.cfi, Relocs: a.relocs, Internal: true}
}

// genCapture generates %capture(kind rdi, message rsi, nvalues rdx,
// values rcx). It records the caller's registers and stack into a capture
// record (see ctl.go). For kind 1 (backtrace) it returns 0 to the caller,
// or counts a drop when the backtrace records are full. Any other kind
// uses the reserved record, stores kind as the run's status and returns
// from %start with rax = 0, abandoning the Scheme stack. It has no stack
// check: it runs on the overflow path, inside the margin below the limit.
func genCapture() *elfimage.Proc {
	a := newX86()
	a.pushFrame()
	special, fill, abort := a.newLabel(), a.newLabel(), a.newLabel()
	a.movRR(r9, rdi) // kind, kept
	a.aluImm(aluCmp, rdi, int32(KindBacktrace))
	a.jcc(condNe, special)
	a.load(rax, r15, ctlCapCount)
	a.aluRM(aluCmp, rax, r15, ctlCapMax)
	have := a.newLabel()
	a.jcc(condLo, have)
	a.incMem(r15, ctlCapDropped)
	a.movImm(rax, 0)
	a.epilogueRet()
	a.bind(have)
	a.incMem(r15, ctlCapCount)
	a.jmp(fill)
	a.bind(special)
	a.load(rax, r15, ctlCapMax)
	a.bind(fill)
	// r8 = base + index*recordSize
	a.imulMem(rax, r15, ctlCapRecSize)
	a.load(r8, r15, ctlCapBase)
	a.aluRR(aluAdd, r8, rax)
	a.store(r8, recKind, r9)
	regAt := func(r arch.Reg) int32 { return recRegs + 8*int32(r) }
	a.store(r8, regAt(arch.X86_64_RBX), rbx)
	a.load(rax, rbp, 0)
	a.store(r8, regAt(arch.X86_64_RBP), rax)
	a.lea(rax, rbp, 16)
	a.store(r8, regAt(arch.X86_64_RSP), rax)
	a.store(r8, regAt(arch.X86_64_R12), r12)
	a.store(r8, regAt(arch.X86_64_R13), r13)
	a.store(r8, regAt(arch.X86_64_R14), r14)
	a.store(r8, regAt(arch.X86_64_R15), r15)
	a.load(rax, rbp, 8)
	a.store(r8, regAt(arch.X86_64_RA), rax)
	a.store(r8, recMsg, rsi)
	// nvalues = min(rdx, MaxErrorArgs); copy them with rep movsb.
	clamp := a.newLabel()
	a.aluImm(aluCmp, rdx, MaxErrorArgs)
	a.jcc(condLs, clamp)
	a.movImm(rdx, MaxErrorArgs)
	a.bind(clamp)
	a.store(r8, recNArgs, rdx)
	a.movRR(rsi, rcx)
	a.lea(rdi, r8, recArgs)
	a.movRR(rcx, rdx)
	a.shlImm(rcx, 3)
	a.repMovsb()
	// Stack bytes [rsp of the caller, top), at most stack max.
	short := a.newLabel()
	a.lea(rsi, rbp, 16)
	a.load(rcx, r15, ctlStackTop)
	a.aluRR(aluSub, rcx, rsi)
	a.aluRM(aluCmp, rcx, r15, ctlCapStackMax)
	a.jcc(condLs, short)
	a.load(rcx, r15, ctlCapStackMax)
	a.bind(short)
	a.store(r8, recStackAddr, rsi)
	a.store(r8, recStackLen, rcx)
	a.lea(rdi, r8, recHeader)
	a.repMovsb()
	a.aluImm(aluCmp, r9, int32(KindBacktrace))
	a.jcc(condNe, abort)
	a.movImm(rax, 0)
	a.epilogueRet()
	// Abort: back to %start's frame and return from it.
	a.bind(abort)
	a.store(r15, ctlStatus, r9)
	a.load(rsp, r15, ctlSavedSP)
	a.addCFI(frame.Insn{Op: frame.OpDefCFA, Reg: arch.X86_64_RSP, Offset: startFrameSize})
	a.addCFI(frame.Insn{Op: frame.OpOffset, Reg: arch.X86_64_R15, Offset: -24})
	abortLosesHomes(a)
	a.movImm(rax, 0)
	a.aluImm(aluAdd, rsp, 8)
	a.addCFI(frame.Insn{Op: frame.OpDefCFAOffset, Reg: arch.X86_64_RSP, Offset: 24})
	a.pop(r15)
	a.addCFI(frame.Insn{Op: frame.OpDefCFAOffset, Reg: arch.X86_64_RSP, Offset: 16})
	a.addCFI(frame.Insn{Op: frame.OpSameValue, Reg: arch.X86_64_R15})
	a.pop(rbp)
	a.addCFI(frame.Insn{Op: frame.OpDefCFAOffset, Reg: arch.X86_64_RSP, Offset: 8})
	a.addCFI(frame.Insn{Op: frame.OpSameValue, Reg: arch.X86_64_RBP})
	a.ret()
	return internalProc(symCapture, a)
}

// genDisplayInt generates %display-int(value rdi): the decimal digits of
// the signed value, built backwards in a 32-byte frame buffer, written
// with %write. Returns 0.
func genDisplayInt() *elfimage.Proc { return genDisplayIntWith(checkedPrologue) }

// genDisplayIntWith is genDisplayInt with the given prologue.
func genDisplayIntWith(prologue func(*x86, int32) *label) *elfimage.Proc {
	a := newX86()
	overflow := prologue(a, 32)
	pos, loop, digits := a.newLabel(), a.newLabel(), a.newLabel()
	a.movRR(rax, rdi)
	a.movRR(rsi, rbp) // rsi: one past the next digit (buffer is [rbp-32, rbp))
	a.movImm(rcx, 10)
	a.test(rax, rax)
	a.jcc(condPl, pos)
	a.neg(rax) // the magnitude, unsigned (also right for the most negative value)
	a.bind(pos)
	loop.used = true
	a.bind(loop)
	a.movImm(rdx, 0)
	a.div(rcx)
	a.aluImm(aluAdd, rdx, '0')
	a.decR(rsi)
	a.storeByte(rsi, 0, rdx)
	a.test(rax, rax)
	a.jcc(condNe, loop)
	a.test(rdi, rdi)
	a.jcc(condPl, digits)
	a.decR(rsi)
	a.storeImmByte(rsi, 0, '-')
	a.bind(digits)
	a.movRR(rdi, rsi)
	a.movRR(rsi, rbp)
	a.aluRR(aluSub, rsi, rdi)
	a.call(symWrite)
	a.movImm(rax, 0)
	a.epilogueRet()
	overflowStub(a, overflow)
	return internalProc(symDisplayInt, a)
}

// genDisplayString generates %display-string(object rdi): writes the
// bytes of the string object {address, length}. Returns 0.
func genDisplayString() *elfimage.Proc { return genDisplayStringWith(checkedPrologue) }

// genDisplayStringWith is genDisplayString with the given prologue.
func genDisplayStringWith(prologue func(*x86, int32) *label) *elfimage.Proc {
	a := newX86()
	overflow := prologue(a, 0)
	a.load(rsi, rdi, 8)
	a.load(rdi, rdi, 0)
	a.call(symWrite)
	a.movImm(rax, 0)
	a.epilogueRet()
	overflowStub(a, overflow)
	return internalProc(symDisplayString, a)
}

// genWrite generates %write(buf rdi, len rsi): write(2) to the control
// block's fd until every byte is written, retrying on EINTR and giving up
// on any other error or a zero-length write.
func genWrite() *elfimage.Proc {
	a := newX86()
	overflow := checkedPrologue(a, 0)
	writeLoop(a, func() { a.load(rdi, r15, ctlFD) })
	a.epilogueRet()
	overflowStub(a, overflow)
	return internalProc(symWrite, a)
}

// writeLoop emits the body of %write(buf rdi, len rsi): write(2) to the
// descriptor loadFD puts in rdi, until every byte is written, retrying on
// EINTR and giving up on any other error or a zero-length write.
func writeLoop(a *x86, loadFD func()) {
	loop, done := a.newLabel(), a.newLabel()
	a.movRR(rdx, rsi)
	a.movRR(rsi, rdi)
	loop.used = true
	a.bind(loop)
	a.test(rdx, rdx)
	a.jcc(condLe, done)
	loadFD()
	a.movImm(rax, 1) // SYS_write
	a.syscall()
	a.aluImm(aluCmp, rax, -4) // -EINTR
	a.jcc(condEq, loop)
	a.test(rax, rax)
	a.jcc(condLe, done)
	a.aluRR(aluAdd, rsi, rax)
	a.aluRR(aluSub, rdx, rax)
	a.jmp(loop)
	a.bind(done)
}
