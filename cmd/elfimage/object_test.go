package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/internal/gdbtest"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// objectOutput is what examples/cobj/main.c prints, linked with the
// object of examples/cobj/fib.scm.
const objectOutput = "fib(20) = 6765\nfib 15 = 610\neven? 4: 1, even? 7: 0\nfib 10 = 55\nscheme main: 55\n"

// buildObject writes the object of examples/cobj/fib.scm with build -c
// into dir and returns its path.
func buildObject(t *testing.T, dir string) string {
	t.Helper()
	obj := filepath.Join(dir, "fib.o")
	if code, _, stderr := runCLI(t, "build", "-c", "-arch", "x86-64", "-o", obj, "../../examples/cobj/fib.scm"); code != 0 {
		t.Fatalf("build -c: exit %d: %s", code, stderr)
	}
	return obj
}

// tool runs name with args and returns its output (standard output and
// error merged), failing the test on a non-zero exit.
func tool(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestObjectLinkers: the object of build -c passes eu-elflint --gnu-ld,
// its relocations are the psABI's, and GNU ld (bfd), gold and lld link it
// with a C main into programs that print what the Scheme code computes,
// whose DWARF llvm-dwarfdump verifies and whose .eh_frame_hdr the linker
// built from our .eh_frame.
func TestObjectLinkers(t *testing.T) {
	gcc := tooltest.Require(t, "gcc")
	elflint := tooltest.Require(t, "eu-elflint")
	readelf := tooltest.Require(t, "readelf")
	dwarfdump := tooltest.Require(t, "llvm-dwarfdump")
	dir := t.TempDir()
	obj := buildObject(t, dir)
	if out := tool(t, elflint, "--gnu-ld", obj); !strings.Contains(out, "No errors") {
		t.Errorf("eu-elflint --gnu-ld: %s", out)
	}
	rel := tool(t, readelf, "-W", "-r", "-S", "-s", obj)
	for _, want := range []string{
		"Relocation section '.rela.text'", "R_X86_64_PLT32         0000000000000000 fib - 4",
		"Relocation section '.rela.eh_frame'", "Relocation section '.rela.debug_info'",
		"Relocation section '.rela.debug_line'", "Relocation section '.rela.debug_aranges'",
		"R_X86_64_32            0000000000000000 .debug_str + ", "R_X86_64_32            0000000000000000 .debug_abbrev + 0",
		"R_X86_64_32            0000000000000000 .debug_line + 0", "R_X86_64_32            0000000000000000 .debug_line_str + ",
		"R_X86_64_64            0000000000000000 .text + 0",
		" .note.GNU-stack ", " GLOBAL DEFAULT    1 fib", " GLOBAL DEFAULT    1 show_fib", " GLOBAL DEFAULT    1 even_p",
		" GLOBAL DEFAULT    1 scheme_main",
	} {
		if !strings.Contains(rel, want) {
			t.Errorf("readelf -r -S -s lacks %q", want)
		}
	}
	for _, bad := range []string{".eh_frame_hdr", ".note.gnu.build-id", " GLOBAL DEFAULT    1 main"} {
		if strings.Contains(rel, bad) {
			t.Errorf("readelf -r -S -s shows %q", bad)
		}
	}
	if out := tool(t, dwarfdump, "--verify", obj); !strings.Contains(out, "No errors.") {
		t.Errorf("llvm-dwarfdump --verify %s:\n%s", obj, out)
	}
	for _, ld := range []string{"bfd", "gold", "lld"} {
		tooltest.Require(t, "ld."+ld)
		exe := filepath.Join(dir, "prog-"+ld)
		tool(t, gcc, "-g", "-fuse-ld="+ld, "../../examples/cobj/main.c", obj, "-o", exe)
		if got := tool(t, exe); got != objectOutput {
			t.Errorf("%s: the program prints %q, want %q", ld, got, objectOutput)
		}
		if out := tool(t, dwarfdump, "--verify", exe); !strings.Contains(out, "No errors.") {
			t.Errorf("%s: llvm-dwarfdump --verify:\n%s", ld, out)
		}
		// The linker's .eh_frame_hdr indexes the Scheme procedures'
		// FDEs: readelf decodes one covering fib.
		frames := tool(t, readelf, "-W", "--debug-dump=frames", exe)
		fib := symbolAddr(t, exe, "fib")
		if !strings.Contains(frames, "pc="+strings.TrimLeft(fib, "0")) && !strings.Contains(frames, "pc="+fib) {
			t.Errorf("%s: no FDE starts at fib (%s) in readelf --debug-dump=frames", ld, fib)
		}
	}
}

// symbolAddr returns the address of the global function name in exe, in
// hex as nm prints it.
func symbolAddr(t *testing.T, exe, name string) string {
	t.Helper()
	out := tool(t, tooltest.Require(t, "nm"), exe)
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[1] == "T" && f[2] == name {
			return f[0]
		}
	}
	t.Fatalf("nm %s: no global function %s", exe, name)
	return ""
}

// TestObjectTools: on a program linked from the object, gdb stops at a
// Scheme procedure with its argument, unwinds through Scheme frames to the
// C main with file:line; addr2line and elfimage symbolize name the Scheme
// procedure and its line; perf attributes samples to it with srcline.
func TestObjectTools(t *testing.T) {
	gcc := tooltest.Require(t, "gcc")
	dir := t.TempDir()
	obj := buildObject(t, dir)
	src := "examples/cobj/fib.scm" // as given to build -c, relative to the comp_dir
	for _, ld := range []string{"bfd", "gold", "lld"} {
		t.Run(ld, func(t *testing.T) {
			tooltest.Require(t, "ld."+ld)
			exe := filepath.Join(dir, "fibc-"+ld)
			tool(t, gcc, "-g", "-fuse-ld="+ld, "../../examples/cobj/main.c", obj, "-o", exe)
			objectDebuggers(t, dir, exe, src)
		})
	}

	t.Run("perf", func(t *testing.T) {
		perf := tooltest.Require(t, "perf")
		loop := filepath.Join(dir, "loop.c")
		if err := os.WriteFile(loop, []byte(`#include <stdint.h>
#include <stdio.h>
int64_t fib(int64_t);
int main(void) { int64_t s = 0; for (int i = 0; i < 40; i++) s += fib(25); printf("%ld\n", (long)s); return 0; }
`), 0o644); err != nil {
			t.Fatal(err)
		}
		prog := filepath.Join(dir, "loop")
		tool(t, gcc, "-g", loop, obj, "-o", prog)
		data := filepath.Join(dir, "perf.data")
		rec := exec.Command(perf, "record", "-q", "-e", "cpu-clock", "-F", "1000", "--call-graph", "dwarf", "-o", data, prog)
		if out, err := rec.CombinedOutput(); err != nil {
			tooltest.Skip(t, "perf record cannot record here: %v\n%s", err, out)
		}
		rep := tool(t, perf, "report", "-i", data, "--stdio", "--no-children", "--sort", "sym,srcline")
		// The top entry: fib, on one of its lines.
		if !regexp.MustCompile(`(?m)^\s+\d+\.\d+%\s+\[\.\] fib\s+fib\.scm:[1-4]$`).MatchString(rep) {
			t.Errorf("perf report --sort sym,srcline attributes no samples to fib at fib.scm:\n%s", rep)
		}
	})
}

// TestREADMEObjects runs the commands of the README's "Ahead-of-time
// objects for the system linker" section as written, from the repository
// root, /tmp/ replaced by a test directory: each must exit 0, the
// programs print what the Scheme code computes, gdb stops in fib and
// addr2line and symbolize name it.
func TestREADMEObjects(t *testing.T) {
	if testing.Short() {
		t.Skip("links with three linkers and runs gdb; skipped with -short")
	}
	skipRecipesEmulated(t)
	cmds := readmeSection(t, "Ahead-of-time objects for the system linker")
	dir := t.TempDir()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, c := range cmds {
		c = strings.ReplaceAll(c, "/tmp/", dir+"/")
		for _, name := range []string{"go", "gcc", "g++", "eu-elflint", "readelf", "llvm-dwarfdump", "gdb", "addr2line", "nm", "aarch64-linux-gnu-gcc", "aarch64-linux-gnu-readelf"} {
			if strings.HasPrefix(c, name+" ") {
				tooltest.Require(t, name)
			}
		}
		if strings.Contains(c, " qemu-aarch64 ") {
			tooltest.Require(t, "qemu-aarch64")
		}
		all.WriteString(runRecipe(t, root, c))
	}
	out := all.String()
	if n := strings.Count(out, objectOutput); n != 4 {
		t.Errorf("the four linked programs (three x86-64, one AArch64 under qemu-aarch64) print %q %d times, want 4", objectOutput, n)
	}
	for _, want := range []string{"No errors", "Relocation section '.rela.debug_info'", "Breakpoint 1, fib (n=20) at ",
		"in main () at examples/cobj/main.c:13", "fib\n" + root + "/examples/cobj/fib.scm:1\n",
		"caught: thrown below Scheme frames: 42\n", "(walk+0x", "R_AARCH64_CALL26", "R_AARCH64_ADR_PREL_PG_HI21"} {
		if !strings.Contains(out, want) {
			t.Errorf("the README's commands print no %q", want)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

// TestObjectCxx: with bfd, gold and lld, a C++ exception thrown by a C++
// function that Scheme code calls (define-extern) crosses three Scheme
// frames and is caught in main, libgcc's unwinder reading our .eh_frame;
// glibc's backtrace() from a C function Scheme calls lists the Scheme
// frames between it and main; a Scheme error prints its message and
// values to standard error and ends the process with SIGABRT.
func TestObjectCxx(t *testing.T) {
	gxx := tooltest.Require(t, "g++")
	dir := t.TempDir()
	obj := filepath.Join(dir, "extern.o")
	if code, _, stderr := runCLI(t, "build", "-c", "-arch", "x86-64", "-o", obj, "../../examples/cobj/extern.scm"); code != 0 {
		t.Fatalf("build -c: exit %d: %s", code, stderr)
	}
	rel := tool(t, tooltest.Require(t, "readelf"), "-W", "-r", "-s", obj)
	for _, want := range []string{"R_X86_64_PLT32         0000000000000000 cxx_thrower - 4", "NOTYPE  GLOBAL DEFAULT  UND c_backtrace"} {
		if !strings.Contains(rel, want) {
			t.Errorf("readelf -r -s lacks %q:\n%s", want, rel)
		}
	}
	for _, ld := range []string{"bfd", "gold", "lld"} {
		tooltest.Require(t, "ld."+ld)
		exe := filepath.Join(dir, "throw-"+ld)
		// -rdynamic: backtrace_symbols names functions from the dynamic
		// symbol table.
		tool(t, gxx, "-g", "-rdynamic", "-fuse-ld="+ld, "../../examples/cobj/throw.cc", obj, "-o", exe)
		out := tool(t, exe)
		if !strings.Contains(out, "caught: thrown below Scheme frames: 42\n") || strings.Contains(out, "not caught") {
			t.Errorf("%s: the exception is not caught above the Scheme frames:\n%s", ld, out)
		}
		// walk(2) -> walk(1) -> walk(0) -> c_backtrace, none a tail
		// call.
		var got []string
		for _, line := range strings.Split(out, "\n") {
			if f, ok := strings.CutPrefix(line, "frame "); ok {
				if _, fn, ok := strings.Cut(f, "("); ok {
					fn, _, _ = strings.Cut(fn, "+")
					got = append(got, fn)
				}
			}
		}
		if want := "c_backtrace walk walk walk main"; len(got) < 5 || strings.Join(got[:5], " ") != want {
			t.Errorf("%s: backtrace() lists %q, want %s first", ld, got, want)
		}
		if !strings.Contains(out, "walk: 10\n") {
			t.Errorf("%s: walk(2) is not 10:\n%s", ld, out)
		}
		cmd := exec.Command(exe, "fail")
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		ee, ok := err.(*exec.ExitError)
		if !ok || !strings.Contains(ee.ProcessState.String(), "signal: aborted") {
			t.Errorf("%s: a Scheme error ends the process with %v, want SIGABRT", ld, err)
		}
		if stdout.String() != "failing with 21\n" || stderr.String() != "scheme: error: bad value 21 42\n" {
			t.Errorf("%s: a Scheme error prints %q on stdout and %q on stderr", ld, stdout.String(), stderr.String())
		}
	}
}

// objectDebuggers checks gdb, addr2line and elfimage symbolize on exe,
// examples/cobj/main.c linked with the object of src: gdb stops in fib
// with its argument and unwinds through a Scheme frame to the C main,
// with file:line in each; addr2line and symbolize name fib at line 1.
func objectDebuggers(t *testing.T, dir, exe, src string) {
	t.Run("gdb", func(t *testing.T) {
		s := &gdbtest.Session{GDB: tooltest.Require(t, "gdb"), Program: exe, Dir: dir, NoScript: true,
			Cmds: []string{"break fib", "run", "continue", "bt", "info args"}}
		r, err := s.Run()
		if err != nil {
			t.Fatalf("%v\n%s", err, r.Output)
		}
		if !regexp.MustCompile(`Breakpoint 1, fib \(n=20\) at \S*` + src + `:2\n`).MatchString(r.Blocks[1]) {
			t.Errorf("run: no stop in fib (n=20) at %s:2:\n%s", src, r.Blocks[1])
		}
		frames := gdbtest.Frames(r.Blocks[3])
		if len(frames) != 3 {
			t.Fatalf("bt: %d frames, want fib, fib, main:\n%s", len(frames), r.Blocks[3])
		}
		for i, want := range []struct{ fn, args, file string }{{"fib", "n=19", src + ":2"}, {"fib", "n=20", src + ":4"}, {"main", "", "main.c:13"}} {
			f := frames[i]
			if f.Func != want.fn || f.Args != want.args || !strings.HasSuffix(f.File+":"+strconv.Itoa(f.Line), want.file) {
				t.Errorf("bt frame %d: %+v, want %s (%s) at %s", i, f, want.fn, want.args, want.file)
			}
		}
		if v := gdbtest.Vars(r.Blocks[4]); v["n"] != "19" {
			t.Errorf("info args: %v, want n = 19:\n%s", v, r.Blocks[4])
		}
	})

	t.Run("addr2line", func(t *testing.T) {
		fib := symbolAddr(t, exe, "fib")
		out := tool(t, tooltest.Require(t, "addr2line"), "-f", "-e", exe, fib)
		if !strings.HasPrefix(out, "fib\n/") || !strings.HasSuffix(out, src+":1\n") {
			t.Errorf("addr2line -f %s: %q, want fib at an absolute path ending in %s:1", fib, out, src)
		}
		code, got, stderr := runCLI(t, "symbolize", "-e", exe, "-f", "0x"+fib)
		if code != 0 || !strings.HasPrefix(got, "fib\n") || !strings.Contains(got, "fib.scm:1") {
			t.Errorf("symbolize -f 0x%s: exit %d, %q %s; want fib at fib.scm:1", fib, code, got, stderr)
		}
	})

}
