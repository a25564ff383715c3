package tooltest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ErrTimeout is wrapped by RunGroup's error when the command ran out of
// time.
var ErrTimeout = errors.New("tooltest: timed out")

// Time bounds of the tool runs tooltest makes itself (gdbtest and
// lldbtest sessions take their own, 60 s by default); variables for the
// tests.
var (
	// buildTimeout bounds a go build or gcc compile (a cold build cache
	// included).
	buildTimeout = 5 * time.Minute
	// perfTimeout bounds a perf run (perf record of a test program, perf
	// script, report or inject).
	perfTimeout = 2 * time.Minute
)

// RunGroup runs cmd (not started; Stdin, Stdout, Stderr and SysProcAttr
// unset: RunGroup sets them) with standard input closed, in a process
// group of its own, and returns its standard output and error merged. After timeout the whole group is
// killed (a debugger and the program it runs, a shell and its background
// jobs); 5 s after the command itself exits, output pipes that processes
// it left behind still hold open are closed. Errors: ErrTimeout (wrapped,
// with the output so far), else those of cmd.Run (an *exec.ExitError for
// a non-zero exit).
func RunGroup(cmd *exec.Cmd, timeout time.Duration) (string, error) {
	var out bytes.Buffer
	err := runGroup(cmd, &out, &out, timeout)
	return out.String(), err
}

// RunGroupSplit is [RunGroup] with the command's standard output and
// standard error returned apart.
func RunGroupSplit(cmd *exec.Cmd, timeout time.Duration) (stdout, stderr string, err error) {
	var o, e bytes.Buffer
	err = runGroup(cmd, &o, &e, timeout)
	return o.String(), e.String(), err
}

// runGroup is RunGroup writing standard output to stdout and standard
// error to stderr.
func runGroup(cmd *exec.Cmd, stdout, stderr io.Writer, timeout time.Duration) error {
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return err
	}
	if timedOut, err := waitKill(cmd, timeout); !timedOut {
		return err
	}
	return fmt.Errorf("%w after %v: %s", ErrTimeout, timeout, cmd.Path)
}

// RunTool runs cmd as [RunGroup] does, killed with its process group
// after timeout, and returns its standard output and error merged, with
// the error of cmd.Run (nil, an *exec.ExitError for a non-zero exit, or
// a failure to start), for the test to judge: a debugger's exit status
// is not always the test's verdict. A timeout instead fails t at once,
// with a message that names the tool (the base name of cmd.Path), the
// timeout and the command line, and the output so far. It is for the
// tests' runs of debuggers, emulators and profilers, which can hang
// (gdb waiting on a stopped program, qemu on its gdb stub); timeouts of
// minutes keep a loaded CI machine from failing spuriously.
func RunTool(t testing.TB, cmd *exec.Cmd, timeout time.Duration) (string, error) {
	t.Helper()
	out, err := RunGroup(cmd, timeout)
	if errors.Is(err, ErrTimeout) {
		t.Fatalf("%s\noutput so far:\n%s", timeoutMessage(cmd, timeout), out)
	}
	return out, err
}

// RunToolSplit is [RunTool] with the command's standard output and
// standard error returned apart (for a test that parses standard output
// only); a timeout's message shows both.
func RunToolSplit(t testing.TB, cmd *exec.Cmd, timeout time.Duration) (stdout, stderr string, err error) {
	t.Helper()
	stdout, stderr, err = RunGroupSplit(cmd, timeout)
	if errors.Is(err, ErrTimeout) {
		t.Fatalf("%s\nstandard output so far:\n%s\nstandard error so far:\n%s", timeoutMessage(cmd, timeout), stdout, stderr)
	}
	return stdout, stderr, err
}

// timeoutMessage says that cmd, which ran, timed out after timeout.
func timeoutMessage(cmd *exec.Cmd, timeout time.Duration) string {
	return fmt.Sprintf("%s timed out after %v and was killed with its process group: %s",
		filepath.Base(cmd.Path), timeout, strings.Join(cmd.Args, " "))
}
