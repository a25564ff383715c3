package elfimage_test

// The entry frame as the tools see it: internal/handcall, a Go program
// that builds a Module by hand, links, loads, publishes and calls it
// through native.Call without writing anything for debuggers, run under
// gdb, lldb and perf. Each must go from the module's code through the
// library's entry frame into the Go frames that called native.Call.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/internal/gdbtest"
	"github.com/elfimage/elfimage/internal/lldbtest"
	"github.com/elfimage/elfimage/internal/qemutest"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// handcallProg is internal/handcall, built once per test binary.
var handcallProg = tooltest.GoProgram{Pkg: "github.com/elfimage/elfimage/internal/handcall", Name: "handcall"}

// typesProg is testdata/typesprog, a normally built program (the GDB JIT
// interface symbols must be in its .symtab) that TestTypesDebuggers runs,
// built once per test binary.
var typesProg = tooltest.GoProgram{Pkg: "./testdata/typesprog", Name: "typesprog", Env: []string{"CGO_ENABLED=0"}}

// handcall returns the path of internal/handcall, built with go build (a
// normal binary, with its symbol table and DWARF).
func handcall(t *testing.T) string {
	t.Helper()
	return handcallProg.Path(t)
}

// skipEmulated skips t on machines other than amd64: handcall's module is
// hand-assembled x86-64 code (there is no AArch64 handcall). Under
// qemu-user (qemutest.Emulated) the reason is said too: tool, a debugger
// or profiler of the host, could not run or trace handcall, an arm64
// program the host's kernel cannot execute (gdb and lldb start it with
// ptrace, perf with perf_event_open, none through qemu). The AArch64
// entry frame under gdb-multiarch and lldb attached to qemu-aarch64 -g is
// checked by publish's TestGDBMultiarchAArch64 and TestLLDBAArch64 (a
// hand-built module, as here) and by cmd/elfimage's
// TestGDBMultiarchSchemeAArch64 and TestLLDBSchemeAArch64
// (checkEntryFrames: a Scheme program under `elfimage run`): each bt goes
// from the JIT code through the entry frame into the Go callers of
// native.Call. perf has no AArch64 counterpart: qemu-user emulates no
// perf_event_open.
func skipEmulated(t *testing.T, tool string) {
	t.Helper()
	if why := qemutest.Emulated(); why != "" {
		t.Skipf("%s: %s runs handcall natively (ptrace or perf_event_open), which qemu-user does not emulate; and handcall's module is x86-64 code", why, tool)
	}
	if runtime.GOARCH != "amd64" {
		t.Skipf("handcall's module is hand-assembled x86-64 code; %s cannot run it on %s", tool, runtime.GOARCH)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	handcallProg.Remove()
	typesProg.Remove()
	if benchPath != "" { // benchImage's directory, shared by the benchmarks
		os.RemoveAll(filepath.Dir(benchPath))
	}
	os.Exit(code)
}

// goCallers are the Go frames every backtrace from code called through
// native.Call must show below the entry frame, in order (gdb and lldb
// print native.Call, inlined into main.run, as main.run's frame or as an
// inlined frame of its own).
var goCallers = []string{
	"github.com/elfimage/elfimage/native.trampoline",
	"github.com/elfimage/elfimage/native.call",
	"github.com/elfimage/elfimage/native.CallErr",
}

// TestEntryGDB: gdb stops in add, called by spin, called through
// native.Call; bt goes on through the entry frame (shown by gdb as
// "<signal handler called>", see elfimage.EntryImage) and native.trampoline
// into the Go callers, down to main.main, with no frame gdb cannot name.
func TestEntryGDB(t *testing.T) {
	t.Parallel()
	skipEmulated(t, "gdb")
	gdb := tooltest.Require(t, "gdb")
	prog := handcall(t)
	s := &gdbtest.Session{GDB: gdb, Program: prog, Dir: t.TempDir(), NoScript: true,
		Cmds: []string{"break add", "run -gdb -n 3", "bt", "delete", "continue"}}
	r := gdbtest.MustRun(t, s)
	defer func() {
		if t.Failed() {
			t.Logf("gdb session:\n%s", r.Output)
		}
	}()
	if !strings.Contains(r.Blocks[1], "hit Breakpoint 1, add (a=0, b=3) at hand.s:") {
		t.Errorf("run: no stop in add (a=0, b=3):\n%s", r.Blocks[1])
	}
	bt := r.Blocks[2]
	want := `(?m)^#0 +add \(a=0, b=3\) at hand\.s:\d+\n` +
		`#1 +0x[0-9a-f]+ in spin \(n=.*\) at hand\.s:\d+\n` +
		`#2 +<signal handler called>\n` +
		`#3 +0x[0-9a-f]+ in github\.com/elfimage/elfimage/native\.trampoline \(\) at \S+/native/call_amd64\.s:\d+\n` +
		`#4 +0x[0-9a-f]+ in github\.com/elfimage/elfimage/native\.call \(.*\n` +
		`#5 +0x[0-9a-f]+ in github\.com/elfimage/elfimage/native\.CallErr \(`
	if !regexp.MustCompile(want).MatchString(bt) {
		t.Errorf("bt: want add, spin, <signal handler called> (%s), %v:\n%s", elfimage.EntryName, goCallers, bt)
	}
	fs := gdbtest.Frames(bt)
	if len(fs) == 0 || fs[len(fs)-1].Func != "main.main" {
		t.Errorf("bt does not end at main.main:\n%s", bt)
	}
	if strings.Contains(bt, "??") || strings.Contains(bt, "Backtrace stopped") {
		t.Errorf("bt has an unnamed frame or stopped:\n%s", bt)
	}
	if !strings.Contains(r.Blocks[4], "6\n") || !strings.Contains(r.Blocks[4], "exited normally") {
		t.Errorf("continue: want the sum 6 and a normal exit:\n%s", r.Blocks[4])
	}
}

// lldbFrameRE is one frame of lldb's bt: number, pc, module`function.
var lldbFrameRE = regexp.MustCompile("(?m)^\\s*\\*?\\s*frame #(\\d+): 0x[0-9a-f]+( (\\S+?)`([^\\s(]+))?")

// TestEntryLLDB: lldb (its GDB JIT loader reads the published images)
// stops in add (a pending breakpoint, resolved when handcall publishes its
// image) and its bt goes through spin, the entry frame (named, lldb needs
// no signal frame) and native.trampoline into the Go callers, down to
// main.main and runtime.goexit, every frame named.
func TestEntryLLDB(t *testing.T) {
	t.Parallel()
	skipEmulated(t, "lldb")
	lldb := tooltest.Require(t, "lldb-19", "lldb")
	prog := handcall(t)
	s := &lldbtest.Session{LLDB: lldb, Program: prog, Args: []string{"-gdb", "-n", "3"}, Dir: t.TempDir(), Timeout: 2 * time.Minute,
		Cmds: []string{"breakpoint set -n add", "run", "bt", "process kill"}}
	bt := lldbtest.MustRun(t, s).Blocks[2]
	var names []string
	for _, m := range lldbFrameRE.FindAllStringSubmatch(bt, -1) {
		if m[4] == "" {
			t.Errorf("frame #%s has no function:\n%s", m[1], bt)
		}
		names = append(names, strings.TrimSuffix(m[4], ".abi0"))
	}
	want := append([]string{"add", "spin", elfimage.EntryName}, goCallers...)
	if len(names) < len(want) || strings.Join(names[:len(want)], " ") != strings.Join(want, " ") {
		t.Errorf("lldb bt frames %q, want them to start with %q:\n%s", names, want, bt)
	}
	if !strings.Contains(strings.Join(names, " "), "main.main runtime.main runtime.goexit") {
		t.Errorf("lldb bt frames %q do not reach main.main and runtime.goexit:\n%s", names, bt)
	}
	if !strings.Contains(bt, "`add(a=0, b=3) at hand.s:") {
		t.Errorf("lldb bt: frame 0 is not add(a=0, b=3) at hand.s:\n%s", bt)
	}
}

// perfFrame is one frame of a perf script call chain: symbol and DSO.
type perfFrame struct{ sym, dso string }

var perfFrameRE = regexp.MustCompile(`^\s*[0-9a-f]+ (.+) \((.+)\)$`)

// perfChains runs perf script on data and returns each sample's frames.
func perfChains(t *testing.T, perf, home, data string) [][]perfFrame {
	t.Helper()
	out := perfRun(t, perf, home, "script", "-i", data, "-F", "ip,sym,dso")
	var chains [][]perfFrame
	for _, block := range strings.Split(out, "\n\n") {
		var c []perfFrame
		for _, l := range strings.Split(block, "\n") {
			if m := perfFrameRE.FindStringSubmatch(l); m != nil {
				c = append(c, perfFrame{strings.TrimSuffix(m[1], ".abi0"), m[2]})
			}
		}
		if len(c) > 0 {
			chains = append(chains, c)
		}
	}
	return chains
}

// perfRun runs perf in home with HOME set to it (tooltest.PerfOutput) and
// returns its standard output.
func perfRun(t *testing.T, perf, home string, args ...string) string {
	t.Helper()
	return tooltest.PerfOutput(t, perf, home, nil, args...)
}

// entryChain checks one call chain of a sample in the module's code:
// module frames (add, spin) in jitted .so files, then the entry routine,
// then the Go callers of native.Call up to depth frames of them (all of
// goCallers and main.main when depth is 0). It returns "" or what is
// wrong.
func entryChain(c []perfFrame, depth int) string {
	i := 0
	for i < len(c) && (c[i].sym == "add" || c[i].sym == "spin") && strings.Contains(c[i].dso, "jitted-") {
		i++
	}
	if i == 0 {
		return "not a sample in the module"
	}
	if i == len(c) || c[i].sym != elfimage.EntryName || !strings.Contains(c[i].dso, "jitted-") {
		return fmt.Sprintf("frame %d is not %s in a jitted .so", i, elfimage.EntryName)
	}
	rest := c[i+1:]
	want := goCallers
	if depth > 0 {
		want = want[:depth]
	}
	for j, w := range want {
		if j >= len(rest) || rest[j].sym != w {
			return fmt.Sprintf("frame %d after the entry frame is %v, want %s", j, rest[j:min(j+1, len(rest))], w)
		}
	}
	if depth == 0 {
		for _, f := range rest {
			if f.sym == "main.main" {
				return ""
			}
		}
		return "no main.main"
	}
	return ""
}

// TestEntryPerf records handcall spinning (announced in a jitdump) with
// perf, with frame-pointer call graphs and with DWARF call graphs, and
// checks what each shows past the module's frames: with frame pointers
// (the kernel walks RBP across the stack switch; the entry routine and the
// trampoline keep frame records) the chain goes on through the entry
// routine and every Go caller down to main.main; with --call-graph dwarf
// (perf unwinds a copy of the library stack with the jitted .so files'
// CFI) it reaches native.trampoline, the Go frame the entry frame
// describes, and stops there: the Go stack is not in the copy.
func TestEntryPerf(t *testing.T) {
	t.Parallel()
	skipEmulated(t, "perf")
	perf := tooltest.Require(t, "perf")
	prog := handcall(t)
	home := t.TempDir()
	probe := filepath.Join(home, "probe.data")
	if out, err := tooltest.RunTool(t, exec.Command(perf, "record", "-e", "cpu-clock", "-N", "-q", "-o", probe, "--", "true"), 2*time.Minute); err != nil {
		tooltest.Skip(t, "perf cannot record here (perf_event_open refused?): %v\n%s", err, out)
	}
	for _, mode := range []struct {
		name  string
		flags []string
		depth int
	}{
		{"fp", []string{"-g"}, 0},
		{"dwarf", []string{"--call-graph", "dwarf"}, 1},
	} {
		t.Run(mode.name, func(t *testing.T) {
			// perf copies 8 KiB of stack from SP with each sample;
			// until native.Stack had a guard page above its top, that
			// copy ran on into the image the kernel sometimes mapped
			// just above the stack, and perf's DWARF unwinder read the
			// image's unwind tables from those bytes: every chain of
			// the run failed or showed the entry frame twice.
			if why := entryPerfRun(t, perf, filepath.Join(home, mode.name), prog, mode.name, mode.flags, mode.depth); why != "" {
				t.Error(why)
			}
		})
	}
}

// entryPerfRun records prog under perf in dir with flags, injects its
// jitdump and returns why the samples' chains fail the test's bound, or
// "" when they pass.
func entryPerfRun(t *testing.T, perf, dir, prog, name string, flags []string, depth int) string {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, injected := filepath.Join(dir, "perf.data"), filepath.Join(dir, "perf.inj.data")
	args := append([]string{"record", "-e", "cpu-clock", "-N", "-q", "-k", "1", "-o", data}, flags...)
	args = append(args, "--", prog, "-jitdump", dir, "-n", "100000000")
	// Each mode has its own HOME, so its own build-ID cache
	// (~/.debug): the modes' jitted .so files have the same
	// build IDs (the same images) but not the same code
	// addresses.
	home := dir
	if out := perfRun(t, perf, home, args...); !strings.Contains(out, "5000000050000000") {
		t.Fatalf("handcall under perf printed %q, want the sum 5000000050000000", out)
	}
	perfRun(t, perf, home, "inject", "--jit", "-i", data, "-o", injected)
	n, good, further := 0, 0, 0
	var bad []string
	for _, c := range perfChains(t, perf, home, injected) {
		why := entryChain(c, depth)
		if why == "not a sample in the module" {
			continue
		}
		n++
		if why != "" {
			if len(bad) < 5 {
				bad = append(bad, fmt.Sprintf("%s: %v", why, c))
			}
			continue
		}
		good++
		if last := c[len(c)-1]; last.sym != "github.com/elfimage/elfimage/native.trampoline" {
			further++
		}
	}
	t.Logf("%s: %d samples in the module, %d with the expected chain, %d of them going past native.trampoline", name, n, good, further)
	if n < 100 || good*10 < n*8 {
		return fmt.Sprintf("%s: %d samples in the module, %d with the chain through %s into Go: want at least 100, 80%%; for example:\n%s",
			name, n, good, elfimage.EntryName, strings.Join(bad, "\n"))
	}
	return ""
}
