// Package arch holds the per-ABI facts the rest of elfimage needs and nothing
// else: DWARF register numbers, the return-address column, the ELF machine,
// the page size images are aligned to, and the relocation types the loader
// applies. It is the only package that knows which machine an image is for.
//
// Register numbers follow the psABI of each architecture: "System V
// Application Binary Interface, AMD64 Architecture Processor Supplement",
// figure 3.36 "DWARF Register Number Mapping", and "DWARF for the Arm 64-bit
// Architecture (AArch64)", section 4.1.
package arch

import (
	"debug/elf"
	"fmt"
)

// Reg is a DWARF register number as defined by an architecture's psABI.
type Reg uint16

// DWARF register numbers for x86-64 (AMD64 psABI, figure 3.36). Note that the
// DWARF order (RAX, RDX, RCX, RBX, RSI, RDI, RBP, RSP) is not the order of the
// instruction encoding.
const (
	X86_64_RAX Reg = 0
	X86_64_RDX Reg = 1
	X86_64_RCX Reg = 2
	X86_64_RBX Reg = 3
	X86_64_RSI Reg = 4
	X86_64_RDI Reg = 5
	X86_64_RBP Reg = 6
	X86_64_RSP Reg = 7
	X86_64_R8  Reg = 8
	X86_64_R9  Reg = 9
	X86_64_R10 Reg = 10
	X86_64_R11 Reg = 11
	X86_64_R12 Reg = 12
	X86_64_R13 Reg = 13
	X86_64_R14 Reg = 14
	X86_64_R15 Reg = 15
	// X86_64_RA is the return-address column: the psABI gives it the number
	// 16 and calls it the return address (RA); it holds RIP of the caller.
	X86_64_RA Reg = 16
)

// DWARF register numbers for AArch64 (DWARF for the Arm 64-bit Architecture,
// section 4.1): X0..X30 are 0..30, SP is 31.
const (
	AArch64_X0  Reg = 0
	AArch64_FP  Reg = 29 // X29, the frame pointer
	AArch64_LR  Reg = 30 // X30, the link register and return-address column
	AArch64_SP  Reg = 31
	AArch64_PC  Reg = 32 // ELR_mode in the psABI table; used as the pc column by some producers
	AArch64_X30 Reg = AArch64_LR
)

// Arch describes one ABI. The zero value is not useful; use [X86_64] or
// [AArch64], or [ForMachine].
type Arch struct {
	// Name is the conventional name: "x86-64", "aarch64".
	Name string
	// Machine is the ELF e_machine value.
	Machine elf.Machine
	// PtrSize is the size of an address in bytes.
	PtrSize int
	// PageSize is the size in bytes that loadable segments are aligned to
	// in images for this ABI (the smallest page the ABI's kernels use).
	PageSize uint64
	// SP, FP and RA are the DWARF numbers of the stack pointer, the frame
	// pointer and the return-address column.
	SP, FP, RA Reg
	// NumRegs is one more than the largest register number the unwinder
	// tracks (the size of a register set).
	NumRegs int
	// CodeAlign and DataAlign are the CIE code and data alignment factors
	// that writers use for this ABI (DWARF 5 section 6.4.1).
	CodeAlign uint64
	DataAlign int64
	// RelocRelative is the relocation type that asks the loader to store
	// base + addend at an address (R_X86_64_RELATIVE, R_AARCH64_RELATIVE).
	RelocRelative uint32
	// regNames maps register numbers to assembler names.
	regNames []string
}

// X86_64 is the System V AMD64 ABI.
var X86_64 = &Arch{
	Name:          "x86-64",
	Machine:       elf.EM_X86_64,
	PtrSize:       8,
	PageSize:      4096,
	SP:            X86_64_RSP,
	FP:            X86_64_RBP,
	RA:            X86_64_RA,
	NumRegs:       17,
	CodeAlign:     1,
	DataAlign:     -8,
	RelocRelative: uint32(elf.R_X86_64_RELATIVE),
	regNames:      x86_64Names(),
}

// x86_64Names returns the names of the AMD64 psABI DWARF registers 0-66
// (figure 3.36), spelled as binutils spells them: rip (the return
// address), xmm0-15, st0-7, mm0-7, rflags, segment registers, fs.base,
// gs.base, tr, ldtr, mxcsr, fcw, fsw.
func x86_64Names() []string {
	n := []string{"rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
		"r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rip"}
	for i := range 16 {
		n = append(n, fmt.Sprintf("xmm%d", i)) // 17-32
	}
	for i := range 8 {
		n = append(n, fmt.Sprintf("st%d", i)) // 33-40
	}
	for i := range 8 {
		n = append(n, fmt.Sprintf("mm%d", i)) // 41-48
	}
	n = append(n, "rflags", "es", "cs", "ss", "ds", "fs", "gs", "r56", "r57", // 49-57
		"fs.base", "gs.base", "r60", "r61", "tr", "ldtr", "mxcsr", "fcw", "fsw") // 58-66
	return n
}

// AArch64 is the Arm 64-bit ABI (AAPCS64).
//
// PageSize is 4096, the smallest translation granule (Armv8-A supports
// 4 KiB, 16 KiB and 64 KiB pages; Linux picks one at build time: Debian and
// most distributions 4 KiB, Apple silicon under Asahi 16 KiB, some server
// kernels (RHEL 8 and earlier) 64 KiB). Segments with different
// protections cannot share a page, so the loader refuses, with an error
// naming p_offset, an image whose segments are not aligned to the running
// kernel's page size (the larger of PageSize and os.Getpagesize()). For
// 16 KiB or 64 KiB kernels link with a copy of AArch64 whose PageSize is
// that size (65536 serves all three, as GNU ld's -z max-page-size=0x10000
// default for AArch64 does), at the cost of up to that much padding per
// segment in the file; [Host] is such a copy for the running kernel, and
// what the library links to run in this process (its entry image,
// scheme.Compile's modules) uses it. TestLoadPageSizeAArch64 of package elfimage
// checks both under qemu-aarch64 -p 16384 and -p 65536.
var AArch64 = &Arch{
	Name:          "aarch64",
	Machine:       elf.EM_AARCH64,
	PtrSize:       8,
	PageSize:      4096,
	SP:            AArch64_SP,
	FP:            AArch64_FP,
	RA:            AArch64_LR,
	NumRegs:       33,
	CodeAlign:     4,
	DataAlign:     -8,
	RelocRelative: uint32(elf.R_AARCH64_RELATIVE),
	regNames: func() []string {
		n := make([]string, 33)
		for i := range 29 {
			n[i] = fmt.Sprintf("x%d", i)
		}
		n[29], n[30], n[31], n[32] = "x29", "x30", "sp", "pc"
		return n
	}(),
}

// ForMachine returns the Arch for an ELF machine, or nil if elfimage does not
// know it.
func ForMachine(m elf.Machine) *Arch {
	switch m {
	case elf.EM_X86_64:
		return X86_64
	case elf.EM_AARCH64:
		return AArch64
	}
	return nil
}

// RegName returns the assembler name of DWARF register r ("rbp", "x29"), or
// "r<N>" for a number the ABI table does not name.
func (a *Arch) RegName(r Reg) string {
	if int(r) < len(a.regNames) {
		return a.regNames[r]
	}
	return fmt.Sprintf("r%d", r)
}

// NumDWARFRegs is one more than the largest DWARF register number the ABI's
// register mapping defines (x86-64 psABI figure 3.36: 0-66, rax to fsw;
// AArch64 here: 0-32, x0 to pc): numbers at or above it name no register
// of the ABI. It is at least NumRegs.
func (a *Arch) NumDWARFRegs() int { return len(a.regNames) }

// ForGOARCH returns the Arch of a Go GOARCH value ("amd64": [X86_64],
// "arm64": [AArch64]), or nil for any other. ForGOARCH(runtime.GOARCH) is
// the ABI of the running program's own code.
func ForGOARCH(goarch string) *Arch {
	switch goarch {
	case "amd64":
		return X86_64
	case "arm64":
		return AArch64
	}
	return nil
}
