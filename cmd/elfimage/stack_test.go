package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/elfimage/elfimage/internal/tooltest"
)

// stackUntil runs `elfimage stack ARGS PID` until its output matches re
// (the child may still be on its way into the code the test wants), at
// most 50 times, and returns the last output. It fails the test if stack
// exits non-zero.
func stackUntil(t *testing.T, re *regexp.Regexp, pid int, args ...string) string {
	t.Helper()
	var text string
	for try := 0; try < 50; try++ {
		var out, errb bytes.Buffer
		if code := run(append(append([]string{"stack"}, args...), strconv.Itoa(pid)), &out, &errb); code != 0 {
			t.Fatalf("stack: exit %d: %s", code, errb.String())
		}
		if text = out.String(); re.MatchString(text) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return text
}

// stackJSONOf runs `elfimage stack --json PID` and decodes it.
func stackJSONOf(t *testing.T, pid int) (stackJSON, string) {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run([]string{"stack", "--json", strconv.Itoa(pid)}, &out, &errb); code != 0 {
		t.Fatalf("stack --json: exit %d: %s", code, errb.String())
	}
	var j stackJSON
	if err := json.Unmarshal(out.Bytes(), &j); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if j.PID != pid {
		t.Fatalf("pid %d, want %d", j.PID, pid)
	}
	return j, out.String()
}

// skipStacks skips t on machines other than amd64, where `elfimage stack`
// refuses by design: package procview reads thread stacks on amd64 only
// (its error says so; under qemu-user process_vm_readv is missing too).
func skipStacks(t *testing.T) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skipf("procview: the thread stacks of a live process are read on amd64 only (ptrace of the thread's registers); this test binary is %s (under qemu-user there is no ptrace of emulated processes); stack --core of AArch64 cores is tested", runtime.GOARCH)
	}
}

// TestStack: `elfimage stack PID` on a child spinning in image code (run
// -jit -gdb: the image is known only through the GDB JIT interface) prints
// the spinning thread as gdb's bt would, with spin's argument, the
// column, and how each frame was found, spin to main.main through the
// library's entry frame (a signal frame) and native.trampoline, and --json
// the same frames.
func TestStack(t *testing.T) {
	skipStacks(t)
	f := setupGDB(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "spin.scm"), []byte(spinProg), 0o644); err != nil {
		t.Fatal(err)
	}
	childPID := startReady(t, f.cli, dir, "run", "-jit", "-gdb", "spin.scm")
	// The main thread reaches spin just after printing "ready".
	spinRE := regexp.MustCompile(`(?m)^#0  0x[0-9a-f]{16} in spin \(n=\d+\) at \S*spin\.scm:[1-4]:\d+ \[jit@0x[0-9a-f]+\] via registers\n` +
		`#1  0x[0-9a-f]{16} in %start \(\) \[jit@0x[0-9a-f]+\] via cfi\n` +
		`#2  0x[0-9a-f]{16} in elfimage\.entry \(\) \(signal frame\) \[jit@0x[0-9a-f]+\] via cfi\n` +
		`#3  0x[0-9a-f]{16} in github\.com/elfimage/elfimage/native\.trampoline(\.abi0)? \(\) at \S+/native/call_amd64\.s:\d+ \[\S+\] via signal\n` +
		`#4  0x[0-9a-f]{16} in github\.com/elfimage/elfimage/native\.call \(fn=\d+, top=\d+, .*\) at \S+/native/call\.go:\d+ \[\S+\] via cfi\n`)
	text := stackUntil(t, spinRE, childPID)
	if !spinRE.MatchString(text) {
		t.Fatalf("no thread in spin:\n%s", text)
	}
	if i := strings.Index(text, "in spin ("); !regexp.MustCompile(` in main.main \(\) at \S+ \[\S+\] via cfi\n`).MatchString(text[i:]) {
		t.Errorf("the spinning thread does not reach main.main:\n%s", text)
	}
	j, raw := stackJSONOf(t, childPID)
	if len(j.Threads) < 2 {
		t.Fatalf("%d threads", len(j.Threads))
	}
	found := false
	for _, th := range j.Threads {
		fs := th.Frames
		if len(fs) > 3 && len(fs[0].Funcs) > 0 && fs[0].Funcs[0].Function == "spin" {
			found = true
			f0 := fs[0].Funcs[0]
			if !fs[2].Signal || fs[2].Funcs[0].Function != "elfimage.entry" || !strings.HasPrefix(fs[0].Module, "[jit@") ||
				f0.Column == 0 || f0.Args == nil || len(*f0.Args) != 1 || (*f0.Args)[0].Name != "n" {
				t.Errorf("spinning thread: %+v", fs[:3])
			}
			if m := []string{fs[0].Method, fs[1].Method, fs[2].Method, fs[3].Method}; strings.Join(m, " ") != "registers cfi cfi signal" {
				t.Errorf("methods %v, want registers cfi cfi signal", m)
			}
			if a := fs[1].Funcs[0].Args; a == nil || len(*a) != 0 {
				t.Errorf("%%start's arguments %+v, want an empty list", fs[1].Funcs[0].Args)
			}
		}
	}
	if !found {
		t.Errorf("no thread in spin in the JSON:\n%s", raw)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"stack", "0"}, &out, &errb); code != 2 {
		t.Errorf("stack 0: exit %d, want 2", code)
	}
}

// TestStackUnpublished: for code linked in memory and announced only in
// the perf map (run -jit -perf-map, without -gdb), stack names the
// procedures and the library's entry routine from /tmp/perf-PID.map,
// unwinds them by frame pointer into native.trampoline, crosses
// native.Call's stack switch into the Go frames and reaches main.main;
// --json says the same, with no error for that thread.
func TestStackUnpublished(t *testing.T) {
	skipStacks(t)
	pid, perfMap, _ := startUnpublished(t, setupGDB(t))
	spinRE := unpublishedSpinRE(perfMap)
	text := stackUntil(t, spinRE, pid)
	if !spinRE.MatchString(text) {
		t.Fatalf("no thread in spin unwound to main.main:\n%s", text)
	}
	if i := strings.Index(text, "in spin "); i >= 0 {
		if th := text[i:]; strings.Contains(th[:strings.Index(th+"\n\n", "\n\n")], "Backtrace stopped") {
			t.Errorf("the spinning thread's walk stopped:\n%s", text)
		}
	}
	j, raw := stackJSONOf(t, pid)
	for _, th := range j.Threads {
		fs := th.Frames
		if len(fs) == 0 || len(fs[0].Funcs) == 0 || fs[0].Funcs[0].Function != "spin" {
			continue
		}
		if fs[0].Module != perfMap || fs[0].Method != "registers" || th.Error != "" {
			t.Errorf("spinning thread: %+v, error %q", fs[0], th.Error)
		}
		var methods []string
		for _, f := range fs {
			methods = append(methods, f.Method)
		}
		if !strings.Contains(strings.Join(methods, " "), "fp stack-switch cfi") {
			t.Errorf("methods %v, want ... fp stack-switch cfi ...", methods)
		}
		return
	}
	t.Errorf("no thread in spin in the JSON:\n%s", raw)
}

// TestStackStops: a walk that cannot go on says why, in the text
// ("Backtrace stopped: ...", as gdb) and in --json ("error"), and stack
// still exits 0, as gdb's bt does.
func TestStackStops(t *testing.T) {
	skipStacks(t)
	cmd := exec.Command(tooltest.GCC(t, tooltest.BogusFPProg, "-O1"))
	tooltest.StartReady(t, cmd)
	pid := cmd.Process.Pid
	re := regexp.MustCompile(`(?m)^#0  0x[0-9a-f]{16} in \?\? via registers\n` +
		`Backtrace stopped: procview: unwinding the frame at 0x[0-9a-f]+: pc 0x[0-9a-f]+ is outside every module, without call frame information; by frame pointer: .*frame pointer 0xdeadbeef is not 8-byte aligned\n`)
	text := stackUntil(t, re, pid)
	if !re.MatchString(text) {
		t.Fatalf("no stop reason:\n%s", text)
	}
	syscall.Kill(pid, syscall.SIGSTOP) // the same state for --json
	defer syscall.Kill(pid, syscall.SIGCONT)
	j, raw := stackJSONOf(t, pid)
	if len(j.Threads) != 1 || len(j.Threads[0].Frames) != 1 || j.Threads[0].Frames[0].Method != "registers" ||
		!strings.Contains(j.Threads[0].Error, "frame pointer 0xdeadbeef is not 8-byte aligned") {
		t.Errorf("JSON:\n%s", raw)
	}
}

// TestStackHelp: stack -h describes the fallbacks, the methods and the
// stop reasons.
func TestStackHelp(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"stack", "-h"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, s := range []string{"frame pointer", "/tmp/perf-PID.map", "via fp", "via stack-switch", "Backtrace stopped", "exit status is 0"} {
		if !strings.Contains(errb.String(), s) {
			t.Errorf("stack -h does not mention %q:\n%s", s, errb.String())
		}
	}
}
