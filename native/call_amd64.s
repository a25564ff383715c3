#include "textflag.h"

// func trampoline(fn, top, a1, a2, a3, a4, a5, a6 uintptr) uintptr
//
// Stack layout below top (16-byte aligned, exclusive):
//	top-8	Go's SP
//	top-16	Go's BP
//	top-24	return address pushed by CALL (the callee's entry SP)
//
// After CALL returns, normally or by an "abort" that loads the entry SP
// and executes RET, SP is top-16 again; nothing else the callee could
// clobber is relied on.
TEXT ·trampoline(SB), NOSPLIT|NOFRAME, $0-72
	MOVQ	fn+0(FP), R11
	MOVQ	top+8(FP), R10
	MOVQ	a1+16(FP), DI
	MOVQ	a2+24(FP), SI
	MOVQ	a3+32(FP), DX
	MOVQ	a4+40(FP), CX
	MOVQ	a5+48(FP), R8
	MOVQ	a6+56(FP), R9
	MOVQ	SP, -8(R10)
	MOVQ	BP, -16(R10)
	LEAQ	-16(R10), SP
	XORL	AX, AX
	CALL	R11
	CLD
	MOVQ	0(SP), BP
	MOVQ	8(SP), SP
	MOVQ	AX, ret+64(FP)
	RET
