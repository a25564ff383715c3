// The tests are of package tooltest_test: they run the test binary
// through qemutest.Command, and qemutest imports tooltest.
package tooltest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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
		s, err := tooltest.RunTool(t, cmd, 2*time.Minute)
		if got := strings.Contains(s, "--- "+c.want+": TestGateChild"); !got || (err != nil) != (c.want == "FAIL") {
			t.Errorf("%s, CI %v: want %s; exit %v, output:\n%s", c.gate, c.ci, c.want, err, s)
		}
		if strings.Contains(s, "after "+c.gate) != c.goOn {
			t.Errorf("%s, CI %v: the test went on after the gate: %v, want %v\n%s", c.gate, c.ci, !c.goOn, c.goOn, s)
		}
	}
}

// result is a session result for TestMust.
type result struct{ out string }

func (r *result) ToolOutput() string {
	if r == nil {
		return ""
	}
	return r.out
}

// fatalTB records Fatalf instead of stopping the test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper()                           {}
func (f *fatalTB) Fatalf(format string, args ...any) { f.msg = fmt.Sprintf(format, args...) }

// TestMust: Must and MustRun return the result of a run without error,
// and otherwise fail with the error and the tool's output so far, also
// for a nil result.
func TestMust(t *testing.T) {
	ok := &result{"all fine"}
	f := &fatalTB{TB: t}
	if r := tooltest.MustRun(f, func() (*result, error) { return ok, nil }); r != ok || f.msg != "" {
		t.Errorf("MustRun without error: %v, message %q", r, f.msg)
	}
	tooltest.Must(f, &result{"gdb said this"}, errors.New("it broke"))
	if f.msg != "it broke\ngdb said this" {
		t.Errorf("Must with an error: message %q", f.msg)
	}
	f.msg = ""
	tooltest.MustRun(f, func() (*result, error) { return nil, errors.New("no start") })
	if f.msg != "no start\n" {
		t.Errorf("MustRun with an error and no result: message %q", f.msg)
	}
}

// fatalTB's Fatal records its message as Fatalf does.
func (f *fatalTB) Fatal(args ...any) { f.msg = fmt.Sprint(args...) }

// TestPerfOutputTimeout: a perf run that outlasts its time bound is
// killed and fails the test (sleep stands in for perf).
func TestPerfOutputTimeout(t *testing.T) {
	sleep := tooltest.Require(t, "sleep")
	defer tooltest.SetTimeouts(200*time.Millisecond, time.Minute)()
	f := &fatalTB{TB: t}
	start := time.Now()
	tooltest.PerfOutput(f, sleep, t.TempDir(), nil, "30")
	if !strings.Contains(f.msg, "timed out") {
		t.Errorf("PerfOutput of sleep 30 with a 200 ms bound: message %q, want a timeout", f.msg)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("PerfOutput returned after %v", d)
	}
}

// TestGoProgramFailedBuild: a GoProgram whose build fails fails the test
// with go's output and leaves no temporary directory behind.
func TestGoProgramFailedBuild(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	p := &tooltest.GoProgram{Pkg: "./no-such-package", Name: "broken"}
	f := &fatalTB{TB: t}
	p.Path(f)
	if !strings.Contains(f.msg, "go build ./no-such-package") {
		t.Errorf("Path of a failed build: message %q", f.msg)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "elfimage-broken-*")); len(left) != 0 {
		t.Errorf("the failed build left %v", left)
	}
}

// TestRunToolTimeout: a run that outlasts its time bound is killed with
// its process group (the shell's sleep too, or the run would wait for
// the pipe it holds) and fails the test with a message naming the tool
// and the timeout, and the output so far; merged or apart.
func TestRunToolTimeout(t *testing.T) {
	sh := tooltest.Require(t, "sh")
	const script = "echo partial; echo oops >&2; sleep 30; echo after-$((1+1))"
	for _, split := range []bool{false, true} {
		f := &fatalTB{TB: t}
		start := time.Now()
		cmd := exec.Command(sh, "-c", script)
		if split {
			tooltest.RunToolSplit(f, cmd, 500*time.Millisecond)
		} else {
			tooltest.RunTool(f, cmd, 500*time.Millisecond)
		}
		for _, want := range []string{"sh timed out after 500ms", "sleep 30", "partial", "oops"} {
			if !strings.Contains(f.msg, want) {
				t.Errorf("split %v: message lacks %q:\n%s", split, want, f.msg)
			}
		}
		if strings.Contains(f.msg, "after-2") {
			t.Errorf("split %v: the command ran on after the timeout:\n%s", split, f.msg)
		}
		if d := time.Since(start); d > 4*time.Second {
			t.Errorf("split %v: returned after %v (the group was not killed?)", split, d)
		}
	}
}

// TestRunTool: a run within its bound returns the output (merged, or
// standard output and error apart) and cmd.Run's error, a non-zero exit
// included, without failing the test.
func TestRunTool(t *testing.T) {
	sh := tooltest.Require(t, "sh")
	f := &fatalTB{TB: t}
	out, err := tooltest.RunTool(f, exec.Command(sh, "-c", "echo out; echo err >&2; exit 3"), time.Minute)
	var exit *exec.ExitError
	if out != "out\nerr\n" || !errors.As(err, &exit) || exit.ExitCode() != 3 || f.msg != "" {
		t.Errorf("RunTool: %q, %v, message %q; want the output, exit status 3 and no failure", out, err, f.msg)
	}
	stdout, stderr, err := tooltest.RunToolSplit(f, exec.Command(sh, "-c", "echo out; echo err >&2"), time.Minute)
	if stdout != "out\n" || stderr != "err\n" || err != nil || f.msg != "" {
		t.Errorf("RunToolSplit: %q, %q, %v, message %q", stdout, stderr, err, f.msg)
	}
}

// TestStartLine: StartLine returns the first line a program prints while
// it runs on, StartReady accepts "ready" and refuses another line, and a
// program that prints no line in time is killed and fails the test with
// a message naming it.
func TestStartLine(t *testing.T) {
	sh := tooltest.Require(t, "sh")
	if line := tooltest.StartLine(t, exec.Command(sh, "-c", "echo ready 1 2; sleep 30")); line != "ready 1 2\n" {
		t.Errorf("StartLine: %q", line)
	}
	f := &fatalTB{TB: t}
	tooltest.StartReady(f, exec.Command(sh, "-c", "echo ready; sleep 30"))
	if f.msg != "" {
		t.Errorf("StartReady on ready: %s", f.msg)
	}
	tooltest.StartReady(f, exec.Command(sh, "-c", "echo steady; sleep 30"))
	if !strings.Contains(f.msg, `"steady\n"`) {
		t.Errorf("StartReady on another line: message %q", f.msg)
	}
	defer tooltest.SetReadyTimeouts(300*time.Millisecond, 300*time.Millisecond)()
	f.msg = ""
	start := time.Now()
	cmd := exec.Command(sh, "-c", "sleep 30; echo late")
	tooltest.StartLine(f, cmd)
	if !strings.Contains(f.msg, "sh printed no line in 300ms and was killed") {
		t.Errorf("StartLine without a line: message %q", f.msg)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("StartLine returned after %v", d)
	}
}

// TestWait: Wait returns a program's exit status, and kills a program
// that outlives its bound (with its process group: the shell's sleep
// too), failing the test with the command line and the timeout.
func TestWait(t *testing.T) {
	sh := tooltest.Require(t, "sh")
	f := &fatalTB{TB: t}
	cmd := exec.Command(sh, "-c", "exit 3")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if err := tooltest.Wait(f, cmd, time.Minute); !errors.As(err, &exit) || exit.ExitCode() != 3 || f.msg != "" {
		t.Errorf("Wait: %v, message %q; want exit status 3", err, f.msg)
	}
	cmd = exec.Command(sh, "-c", "sleep 30; echo after")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	tooltest.Wait(f, cmd, 300*time.Millisecond)
	if want := "-c sleep 30; echo after did not exit in 300ms and was killed"; !strings.Contains(f.msg, want) {
		t.Errorf("Wait past its bound: message %q, want %q", f.msg, want)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("Wait returned after %v (the group was not killed?)", d)
	}
}
