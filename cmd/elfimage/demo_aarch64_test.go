//go:build linux && amd64

package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/internal/qemutest"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// TestDemoAArch64 cross-builds elfimage for linux/arm64 and runs
// `elfimage demo -o DIR` under qemu-aarch64: the demo compiles the Scheme
// demo for AArch64 (its host), links, loads and runs it, and its run
// section (the program's output and the backtrace with the Scheme frames'
// arguments, lines and locals) is the one the x86-64 demo prints, once
// addresses and the image's offsets, which differ by architecture, are
// masked.
func TestDemoAArch64(t *testing.T) {
	qemu := tooltest.Require(t, "qemu-aarch64")
	dir := t.TempDir()
	bin := qemutest.BuildArm64(t, dir, ".", "elfimage")
	armDir, hostDir := filepath.Join(dir, "arm64"), filepath.Join(dir, "amd64")
	out, err := exec.Command(qemu, bin, "demo", "-o", armDir).CombinedOutput()
	if err != nil {
		t.Fatalf("qemu-aarch64 elfimage demo: %v\n%s", err, out)
	}
	code, hostOut, errOut := runCLI(t, "demo", "-o", hostDir)
	if code != 0 {
		t.Fatalf("demo exited %d: %s", code, errOut)
	}
	addr := regexp.MustCompile(`0x[0-9a-f]+ in |\[demo\.elf\+0x[0-9a-f]+\]`)
	runSection := func(s, dir string) string {
		i, j := strings.Index(s, "== run"), strings.Index(s, "== image")
		if i < 0 || j < i {
			t.Fatalf("demo output has no run section:\n%s", s)
		}
		return addr.ReplaceAllString(strings.ReplaceAll(s[i:j], dir, "DIR"), "ADDR ")
	}
	got, want := runSection(string(out), armDir), runSection(hostOut, hostDir)
	if got != want {
		t.Errorf("AArch64 demo run section\n%s\nwant (x86-64)\n%s", got, want)
	}
	if !strings.Contains(got, "fib(25) = 75025") || !strings.Contains(got, "(inner a=4 b=26)") {
		t.Errorf("AArch64 demo run section lacks the program output or backtrace:\n%s", got)
	}
}
