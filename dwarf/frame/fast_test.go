package frame

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
)

// TestFastPaths: the FDE parse into a reused ParsedFDE (fdeFast) and the
// CFA interpreter for the common opcodes (runFast) are taken on the CFI
// compilers emit, give what the general decoder gives at every row
// boundary, and hand an FDE with other opcodes (expressions, *_sf) to the
// general interpreter from the first such opcode before the pc on.
func TestFastPaths(t *testing.T) {
	cie, fdes := StandardCIE(arch.X86_64), testFDEs(0x10000)
	eh, offs, err := EncodeEHFrame(cie, fdes, 0x2000, dwarf.Default64)
	if err != nil {
		t.Fatal(err)
	}
	hdr, err := EncodeEHFrameHdr(0x1000, 0x2000, fdes, offs)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := NewFinder(eh, 0x2000, hdr, 0x1000, binary.LittleEndian, 8)
	if err != nil {
		t.Fatal(err)
	}
	var reused ParsedFDE
	var e, generic Exec
	generic.generic = true
	var row, want Row
	fast, declined := 0, 0
	for i, m := range fdes {
		fresh, err := fi.Sec.FDEAt(offs[i])
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			// reused holds FDE i-1, whose CIE is FDE i's.
			if !fi.Sec.fdeFast(offs[i], &reused) {
				t.Fatalf("FDE %d: fdeFast declined a pcrel|sdata4 FDE of a kept CIE", i)
			}
			if !reflect.DeepEqual(reused, fresh) {
				t.Fatalf("FDE %d: fdeFast gave %+v, the general parse %+v", i, reused, fresh)
			}
		}
		if err := fi.FindFDE(m.Start, &reused); err != nil || !reflect.DeepEqual(reused, fresh) {
			t.Fatalf("FDE %d: FindFDE = %+v, %v; want %+v", i, reused, err, fresh)
		}
		var pcs []uint64
		for _, in := range m.Insns {
			for _, d := range []uint64{0, 1} {
				if pc := m.Start + in.PC - d; in.PC >= d && pc-m.Start < m.Size {
					pcs = append(pcs, pc)
				}
			}
		}
		pcs = append(pcs, m.Start, m.Start+m.Size-1)
		for _, pc := range pcs {
			err := e.RowAt(&fresh, pc, &row)
			err2 := generic.RowAt(&fresh, pc, &want)
			if fmt.Sprint(err) != fmt.Sprint(err2) || err == nil && !reflect.DeepEqual(visibleRow(&row), visibleRow(&want)) {
				t.Fatalf("FDE %d pc %#x: RowAt = %+v, %v; general %+v, %v", i, pc, visibleRow(&row), err, visibleRow(&want), err2)
			}
			row.copyFrom(&e.init)
			if e.runFast(&fresh, pc, &row) {
				fast++
				if !reflect.DeepEqual(visibleRow(&row), visibleRow(&want)) {
					t.Fatalf("FDE %d pc %#x: runFast = %+v; general %+v", i, pc, visibleRow(&row), visibleRow(&want))
				}
			} else {
				declined++
			}
		}
	}
	// FDE 0 and 1 are all common opcodes; FDE 2 has val_offset from its
	// first row on.
	if fast < 8 || declined == 0 {
		t.Fatalf("runFast computed %d rows and declined %d: want both paths taken", fast, declined)
	}
}
