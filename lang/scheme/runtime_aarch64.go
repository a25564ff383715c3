package scheme

import (
	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/frame"
)

// This file generates the AArch64 runtime support procedures, the
// counterparts of runtime_x86.go: the same frame discipline as compiled
// procedures (stp x29, x30, [sp, #-16]!; mov x29, sp; ...; ldp; ret with
// exact CFI), only caller-saved registers besides x29 and x30, and x27
// holding the control block (not x28, which holds Go's g: native.Call's
// rule, since Go's signal handler reads g from x28 when cgo is not
// linked, and a signal such as SIGURG may arrive while the code runs).

// genStartA64 generates %start(ctl x0), called through native.Call:
//
//	stp x29, x30, [sp, #-16]!; mov x29, sp; sub sp, sp, #16
//	stur x27, [x29, #-8]; mov x27, x0; mov x16, sp; str x16, [x27, #savedSP]
//	bl main
//	ldur x27, [x29, #-8]; mov sp, x29; ldp x29, x30, [sp], #16; ret
//
// The caller is the library's AArch64 entry routine, whose CFI describes
// the stack switch into the Go frames that called native.Call.
func genStartA64() *elfimage.Proc {
	a := newA64()
	a.pushFrame()
	a.subImm(xsp, xsp, 16)
	a.stur(x27, x29, -8)
	a.addCFI(frame.Insn{Op: frame.OpOffset, Reg: arch.Reg(x27), Offset: -24})
	a.movRR(x27, x0)
	a.movSP(x16, xsp)
	a.str(x16, x27, ctlSavedSP)
	a.bl("main")
	a.ldur(x27, x29, -8)
	a.addCFI(frame.Insn{Op: frame.OpSameValue, Reg: arch.Reg(x27)})
	a.epilogueRet()
	a.finish()
	return &elfimage.Proc{Name: symStart, Code: a.code, CFI: a.cfi, Relocs: a.relocs, Internal: true}
}

// genRuntimeA64 generates %capture, %display-int, %display-string and
// %write.
func genRuntimeA64() []*elfimage.Proc {
	return []*elfimage.Proc{genCaptureA64(), genDisplayIntA64(), genDisplayStringA64(), genWriteA64()}
}

// checkedA64 emits the frame record, sub sp, sp, #size and the stack
// check, and returns the overflow label (bind it with overflowA64).
func checkedA64(a *a64, size uint32) *label {
	a.pushFrame()
	if size != 0 {
		a.subImm(xsp, xsp, size)
	}
	l := a.newLabel()
	a.stackCheck(l)
	return l
}

// frameA64 is checkedA64 when checked, else (for an object, which has
// no control block) the frame record and sub sp, sp, #size only, and nil.
func frameA64(a *a64, size uint32, checked bool) *label {
	if checked {
		return checkedA64(a, size)
	}
	a.pushFrame()
	if size != 0 {
		a.subImm(xsp, xsp, size)
	}
	return nil
}

// overflowA64 binds l and emits mov x0, #3; bl %capture; udf #0 (nothing
// for a nil l: frameA64 of an object).
func overflowA64(a *a64, l *label) {
	if l == nil {
		return
	}
	a.bind(l)
	a.movImm(x0, int64(KindStackOverflow))
	a.bl(symCapture)
	a.udf()
}

func internalA64(name string, a *a64) *elfimage.Proc {
	if !a.finish() {
		panic("scheme: unbound label in " + name)
	}
	return &elfimage.Proc{Name: name, Code: a.code, CFI: a.cfi, Relocs: a.relocs, Internal: true}
}

// genCaptureA64 generates %capture(kind x0, message x1, nvalues x2,
// values x3), as genCapture does on x86-64: the record's registers are
// the caller's x19-x28, x29, sp, and x30 = pc (the return address), at
// their DWARF numbers. An abort (any kind but backtrace) restores %start's
// saved sp and returns from %start with x0 = 0; its CFI describes
// %start's frame, and the homes x19-x22 as lost (abortLosesHomes).
func genCaptureA64() *elfimage.Proc {
	a := newA64()
	a.pushFrame()
	special, fill, have, abort := a.newLabel(), a.newLabel(), a.newLabel(), a.newLabel()
	a.movRR(x9, x0) // kind, kept
	a.cmpImm(x0, uint32(KindBacktrace))
	a.bcond(condNe, special)
	a.ldr(10, x27, ctlCapCount)
	a.ldr(11, x27, ctlCapMax)
	a.cmp(10, 11)
	a.bcond(condLo, have)
	a.ldr(10, x27, ctlCapDropped)
	a.addImm(10, 10, 1)
	a.str(10, x27, ctlCapDropped)
	a.movImm(x0, 0)
	a.epilogueRet()
	a.bind(have)
	a.addImm(11, 10, 1)
	a.str(11, x27, ctlCapCount)
	a.b(fill)
	a.bind(special)
	a.ldr(10, x27, ctlCapMax)
	a.bind(fill)
	// x8 = base + index*recordSize
	a.ldr(11, x27, ctlCapRecSize)
	a.mul(10, 10, 11)
	a.ldr(11, x27, ctlCapBase)
	a.add(x8, 11, 10)
	a.str(x9, x8, recKind)
	regAt := func(r xreg) int32 { return recRegs + 8*int32(r) }
	for r := x19; r <= x28; r++ { // x28 is Go's g
		a.str(r, x8, regAt(r))
	}
	a.ldr(10, x29, 0)
	a.str(10, x8, regAt(x29))
	a.addImm(10, x29, 16)
	a.str(10, x8, regAt(xsp))
	a.ldr(10, x29, 8)
	a.str(10, x8, regAt(x30))
	a.str(10, x8, recRegs+8*int32(arch.AArch64_PC))
	a.str(x1, x8, recMsg)
	// nvalues = min(x2, MaxErrorArgs); copy them.
	clamp, copyLoop, copied := a.newLabel(), a.newLabel(), a.newLabel()
	a.cmpImm(x2, MaxErrorArgs)
	a.bcond(condLs, clamp)
	a.movImm(x2, MaxErrorArgs)
	a.bind(clamp)
	a.str(x2, x8, recNArgs)
	a.addImm(12, x8, recArgs)
	copyLoop.used = true
	a.bind(copyLoop)
	a.cbz(x2, copied)
	a.ldrPost(13, x3, 8)
	a.strPost(13, 12, 8)
	a.subImm(x2, x2, 1)
	a.b(copyLoop)
	a.bind(copied)
	// Stack words [sp of the caller, top), at most stack max bytes.
	short, stackLoop, stackDone := a.newLabel(), a.newLabel(), a.newLabel()
	a.addImm(12, x29, 16)
	a.ldr(14, x27, ctlStackTop)
	a.sub(14, 14, 12)
	a.ldr(15, x27, ctlCapStackMax)
	a.cmp(14, 15)
	a.bcond(condLs, short)
	a.movRR(14, 15)
	a.bind(short)
	a.str(12, x8, recStackAddr)
	a.str(14, x8, recStackLen)
	a.addImm(15, x8, recHeader)
	stackLoop.used = true
	a.bind(stackLoop)
	a.cbz(14, stackDone)
	a.ldrPost(13, 12, 8)
	a.strPost(13, 15, 8)
	a.subImm(14, 14, 8)
	a.b(stackLoop)
	a.bind(stackDone)
	a.cmpImm(x9, uint32(KindBacktrace))
	a.bcond(condNe, abort)
	a.movImm(x0, 0)
	a.epilogueRet()
	// Abort: back to %start's frame and return from it.
	a.bind(abort)
	a.str(x9, x27, ctlStatus)
	a.ldr(x16, x27, ctlSavedSP)
	a.movSP(xsp, x16)
	a.addCFI(frame.Insn{Op: frame.OpDefCFA, Reg: arch.AArch64_SP, Offset: startFrameSize})
	a.addCFI(frame.Insn{Op: frame.OpOffset, Reg: arch.Reg(x27), Offset: -24})
	abortLosesHomes(a)
	a.ldr(x27, xsp, 8)
	a.addCFI(frame.Insn{Op: frame.OpSameValue, Reg: arch.Reg(x27)})
	a.addImm(xsp, xsp, 16)
	a.addCFI(frame.Insn{Op: frame.OpDefCFAOffset, Reg: arch.AArch64_SP, Offset: 16})
	a.movImm(x0, 0)
	a.ins(0xa8c17bfd) // ldp x29, x30, [sp], #16
	a.addCFI(frame.Insn{Op: frame.OpDefCFAOffset, Reg: arch.AArch64_SP, Offset: 0})
	a.addCFI(frame.Insn{Op: frame.OpSameValue, Reg: arch.AArch64_FP})
	a.addCFI(frame.Insn{Op: frame.OpSameValue, Reg: arch.AArch64_LR})
	a.ret()
	return internalA64(symCapture, a)
}

// genDisplayIntA64 generates %display-int(value x0): the decimal digits
// of the signed value built backwards in a 32-byte frame buffer [x29-32,
// x29), written with %write. Returns 0.
func genDisplayIntA64() *elfimage.Proc { return genDisplayIntA64With(true) }

// genDisplayIntA64With is genDisplayIntA64, without the stack check (for
// an object) unless checked.
func genDisplayIntA64With(checked bool) *elfimage.Proc {
	a := newA64()
	overflow := frameA64(a, 32, checked)
	pos, loop, digits := a.newLabel(), a.newLabel(), a.newLabel()
	a.movRR(x1, x29) // one past the next digit
	a.movRR(x2, x0)
	a.tbz(x0, 63, pos)
	a.neg(x2, x0) // the magnitude, unsigned (also right for the most negative value)
	a.bind(pos)
	a.movImm(x3, 10)
	loop.used = true
	a.bind(loop)
	a.udiv(x4, x2, x3)
	a.msub(x5, x4, x3, x2)
	a.addImm(x5, x5, '0')
	a.strbPre(x5, x1, -1)
	a.movRR(x2, x4)
	a.cbnz(x2, loop)
	a.tbz(x0, 63, digits)
	a.movImm(x5, '-')
	a.strbPre(x5, x1, -1)
	a.bind(digits)
	a.movRR(x0, x1)
	a.sub(x1, x29, x1)
	a.bl(symWrite)
	a.movImm(x0, 0)
	a.epilogueRet()
	overflowA64(a, overflow)
	return internalA64(symDisplayInt, a)
}

// genDisplayStringA64 generates %display-string(object x0): writes the
// bytes of the string object {address, length}. Returns 0.
func genDisplayStringA64() *elfimage.Proc { return genDisplayStringA64With(true) }

// genDisplayStringA64With is genDisplayStringA64, without the stack check
// (for an object) unless checked.
func genDisplayStringA64With(checked bool) *elfimage.Proc {
	a := newA64()
	overflow := frameA64(a, 0, checked)
	a.ldr(x1, x0, 8)
	a.ldr(x0, x0, 0)
	a.bl(symWrite)
	a.movImm(x0, 0)
	a.epilogueRet()
	overflowA64(a, overflow)
	return internalA64(symDisplayString, a)
}

// genWriteA64 generates %write(buf x0, len x1): write(2) (syscall 64,
// svc #0) to the control block's fd until every byte is written, retrying
// on EINTR and giving up on any other error or a zero-length write.
func genWriteA64() *elfimage.Proc { return genWriteA64With(true) }

// genWriteA64With is genWriteA64, or, unless checked, the object's
// %write: no stack check, and the descriptor read from the datum %fd.
func genWriteA64With(checked bool) *elfimage.Proc {
	a := newA64()
	overflow := frameA64(a, 0, checked)
	loop, done := a.newLabel(), a.newLabel()
	a.movRR(x2, x1)
	a.movRR(x1, x0)
	loop.used = true
	a.bind(loop)
	a.cmpImm(x2, 0)
	a.bcond(condLe, done)
	if checked {
		a.ldr(x0, x27, ctlFD)
	} else {
		a.adr(x0, symFD)
		a.ldr(x0, x0, 0)
	}
	a.movImm(x8, 64) // SYS_write
	a.svc()
	a.cmnImm(x0, 4) // -EINTR
	a.bcond(condEq, loop)
	a.cmpImm(x0, 0)
	a.bcond(condLe, done)
	a.add(x1, x1, x0)
	a.sub(x2, x2, x0)
	a.b(loop)
	a.bind(done)
	a.epilogueRet()
	overflowA64(a, overflow)
	return internalA64(symWrite, a)
}
