// Package native calls machine code of a loaded image (or any code that
// follows the System V AMD64 calling convention on amd64, AAPCS64 on arm64)
// from Go, on a stack that the library owns.
//
// Go cannot run foreign code on a goroutine stack: goroutine stacks start at
// a few KiB without guard pages and move, Go does not keep SP 16-byte
// aligned, and a long call would block every stop-the-world. Call therefore
// works like syscall.Syscall6: a nosplit wrapper tells the runtime that the
// goroutine enters a system call (runtime.entersyscall, exported to other
// packages through //go:linkname, see go.dev/issue/67401), an assembly
// trampoline switches SP to a Stack mapped with mmap(2) between PROT_NONE
// guard pages, loads the argument registers, calls the code and switches back; then
// the wrapper calls runtime.exitsyscall. While the code runs the garbage
// collector and the scheduler proceed without it.
//
// Rules for the called code:
//   - It must not touch Go memory (heap or goroutine stacks) and must not keep
//     Go pointers: the runtime considers the goroutine in a system call, so
//     the collector may run and goroutine stacks may move. Pass addresses of
//     memory from Alloc or of the image itself.
//   - It must not call back into Go (there is no way to), must not change
//     the FS base (Go keeps its TLS there), must preserve the MXCSR and x87
//     control bits (psABI §3.2.1) and must not change the signal mask. Go's
//     signal handlers run on their own signal stacks, so profiling (SIGPROF)
//     and preemption signals (SIGURG) may arrive while it runs; the code
//     shows up in profiles as runtime._ExternalCode.
//   - It must not overflow the Stack: a hit on the guard page kills the
//     process. Compare SP with a limit above (*Stack).Bottom and abort
//     instead (see below).
//   - On arm64 it must not use X28 at all (it holds Go's g, which Go's
//     signal handler reads from it when cgo is not linked) nor X18 (the
//     platform register), must preserve FPCR and must leave SP 16-byte
//     aligned.
//   - It may "abort" from any depth by loading (*Stack).EntrySP into RSP and
//     executing RET with RAX holding the result; the trampoline and the
//     entry routine keep what they need on the Stack above EntrySP and rely
//     on no register but RSP and RAX, so callee-saved registers (RBX, RBP,
//     R12-R15) may be clobbered on that path. The trampoline also clears the
//     direction flag on return. On arm64 the abort moves
//     (*Stack).EntrySP into SP and runs the entry routine's epilogue,
//     LDP X29, X30, [SP], #16; RET, with X0 holding the result: the frame
//     record at EntrySP returns into the trampoline (call_arm64.s).
//
// # Debuggers and profilers
//
// The trampoline has a Go frame with a frame pointer, and it saves its SP
// and BP at the top of the Stack before it switches (see [SavedSPOffset]).
// When an entry routine is installed ([SetEntry]), Call calls the function
// through it: a tiny routine (push rbp; mov rbp, rsp; call; pop rbp; ret)
// whose call frame information describes its caller, the trampoline, by
// those saved words. Package elfimage installs its own, in a one-procedure
// image it registers and publishes with the user's images, the first time
// it loads an image: code called through Call then unwinds into the Go code
// that called Call in gdb, lldb, perf (with frame pointers the whole chain,
// with --call-graph dwarf down to the trampoline) and elfimage's own
// unwinder, without any CFI of the caller's making. The frames are, from
// the called code outwards: the called code, elfimage.entry (gdb shows it
// as "<signal handler called>"), native.trampoline, native.call,
// native.CallErr, then Call's caller.
//
// On arm64 the trampoline and the layout are the same in spirit
// (call_arm64.s), and package elfimage installs an AArch64 entry image
// (stp x29, x30; mov x29, sp; blr x16; ldp; ret) whose CFI leads debuggers
// from the called code into the trampoline the same way. Without an
// installed routine Call goes through the trampoline's built-in one,
// native.directEntry, whose Go-generated call frame information does not
// describe the frame record it pushes: backtraces from the called code then
// end there.
//
// The package builds everywhere: outside Linux, NewStack and Alloc return
// errors matching errors.ErrUnsupported, and outside amd64 and arm64 so
// does CallErr (and Call panics with that error). Code written into memory
// at run time must be made visible to instruction fetches with
// [SyncInstructionCache] before it runs (a no-op on x86-64; required on
// AArch64 hardware).
package native

import (
	"errors"
	"fmt"
	"runtime"
)

// MaxArgs is the number of integer arguments Call passes, in RDI, RSI, RDX,
// RCX, R8 and R9 (System V AMD64 psABI §3.2.3), or X0-X5 on arm64 (AAPCS64
// §6.8.2; X6 and X7 are zero). It is the same on every GOARCH so that an
// image's procedures are callable wherever their machine runs.
const MaxArgs = 6

// Errors returned by CallErr (and panicked with by Call), matched with
// errors.Is.
var (
	// ErrTooManyArgs: more than MaxArgs arguments.
	ErrTooManyArgs = errors.New("native: more than 6 arguments")
	// ErrNilStack: the Stack is nil.
	ErrNilStack = errors.New("native: nil stack")
	// ErrNilFunc: the function address is 0.
	ErrNilFunc = errors.New("native: nil function address")
	// ErrClosed: the Stack was closed.
	ErrClosed = errors.New("native: stack closed")
	// ErrBusy: another call is running on the Stack (a Stack serves one call
	// at a time), or Close was called while a call runs.
	ErrBusy = errors.New("native: stack in use by another call")
	// ErrEntrySet: SetEntry was asked to replace the installed entry
	// routine by another one.
	ErrEntrySet = errors.New("native: another entry routine is installed")
)

// SetEntry installs the entry routine through which every later [Call]
// calls its function: machine code at pc that must stay mapped and
// executable for the rest of the process. Package elfimage installs its
// own (the entry image, whose procedure is named elfimage.entry) when it
// loads its first image, so programs that load images never call
// SetEntry; without an entry routine Call calls the function directly.
//
// The routine exists for its call frame information, which is what lets
// debuggers and unwinders cross the stack switch: it is entered with RSP =
// Top()-[EntryRoutineSPOffset] (≡ 8 mod 16; the return address into the
// trampoline is there), the words at Top()-[SavedSPOffset] and
// Top()-[SavedBPOffset] holding the trampoline's Go SP and BP, the
// argument registers and AL loaded for the function and the function's
// address in R11. It must call R11 with RSP = [Stack.EntrySP] after the
// CALL, passing RDI, RSI, RDX, RCX, R8, R9 and RAX on unchanged, and must
// then return the function's RAX to the trampoline with its own RET (RSP =
// Top()-32 after it); `push rbp; mov rbp, rsp; call r11; pop rbp; ret` is
// such a routine. Its CFI describes its caller as the trampoline frame
// whose SP, BP and return address those words give.
//
// On arm64 the routine is entered by BLR with SP = Top()-[EntryRoutineSPOffset]
// (16-byte aligned), X30 holding the return address into the trampoline,
// X0-X7 loaded for the function and the function's address in X16; it
// must push the frame record (X29, X30) so that SP = [Stack.EntrySP],
// call X16 with X0-X7 unchanged, pop the frame record and return X0:
// `stp x29, x30, [sp, #-16]!; mov x29, sp; blr x16; ldp x29, x30, [sp],
// #16; ret` is such a routine (the trampoline has the same one built in
// for when none is installed).
//
// Errors: ErrEntrySet when a different routine is installed already (it
// cannot be replaced: calls may be running through it; installing the same
// pc again succeeds), an error for pc 0, and errors.ErrUnsupported outside
// amd64 and arm64. Cost: one atomic compare-and-swap; each Call then costs one more
// call and return.
func SetEntry(pc uintptr) error {
	if pc == 0 {
		return errors.New("native: entry routine at address 0")
	}
	return setEntry(pc)
}

// Entry returns the address of the installed entry routine ([SetEntry]),
// or 0 when Call calls functions directly. It costs one atomic load.
func Entry() uintptr { return entry() }

// Call calls the machine code at fn on Stack s with up to six integer
// arguments and returns RAX (X0 on arm64). See CallErr for the contract; Call panics with
// CallErr's error (an error value matching ErrTooManyArgs, ErrNilStack,
// ErrNilFunc, ErrClosed, ErrBusy or errors.ErrUnsupported) on misuse.
// It allocates nothing; its cost is about that of a system call wrapper
// (a few tens of nanoseconds) plus the code's own run time.
func Call(fn uintptr, s *Stack, args ...uintptr) uintptr {
	r, err := CallErr(fn, s, args...)
	if err != nil {
		panic(err)
	}
	return r
}

// CallErr calls the machine code at fn with the System V AMD64 calling
// convention (psABI §3.2): args[i] goes to RDI, RSI, RDX, RCX, R8, R9 in that
// order, unused argument registers are zero, and AL (the vector-register
// count of variadic callees) is 0. The code runs on s: at its entry RSP is
// s.EntrySP(), which is ≡ 8 (mod 16) and holds the return address, as the
// ABI requires after a CALL. CallErr returns the callee's RAX.
//
// The goroutine is in the runtime's "system call" state for the duration;
// see the package documentation for what the code may and may not do. The
// calling goroutine stays on its OS thread meanwhile, so calls from many
// goroutines run in parallel, each on its own Stack.
//
// Errors: ErrTooManyArgs (len(args) > MaxArgs), ErrNilStack, ErrNilFunc,
// ErrClosed, ErrBusy (s serves another call), and errors.ErrUnsupported
// outside linux on amd64 and arm64; none of them runs any code. It
// allocates nothing.
//
// On arm64 (AAPCS64 §6.8.2) args[i] goes to X0-X5, X6, X7 and X8 (the
// indirect result register) are zero, the code is entered by BLR with SP =
// s.EntrySP() (16-byte aligned) and X30 holding the return address, and
// CallErr returns X0.
func CallErr(fn uintptr, s *Stack, args ...uintptr) (uintptr, error) {
	if len(args) > MaxArgs {
		return 0, fmt.Errorf("%w: got %d", ErrTooManyArgs, len(args))
	}
	if s == nil {
		return 0, ErrNilStack
	}
	if fn == 0 {
		return 0, ErrNilFunc
	}
	if err := s.acquire(); err != nil {
		return 0, err
	}
	var a [MaxArgs]uintptr
	copy(a[:], args)
	r, err := call(fn, s.top, a[0], a[1], a[2], a[3], a[4], a[5])
	s.release()
	runtime.KeepAlive(s)
	return r, err
}
