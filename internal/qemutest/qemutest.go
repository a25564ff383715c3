// Package qemutest runs a debugger against a linux/arm64 program under
// qemu-aarch64's gdb stub, for the AArch64 debugger tests: it cross-builds
// Go packages for linux/arm64 and writes a wrapper script that stands for
// the debugger. qemu's stub (qemu-aarch64 -g PORT) listens on every
// interface, so the wrapper runs qemu and the debugger in a new user and
// network namespace (unshare -rn) whose only interface is loopback: the
// port is private to the test, and the debugger connects to 127.0.0.1.
//
// It is a test helper: it depends on nothing but the standard library and
// internal/tooltest.
package qemutest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/internal/tooltest"
)

// Port is the port of qemu's gdb stub inside the namespace; debuggers
// connect to 127.0.0.1:Port.
const Port = 1234

// BuildArm64 builds the Go package pkg (a path or pattern as go build
// takes it, relative to the test's directory) for linux/arm64 with
// CGO_ENABLED=0 into dir and returns the executable's path. It skips
// (fails under CI) without go, and fails the test when the build fails.
func BuildArm64(t testing.TB, dir, pkg, name string) string {
	t.Helper()
	goCmd := tooltest.Require(t, "go")
	out := filepath.Join(dir, name)
	build := exec.Command(goCmd, "build", "-o", out, pkg)
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("GOARCH=arm64 go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// Wrapper writes into dir a script that stands for the debugger at path
// debugger: in a new user and network namespace it brings loopback up,
// starts prog (the program and its arguments, none quoted) under
// qemu-aarch64 -g Port in the background with its standard output and
// error to progOut, and execs the debugger with the script's arguments
// (gdb and lldb retry the connection until the stub listens). It returns
// the script's path. It skips (fails under CI) without qemu-aarch64,
// unshare or ip, and fails when the namespaces cannot be made.
func Wrapper(t testing.TB, dir, debugger string, prog []string, progOut string) string {
	t.Helper()
	qemu := tooltest.Require(t, "qemu-aarch64")
	unshare := tooltest.Require(t, "unshare")
	ip := tooltest.Require(t, "ip")
	if out, err := exec.Command(unshare, "-rn", "true").CombinedOutput(); err != nil {
		t.Fatalf("unshare -rn (user and network namespaces): %v\n%s", err, out)
	}
	wrapper := filepath.Join(dir, "debugger-in-netns")
	script := fmt.Sprintf("#!/bin/sh\nexec %s -rn sh -c '%s link set lo up && { %s -g %d %s > %s 2>&1 & } && exec %s \"$@\"' sh \"$@\"\n",
		unshare, ip, qemu, Port, strings.Join(prog, " "), progOut, debugger)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return wrapper
}
