package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/debugfile"
	"github.com/elfimage/elfimage/internal/gdbtest"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// TestStripCommand: `elfimage strip -o OUT -debug-file FILE` writes an
// image that runs as the original and that describe explains as the
// original (through its debug file beside it); `build -debug-file`
// writes the same two files; stripping in place without -debug-file
// leaves an image whose describe says the debug file is missing; usage
// errors exit 2.
func TestStripCommand(t *testing.T) {
	dir, img, out, dbg := stripDemo(t)
	// Run-time addresses (0x7f... natively, 0x55... under qemu-user; link
	// addresses are short) and the image's name differ.
	norm := regexp.MustCompile(`0x[0-9a-f]{9,}|\[[a-z.]+\+`)
	_, want, _ := runCLI(t, "run", img)
	want = norm.ReplaceAllString(want, "X")
	_, got, e := runCLI(t, "run", out)
	if got = norm.ReplaceAllString(got, "X"); got != want || !strings.Contains(want, "Backtrace:") {
		t.Errorf("run of the stripped image printed %q (%s), the image %q", got, e, want)
	}
	// An address of every procedure's second instruction byte, from the
	// image's procedure table.
	_, procs, _ := runCLI(t, "dump", "-procs", img)
	addrs := regexp.MustCompile(`(?m)^\s*\[?(0x[0-9a-f]+)`).FindAllStringSubmatch(procs, -1)
	if len(addrs) < 5 {
		t.Fatalf("dump -procs:\n%s", procs)
	}
	args := []string{"describe", img}
	for _, a := range addrs {
		args = append(args, a[1])
	}
	_, wantDesc, _ := runCLI(t, args...)
	args[1] = out
	_, gotDesc, errDesc := runCLI(t, args...)
	if gotDesc != wantDesc || !strings.Contains(wantDesc, "live parameter") {
		t.Errorf("describe of the stripped image:\n%s%s\nof the image:\n%s", gotDesc, errDesc, wantDesc)
	}
	if _, h, _ := runCLI(t, "dump", "-headers", out); !strings.Contains(h, "stripped; debug file "+dbg) {
		t.Errorf("dump -headers does not name the debug file:\n%s", h)
	}

	// build -debug-file writes what build then strip write.
	src := filepath.Join(dir, "demo.scm")
	d1, d2 := t.TempDir(), t.TempDir()
	if code, _, e := runCLI(t, "build", "-o", filepath.Join(d1, "b.elf"), src); code != 0 {
		t.Fatal(e)
	}
	if code, _, e := runCLI(t, "strip", "-debug-file", filepath.Join(d1, "x.debug"), filepath.Join(d1, "b.elf")); code != 0 {
		t.Fatal(e)
	}
	if code, _, e := runCLI(t, "build", "-o", filepath.Join(d2, "b.elf"), "-debug-file", filepath.Join(d2, "x.debug"), src); code != 0 {
		t.Fatal(e)
	}
	for _, name := range []string{"b.elf", "x.debug"} {
		if a, b := readFile(t, filepath.Join(d1, name)), readFile(t, filepath.Join(d2, name)); a != b {
			t.Errorf("%s: build -debug-file and build then strip differ", name)
		}
	}

	// In place, debug information dropped.
	inPlace := filepath.Join(t.TempDir(), "p.elf")
	os.WriteFile(inPlace, []byte(readFile(t, img)), 0o644)
	if code, _, e := runCLI(t, "strip", inPlace); code != 0 {
		t.Fatal(e)
	}
	f, err := elf.Open(inPlace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Section(".debug_info") != nil || f.Section(debugfile.SectionDebugLink) != nil || f.Section(".elfimage.procs") == nil {
		t.Errorf("strip in place: sections %v", f.Sections)
	}
	_, d, _ := runCLI(t, "describe", inPlace, addrs[1][1])
	if !strings.Contains(d, "the image is stripped, and no separate debug file found for "+inPlace+" (build ID ") || !strings.Contains(d, "arity: ") {
		t.Errorf("describe of an image stripped without a debug file:\n%s", d)
	}
	if code, _, e := runCLI(t, "strip", inPlace); code != 1 || !strings.Contains(e, "stripped already") {
		t.Errorf("strip of a stripped image: exit %d, %s", code, e)
	}
	if code, _, e := runCLI(t, "strip", "-debug-file", inPlace, inPlace); code != 2 || !strings.Contains(e, "the stripped image's own path") {
		t.Errorf("strip with -debug-file the image: exit %d, %s", code, e)
	}
	if code, _, e := runCLI(t, "strip"); code != 2 || !strings.Contains(e, "want one image file") {
		t.Errorf("strip without a file: exit %d, %s", code, e)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestGDBStripped: gdb stops at a procedure of a stripped image published
// with `run -gdb` and shows its source line and arguments, reading the
// debug file from a build-ID directory (`set debug-file-directory`): the
// split `elfimage strip` writes, and images stripped by objcopy
// --strip-debug and strip (debug file from objcopy --only-keep-debug) and
// by eu-strip -f (its own debug file); and, through the hook script's
// add-symbol-file of the image file, from the debug file its
// .gnu_debuglink names beside it. An image objcopy stripped of its DWARF
// but not its symbols, with no debug file, still gets a breakpoint by
// name.
func TestGDBStripped(t *testing.T) {
	f := setupGDB(t)
	cases := []struct {
		name    string
		strip   []string // command; IN, OUT replaced; OUT.debug is the debug file when the command writes one
		keepDbg []string // command writing OUT.debug when the strip does not
	}{
		{"elfimage-strip", []string{f.cli, "strip", "-o", "OUT", "-debug-file", "OUT.debug", "IN"}, nil},
		{"objcopy--strip-debug", []string{"objcopy", "--strip-debug", "IN", "OUT"}, []string{"objcopy", "--only-keep-debug", "IN", "OUT.debug"}},
		{"strip", []string{"strip", "-o", "OUT", "IN"}, []string{"objcopy", "--only-keep-debug", "IN", "OUT.debug"}},
		{"eu-strip-f", []string{"eu-strip", "-f", "OUT.debug", "-o", "OUT", "IN"}, nil},
	}
	fibLine := gdbLine(t, "(if (< n 2)") // the first line after the prologue
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			out := filepath.Join(dir, "img", "prog.elf")
			os.MkdirAll(filepath.Dir(out), 0o755)
			sh := func(cmd []string) {
				var args []string
				for _, a := range cmd[1:] {
					args = append(args, strings.ReplaceAll(strings.ReplaceAll(a, "IN", f.img), "OUT", out))
				}
				tool := cmd[0]
				if tool != f.cli {
					tool = tooltest.Require(t, tool)
				}
				if b, err := exec.Command(tool, args...).CombinedOutput(); err != nil {
					t.Fatalf("%s %q: %v\n%s", cmd[0], args, err, b)
				}
			}
			sh(c.strip)
			if c.keepDbg != nil {
				sh(c.keepDbg)
			}
			// The debug file goes to a build-ID directory only: gdb does
			// not know the path of an image published through the JIT
			// interface, so a debuglink beside it cannot be followed.
			ef, err := elf.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			note, _ := ef.Section(".note.gnu.build-id").Data()
			ef.Close()
			debugDir := filepath.Join(dir, "debug")
			byID := debugfile.BuildIDPath(debugDir, note[16:])
			os.MkdirAll(filepath.Dir(byID), 0o755)
			if err := os.Rename(out+".debug", byID); err != nil {
				t.Fatal(err)
			}
			s := &gdbtest.Session{GDB: f.gdb, Program: f.cli, Dir: dir, NoScript: true, Cmds: []string{
				"set debug-file-directory " + debugDir, "break fib", "run run -gdb " + out + " > " + filepath.Join(dir, "out"), "info args", "bt 2"}}
			r := gdbtest.MustRun(t, s)
			mustContain(t, "stop", r.Blocks[2], "hit Breakpoint 1, fib (n=10) at ")
			mustContain(t, "stop", r.Blocks[2], "prog.scm:"+strconv.Itoa(fibLine))
			checkVars(t, "info args", r.Blocks[3], map[string]string{"n": "10"})
			mustContain(t, "bt", r.Blocks[4], "#1 ", " in main () at ")
			if t.Failed() {
				t.Logf("gdb session:\n%s", r.Output)
			}
		})
	}
	t.Run("hook-debuglink", func(t *testing.T) {
		// The hook script adds the image file itself (add-symbol-file
		// FILE -o BASE): gdb follows its .gnu_debuglink to the debug file
		// beside it and moves it with the image.
		t.Parallel()
		dir := t.TempDir()
		out := filepath.Join(dir, "prog.elf")
		if code, o, e := runCLI(t, "strip", "-o", out, "-debug-file", filepath.Join(dir, "prog.debug"), f.img); code != 0 {
			t.Fatalf("strip: %s%s", o, e)
		}
		s := &gdbtest.Session{GDB: f.gdb, Program: f.cli, Dir: dir, Cmds: []string{
			"set debug-file-directory " + t.TempDir(), "break fib", "run run " + out + " > " + filepath.Join(dir, "out"), "info args"}}
		r := gdbtest.MustRun(t, s)
		mustContain(t, "stop", r.Blocks[2], "hit Breakpoint 1, fib (n=10) at ", "prog.scm:"+strconv.Itoa(fibLine))
		checkVars(t, "info args", r.Blocks[3], map[string]string{"n": "10"})
		if t.Failed() {
			t.Logf("gdb session:\n%s", r.Output)
		}
	})
	t.Run("objcopy-no-debug-file", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		out := filepath.Join(dir, "prog.elf")
		if b, err := exec.Command(tooltest.Require(t, "objcopy"), "--strip-debug", f.img, out).CombinedOutput(); err != nil {
			t.Fatalf("objcopy: %v\n%s", err, b)
		}
		s := &gdbtest.Session{GDB: f.gdb, Program: f.cli, Dir: dir, NoScript: true, Cmds: []string{
			"set debug-file-directory " + t.TempDir(), "break fib", "run run -gdb " + out + " > " + filepath.Join(dir, "out"), "bt 1"}}
		r := gdbtest.MustRun(t, s)
		if !regexp.MustCompile(`Breakpoint 1, 0x[0-9a-f]+ in fib \(\)`).MatchString(r.Blocks[2]) {
			t.Errorf("no stop in fib by its symbol:\n%s", r.Output)
		}
	})
}

// stripDemo writes the demo's image into a temporary directory dir and
// strips it with `elfimage strip -o out -debug-file dbg img`.
func stripDemo(t *testing.T) (dir, img, out, dbg string) {
	t.Helper()
	dir = t.TempDir()
	if code, _, errOut := runCLI(t, "demo", "-o", dir); code != 0 {
		t.Fatal(errOut)
	}
	img = filepath.Join(dir, "demo.elf")
	out, dbg = filepath.Join(dir, "s.elf"), filepath.Join(dir, "s.debug")
	if code, o, e := runCLI(t, "strip", "-o", out, "-debug-file", dbg, img); code != 0 {
		t.Fatalf("strip: exit %d: %s%s", code, o, e)
	}
	return dir, img, out, dbg
}

// TestDumpDebugFile: dump reads an image's separate debug file (ours, and
// objcopy --only-keep-debug's) as any ELF file: its headers and, on
// request, its DIEs and line programs, which name the image's procedures
// and source file; -procs says to read the image instead.
func TestDumpDebugFile(t *testing.T) {
	dir, img, out, dbg := stripDemo(t)
	// What the -procs refusal below points at: the stripped image, which
	// finds its debug file, lists the procedures.
	if code, o, e := runCLI(t, "dump", "-procs", out); code != 0 || !strings.Contains(o, "inner") {
		t.Errorf("dump -procs of the stripped image: exit %d: %s\n%.500s", code, e, o)
	}
	files := []string{dbg}
	// demo links for the test binary's architecture; the host's objcopy
	// reads x86-64 only.
	objcopyName := "objcopy"
	if runtime.GOARCH == "arm64" {
		objcopyName = "aarch64-linux-gnu-objcopy"
	}
	objcopy := tooltest.Require(t, objcopyName)
	okd := filepath.Join(dir, "okd.debug")
	if o, err := exec.Command(objcopy, "--only-keep-debug", img, okd).CombinedOutput(); err != nil {
		t.Fatalf("objcopy --only-keep-debug: %v\n%s", err, o)
	}
	files = append(files, okd)
	for _, f := range files {
		if code, o, e := runCLI(t, "dump", f); code != 0 || !strings.Contains(o, "Program Headers:") {
			t.Errorf("dump %s: exit %d: %s\n%.500s", f, code, e, o)
		}
		if code, o, e := runCLI(t, "dump", "-info", f); code != 0 || !regexp.MustCompile(`DW_AT_name\s+"inner"`).MatchString(o) {
			t.Errorf("dump -info %s: exit %d: %s\n%.500s", f, code, e, o)
		}
		if code, o, e := runCLI(t, "dump", "-lines", f); code != 0 || !strings.Contains(o, "demo.scm") {
			t.Errorf("dump -lines %s: exit %d: %s\n%.500s", f, code, e, o)
		}
		if code, _, e := runCLI(t, "dump", "-procs", f); code == 0 || !strings.Contains(e, "separate debug file") {
			t.Errorf("dump -procs %s: exit %d, %q; want a failure naming a separate debug file", f, code, e)
		}
	}
}
