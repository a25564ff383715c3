// Package scheme is elfimage's example compiler: a small Scheme subset
// compiled straight to x86-64 machine code (its own encoder, no external
// assembler) as an [elfimage.Module] with exact call frame information,
// line rows with columns, parameter locations and docstrings; and the host
// runtime ([Run]) that runs a linked, loaded image on its own stack and
// hands back backtrace captures for the CFI unwinder.
//
// # Language
//
// A program is a sequence of (define (name param ...) body ...), at most
// [MaxParams] parameters each; a string first in a body with more forms
// after it is the docstring. (define (main) ...) is the entry point and
// its value is the run's value. Forms:
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
// Arguments travel in rdi, rsi, rdx, rcx, r8, r9 and the result in rax;
// r15 holds the host's control block in all generated code. Every
// procedure has the frame
//
//	push rbp; mov rbp, rsp; sub rsp, N     ; N multiple of 16, at most MaxFrameSize
//	mov [rbp-8], rdi ...                   ; parameter i at rbp-8(i+1) = DW_OP_fbreg(-24-8i)
//	cmp rsp, [r15]; jb overflow            ; stack limit check, after the parameters are stored
//	...                                    ; locals and temporaries in rbp-relative slots
//	leave; ret                             ; or leave; jmp callee for a tail call
//	overflow: mov edi, 3; call %capture; ud2
//
// with CFI exact at every instruction. The module also holds the entry
// stub %start(ctl), whose CFI marks the return address undefined, and the
// runtime procedures %capture, %display-int, %display-string and %write
// (Internal). String literals are bytes in ROData and a string object
// {address, length} in Data with an Abs64 relocation the loader applies.
// ctl.go documents the control block and capture record layout.
package scheme
