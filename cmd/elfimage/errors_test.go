package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTruncatedImageErrors: every command given an image cut short
// fails with exit status 1 and one error line that names the file, the
// field and its offset, as the README promises (a truncated image is the
// commonest damaged input: a copy interrupted, a download cut).
func TestTruncatedImageErrors(t *testing.T) {
	dir := t.TempDir()
	if code, _, e := runCLI(t, "demo", "-o", dir); code != 0 {
		t.Fatal(e)
	}
	data, err := os.ReadFile(filepath.Join(dir, "demo.elf"))
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.elf")
	if err := os.WriteFile(cut, data[:5000], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"run", cut},
		{"describe", cut, "0x1024"},
		{"dump", cut},
		{"symbolize", "-e", cut, "0x1024"},
		{"strip", "-o", filepath.Join(dir, "s.elf"), cut},
	} {
		code, _, e := runCLI(t, args...)
		first, _, _ := strings.Cut(e, "\n")
		prefix := "elfimage " + args[0] + ": " + cut + ": "
		if code != 1 || !strings.HasPrefix(first, prefix) || !strings.Contains(first, " at offset 0x") {
			t.Errorf("%v: exit %d, %q; want exit 1 and an error starting %q naming a field at an offset", args, code, first, prefix)
		}
	}
}
