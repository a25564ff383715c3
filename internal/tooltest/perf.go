package tooltest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// PerfOutput runs perf (the path [Require] found) with args in the
// directory home, with HOME set to home, so that perf's build-ID cache
// (~/.debug) and configuration stay in the test's directory, and the
// entries env (KEY=VALUE) added to the test's environment, and returns
// its standard output. perf runs as [RunGroup] runs a command (standard
// input closed, a process group of its own), killed after 2 minutes. A
// non-zero exit or the timeout fails t at once, with what perf printed on
// standard error.
func PerfOutput(t testing.TB, perf, home string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(perf, args...)
	cmd.Env = append(append(os.Environ(), "HOME="+home), env...)
	cmd.Dir = home
	out, stderr, err := RunGroupSplit(cmd, perfTimeout)
	if err != nil {
		t.Fatalf("perf %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return out
}
