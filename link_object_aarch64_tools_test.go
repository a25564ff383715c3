//go:build linux && amd64

package elfimage_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// TestLinkObjectToolsAArch64 is TestLinkObjectTools for AArch64 objects,
// cross-linked on this host: in every DWARF encoding llvm-dwarfdump
// --verify and eu-elflint --gnu-ld accept the object, aarch64-linux-gnu-gcc
// links it with a C main into a program that runs under qemu-aarch64 (the
// C library of Debian's libc6-arm64-cross) and exits 0 when fib(10) is
// 55, and llvm-dwarfdump --verify accepts the program's DWARF, which the
// linker relocated with the object's R_AARCH64_ABS32 and ABS64 entries.
func TestLinkObjectToolsAArch64(t *testing.T) {
	gcc := tooltest.Require(t, "aarch64-linux-gnu-gcc")
	qemu := tooltest.Require(t, "qemu-aarch64")
	dwarfdump := tooltest.Require(t, "llvm-dwarfdump")
	elflint := tooltest.Require(t, "eu-elflint")
	dir := t.TempDir()
	main := filepath.Join(dir, "main.c")
	if err := os.WriteFile(main, []byte("#include <stdint.h>\nint64_t fib(int64_t);\nint main(void) { return fib(10) != 55; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, e := range encodings {
		t.Run(e.name, func(t *testing.T) {
			opts := e.opts
			opts.DebugFrame = false
			obj := filepath.Join(dir, e.name+".o")
			if err := elfimage.WriteObject(obj, demoObjectAArch64(t), opts); err != nil {
				t.Fatal(err)
			}
			exe := filepath.Join(dir, e.name)
			for _, c := range [][]string{
				{elflint, "--gnu-ld", obj},
				{dwarfdump, "--verify", obj},
				{gcc, "-o", exe, main, obj},
				{qemu, "-L", "/usr/aarch64-linux-gnu", exe},
				{dwarfdump, "--verify", exe},
			} {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				out, err := exec.CommandContext(ctx, c[0], c[1:]...).CombinedOutput()
				cancel()
				if err != nil {
					t.Fatalf("%s: %v\n%s", strings.Join(c, " "), err, out)
				}
				if strings.Contains(string(out), "error") && !strings.Contains(string(out), "No errors") {
					t.Errorf("%s:\n%s", strings.Join(c, " "), out)
				}
			}
		})
	}
}
