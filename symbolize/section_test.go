package symbolize_test

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/elfimage/elfimage/internal/tooltest"
	"github.com/elfimage/elfimage/symbolize"
)

// TestSection: Section returns what debug/elf reads for every section of
// a Go binary, whose debug sections are compressed (zlib), decompressed;
// and sh_addr.
func TestSection(t *testing.T) {
	goTool := tooltest.Require(t, "go")
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() { println(\"hi\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "hi")
	if out, err := exec.Command(goTool, "build", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ef, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	s, err := symbolize.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	compressed := 0
	for _, sec := range ef.Sections {
		if sec.Type == elf.SHT_NOBITS || sec.Name == "" {
			continue
		}
		want, err := sec.Data()
		if err != nil {
			t.Fatal(err)
		}
		got, addr, err := s.Section(sec.Name)
		if err != nil || !bytes.Equal(got, want) || addr != sec.Addr {
			t.Errorf("%s: %d bytes at %#x, %v; want %d bytes at %#x", sec.Name, len(got), addr, err, len(want), sec.Addr)
		}
		if sec.Flags&elf.SHF_COMPRESSED != 0 {
			compressed++
		}
	}
	if compressed == 0 {
		t.Errorf("no compressed section in the Go binary: the test checks nothing of decompression")
	}
	if p, addr, err := s.Section(".nothing"); p != nil || addr != 0 || err != nil {
		t.Errorf("missing section: %d bytes, %#x, %v", len(p), addr, err)
	}
}
