package gdbtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/internal/tooltest"
)

// QEMUPort is the port of qemu-aarch64's gdb stub that [QEMUWrapper]
// starts; debuggers connect to 127.0.0.1:QEMUPort.
const QEMUPort = 1234

// QEMUWrapper writes into dir a script that stands for the debugger at
// path debugger: in a new user and network namespace (unshare -rn) whose
// only interface is loopback (brought up with ip), it starts the linux/arm64
// program prog with args under qemu-aarch64 -g [QEMUPort], its standard
// output and error going to the file progOut, and execs the debugger with
// the script's arguments. qemu's gdb stub listens on every interface; the
// namespace keeps the port private to the test. gdb and lldb retry their
// connection until the stub listens. The program runs in the working
// directory the debugger is started in, with standard input from
// /dev/null, and with GOMAXPROCS=1 in its environment (qemu -E): qemu 7.2's
// user-mode gdb stub loses the debugger (lldb: "lost connection"; gdb
// hangs after "[New Thread ...]") in about one session in three when a
// Go program starts threads during the session, and one P makes Go start
// few (no failure in 16 sessions measured).
//
// It requires qemu-aarch64, unshare and ip (tooltest.Require) and fails
// the test when unprivileged user namespaces are refused.
func QEMUWrapper(t testing.TB, dir, debugger, prog string, args ...string) (wrapper, progOut string) {
	t.Helper()
	qemu := tooltest.Require(t, "qemu-aarch64")
	unshare := tooltest.Require(t, "unshare")
	ip := tooltest.Require(t, "ip")
	if out, err := exec.Command(unshare, "-rn", "true").CombinedOutput(); err != nil {
		t.Fatalf("unshare -rn (user and network namespaces): %v\n%s", err, out)
	}
	progOut = filepath.Join(dir, "prog.out")
	inner := filepath.Join(dir, "in-netns")
	run := []string{qemu, "-E", "GOMAXPROCS=1", "-g", fmt.Sprint(QEMUPort), prog}
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
