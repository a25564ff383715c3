package frame

import (
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/internal/readelf"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// systemFiles are binaries and shared libraries commonly installed on
// Debian-like x86-64 systems, written by GCC and binutils, not by us. The
// list is fixed (deterministic); missing files are skipped and at least 20
// must be present. Very large files (gdb, python3, libLLVM, libcrypto) are
// left out to keep the test fast.
var systemFiles = []string{
	"/usr/bin/ls", "/usr/bin/cat", "/usr/bin/cp", "/usr/bin/mv", "/usr/bin/grep",
	"/usr/bin/sed", "/usr/bin/tar", "/usr/bin/gzip", "/usr/bin/find", "/usr/bin/bash",
	"/usr/bin/sort", "/usr/bin/diff", "/usr/bin/xargs", "/usr/bin/du", "/usr/bin/df",
	"/usr/bin/stat", "/usr/bin/readelf", "/usr/bin/objdump", "/usr/bin/addr2line", "/usr/bin/make",
	"/usr/lib/x86_64-linux-gnu/libc.so.6",
	"/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
	"/usr/lib/x86_64-linux-gnu/libz.so.1",
	"/usr/lib/x86_64-linux-gnu/libgcc_s.so.1",
	"/usr/lib/x86_64-linux-gnu/libm.so.6",
	"/usr/lib/x86_64-linux-gnu/liblzma.so.5",
	"/usr/lib/x86_64-linux-gnu/libexpat.so.1",
	"/usr/lib/x86_64-linux-gnu/libselinux.so.1",
	"/usr/lib/x86_64-linux-gnu/libpcre2-8.so.0",
	"/usr/lib/x86_64-linux-gnu/libzstd.so.1",
	"/usr/lib/x86_64-linux-gnu/libssl.so.3",
	"/usr/lib/x86_64-linux-gnu/libgmp.so.10",
	"/usr/lib/x86_64-linux-gnu/libmpfr.so.6",
	"/usr/lib/x86_64-linux-gnu/libbz2.so.1.0",
	"/usr/lib/x86_64-linux-gnu/libtinfo.so.6",
	"/usr/lib/x86_64-linux-gnu/libudev.so.1",
	"/usr/lib/x86_64-linux-gnu/libseccomp.so.2",
	"/usr/lib/x86_64-linux-gnu/liblz4.so.1",
	"/usr/lib/x86_64-linux-gnu/libgpg-error.so.0",
}

// TestReadelfSystemBinaries is the must-show of issue 5: for at least 20
// binaries and libraries on the machine, every CIE's initial row and every
// row of every FDE in .eh_frame (and .debug_frame when present) equals
// readelf --debug-dump=frames-interp: location, CFA rule, every register
// rule, the set of register columns; every FDE's range and CIE; and every
// FDE is found through .eh_frame_hdr's table for its first and last byte.
func TestReadelfSystemBinaries(t *testing.T) {
	tooltest.Require(t, "readelf")
	var present []string
	for _, p := range systemFiles {
		if _, err := os.Stat(p); err == nil {
			present = append(present, p)
		}
	}
	if len(present) < 20 {
		t.Fatalf("only %d of the %d candidate system files exist; need 20: %v", len(present), len(systemFiles), present)
	}
	// And a deterministic sample of whatever else the machine has: every
	// 40th ELF file of /usr/bin and /usr/lib/x86_64-linux-gnu (at most 16
	// MiB each, x86-64 only; those without CFI are skipped).
	listed := map[string]bool{}
	for _, p := range present {
		listed[p] = true
	}
	var sampled []string
	for _, dir := range []string{"/usr/bin", "/usr/lib/x86_64-linux-gnu"} {
		for _, p := range sampleELFs(dir, 40, 16<<20) {
			if !listed[p] {
				sampled = append(sampled, p)
			}
		}
	}
	t.Run("group", func(t *testing.T) {
		for _, p := range present {
			t.Run(filepath.Base(p), func(t *testing.T) {
				t.Parallel()
				checkFileAgainstReadelf(t, p, true)
			})
		}
		for _, p := range sampled {
			t.Run("sample/"+filepath.Base(p), func(t *testing.T) {
				t.Parallel()
				checkFileAgainstReadelf(t, p, true)
			})
		}
	})
	t.Logf("%d listed and %d sampled files", len(present), len(sampled))
}

// sampleELFs returns every n'th regular ELF file of at most maxSize bytes
// in dir, in name order.
func sampleELFs(dir string, n int, maxSize int64) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var elfs []string
	for _, e := range ents {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() || info.Size() > maxSize || info.Size() < 64 {
			continue
		}
		p := filepath.Join(dir, e.Name())
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		var magic [4]byte
		_, err = f.ReadAt(magic[:], 0)
		f.Close()
		if err == nil && string(magic[:]) == "\x7fELF" {
			elfs = append(elfs, p)
		}
	}
	var out []string
	for i := 0; i < len(elfs); i += n {
		out = append(out, elfs[i])
	}
	return out
}

// TestReadelfGoDebugFrame compares the .debug_frame (compressed, 32-bit
// DWARF, CIE version 3, no augmentation) the Go linker writes, another
// producer than GCC, on a small program built here.
func TestReadelfGoDebugFrame(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Go program")
	}
	tooltest.Require(t, "readelf")
	dir := t.TempDir()
	src := filepath.Join(dir, "hello.go")
	if err := os.WriteFile(src, []byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "hello")
	goBin := tooltest.Require(t, "go")
	cmd := exec.Command(goBin, "build", "-o", exe, src)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	checkFileAgainstReadelf(t, exe, false)
}

type counts struct{ cies, fdes, rows int }

// checkFileAgainstReadelf runs the comparison on one ELF file.
func checkFileAgainstReadelf(t *testing.T, path string, wantHdr bool) {
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 {
		t.Skipf("%s: machine %v", path, f.Machine)
	}
	text, _ := readelf.Run(t, nil, "-W", "-wN", "--debug-dump=frames-interp", path)
	entries, err := readelf.ParseFramesInterp(text)
	if err != nil {
		t.Fatal(err)
	}
	var total counts
	compared := 0
	for _, name := range []string{".eh_frame", ".debug_frame"} {
		s := f.Section(name)
		if s == nil || s.Type == elf.SHT_NOBITS {
			continue
		}
		data, err := s.Data() // decompresses SHF_COMPRESSED sections
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var sec *Section
		if name == ".eh_frame" {
			sec = NewEHFrame(data, s.Addr, f.ByteOrder, 8)
		} else {
			sec = NewDebugFrame(data, f.ByteOrder, 8)
		}
		c := compareSectionWithReadelf(t, sec, entries, name)
		total.cies += c.cies
		total.fdes += c.fdes
		total.rows += c.rows
		compared++
		if name == ".eh_frame" && wantHdr {
			checkHdrFindsAll(t, f, sec)
		}
	}
	if compared == 0 || total.fdes == 0 {
		if strings.Contains(t.Name(), "/sample/") {
			t.Skipf("%s: no CFI", path)
		}
		t.Fatalf("%s: no FDEs compared", path)
	}
	t.Logf("%s: %d CIEs, %d FDEs, %d rows equal readelf's", path, total.cies, total.fdes, total.rows)
}

// regColumns maps readelf's x86-64 column headers to DWARF registers.
var regColumns = func() map[string]arch.Reg {
	m := map[string]arch.Reg{}
	for r := 0; r < 130; r++ {
		m[readelf.X86_64RegName(r)] = arch.Reg(r)
	}
	return m
}()

func compareSectionWithReadelf(t *testing.T, sec *Section, entries []readelf.InterpEntry, name string) counts {
	t.Helper()
	byOff := map[uint64]*readelf.InterpEntry{}
	for i := range entries {
		if entries[i].Section == name {
			byOff[entries[i].Offset] = &entries[i]
		}
	}
	var c counts
	var e Exec
	var row Row
	errs := 0
	fail := func(format string, args ...any) {
		t.Helper()
		errs++
		if errs <= 20 {
			t.Errorf(format, args...)
		}
	}
	err := sec.Entries(func(cie *ParsedCIE, fde *ParsedFDE) bool {
		off := uint64(0)
		if cie != nil {
			off = cie.Offset
		} else {
			off = fde.Offset
		}
		re, ok := byOff[off]
		if !ok {
			fail("%s entry %#x not printed by readelf", name, off)
			return true
		}
		delete(byOff, off)
		if cie != nil {
			c.cies++
			if !re.IsCIE {
				fail("%s %#x: CIE, readelf says FDE", name, off)
				return true
			}
			if err := e.InitialRow(sec, cie, &row); err != nil {
				fail("%s CIE %#x: %v", name, off, err)
				return true
			}
			if len(re.Rows) == 0 {
				checkAllNops(fail, sec, cie, nil, name, off)
				return true
			}
			rows := []Row{row}
			c.rows += compareTable(fail, name, off, cie.RA, rows, re)
			return true
		}
		c.fdes++
		if re.IsCIE {
			fail("%s %#x: FDE, readelf says CIE", name, off)
			return true
		}
		if re.PCBegin != fde.Start || re.PCEnd != fde.Start+fde.Size {
			fail("%s FDE %#x: [%#x, %#x), readelf [%#x, %#x)", name, off, fde.Start, fde.Start+fde.Size, re.PCBegin, re.PCEnd)
		}
		if re.CIEOffset != fde.CIE.Offset {
			fail("%s FDE %#x: CIE %#x, readelf %#x", name, off, fde.CIE.Offset, re.CIEOffset)
		}
		rows, err := Table(fde)
		if err != nil {
			fail("%s FDE %#x: Table: %v", name, off, err)
			return true
		}
		if len(re.Rows) == 0 {
			checkAllNops(fail, sec, nil, fde, name, off)
			return true
		}
		c.rows += compareTable(fail, name, off, fde.CIE.RA, rows, re)
		return true
	})
	if err != nil {
		t.Errorf("%s: Entries: %v", name, err)
	}
	for off := range byOff {
		fail("%s: readelf printed entry %#x, which we did not read", name, off)
	}
	return c
}

// compareTable compares our rows with readelf's: the same number, and for
// each the location and every column; and the register columns readelf
// shows are exactly the registers our rows give rules for.
func compareTable(fail func(string, ...any), name string, off uint64, ra arch.Reg, rows []Row, re *readelf.InterpEntry) int {
	if len(rows) != len(re.Rows) {
		fail("%s entry %#x: %d rows, readelf %d", name, off, len(rows), len(re.Rows))
		return 0
	}
	// Columns: ours are every register a rule was given for, in number
	// order, with the return-address column printed as "ra".
	seen := map[arch.Reg]bool{}
	for i := range rows {
		for j := 0; j < rows[i].NumRules(); j++ {
			r, _ := rows[i].RuleAt(j)
			seen[r] = true
		}
	}
	var regs []int
	for r := range seen {
		regs = append(regs, int(r))
	}
	sort.Ints(regs)
	want := []string{"CFA"}
	for _, r := range regs {
		if arch.Reg(r) == ra {
			want = append(want, "ra")
		} else {
			want = append(want, readelf.X86_64RegName(r))
		}
	}
	if !equalStrings(want, re.Columns) {
		fail("%s entry %#x: columns %v, readelf %v", name, off, want, re.Columns)
	}
	for i, w := range re.Rows {
		got := &rows[i]
		if got.Loc != w.Loc {
			fail("%s entry %#x row %d: loc %#x, readelf %#x", name, off, i, got.Loc, w.Loc)
		}
		for col, wr := range w.Cols {
			var g string
			switch col {
			case "CFA":
				g = got.CFA.Format(x86Name)
			case "ra":
				g = got.Rule(ra).Format(x86Name)
			default:
				reg, ok := regColumns[col]
				if !ok {
					fail("%s entry %#x: unknown readelf column %q", name, off, col)
					continue
				}
				g = got.Rule(reg).Format(x86Name)
			}
			if g != wr {
				fail("%s entry %#x row %d (loc %#x) column %s: %q, readelf %q", name, off, i, got.Loc, col, g, wr)
			}
		}
	}
	return len(rows)
}

// checkAllNops checks the instructions of a CIE or FDE for which readelf
// printed no table: readelf does so only when all are DW_CFA_nop.
func checkAllNops(fail func(string, ...any), sec *Section, cie *ParsedCIE, fde *ParsedFDE, name string, off uint64) {
	ins, err := sec.DecodeInsns(cie, fde)
	if err != nil {
		fail("%s entry %#x: %v", name, off, err)
	}
	for _, d := range ins {
		if d.Op != OpNop {
			fail("%s entry %#x: readelf printed no rows but instruction %v at %#x is not a nop", name, off, d.Code, d.Off)
			return
		}
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// checkHdrFindsAll finds every FDE of sec through the file's .eh_frame_hdr
// table, for its first and last byte, and checks a pc just past the end
// of the last FDE is a miss or another FDE.
func checkHdrFindsAll(t *testing.T, f *elf.File, sec *Section) {
	hs := f.Section(".eh_frame_hdr")
	if hs == nil {
		return
	}
	hd, err := hs.Data()
	if err != nil {
		t.Fatal(err)
	}
	fi, err := NewFinder(sec.Data(), sec.Addr(), hd, hs.Addr, binary.LittleEndian, 8)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Hdr.HasTable() {
		t.Fatal(".eh_frame_hdr has no binary search table")
	}
	fdes, err := sec.FDEs()
	if err != nil {
		t.Fatal(err)
	}
	var got ParsedFDE
	for _, want := range fdes {
		if want.Size == 0 {
			continue
		}
		for _, pc := range []uint64{want.Start, want.Start + want.Size - 1} {
			if err := fi.FindFDE(pc, &got); err != nil {
				t.Fatalf("FindFDE(%#x): %v", pc, err)
			}
			if got.Offset != want.Offset {
				t.Fatalf("FindFDE(%#x) = FDE %#x, want %#x", pc, got.Offset, want.Offset)
			}
		}
	}
}
