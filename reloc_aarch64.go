package elfimage

import (
	"debug/elf"
	"encoding/binary"
	"fmt"

	"github.com/elfimage/elfimage/arch"
)

// relocAArch64 resolves one AArch64 instruction relocation of the model
// (RelocAArch64Call26 ... RelocAArch64Adr21) at the field address p with
// target value v = S + A: it returns the instruction word of code at
// r.Offset with the relocated field replaced (the other bits kept), or a
// *LinkError naming obj and the offset when the relocation is not in a
// procedure of an AArch64 module, runs past the code, is not 4-byte
// aligned, or its value does not fit the field (AAELF64 §5.7).
func relocAArch64(a *arch.Arch, obj string, code []byte, r Reloc, p uint64, v int64) (uint32, error) {
	if err := checkAArch64(a, obj, code, r); err != nil {
		return 0, err
	}
	fail := func(format string, args ...any) error {
		return &LinkError{obj, fmt.Sprintf("%s relocation at %#x to %q: ", aarch64RelocName(r.Type), r.Offset, r.Symbol) + fmt.Sprintf(format, args...)}
	}
	w := binary.LittleEndian.Uint32(code[r.Offset:])
	d := v - int64(p)
	switch r.Type {
	case RelocAArch64Call26, RelocAArch64Jump26:
		if d%4 != 0 || d < -1<<27 || d >= 1<<27 {
			return 0, fail("distance %#x is not a multiple of 4 within ±128 MiB", d)
		}
		return w&^0x03ffffff | uint32(d>>2)&0x03ffffff, nil
	case RelocAArch64AdrPage21:
		pages := (v&^0xfff - int64(p)&^0xfff) >> 12
		if pages < -1<<20 || pages >= 1<<20 {
			return 0, fail("page distance %#x does not fit 21 bits (±4 GiB)", pages)
		}
		return adrImm(w, pages), nil
	case RelocAArch64AddLo12:
		return w&^(0xfff<<10) | uint32(v&0xfff)<<10, nil
	default: // RelocAArch64Adr21
		if d < -1<<20 || d >= 1<<20 {
			return 0, fail("distance %#x does not fit 21 bits (±1 MiB)", d)
		}
		return adrImm(w, d), nil
	}
}

// adrImm returns the ADR/ADRP word w with its 21-bit immediate
// immhi:immlo (bits 23:5 and 30:29) set to the low 21 bits of imm.
func adrImm(w uint32, imm int64) uint32 {
	u := uint32(imm) & 0x1fffff
	return w&^(3<<29|0x7ffff<<5) | (u&3)<<29 | (u>>2)<<5
}

// aarch64RelocName is the AAELF64 name of the ELF relocation an AArch64
// instruction relocation of the model computes as.
func aarch64RelocName(t RelocType) string {
	switch t {
	case RelocAArch64Call26:
		return "R_AARCH64_CALL26"
	case RelocAArch64Jump26:
		return "R_AARCH64_JUMP26"
	case RelocAArch64AdrPage21:
		return "R_AARCH64_ADR_PREL_PG_HI21"
	case RelocAArch64AddLo12:
		return "R_AARCH64_ADD_ABS_LO12_NC"
	case RelocAArch64Adr21:
		return "R_AARCH64_ADR_PREL_LO21"
	}
	return fmt.Sprintf("relocation type %d", t)
}

// checkAArch64 checks where an AArch64 instruction relocation r of the
// model may be, whoever resolves it (Link, or the system linker for
// LinkObject): in a procedure (code, nil for a datum) of an AArch64
// module, 4-byte aligned, its instruction inside the code. The error is a
// *LinkError naming obj, the relocation's ELF name and its offset.
func checkAArch64(a *arch.Arch, obj string, code []byte, r Reloc) error {
	fail := func(format string, args ...any) error {
		return &LinkError{obj, fmt.Sprintf("%s relocation at %#x to %q: ", aarch64RelocName(r.Type), r.Offset, r.Symbol) + fmt.Sprintf(format, args...)}
	}
	switch {
	case a.Machine != elf.EM_AARCH64:
		return fail("an AArch64 relocation in a %v module", a.Machine)
	case code == nil:
		return fail("instruction relocations are only allowed in Proc.Relocs")
	case r.Offset%4 != 0:
		return fail("offset is not 4-byte aligned")
	case uint64(r.Offset)+4 > uint64(len(code)):
		return fail("runs past the end (%#x bytes)", len(code))
	}
	return nil
}

// clearAArch64Field returns the instruction word w with the field an
// AArch64 instruction relocation of type t patches set to 0 and its other
// bits kept: what an object holds under an ELF relocation (SHT_RELA: the
// addend is in the entry, the linker writes the field).
func clearAArch64Field(t RelocType, w uint32) uint32 {
	switch t {
	case RelocAArch64Call26, RelocAArch64Jump26:
		return w &^ 0x03ffffff
	case RelocAArch64AddLo12:
		return w &^ (0xfff << 10)
	default: // ADRP, ADR
		return adrImm(w, 0)
	}
}
