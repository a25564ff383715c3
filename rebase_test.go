package elfimage_test

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// rebaseBase is a run-time base like the ones mmap returns on x86-64.
const rebaseBase = 0x7f12_3456_0000

// TestRebaseMovesEveryAddress checks, with Go's debug/elf and debug/dwarf
// as independent readers, that a rebased image is the image moved by
// rebaseBase: every program header, section address, symbol, DWARF
// address, line row and range, for each DWARF encoding.
func TestRebaseMovesEveryAddress(t *testing.T) {
	for _, e := range encodings {
		t.Run(e.name, func(t *testing.T) {
			orig, err := os.ReadFile(writeDemo(t, e.opts))
			if err != nil {
				t.Fatal(err)
			}
			moved, err := elfimage.Rebase(orig, rebaseBase)
			if err != nil {
				t.Fatal(err)
			}
			a, b := openELF(t, orig), openELF(t, moved)
			if b.Entry != a.Entry+rebaseBase {
				t.Errorf("e_entry %#x, want %#x", b.Entry, a.Entry+rebaseBase)
			}
			for i, p := range a.Progs {
				q := b.Progs[i]
				want := p.Vaddr
				switch p.Type {
				case elf.PT_LOAD, elf.PT_DYNAMIC, elf.PT_GNU_EH_FRAME, elf.PT_NOTE:
					want += rebaseBase
				}
				if q.Vaddr != want || q.Paddr != want || q.Off != p.Off || q.Filesz != p.Filesz {
					t.Errorf("program header %d (%v): vaddr %#x paddr %#x off %#x, want vaddr/paddr %#x off %#x", i, p.Type, q.Vaddr, q.Paddr, q.Off, want, p.Off)
				}
			}
			for i, s := range a.Sections {
				want := s.Addr
				if s.Flags&elf.SHF_ALLOC != 0 {
					want += rebaseBase
				}
				if got := b.Sections[i].Addr; got != want {
					t.Errorf("section %s: sh_addr %#x, want %#x", s.Name, got, want)
				}
			}
			symsA, err := a.Symbols()
			if err != nil {
				t.Fatal(err)
			}
			symsB, _ := b.Symbols()
			for i, s := range symsA {
				want := s.Value
				if s.Section != elf.SHN_UNDEF && s.Section < elf.SHN_LORESERVE {
					want += rebaseBase
				}
				if symsB[i].Value != want {
					t.Errorf("symbol %s: %#x, want %#x", s.Name, symsB[i].Value, want)
				}
			}
			checkDWARFMoved(t, a, b)
		})
	}
}

func openELF(t *testing.T, b []byte) *elf.File {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// checkDWARFMoved compares every DIE's low_pc/high_pc and ranges and every
// line row of a and b.
func checkDWARFMoved(t *testing.T, a, b *elf.File) {
	t.Helper()
	da, err := a.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	db, err := b.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	ra, rb := da.Reader(), db.Reader()
	dies, rows := 0, 0
	for {
		ea, err := ra.Next()
		if err != nil {
			t.Fatal(err)
		}
		eb, err := rb.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ea == nil || eb == nil {
			if ea != eb {
				t.Fatal("the DIE trees differ in length")
			}
			break
		}
		if lo, ok := ea.Val(dwarf.AttrLowpc).(uint64); ok {
			if got, _ := eb.Val(dwarf.AttrLowpc).(uint64); got != lo+rebaseBase {
				t.Errorf("DIE at %#x (%v): low_pc %#x, want %#x", ea.Offset, ea.Tag, got, lo+rebaseBase)
			}
		}
		if hi, ok := ea.Val(dwarf.AttrHighpc).(uint64); ok && ea.AttrField(dwarf.AttrHighpc).Class == dwarf.ClassAddress {
			if got, _ := eb.Val(dwarf.AttrHighpc).(uint64); got != hi+rebaseBase {
				t.Errorf("DIE at %#x: high_pc %#x, want %#x", ea.Offset, got, hi+rebaseBase)
			}
		}
		rga, err := da.Ranges(ea)
		if err != nil {
			t.Fatal(err)
		}
		rgb, err := db.Ranges(eb)
		if err != nil {
			t.Fatal(err)
		}
		if len(rga) != len(rgb) {
			t.Fatalf("DIE at %#x: %d ranges, rebased %d", ea.Offset, len(rga), len(rgb))
		}
		for i := range rga {
			if rgb[i][0] != rga[i][0]+rebaseBase || rgb[i][1] != rga[i][1]+rebaseBase {
				t.Errorf("DIE at %#x: range %#x, want %#x moved", ea.Offset, rgb[i], rga[i])
			}
		}
		dies++
		if ea.Tag != dwarf.TagCompileUnit {
			continue
		}
		la, err := da.LineReader(ea)
		if err != nil {
			t.Fatal(err)
		}
		lb, err := db.LineReader(eb)
		if err != nil {
			t.Fatal(err)
		}
		for {
			var x, y dwarf.LineEntry
			errA, errB := la.Next(&x), lb.Next(&y)
			if errA != nil || errB != nil {
				if !errors.Is(errA, errB) {
					t.Fatalf("line tables differ in length: %v / %v", errA, errB)
				}
				break
			}
			if y.Address != x.Address+rebaseBase || y.Line != x.Line || y.Column != x.Column || y.EndSequence != x.EndSequence {
				t.Errorf("line row %d: %#x %d:%d, want %#x %d:%d", rows, y.Address, y.Line, y.Column, x.Address+rebaseBase, x.Line, x.Column)
			}
			rows++
		}
	}
	if dies < 10 || rows < 10 {
		t.Fatalf("only %d DIEs and %d line rows compared", dies, rows)
	}
}

// hexRange matches the address ranges llvm-dwarfdump prints for
// low_pc/high_pc, ranges and location list entries.
var hexRange = regexp.MustCompile(`\[0x([0-9a-f]+), 0x([0-9a-f]+)\)`)

// TestRebaseLLVM checks location lists, range lists and .debug_frame with
// llvm-dwarfdump: the rebased image verifies, and every address range it
// prints is the original's moved by the base.
func TestRebaseLLVM(t *testing.T) {
	dump := tooltest.Require(t, "llvm-dwarfdump")
	for _, e := range encodings {
		t.Run(e.name, func(t *testing.T) {
			path := writeDemo(t, e.opts)
			orig, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			moved, err := elfimage.Rebase(orig, rebaseBase)
			if err != nil {
				t.Fatal(err)
			}
			movedPath := filepath.Join(t.TempDir(), "moved.elf")
			if err := os.WriteFile(movedPath, moved, 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(dump, "--verify", movedPath).CombinedOutput(); err != nil {
				t.Fatalf("llvm-dwarfdump --verify of the rebased image: %v\n%s", err, out)
			}
			ranges := func(p string) [][2]uint64 {
				out, err := exec.Command(dump, "--debug-info", "--debug-frame", p).CombinedOutput()
				if err != nil {
					t.Fatalf("llvm-dwarfdump: %v\n%s", err, out)
				}
				var rs [][2]uint64
				for _, m := range hexRange.FindAllStringSubmatch(string(out), -1) {
					lo, _ := strconv.ParseUint(m[1], 16, 64)
					hi, _ := strconv.ParseUint(m[2], 16, 64)
					rs = append(rs, [2]uint64{lo, hi})
				}
				return rs
			}
			ra, rb := ranges(path), ranges(movedPath)
			if len(ra) != len(rb) || len(ra) < 20 {
				t.Fatalf("%d ranges printed for the image, %d for the rebased one", len(ra), len(rb))
			}
			for i := range ra {
				if rb[i] != [2]uint64{ra[i][0] + rebaseBase, ra[i][1] + rebaseBase} {
					t.Errorf("range %d: %#x, want %#x moved by %#x", i, rb[i], ra[i], rebaseBase)
				}
			}
		})
	}
}

// TestRebaseRefuses checks that Rebase reports a missing or damaged
// rebase table instead of producing a half-moved image.
func TestRebaseRefuses(t *testing.T) {
	orig, err := os.ReadFile(writeDemo(t, elfimage.LinkOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	f := openELF(t, orig)
	s := f.Section(elfimage.SectionRebase)
	if s == nil {
		t.Fatal("no rebase section")
	}
	for _, c := range []struct {
		name  string
		patch func(b []byte)
	}{
		{"version", func(b []byte) { b[s.Offset] = 9 }},
		{"address size", func(b []byte) { b[s.Offset+1] = 4 }},
		{"section name", func(b []byte) { b[s.Offset+2] = 0 }},
		{"renamed", func(b []byte) {
			names := f.Section(".shstrtab")
			i := bytes.Index(orig[names.Offset:names.Offset+names.Size], []byte(elfimage.SectionRebase))
			b[names.Offset+uint64(i)+1] = 'X'
		}},
		{"offset past end", func(b []byte) {
			// The last byte of the table is the last offset delta (one
			// LEB128 byte for the demo): make it large.
			b[s.Offset+s.Size-1] = 0x7f
			b[s.Offset+s.Size-2] |= 0x80
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := bytes.Clone(orig)
			c.patch(b)
			_, err := elfimage.Rebase(b, rebaseBase)
			var fe *elfimage.FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("Rebase: %v, want a *FormatError", err)
			}
			t.Log(err)
		})
	}
}
