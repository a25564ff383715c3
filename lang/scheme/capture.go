package scheme

import (
	"errors"
	"fmt"
	"strings"

	"github.com/elfimage/elfimage/arch"
)

// CaptureKind says why a Capture was taken.
type CaptureKind uint8

const (
	// KindBacktrace is a capture taken by (backtrace); the run continued.
	KindBacktrace CaptureKind = 1
	// KindError is the capture taken by (error ...) or a division by zero;
	// the run ended.
	KindError CaptureKind = 2
	// KindStackOverflow is the capture taken when a prologue found the
	// stack limit crossed; the run ended.
	KindStackOverflow CaptureKind = 3
)

// String returns "backtrace", "error" or "stack overflow".
func (k CaptureKind) String() string {
	switch k {
	case KindBacktrace:
		return "backtrace"
	case KindError:
		return "error"
	case KindStackOverflow:
		return "stack overflow"
	}
	return fmt.Sprintf("CaptureKind(%d)", uint8(k))
}

// Capture is the machine state of a Scheme procedure at a call of the
// runtime's capture routine, enough for a CFI unwinder to walk the stack.
type Capture struct {
	Kind CaptureKind
	// Arch is the ABI of Regs: that of the code that ran (the host's).
	Arch *arch.Arch
	// Regs holds the registers of the procedure that made the call,
	// indexed by DWARF register number of Arch (arch.X86_64_RBP, ...,
	// arch.AArch64_FP, ...). The return-address column (Arch.RA:
	// arch.X86_64_RA, 16; arch.AArch64_LR, x30, also in arch.AArch64_PC)
	// is the pc: the return address of the call, so it points just after
	// the call instruction. The stack pointer is the value after the
	// return. Recorded are rbx, rbp, rsp, r12-r15 and the pc on x86-64;
	// x19-x28, x29, sp and the pc on AArch64; the caller-saved registers
	// are 0.
	Regs [33]uint64
	// StackAddr is the address Stack[0] was copied from (= Regs[RSP]).
	StackAddr uint64
	// Stack is a copy of the stack memory [StackAddr, StackAddr+len),
	// running up to the top of the run's stack unless the copy was capped
	// by RunOptions.CaptureStackSize (then the outermost frames are
	// missing).
	Stack []byte
}

// PC returns the captured pc (Regs[Arch.RA]; Regs[arch.X86_64_RA] when
// Arch is nil).
func (c *Capture) PC() uint64 {
	if c.Arch == nil {
		return c.Regs[arch.X86_64_RA]
	}
	return c.Regs[c.Arch.RA]
}

// ReadStack reads the 8-byte little-endian word at addr from the copied
// stack; ok is false when [addr, addr+8) is outside it. Unwinders use it
// as their memory reader. It allocates nothing.
func (c *Capture) ReadStack(addr uint64) (v uint64, ok bool) {
	if addr < c.StackAddr || addr-c.StackAddr > uint64(len(c.Stack)) || uint64(len(c.Stack))-(addr-c.StackAddr) < 8 {
		return 0, false
	}
	b := c.Stack[addr-c.StackAddr:]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56, true
}

// String prints the kind and the recorded registers (for debugging).
func (c *Capture) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v pc=%#x", c.Kind, c.PC())
	a, regs := arch.X86_64, []arch.Reg{arch.X86_64_RSP, arch.X86_64_RBP, arch.X86_64_RBX, arch.X86_64_R12, arch.X86_64_R13, arch.X86_64_R14, arch.X86_64_R15}
	if c.Arch != nil && c.Arch.Machine == arch.AArch64.Machine {
		a, regs = arch.AArch64, []arch.Reg{arch.AArch64_SP, arch.AArch64_FP, 19, 20, 21, 22, 28}
	}
	for _, r := range regs {
		fmt.Fprintf(&b, " %s=%#x", a.RegName(r), c.Regs[r])
	}
	fmt.Fprintf(&b, " stack=%d bytes", len(c.Stack))
	return b.String()
}

// Error is a run ended by (error "message" value ...) or by a division by
// zero (Message "division by zero", no Args).
type Error struct {
	Message string
	Args    []int64
	// Capture is the state at the call of error (or of the division).
	Capture *Capture
}

// Error returns "scheme: error: message value ...".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("scheme: error: ")
	b.WriteString(e.Message)
	for _, v := range e.Args {
		fmt.Fprintf(&b, " %d", v)
	}
	return b.String()
}

// ErrStackOverflow is matched (errors.Is) by the error Run returns when a
// run exceeds its stack.
var ErrStackOverflow = errors.New("scheme: stack overflow")

// StackOverflowError is a run ended by crossing the stack limit. It
// matches ErrStackOverflow with errors.Is.
type StackOverflowError struct {
	// Capture is the state of the procedure whose prologue found the limit
	// crossed; its Stack holds only the innermost frames.
	Capture *Capture
}

// Error returns the text of ErrStackOverflow.
func (e *StackOverflowError) Error() string { return ErrStackOverflow.Error() }

// Is reports whether target is ErrStackOverflow.
func (e *StackOverflowError) Is(target error) bool { return target == ErrStackOverflow }
