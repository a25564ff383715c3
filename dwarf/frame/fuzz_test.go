package frame

import (
	"encoding/binary"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
)

// exercise decodes and executes everything in sec; it must never panic.
func exercise(sec *Section) {
	var e Exec
	var row Row
	sec.Bases = Bases{Text: textBase, Data: dataBase, HasText: true, HasData: true}
	sec.Indirect = mapMem{0x50000: 0x123000, 0x50008: 0}
	_ = sec.Entries(func(c *ParsedCIE, f *ParsedFDE) bool {
		if c != nil {
			_, _ = sec.DecodeInsns(c, nil)
			_ = e.InitialRow(sec, c, &row)
			return true
		}
		_, _ = sec.DecodeInsns(nil, f)
		_, _ = Table(f)
		for _, pc := range []uint64{f.Start, f.Start + f.Size/2, f.Start + f.Size - 1} {
			_ = e.RowAt(f, pc, &row)
		}
		return true
	})
	for off := uint64(0); off < uint64(len(sec.Data())) && off < 64; off++ {
		_, _ = sec.CIEAt(off)
		_, _ = sec.FDEAt(off)
		_, _, _ = sec.EntryAt(off)
	}
	var f ParsedFDE
	_ = sec.FindFDE(0x10010, &f)
}

func seedModel() (CIE, []FDE) {
	return StandardCIE(arch.X86_64), testFDEs(0x10000)
}

func FuzzEHFrame(f *testing.F) {
	cie, fdes := seedModel()
	for _, enc := range encodings() {
		b, _, err := EncodeEHFrame(cie, fdes, 0x2000, enc)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, enc.AddrSize == 8, enc.ByteOrder == binary.BigEndian)
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 0, 0, 0, 0}, true, false)
	// Hand-built: every pointer format and application, aligned and
	// indirect pointers, augmentations P, L, R.
	for _, enc := range []dwarf.EHPE{0x00, 0x01, 0x02, 0x03, 0x04, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x1b, 0x23, 0x3b, 0x50, 0x80} {
		s, _, _, _ := buildEH(enc, enc, enc&0x0f|dwarf.DW_EH_PE_funcrel, 0x1234, 0x1234, 0x10)
		f.Add(s.b, true, false)
	}
	f.Fuzz(func(t *testing.T, data []byte, addr8, big bool) {
		as := uint8(4)
		if addr8 {
			as = 8
		}
		var bo binary.ByteOrder = binary.LittleEndian
		if big {
			bo = binary.BigEndian
		}
		exercise(NewEHFrame(data, 0x2000, bo, as))
	})
}

func FuzzDebugFrame(f *testing.F) {
	cie, fdes := seedModel()
	for _, enc := range encodings() {
		b, _, err := EncodeDebugFrame(cie, fdes, enc)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, enc.AddrSize == 8, enc.ByteOrder == binary.BigEndian)
	}
	f.Add(debugFrame64(), true, false)
	f.Add(allInsnsFDE(), true, false)
	f.Fuzz(func(t *testing.T, data []byte, addr8, big bool) {
		as := uint8(4)
		if addr8 {
			as = 8
		}
		var bo binary.ByteOrder = binary.LittleEndian
		if big {
			bo = binary.BigEndian
		}
		exercise(NewDebugFrame(data, bo, as))
	})
}

func FuzzEHFrameHdr(f *testing.F) {
	cie, fdes := seedModel()
	eh, offs, err := EncodeEHFrame(cie, fdes, 0x2000, dwarf.Default64)
	if err != nil {
		f.Fatal(err)
	}
	hdr, err := EncodeEHFrameHdr(0x1000, 0x2000, fdes, offs)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(hdr, eh, uint64(0x10010))
	f.Add(hdr, eh, uint64(0x30040+0x12345))
	f.Add([]byte{1, 0xff, 0xff, 0xff}, eh, uint64(0x10010))
	f.Fuzz(func(t *testing.T, hdr, eh []byte, pc uint64) {
		fi, err := NewFinder(eh, 0x2000, hdr, 0x1000, binary.LittleEndian, 8)
		if err != nil {
			return
		}
		var fde ParsedFDE
		var e Exec
		var row Row
		for _, p := range []uint64{pc, 0x10010, 0x30040 + 0x12345} {
			if fi.FindFDE(p, &fde) == nil {
				if !fde.Contains(p) {
					t.Fatalf("FindFDE(%#x) returned FDE [%#x, +%#x)", p, fde.Start, fde.Size)
				}
				_ = e.RowAt(&fde, p, &row)
			}
		}
	})
}
