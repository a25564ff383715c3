package procview

import (
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/unwind"
)

// UserRegs is the x86-64 general-purpose register set in the kernel's
// struct user_regs_struct order (arch/x86/include/asm/user_64.h): what
// PTRACE_GETREGS fills in and what an ELF core's NT_PRSTATUS note holds in
// elf_prstatus.pr_reg (27 little-endian 8-byte words, 216 bytes). The
// field names are those of golang.org/x/sys/unix.PtraceRegs on amd64, so
// that a *unix.PtraceRegs converts to a *UserRegs there.
type UserRegs struct {
	R15, R14, R13, R12, Rbp, Rbx, R11, R10, R9, R8 uint64
	Rax, Rcx, Rdx, Rsi, Rdi, Orig_rax, Rip, Cs     uint64
	Eflags, Rsp, Ss, Fs_base, Gs_base, Ds, Es, Fs  uint64
	Gs                                             uint64
}

// userRegsSize is the size of struct user_regs_struct in bytes.
const userRegsSize = 27 * 8

// RegsFromUserRegs converts a user_regs_struct register set to DWARF
// numbering (AMD64 psABI section 3.6.2, figure 3.36): rax..r15 as 0..15
// and rip as the return-address column 16. Segment registers, flags and
// orig_rax have no column in CFI and are left out. Cost: O(1).
func RegsFromUserRegs(r *UserRegs) unwind.Regs {
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

// UserPtRegs is the AArch64 general-purpose register set in the kernel's
// struct user_pt_regs order (arch/arm64/include/uapi/asm/ptrace.h): x0 to
// x30, sp, pc and pstate, 34 little-endian 8-byte words (272 bytes), what
// an AArch64 ELF core's NT_PRSTATUS note holds in elf_prstatus.pr_reg and
// PTRACE_GETREGSET NT_PRSTATUS fills in. The field names are those of
// golang.org/x/sys/unix.PtraceRegs on arm64, so that a *unix.PtraceRegs
// converts to a *UserPtRegs there.
type UserPtRegs struct {
	Regs   [31]uint64 // x0..x30 (x29 the frame pointer, x30 the link register)
	Sp     uint64
	Pc     uint64
	Pstate uint64 // the condition flags and modes, gdb's cpsr
}

// userPtRegsSize is the size of struct user_pt_regs in bytes.
const userPtRegsSize = 34 * 8

// RegsFromUserPtRegs converts an AArch64 user_pt_regs register set to
// DWARF numbering (DWARF for the Arm 64-bit Architecture, section 4.1):
// x0..x30 as 0..30 (x30, the link register, is the return-address column
// arch.AArch64_LR: it holds the caller's return address only in a frame
// that has not saved it yet, as the CFI says), sp as 31 and pc as 32
// (arch.AArch64_PC). pstate has no DWARF column and is left out. Cost:
// O(1).
func RegsFromUserPtRegs(r *UserPtRegs) unwind.Regs {
	var regs unwind.Regs
	for i, v := range r.Regs {
		regs.Set(arch.AArch64_X0+arch.Reg(i), v)
	}
	regs.Set(arch.AArch64_SP, r.Sp)
	regs.Set(arch.AArch64_PC, r.Pc)
	return regs
}
