package arch

import (
	"testing"

	"github.com/elfimage/elfimage/internal/readelf"
)

// TestX86_64Names: our register names are binutils' (readelf prints
// frames-interp columns with them).
func TestX86_64Names(t *testing.T) {
	for r := 0; r <= 66; r++ {
		want := readelf.X86_64RegName(r)
		if got := X86_64.RegName(Reg(r)); got != want {
			t.Errorf("register %d: %q, readelf %q", r, got, want)
		}
	}
	if X86_64.RegName(200) != "r200" {
		t.Error("unknown register name")
	}
}

// TestAArch64 checks the AArch64 facts the unwinder relies on.
func TestAArch64(t *testing.T) {
	a := AArch64
	if a.SP != 31 || a.RA != 30 || a.FP != 29 || a.CodeAlign != 4 || a.DataAlign != -8 || a.PtrSize != 8 || a.NumRegs != 33 {
		t.Fatalf("%+v", a)
	}
	for r, n := range map[Reg]string{0: "x0", 7: "x7", 29: "x29", 30: "x30", 31: "sp"} {
		if a.RegName(r) != n {
			t.Errorf("register %d: %q, want %q", r, a.RegName(r), n)
		}
	}
}

func TestForGOARCH(t *testing.T) {
	if ForGOARCH("amd64") != X86_64 || ForGOARCH("arm64") != AArch64 || ForGOARCH("riscv64") != nil {
		t.Errorf("ForGOARCH: amd64 %v, arm64 %v, riscv64 %v", ForGOARCH("amd64"), ForGOARCH("arm64"), ForGOARCH("riscv64"))
	}
	if a := ForGOARCH("arm64"); a.RA != AArch64_X30 || a.Machine.String() != "EM_AARCH64" || a.RelocRelative != 1027 {
		t.Errorf("AArch64: RA %d, machine %v, RELATIVE %d; want x30, EM_AARCH64, R_AARCH64_RELATIVE (1027)", a.RA, a.Machine, a.RelocRelative)
	}
}
