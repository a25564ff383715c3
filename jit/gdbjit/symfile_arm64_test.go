package gdbjit

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// a64Procs: an AArch64 procedure with a frame record, as
//
//	0: stp x29, x30, [sp, #-16]!   4: mov x29, sp
//	...                           24: ldp x29, x30, [sp], #16   28: ret
var a64Procs = []Proc{
	{Name: "framed", Addr: 0x7f0000002000, Size: 32, File: "/src/a.scm", Line: 1, Lines: []Line{{Offset: 8, Line: 2}}, CFI: []frame.Insn{
		{PC: 4, Op: frame.OpDefCFAOffset, Offset: 16},
		{PC: 4, Op: frame.OpOffset, Reg: arch.AArch64_FP, Offset: -16},
		{PC: 4, Op: frame.OpOffset, Reg: arch.AArch64_LR, Offset: -8},
		{PC: 28, Op: frame.OpDefCFAOffset, Offset: 0},
		{PC: 28, Op: frame.OpRestore, Reg: arch.AArch64_FP},
		{PC: 28, Op: frame.OpRestore, Reg: arch.AArch64_LR},
	}},
	{Name: "leaf", Addr: 0x7f0000002020, Size: 8, CFI: []frame.Insn{}},
}

// TestSymfileAArch64: on arm64 a symbol file is EM_AARCH64, its .eh_frame
// SHT_PROGBITS with a CIE whose return-address column is x30 and code
// alignment factor 4, and readelf (a host tool, run natively from under
// qemu-user) prints the rows the CFI describes; llvm-dwarfdump verifies it.
func TestSymfileAArch64(t *testing.T) {
	b, err := Symfile(a64Procs)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if f.Machine != elf.EM_AARCH64 {
		t.Errorf("machine %v, want EM_AARCH64", f.Machine)
	}
	eh := f.Section(".eh_frame")
	if eh == nil || eh.Type != elf.SHT_PROGBITS {
		t.Fatalf(".eh_frame %+v, want SHT_PROGBITS", eh)
	}
	path := filepath.Join(t.TempDir(), "sym.elf")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	re := tooltest.Require(t, "readelf")
	out, err := exec.Command(re, "-wF", path).CombinedOutput()
	if err != nil {
		t.Fatalf("readelf: %v\n%s", err, out)
	}
	s := string(out)
	for _, want := range []string{
		`CIE "zR" cf=4 df=-8 ra=30`,
		"pc=00007f0000002000..00007f0000002020",
		// frames-interp: LOC CFA x29 ra
		"00007f0000002000 sp+0     u     u",
		"00007f0000002004 sp+16    c-16  c-8",
		"00007f000000201c sp+0     u     u",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("readelf output lacks %q:\n%s", want, s)
		}
	}
	dd := tooltest.Require(t, "llvm-dwarfdump", "llvm-dwarfdump-14")
	if out, err := exec.Command(dd, "--verify", path).CombinedOutput(); err != nil {
		t.Errorf("llvm-dwarfdump --verify: %v\n%s", err, out)
	}
}
