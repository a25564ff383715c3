package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/elfimage/elfimage/internal/spinprog"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// cpuProg is package spinprog's program with work called on 50_000_000.
var cpuProg = spinprog.Source(50_000_000)

// TestCPUProfileMatchesPerf runs the same program under `perf record`
// and with `run -cpuprofile`, and checks that `go tool pprof -top` on our
// profile gives the procedures perf report gives, each above 5% within 5
// points of perf's share; that -lines gives prog.scm lines inside each
// procedure; and that -traces goes from the procedures through the entry
// frame into the Go code of the CLI.
func TestCPUProfileMatchesPerf(t *testing.T) {
	f := setupPerf(t)
	goTool := tooltest.Require(t, "go")
	src := filepath.Join(f.dir, "prog.scm")
	img := filepath.Join(f.dir, "prog.elf")
	if err := os.WriteFile(src, []byte(cpuProg), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI(t, "build", "-o", img, src); code != 0 {
		t.Fatalf("elfimage build: exit %d\n%s%s", code, out, errOut)
	}
	pprof := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(goTool, append([]string{"tool", "pprof"}, args...)...)
		out, err := tooltest.RunGroup(cmd, 2*time.Minute)
		if err != nil {
			t.Fatalf("go tool pprof %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	prof := filepath.Join(f.dir, "cpu.pb.gz")
	var ours, oursAll map[string]float64
	// round runs the program under perf record and with -cpuprofile once
	// and returns where the two profiles' shares differ by more than the
	// bound. The runs are two samples of about 1,000 each on a shared
	// machine: a round that disagrees is run once more, and the test
	// fails when the second disagrees too.
	round := func() []string {
		data := filepath.Join(f.dir, "perf.data")
		f.runUnder(t, []string{"record", "-e", "cpu-clock", "-F", "1000", "-N", "-q", "-o", data, "--", f.cli, "run", img})
		report := f.perfOutput(t, "report", "-i", data, "--stdio", "--no-children", "--sort", "sym")
		perfShares := map[string]float64{}
		for _, m := range regexp.MustCompile(`(?m)^\s+([\d.]+)%\s+\[\.\]\s+(\S+)\s*$`).FindAllStringSubmatch(report, -1) {
			v, _ := strconv.ParseFloat(m[1], 64)
			perfShares[m[2]] += v
		}
		code, out, errOut := runCLI(t, "run", "-cpuprofile", prof, img)
		if code != 0 || out != "650000000\n" {
			t.Fatalf("run -cpuprofile: exit %d, output %q\n%s", code, out, errOut)
		}
		topOut := pprof("-top", prof)
		ours, oursAll = pprofFlat(topOut), pprofFlat(topOut)
		var disagree []string
		// The shares compared are of user time: perf's [.] rows, ours
		// without [kernel]. How much of a loaded machine's time the kernel
		// takes (timer interrupts, the profilers' own wakeups) differs
		// between two runs and two profilers, and would shift every user
		// share with it.
		perfUser := 0.0
		for _, p := range perfShares {
			perfUser += p
		}
		oursUser := 100 - ours["[kernel]"]
		if perfUser <= 0 || oursUser <= 0 {
			t.Fatalf("no user time: perf %v, ours %v", perfShares, ours)
		}
		t.Logf("user time: %.1f%% in perf report, %.1f%% in go tool pprof", perfUser, oursUser)
		for name, p := range perfShares {
			perfShares[name] = p * 100 / perfUser
		}
		for name, p := range ours {
			ours[name] = p * 100 / oursUser
		}
		checked := 0
		for name, p := range perfShares {
			if p < 5 {
				continue
			}
			checked++
			// Two runs on a shared machine: 10 points here; the 5-point
			// target is bench/run's (profile/ rows), on a quiet machine.
			if d := ours[name] - p; d > 10 || d < -10 {
				disagree = append(disagree, fmt.Sprintf("%s: %.1f%% in go tool pprof, %.1f%% in perf report", name, ours[name], p))
			}
		}
		t.Logf("perf report: %v; go tool pprof: spin-a %.1f%%, spin-b %.1f%%", perfShares, ours["spin-a"], ours["spin-b"])
		if checked < 2 || perfShares["spin-a"] < 5 || perfShares["spin-b"] < 5 {
			t.Fatalf("perf report does not show spin-a and spin-b above 5%%:\n%s", report)
		}
		if ours["spin-b"] < ours["spin-a"] {
			t.Errorf("spin-b (%.1f%%) below spin-a (%.1f%%)", ours["spin-b"], ours["spin-a"])
		}
		return disagree
	}
	if d := round(); d != nil {
		t.Logf("round 1 disagrees (%s); a second round", strings.Join(d, "; "))
		for _, e := range round() {
			t.Error(e)
		}
	}

	lines := pprofFlat(pprof("-top", "-lines", prof))
	for proc, rng := range map[string][2]int{"spin-a": {1, 4}, "spin-b": {5, 8}} {
		var sum float64
		for name, v := range lines {
			rest, ok := strings.CutPrefix(name, proc+" "+src+":")
			if !ok {
				continue
			}
			n, err := strconv.Atoi(rest)
			if err != nil || n < rng[0] || n > rng[1] {
				t.Errorf("%s at %s: outside lines %d-%d", proc, name, rng[0], rng[1])
			}
			sum += v
		}
		if sum < oursAll[proc]-1 {
			t.Errorf("%s: %.1f%% with lines of %s, of %.1f%%", proc, sum, src, oursAll[proc])
		}
	}

	traces := pprof("-traces", prof)
	want := []string{"spin-b", "work", "main", "%start", "elfimage.entry", "native.trampoline", "native.Call", "scheme.Run", ".execute", ".runRun"}
	found := false
	for _, tr := range strings.Split(traces, "-----------+") {
		i := 0
		for _, l := range strings.Split(tr, "\n") {
			if i < len(want) && strings.Contains(l, want[i]) {
				i++
			}
		}
		found = found || i == len(want)
	}
	if !found {
		t.Errorf("no trace goes %v:\n%.3000s", want, traces)
	}
}

// pprofFlat parses `go tool pprof -top` rows (flat flat%% sum%% cum cum%%
// name) into flat shares by name.
func pprofFlat(out string) map[string]float64 {
	row := regexp.MustCompile(`^\s*\S+\s+([\d.]+)%\s+[\d.]+%\s+\S+\s+[\d.]+%\s+(.+?)\s*$`)
	m := map[string]float64{}
	for _, l := range strings.Split(out, "\n") {
		if r := row.FindStringSubmatch(l); r != nil {
			v, _ := strconv.ParseFloat(r[1], 64)
			m[r[2]] += v
		}
	}
	return m
}

// runUnder runs perf with args, the program's output discarded; a
// non-zero exit, or a run of more than 2 minutes (tooltest.RunTool),
// fails t.
func (f *perfFixture) runUnder(t *testing.T, args []string) {
	t.Helper()
	cmd := f.perfCmd(args...)
	out, err := tooltest.RunTool(t, cmd, 2*time.Minute)
	if err != nil {
		t.Fatalf("perf %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestREADMEProfileRecipe runs the commands of the README's "Profiling
// with go tool pprof" section as written, from the repository root, /tmp/
// replaced by a test directory (and the compile cache there), and checks
// what each go tool pprof command shows.
func TestREADMEProfileRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI and profiles a program; skipped with -short")
	}
	setupPerf(t) // perf_event_open allowed here
	tooltest.Require(t, "go")
	cmds := readmeSection(t, "Profiling with go tool pprof")
	dir, root := recipeDirs(t)
	wants := map[string][]string{
		"-top /":      {" spin-b\n", " spin-a\n"},
		"-top -lines": {" spin-b " + dir + "/ab.scm:4\n", " spin-a " + dir + "/ab.scm:2\n"},
		"-traces":     {"spin-b\n", "main\n", "%start\n", "elfimage.entry\n", "native.trampoline\n", "scheme.Run\n", "main.main\n"},
		"-comments":   {"selfprof: perf_event_open cpu-clock at 1000 Hz", " lost (ring full)"},
	}
	seen := 0
	for _, c := range cmds {
		c = strings.ReplaceAll(c, "/tmp/", dir+"/")
		out := runRecipe(t, root, c, "ELFIMAGE_CACHE="+filepath.Join(dir, "cache"))
		for k, want := range wants {
			if !strings.Contains(c, "go tool pprof "+k) {
				continue
			}
			seen++
			pos := 0
			for _, w := range want {
				i := strings.Index(out[pos:], w)
				if i < 0 {
					t.Errorf("%s: output lacks %q (after byte %d):\n%s", c, w, pos, out)
					break
				}
				if k == "-traces" {
					pos += i + len(w) // in this order
				}
			}
		}
		if strings.Contains(c, "-top /") {
			flat := pprofFlat(out)
			if a, b := flat["spin-a"], flat["spin-b"]; b < 1.3*a || a < 10 {
				t.Errorf("spin-a %.1f%%, spin-b %.1f%%: want about 1/3 and 2/3", a, b)
			}
		}
	}
	if seen != len(wants) {
		t.Errorf("%d of the %d pprof commands checked found in the README: %q", seen, len(wants), cmds)
	}
}
