package frame

import (
	"debug/elf"
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
			row.copyFrom(e.init())
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

// systemEHFrame returns the .eh_frame and .eh_frame_hdr of an installed
// ELF file with their addresses, or skips.
func systemEHFrame(t testing.TB, path string) (eh []byte, ehAddr uint64, hdr []byte, hdrAddr uint64) {
	f, err := elf.Open(path)
	if err != nil {
		t.Skipf("%s: %v", path, err)
	}
	defer f.Close()
	s, h := f.Section(".eh_frame"), f.Section(".eh_frame_hdr")
	if s == nil || h == nil {
		t.Skipf("%s: no .eh_frame or .eh_frame_hdr", path)
	}
	if eh, err = s.Data(); err == nil {
		hdr, err = h.Data()
	}
	if err != nil {
		t.Fatal(err)
	}
	return eh, s.Addr, hdr, h.Addr
}

// TestFastPathsSystem: on the CFI of installed libraries (libstdc++'s FDEs
// alternate between a "zR" CIE and a "zPLR" one with LSDA pointers),
// every FDE parsed into a reused ParsedFDE equals a fresh parse, and rows
// at the start, middle and end of each FDE equal the general
// interpreter's.
func TestFastPathsSystem(t *testing.T) {
	for _, path := range []string{"/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6"} {
		eh, ehAddr, _, _ := systemEHFrame(t, path)
		sec := NewEHFrame(eh, ehAddr, binary.LittleEndian, 8)
		var reused ParsedFDE
		var e, generic Exec
		generic.generic = true
		var row, want Row
		fast, withLSDA, n := 0, 0, 0
		err := sec.Entries(func(_ *ParsedCIE, f *ParsedFDE) bool {
			if f == nil {
				return true
			}
			n++
			fresh, err := sec.FDEAt(f.Offset)
			if err != nil {
				t.Fatalf("%s: FDEAt(%#x): %v", path, f.Offset, err)
			}
			if reused.cieOK && reused.CIE.Offset == fresh.CIE.Offset && sec.fdeFast(f.Offset, &reused) {
				fast++
				if reused.HasLSDA {
					withLSDA++
				}
			} else if err := sec.fdeAt(f.Offset, &reused); err != nil {
				t.Fatalf("%s: fdeAt(%#x): %v", path, f.Offset, err)
			}
			if !reflect.DeepEqual(reused, fresh) {
				t.Fatalf("%s: FDE %#x into a reused ParsedFDE: %+v; fresh %+v", path, f.Offset, reused, fresh)
			}
			for _, pc := range []uint64{fresh.Start, fresh.Start + fresh.Size/2, fresh.Start + fresh.Size - 1} {
				if !fresh.Contains(pc) {
					continue
				}
				err := e.RowAt(&fresh, pc, &row)
				err2 := generic.RowAt(&fresh, pc, &want)
				if fmt.Sprint(err) != fmt.Sprint(err2) || err == nil && !reflect.DeepEqual(visibleRow(&row), visibleRow(&want)) {
					t.Fatalf("%s: FDE %#x pc %#x: RowAt = %+v, %v; general %+v, %v", path, f.Offset, pc, visibleRow(&row), err, visibleRow(&want), err2)
				}
			}
			return true
		})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		t.Logf("%s: %d FDEs, %d parsed by fdeFast (%d with an LSDA)", path, n, fast, withLSDA)
		if fast < n/3 {
			t.Errorf("%s: fdeFast parsed %d of %d FDEs", path, fast, n)
		}
	}
}

// BenchmarkFindFDERowAtSystem: FindFDE and RowAt at 4,096 pcs spread over
// libstdc++ (every FDE's middle in turn, so consecutive lookups switch
// between its two CIEs as a C++ stack does). ns/op is per lookup.
func BenchmarkFindFDERowAtSystem(b *testing.B) {
	eh, ehAddr, hdr, hdrAddr := systemEHFrame(b, "/usr/lib/x86_64-linux-gnu/libstdc++.so.6")
	fi, err := NewFinder(eh, ehAddr, hdr, hdrAddr, binary.LittleEndian, 8)
	if err != nil {
		b.Fatal(err)
	}
	fdes, err := fi.Sec.FDEs()
	if err != nil || len(fdes) == 0 {
		b.Fatal(len(fdes), err)
	}
	pcs := make([]uint64, 4096)
	for i := range pcs {
		f := &fdes[(i*7919)%len(fdes)]
		for f.Size == 0 {
			f = &fdes[(f.Offset*31+uint64(i))%uint64(len(fdes))]
		}
		pcs[i] = f.Start + f.Size/2
	}
	var e Exec
	var fde ParsedFDE
	var row Row
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		pc := pcs[i&4095]
		i++
		if err := fi.FindFDE(pc, &fde); err != nil {
			b.Fatal(err)
		}
		if err := e.RowAt(&fde, pc, &row); err != nil {
			b.Fatal(err)
		}
	}
}
