package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/elfimage/elfimage/internal/tooltest"
)

// crashA64C dies of SIGSEGV in deref, three calls of walk deep.
const crashA64C = `#include <string.h>
__attribute__((noinline)) int deref(int *p, long depth) { return *p + (int)depth; }
__attribute__((noinline)) int walk(long depth, const char *name) {
	if (depth == 0)
		return deref((int *)(long)strlen(name) + 16, depth);
	return walk(depth - 1, name) + 1;
}
int main(int argc, char **argv) { return walk(3, argv[0]); }
`

// a64Sysroot is where Debian's cross toolchain and qemu-aarch64 -L find the
// AArch64 C library.
const a64Sysroot = "/usr/aarch64-linux-gnu"

// srcFrameRE takes a frame line of stack or of gdb's bt apart: the
// function, its arguments and the file:line.
var srcFrameRE = regexp.MustCompile(`^#\d+\s+(?:0x([0-9a-f]+) in )?(\S+) \((.*?)\)(?: (?:\(signal frame\) )?at (\S+?):(\d+))?`)

// TestStackCoreAArch64: `elfimage stack --core CORE --sysroot DIR` on the
// core qemu-aarch64 writes for an AArch64 C program (built with
// aarch64-linux-gnu-gcc -g, dead of SIGSEGV; qemu's core has no NT_FILE,
// so the C library is found through the dynamic linker's list and the
// sysroot) prints, for every frame gdb-multiarch prints for the same core
// (gdb stops at main), the same pc, function, arguments and line.
func TestStackCoreAArch64(t *testing.T) {
	qemu := tooltest.Require(t, "qemu-aarch64")
	gcc := tooltest.Require(t, "aarch64-linux-gnu-gcc")
	gdb := tooltest.Require(t, "gdb-multiarch")
	if _, err := os.Stat(filepath.Join(a64Sysroot, "lib/libc.so.6")); err != nil {
		tooltest.Skip(t, "no AArch64 C library under %s: %v", a64Sysroot, err)
	}
	dir := t.TempDir()
	src, exe := filepath.Join(dir, "crash.c"), filepath.Join(dir, "crash")
	if err := os.WriteFile(src, []byte(crashA64C), 0o644); err != nil {
		t.Fatal(err)
	}
	// Not PIE: gdb-multiarch 13 does not relocate a PIE in qemu's cores.
	if out, err := exec.Command(gcc, "-g", "-O1", "-no-pie", "-o", exe, src).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	os.Mkdir(filepath.Join(dir, "core"), 0o755) // no core of qemu itself
	cmd := exec.Command("sh", "-c", `ulimit -c unlimited && exec "$@"`, "sh", qemu, "-L", a64Sysroot, exe)
	cmd.Dir = dir
	if out, err := tooltest.RunTool(t, cmd, 2*time.Minute); err == nil {
		t.Fatalf("%s did not crash:\n%s", exe, out)
	}
	cores, _ := filepath.Glob(filepath.Join(dir, "qemu_*.core"))
	if len(cores) != 1 {
		tooltest.Skip(t, "qemu-aarch64 wrote %d cores (ulimit -c refused?)", len(cores))
	}
	var out, errb bytes.Buffer
	if code := run([]string{"stack", "--core", cores[0], "--exe", exe, "--sysroot", a64Sysroot}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	text := out.String()
	t.Logf("%s", text)
	if errb.Len() != 0 {
		t.Errorf("warnings: %s", errb.String())
	}
	if !strings.Contains(text, "Program terminated with signal SIGSEGV") || !strings.Contains(text, "via registers") {
		t.Errorf("no SIGSEGV or innermost frame:\n%s", text)
	}
	g, err := tooltest.RunTool(t, exec.Command(gdb, "-nx", "-batch", "-iex", "set sysroot "+a64Sysroot, "-ex", "bt", exe, cores[0]), 3*time.Minute)
	if err != nil {
		t.Fatalf("gdb-multiarch: %v\n%s", err, g)
	}
	var ours, theirs [][]string
	for _, l := range strings.Split(text, "\n") {
		if m := srcFrameRE.FindStringSubmatch(l); m != nil {
			ours = append(ours, m[1:])
		}
	}
	for _, l := range strings.Split(g, "\n") {
		if m := srcFrameRE.FindStringSubmatch(l); m != nil && strings.HasPrefix(l, "#") {
			theirs = append(theirs, m[1:])
		}
	}
	// gdb prints frame 0 twice (when it loads the core, and for bt).
	if len(theirs) > 1 && theirs[0][1] == theirs[1][1] && theirs[1][1] == "deref" {
		theirs = theirs[1:]
	}
	if len(theirs) < 5 || len(ours) < len(theirs) {
		t.Fatalf("%d frames, gdb-multiarch %d:\n%s", len(ours), len(theirs), g)
	}
	for i, th := range theirs {
		o := ours[i]
		pcOK := th[0] == "" || strings.TrimLeft(o[0], "0") == strings.TrimLeft(th[0], "0")
		// Arguments: the same text as gdb's, values on entry included
		// ("depth=depth@entry=0", found through the caller's call site);
		// where gdb finds a value on entry we do not, ours may say
		// <optimized out>.
		argsOK := true
		gdbArgs := map[string]string{}
		for _, a := range strings.Split(th[2], ", ") {
			if n, v, ok := strings.Cut(a, "="); ok {
				gdbArgs[n] = v
			}
		}
		for _, a := range strings.Split(o[2], ", ") {
			n, v, _ := strings.Cut(a, "=")
			g, ok := gdbArgs[n]
			argsOK = argsOK && ok && (v == g || strings.Contains(g, "@entry") && (v == "<optimized out>" || strings.HasSuffix(g, "@entry="+v)))
		}
		argsOK = argsOK && len(gdbArgs) == len(strings.Split(o[2], ", "))
		if !pcOK || o[1] != th[1] || !argsOK || filepath.Base(o[3]) != filepath.Base(th[3]) || o[4] != th[4] {
			t.Errorf("frame %d: %q, gdb-multiarch %q", i, o, th)
		}
	}
	var e bytes.Buffer
	if code := run([]string{"stack", "--sysroot", a64Sysroot, "1"}, &out, &e); code != 2 || !strings.Contains(e.String(), "--sysroot needs --core") {
		t.Errorf("--sysroot without --core: exit %d, %s", code, e.String())
	}
}
