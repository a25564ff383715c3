package tooltest

import (
	"bufio"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readyTimeout bounds StartReady's and StartLine's wait for the first
// line (a program under qemu-aarch64 on a loaded machine takes seconds);
// waitTimeout bounds Wait's default. Variables for the tests.
var (
	readyTimeout = 2 * time.Minute
	waitTimeout  = 2 * time.Minute
)

// StartReady starts cmd, which must print "ready" as its first line once
// it is set up, and waits for that line; the rest of its standard output
// is discarded. The process is killed and reaped when the test ends. A
// failure to start, another first line, or no line within two minutes
// (the process is then killed) fails t.
func StartReady(t testing.TB, cmd *exec.Cmd) {
	t.Helper()
	if line := StartLine(t, cmd); line != "ready\n" {
		t.Fatalf("%s: first line %q; want ready", cmd.Path, line)
	}
}

// StartLine starts cmd (its Stdout unset: StartLine takes it) and returns
// the first line its standard output prints, with its newline; the rest
// of its output is discarded. The process is killed and reaped when the
// test ends (Cleanup). A failure to start, an output that ends before a
// newline, or no line within two minutes (the process, and its process
// group when it has one of its own, is then killed) fails t.
func StartLine(t testing.TB, cmd *exec.Cmd) string {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = 5 * time.Second
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reap(cmd) })
	type result struct {
		line string
		err  error
	}
	got := make(chan result, 1)
	r := bufio.NewReader(stdout)
	go func() {
		line, err := r.ReadString('\n')
		got <- result{line, err}
		if err == nil {
			io.Copy(io.Discard, r)
		}
	}()
	select {
	case res := <-got:
		if res.err != nil {
			t.Fatalf("%s: first line %q, %v", cmd.Path, res.line, res.err)
		}
		return res.line
	case <-time.After(readyTimeout):
		kill(cmd)
		t.Fatalf("%s printed no line in %v and was killed", filepath.Base(cmd.Path), readyTimeout)
		return ""
	}
}

// Wait waits for cmd, started by the test, to exit, and returns cmd.Wait's
// error. After timeout (0: two minutes) it kills the process, and its
// process group when it has one of its own, and fails t with a message
// naming the command and the timeout: a debugger or emulator that does
// not die of the signal the test sent it fails the test instead of
// stalling the run.
func Wait(t testing.TB, cmd *exec.Cmd, timeout time.Duration) error {
	t.Helper()
	if timeout == 0 {
		timeout = waitTimeout
	}
	timedOut, err := waitKill(cmd, timeout)
	if timedOut {
		t.Fatalf("%s did not exit in %v and was killed", strings.Join(cmd.Args, " "), timeout)
	}
	return err
}

// waitKill waits for the started cmd to exit and returns cmd.Wait's
// error; after timeout it kills the process (its group when it has one
// of its own), waits for it and reports timedOut with that error.
func waitKill(cmd *exec.Cmd, timeout time.Duration) (timedOut bool, err error) {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return false, err
	case <-time.After(timeout):
		kill(cmd)
		return true, <-done
	}
}

// kill sends SIGKILL to cmd's process group when it has one of its own
// (SysProcAttr.Setpgid), else to its process. It reads only fields set
// before cmd started, so it may run while another goroutine waits for
// cmd; not after the wait (see reap).
func kill(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	if a := cmd.SysProcAttr; a != nil && a.Setpgid && a.Pgid == 0 {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return
	}
	cmd.Process.Kill()
}

// reap kills and waits for cmd at the end of a test, unless it was
// waited for already: its process group's ID may then be another's.
func reap(cmd *exec.Cmd) {
	if cmd.ProcessState == nil {
		kill(cmd)
		cmd.Wait()
	}
}
