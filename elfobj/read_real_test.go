package elfobj

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/elfimage/elfimage/internal/tooltest"
	"testing"
)

// realFiles returns ELF files of the machine and Go's debug/elf and
// debug/dwarf test files (ELF32 and ELF64, both byte orders, objects,
// compressed sections, many machines).
func realFiles(t *testing.T) []string {
	var out []string
	goroot := goroot(t)
	for _, pat := range []string{
		filepath.Join(goroot, "src/debug/elf/testdata/*"),
		filepath.Join(goroot, "src/debug/dwarf/testdata/*"),
		"/usr/bin/*",
		"/usr/lib/x86_64-linux-gnu/*.so*",
		"/usr/lib/x86_64-linux-gnu/*.o",
	} {
		m, _ := filepath.Glob(pat)
		out = append(out, m...)
	}
	return out
}

// TestRealFiles: on every ELF file of /usr/bin, the shared libraries and
// objects of /usr/lib/x86_64-linux-gnu and Go's debug/elf and debug/dwarf
// test files (big-endian PowerPC, MIPS and s390x, ARM, RISC-V, i386 among
// them), this reader sees what debug/elf sees: headers, program headers,
// sections with their names and decompressed contents, symbols, notes.
func TestRealFiles(t *testing.T) {
	n := 0
	machines := map[string]bool{}
	seen := map[[2]uint64]bool{} // (device, inode): links are read once
	for _, p := range realFiles(t) {
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() || st.Size() > 64<<20 {
			continue
		}
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			k := [2]uint64{uint64(sys.Dev), sys.Ino}
			if seen[k] {
				continue
			}
			seen[k] = true
		}
		data, unmap, err := mapFile(p, st.Size())
		if err != nil {
			continue
		}
		if len(data) >= 4 && string(data[:4]) == elf.ELFMAG {
			checkOracle(t, p, data)
			if f, err := NewBytes(data); err == nil {
				machines[f.Class.String()+" "+f.Header.Data.String()+" "+f.Machine.String()] = true
			}
			n++
		}
		unmap()
	}
	t.Logf("%d ELF files; %v", n, sortedKeys(machines))
	if n < 20 {
		t.Fatalf("only %d ELF files found", n)
	}
}

// goroot returns the Go tree's root (go env GOROOT), whose debug/elf and
// debug/dwarf test files the tests read.
func goroot(t testing.TB) string {
	t.Helper()
	out, err := exec.Command(tooltest.Require(t, "go"), "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// mapFile maps the file at path (size bytes) read-only: only the pages the
// readers touch are read.
func mapFile(path string, size int64) ([]byte, func(), error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer fd.Close()
	if size == 0 {
		return nil, func() {}, nil
	}
	b, err := syscall.Mmap(int(fd.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, err
	}
	return b, func() { syscall.Munmap(b) }, nil
}
