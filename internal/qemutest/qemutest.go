// Package qemutest runs linux/arm64 programs under qemu-user for the
// AArch64 tests, and debuggers against them through qemu-aarch64's gdb
// stub. It is the one qemu helper of the tests:
//
//   - [BuildArm64] cross-builds a Go package for linux/arm64;
//   - [Wrapper] writes a script that stands for a debugger: it runs the
//     program under qemu-aarch64 -g [Port] and the debugger in a new user
//     and network namespace (unshare -rn) whose only interface is loopback,
//     since qemu's stub listens on every interface; the debugger connects
//     to 127.0.0.1:[Port];
//   - [RunLLDB] runs an LLDB session against such a wrapper, retrying the
//     one failure of qemu 7.2's stub that is not the code's ("lost
//     connection");
//   - [Emulated] and [Command] run a program built for the test's own
//     machine when the test binary itself runs under qemu-user
//     (GOARCH=arm64 go test -exec qemu-aarch64 on another host, without
//     binfmt_misc): there the kernel cannot execute it (ENOEXEC), so
//     qemu-aarch64 must.
//
// Tools come through the one gate, internal/tooltest: a missing
// qemu-aarch64, unshare, ip or go skips the test, or fails it when CI is
// set.
//
// It is a test helper: it depends on nothing but the standard library,
// internal/tooltest and internal/lldbtest.
package qemutest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/elfimage/elfimage/internal/gdbtest"
	"github.com/elfimage/elfimage/internal/lldbtest"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// Port is the port of qemu-aarch64's gdb stub that [Wrapper] starts, in
// the namespace the debugger runs in; debuggers connect to
// 127.0.0.1:Port.
const Port = 1234

// BuildArm64 builds the Go package pkg (a path or pattern as go build
// takes it, relative to the test's directory) for linux/arm64 with
// CGO_ENABLED=0 into dir/name and returns the executable's path: a normal
// Go binary, with its symbol table and DWARF, which the debuggers need.
// It skips (fails under CI) without go, and fails the test when the build
// fails or takes more than 5 minutes (tooltest.RunTool: go is then killed
// with its process group). Cost: one go build (seconds, less when the
// build cache is warm).
func BuildArm64(t testing.TB, dir, pkg, name string) string {
	t.Helper()
	goCmd := tooltest.Require(t, "go")
	out := filepath.Join(dir, name)
	build := exec.Command(goCmd, "build", "-o", out, pkg)
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
	if b, err := tooltest.RunTool(t, build, 5*time.Minute); err != nil {
		t.Fatalf("GOARCH=arm64 go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// Wrapper writes into dir a script that stands for the debugger at path
// debugger and returns its path and that of the file that receives the
// program's output (dir/prog.out). In a new user and network namespace
// (unshare -rn) whose only interface is loopback (brought up with ip), the
// script starts the linux/arm64 program prog with args under
// qemu-aarch64 -g [Port] in the background, its standard output and error
// going to progOut, and execs the debugger with the script's arguments.
// qemu's gdb stub listens on every interface; the namespace keeps the
// port private to the test. gdb and lldb retry their connection until the
// stub listens. Each run of the script is a new namespace with a new
// qemu, so a session can be run again (see [RunLLDB]).
//
// The program runs in the working directory the debugger is started in,
// with standard input from /dev/null, and with GOMAXPROCS=1 in its
// environment (qemu -E): qemu 7.2's user-mode gdb stub loses the debugger
// (lldb: "lost connection"; gdb hangs after "[New Thread ...]") in about
// one session in three when a Go program starts threads during the
// session, and one P makes Go start few (no failure in 16 sessions
// measured). Tests that continue to the program's end should also remove
// or disable their breakpoints before the last continue: after a step
// over a breakpoint the stub sometimes reports the same stop again.
//
// It requires qemu-aarch64, unshare and ip (tooltest.Require) and fails
// the test when unprivileged user namespaces are refused. Arguments are
// quoted for sh: any string may be passed.
func Wrapper(t testing.TB, dir, debugger, prog string, args ...string) (wrapper, progOut string) {
	t.Helper()
	qemu := tooltest.Require(t, "qemu-aarch64")
	unshare := tooltest.Require(t, "unshare")
	ip := tooltest.Require(t, "ip")
	if out, err := tooltest.RunTool(t, exec.Command(unshare, "-rn", "true"), time.Minute); err != nil {
		t.Fatalf("unshare -rn (user and network namespaces): %v\n%s", err, out)
	}
	progOut = filepath.Join(dir, "prog.out")
	inner := filepath.Join(dir, "in-netns")
	run := []string{qemu, "-E", "GOMAXPROCS=1", "-g", fmt.Sprint(Port), prog}
	var q []string
	for _, a := range append(run, args...) {
		q = append(q, shellQuote(a))
	}
	script := fmt.Sprintf("#!/bin/sh\n%s link set lo up || exit 1\n%s < /dev/null > %s 2>&1 &\nexec %s \"$@\"\n",
		shellQuote(ip), strings.Join(q, " "), shellQuote(progOut), shellQuote(debugger))
	if err := os.WriteFile(inner, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper = filepath.Join(dir, "debugger-in-netns")
	script = fmt.Sprintf("#!/bin/sh\nexec %s -rn %s \"$@\"\n", shellQuote(unshare), shellQuote(inner))
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return wrapper, progOut
}

// shellQuote quotes s for sh: in single quotes, each ' as '\”.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// LLDBAttempts is how many times [RunLLDB] runs a session at the most.
const LLDBAttempts = 3

// RunLLDB runs s, an LLDB session whose LLDB is a [Wrapper] script, and
// returns its result. qemu 7.2's stub sometimes drops LLDB's connection
// even with GOMAXPROCS=1 (LLDB prints "lost connection"; the program then
// dies of the next trap or runs to its end unwatched), in about one
// session in ten: when the output says "lost connection", and only then,
// the session is run again, [LLDBAttempts] times in all; each attempt is
// logged. The result is that of the last attempt, with its error (those
// of lldbtest.Session.Run). A test that accepts a lost connection at the
// program's exit (lldbtest.Exit) still passes on the last attempt.
func RunLLDB(t testing.TB, s *lldbtest.Session) (*lldbtest.Result, error) {
	t.Helper()
	return RunLLDBStops(t, s, 0)
}

// RunLLDBStops is [RunLLDB] for a session that must stop at breakpoints
// at least stops times (lines "stop reason = breakpoint" in its output).
// Besides lost connections, qemu 7.2's user-mode stub sometimes loses a
// breakpoint LLDB re-inserts after stepping over a hit (seen about once in
// fifty sessions, as a pending breakpoint on JIT code that never
// resolves: the program runs to its end unwatched). A session with fewer
// stops than asked is run again too, with the same bound and logging (gdb
// sessions: [RunGDBStops]).
func RunLLDBStops(t testing.TB, s *lldbtest.Session, stops int) (*lldbtest.Result, error) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		r, err := s.Run()
		lost := r != nil && strings.Contains(r.Output, "lost connection")
		missed := r != nil && strings.Count(r.Output, "stop reason = breakpoint") < stops
		if !lost && !missed || attempt == LLDBAttempts {
			return r, err
		}
		why := "qemu's stub dropped lldb's connection"
		if !lost {
			why = fmt.Sprintf("fewer than %d breakpoint stops (qemu's stub lost a breakpoint)", stops)
		}
		t.Logf("attempt %d of %d: %s; again", attempt, LLDBAttempts, why)
	}
}

// MustRunLLDBStops is [RunLLDBStops] that fails t at once, with LLDB's
// output, when the last attempt's error is not nil (lldbtest.Must).
func MustRunLLDBStops(t testing.TB, s *lldbtest.Session, stops int) *lldbtest.Result {
	t.Helper()
	r, err := RunLLDBStops(t, s, stops)
	return lldbtest.Must(t, r, err)
}

// GDBAttempts is how many times [RunGDBStops] runs a session at the most.
const GDBAttempts = 3

// gdbStopRE matches gdb's report of a breakpoint stop ("Breakpoint 1,
// tak (x=17, ...)" or "Thread 2 hit Breakpoint 1, ...").
var gdbStopRE = regexp.MustCompile(`(?m)(^|hit )Breakpoint \d+, `)

// RunGDBStops runs s, a gdb session whose GDB is a [Wrapper] script, that
// must stop at breakpoints at least stops times, and returns its result.
// gdb re-inserts its breakpoints at each resume, but qemu 7.2's user-mode
// stub sometimes fails a removal while the Go runtime starts a thread
// (gdb prints "Error removing breakpoint -1": -1 is its internal
// breakpoint on __jit_debug_register_code), and the JIT image is then
// never seen: the program runs to its end unwatched. A session with fewer
// stops than asked is run again, [GDBAttempts] times in all; each attempt
// is logged with gdb's output. The result is that of the last attempt,
// with its error (those of gdbtest.Session.Run).
func RunGDBStops(t testing.TB, s *gdbtest.Session, stops int) (*gdbtest.Result, error) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		r, err := s.Run()
		got := 0
		if r != nil {
			got = len(gdbStopRE.FindAllString(r.Output, -1))
		}
		if got >= stops || attempt == GDBAttempts {
			return r, err
		}
		out := ""
		if r != nil {
			out = r.Output
		}
		t.Logf("attempt %d of %d: %d of %d breakpoint stops (qemu's stub lost a breakpoint); again. gdb printed:\n%s", attempt, GDBAttempts, got, stops, out)
	}
}

// MustRunGDBStops is [RunGDBStops] that fails t at once, with gdb's
// output, when the last attempt's error is not nil (gdbtest.Must).
func MustRunGDBStops(t testing.TB, s *gdbtest.Session, stops int) *gdbtest.Result {
	t.Helper()
	r, err := RunGDBStops(t, s, stops)
	return gdbtest.Must(t, r, err)
}

// probeEnv, set to 1 in the environment of the test binary run by
// [Emulated], makes it exit at once with status 0 (see init).
const probeEnv = "ELFIMAGE_QEMUTEST_PROBE"

func init() {
	if os.Getenv(probeEnv) == "1" {
		os.Exit(0)
	}
}

var (
	emulatedOnce sync.Once
	emulatedWhy  string
)

// Emulated returns why this test binary runs under qemu-user, or "": an
// arm64 test binary on another host without binfmt_misc, so that the
// kernel cannot execute the programs the test builds for its own machine
// (they must run under qemu-aarch64, see [Command]), nor can native
// debuggers and profilers (gdb, lldb, perf) see it. It is decided once per
// test binary: on arm64 the binary executes itself (os.Executable) with
// probeEnv set, which makes the child exit in this package's init; ENOEXEC
// from the kernel means emulated. On other machines it is "" at no cost.
func Emulated() string {
	emulatedOnce.Do(func() {
		if runtime.GOARCH != "arm64" {
			return
		}
		self, err := os.Executable()
		if err != nil {
			return
		}
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), probeEnv+"=1")
		if err := cmd.Run(); errors.Is(err, syscall.ENOEXEC) {
			emulatedWhy = "the test runs under qemu-user: the kernel cannot execute arm64 programs (" + err.Error() + ")"
		}
	})
	return emulatedWhy
}

// Command returns the command that runs exe, a program built for the
// test's own machine, with args: exe itself, or, when [Emulated],
// qemu-aarch64 exe args (it then requires qemu-aarch64 through
// tooltest.Require). ctx kills the process as exec.CommandContext does.
func Command(ctx context.Context, t testing.TB, exe string, args ...string) *exec.Cmd {
	t.Helper()
	if Emulated() != "" {
		return exec.CommandContext(ctx, tooltest.Require(t, "qemu-aarch64"), append([]string{exe}, args...)...)
	}
	return exec.CommandContext(ctx, exe, args...)
}

// GDBConnect is the gdb command that connects to the stub a [Wrapper]
// starts: target remote 127.0.0.1:[Port].
var GDBConnect = fmt.Sprintf("target remote 127.0.0.1:%d", Port)

// LLDBConnect returns the LLDB commands that connect to the stub a
// [Wrapper] starts, for the front of an lldbtest.Session's Cmds (a new
// slice each call, so it can be appended to): the GDB JIT loader enabled
// (plugin.jit-loader.gdb.enable on), a packet timeout of 60 s (under
// load qemu answers a packet late, reading symbol files through the
// stub, and LLDB's default 5 s loses the connection), gdb-remote
// 127.0.0.1:[Port], then lldbtest.HandleSIGURG (the process exists only
// once connected). Its four commands produce four Blocks.
func LLDBConnect() []string {
	return []string{
		"settings set plugin.jit-loader.gdb.enable on",
		"settings set plugin.process.gdb-remote.packet-timeout 60",
		fmt.Sprintf("gdb-remote 127.0.0.1:%d", Port),
		lldbtest.HandleSIGURG,
	}
}
