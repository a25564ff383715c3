// Package tooltest gates tests on external tools (readelf, addr2line,
// llvm-dwarfdump, gdb, perf). A missing tool skips the test with a message,
// unless the environment variable CI is set: then it fails the test, so CI
// cannot pass by skipping.
package tooltest

import (
	"os"
	"os/exec"
	"testing"
)

// Require returns the path of the first of names found on PATH. When none
// is found it skips t, or fails it when CI is set.
func Require(t testing.TB, names ...string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("required tool %v not found on PATH (CI is set, so this is a failure; .ci/run installs it)", names)
	}
	t.Skipf("tool %v not found on PATH; skipping (install binutils, llvm or gdb to run this test)", names)
	return ""
}
