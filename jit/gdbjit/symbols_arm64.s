//go:build linux

#include "textflag.h"

// The two symbols of the GDB JIT compilation interface (GDB manual, "JIT
// Compilation Interface", section "JIT Declarations"), as in
// symbols_amd64.s. They carry no package prefix: gdb finds them in
// .symtab by these exact names.

// struct jit_descriptor, 24 bytes, statically initialised with version 1.
// NOPTR: it holds addresses of mmap'd memory, never Go pointers.
DATA __jit_debug_descriptor+0(SB)/4, $1
DATA __jit_debug_descriptor+4(SB)/4, $0
DATA __jit_debug_descriptor+8(SB)/8, $0
DATA __jit_debug_descriptor+16(SB)/8, $0
GLOBL __jit_debug_descriptor(SB), NOPTR, $24

// void __jit_debug_register_code(void): a real function that only
// returns (RET through X30); gdb puts its JIT breakpoint on its first
// instruction.
TEXT __jit_debug_register_code(SB), NOSPLIT|NOFRAME, $0-0
	RET

// func registerCode()
//
// Tail-calls __jit_debug_register_code (X30 still holds registerCode's
// return address); the reference keeps the symbol in the binary.
TEXT ·registerCode(SB), NOSPLIT|NOFRAME, $0-0
	JMP	__jit_debug_register_code(SB)

// func descriptorAddr() *descriptor
//
// The reference keeps __jit_debug_descriptor in the binary.
TEXT ·descriptorAddr(SB), NOSPLIT, $0-8
	MOVD	$__jit_debug_descriptor(SB), R0
	MOVD	R0, ret+0(FP)
	RET
