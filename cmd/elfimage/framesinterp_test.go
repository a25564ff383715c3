package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/internal/tooltest"
)

// TestDumpFramesInterp: dump -frames-interp prints, byte for byte, what
// readelf --debug-dump=frames-interp prints, on system files written by
// GCC and on our own images (.eh_frame, and .debug_frame in 64-bit DWARF).
func TestDumpFramesInterp(t *testing.T) {
	readelf := tooltest.Require(t, "readelf")
	dir := t.TempDir()
	if code, _, errOut := runCLI(t, "demo", "-o", dir); code != 0 {
		t.Fatal(errOut)
	}
	df := filepath.Join(dir, "df.elf")
	if code, _, errOut := runCLI(t, "build", filepath.Join(dir, "demo.scm"), "-o", df, "-debug-frame", "-dwarf64"); code != 0 {
		t.Fatal(errOut)
	}
	files := []string{filepath.Join(dir, "demo.elf"), df}
	for _, p := range []string{"/usr/bin/ls", "/usr/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/x86_64-linux-gnu/libc.so.6"} {
		if _, err := os.Stat(p); err == nil {
			files = append(files, p)
		}
	}
	for _, p := range files {
		code, out, errOut := runCLI(t, "dump", "--frames-interp", p)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", p, code, errOut)
		}
		want, err := exec.Command(readelf, "-W", "-wN", "--debug-dump=frames-interp", p).Output()
		if err != nil {
			t.Fatalf("readelf %s: %v", p, err)
		}
		if out != string(want) {
			ol, wl := strings.Split(out, "\n"), strings.Split(string(want), "\n")
			for i := range min(len(ol), len(wl)) {
				if ol[i] != wl[i] {
					t.Errorf("%s line %d:\n ours    %q\n readelf %q", p, i+1, ol[i], wl[i])
					break
				}
			}
			t.Errorf("%s: %d lines, readelf %d", p, len(ol), len(wl))
		}
		if p == df && !strings.Contains(out, "Contents of the .debug_frame section:") {
			t.Errorf("%s: no .debug_frame", p)
		}
	}
	if code, _, _ := runCLI(t, "dump", "--frames-interp", filepath.Join(dir, "demo.scm")); code != 1 {
		t.Errorf("not an ELF file: exit %d, want 1", code)
	}
}
