package tooltest

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// GCC compiles the C source src with gcc and the given flags (for
// example "-g", "-gdwarf-5", "-O1", "-pthread") into an executable in a
// test directory and returns its path. Without gcc the test is skipped
// (failed under CI); a compile error, or a compile of more than 5 minutes
// (killed), fails it.
func GCC(t testing.TB, src string, flags ...string) string {
	t.Helper()
	gcc := Require(t, "gcc")
	dir := t.TempDir()
	c := filepath.Join(dir, "a.c")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "a.out")
	args := append(append([]string{}, flags...), "-o", exe, c)
	if out, err := RunGroup(exec.Command(gcc, args...), buildTimeout); err != nil {
		t.Fatalf("gcc %v: %v\n%s", flags, err, out)
	}
	return exe
}

// GCCBinary is GCC that returns the executable opened with debug/elf
// (closed when the test ends) and a function that returns a section's
// bytes, or nil when the section is absent.
func GCCBinary(t *testing.T, src string, flags ...string) (*elf.File, func(name string) []byte) {
	t.Helper()
	f, err := elf.Open(GCC(t, src, flags...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	data := func(name string) []byte {
		s := f.Section(name)
		if s == nil {
			return nil
		}
		d, err := s.Data()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	return f, data
}
