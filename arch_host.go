package elfimage

import (
	"github.com/elfimage/elfimage/arch"
)

// hostArch is the ABI of the running program's own code, the default of
// LoadOptions.Arch and the ABI of the entry image: arch.Host(), whose
// PageSize is the running kernel's when that is larger than the ABI's.
var hostArch = arch.Host()

// textFill is the byte that fills the alignment gaps between procedures in
// .text so that a stray jump traps: int3 (0xcc) on x86-64; on AArch64 zero,
// whose every aligned word is UDF #0 (permanently undefined: SIGILL).
func textFill(a *arch.Arch) byte {
	if a.Machine == arch.X86_64.Machine {
		return 0xcc
	}
	return 0
}
