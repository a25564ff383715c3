package scheme

import (
	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
)

// This file generates the runtime of an object (CompileObject): the same
// procedures as the host's runtime, without the control block, so that
// code linked into a foreign program needs nothing but the kernel.

// symFD is the object's datum holding the file descriptor display and
// newline write to: 1 (standard output) until an error switches it to 2.
const symFD = "%fd"

// genObjectRuntime generates %capture, %display-int, %display-string and
// %write for an object, and adds %fd and the strings they print to the
// module.
func genObjectRuntime(c *compiler) []*elfimage.Proc {
	fd := make([]byte, 8)
	fd[0] = 1
	c.mod.Data = append(c.mod.Data, &elfimage.Datum{Name: symFD, Bytes: fd, Align: 8})
	if c.arch.Machine == arch.AArch64.Machine {
		return []*elfimage.Proc{genObjectCaptureA64(c), genDisplayIntA64With(false), genDisplayStringA64With(false), genWriteA64With(false)}
	}
	return []*elfimage.Proc{genObjectCapture(c), genDisplayIntObject(), genDisplayStringObject(), genWriteObject()}
}

// genObjectCapture generates the object's %capture(kind rdi, message
// rsi, nvalues rdx, values rcx). A backtrace (kind 1) does nothing and
// returns 0. An error writes "scheme: error: message value ...\n" (the
// text of the host's Error) to standard error, a stack overflow
// "scheme: error: stack overflow\n", then the process raises SIGABRT
// (kill(getpid(), SIGABRT), as abort(3) does; a debugger stops there with
// the Scheme frames on the stack) and, should that return, exits with
// status 134.
func genObjectCapture(c *compiler) *elfimage.Proc {
	a := newX86()
	a.saved = x86Homes[:4] // rbx, r12, r13, r14: kind, message, count, values
	a.pushFrame()
	fatal, msg, loop, nl, clamp := a.newLabel(), a.newLabel(), a.newLabel(), a.newLabel(), a.newLabel()
	a.aluImm(aluCmp, rdi, int32(KindBacktrace))
	a.jcc(condNe, fatal)
	a.movImm(rax, 0)
	a.epilogueRet()
	a.bind(fatal)
	a.movRR(rbx, rdi)
	a.movRR(r12, rsi)
	a.movRR(r13, rdx)
	a.movRR(r14, rcx)
	a.leaRIP(rax, symFD)
	a.movImm(rcx, 2)
	a.store(rax, 0, rcx)
	a.leaRIP(rdi, c.stringObj("scheme: error: "))
	a.call(symDisplayString)
	a.aluImm(aluCmp, rbx, int32(KindStackOverflow))
	a.jcc(condNe, msg)
	a.leaRIP(rdi, c.stringObj("stack overflow"))
	a.call(symDisplayString)
	a.jmp(nl)
	a.bind(msg)
	a.movRR(rdi, r12)
	a.call(symDisplayString)
	a.aluImm(aluCmp, r13, MaxErrorArgs)
	a.jcc(condLs, clamp)
	a.movImm(r13, MaxErrorArgs)
	a.bind(clamp)
	loop.used = true
	a.bind(loop)
	a.test(r13, r13)
	a.jcc(condLe, nl)
	a.leaRIP(rdi, c.stringObj(" "))
	a.call(symDisplayString)
	a.load(rdi, r14, 0)
	a.call(symDisplayInt)
	a.aluImm(aluAdd, r14, 8)
	a.decR(r13)
	a.jmp(loop)
	a.bind(nl)
	a.leaRIP(rdi, c.stringObj("\n"))
	a.call(symDisplayString)
	a.movImm(rax, 39) // SYS_getpid
	a.syscall()
	a.movRR(rdi, rax)
	a.movImm(rsi, 6)  // SIGABRT
	a.movImm(rax, 62) // SYS_kill
	a.syscall()
	a.movImm(rdi, 134)
	a.movImm(rax, 231) // SYS_exit_group
	a.syscall()
	a.ud2()
	return internalProc(symCapture, a)
}

// genDisplayIntObject is genDisplayInt without the stack check.
func genDisplayIntObject() *elfimage.Proc { return genDisplayIntWith(plainPrologue) }

// genDisplayStringObject is genDisplayString without the stack check.
func genDisplayStringObject() *elfimage.Proc { return genDisplayStringWith(plainPrologue) }

// plainPrologue emits push rbp; mov rbp, rsp; sub rsp, size and returns
// a label the overflow stub binds but nothing jumps to.
func plainPrologue(a *x86, size int32) *label {
	a.pushFrame()
	if size != 0 {
		a.aluImm(aluSub, rsp, size)
	}
	return a.newLabel()
}

// genWriteObject generates the object's %write(buf rdi, len rsi): write(2)
// to the descriptor in %fd, as genWrite does to the control block's.
func genWriteObject() *elfimage.Proc {
	a := newX86()
	a.pushFrame()
	writeLoop(a, func() {
		a.leaRIP(rdi, symFD)
		a.load(rdi, rdi, 0)
	})
	a.epilogueRet()
	return internalProc(symWrite, a)
}

// genObjectCaptureA64 is genObjectCapture for AArch64: %capture(kind x0,
// message x1, nvalues x2, values x3) with the frame of a compiled
// procedure that saves x19-x22 (kind, message, count, values), and the
// system calls getpid (172), kill (129) and exit_group (94), svc #0 with
// the number in x8.
func genObjectCaptureA64(c *compiler) *elfimage.Proc {
	a := newA64()
	a.prologue(4)
	fatal, msg, loop, nl, clamp := a.newLabel(), a.newLabel(), a.newLabel(), a.newLabel(), a.newLabel()
	a.cmpImm(x0, uint32(KindBacktrace))
	a.bcond(condNe, fatal)
	a.movImm(x0, 0)
	a.epilogueRet()
	a.bind(fatal)
	a.movRR(x19, x0)
	a.movRR(x19+1, x1)
	a.movRR(x19+2, x2)
	a.movRR(x19+3, x3)
	a.adr(x9, symFD)
	a.movImm(x0, 2)
	a.str(x0, x9, 0)
	a.adr(x0, c.stringObj("scheme: error: "))
	a.bl(symDisplayString)
	a.cmpImm(x19, uint32(KindStackOverflow))
	a.bcond(condNe, msg)
	a.adr(x0, c.stringObj("stack overflow"))
	a.bl(symDisplayString)
	a.b(nl)
	a.bind(msg)
	a.movRR(x0, x19+1)
	a.bl(symDisplayString)
	a.cmpImm(x19+2, MaxErrorArgs)
	a.bcond(condLs, clamp)
	a.movImm(x19+2, MaxErrorArgs)
	a.bind(clamp)
	loop.used = true
	a.bind(loop)
	a.cbz(x19+2, nl)
	a.adr(x0, c.stringObj(" "))
	a.bl(symDisplayString)
	a.ldrPost(x0, x19+3, 8)
	a.bl(symDisplayInt)
	a.subImm(x19+2, x19+2, 1)
	a.b(loop)
	a.bind(nl)
	a.adr(x0, c.stringObj("\n"))
	a.bl(symDisplayString)
	a.movImm(x8, 172) // SYS_getpid
	a.svc()
	a.movImm(x1, 6)   // SIGABRT
	a.movImm(x8, 129) // SYS_kill
	a.svc()
	a.movImm(x0, 134)
	a.movImm(x8, 94) // SYS_exit_group
	a.svc()
	a.udf()
	a.setFrameSize(0)
	return internalA64(symCapture, a)
}
