#include "textflag.h"

// func trampoline(fn, top, entry, a1, a2, a3, a4, a5, a6 uintptr) uintptr
//
// The AArch64 trampoline (AAPCS64, ARM IHI 0055). It has a Go frame of its
// own (the assembler's prologue saves X30 at its SP and X29 below it and
// points X29 at that frame record), so that frame-pointer unwinders walk
// from the native stack through it into its Go caller. Layout below top
// (page aligned, exclusive) during the call:
//
//	top-8	unused: perf's DWARF unwinder cannot read the last word of
//		its stack copy
//	top-16	the trampoline's SP (on the Go stack), after its prologue
//	top-24	its frame pointer X29 (its frame record on the Go stack)
//	top-32	Go's g register (X28), restored after the call: the code
//		may clobber X19-X28 on the abort path
//	top-40	X30 saved by the entry routine: the return address into
//		the trampoline
//	top-48	X29 saved by the entry routine (the trampoline's); the
//		called code's entry SP (EntrySP)
//
// The trampoline calls the entry routine with SP = top-32 and fn in X16
// (IP0, the intra-procedure-call scratch register); the routine pushes
// the frame record (X29, X30) and calls fn with SP = top-48 =
// EntrySP, then pops it and returns with SP = top-32. Without an
// installed routine the trampoline uses directEntry, the same four
// instructions. The code may abort from any depth by moving EntrySP into
// SP and running the routine's epilogue (LDP X29, X30, [SP], #16; RET):
// it returns into the trampoline with SP = top-32, as a normal return
// does. After the call the trampoline relies on SP alone.
TEXT ·trampoline(SB), NOSPLIT, $16-80
	MOVD	fn+0(FP), R16
	MOVD	top+8(FP), R10
	MOVD	entry+16(FP), R12
	MOVD	a1+24(FP), R0
	MOVD	a2+32(FP), R1
	MOVD	a3+40(FP), R2
	MOVD	a4+48(FP), R3
	MOVD	a5+56(FP), R4
	MOVD	a6+64(FP), R5
	MOVD	ZR, R6
	MOVD	ZR, R7
	MOVD	ZR, R8
	MOVD	RSP, R11
	MOVD	R11, -16(R10)
	MOVD	R29, -24(R10)
	MOVD	g, -32(R10)
	SUB	$32, R10, R11
	MOVD	R11, RSP
	CBNZ	R12, call
	MOVD	$·directEntry(SB), R12
call:
	CALL	(R12)
	MOVD	0(RSP), g
	MOVD	8(RSP), R29
	MOVD	16(RSP), R11
	MOVD	R11, RSP
	MOVD	R0, ret+72(FP)
	RET

// directEntry is the entry routine used when none is installed:
//
//	stp x29, x30, [sp, #-16]!; mov x29, sp; blr x16;
//	ldp x29, x30, [sp], #16; ret
TEXT ·directEntry(SB), NOSPLIT|NOFRAME, $0-0
	STP.W	(R29, R30), -16(RSP)
	MOVD	RSP, R29
	CALL	(R16)
	LDP.P	16(RSP), (R29, R30)
	RET

// func syncInstructionCache(start, end uintptr)
//
// Makes the instruction cache coherent with the data cache over [start,
// end) (ARM ARM B2.4.4, "Concurrent modification and execution of
// instructions"): DC CVAU per data cache line, DSB ISH, IC IVAU per
// instruction cache line, DSB ISH, ISB. The line sizes come from CTR_EL0
// (DminLine bits 19:16, IminLine bits 3:0, log2 of words); when CTR_EL0.IDC
// (bit 28) says the data cache need not be cleaned to the point of
// unification, or CTR_EL0.DIC (bit 29) that the instruction cache need
// not be invalidated, that step is left out. Linux lets EL0 read CTR_EL0
// and run DC CVAU and IC IVAU (SCTLR_EL1.UCT, UCI; or emulates them).
TEXT ·syncInstructionCache(SB), NOSPLIT|NOFRAME, $0-16
	MOVD	start+0(FP), R0
	MOVD	end+8(FP), R1
	MRS	CTR_EL0, R2
	TBNZ	$28, R2, dcdone
	UBFX	$16, R2, $4, R3
	MOVD	$4, R4
	LSL	R3, R4, R4	// data cache line size in bytes
	SUB	$1, R4, R5
	BIC	R5, R0, R6	// first line
dcloop:
	CMP	R1, R6
	BHS	dcdone
	DC	CVAU, R6
	ADD	R4, R6, R6
	B	dcloop
dcdone:
	DSB	$11	// DSB ISH
	TBNZ	$29, R2, icdone
	AND	$15, R2, R3
	MOVD	$4, R4
	LSL	R3, R4, R4	// instruction cache line size in bytes
	SUB	$1, R4, R5
	BIC	R5, R0, R6
icloop:
	CMP	R1, R6
	BHS	icdone
	WORD	$0xd50b7526	// IC IVAU, X6
	ADD	R4, R6, R6
	B	icloop
icdone:
	DSB	$11	// DSB ISH
	ISB	$15
	RET
