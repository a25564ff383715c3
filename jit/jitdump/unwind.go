package jitdump

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/frame"
)

// EHFrameOffset returns where perf places .eh_frame relative to the start of
// a function of codeSize bytes in the ELF it synthesizes (genelf.c:
// ALIGN_8(GEN_ELF_TEXT_OFFSET + code_size) with an 8-aligned text offset),
// in bytes: codeSize rounded up to 8. .eh_frame_hdr follows .eh_frame
// directly.
func EHFrameOffset(codeSize uint64) uint64 { return align8(codeSize) }

// Spacing returns how many bytes from a function's start perf's MMAP2 event
// for it covers (jitdump.c: ALIGN_8(code_size) + mapped_size, or code_size
// when mapped_size is 0). The next function a JIT places must start at
// least this far from this one's start, or perf's mappings of the two
// overlap and samples are attributed to the wrong function.
func Spacing(codeSize, mappedSize uint64) uint64 {
	if mappedSize == 0 {
		return codeSize
	}
	return align8(codeSize) + mappedSize
}

// EncodeUnwinding encodes the call frame information of one function whose
// code runs at [codeAddr, codeAddr+codeSize), for a JIT_CODE_UNWINDING_INFO
// record: an .eh_frame (LSB 5.0 section 10.6.1) holding cie and one FDE
// covering the code with the instructions cfi (PCs are byte offsets from
// codeAddr), and an .eh_frame_hdr (LSB section 10.6.2) with its one-entry
// table, both encoded for the layout perf synthesizes: .eh_frame at
// codeAddr + EHFrameOffset(codeSize), .eh_frame_hdr right after it. Every
// pointer is PC- or data-relative (pcrel|sdata4, datarel|sdata4), so the
// bytes are valid wherever perf puts the code. Byte order and address size
// are those of a (x86-64 when nil); the byte order must be the writer's.
//
// Errors wrap [frame.ErrInvalid] (from the encoders) or report an address
// range past 2^64. Cost: O(len(cfi)); allocates the two sections.
func EncodeUnwinding(a *arch.Arch, cie frame.CIE, codeAddr, codeSize uint64, cfi []frame.Insn) (ehFrame, ehFrameHdr []byte, err error) {
	if a == nil {
		a = arch.X86_64
	}
	if codeSize == 0 || codeSize > maxCodeSize {
		return nil, nil, fmt.Errorf("jitdump: code size %#x not in [1, %#x]", codeSize, uint64(maxCodeSize))
	}
	if codeAddr > math.MaxUint64-EHFrameOffset(codeSize)-1<<20 {
		return nil, nil, fmt.Errorf("jitdump: code [%#x, +%#x) too close to the end of the address space", codeAddr, codeSize)
	}
	enc := dwarf.Encoding{Version: 5, Format: dwarf.Format32, AddrSize: uint8(a.PtrSize), ByteOrder: binary.NativeEndian}
	fdes := []frame.FDE{{Start: codeAddr, Size: codeSize, Insns: cfi}}
	ehAddr := codeAddr + EHFrameOffset(codeSize)
	eh, offs, err := frame.EncodeEHFrame(cie, fdes, ehAddr, enc)
	if err != nil {
		return nil, nil, fmt.Errorf("jitdump: .eh_frame: %w", err)
	}
	if len(eh)%4 != 0 {
		return nil, nil, fmt.Errorf("jitdump: .eh_frame of %d bytes is not a multiple of 4", len(eh))
	}
	hdr, err := frame.EncodeEHFrameHdrOrder(binary.NativeEndian, ehAddr+uint64(len(eh)), ehAddr, fdes, offs)
	if err != nil {
		return nil, nil, fmt.Errorf("jitdump: .eh_frame_hdr: %w", err)
	}
	return eh, hdr, nil
}
