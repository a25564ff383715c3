package addrmap

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/internal/tooltest"
)

// TestCompareDLFindObject measures, side by side in one run, Lookup (and
// Acquire/Release) here and glibc's _dl_find_object with 1, 100 and 1,000
// objects, through the C harness testdata/dlfind.c. It builds one tiny
// shared object with gcc and copies it n times (glibc identifies objects by
// file, so each copy is a separate object). It runs only with
// ELFIMAGE_BENCH=1:
//
//	ELFIMAGE_BENCH=1 go test -run CompareDLFindObject -v ./addrmap
func TestCompareDLFindObject(t *testing.T) {
	if os.Getenv("ELFIMAGE_BENCH") != "1" {
		t.Skip("set ELFIMAGE_BENCH=1 to compare with glibc's _dl_find_object")
	}
	gcc := tooltest.Require(t, "gcc")
	dir := t.TempDir()
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return string(out)
	}
	libc := filepath.Join(dir, "lib.c")
	if err := os.WriteFile(libc, []byte("int f(int x) { return x * 3 + 1; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(gcc, "-O2", "-shared", "-fPIC", "-o", filepath.Join(dir, "lib.so"), libc)
	so, err := os.ReadFile(filepath.Join(dir, "lib.so"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("lib%d.so", i)), so, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	harness := filepath.Join(dir, "dlfind")
	run(gcc, "-O2", "-o", harness, filepath.Join("testdata", "dlfind.c"), "-ldl")

	t.Logf("%-8s %22s %18s %24s", "objects", "_dl_find_object ns", "Lookup ns", "Acquire+Release ns")
	for _, n := range benchSizes {
		out := run(harness, dir, strconv.Itoa(n), "20000000")
		var gotN int
		var ns float64
		if _, err := fmt.Sscanf(strings.TrimSpace(out), "objects=%d ns/lookup=%g", &gotN, &ns); err != nil || gotN != n {
			t.Fatalf("harness output %q: %v", out, err)
		}
		lookup := testing.Benchmark(func(b *testing.B) { benchLookup(b, n) })
		acquire := testing.Benchmark(func(b *testing.B) { benchAcquire(b, n) })
		ours := float64(lookup.T.Nanoseconds()) / float64(lookup.N)
		acq := float64(acquire.T.Nanoseconds()) / float64(acquire.N)
		t.Logf("%-8d %22.1f %18.1f %24.1f", n, ns, ours, acq)
		if lookup.AllocsPerOp() != 0 || acquire.AllocsPerOp() != 0 {
			t.Errorf("n=%d: allocations per lookup %d, per acquire %d", n, lookup.AllocsPerOp(), acquire.AllocsPerOp())
		}
	}
}
