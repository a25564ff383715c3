package main

import (
	"fmt"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/expr"
	"github.com/elfimage/elfimage/dwarf/frame"
)

// AArch64 registers by number (x0-x30; 31 is sp or xzr by instruction).
const (
	a64X0, a64X1, a64X2 = 0, 1, 2
	a64X8               = 8  // the system call number
	a64X9               = 9  // scratch
	a64VM               = 19 // vm, callee-saved
	a64Data             = 20 // the data pointer, callee-saved
	a64ZR               = 31 // xzr or wzr, in the instructions used here
)

// Linux AArch64 system call numbers (the generic table, asm-generic/unistd.h).
const (
	a64SysRead  = 63
	a64SysWrite = 64
)

// MaxCodeAArch64 is the most code compile emits for AArch64, in bytes: a B
// instruction reaches ±128 MiB, and every branch to a stub, out of a loop
// or back to its head is one. A larger program is a *SyntaxError.
const MaxCodeAArch64 = 128 << 20

// AArch64 condition codes (Arm ARM C1.2.4).
const (
	condEQ = 0x0
	condNE = 0x1
	condHS = 0x2
	condLO = 0x3
	condGE = 0xa
	condLT = 0xb
)

func (a *asm) word(w uint32) {
	a.code = append(a.code, byte(w), byte(w>>8), byte(w>>16), byte(w>>24))
}

// AArch64 encodings (Arm ARM C6), 64-bit forms unless the name says w.
func a64LdrbW(rt, rn int) uint32 { return 0x39400000 | uint32(rn)<<5 | uint32(rt) }
func a64StrbW(rt, rn int) uint32 { return 0x39000000 | uint32(rn)<<5 | uint32(rt) }
func a64AddWImm(rd, rn, imm int) uint32 {
	return 0x11000000 | uint32(imm)<<10 | uint32(rn)<<5 | uint32(rd)
}
func a64AddImm(rd, rn, imm int) uint32 {
	return 0x91000000 | uint32(imm)<<10 | uint32(rn)<<5 | uint32(rd)
}
func a64SubImm(rd, rn, imm int) uint32 {
	return 0xd1000000 | uint32(imm)<<10 | uint32(rn)<<5 | uint32(rd)
}
func a64AddReg(rd, rn, rm int) uint32 {
	return 0x8b000000 | uint32(rm)<<16 | uint32(rn)<<5 | uint32(rd)
}
func a64SubReg(rd, rn, rm int) uint32 {
	return 0xcb000000 | uint32(rm)<<16 | uint32(rn)<<5 | uint32(rd)
}
func a64CmpReg(rn, rm int) uint32  { return 0xeb000000 | uint32(rm)<<16 | uint32(rn)<<5 | a64ZR }
func a64CmpImm(rn, imm int) uint32 { return 0xf1000000 | uint32(imm)<<10 | uint32(rn)<<5 | a64ZR }
func a64CmnImm(rn, imm int) uint32 { return 0xb1000000 | uint32(imm)<<10 | uint32(rn)<<5 | a64ZR }
func a64Movz(rd, imm int) uint32   { return 0xd2800000 | uint32(imm)<<5 | uint32(rd) }
func a64MovzW(rd, imm int) uint32  { return 0x52800000 | uint32(imm)<<5 | uint32(rd) }
func a64Movk16(rd, imm int) uint32 { return 0xf2a00000 | uint32(imm)<<5 | uint32(rd) } // movk rd, #imm, lsl #16
func a64MovReg(rd, rm int) uint32  { return 0xaa0003e0 | uint32(rm)<<16 | uint32(rd) } // orr rd, xzr, rm
func a64Ldr(rt, rn, off int) uint32 {
	return 0xf9400000 | uint32(off/8)<<10 | uint32(rn)<<5 | uint32(rt)
}
func a64Str(rt, rn, off int) uint32 {
	return 0xf9000000 | uint32(off/8)<<10 | uint32(rn)<<5 | uint32(rt)
}
func a64LdrW(rt, rn, off int) uint32 {
	return 0xb9400000 | uint32(off/4)<<10 | uint32(rn)<<5 | uint32(rt)
}
func a64Neg(rd, rm int) uint32 { return a64SubReg(rd, a64ZR, rm) }
func a64B(from, to int) uint32 { return 0x14000000 | uint32((to-from)/4)&0x3ffffff }
func a64BCond(cond uint32, from, to int) uint32 {
	return 0x54000000 | (uint32((to-from)/4)&0x7ffff)<<5 | cond
}
func a64Cbz(rt, from, to int) uint32 {
	return 0x34000000 | (uint32((to-from)/4)&0x7ffff)<<5 | uint32(rt)
} // w
func a64Cbnz(rt, from, to int) uint32 {
	return 0x35000000 | (uint32((to-from)/4)&0x7ffff)<<5 | uint32(rt)
}                          // w
func a64Adr(rd int) uint32 { return 0x10000000 | uint32(rd) } // adr rd, .

const (
	a64StpFrame  = 0xa9be7bfd // stp x29, x30, [sp, #-32]!
	a64MovFP     = 0x910003fd // mov x29, sp
	a64StpSaved  = 0xa90153f3 // stp x19, x20, [sp, #16]
	a64LdpSaved  = 0xa94153f3 // ldp x19, x20, [sp, #16]
	a64LdpFrame  = 0xa8c27bfd // ldp x29, x30, [sp], #32
	a64Ret       = 0xd65f03c0 // ret
	a64Svc0      = 0xd4000001 // svc #0
	a64FrameSize = 32
)

// a64Patch is a B whose target is known later.
type a64Patch struct{ at int }

// jumpLater emits a B to be patched and returns it.
func (a *asm) jumpLater() a64Patch {
	a.word(0x14000000)
	return a64Patch{len(a.code) - 4}
}

func (a *asm) patchB(p a64Patch, target int) {
	w := a64B(p.at, target)
	a.code[p.at], a.code[p.at+1], a.code[p.at+2], a.code[p.at+3] = byte(w), byte(w>>8), byte(w>>16), byte(w>>24)
}

// a64Stub is the out-of-line code that returns a failing command's
// address.
type a64Stub struct {
	branch    a64Patch // the B to the stub
	site      int      // offset of the command's first instruction
	io        bool     // a failed system call: store its errno first
	line, col int
}

// compileAArch64 is Compile for arch.AArch64: the structure of the x86-64
// code, see the package documentation.
func compileAArch64(file string, cmds []command, endLine, endCol int, opts Options) (*elfimage.Proc, error) {
	var a asm
	// Prologue: the frame record (x29, x30) at the bottom of a 32-byte
	// frame, x29 pointing at it, the two callee-saved registers the body
	// uses above it, and the VM's registers: x19 = vm, x20 = vm->data.
	a.at(1, 1, true)
	a.word(a64StpFrame)                          // 0x0
	a.word(a64MovFP)                             // 0x4
	a.word(a64StpSaved)                          // 0x8
	a.word(a64MovReg(a64VM, a64X0))              // 0xc: mov x19, x0
	a.word(a64Ldr(a64Data, a64VM, int(offData))) // 0x10: ldr x20, [x19, #data]
	const vmInX19, bodyStart = 0x10, 0x14
	if len(a.code) != bodyStart {
		panic("bf: AArch64 prologue size")
	}
	var (
		stubs []a64Stub
		loops []a64Patch // each open ['s branch past its ]
		heads []int      // offset of each open loop's body
	)
	// fail emits "branch to a new stub unless cond holds".
	fail := func(ok uint32, site int, io bool, c command) {
		at := len(a.code)
		a.word(a64BCond(ok, at, at+8))
		stubs = append(stubs, a64Stub{branch: a.jumpLater(), site: site, io: io, line: c.line, col: c.col})
	}
	for _, c := range cmds {
		if len(a.code) > MaxCodeAArch64-4096 {
			return nil, &SyntaxError{file, c.line, c.col, fmt.Sprintf("the program needs more than the %d MiB of AArch64 code its branches reach", MaxCodeAArch64>>20)}
		}
		site := len(a.code)
		if (c.op == '+' && byte(c.n) == 0) || (c.op == '>' && c.n == 0) {
			continue // folded to nothing: no code, no row
		}
		a.at(c.line, c.col, true)
		switch c.op {
		case '+':
			a.word(a64LdrbW(a64X9, a64Data))                 // ldrb w9, [x20]
			a.word(a64AddWImm(a64X9, a64X9, int(byte(c.n)))) // add w9, w9, #n
			a.word(a64StrbW(a64X9, a64Data))                 // strb w9, [x20]
		case 'z':
			a.word(a64StrbW(a64ZR, a64Data)) // strb wzr, [x20]
		case '>':
			// Move, then check the pointer against the end of the tape
			// it moved towards, then store it back.
			n := abs(c.n)
			switch {
			case n < 4096 && c.n > 0:
				a.word(a64AddImm(a64Data, a64Data, n)) // add x20, x20, #n
			case n < 4096:
				a.word(a64SubImm(a64Data, a64Data, n)) // sub x20, x20, #n
			default:
				a.word(a64Movz(a64X9, n)) // mov x9, #n (n < TapeLen < 65536)
				if c.n > 0 {
					a.word(a64AddReg(a64Data, a64Data, a64X9)) // add x20, x20, x9
				} else {
					a.word(a64SubReg(a64Data, a64Data, a64X9)) // sub x20, x20, x9
				}
			}
			bound, ok := int(offCells+TapeLen), uint32(condLO)
			if c.n < 0 {
				bound, ok = int(offCells), condHS
			}
			a.word(a64Movz(a64X9, bound))                // mov x9, #bound
			a.word(a64AddReg(a64X9, a64VM, a64X9))       // add x9, x19, x9
			a.word(a64CmpReg(a64Data, a64X9))            // cmp x20, x9
			fail(ok, site, false, c)                     // b.lo/b.hs +8; b stub
			a.word(a64Str(a64Data, a64VM, int(offData))) // str x20, [x19, #data]
		case '[':
			a.word(a64LdrbW(a64X9, a64Data)) // ldrb w9, [x20]
			at := len(a.code)
			a.word(a64Cbnz(a64X9, at, at+8))     // cbnz w9, +8
			loops = append(loops, a.jumpLater()) // b past the matching ]
			heads = append(heads, len(a.code))
		case ']':
			a.word(a64LdrbW(a64X9, a64Data)) // ldrb w9, [x20]
			at := len(a.code)
			a.word(a64Cbz(a64X9, at, at+8)) // cbz w9, +8
			a.word(a64B(len(a.code), heads[len(heads)-1]))
			a.patchB(loops[len(loops)-1], len(a.code))
			loops, heads = loops[:len(loops)-1], heads[:len(heads)-1]
		case '.', ',':
			// write(vm->out, x20, 1) or read(vm->in, x20, 1), again on
			// EINTR; anything but one byte written, or a read error, goes
			// to a stub. A read at the end of the input returns 0 and
			// leaves the cell as it was before the call.
			nr, fd := a64SysWrite, int(offOut)
			if c.op == ',' {
				nr, fd = a64SysRead, int(offIn)
				switch {
				case opts.EOF == 0:
					a.word(a64StrbW(a64ZR, a64Data)) // strb wzr, [x20]
				case opts.EOF != KeepCell:
					a.word(a64MovzW(a64X9, opts.EOF)) // mov w9, #EOF
					a.word(a64StrbW(a64X9, a64Data))  // strb w9, [x20]
				}
			}
			retry := len(a.code)
			a.word(a64Movz(a64X8, nr))                   // mov x8, #nr
			a.word(a64LdrW(a64X0, a64VM, fd))            // ldr w0, [x19, #fd]
			a.word(a64MovReg(a64X1, a64Data))            // mov x1, x20
			a.word(a64Movz(a64X2, 1))                    // mov x2, #1
			a.word(a64Svc0)                              // svc #0
			a.word(a64CmnImm(a64X0, eintr))              // cmn x0, #EINTR
			a.word(a64BCond(condEQ, len(a.code), retry)) // b.eq retry
			ok := uint32(condEQ)
			if c.op == '.' {
				a.word(a64CmpImm(a64X0, 1)) // cmp x0, #1
			} else {
				a.word(a64CmpImm(a64X0, 0)) // cmp x0, #0
				ok = condGE
			}
			fail(ok, site, true, c) // b.eq/b.ge +8; b stub
		}
	}

	// The program ended: return 0. The epilogue restores what the
	// prologue saved; its row is just past the program's last character.
	a.at(endLine, endCol, true)
	a.word(a64Movz(a64X0, 0)) // mov x0, #0
	exit := len(a.code)
	a.word(a64LdpSaved) // ldp x19, x20, [sp, #16]
	a.word(a64LdpFrame) // ldp x29, x30, [sp], #32
	a.word(a64Ret)

	// Stubs, after the ret, in the body's frame: each returns its
	// command's address in x0 (and a failed system call's errno in
	// vm->errno). The address is the stub's own (adr) minus the distance
	// back to the command, which may exceed adr's ±1 MiB.
	stubsStart := len(a.code)
	for _, s := range stubs {
		a.at(s.line, s.col, false)
		a.patchB(s.branch, len(a.code))
		if s.io {
			a.word(a64Neg(a64X0, a64X0))                // neg x0, x0
			a.word(a64Str(a64X0, a64VM, int(offErrno))) // str x0, [x19, #errno]
		}
		d := len(a.code) - s.site
		a.word(a64Adr(a64X0))                  // adr x0, .
		a.word(a64Movz(a64X9, d&0xffff))       // mov x9, #d & 0xffff
		a.word(a64Movk16(a64X9, d>>16))        // movk x9, #d >> 16, lsl #16
		a.word(a64SubReg(a64X0, a64X0, a64X9)) // sub x0, x0, x9
		a.word(a64B(len(a.code), exit))        // b exit
	}
	if len(a.code) > MaxCodeAArch64 {
		return nil, &SyntaxError{file, endLine, endCol, fmt.Sprintf("the program needs more than the %d MiB of AArch64 code its branches reach", MaxCodeAArch64>>20)}
	}
	end := uint32(len(a.code))
	a.lines[1].PrologueEnd = true

	// Call frame information, exact at every instruction, on the CIE's
	// CFA = sp+0 (x30 holds the return address): CFA = sp+32 after the
	// stp that stores the frame record (x29 at CFA-32, x30 at CFA-24),
	// x29+32 once x29 points at it, x19 and x20 at CFA-16 and CFA-8; the
	// epilogue undoes it load by load. The stubs run in the body's
	// frame, after the ret: the row before the epilogue is remembered and
	// restored for them.
	sp, fp, lr := arch.AArch64_SP, arch.AArch64_FP, arch.AArch64_LR
	vmReg, dataReg := arch.Reg(a64VM), arch.Reg(a64Data)
	cfi := []frame.Insn{
		{PC: 4, Op: frame.OpDefCFAOffset, Offset: a64FrameSize}, // after stp x29, x30
		{PC: 4, Op: frame.OpOffset, Reg: fp, Offset: -32},
		{PC: 4, Op: frame.OpOffset, Reg: lr, Offset: -24},
		{PC: 8, Op: frame.OpDefCFARegister, Reg: fp},          // after mov x29, sp
		{PC: 12, Op: frame.OpOffset, Reg: vmReg, Offset: -16}, // after stp x19, x20
		{PC: 12, Op: frame.OpOffset, Reg: dataReg, Offset: -8},
		{PC: uint64(exit + 4), Op: frame.OpRememberState},
		{PC: uint64(exit + 4), Op: frame.OpRestore, Reg: vmReg}, // after ldp x19, x20
		{PC: uint64(exit + 4), Op: frame.OpRestore, Reg: dataReg},
		{PC: uint64(exit + 8), Op: frame.OpDefCFA, Reg: sp, Offset: 0}, // after ldp x29, x30: at ret
		{PC: uint64(exit + 8), Op: frame.OpRestore, Reg: fp},
		{PC: uint64(exit + 8), Op: frame.OpRestore, Reg: lr},
	}
	// vm is in x0 on entry, then in x19 until the epilogue reloads it.
	entry := []elfimage.LiveRange{
		{Start: 0, End: vmInX19, Location: expr.Reg(a64X0)},
		{Start: vmInX19, End: uint32(exit + 4), Location: expr.Reg(vmReg)},
	}
	return programProc(a.code, a.lines, cfi, entry, bodyStart, uint32(exit), len(stubs) > 0, uint32(stubsStart), end, dataReg, vmReg), nil
}
