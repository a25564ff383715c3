#include "textflag.h"

// func trampoline(fn, top, entry, a1, a2, a3, a4, a5, a6 uintptr) uintptr
//
// The trampoline has a Go frame of its own (the assembler's prologue
// pushes BP and makes BP point at it), so that frame-pointer unwinders
// walk from the native stack through it into its Go caller, and so that
// Go's call frame information for it is right wherever its SP is the Go
// one. Layout below top (16-byte aligned, exclusive) during the call:
//
//	top-8	unused: perf's DWARF unwinder cannot read the last word of
//		its stack copy (it checks addr+8 >= end)
//	top-16	the trampoline's SP (on the Go stack), after its prologue
//	top-24	its BP (which points at its frame record on the Go stack)
//	top-32	unused (alignment)
//	top-40	return address pushed by CALL into the trampoline
//	top-48	with an entry routine: the BP it pushed; without: unused
//	top-56	return address into the entry routine, or into the
//		trampoline: the called code's entry SP (EntrySP)
//
// With an entry routine (entry != 0) the trampoline calls it with SP =
// top-40 after the CALL and fn in R11; the routine calls fn with SP =
// top-56 and returns with SP = top-32. Without one the trampoline calls fn
// itself from SP = top-48, so the entry SP is top-56 either way (and the
// return address into the trampoline at top-40 or top-56: top is page
// aligned, which tells the two apart). After either CALL returns, normally
// or by an "abort" that loads the entry SP and executes RET, SP is known
// again (top-32 or top-48); nothing else the callee could clobber is
// relied on.
TEXT ·trampoline(SB), NOSPLIT, $8-80
	MOVQ	fn+0(FP), R11
	MOVQ	top+8(FP), R10
	MOVQ	entry+16(FP), R12
	MOVQ	a1+24(FP), DI
	MOVQ	a2+32(FP), SI
	MOVQ	a3+40(FP), DX
	MOVQ	a4+48(FP), CX
	MOVQ	a5+56(FP), R8
	MOVQ	a6+64(FP), R9
	MOVQ	SP, -16(R10)
	MOVQ	BP, -24(R10)
	LEAQ	-32(R10), SP
	XORL	AX, AX
	TESTQ	R12, R12
	JZ	direct
	// One line for the CALL and the instruction after it: debuggers look
	// up the return address as is after the entry routine's signal frame
	// (see package elfimage's entry image), and show this line for it.
	CALL	R12; JMP	back
direct:
	LEAQ	-16(SP), SP
	CALL	R11
	LEAQ	16(SP), SP
back:
	CLD
	MOVQ	8(SP), BP
	MOVQ	16(SP), SP
	MOVQ	AX, ret+72(FP)
	RET
