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
// its standard output. A non-zero exit fails t at once, with what perf
// printed on standard error.
func PerfOutput(t testing.TB, perf, home string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(perf, args...)
	cmd.Env = append(append(os.Environ(), "HOME="+home), env...)
	cmd.Dir = home
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("perf %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}
