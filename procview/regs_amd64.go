package procview

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/unwind"
)

// threadRegs reads a stopped thread's registers (PTRACE_GETREGS) as the
// innermost frame, with x86-64 DWARF register numbers (AMD64 psABI section
// 3.6.2, figure 3.36); the return-address column holds rip.
func threadRegs(tid int) (unwind.Frame, error) {
	var r unix.PtraceRegs
	if err := unix.PtraceGetRegs(tid, &r); err != nil {
		return unwind.Frame{}, fmt.Errorf("procview: PTRACE_GETREGS thread %d: %w", tid, err)
	}
	return unwind.FirstFrame(arch.X86_64, r.Rip, RegsFromPtrace(&r)), nil
}

// RegsFromPtrace converts the registers PTRACE_GETREGS returns to DWARF
// numbering (AMD64 psABI figure 3.36), as RegsFromUserRegs does for the
// same struct user_regs_struct: rax..r15 as 0..15 and rip as the
// return-address column 16. Cost: O(1).
func RegsFromPtrace(r *unix.PtraceRegs) unwind.Regs {
	return RegsFromUserRegs((*UserRegs)(r))
}
