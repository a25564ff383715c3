package procview_test

import (
	"errors"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/dwarf/value"
	"github.com/elfimage/elfimage/internal/tooltest"
	"github.com/elfimage/elfimage/procview"
)

// entryProg is compiled with gcc -O2 -g: its callees' arguments are dead
// after their calls, so gcc describes them with DW_OP_entry_value and the
// callers with DW_TAG_call_site_parameter. Three threads spin in spin:
// the main thread through outer (called through a pointer), pass, changes
// and leaf; the worker through tailer, which tail-calls mid, and pong,
// which ping and pong tail-call; worker2 through caller1 and a clone of
// clone_me without its unused parameter.
const entryProg = `#include <pthread.h>
#include <unistd.h>

volatile int stop, started, started2;
volatile long sink;

__attribute__((noinline)) void spin(long n) {
	while (!stop)
		;
}

/* x and y are dead after the call: their locations end in
   DW_OP_entry_value; y's call value is an address (DW_OP_addr). */
__attribute__((noinline)) int leaf(int x, long y) {
	spin(0);
	return 1;
}

/* n changes and stays live: n=V, n@entry=E. */
__attribute__((noinline)) int changes(long n) {
	for (int i = 0; i < 3; i++)
		n = n * 2 + sink;
	leaf(7, (long)&sink);
	return n;
}

/* changes' argument is b+1, b's value on entry: a call value holding an
   entry value, found in outer's call site. */
__attribute__((noinline)) int pass(int b) {
	changes(b + 1);
	return 3;
}

/* d stays in a callee-saved register: pass's call value. */
__attribute__((noinline)) int outer(int d) {
	pass(d + 10);
	sink = d;
	return 5;
}

/* Called through a pointer: a call site without a known target. */
int (*volatile fp)(int) = outer;

int ping(int n);

/* pong and ping call each other by tail calls: pong's values on entry
   are not reliable (the frame may be a tail-called instance). */
__attribute__((noinline)) int pong(int n) {
	if (n <= 0) {
		spin(1);
		return sink;
	}
	return ping(n - 1);
}

__attribute__((noinline)) int ping(int n) { return pong(n - 1); }

/* mid is tail-called by tailer: the caller's call site names tailer. */
__attribute__((noinline)) int mid(int a) {
	pong(a - 2);
	return 7;
}

__attribute__((noinline)) int tailer(int t) { return mid(t * 3); }

void *worker(void *p) {
	started = 1;
	tailer(2);
	sink = 2;
	return p;
}

/* unused is not used: gcc's clone of clone_me has no such parameter,
   whose value DW_OP_GNU_parameter_ref finds in the caller's call site
   (DW_AT_call_parameter). */
static __attribute__((noinline)) int clone_me(int a, long unused, int b) {
	spin(a);
	sink = b;
	return a + b;
}

__attribute__((noinline)) int caller1(int x) {
	clone_me(x, 99, x * 2);
	clone_me(x + 1, 98, x);
	return 1;
}

void *worker2(void *p) {
	started2 = 1;
	caller1(sink + 3);
	sink = 3;
	return p;
}

int main(int argc, char **argv) {
	pthread_t th, th2;
	pthread_create(&th, 0, worker, 0);
	pthread_create(&th2, 0, worker2, 0);
	while (!started || !started2)
		;
	write(1, "ready\n", 6);
	fp(argc + 20);
	return 0;
}
`

// TestStacksArgsEntryValues: values on entry (DW_OP_entry_value through
// the caller's DW_TAG_call_site_parameter) of a gcc -O2 program caught
// live, against gdb's `thread apply all bt` line by line and in gdb's
// forms: x=x@entry=7 (the value is the value on entry), n=256,
// n@entry=32 (the value changed), b=b@entry=31 (a call value holding the
// caller's own value on entry), y@entry the address of a global
// (DW_OP_addr in a PIE). Not known, as for gdb: outer's d on entry (an
// indirect call), pong's (it can call itself by tail calls). mid's a on
// entry, which gdb finds by building the tail-call frame tailer that
// our unwinding has not (gdb's only frame), is not known to us: the
// caller's call site names tailer. clone_me's unused, which gcc removed
// from its clone, through DW_OP_GNU_parameter_ref. The same from a core
// (gcore).
func TestStacksArgsEntryValues(t *testing.T) {
	requireAmd64Stacks(t)
	gdb := tooltest.Require(t, "gdb")
	bin := tooltest.GCC(t, entryProg, "-g", "-O2", "-pthread")
	cmd := exec.Command(bin)
	tooltest.StartReady(t, cmd)
	pid := cmd.Process.Pid
	inSpin := func(th *procview.Thread) bool {
		f := th.Frames
		return len(f) > 2 && len(f[0].Funcs) > 0 && f[0].Funcs[0].Function == "spin" && f[0].Funcs[0].Line == 8
	}
	threads, _ := stacksWhen(t, pid, 50, func(th []procview.Thread) bool {
		return len(th) == 3 && inSpin(&th[0]) && inSpin(&th[1]) && inSpin(&th[2])
	})
	wants := [][]argLine{
		{
			{"spin", "n=n@entry=0"},
			{"leaf", "x=x@entry=7, y=y@entry=" + strconv.FormatUint(symbolValue(t, bin, threads[0].Frames[0].Module, pid, "sink"), 10)},
			{"changes", "n=256, n@entry=32"},
			{"pass", "b=b@entry=31"},
			{"outer", "d=21"},
			{"main", "argc=argc@entry=1, argv=argv@entry=" + ptrArg(t, &threads[0], "main", "argv")},
		},
		{
			{"spin", "n=n@entry=1"},
			{"pong", "n=<optimized out>"},
			{"mid", "a=<optimized out>"},
			{"worker", "p=0x0"},
		},
		{
			{"spin", "n=n@entry=3"},
			{"clone_me", "a=a@entry=3, unused=99, b=b@entry=6"},
			{"caller1", "x=3"},
			{"worker2", "p=0x0"},
		},
	}
	g := gdbArgStacks(t, gdb, pid)
	for i, want := range wants {
		th := &threads[i]
		got := ourArgLines(th)
		for j := range got {
			got[j].fn = norm(got[j].fn) // clone_me.constprop.0.isra.0, as gdb names it
		}
		if len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
			t.Errorf("thread %d:\n ours %v\n want %v", th.TID, got, want)
			continue
		}
		// gdb's lines, without its tail-call frame.
		var theirs []argLine
		for _, f := range g[th.TID] {
			if f.Func != "tailer" {
				theirs = append(theirs, argLine{f.Func, gdbArgs(f.Args)})
			}
		}
		for j, w := range want {
			switch {
			case j >= len(theirs) || theirs[j].fn != w.fn:
				t.Errorf("thread %d line %d: ours %s, gdb %v", th.TID, j, w.fn, theirs)
			case w.fn == "mid" && theirs[j].args != "a=a@entry=6", w.fn == "main" && theirs[j].args != "argc=1, argv=<optimized out>":
				t.Errorf("thread %d line %d %s: gdb (%s), which gdb 13 printed otherwise", th.TID, j, w.fn, theirs[j].args)
			case w.fn == "clone_me" && theirs[j].args != "a=a@entry=3, b=b@entry=6, unused=99":
				// gdb lists the clone's concrete parameters first.
				t.Errorf("thread %d line %d %s: gdb (%s)", th.TID, j, w.fn, theirs[j].args)
			case w.fn != "mid" && w.fn != "main" && w.fn != "clone_me" && theirs[j].args != w.args:
				t.Errorf("thread %d line %d %s: ours (%s), gdb (%s)", th.TID, j, w.fn, w.args, theirs[j].args)
			}
			if j < len(theirs) && !sameArgs(theirs[j].fn, w.args, theirs[j].args) {
				t.Errorf("thread %d line %d %s: sameArgs(%s, %s) refuses them", th.TID, j, w.fn, w.args, theirs[j].args)
			}
		}
	}
	// Why pong's and mid's are not known.
	for fn, why := range map[string]string{"pong": "can call itself by tail calls", "mid": "not this frame's function"} {
		a := argOf(t, &threads[1], fn)
		if !errors.Is(a.Err, value.ErrOptimizedOut) || !strings.Contains(a.Err.Error(), why) {
			t.Errorf("%s: %s: error %v, want one saying %q", fn, a.Name, a.Err, why)
		}
	}
	if t.Failed() {
		t.Logf("ours:\n%s", dumpThreads(threads))
	}

	// The same from a core of the process.
	core, err := procview.OpenCore(gcore(t, gdb, t.TempDir(), pid))
	if err != nil {
		t.Fatal(err)
	}
	defer core.Close()
	cth, cv, err := procview.CoreStacks(core, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cv.Close()
	for i, want := range wants {
		if i >= len(cth) {
			t.Fatalf("%d threads in the core", len(cth))
		}
		k := slices.IndexFunc(cth, func(c procview.Thread) bool { return c.TID == threads[i].TID })
		if k < 0 {
			t.Errorf("no thread %d in the core", threads[i].TID)
			continue
		}
		got := ourArgLines(&cth[k])
		for j := range got {
			got[j].fn = norm(got[j].fn)
		}
		if len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
			t.Errorf("core, thread %d:\n ours %v\n want %v", threads[i].TID, got, want)
		}
	}
}

// argOf returns the first argument of fn's frame in th.
func argOf(t *testing.T, th *procview.Thread, fn string) procview.Arg {
	t.Helper()
	for _, f := range th.Frames {
		for j, fu := range f.Funcs {
			if fu.Function == fn && j < len(f.Args) && len(f.Args[j]) > 0 {
				return f.Args[j][0]
			}
		}
	}
	t.Fatalf("no frame of %s with arguments", fn)
	return procview.Arg{}
}

// ptrArg returns our value of argument name of fn's frame in th (main's
// argv, which the stack's address randomization moves), checked to be
// a pointer.
func ptrArg(t *testing.T, th *procview.Thread, fn, name string) string {
	t.Helper()
	for _, f := range th.Frames {
		for j, fu := range f.Funcs {
			if fu.Function != fn || j >= len(f.Args) {
				continue
			}
			for _, a := range f.Args[j] {
				if a.Name == name && strings.HasPrefix(a.Value, "0x7ff") {
					return a.Value
				}
			}
		}
	}
	t.Errorf("no pointer argument %s of %s", name, fn)
	return "?"
}
