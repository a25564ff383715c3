package main

import (
	"os/exec"
	"regexp"
	"testing"

	"github.com/elfimage/elfimage/internal/tooltest"
)

// entryProg's leaf and changes have arguments gcc -O2 describes with
// DW_OP_entry_value and their callers' DW_TAG_call_site_parameter.
const entryProg = `#include <unistd.h>
volatile int stop;
volatile long sink;
__attribute__((noinline)) void spin(long n) { while (!stop) ; }
__attribute__((noinline)) int leaf(int x, long y) {
	spin(0);
	return 1;
}
__attribute__((noinline)) int changes(long n) {
	for (int i = 0; i < 3; i++)
		n = n * 2 + sink;
	leaf(n - 250, 105);
	return n;
}
int main(void) {
	write(1, "ready\n", 6);
	changes(32);
	return 0;
}
`

// TestStackEntryValues: `elfimage stack PID` prints values on entry as
// gdb's bt does (x=x@entry=6 when the value is the value on entry,
// n=256, n@entry=32 when it changed since), and --json gives them as
// "entry".
func TestStackEntryValues(t *testing.T) {
	skipStacks(t)
	cmd := exec.Command(tooltest.GCC(t, entryProg, "-g", "-O2"))
	tooltest.StartReady(t, cmd)
	pid := cmd.Process.Pid
	re := regexp.MustCompile(`(?m)^#0  0x[0-9a-f]{16} in spin \(n=n@entry=0\) at .*\n` +
		`#1  0x[0-9a-f]{16} in leaf \(x=x@entry=6, y=y@entry=105\) at .*\n` +
		`#2  0x[0-9a-f]{16} in changes \(n=256, n@entry=32\) at .*\n`)
	if text := stackUntil(t, re, pid); !re.MatchString(text) {
		t.Fatalf("no values on entry:\n%s", text)
	}
	j, raw := stackJSONOf(t, pid)
	var got []argJSON
	for _, th := range j.Threads {
		for _, f := range th.Frames {
			for _, fu := range f.Funcs {
				if (fu.Function == "leaf" || fu.Function == "changes") && fu.Args != nil {
					got = append(got, *fu.Args...)
				}
			}
		}
	}
	want := []argJSON{{"x", "6", "6"}, {"y", "105", "105"}, {"n", "256", "32"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("arguments %+v, want %+v\n%s", got, want, raw)
	}
}
