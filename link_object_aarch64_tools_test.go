//go:build linux && amd64

package elfimage_test

import (
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// TestLinkObjectToolsAArch64 is TestLinkObjectTools for AArch64 objects,
// cross-linked on this host (checkObjectTools): aarch64-linux-gnu-gcc links
// each with a C main into a program that runs under qemu-aarch64 (the C
// library of Debian's libc6-arm64-cross), and llvm-dwarfdump --verify
// accepts the program's DWARF, which the linker relocated with the
// object's R_AARCH64_ABS32 and ABS64 entries.
func TestLinkObjectToolsAArch64(t *testing.T) {
	gcc := tooltest.Require(t, "aarch64-linux-gnu-gcc")
	qemu := tooltest.Require(t, "qemu-aarch64")
	checkObjectTools(t, arch.AArch64, gcc, qemu, "-L", "/usr/aarch64-linux-gnu")
}
