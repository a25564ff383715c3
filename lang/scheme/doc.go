// Package scheme is elfimage's example compiler: a small Scheme subset
// compiled straight to x86-64 or AArch64 machine code (its own encoders,
// no external assembler) as an [elfimage.Module] with exact call frame information,
// line rows with columns, parameters (optional ones with their default's
// source), lexical scopes whose variables have exact live ranges in
// registers and frame slots, docstrings and procedure properties; and the host
// runtime ([Run]) that runs a linked, loaded image on its own stack and
// hands back backtrace captures for the CFI unwinder.
//
// # Language
//
// A program is a sequence of (define (name param ...) body ...) and
// (define* (name param ... #:optional opt ...) body ...), at most
// [MaxParams] parameters each; a string first in a body with more forms
// after it is the docstring. (define (main) ...) is the entry point and
// its value is the run's value.
//
// Optional parameters (Guile style): in define*, the parameters after
// #:optional are optional, each written name (default 0) or (name
// default-expression). A default is evaluated, when its argument is
// missing, in the scope of the parameters before it: (define* (f a
// #:optional (b 10) (c (* a 2))) ...). A call passes between the number
// of required parameters and the number of all parameters (else a compile
// error at the call). Proc.Params lists the required parameters, then the
// optional ones with Var.Optional set and Var.Default holding the default
// expression's source text ("10", "(* a 2)"; empty for the implicit 0).
//
// Procedure properties: a (declare (name value) ...) form first in the
// body (after the docstring, if any) gives the procedure metadata, for
// example (declare (inline #f) (category "math")). Each clause becomes a
// Property in source order, Name the clause's symbol and Value the
// value's source text as written (#f, "math" with its quotes, (1 2));
// a name may appear once. The declare form is not evaluated; declare
// anywhere else is an error. Forms:
//
//	literals      64-bit integers, #t #f, "strings" (only as arguments of display and error)
//	arithmetic    (+ ...) (* ...) (- x ...) (quotient a b) (remainder a b) (modulo a b)
//	comparison    (< a b ...) (<= ...) (= ...) (>= ...) (> ...) (not x)
//	control       if cond(else) when unless begin and or
//	binding       let let* named let, set! on parameters and locals
//	calls         (f arg ...) of defined procedures, with proper tail calls
//	output        (display x) (newline)
//	runtime       (backtrace) (error "message" value ...)
//
// Comments are ";" to the end of the line and nestable "#| ... |#".
//
// Values are untagged 64-bit integers. Arithmetic wraps (two's
// complement); quotient truncates toward zero, remainder takes the sign of
// the dividend, modulo the sign of the divisor; a zero divisor is the
// Scheme error "division by zero"; the most negative integer divided by -1
// wraps instead of trapping. Booleans are integers: #f is 0 and #t is 1,
// comparisons and not return 1 or 0, and everything but 0 is true (so 0
// is false, unlike standard Scheme). (display #t) prints 1. and/or return
// the deciding value; set! returns the new value; if without alternative,
// cond without a matching clause, when/unless not taken, display, newline
// and backtrace return 0. Procedures are not first-class values, there is
// no lambda, and a named-let loop may only be called in tail position of
// its body (it compiles to a jump).
//
// # Code
//
// The compiler is a front end (compile.go: scopes, variables and their
// live ranges, line rows, the record of variable stores) that drives an
// accumulator machine, and one backend per architecture doing the
// instruction selection behind the small interface machine (asm.go):
// asm_x86.go and runtime_x86.go for x86-64, asm_aarch64.go and
// runtime_aarch64.go for AArch64. [CompileFor] picks the backend;
// [Compile] compiles for the running program's architecture. Both lay
// out the same frame: slots at the same frame-pointer offsets, the CFA
// 16 bytes above the frame pointer, so DW_OP_fbreg offsets are equal.
//
// On x86-64, arguments travel in rdi, rsi, rdx, rcx, r8, r9 and the result in rax;
// r15 holds the host's control block in all generated code. A call of a
// define* procedure with optional parameters also passes the number of
// arguments in rax (mov eax, n; also before the jmp of a tail call). Every
// procedure has the frame
//
//	push rbp; mov rbp, rsp                 ; CFA = rbp+16
//	push rbx; push r12 ...                 ; s callee-saved registers its lets use, at CFA-24-8i
//	sub rsp, N                             ; 8s+N multiple of 16, at most MaxFrameSize
//	mov [rbp-8(s+1)], rdi ...              ; required parameter i = DW_OP_fbreg(-24-8(s+i))
//	cmp rsp, [r15]; jb overflow            ; stack limit check, after those are stored
//	cmp rax, nreq+1; jb default0           ; define* only: store the passed optionals,
//	mov [slot], reg; cmp rax, nreq+2 ...   ;   then jmp body; defaultK: evaluate default K,
//	jmp body                               ;   store it, fall through to default K+1
//	body: ...                              ; locals and temporaries in rbp-relative slots
//	mov rbx, [rbp-8] ...; leave; ret       ; or ...; leave; jmp callee for a tail call
//	overflow: mov edi, 3; call %capture; ud2
//
// with CFI exact at every instruction (the saved registers get offset
// rules after their push and same-value rules after their restore).
//
// On AArch64 (AAPCS64), arguments travel in x0-x5 and the result in x0
// (the accumulator); x27 holds the control block (x28 holds Go's g and is
// never written: native.Call's rule, as Go's signal handler reads it), the
// argument count of a define* call travels in x9, x16 is scratch (the stack check, slots
// beyond ldur/stur's reach); let bindings live in x19, x20, x21, x22
// (DW_OP_reg19 ...), parameters arrive in x0-x5 (DW_OP_reg0 ...). Every
// procedure has the frame
//
//	stp x29, x30, [sp, #-16]!              ; CFA = sp+16, x29 at CFA-16, x30 (RA) at CFA-8
//	mov x29, sp                            ; CFA = x29+16
//	sub sp, sp, #hi, lsl #12; sub sp, sp, #lo  ; N bytes, a multiple of 16, homes included
//	stur x19, [x29, #-8] ...               ; s homes its lets use, at CFA-24-8i
//	stur x0, [x29, #-8(s+1)] ...           ; required parameter i = DW_OP_fbreg(-24-8(s+i))
//	ldr x16, [x27]; cmp sp, x16; b.lo overflow
//	cmp x9, #nreq+1; b.lo default0 ...     ; define* only, as on x86-64
//	body: ...
//	ldur x19, [x29, #-8] ...; mov sp, x29; ldp x29, x30, [sp], #16; ret  ; or b callee
//	overflow: mov x0, #3; bl %capture; udf #0
//
// with CFI exact at every instruction, x30 the return-address column and
// the register numbers of the AArch64 DWARF ABI; calls are bl and tail
// calls b (RelocAArch64Call26, RelocAArch64Jump26), string objects are
// addressed with adrp+add (RelocAArch64AdrPage21, RelocAArch64AddLo12),
// all resolved by the linker. The runtime writes with write(2), svc #0
// with syscall number 64 in x8. Objects ([CompileObjectFor]) are written
// for AArch64 as for x86-64 (see "Objects").
//
// # Scopes and live ranges
//
// Every let and named let with bindings is one Scope; a let* is one
// Scope per binding, each nested in the one before (as let* means). A
// scope's single code range [Start, End) starts right after the last
// instruction storing its bindings (for a named let: the loop head) and
// ends after the last instruction of its body; scopes nest as the source
// does, the top-level ones in Proc.Scopes. The first binding of a let or
// let* lives in rbx, r12, r13 or r14 (x19-x22; by nesting depth of such lets; when
// all four are taken, in a slot), the others in frame slots. Each Var has
// Line/Column of its name and exact Live ranges:
//
//   - a slot binding: its whole scope, as DW_OP_fbreg(off); the slot is
//     written before the scope starts and reused only after it ends;
//   - a register binding: its scope minus each epilogue's tail, from the
//     instruction after the one restoring the register to the end of the
//     ret or jmp, as DW_OP_reg3 (rbx), DW_OP_reg12 ... (DW_OP_reg19 ...
//     for x19 ... on AArch64);
//   - a required parameter: [0, end of its store) in its argument register
//     (DW_OP_reg5 for rdi, reg4 rsi, reg1 rdx, reg2 rcx, reg8, reg9;
//     DW_OP_reg0-reg5 for x0-x5), then its slot to the end of the code;
//   - an optional parameter: its slot from its store in the passed-argument
//     chain to the end of the chain's jmp, and from the store of its
//     default to the start of the overflow path (optional parameters are
//     stored after the stack check).
//
// Var.Location is also set for parameters and slot bindings (the slot),
// for consumers that ignore Live. The module also holds the entry
// stub %start(ctl), whose CFI marks the return address undefined, and the
// runtime procedures %capture, %display-int, %display-string and %write
// (Internal). String literals are bytes in ROData and a string object
// {address, length} in Data with an Abs64 relocation the loader applies.
// ctl.go documents the control block and capture record layout.
//
// # Objects
//
// [CompileObjectFor] (elfimage build -c; [CompileObject] for x86-64)
// compiles a program, for x86-64 or AArch64, for [elfimage.LinkObject]: a relocatable object that C or C++ code links
// with (cc, GNU ld, gold, lld) and calls, without Go or [Run]. There is
// no entry stub and main is optional. Each top-level procedure without
// optional parameters is a global function of the System V ABI (AAPCS64
// on AArch64),
//
//	int64_t NAME(int64_t, ...)    /* as many parameters as the define */
//
// under the C name [CName] spells (show-fib is show_fib, even? is
// even_p, set-x! is set_x_x; main is scheme_main, so it does not clash
// with C's main); DWARF keeps the Scheme name as DW_AT_name and the C name
// as DW_AT_linkage_name. Values cross the boundary as they are in Scheme,
// untagged 64-bit integers (#f is 0, #t is 1). The code keeps the ABI's
// rules: rbx, rbp, r12-r14 (x19-x22, x29, x30) are saved where used, r15
// (x27, the host's control block) is not used, the stack stays 16-byte
// aligned at calls. A define* procedure with optional parameters is a
// local (Internal) symbol, since it expects the argument count in rax
// (x9), which C does not pass.
//
// (define-extern (name param ...)) declares a C function of int64_t
// parameters returning int64_t, at symbol CName(name); a call of it is an
// R_X86_64_PLT32 relocation the system linker resolves (a tail call a
// jmp; on AArch64 R_AARCH64_CALL26 on a bl, R_AARCH64_JUMP26 on a b). C code it calls runs below the Scheme frames: a C++ exception
// thrown there is caught above them and glibc's backtrace lists them, as
// libgcc's unwinder reads the object's .eh_frame. define-extern is an
// error in Compile.
//
// The runtime of an object needs nothing but the kernel: display and
// newline write(2) to file descriptor 1 directly (flush C's stdio buffers
// first when mixing the two); (error "message" value ...) and division by
// zero write "scheme: error: message value ...", the text of [Error],
// to file descriptor 2 and raise SIGABRT with kill(2) (a debugger stops
// there with the Scheme frames on the stack; exit status 134 if the signal
// returns); (backtrace) does nothing and returns 0 (use gdb, or glibc's
// backtrace from a C function). There is no stack-overflow check in an
// object: the C stack's guard page ends a runaway recursion with SIGSEGV.
package scheme
