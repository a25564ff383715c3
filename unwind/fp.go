package unwind

import (
	"debug/elf"
	"errors"
	"fmt"

	"golang.org/x/arch/x86/x86asm"
)

// Method says how the registers of a frame were found: read from the
// thread (the innermost frame) or recovered while unwinding the frame it
// called.
type Method uint8

// Methods, as [Frame.Method] reports them.
const (
	// MethodUnknown: the frame was made by hand.
	MethodUnknown Method = iota
	// MethodRegisters: the innermost frame, whose registers were read
	// from the thread ([FirstFrame]).
	MethodRegisters
	// MethodCFI: recovered with the call frame information of the callee
	// ([Unwinder.Step]).
	MethodCFI
	// MethodSignal: recovered with the call frame information of a callee
	// that is a signal frame (CIE augmentation "S"), which restores the
	// interrupted registers, or, by a walker that recognises a signal
	// frame without CFI by its code, from the registers the kernel saved
	// in it; this frame's pc is exact.
	MethodSignal
	// MethodFramePointer: recovered from the callee's frame record, the
	// saved frame pointer and return address the frame pointer points at
	// ([Unwinder.StepFP]).
	MethodFramePointer
	// MethodPrologue: the callee had not finished building its frame
	// record (it was at its first instruction, or just after pushing the
	// frame pointer): the return address was found at the stack pointer.
	MethodPrologue
	// MethodEpilogue: the callee had already released its frame record
	// (after leave or pop %rbp, at ret or at a tail call's jmp): the
	// return address was found at the stack pointer.
	MethodEpilogue
	// MethodStackSwitch: recovered by a walker's own rule for a stack
	// switch it knows (procview: the trampoline of package native).
	MethodStackSwitch
)

var methodNames = [...]string{"unknown", "registers", "cfi", "signal", "fp", "prologue", "epilogue", "stack-switch"}

// String returns the method's short name: "registers", "cfi", "signal",
// "fp", "prologue", "epilogue", "stack-switch" or "unknown".
func (m Method) String() string {
	if int(m) < len(methodNames) {
		return methodNames[m]
	}
	return fmt.Sprintf("Method(%d)", uint8(m))
}

// ErrImplausible is wrapped by [Unwinder.StepFP] when no plausible caller
// can be found by frame pointer: the message names the check that failed.
var ErrImplausible = errors.New("unwind: no plausible caller by frame pointer")

// Space describes the unwound address space to [Unwinder.StepFP], for its
// plausibility checks.
type Space interface {
	// Executable reports whether addr is in executable memory.
	Executable(addr uint64) bool
	// Mapping returns the mapping [lo, hi) holding addr (for a stack
	// address, the thread's stack), or false when addr is not mapped.
	Mapping(addr uint64) (lo, hi uint64, ok bool)
}

// FPHints is what [Unwinder.StepFP] may use beyond registers and memory.
// The zero value is valid: no address-space checks, no function start.
type FPHints struct {
	// Space, when set, enables the checks that need the address space:
	// the frame record lies on the stack pointer's mapping, and return
	// addresses are in executable memory.
	Space Space
	// FuncStart is the entry address of the function holding the
	// frame's pc when it is known (a symbol, a perf map entry), else 0.
	// It lets an innermost frame in its prologue be recognized.
	FuncStart uint64
}

// MaxPrologueScan bounds the bytes of code [Unwinder.StepFP] decodes from
// FPHints.FuncStart to the pc of an innermost frame (x86-64).
const MaxPrologueScan = 4096

// StepFP is the fallback for a frame without call frame information: it
// unwinds cur by its frame pointer, the chain of frame records that code
// built with frame pointers keeps (x86-64: push %rbp; mov %rsp,%rbp puts
// the caller's %rbp at [%rbp] and the return address at [%rbp+8], AMD64
// psABI section 3.2.2; AArch64: the frame record {x29, x30} at x29, AAPCS64
// section 6.4.6), and writes the caller to caller, with caller.Method
// MethodFramePointer. The caller's known registers are the stack pointer,
// the frame pointer and the return-address column; the others are unknown
// (nothing says where the callee kept them). cur.CFA becomes the caller's
// stack pointer.
//
// On x86-64, a frame whose pc is exact (the innermost frame, or one a
// signal interrupted) may be in its prologue or epilogue, where %rbp still
// or already holds the caller's frame pointer: the instruction at pc, and
// the instructions from hints.FuncStart to pc when the function start is
// known (at most MaxPrologueScan bytes, decoded with x86asm), decide.
// At the function's first instruction, or at ret or on a fall-through
// path of tests, compares and conditional jumps to a ret (glibc's clone3
// after its syscall), or after leave or pop %rbp (without the function
// start: at a jmp just after one, a tail call), the return address is at
// the stack pointer (MethodPrologue, MethodEpilogue); just after push %rbp it is one word above.
//
// Every candidate caller is checked as gdb's and elfutils' frame-pointer
// unwinders check theirs, and more strictly:
//   - the frame pointer is aligned to the pointer size and not below the
//     stack pointer, so that frames grow toward higher addresses and the
//     caller's stack pointer is strictly above the callee's (a chain of
//     frame-pointer steps is monotonic and cannot loop);
//   - with hints.Space, the frame record lies in the stack pointer's
//     mapping (one stack: a stack switch is only crossed by a rule that
//     knows it), and the return address is in executable memory;
//   - the return address follows a call instruction (x86-64: an x86asm
//     decode of CALL ending exactly there; AArch64: BL, BLR or BLRA*).
//
// A zero frame pointer, the psABI's mark of the outermost frame, or a
// return address of 0, returns [ErrOutermost]. A failed check returns an
// error wrapping [ErrImplausible] that says which; unreadable memory one
// wrapping the Memory's error; unknown registers [ErrUnknownRegister].
// caller is not valid after an error. Only x86-64 and AArch64 are
// supported. Cost: two or three memory reads, the decode of a few
// instructions, and for an innermost frame with a function start the
// decode of the code up to pc.
func (u *Unwinder) StepFP(cur, caller *Frame, hints *FPHints) error {
	if hints == nil {
		hints = &FPHints{}
	}
	switch u.Arch.Machine {
	case elf.EM_X86_64:
		return u.stepFPX86(cur, caller, hints)
	case elf.EM_AARCH64:
		return u.stepFPA64(cur, caller, hints)
	}
	return fmt.Errorf("unwind: frame-pointer unwinding is not supported on %s", u.Arch.Name)
}

// stackRule is where the return address of an x86-64 frame is.
type stackRule uint8

const (
	ruleFrameRecord stackRule = iota // at [rbp+8], caller's rbp at [rbp]
	ruleAtSP                         // at [rsp] (entry), rbp unchanged
	rulePushed                       // at [rsp+8], caller's rbp at [rsp] (after push %rbp)
	ruleEpilogue                     // at [rsp], rbp already the caller's
)

func (u *Unwinder) stepFPX86(cur, caller *Frame, h *FPHints) error {
	a := u.Arch
	sp, ok := cur.Regs.Get(a.SP)
	if !ok {
		return fmt.Errorf("%w: %s at pc %#x", ErrUnknownRegister, a.RegName(a.SP), cur.PC)
	}
	fp, fpOK := cur.Regs.Get(a.FP)
	var errs []error
	if cur.First || cur.AfterSignal {
		if r, why := u.analyzeX86(cur.PC, h.FuncStart); r != ruleFrameRecord {
			err := u.stackRuleX86(r, cur, caller, sp, fp, fpOK, h)
			if err == nil || errors.Is(err, ErrOutermost) {
				return err
			}
			errs = append(errs, fmt.Errorf("%s: %w", why, err))
		}
	}
	if !fpOK {
		errs = append(errs, fmt.Errorf("%w: %s at pc %#x", ErrUnknownRegister, a.RegName(a.FP), cur.PC))
		return errors.Join(errs...)
	}
	if fp == 0 {
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
		return fmt.Errorf("%w: frame pointer 0 at pc %#x", ErrOutermost, cur.PC)
	}
	err := u.stackRuleX86(ruleFrameRecord, cur, caller, sp, fp, true, h)
	if err == nil || len(errs) == 0 {
		return err
	}
	return errors.Join(append(errs, err)...)
}

// stackRuleX86 computes the caller by rule r and checks it.
func (u *Unwinder) stackRuleX86(r stackRule, cur, caller *Frame, sp, fp uint64, fpOK bool, h *FPHints) error {
	a := u.Arch
	const w = 8
	var raAt, fpAt, newSP uint64
	method := MethodFramePointer
	switch r {
	case ruleFrameRecord:
		if fp%w != 0 {
			return fmt.Errorf("%w: frame pointer %#x is not %d-byte aligned", ErrImplausible, fp, w)
		}
		if fp < sp {
			return fmt.Errorf("%w: frame pointer %#x is below the stack pointer %#x (the previous frame would be inner to this one)", ErrImplausible, fp, sp)
		}
		raAt, fpAt, newSP = fp+w, fp, fp+2*w
	case ruleAtSP, ruleEpilogue:
		raAt, newSP = sp, sp+w
		method = MethodPrologue
		if r == ruleEpilogue {
			method = MethodEpilogue
		}
	case rulePushed:
		raAt, fpAt, newSP, fpOK = sp+w, sp, sp+2*w, true
		method = MethodPrologue
	}
	if newSP < sp || raAt < sp {
		return fmt.Errorf("%w: frame record at %#x wraps around", ErrImplausible, raAt)
	}
	if sp%w != 0 {
		return fmt.Errorf("%w: stack pointer %#x is not %d-byte aligned", ErrImplausible, sp, w)
	}
	if h.Space != nil {
		lo, hi, ok := h.Space.Mapping(sp)
		if !ok {
			return fmt.Errorf("%w: stack pointer %#x is not in mapped memory", ErrImplausible, sp)
		}
		if newSP > hi {
			return fmt.Errorf("%w: the frame record below %#x is outside the stack pointer's mapping [%#x, %#x)", ErrImplausible, newSP, lo, hi)
		}
	}
	ra, err := u.Mem.ReadUint64(raAt)
	if err != nil {
		return fmt.Errorf("unwind: reading the return address at %#x (pc %#x): %w", raAt, cur.PC, err)
	}
	newFP := fp
	if r == ruleFrameRecord || r == rulePushed {
		if newFP, err = u.Mem.ReadUint64(fpAt); err != nil {
			return fmt.Errorf("unwind: reading the saved frame pointer at %#x (pc %#x): %w", fpAt, cur.PC, err)
		}
	}
	if ra == 0 {
		return fmt.Errorf("%w: return address 0 at %#x", ErrOutermost, raAt)
	}
	if err := u.PlausibleReturn(ra, h.Space); err != nil {
		return fmt.Errorf("%w (read at %#x)", err, raAt)
	}
	cur.CFA = newSP
	*caller = Frame{PC: ra, SP: newSP, Method: method}
	caller.Regs.Set(a.SP, newSP)
	caller.Regs.Set(a.RA, ra)
	if fpOK {
		caller.Regs.Set(a.FP, newFP)
	}
	return nil
}

// PlausibleReturn applies StepFP's checks of a candidate return address,
// for walkers with unwinding rules of their own: with space (nil: no
// check), the call before it is in executable memory; and it follows a
// call instruction. Errors wrap [ErrImplausible]. Cost: one memory read
// and a few instruction decodes.
func (u *Unwinder) PlausibleReturn(ra uint64, space Space) error {
	if space != nil && (ra == 0 || !space.Executable(ra-1)) {
		return fmt.Errorf("%w: return address %#x is not in executable memory", ErrImplausible, ra)
	}
	ok, err := u.afterCall(ra)
	if err != nil {
		return fmt.Errorf("%w: return address %#x: code before it is not readable: %v", ErrImplausible, ra, err)
	}
	if !ok {
		return fmt.Errorf("%w: return address %#x does not follow a call instruction", ErrImplausible, ra)
	}
	return nil
}

// afterCall reports whether the instruction ending at ra is a call.
func (u *Unwinder) afterCall(ra uint64) (bool, error) {
	if ra < 8 {
		return false, nil
	}
	v, err := u.Mem.ReadUint64(ra - 8)
	if err != nil {
		return false, err
	}
	var b [8]byte
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
	if u.Arch.Machine == elf.EM_AARCH64 {
		return a64IsCall(uint32(v >> 32)), nil
	}
	// call rel32 (5 bytes) first, then the indirect forms ff /2 (2 to 7
	// bytes with a REX prefix, 8 with a segment override).
	for _, k := range [...]int{5, 2, 3, 6, 7, 4, 8} {
		in, err := x86asm.Decode(b[8-k:], 64)
		if err == nil && in.Op == x86asm.CALL && in.Len == k {
			return true, nil
		}
	}
	return false, nil
}

// a64IsCall reports whether insn is BL, BLR, BLRAA(Z) or BLRAB(Z).
func a64IsCall(insn uint32) bool {
	return insn&0xfc000000 == 0x94000000 || // BL
		insn&0xfffffc1f == 0xd63f0000 || // BLR
		insn&0xfffff800 == 0xd63f0800 || // BLRAAZ, BLRABZ
		insn&0xfffff800 == 0xd73f0800 // BLRAA, BLRAB
}

// readCode reads n bytes of code at addr through Mem, 8 at a time.
func (u *Unwinder) readCode(addr uint64, n int) ([]byte, error) {
	out := make([]byte, 0, n+8)
	for len(out) < n {
		v, err := u.Mem.ReadUint64(addr + uint64(len(out)))
		if err != nil {
			if len(out) > 0 {
				return out, nil
			}
			return nil, err
		}
		for i := 0; i < 8; i++ {
			out = append(out, byte(v>>(8*i)))
		}
	}
	return out[:n], nil
}

// analyzeX86 decides, for an exact pc, whether the frame record is not
// (yet, or any more) in place, and says why.
func (u *Unwinder) analyzeX86(pc, start uint64) (stackRule, string) {
	code, err := u.readCode(pc, 16)
	if err != nil {
		return ruleFrameRecord, ""
	}
	in, err := x86asm.Decode(code, 64)
	if err == nil && in.Op == x86asm.RET {
		return ruleEpilogue, "at ret"
	}
	if err == nil && beforeRet(code) {
		return ruleEpilogue, "before ret"
	}
	if start != 0 && start <= pc && pc-start <= MaxPrologueScan {
		if pc == start {
			return ruleAtSP, "at the function's entry"
		}
		body, err := u.readCode(start, int(pc-start))
		if err != nil {
			return ruleFrameRecord, ""
		}
		var prev x86asm.Inst
		off := 0
		for n := 0; off < len(body); n++ {
			in, err := x86asm.Decode(body[off:], 64)
			if err != nil {
				return ruleFrameRecord, "" // not code we can follow
			}
			if n == 0 && !isPushRBP(in) {
				return ruleFrameRecord, "" // no frame record: nothing to say
			}
			off += in.Len
			prev = in
			if n == 0 && off == len(body) {
				return rulePushed, "just after push %rbp"
			}
		}
		if off != len(body) {
			return ruleFrameRecord, "" // pc is not on an instruction boundary
		}
		if prev.Op == x86asm.LEAVE || prev.Op == x86asm.POP && prev.Args[0] == x86asm.RBP {
			return ruleEpilogue, "after " + prev.Op.String()
		}
		return ruleFrameRecord, ""
	}
	// No function start: recognize push %rbp; mov %rsp,%rbp at pc, and
	// mov %rsp,%rbp just after a push %rbp byte.
	if err == nil && isPushRBP(in) && in.Len < len(code) {
		if next, err := x86asm.Decode(code[in.Len:], 64); err == nil && isMovRBPRSP(next) {
			return ruleAtSP, "at push %rbp; mov %rsp,%rbp"
		}
	}
	if err == nil && isMovRBPRSP(in) && pc > 0 {
		if b, err := u.readCode(pc-1, 1); err == nil && b[0] == 0x55 {
			return rulePushed, "at mov %rsp,%rbp after push %rbp"
		}
	}
	// A tail call: jmp just after a leave or pop %rbp byte. (The byte
	// may end another instruction, mov %ecx,%ecx say; then the return
	// address at [rsp] rarely follows a call, the check fails, and the
	// frame record is used.)
	if err == nil && in.Op == x86asm.JMP && pc > 0 {
		if b, err := u.readCode(pc-1, 1); err == nil && (b[0] == 0xc9 || b[0] == 0x5d) {
			return ruleEpilogue, "at jmp after leave or pop %rbp"
		}
	}
	return ruleFrameRecord, ""
}

// beforeRet reports whether the code at pc falls through to a ret within
// its first 16 bytes by tests, compares and conditional jumps only, which
// change neither the stack pointer nor %rbp: the stack is then as at the
// ret, the return address at the stack pointer. glibc's clone3 is such
// code, between its syscall and ret, where its CFI has already ended
// (cfi_endproc before the syscall) and a thread creating another one
// waits.
func beforeRet(code []byte) bool {
	off := 0
	for off < len(code) {
		in, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			return false
		}
		switch in.Op {
		case x86asm.RET:
			return off > 0
		case x86asm.TEST, x86asm.CMP,
			x86asm.JA, x86asm.JAE, x86asm.JB, x86asm.JBE, x86asm.JE, x86asm.JNE,
			x86asm.JG, x86asm.JGE, x86asm.JL, x86asm.JLE, x86asm.JO, x86asm.JNO,
			x86asm.JP, x86asm.JNP, x86asm.JS, x86asm.JNS:
			off += in.Len
		default:
			return false
		}
	}
	return false
}

func isPushRBP(in x86asm.Inst) bool { return in.Op == x86asm.PUSH && in.Args[0] == x86asm.RBP }
func isMovRBPRSP(in x86asm.Inst) bool {
	return in.Op == x86asm.MOV && in.Args[0] == x86asm.RBP && in.Args[1] == x86asm.RSP
}

// stepFPA64 follows an AArch64 frame record: [x29] is the caller's x29,
// [x29+8] its return address (x30). The caller's SP is not recorded: it
// becomes unknown in caller.Regs, and caller.SP is its lower bound x29+16,
// which the next step's checks use.
func (u *Unwinder) stepFPA64(cur, caller *Frame, h *FPHints) error {
	a := u.Arch
	fp, ok := cur.Regs.Get(a.FP)
	if !ok {
		return fmt.Errorf("%w: %s at pc %#x", ErrUnknownRegister, a.RegName(a.FP), cur.PC)
	}
	if fp == 0 {
		return fmt.Errorf("%w: frame pointer 0 at pc %#x", ErrOutermost, cur.PC)
	}
	sp := cur.SP
	if fp%8 != 0 {
		return fmt.Errorf("%w: frame pointer %#x is not 8-byte aligned", ErrImplausible, fp)
	}
	if fp < sp || fp+16 < fp {
		return fmt.Errorf("%w: frame pointer %#x is below the stack pointer %#x (the previous frame would be inner to this one)", ErrImplausible, fp, sp)
	}
	if h.Space != nil {
		lo, hi, ok := h.Space.Mapping(sp)
		if !ok {
			return fmt.Errorf("%w: stack pointer %#x is not in mapped memory", ErrImplausible, sp)
		}
		if fp+16 > hi {
			return fmt.Errorf("%w: frame record at %#x is outside the stack pointer's mapping [%#x, %#x)", ErrImplausible, fp, lo, hi)
		}
	}
	newFP, err := u.Mem.ReadUint64(fp)
	if err != nil {
		return fmt.Errorf("unwind: reading the frame record at %#x (pc %#x): %w", fp, cur.PC, err)
	}
	ra, err := u.Mem.ReadUint64(fp + 8)
	if err != nil {
		return fmt.Errorf("unwind: reading the frame record at %#x (pc %#x): %w", fp, cur.PC, err)
	}
	mask := u.PACMask
	if mask == 0 {
		mask = 0xffff_0000_0000_0000
	}
	ra &^= mask
	if ra == 0 {
		return fmt.Errorf("%w: return address 0 at %#x", ErrOutermost, fp+8)
	}
	if err := u.PlausibleReturn(ra, h.Space); err != nil {
		return fmt.Errorf("%w (read at %#x)", err, fp+8)
	}
	cur.CFA = fp + 16
	*caller = Frame{PC: ra, SP: fp + 16, Method: MethodFramePointer}
	caller.Regs.Set(a.FP, newFP)
	caller.Regs.Set(a.RA, ra)
	return nil
}
