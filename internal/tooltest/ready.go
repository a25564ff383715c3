package tooltest

import (
	"bufio"
	"io"
	"os/exec"
	"testing"
)

// StartReady starts cmd, which must print "ready" as its first line once
// it is set up, and waits for that line; the rest of its standard output
// is discarded. The process is killed and reaped when the test ends. A
// failure to start, or another first line, fails t.
func StartReady(t testing.TB, cmd *exec.Cmd) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	r := bufio.NewReader(stdout)
	if line, err := r.ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("%s: first line %q, %v; want ready", cmd.Path, line, err)
	}
	go io.Copy(io.Discard, r)
}
