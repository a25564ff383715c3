package qemutest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/internal/gdbtest"
	"github.com/elfimage/elfimage/internal/lldbtest"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// TestShellQuote: sh reads every quoted string back as itself.
func TestShellQuote(t *testing.T) {
	sh := tooltest.Require(t, "sh")
	for _, s := range []string{"", "a b", "it's", `"$HOME" \n`, "''", "a'b'c", "x;rm -rf /;"} {
		out, err := exec.Command(sh, "-c", "printf %s "+shellQuote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("sh read %s back as %q (%v), want %q", shellQuote(s), out, err, s)
		}
	}
}

// fakeLLDB writes an executable script that stands for lldb (see
// writeFakeLLDB) and on its first lost runs ends with lldb's "lost
// connection" report.
func fakeLLDB(t *testing.T, lost int) (path, count string) {
	return writeFakeLLDB(t, fmt.Sprintf(`if [ $n -le %d ]; then echo "Process 7 exited with status = -1 (0xffffffff) lost connection"; else echo "Process 7 exited with status = 0 (0x00000000)"; fi
`, lost))
}

// writeFakeLLDB writes an executable stand-in for lldb: it counts its runs
// in a file (count; $n in ending), echoes each -o command as lldb -b does
// ("(lldb) CMD"), then runs the shell text ending.
func writeFakeLLDB(t *testing.T, ending string) (path, count string) {
	dir := t.TempDir()
	path, count = filepath.Join(dir, "lldb"), filepath.Join(dir, "runs")
	script := fmt.Sprintf(`#!/bin/sh
n=$(cat %[1]s 2>/dev/null || echo 0); n=$((n+1)); echo $n > %[1]s
while [ $# -gt 0 ]; do
	if [ "$1" = -o ]; then echo "(lldb) $2"; shift; fi
	shift
done
`, shellQuote(count)) + ending
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, count
}

// TestRunLLDB: a session that loses the connection is run again, up to
// LLDBAttempts times in all; one that does not is run once.
func TestRunLLDB(t *testing.T) {
	tooltest.Require(t, "sh")
	for _, tc := range []struct{ lost, runs, status int }{{0, 1, 0}, {1, 2, 0}, {2, 3, 0}, {5, LLDBAttempts, -1}} {
		lldb, count := fakeLLDB(t, tc.lost)
		s := &lldbtest.Session{LLDB: lldb, Program: "prog", Dir: t.TempDir(), Cmds: []string{"continue"}}
		r, err := RunLLDB(t, s)
		if err != nil {
			t.Fatalf("lost %d: %v", tc.lost, err)
		}
		b, _ := os.ReadFile(count)
		st, _, ok := lldbtest.Exit(r.Blocks[0])
		if strings.TrimSpace(string(b)) != fmt.Sprint(tc.runs) || !ok || st != tc.status {
			t.Errorf("lost %d: %s runs, exit %d (%v); want %d runs, exit %d:\n%s", tc.lost, b, st, ok, tc.runs, tc.status, r.Output)
		}
	}
}

// TestWrapper: the script runs the program under qemu-aarch64 -g Port
// with GOMAXPROCS=1, standard input from /dev/null and its output to
// progOut, in a user and network namespace, with every argument quoted.
func TestWrapper(t *testing.T) {
	dir := t.TempDir()
	wrapper, progOut := Wrapper(t, dir, "/bin/echo", "/x/prog", "-gdb", "it's.b")
	if progOut != filepath.Join(dir, "prog.out") {
		t.Errorf("progOut %s", progOut)
	}
	w, err := os.ReadFile(wrapper)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := os.ReadFile(filepath.Join(dir, "in-netns"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"' -rn '", "in-netns' \"$@\""} {
		if !strings.Contains(string(w), want) {
			t.Errorf("wrapper lacks %q:\n%s", want, w)
		}
	}
	for _, want := range []string{"' link set lo up || exit 1\n", "' '-E' 'GOMAXPROCS=1' '-g' '1234' '/x/prog' '-gdb' 'it'\\''s.b' < /dev/null > '" + progOut + "' 2>&1 &\n", "exec '/bin/echo' \"$@\"\n"} {
		if !strings.Contains(string(inner), want) {
			t.Errorf("inner script lacks %q:\n%s", want, inner)
		}
	}
}

// TestCommand: a program for this machine runs as itself where the test
// binary is not emulated, and through qemu-aarch64 where it is.
func TestCommand(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := Command(context.Background(), t, self, "-test.run=^$")
	if Emulated() == "" {
		if cmd.Path != self {
			t.Errorf("Command runs %s, want %s", cmd.Path, self)
		}
	} else if filepath.Base(cmd.Path) != "qemu-aarch64" || cmd.Args[1] != self {
		t.Errorf("emulated (%s): Command runs %v, want qemu-aarch64 %s", Emulated(), cmd.Args, self)
	}
	cmd.Env = append(os.Environ(), probeEnv+"=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("%v: %v\n%s", cmd.Args, err, out)
	}
}

// fakeLLDBStops writes a stand-in for lldb (see writeFakeLLDB) whose
// first missed runs end with the program's exit and no stop (a breakpoint
// qemu's stub lost), the later ones stopping once at a breakpoint first.
func fakeLLDBStops(t *testing.T, missed int) (path, count string) {
	return writeFakeLLDB(t, fmt.Sprintf(`if [ $n -gt %d ]; then echo "* thread #1, name = 'prog', stop reason = breakpoint 1.1"; fi
echo "Process 7 exited with status = 0 (0x00000000)"
`, missed))
}

// TestRunLLDBStops: a session with fewer breakpoint stops than asked is
// run again, up to LLDBAttempts times in all; RunLLDB (no stops asked)
// takes the first run whatever it stopped at.
func TestRunLLDBStops(t *testing.T) {
	tooltest.Require(t, "sh")
	for _, tc := range []struct{ missed, stops, runs, seen int }{{0, 1, 1, 1}, {1, 1, 2, 1}, {2, 1, 3, 1}, {5, 1, LLDBAttempts, 0}, {5, 0, 1, 0}} {
		lldb, count := fakeLLDBStops(t, tc.missed)
		s := &lldbtest.Session{LLDB: lldb, Program: "prog", Dir: t.TempDir(), Cmds: []string{"continue"}}
		r, err := RunLLDBStops(t, s, tc.stops)
		if err != nil {
			t.Fatalf("missed %d: %v", tc.missed, err)
		}
		b, _ := os.ReadFile(count)
		if seen := strings.Count(r.Output, "stop reason = breakpoint"); strings.TrimSpace(string(b)) != fmt.Sprint(tc.runs) || seen != tc.seen {
			t.Errorf("missed %d, stops %d: %s runs, %d stops seen; want %d runs, %d stops:\n%s", tc.missed, tc.stops, b, seen, tc.runs, tc.seen, r.Output)
		}
	}
}

// fakeGDB writes an executable stand-in for gdb -batch: it counts its runs
// in a file (count), prints each -ex echo command's text (gdbtest's
// markers) and, for each "continue", gdb's report of a breakpoint stop,
// except on its first missed runs, where the first continue reports the
// program's end instead (a breakpoint qemu's stub lost).
func fakeGDB(t *testing.T, missed int) (path, count string) {
	dir := t.TempDir()
	path, count = filepath.Join(dir, "gdb"), filepath.Join(dir, "runs")
	script := fmt.Sprintf(`#!/bin/sh
n=$(cat %[1]s 2>/dev/null || echo 0); n=$((n+1)); echo $n > %[1]s
while [ $# -gt 0 ]; do
	if [ "$1" = -ex ]; then
		case "$2" in
		"echo "*) printf '%%b' "${2#echo }" ;;
		continue) if [ -n "$gone" ]; then echo "The program is not being run."; elif [ $n -le %[2]d ]; then echo "[Inferior 1 (process 1) exited normally]"; gone=1; else echo "Thread 2 hit Breakpoint 1, f (x=1) at f.c:3"; fi ;;
		esac
		shift
	fi
	shift
done
`, shellQuote(count), missed)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, count
}

// TestRunGDBStops: a session with fewer breakpoint stops than asked is run
// again, up to GDBAttempts times in all; one with enough is run once.
func TestRunGDBStops(t *testing.T) {
	tooltest.Require(t, "sh")
	for _, tc := range []struct{ missed, runs, stops int }{{0, 1, 2}, {1, 2, 2}, {2, 3, 2}, {5, GDBAttempts, 0}} {
		gdb, count := fakeGDB(t, tc.missed)
		s := &gdbtest.Session{GDB: gdb, Dir: t.TempDir(), NoScript: true, Cmds: []string{"break f", "continue", "continue"}}
		r, err := RunGDBStops(t, s, 2)
		if err != nil {
			t.Fatalf("missed %d: %v", tc.missed, err)
		}
		b, _ := os.ReadFile(count)
		if got := strings.Count(r.Output, "hit Breakpoint 1, "); strings.TrimSpace(string(b)) != fmt.Sprint(tc.runs) || got != tc.stops {
			t.Errorf("missed %d: %s runs, %d stops; want %d runs, %d stops:\n%s", tc.missed, b, got, tc.runs, tc.stops, r.Output)
		}
	}
}
