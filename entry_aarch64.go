package elfimage

import (
	"encoding/binary"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/frame"
)

// entryCodeAArch64 is the AArch64 entry routine (native.SetEntry's arm64
// contract), at offsets:
//
//	0:  a9bf7bfd  stp x29, x30, [sp, #-16]!  the trampoline's frame record
//	4:  910003fd  mov x29, sp
//	8:  d63f0200  blr x16                    the function; its entry SP is EntrySP
//	12: a8c17bfd  ldp x29, x30, [sp], #16
//	16: d65f03c0  ret                        to the trampoline, X0 untouched
var entryCodeAArch64 = func() []byte {
	var b []byte
	for _, w := range []uint32{0xa9bf7bfd, 0x910003fd, 0xd63f0200, 0xa8c17bfd, 0xd65f03c0} {
		b = binary.LittleEndian.AppendUint32(b, w)
	}
	return b
}()

// native.EntryRoutineSPOffset and native.SavedSPOffset as they are on
// arm64 (see entryRoutineSPOffsetX86_64).
const (
	entryRoutineSPOffsetAArch64 = 32
	savedSPOffsetAArch64        = 16
)

// entryCFIAArch64 returns the AArch64 entry routine's call frame
// information. At its entry SP is Top-32 (Top-native.EntryRoutineSPOffset)
// and X30 holds the return address into the trampoline; with d the bytes
// pushed since then, every row says: CFA = sp+d (Top-32, the trampoline's
// SP when it called), the caller's sp = [sp+d+16], the word at
// Top-native.SavedSPOffset (DW_CFA_val_expression); between the STP and
// the LDP x29 and x30 (the return address column) are saved at CFA-16 and
// CFA-8, before and after it they are in their registers.
func entryCFIAArch64() []frame.Insn {
	savedSP := func(pc uint64, d int64) frame.Insn {
		off := d + entryRoutineSPOffsetAArch64 - savedSPOffsetAArch64
		e := dwarf.AppendSleb128([]byte{byte(dwarf.DW_OP_breg0) + byte(arch.AArch64_SP)}, off)
		return frame.Insn{PC: pc, Op: frame.OpValExpression, Reg: arch.AArch64_SP, Expr: append(e, byte(dwarf.DW_OP_deref))}
	}
	return []frame.Insn{
		savedSP(0, 0),
		{PC: 4, Op: frame.OpDefCFAOffset, Reg: arch.AArch64_SP, Offset: 16},
		{PC: 4, Op: frame.OpOffset, Reg: arch.AArch64_FP, Offset: -16},
		{PC: 4, Op: frame.OpOffset, Reg: arch.AArch64_LR, Offset: -8},
		savedSP(4, 16),
		{PC: 16, Op: frame.OpDefCFAOffset, Reg: arch.AArch64_SP, Offset: 0},
		{PC: 16, Op: frame.OpRestore, Reg: arch.AArch64_FP},
		{PC: 16, Op: frame.OpRestore, Reg: arch.AArch64_LR},
		savedSP(16, 0),
	}
}
