package main

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/elfobj"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// compareFramesInterp runs dump -frames-interp and readelf -W -wN
// --debug-dump=frames-interp on path and fails on the first differing
// line, or when the exit statuses differ.
func compareFramesInterp(t *testing.T, readelf, path string) {
	t.Helper()
	code, out, errOut := runCLI(t, "dump", "-frames-interp", path)
	want, err := exec.Command(readelf, "-W", "-wN", "--debug-dump=frames-interp", path).Output()
	if err != nil {
		t.Errorf("readelf %s: %v", path, err)
		return
	}
	if code != 0 {
		t.Errorf("%s: exit %d: %s", path, code, errOut)
		return
	}
	if out != string(want) {
		ol, wl := strings.Split(out, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(ol), len(wl)) {
			if ol[i] != wl[i] {
				t.Errorf("%s line %d:\n ours    %q\n readelf %q", path, i+1, ol[i], wl[i])
				break
			}
		}
		t.Errorf("%s: %d lines, readelf %d", path, len(ol), len(wl))
	}
}

// TestFramesInterpForeignObjects: dump -frames-interp prints what readelf
// prints, byte for byte, on relocatable objects of other producers, whose
// .eh_frame and .debug_frame need their relocations applied (FDE
// pc_begin, CIE pointers): Go's debug/elf and debug/dwarf test objects
// for x86-64, i386, AArch64, Arm, MIPS (gcc's CIE starts with
// DW_CFA_def_cfa_register before any CFA, taken as register+0), RISC-V
// (the same CIE shape), Power, s390x and SPARC, in both byte orders and
// both classes; and objects gcc, clang, gcc -m32 (when multilib works)
// and the AArch64 cross gcc write here. 64-bit MIPS objects are the one
// exception: elfobj does not apply MIPS64 relocations (their r_info
// packs three types), and the dump must say so rather than print wrong
// addresses.
func TestFramesInterpForeignObjects(t *testing.T) {
	readelf := tooltest.Require(t, "readelf")
	var files []string
	root := goRoot(t)
	for _, dir := range []string{"src/debug/elf/testdata", "src/debug/dwarf/testdata"} {
		m, _ := filepath.Glob(filepath.Join(root, dir, "*"))
		for _, p := range m {
			if b, err := os.ReadFile(p); err == nil && len(b) > 4 && string(b[:4]) == "\x7fELF" {
				files = append(files, p)
			}
		}
	}
	if len(files) == 0 {
		t.Logf("Go's debug/elf test data is not installed (GOROOT %s)", root)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "f.c")
	if err := os.WriteFile(src, []byte("int g(int);\nint f(int a) { int v[64]; for (int i = 0; i < 64; i++) v[i] = g(i + a); return g(v[a & 63]) + 1; }\nint h(int a) { return a ? f(a - 1) : 0; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	build := func(cc string, flags ...string) {
		out := filepath.Join(dir, fmt.Sprintf("%s%s.o", filepath.Base(cc), strings.Join(flags, "")))
		args := append(append([]string{"-c", "-g"}, flags...), "-o", out, src)
		if msg, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", cc, args, err, msg)
		}
		files = append(files, out)
	}
	gcc := tooltest.Require(t, "gcc")
	build(gcc, "-O2")
	build(gcc, "-O0", "-fno-asynchronous-unwind-tables") // .debug_frame only
	build(gcc, "-O2", "-ffunction-sections")
	build(tooltest.Require(t, "clang-14", "clang"), "-O2")
	if exec.Command(gcc, "-m32", "-c", "-o", filepath.Join(dir, "probe.o"), src).Run() == nil {
		build(gcc, "-m32", "-O2")
	} else {
		t.Log("gcc -m32 does not work here: no i386 object from gcc (Go's i386 objects are compared)")
	}
	if cross := tooltest.Optional(t, "aarch64-linux-gnu-gcc"); cross != "" {
		build(cross, "-O2")
	}
	mips64 := 0
	for _, p := range files {
		f, err := elf.Open(p)
		if err != nil {
			continue // not an ELF file debug/elf reads (the test data has a few on purpose)
		}
		isMIPS64 := f.Machine == elf.EM_MIPS && f.Class == elf.ELFCLASS64 && f.Type == elf.ET_REL
		f.Close()
		if isMIPS64 {
			code, _, errOut := runCLI(t, "dump", "-frames-interp", p)
			if code != 1 || !strings.Contains(errOut, "relocations for EM_MIPS (ELFCLASS64) are not supported") {
				t.Errorf("%s: exit %d, %q; want the MIPS64 relocation error", p, code, errOut)
			}
			mips64++
			continue
		}
		compareFramesInterp(t, readelf, p)
	}
	t.Logf("%d files compared with readelf, %d MIPS64 objects refused", len(files)-mips64, mips64)
}

// TestFramesInterpNoCFI: a file with neither .eh_frame nor .debug_frame
// prints nothing and exits 0, as readelf does.
func TestFramesInterpNoCFI(t *testing.T) {
	readelf := tooltest.Require(t, "readelf")
	w := elfobj.NewWriter(elf.ELFCLASS64, elf.ELFDATA2LSB)
	text := w.AddSection(elf.SectionHeader{Name: ".text", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Addralign: 16})
	w.ReserveFileHeader()
	w.ReserveSectionData(text, 1)
	shstrtab := w.ReserveShstrtab()
	w.ReserveSectionHeaders()
	w.WriteFileHeader(elfobj.FileHeader{Type: elf.ET_REL, Machine: elf.EM_X86_64})
	w.WriteSection(text, []byte{0xc3})
	w.WriteStringTable(shstrtab)
	w.WriteSectionHeaders()
	b, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "nocfi.o")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "dump", "-frames-interp", p)
	if code != 0 || out != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 0 and nothing", code, out, errOut)
	}
	compareFramesInterp(t, readelf, p)
}

// regRange is a range of DWARF register numbers [lo, hi) that binutils
// names for a machine (or, for machines it has no table for, numbers it
// prints as r<N>).
type regRange struct{ lo, hi int }

// TestFramesInterpRegisterNames: for each machine with a binutils register
// table (i386, x86-64, AArch64, RISC-V with its CSRs) and two without
// (Arm, MIPS), files whose CFI names every register number readelf knows
// print the same column headers, CFA rules ("csr4064+0") and register
// rules ("r9 (r9)", "r10" for a number binutils leaves unnamed) as
// readelf, in the machine's class (ELF32 fields 8 digits wide). Each CIE
// starts with DW_CFA_def_cfa_register, the MIPS and RISC-V gcc shape.
func TestFramesInterpRegisterNames(t *testing.T) {
	readelf := tooltest.Require(t, "readelf")
	dir := t.TempDir()
	for _, m := range []struct {
		machine elf.Machine
		class   elf.Class
		order   binary.AppendByteOrder
		ranges  []regRange
	}{
		{elf.EM_386, elf.ELFCLASS32, binary.LittleEndian, []regRange{{0, 101}}},
		{elf.EM_X86_64, elf.ELFCLASS64, binary.LittleEndian, []regRange{{0, 126}}},
		{elf.EM_AARCH64, elf.ELFCLASS64, binary.LittleEndian, []regRange{{0, 128}}},
		{elf.EM_RISCV, elf.ELFCLASS64, binary.LittleEndian, []regRange{{0, 128}, {4096, 4600}, {8100, 8192}}},
		{elf.EM_ARM, elf.ELFCLASS32, binary.LittleEndian, []regRange{{0, 140}}},
		{elf.EM_MIPS, elf.ELFCLASS32, binary.BigEndian, []regRange{{0, 80}}},
	} {
		for _, r := range m.ranges {
			for lo := r.lo; lo < r.hi; lo += 40 {
				hi := min(lo+40, r.hi)
				p := filepath.Join(dir, fmt.Sprintf("%v-%d.o", m.machine, lo))
				if err := os.WriteFile(p, regNamesELF(t, m.machine, m.class, m.order, lo, hi), 0o644); err != nil {
					t.Fatal(err)
				}
				compareFramesInterp(t, readelf, p)
			}
		}
	}
}

// regNamesELF returns an ET_REL file for machine whose .debug_frame has
// one CIE (return-address column lo; DW_CFA_def_cfa_register lo, then
// DW_CFA_offset_extended for every register in [lo, hi)) and one FDE
// that, one address apart, makes each register of [lo, hi) the
// return-address column's DW_CFA_register.
func regNamesELF(t *testing.T, machine elf.Machine, class elf.Class, order binary.AppendByteOrder, lo, hi int) []byte {
	uleb := func(b []byte, v uint64) []byte {
		for {
			c := byte(v & 0x7f)
			v >>= 7
			if v == 0 {
				return append(b, c)
			}
			b = append(b, c|0x80)
		}
	}
	entry := func(body []byte) []byte {
		for (len(body)+4)%4 != 0 {
			body = append(body, 0) // DW_CFA_nop
		}
		return append(order.AppendUint32(nil, uint32(len(body))), body...)
	}
	cie := order.AppendUint32(nil, 0xffffffff)
	cie = append(cie, 3, 0)                   // version 3, augmentation ""
	cie = uleb(cie, 1)                        // code alignment
	cie = append(cie, 0x7c)                   // data alignment -4
	cie = uleb(cie, uint64(lo))               // return-address column
	cie = uleb(append(cie, 0x0d), uint64(lo)) // DW_CFA_def_cfa_register lo
	for r := lo; r < hi; r++ {
		cie = uleb(uleb(append(cie, 0x05), uint64(r)), 1) // DW_CFA_offset_extended r, 1
	}
	fde := order.AppendUint32(nil, 0) // CIE pointer
	if class == elf.ELFCLASS64 {
		fde = order.AppendUint64(order.AppendUint64(fde, 0), 64)
	} else {
		fde = order.AppendUint32(order.AppendUint32(fde, 0), 64)
	}
	for r := lo; r < hi; r++ {
		fde = uleb(uleb(append(fde, 0x41, 0x09), uint64(lo)), uint64(r)) // advance 1; DW_CFA_register ra, r
	}
	data := append(entry(cie), entry(fde)...)
	bo := elf.ELFDATA2LSB
	if order == binary.AppendByteOrder(binary.BigEndian) {
		bo = elf.ELFDATA2MSB
	}
	w := elfobj.NewWriter(class, bo)
	df := w.AddSection(elf.SectionHeader{Name: ".debug_frame", Type: elf.SHT_PROGBITS, Addralign: 4})
	w.ReserveFileHeader()
	w.ReserveSectionData(df, uint64(len(data)))
	shstrtab := w.ReserveShstrtab()
	w.ReserveSectionHeaders()
	w.WriteFileHeader(elfobj.FileHeader{Type: elf.ET_REL, Machine: machine})
	w.WriteSection(df, data)
	w.WriteStringTable(shstrtab)
	w.WriteSectionHeaders()
	b, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// systemSample returns every n'th ELF file (regular, at most maxSize
// bytes) of dir in name order: a deterministic sample.
func systemSample(t *testing.T, dir string, n int, maxSize int64) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Logf("%s: %v", dir, err)
		return nil
	}
	var elfs []string
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil || info.Size() > maxSize || info.Size() < 64 {
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
	sort.Strings(elfs)
	var out []string
	for i := 0; i < len(elfs); i += n {
		out = append(out, elfs[i])
	}
	return out
}

// TestFramesInterpSystemSample: byte for byte as readelf on a sample of
// the ELF files of /usr/bin and /usr/lib/x86_64-linux-gnu (every 25th,
// up to 16 MiB each; which files depends on the machine's packages).
func TestFramesInterpSystemSample(t *testing.T) {
	readelf := tooltest.Require(t, "readelf")
	var files []string
	for _, dir := range []string{"/usr/bin", "/usr/lib/x86_64-linux-gnu"} {
		files = append(files, systemSample(t, dir, 25, 16<<20)...)
	}
	if len(files) < 10 {
		t.Skipf("only %d ELF files sampled from /usr/bin and /usr/lib/x86_64-linux-gnu", len(files))
	}
	files = slices.Compact(files)
	for _, p := range files {
		compareFramesInterp(t, readelf, p)
	}
	t.Logf("%d system files compared", len(files))
}

// goRoot returns `go env GOROOT` of the go command on PATH, whose
// src/debug/elf and src/debug/dwarf test data the tests read.
func goRoot(t *testing.T) string {
	out, err := exec.Command(tooltest.Require(t, "go"), "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	return strings.TrimSpace(string(out))
}
