// The tests are of package tooltest_test: they run the test binary
// through qemutest.Command, and qemutest imports tooltest.
package tooltest_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/internal/qemutest"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// TestGateChild is run by TestGates in a child process: it calls the gate
// named by TOOLTEST_GATE with a tool that does not exist.
func TestGateChild(t *testing.T) {
	switch os.Getenv("TOOLTEST_GATE") {
	case "":
		t.Skip("run by TestGates")
	case "Require":
		tooltest.Require(t, "elfimage-no-such-tool")
		t.Log("after Require")
	case "Optional":
		if p := tooltest.Optional(t, "elfimage-no-such-tool"); p != "" {
			t.Errorf("Optional found %q", p)
		}
		t.Log("after Optional")
	case "Skip":
		tooltest.Skip(t, "the facility is refused")
		t.Log("after Skip")
	case "Found":
		if p := tooltest.Require(t, "sh"); p == "" || tooltest.Optional(t, "sh") != p {
			t.Errorf("sh: Require %q, Optional %q", p, tooltest.Optional(t, "sh"))
		}
	}
}

// TestGates checks each gate in a child process, with and without CI set:
// a missing tool or refused facility skips (Optional goes on) without CI
// and fails the test with CI.
func TestGates(t *testing.T) {
	for _, c := range []struct {
		gate string
		ci   bool
		want string // SKIP, PASS or FAIL
		goOn bool   // the test continues after the gate
	}{
		{"Require", false, "SKIP", false},
		{"Require", true, "FAIL", false},
		{"Optional", false, "PASS", true},
		{"Optional", true, "FAIL", false},
		{"Skip", false, "SKIP", false},
		{"Skip", true, "FAIL", false},
		{"Found", true, "PASS", false},
	} {
		// Under qemu-user the kernel cannot execute the test binary:
		// qemutest.Command runs it under qemu-aarch64.
		cmd := qemutest.Command(context.Background(), t, os.Args[0], "-test.run=^TestGateChild$", "-test.v")
		cmd.Env = append(os.Environ(), "TOOLTEST_GATE="+c.gate, "CI=")
		if c.ci {
			cmd.Env = append(cmd.Env, "CI=true")
		}
		out, err := cmd.CombinedOutput()
		s := string(out)
		if got := strings.Contains(s, "--- "+c.want+": TestGateChild"); !got || (err != nil) != (c.want == "FAIL") {
			t.Errorf("%s, CI %v: want %s; exit %v, output:\n%s", c.gate, c.ci, c.want, err, s)
		}
		if strings.Contains(s, "after "+c.gate) != c.goOn {
			t.Errorf("%s, CI %v: the test went on after the gate: %v, want %v\n%s", c.gate, c.ci, !c.goOn, c.goOn, s)
		}
	}
}
