package tooltest

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// ErrTimeout is wrapped by RunGroup's error when the command ran out of
// time.
var ErrTimeout = errors.New("tooltest: timed out")

// RunGroup runs cmd (not started, Stdin, Stdout and Stderr unset) with
// standard input closed, in a process group of its own, and returns its
// standard output and error merged. After timeout the whole group is
// killed (a debugger and the program it runs, a shell and its background
// jobs); 5 s after the command itself exits, output pipes that processes
// it left behind still hold open are closed. Errors: ErrTimeout (wrapped,
// with the output so far), else those of cmd.Run (an *exec.ExitError for
// a non-zero exit).
func RunGroup(cmd *exec.Cmd, timeout time.Duration) (string, error) {
	var out bytes.Buffer
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(timeout):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return out.String(), fmt.Errorf("%w after %v: %s", ErrTimeout, timeout, cmd.Path)
	}
}
