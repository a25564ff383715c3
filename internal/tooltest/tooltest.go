// Package tooltest gates tests on external tools (readelf, addr2line,
// llvm-dwarfdump, gdb, perf) and on what the environment must allow them
// (perf_event_open, process_vm_readv, core dumps). It is the one gate: a
// missing tool or facility skips the test with a message, unless the
// environment variable CI is set: then it fails the test, so CI cannot pass
// by skipping. Tests call [Require] for a tool they cannot do without,
// [Optional] for a tool that only adds checks, and [Skip] when a tool is
// present but the environment refuses what it needs.
//
// Tests run debuggers, emulators and profilers bounded in time: through
// [RunTool] and [RunToolSplit] (one that hangs is killed with its process
// group and fails the test with its output so far), or [RunGroup] and
// [RunGroupSplit] where the caller judges the timeout itself; gdb and
// LLDB sessions go through internal/gdbtest and internal/lldbtest, which
// use RunGroup.
package tooltest

import (
	"fmt"
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

// Optional returns the path of the first of names found on PATH, for a
// tool that adds checks to a test that has others: when none is found it
// logs that those checks are not run and returns "", or fails t when CI is
// set.
func Optional(t testing.TB, names ...string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("tool %v not found on PATH (CI is set, so this is a failure; .ci/run installs it)", names)
	}
	t.Logf("tool %v not found on PATH; the checks that use it are not run", names)
	return ""
}

// Skip skips t with the message format, args (say what is missing and
// why: "perf cannot record here: ..."), for a facility the environment
// refuses although the tool is installed; when CI is set it fails t
// instead, since .ci/run must provide everything the tests use.
func Skip(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") != "" {
		t.Fatalf("%s (CI is set, so this is a failure)", msg)
	}
	t.Skip(msg + "; skipping")
}
