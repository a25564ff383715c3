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
// numbering (AMD64 psABI figure 3.36): rax..r15 as 0..15 and rip as the
// return-address column 16. Cost: O(1).
func RegsFromPtrace(r *unix.PtraceRegs) unwind.Regs {
	var regs unwind.Regs
	for _, p := range [...]struct {
		reg arch.Reg
		v   uint64
	}{
		{arch.X86_64_RAX, r.Rax}, {arch.X86_64_RDX, r.Rdx}, {arch.X86_64_RCX, r.Rcx},
		{arch.X86_64_RBX, r.Rbx}, {arch.X86_64_RSI, r.Rsi}, {arch.X86_64_RDI, r.Rdi},
		{arch.X86_64_RBP, r.Rbp}, {arch.X86_64_RSP, r.Rsp},
		{arch.X86_64_R8, r.R8}, {arch.X86_64_R9, r.R9}, {arch.X86_64_R10, r.R10},
		{arch.X86_64_R11, r.R11}, {arch.X86_64_R12, r.R12}, {arch.X86_64_R13, r.R13},
		{arch.X86_64_R14, r.R14}, {arch.X86_64_R15, r.R15}, {arch.X86_64_RA, r.Rip},
	} {
		regs.Set(p.reg, p.v)
	}
	return regs
}
