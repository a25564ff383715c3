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
