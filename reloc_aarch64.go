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
	name := [...]string{
		RelocAArch64Call26:    "R_AARCH64_CALL26",
		RelocAArch64Jump26:    "R_AARCH64_JUMP26",
		RelocAArch64AdrPage21: "R_AARCH64_ADR_PREL_PG_HI21",
		RelocAArch64AddLo12:   "R_AARCH64_ADD_ABS_LO12_NC",
		RelocAArch64Adr21:     "R_AARCH64_ADR_PREL_LO21",
	}[r.Type]
	fail := func(format string, args ...any) error {
		return &LinkError{obj, fmt.Sprintf("%s relocation at %#x to %q: ", name, r.Offset, r.Symbol) + fmt.Sprintf(format, args...)}
	}
	switch {
	case a.Machine != elf.EM_AARCH64:
		return 0, fail("an AArch64 relocation in a %v module", a.Machine)
	case code == nil:
		return 0, fail("instruction relocations are only allowed in Proc.Relocs")
	case r.Offset%4 != 0:
		return 0, fail("offset is not 4-byte aligned")
	case uint64(r.Offset)+4 > uint64(len(code)):
		return 0, fail("runs past the end (%#x bytes)", len(code))
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
