package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStack: `elfimage stack PID` on a child spinning in image code (run
// -jit -gdb: the image is known only through the GDB JIT interface) prints
// the spinning thread as gdb's bt would, spin to main.main through the
// library's entry frame (a signal frame) and native.trampoline, and --json
// the same frames.
func TestStack(t *testing.T) {
	f := setupGDB(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "spin.scm"), []byte(spinProg), 0o644); err != nil {
		t.Fatal(err)
	}
	childPID := startReady(t, f.cli, dir, "run", "-jit", "-gdb", "spin.scm")
	pid := strconv.Itoa(childPID)
	// The main thread reaches spin just after printing "ready".
	spinRE := regexp.MustCompile(`(?m)^#0  0x[0-9a-f]{16} in spin at \S*spin\.scm:[1-4] \[jit@0x[0-9a-f]+\]\n#1  0x[0-9a-f]{16} in %start \[jit@0x[0-9a-f]+\]\n#2  0x[0-9a-f]{16} in elfimage\.entry \(signal frame\) \[jit@0x[0-9a-f]+\]\n#3  0x[0-9a-f]{16} in github\.com/elfimage/elfimage/native\.trampoline(\.abi0)? at \S+/native/call_amd64\.s:\d+ \[\S+\]\n#4  0x[0-9a-f]{16} in github\.com/elfimage/elfimage/native\.call`)
	var text string
	for try := 0; try < 50; try++ {
		var out, errb bytes.Buffer
		if code := run([]string{"stack", pid}, &out, &errb); code != 0 {
			t.Fatalf("stack: exit %d: %s", code, errb.String())
		}
		if text = out.String(); spinRE.MatchString(text) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !spinRE.MatchString(text) {
		t.Fatalf("no thread in spin:\n%s", text)
	}
	if i := strings.Index(text, "in spin at"); !strings.Contains(text[i:], " in main.main ") {
		t.Errorf("the spinning thread does not reach main.main:\n%s", text)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"stack", "--json", pid}, &out, &errb); code != 0 {
		t.Fatalf("stack --json: exit %d: %s", code, errb.String())
	}
	var j stackJSON
	if err := json.Unmarshal(out.Bytes(), &j); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if j.PID != childPID || len(j.Threads) < 2 {
		t.Fatalf("pid %d, %d threads", j.PID, len(j.Threads))
	}
	found := false
	for _, th := range j.Threads {
		fs := th.Frames
		if len(fs) > 3 && len(fs[0].Funcs) > 0 && fs[0].Funcs[0].Function == "spin" {
			found = true
			if !fs[2].Signal || fs[2].Funcs[0].Function != "elfimage.entry" || !strings.HasPrefix(fs[0].Module, "[jit@") {
				t.Errorf("spinning thread: %+v", fs[:3])
			}
		}
	}
	if !found {
		t.Errorf("no thread in spin in the JSON:\n%s", out.String())
	}
	if code := run([]string{"stack", "0"}, &out, &errb); code != 2 {
		t.Errorf("stack 0: exit %d, want 2", code)
	}
}
