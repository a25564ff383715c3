package elfimage_test

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/elfimage/elfimage/arch"
	edwarf "github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/frame"
)

// ehFrame32 builds a 32-bit-address .eh_frame: one CIE "zR" with FDE
// pointer encoding pcrel|sdata4, one FDE whose initial_location is
// initLoc (relative to its own field at section offset 28) and range
// 0x40, and the zero terminator.
func ehFrame32(initLoc int32) []byte {
	le := binary.LittleEndian
	var b []byte
	b = le.AppendUint32(b, 16) // CIE length
	b = le.AppendUint32(b, 0)  // CIE id
	b = append(b, 1, 'z', 'R', 0, 1, 0x7c, 8, 1, byte(edwarf.DW_EH_PE_pcrel|edwarf.DW_EH_PE_sdata4))
	b = append(b, byte(edwarf.DW_CFA_def_cfa), 4, 4)
	b = le.AppendUint32(b, 16) // FDE length
	b = le.AppendUint32(b, 24) // CIE pointer: back to offset 0 from offset 24
	b = le.AppendUint32(b, uint32(initLoc))
	b = le.AppendUint32(b, 0x40) // address_range
	b = append(b, 0, 0, 0, 0)    // augmentation data length 0, 3 nops
	return le.AppendUint32(b, 0)
}

// TestTrapSdata4On32Bit (REFERENCE.md, CFI): a DW_EH_PE_sdata4 value on a
// 32-bit target is sign-extended, added to its base and truncated to the
// address width.
func TestTrapSdata4On32Bit(t *testing.T) {
	const secAddr = 0x1000
	b := ehFrame32(-0x2000)
	sec := frame.NewEHFrame(b, secAddr, binary.LittleEndian, 4)
	fdes, err := sec.FDEs()
	if err != nil {
		t.Fatal(err)
	}
	base := uint64(secAddr + 28)
	sum := base - 0x2000     // wraps below 0
	want := sum & 0xffffffff // 0xfffff01c
	if len(fdes) != 1 || fdes[0].Start != want || fdes[0].Size != 0x40 {
		t.Fatalf("FDEs = %+v, want one at %#x", fdes, want)
	}
	var got frame.ParsedFDE
	if err := sec.FindFDE(want+4, &got); err != nil || got.Start != want {
		t.Errorf("FindFDE(%#x) = %#x, %v", want+4, got.Start, err)
	}
	// The same bytes read with 8-byte addresses keep the 64-bit sum.
	fdes, err = frame.NewEHFrame(b, secAddr, binary.LittleEndian, 8).FDEs()
	if err != nil || len(fdes) != 1 || fdes[0].Start != sum {
		t.Errorf("8-byte addresses: %+v, %v", fdes, err)
	}
}

// TestTrapEHFrameHdrCoverage (REFERENCE.md, CFI): an FDE found through the
// .eh_frame_hdr table must still cover the pc: the pc past the only FDE
// is a miss, not that FDE.
func TestTrapEHFrameHdrCoverage(t *testing.T) {
	cie := frame.StandardCIE(arch.X86_64)
	fdes := []frame.FDE{{Start: 0x1000, Size: 0x10}}
	const ehAddr, hdrAddr = 0x3000, 0x2000
	enc := edwarf.Default64
	eh, offs, err := frame.EncodeEHFrame(cie, fdes, ehAddr, enc)
	if err != nil {
		t.Fatal(err)
	}
	hdr, err := frame.EncodeEHFrameHdr(hdrAddr, ehAddr, fdes, offs)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := frame.NewFinder(eh, ehAddr, hdr, hdrAddr, binary.LittleEndian, 8)
	if err != nil {
		t.Fatal(err)
	}
	var got frame.ParsedFDE
	if err := fi.FindFDE(0x100f, &got); err != nil || got.Start != 0x1000 {
		t.Errorf("FindFDE(0x100f) = %#x, %v", got.Start, err)
	}
	for _, pc := range []uint64{0x1010, 0x5000, 0xfff} {
		if err := fi.FindFDE(pc, &got); !errors.Is(err, frame.ErrNoFDE) {
			t.Errorf("FindFDE(%#x): %v, want ErrNoFDE", pc, err)
		}
	}
}
