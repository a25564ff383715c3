package tooltest

import (
	"debug/elf"
	"testing"
)

// Binutils returns the path of the GNU binutils tool name ("objcopy",
// "strip", "objdump") that handles ELF files of machine m, through
// [Require] (a missing tool skips t, or fails it when CI is set). A
// build of GNU binutils handles its own target's files only (Debian's
// objcopy on x86-64 refuses an AArch64 image: "Unable to recognise the
// format of the input file"), and Debian installs each target's tools
// under the target triplet: x86_64-linux-gnu-NAME (package binutils on
// amd64, where NAME is a link to it) and aarch64-linux-gnu-NAME
// (binutils-aarch64-linux-gnu, which gcc-aarch64-linux-gnu brings; on an
// arm64 host, the native tools). For EM_X86_64 the plain NAME is the
// fallback, for hosts that have no triplet names (the plain tools are
// x86-64 on the machines this project runs on); any other machine than
// EM_X86_64 and EM_AARCH64 fails t.
func Binutils(t testing.TB, m elf.Machine, name string) string {
	t.Helper()
	switch m {
	case elf.EM_X86_64:
		return Require(t, "x86_64-linux-gnu-"+name, name)
	case elf.EM_AARCH64:
		return Require(t, "aarch64-linux-gnu-"+name)
	}
	t.Fatalf("tooltest.Binutils: no binutils triplet known for %v", m)
	return ""
}
