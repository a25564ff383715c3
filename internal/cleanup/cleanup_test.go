package cleanup

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/elfimage/elfimage/internal/qemutest"
)

// helperEnv makes the test binary act as a process that tracks a
// temporary directory and a file, prints their paths and waits to be
// signalled.
const helperEnv = "CLEANUP_TEST_HELPER"

func init() {
	if os.Getenv(helperEnv) != "1" {
		return
	}
	Catch()
	dir, _, err := TempDir("cleanup-test")
	if err != nil {
		os.Exit(3)
	}
	file := filepath.Join(os.Getenv("TMPDIR"), "tracked-file")
	Track(file)
	os.WriteFile(file, nil, 0o600)
	kept := filepath.Join(os.Getenv("TMPDIR"), "untracked-file")
	untrack := Track(kept)
	os.WriteFile(kept, nil, 0o600)
	untrack()
	os.Stdout.WriteString(dir + "\n")
	select {}
}

// TestCatch: SIGTERM and SIGINT remove the tracked paths, leave the
// untracked one, and end the process by the signal itself.
func TestCatch(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		tmp := t.TempDir()
		// Under qemu-user the kernel cannot execute the test binary:
		// qemutest.Command runs it under qemu-aarch64, which delivers the
		// signal to the program and ends by the same signal.
		cmd := qemutest.Command(context.Background(), t, exe)
		cmd.Env = append(os.Environ(), helperEnv+"=1", "TMPDIR="+tmp)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4096)
		n, _ := out.Read(buf)
		dir := strings.TrimSpace(string(buf[:n]))
		if _, err := os.Stat(dir); err != nil || filepath.Dir(dir) != tmp {
			t.Fatalf("helper's directory %q: %v", dir, err)
		}
		cmd.Process.Signal(sig)
		err = cmd.Wait()
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if err == nil || !ws.Signaled() || ws.Signal() != sig {
			t.Errorf("%v: helper ended with %v, want killed by the signal", sig, err)
		}
		des, _ := os.ReadDir(tmp)
		if len(des) != 1 || des[0].Name() != "untracked-file" {
			t.Errorf("%v: left %v, want only untracked-file", sig, des)
		}
	}
}
