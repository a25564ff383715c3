package gdbtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/internal/tooltest"
)

const sample = "Loading Go Runtime support.\n\n" + marker + " 0\n" +
	"Breakpoint 1 (fib) pending.\n\n" + marker + " 1\n" +
	"elfimage: added symbol file /t/prog.elf at 0x7ffff7e20000\n\n" +
	"Thread 1 \"elfimage\" hit Breakpoint 1, fib (n=8) at prog.scm:3\n3\t  (if (< n 2)\n\n" + marker + " 2\n" +
	"#0  fib (n=8) at prog.scm:3\n        i = 2\n        acc = <optimized out>\n" +
	"#1  0x00007ffff7e21081 in tak (x=1, y=2, z=3) at prog.scm:5\nNo locals.\n" +
	"#2  0x00007ffff7e21016 in %start ()\nNo locals.\n\n" + marker + " end\n"

func TestSplitAndParse(t *testing.T) {
	r := split(sample, 3)
	if r.Pre != "Loading Go Runtime support." || r.Blocks[0] != "Breakpoint 1 (fib) pending." {
		t.Errorf("pre %q, block 0 %q", r.Pre, r.Blocks[0])
	}
	if !strings.HasPrefix(r.Blocks[1], "elfimage: added") || strings.Contains(r.Output, marker) {
		t.Errorf("block 1 %q, output %q", r.Blocks[1], r.Output)
	}
	if f := Funcs(r.Blocks[2]); strings.Join(f, " ") != "fib tak %start" {
		t.Errorf("Funcs = %q", f)
	}
	r.Cmds = []string{"break fib", "run", "bt full"}
	if b := r.Block(t, "bt full"); b != r.Blocks[2] {
		t.Errorf("Block(bt full) = %q, want Blocks[2]", b)
	}
	fs := Frames(r.Blocks[2])
	want := []Frame{
		{Num: 0, Func: "fib", Args: "n=8", File: "prog.scm", Line: 3},
		{Num: 1, PC: 0x7ffff7e21081, Func: "tak", Args: "x=1, y=2, z=3", File: "prog.scm", Line: 5},
		{Num: 2, PC: 0x7ffff7e21016, Func: "%start"},
	}
	if !reflect.DeepEqual(fs, want) {
		t.Errorf("Frames:\n got %+v\nwant %+v", fs, want)
	}
	fl := FullLocals(r.Blocks[2])
	if len(fl) != 3 || !reflect.DeepEqual(fl[0], map[string]string{"i": "2", "acc": "<optimized out>"}) || len(fl[1]) != 0 {
		t.Errorf("FullLocals %v", fl)
	}
	if v := Vars("a = 5\nNo locals.\nb = <optimized out>\n"); !reflect.DeepEqual(v, map[string]string{"a": "5", "b": "<optimized out>"}) {
		t.Errorf("Vars %v", v)
	}
}

func TestScriptEmbedded(t *testing.T) {
	for _, w := range []string{"gdbImageLoaded", "gdbImageUnloaded", "gdbImageEvent", "add-symbol-file", "remove-symbol-file", "handle SIGURG nostop noprint pass"} {
		if !strings.Contains(Script, w) {
			t.Errorf("script lacks %q", w)
		}
	}
}

// TestThreads: `thread apply all bt` of a live process and of a core are
// split by the LWP each heading names.
func TestThreads(t *testing.T) {
	out := "\nThread 2 (Thread 0x7ffff7d8a6c0 (LWP 4712) \"a.out\"):\n#0  0x1 in pause ()\n#1  0x2 in worker (arg=0x0) at a.c:7\n\n" +
		"Thread 1 (Thread 0x7ffff7d8b740 (LWP 4711) \"a.out\"):\n#0  main () at a.c:20\n" +
		"Thread 3 (LWP 4713):\n#0  0x3 in ?? ()\n"
	th := Threads(out)
	if len(th) != 3 || len(Frames(th[4712])) != 2 || Frames(th[4712])[1].Func != "worker" || Frames(th[4711])[0].Line != 20 || th[4713] != "#0  0x3 in ?? ()\n" {
		t.Errorf("threads %v", th)
	}
}

// fatalTB records what Fatalf says and ends its goroutine, as testing.T's
// Fatalf does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestMust: Must returns the result when there is no error, and fails the
// test with the error and the output so far (none for a nil result)
// otherwise.
func TestMust(t *testing.T) {
	r := &Result{Output: "Breakpoint 1 (fib) pending.\n"}
	for _, c := range []struct {
		r    *Result
		err  error
		want string // what Fatalf says; "" for no failure
	}{
		{r, nil, ""},
		{r, errors.New("gdbtest: gdb timed out"), "gdbtest: gdb timed out\nBreakpoint 1 (fib) pending.\n"},
		{nil, errors.New("open x: no such file"), "open x: no such file\n"},
	} {
		ft := &fatalTB{TB: t}
		var got *Result
		done := make(chan struct{})
		go func() {
			defer close(done)
			got = Must(ft, c.r, c.err)
		}()
		<-done
		if ft.msg != c.want || (c.want == "" && got != c.r) {
			t.Errorf("Must(%v, %v): fails with %q, returns %v; want %q", c.r, c.err, ft.msg, got, c.want)
		}
	}
}

// TestLastMayFail runs a stand-in for gdb -batch that stops at the command
// "fail", as gdb's batch mode stops at a failing command: Run refuses the
// output unless the session says its last command may fail and it is the
// last one that stopped gdb.
func TestLastMayFail(t *testing.T) {
	tooltest.Require(t, "sh")
	dir := t.TempDir()
	fake := filepath.Join(dir, "gdb")
	script := `#!/bin/sh
while [ $# -gt 0 ]; do
	if [ "$1" = -ex ]; then
		case "$2" in
		echo*) printf '%b' "${2#echo }" ;;
		fail) echo "fail: error"; exit 1 ;;
		*) echo "ran $2" ;;
		esac
		shift
	fi
	shift
done
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cmds []string
		may  bool
		ok   bool
	}{
		{[]string{"a", "b"}, false, true},
		{[]string{"a", "fail"}, false, false},
		{[]string{"a", "fail"}, true, true},
		{[]string{"fail", "b"}, true, false},
	} {
		s := &Session{GDB: fake, Dir: dir, NoScript: true, Cmds: c.cmds, LastMayFail: c.may}
		r, err := s.Run()
		if (err == nil) != c.ok {
			t.Errorf("%q, LastMayFail %v: error %v, want ok %v", c.cmds, c.may, err, c.ok)
			continue
		}
		if c.ok && (r.Blocks[0] != "ran a" || r.Blocks[1] != map[string]string{"b": "ran b", "fail": "fail: error"}[c.cmds[1]]) {
			t.Errorf("%q, LastMayFail %v: blocks %q", c.cmds, c.may, r.Blocks)
		}
	}
}
