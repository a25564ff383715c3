package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/elfimage/elfimage/internal/gdbtest"
)

var (
	btThreadRE = regexp.MustCompile(`^Thread (\d+)`)
	btFrameRE  = regexp.MustCompile(`^#\d+\s+(?:0x[0-9a-f]+ in )?(\S+)(.*)$`)
	inSpinRE   = regexp.MustCompile(` in spin (\(n=\d+\) )?at `)
)

// btNames returns, by thread id, the function of every line of a
// backtrace as `stack` prints it (gdb false) or as gdb's `thread apply
// all bt` does (gdbtest.Threads): one line per source frame, inlined ones
// included; a signal frame as gdb names it, "<signal handler called>";
// Go's ABI wrapper suffix dropped.
func btNames(text string, gdb bool) map[int][]string {
	blocks := map[int]string{}
	if gdb {
		blocks = gdbtest.Threads(text)
	} else {
		tid := 0
		for _, line := range strings.Split(text, "\n") {
			if m := btThreadRE.FindStringSubmatch(line); m != nil {
				tid, _ = strconv.Atoi(m[1])
			} else if tid != 0 {
				blocks[tid] += line + "\n"
			}
		}
	}
	out := map[int][]string{}
	for tid, block := range blocks {
		for _, line := range strings.Split(block, "\n") {
			m := btFrameRE.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			fn := m[1]
			if strings.HasPrefix(m[0][strings.Index(m[0], m[1]):], "<signal handler called>") || strings.Contains(m[2], "(signal frame)") {
				fn = "<signal handler called>"
			}
			out[tid] = append(out[tid], strings.TrimSuffix(fn, ".abi0"))
		}
	}
	return out
}

// unpublishedSpinRE matches the spinning thread of `run -jit -perf-map
// spin.scm` as stack prints it: spin, %start and the library's entry routine named from the
// perf map and unwound by frame pointer, native.Call's stack switch, and
// the Go frames to main.main.
func unpublishedSpinRE(perfMap string) *regexp.Regexp {
	q := regexp.QuoteMeta("[" + perfMap + "]")
	return regexp.MustCompile(`(?m)^#0  0x[0-9a-f]{16} in spin ` + q + ` via registers\n` +
		`#1  0x[0-9a-f]{16} in %start ` + q + ` via (fp|prologue|epilogue)\n` +
		`#2  0x[0-9a-f]{16} in elfimage\.entry ` + q + ` via fp\n` +
		`#3  0x[0-9a-f]{16} in github\.com/elfimage/elfimage/native\.trampoline(\.abi0)? \(\) at \S+/native/call_amd64\.s:\d+ \[\S+\] via fp\n` +
		`#4  0x[0-9a-f]{16} in github\.com/elfimage/elfimage/native\.call \(fn=\d+, .*\) at \S+ \[\S+\] via stack-switch\n` +
		`(#\d+ .*\n)*` +
		`#\d+ +0x[0-9a-f]{16} in main.main \(\) at \S+ \[\S+\] via cfi\n`)
}

// TestStackCore: `elfimage stack --core` on a core that gdb's gcore wrote
// of `run -gdb spin.scm` (the image file mapped and published through the
// GDB JIT interface) names, thread by thread and line by line, the same
// functions as gdb's `thread apply all bt` on the same core, up to where
// gdb stops (main.main, or a frame it cannot name); --json has the same
// frames and the core's facts; bad invocations and bad cores fail with a
// clear message.
func TestStackCore(t *testing.T) {
	skipStacks(t)
	f := setupGDB(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "spin.scm"), []byte(spinProg), 0o644); err != nil {
		t.Fatal(err)
	}
	childPID := startReady(t, f.cli, dir, "run", "-gdb", "spin.scm")
	pid := strconv.Itoa(childPID)
	for try := 0; ; try++ {
		var out, errb bytes.Buffer
		if code := run([]string{"stack", pid}, &out, &errb); code != 0 {
			t.Fatalf("stack: exit %d: %s", code, errb.String())
		}
		if inSpinRE.MatchString(out.String()) {
			break
		}
		if try == 50 {
			t.Fatalf("no thread in spin:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	core := gcoreOf(t, f.gdb, dir, childPID)

	var out, errb bytes.Buffer
	if code := run([]string{"stack", "--core", core, "--exe", f.cli}, &out, &errb); code != 0 {
		t.Fatalf("stack --core: exit %d: %s", code, errb.String())
	}
	text := out.String()
	if !strings.HasPrefix(text, "Core of process "+pid) || strings.Contains(text, "Program terminated") {
		t.Errorf("want a header naming the process and no signal (gcore of a live process):\n%s", text)
	}
	s := &gdbtest.Session{GDB: f.gdb, Dir: dir, NoScript: true, Program: f.cli,
		Args: []string{"-c", core}, Cmds: []string{"thread apply all bt"}}
	r, err := s.Run()
	if err != nil {
		t.Fatalf("gdb: %v\n%s", err, r.Output)
	}
	ours, theirs := btNames(text, false), btNames(r.Blocks[0], true)
	if len(ours) != len(theirs) || len(ours) < 2 {
		t.Fatalf("%d threads, gdb %d\nours:\n%s\ngdb:\n%s", len(ours), len(theirs), text, r.Blocks[0])
	}
	spinning := 0
	for tid, g := range theirs {
		o := ours[tid]
		n := 0
		for ; n < len(g) && g[n] != "??"; n++ {
			if n == len(o)-1 && o[n] == "??" {
				// Our walk stopped at a return address outside
				// executable memory (a thread just cloned returns to
				// what its new stack holds); gdb names that pc after
				// the data symbol it falls in ("type:*") and goes on
				// guessing.
				break
			}
			if n >= len(o) || o[n] != g[n] {
				t.Errorf("thread %d line %d: ours %v, gdb %v", tid, n, o, g)
				break
			}
		}
		t.Logf("thread %d: %d lines compared with gdb's %d", tid, n, len(g))
		if len(o) > 0 && o[0] == "spin" {
			spinning++
			if n < 10 || !strings.Contains(strings.Join(o, " "), "spin %start <signal handler called> github.com/elfimage/elfimage/native.trampoline github.com/elfimage/elfimage/native.call") {
				t.Errorf("spinning thread: %d lines compared: ours %v, gdb %v", n, o, g)
			}
		}
	}
	if spinning != 1 {
		t.Errorf("%d threads in spin", spinning)
	}
	if t.Failed() {
		t.Logf("ours:\n%s\ngdb:\n%s", text, r.Blocks[0])
	}

	out.Reset()
	if code := run([]string{"stack", "--json", "--core", core, "-max", "5"}, &out, &errb); code != 0 {
		t.Fatalf("stack --json --core: exit %d: %s", code, errb.String())
	}
	var j struct {
		stackJSON
		Core coreJSON `json:"core"`
	}
	if err := json.Unmarshal(out.Bytes(), &j); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if strconv.Itoa(j.PID) != pid || j.Core.File != core || j.Core.Command != "elfimage" || len(j.Threads) != len(ours) {
		t.Errorf("json: pid %d, core %+v, %d threads", j.PID, j.Core, len(j.Threads))
	}
	for _, th := range j.Threads {
		if len(th.Frames) > 5 {
			t.Errorf("thread %d: %d frames with -max 5", th.TID, len(th.Frames))
		}
		if fs := th.Frames; len(fs) > 2 && len(fs[0].Funcs) > 0 && fs[0].Funcs[0].Function == "spin" {
			if !fs[2].Signal || fs[2].Funcs[0].Function != "elfimage.entry" || fs[0].Funcs[0].Line < 1 || fs[0].Funcs[0].Column < 1 {
				t.Errorf("spinning thread: %+v", fs[:3])
			}
			if th.Error == "" {
				t.Errorf("spinning thread cut at 5 frames without an error")
			}
		}
	}

	// Bad invocations and bad cores.
	notCore := filepath.Join(dir, "notcore")
	os.WriteFile(notCore, []byte("hello"), 0o644)
	cut := filepath.Join(dir, "core.cut")
	if fc, err := os.Open(core); err == nil {
		b := make([]byte, 2000)
		fc.ReadAt(b, 0)
		fc.Close()
		os.WriteFile(cut, b, 0o644)
	}
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"stack", "--core", core, pid}, 2, "takes no PID"},
		{[]string{"stack", "--exe", f.cli, pid}, 2, "--exe needs --core"},
		{[]string{"stack", "--core", filepath.Join(dir, "missing")}, 1, "no such file"},
		{[]string{"stack", "--core", notCore}, 1, "ELF header"},
		{[]string{"stack", "--core", f.cli}, 1, "not a core file"},
		{[]string{"stack", "--core", cut}, 1, "truncated"},
		{[]string{"stack", "--core", core, "--exe", "/bin/true"}, 1, "not the one the core was dumped from"},
	} {
		var o, e bytes.Buffer
		code := run(c.args, &o, &e)
		if code != c.code || !strings.Contains(e.String(), c.msg) {
			t.Errorf("%v: exit %d, %q; want exit %d and %q", c.args, code, e.String(), c.code, c.msg)
		}
	}
	var h bytes.Buffer
	run([]string{"stack", "-h"}, &h, &h)
	if !strings.Contains(h.String(), "--core CORE [--exe BINARY]") || !strings.Contains(h.String(), "-core CORE") {
		t.Errorf("stack -h does not document --core:\n%s", h.String())
	}
}

// startUnpublished starts `run -jit -perf-map spin.scm` in a test
// directory and returns its pid, its perf map (removed when the test
// ends) and the directory.
func startUnpublished(t *testing.T, f *gdbFixture) (int, string, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "spin.scm"), []byte(spinProg), 0o644); err != nil {
		t.Fatal(err)
	}
	pid := startReady(t, f.cli, dir, "run", "-jit", "-perf-map", "spin.scm")
	perfMap := fmt.Sprintf("/tmp/perf-%d.map", pid)
	t.Cleanup(func() { os.Remove(perfMap) })
	return pid, perfMap, dir
}

// gcoreOf writes a core of the live process pid into dir with gdb's gcore
// (the process continues) and returns its path.
func gcoreOf(t *testing.T, gdb, dir string, pid int) string {
	t.Helper()
	core := filepath.Join(dir, "core")
	s := &gdbtest.Session{GDB: gdb, Dir: dir, NoScript: true, Timeout: 5 * time.Minute,
		Args: []string{"-p", strconv.Itoa(pid)}, Cmds: []string{"gcore " + core, "detach"}}
	if r, err := s.Run(); err != nil {
		t.Fatalf("gcore: %v\n%s", err, r.Output)
	}
	return core
}

// TestStackCoreUnpublished: `stack --core` on a gcore of `run -jit
// -perf-map spin.scm` (the image linked in memory, announced only in the
// perf map) walks the spinning thread by frame pointer through spin,
// %start and the entry routine into the Go frames to main.main, as `stack PID` does
// live, naming the JIT frames from /tmp/perf-PID.map while it is there,
// and from the file --perf-map names after it is gone (without either
// they are ?? but the walk is the same).
func TestStackCoreUnpublished(t *testing.T) {
	skipStacks(t)
	f := setupGDB(t)
	pid, perfMap, dir := startUnpublished(t, f)
	if text := stackUntil(t, unpublishedSpinRE(perfMap), pid); !unpublishedSpinRE(perfMap).MatchString(text) {
		t.Fatalf("no thread in spin unwound to main.main:\n%s", text)
	}
	core := gcoreOf(t, f.gdb, dir, pid)
	stackCore := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run(append([]string{"stack", "--core", core}, args...), &out, &errb); code != 0 {
			t.Fatalf("stack --core %v: exit %d: %s", args, code, errb.String())
		}
		return out.String()
	}
	if text := stackCore(); !unpublishedSpinRE(perfMap).MatchString(text) {
		t.Errorf("stack --core with /tmp/perf-%d.map:\n%s", pid, text)
	}
	saved := filepath.Join(dir, "saved.map")
	b, err := os.ReadFile(perfMap)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(saved, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(perfMap); err != nil {
		t.Fatal(err)
	}
	if text := stackCore("--perf-map", saved); !unpublishedSpinRE(saved).MatchString(text) {
		t.Errorf("stack --core --perf-map %s:\n%s", saved, text)
	}
	bare := regexp.MustCompile(`(?m)^#0  0x[0-9a-f]{16} in \?\? via registers\n` +
		`#1  0x[0-9a-f]{16} in \?\? via (fp|prologue|epilogue)\n` +
		`#2  0x[0-9a-f]{16} in \?\? via fp\n` +
		`#3  0x[0-9a-f]{16} in github\.com/elfimage/elfimage/native\.trampoline(\.abi0)? \(\) at \S+/native/call_amd64\.s:\d+ \[\S+\] via fp\n` +
		`#4  0x[0-9a-f]{16} in github\.com/elfimage/elfimage/native\.call \(fn=\d+, .*\) at \S+ \[\S+\] via stack-switch\n`)
	if text := stackCore(); !bare.MatchString(text) {
		t.Errorf("stack --core without a perf map:\n%s", text)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"stack", "--perf-map", saved, strconv.Itoa(pid)}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--perf-map needs --core") {
		t.Errorf("--perf-map without --core: exit %d, %q", code, errb.String())
	}
	if code := run([]string{"stack", "--core", core, "--perf-map", filepath.Join(dir, "none.map")}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "none.map") {
		t.Errorf("--perf-map of a missing file: exit %d, %q", code, errb.String())
	}
}
