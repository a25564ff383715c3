package frame

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/internal/readelf"
)

// TestEHFrameAbsoluteRoundTrip: EncodeEHFrameAbsolute writes the FDE
// pointer encoding DW_EH_PE_absptr in every CIE, and the reader gives back
// the model (ranges, rows, instructions) whatever section address it is
// told, since no pointer depends on it.
func TestEHFrameAbsoluteRoundTrip(t *testing.T) {
	cie := StandardCIE(arch.X86_64)
	signal := cie
	signal.Signal = true
	for _, enc := range encodings() {
		t.Run(fmt.Sprintf("%v-addr%d-%v", enc.Format, enc.AddrSize, enc.ByteOrder), func(t *testing.T) {
			fdes := testFDEs(0x7f000000)
			fdes[1].CIE = &signal
			eh, offs, err := EncodeEHFrameAbsolute(cie, fdes, enc)
			if err != nil {
				t.Fatal(err)
			}
			for _, addr := range []uint64{0, 0x12340000} {
				sec := NewEHFrame(eh, addr, enc.ByteOrder, enc.AddrSize)
				got, err := sec.FDEs()
				if err != nil {
					t.Fatalf("read at %#x: %v", addr, err)
				}
				if len(got) != len(fdes) {
					t.Fatalf("read at %#x: %d FDEs, want %d", addr, len(got), len(fdes))
				}
				for i := range got {
					f := &got[i]
					if f.Offset != offs[i] || f.Start != fdes[i].Start || f.Size != fdes[i].Size {
						t.Errorf("at %#x FDE %d: off %#x [%#x,+%#x), want %#x [%#x,+%#x)", addr, i, f.Offset, f.Start, f.Size, offs[i], fdes[i].Start, fdes[i].Size)
					}
					if !strings.Contains(string(f.CIE.Augmentation), "R") || f.CIE.FDEEnc != dwarf.DW_EH_PE_absptr {
						t.Errorf("FDE %d: CIE augmentation %q, pointer encoding %#x, want R and DW_EH_PE_absptr", i, f.CIE.Augmentation, f.CIE.FDEEnc)
					}
					c := cie
					if fdes[i].CIE != nil {
						c = *fdes[i].CIE
					}
					if f.CIE.Signal != c.Signal {
						t.Errorf("FDE %d: signal %v, want %v", i, f.CIE.Signal, c.Signal)
					}
					rows, err := Table(f)
					if err != nil {
						t.Fatalf("FDE %d: %v", i, err)
					}
					checkRows(t, fmt.Sprintf("FDE %d", i), rows, expectRows(c, fdes[i]))
					checkDecoded(t, sec, f, fdes[i])
				}
			}
		})
	}
}

// TestEHFrameAbsoluteReadelf: readelf reads an absolute .eh_frame in a
// section that is not loaded (as in a JIT symbol file) without complaint
// and prints the rows of Table.
func TestEHFrameAbsoluteReadelf(t *testing.T) {
	cie := StandardCIE(arch.X86_64)
	fdes := testFDEs(0x7f0000010000)
	eh, _, err := EncodeEHFrameAbsolute(cie, fdes, dwarf.Default64)
	if err != nil {
		t.Fatal(err)
	}
	file := readelf.WriteELF(elf.EM_X86_64, []readelf.Section{{Name: ".eh_frame", Data: eh, Align: 8}})
	raw, stderr := readelf.Run(t, file, "-W", "--debug-dump=frames")
	if stderr != "" || strings.Contains(strings.ToLower(raw), "warning") || strings.Contains(raw, "unknown") {
		t.Errorf("readelf --debug-dump=frames complains:\n%s\n%s", stderr, raw)
	}
	text, stderr := readelf.Run(t, file, "-W", "--debug-dump=frames-interp")
	if stderr != "" {
		t.Errorf("readelf stderr: %s", stderr)
	}
	if n := compareWithReadelf(t, NewEHFrame(eh, 0, binary.LittleEndian, 8), text, ".eh_frame", 0); n != len(fdes) {
		t.Errorf("compared %d FDEs, want %d:\n%s", n, len(fdes), text)
	}
}
