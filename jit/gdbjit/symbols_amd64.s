//go:build linux

#include "textflag.h"

// The two symbols of the GDB JIT compilation interface (GDB manual, "JIT
// Compilation Interface", section "JIT Declarations"). They carry no
// package prefix: gdb finds them in .symtab by these exact names.

// struct jit_descriptor { uint32_t version; uint32_t action_flag;
// struct jit_code_entry *relevant_entry, *first_entry; }: 24 bytes,
// statically initialised with version 1 so that a debugger can read it
// before any Go code runs. NOPTR: it holds addresses of mmap'd memory,
// never Go pointers, so the garbage collector must not scan it.
DATA __jit_debug_descriptor+0(SB)/4, $1
DATA __jit_debug_descriptor+4(SB)/4, $0
DATA __jit_debug_descriptor+8(SB)/8, $0
DATA __jit_debug_descriptor+16(SB)/8, $0
GLOBL __jit_debug_descriptor(SB), NOPTR, $24

// void __jit_debug_register_code(void): a real function that only
// returns; gdb puts its JIT breakpoint on its first byte.
TEXT __jit_debug_register_code(SB), NOSPLIT|NOFRAME, $0-0
	RET

// func registerCode()
//
// Jumps to __jit_debug_register_code; the reference keeps the symbol in
// the binary.
TEXT ·registerCode(SB), NOSPLIT|NOFRAME, $0-0
	JMP	__jit_debug_register_code(SB)

// func descriptorAddr() *descriptor
//
// The reference keeps __jit_debug_descriptor in the binary.
TEXT ·descriptorAddr(SB), NOSPLIT, $0-8
	LEAQ	__jit_debug_descriptor(SB), AX
	MOVQ	AX, ret+0(FP)
	RET
