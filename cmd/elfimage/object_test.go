package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/elfimage/elfimage/internal/gdbtest"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// objectOutput is what examples/cobj/main.c prints, linked with the
// object of examples/cobj/fib.scm.
const objectOutput = "fib(20) = 6765\nfib 15 = 610\neven? 4: 1, even? 7: 0\nfib 10 = 55\nscheme main: 55\n"

// buildObject writes the x86-64 object of examples/cobj/fib.scm with
// build -c into dir and returns its path.
func buildObject(t *testing.T, dir string) string {
	t.Helper()
	return buildObjectArch(t, "x86-64", dir, "../../examples/cobj/fib.scm", "fib.o")
}

// buildObjectArch writes the object of the Scheme file src with build -c
// -arch arch (x86-64 or aarch64) into dir/name and returns its path.
func buildObjectArch(t *testing.T, arch, dir, src, name string) string {
	t.Helper()
	obj := filepath.Join(dir, name)
	if code, _, stderr := runCLI(t, "build", "-c", "-arch", arch, "-o", obj, src); code != 0 {
		t.Fatalf("build -c -arch %s: exit %d: %s", arch, code, stderr)
	}
	return obj
}

// runProgram runs exe with args, after the command prefix run when it is
// not empty (qemu-aarch64 -L SYSROOT for an AArch64 program), through
// tooltest.RunToolSplit: after 2 minutes it is killed with its process
// group and the test fails with its output. It returns its standard output
// and error and its error (an *exec.ExitError for a non-zero exit or a
// signal).
func runProgram(t *testing.T, run []string, exe string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	argv := append(append(slices.Clone(run), exe), args...)
	return tooltest.RunToolSplit(t, exec.Command(argv[0], argv[1:]...), 2*time.Minute)
}

// checkOutput checks that out, the output of what, contains each of wants
// and none of bads.
func checkOutput(t *testing.T, what, out string, wants, bads []string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("%s lacks %q", what, want)
		}
	}
	for _, bad := range bads {
		if strings.Contains(out, bad) {
			t.Errorf("%s shows %q", what, bad)
		}
	}
}

// checkLinkedObject checks exe, examples/cobj/main.c linked with the
// object of fib.scm by a system linker: run (runProgram with run), it
// prints objectOutput; llvm-dwarfdump --verify accepts its DWARF; the
// linker's .eh_frame_hdr (PT_GNU_EH_FRAME) indexes the Scheme procedures'
// FDEs, and readelf, the machine's, decodes one starting at fib.
func checkLinkedObject(t *testing.T, readelf, dwarfdump, exe string, run []string) {
	t.Helper()
	got, stderr, err := runProgram(t, run, exe)
	if err != nil || got != objectOutput {
		t.Errorf("%s: %v; prints %q (stderr %q), want %q", strings.Join(append(slices.Clone(run), exe), " "), err, got, stderr, objectOutput)
	}
	if out := tool(t, dwarfdump, "--verify", exe); !strings.Contains(out, "No errors.") {
		t.Errorf("llvm-dwarfdump --verify:\n%s", out)
	}
	frames := tool(t, readelf, "-W", "--debug-dump=frames", exe)
	fib := symbolAddr(t, exe, "fib")
	if !strings.Contains(frames, "pc="+strings.TrimLeft(fib, "0")) && !strings.Contains(frames, "pc="+fib) {
		t.Errorf("no FDE starts at fib (%s) in readelf --debug-dump=frames", fib)
	}
	if hdr := tool(t, readelf, "-W", "-l", exe); !strings.Contains(hdr, "GNU_EH_FRAME") {
		t.Errorf("no PT_GNU_EH_FRAME: the linker built no .eh_frame_hdr:\n%s", hdr)
	}
}

// tool runs name with args and returns its output (standard output and
// error merged), failing the test on a non-zero exit or after 3 minutes
// (tooltest.RunTool: the tool is killed with its process group; perf
// report is one of the tools).
func tool(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := tooltest.RunTool(t, exec.Command(name, args...), 3*time.Minute)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// TestObjectLinkers: the object of build -c passes eu-elflint --gnu-ld,
// its relocations are the psABI's, and GNU ld (bfd), gold and lld link it
// with a C main into programs that print what the Scheme code computes,
// whose DWARF llvm-dwarfdump verifies and whose .eh_frame_hdr the linker
// built from our .eh_frame (checkLinkedObject).
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
	checkOutput(t, "readelf -r -S -s", tool(t, readelf, "-W", "-r", "-S", "-s", obj), []string{
		"Relocation section '.rela.text'", "R_X86_64_PLT32         0000000000000000 fib - 4",
		"Relocation section '.rela.eh_frame'", "Relocation section '.rela.debug_info'",
		"Relocation section '.rela.debug_line'", "Relocation section '.rela.debug_aranges'",
		"R_X86_64_32            0000000000000000 .debug_str + ", "R_X86_64_32            0000000000000000 .debug_abbrev + 0",
		"R_X86_64_32            0000000000000000 .debug_line + 0", "R_X86_64_32            0000000000000000 .debug_line_str + ",
		"R_X86_64_64            0000000000000000 .text + 0",
		" .note.GNU-stack ", " GLOBAL DEFAULT    1 fib", " GLOBAL DEFAULT    1 show_fib", " GLOBAL DEFAULT    1 even_p",
		" GLOBAL DEFAULT    1 scheme_main",
	}, []string{".eh_frame_hdr", ".note.gnu.build-id", " GLOBAL DEFAULT    1 main"})
	if out := tool(t, dwarfdump, "--verify", obj); !strings.Contains(out, "No errors.") {
		t.Errorf("llvm-dwarfdump --verify %s:\n%s", obj, out)
	}
	for _, ld := range []string{"bfd", "gold", "lld"} {
		t.Run(ld, func(t *testing.T) {
			tooltest.Require(t, "ld."+ld)
			exe := filepath.Join(dir, "prog-"+ld)
			tool(t, gcc, "-g", "-fuse-ld="+ld, "../../examples/cobj/main.c", obj, "-o", exe)
			checkLinkedObject(t, readelf, dwarfdump, exe, nil)
		})
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
		if out, err := tooltest.RunTool(t, rec, 2*time.Minute); err != nil {
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
	dir, root := recipeDirs(t)
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
	obj := buildObjectArch(t, "x86-64", dir, "../../examples/cobj/extern.scm", "extern.o")
	rel := tool(t, tooltest.Require(t, "readelf"), "-W", "-r", "-s", obj)
	checkOutput(t, "readelf -r -s", rel, []string{"R_X86_64_PLT32         0000000000000000 cxx_thrower - 4", "NOTYPE  GLOBAL DEFAULT  UND c_backtrace"}, nil)
	for _, ld := range []string{"bfd", "gold", "lld"} {
		t.Run(ld, func(t *testing.T) {
			tooltest.Require(t, "ld."+ld)
			exe := filepath.Join(dir, "throw-"+ld)
			// -rdynamic: backtrace_symbols names functions from the
			// dynamic symbol table.
			tool(t, gxx, "-g", "-rdynamic", "-fuse-ld="+ld, "../../examples/cobj/throw.cc", obj, "-o", exe)
			out := tool(t, exe)
			if !strings.Contains(out, "caught: thrown below Scheme frames: 42\n") || strings.Contains(out, "not caught") {
				t.Errorf("the exception is not caught above the Scheme frames:\n%s", out)
			}
			checkExternRun(t, nil, exe, out)
		})
	}
	if t.Failed() {
		t.Logf("readelf -r -s:\n%s", rel)
	}
}

// checkExternRun checks exe, the C or C++ main of a test linked with the
// object of examples/cobj/extern.scm, whose output run (runProgram with
// run) without arguments is out: glibc's backtrace() from c_backtrace,
// which Scheme calls, lists the three Scheme frames between it and main
// (walk(2) -> walk(1) -> walk(0) -> c_backtrace, none a tail call: libgcc
// unwinds through the object's .eh_frame), walk(2) is 10; run with the
// argument fail, a Scheme error prints its message and values to standard
// error and ends the process with SIGABRT (a line qemu-user adds about the
// signal ignored).
func checkExternRun(t *testing.T, run []string, exe, out string) {
	t.Helper()
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
		t.Errorf("backtrace() lists %q, want %s first:\n%s", got, want, out)
	}
	if !strings.Contains(out, "walk: 10\n") {
		t.Errorf("walk(2) is not 10:\n%s", out)
	}
	stdout, stderr, err := runProgram(t, run, exe, "fail")
	ee, ok := err.(*exec.ExitError)
	if !ok || !strings.Contains(ee.ProcessState.String(), "signal: aborted") {
		t.Errorf("a Scheme error ends the process with %v, want SIGABRT", err)
	}
	stderr = qemuSignalLine.ReplaceAllString(stderr, "")
	if stdout != "failing with 21\n" || stderr != "scheme: error: bad value 21 42\n" {
		t.Errorf("a Scheme error prints %q on stdout and %q on stderr", stdout, stderr)
	}
}

// qemuSignalLine is the line qemu-user prints on standard error about a
// fatal signal of the program it runs.
var qemuSignalLine = regexp.MustCompile(`(?m)^qemu: uncaught target signal.*\n?`)

// objectDebuggers checks gdb, addr2line and elfimage symbolize on exe,
// examples/cobj/main.c linked with the object of src: gdb stops in fib
// with its argument and unwinds through a Scheme frame to the C main,
// with file:line in each; addr2line and symbolize name fib at line 1.
func objectDebuggers(t *testing.T, dir, exe, src string) {
	t.Run("gdb", func(t *testing.T) {
		s := &gdbtest.Session{GDB: tooltest.Require(t, "gdb"), Program: exe, Dir: dir, NoScript: true,
			Cmds: fibGDBCmds("run")}
		checkFibGDB(t, gdbtest.MustRun(t, s), 0, src)
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

// fibGDBCmds are the gdb commands checkFibGDB reads the output of: a
// breakpoint at fib, start (run, or continue for a program that waits at
// a gdb stub), continue to the second stop, bt and info args.
func fibGDBCmds(start string) []string {
	return []string{"break fib", start, "continue", "bt", "info args"}
}

// checkFibGDB checks r, a gdb session on examples/cobj/main.c linked with
// the object of src whose commands from index i on are fibGDBCmds: the
// first stop is in fib (n=20) at src:2; at the second, bt goes from fib
// (n=19) at src:2 through fib (n=20) at src:4 (the CFI and the DWARF
// locations of the object, relocated by the linker) to main at
// main.c:13, and info args shows n = 19.
func checkFibGDB(t *testing.T, r *gdbtest.Result, i int, src string) {
	t.Helper()
	if !regexp.MustCompile(`Breakpoint 1, fib \(n=20\) at \S*` + src + `:2\n`).MatchString(r.Blocks[i+1]) {
		t.Errorf("first stop: no stop in fib (n=20) at %s:2:\n%s", src, r.Blocks[i+1])
	}
	frames := gdbtest.Frames(r.Blocks[i+3])
	if len(frames) != 3 {
		t.Fatalf("bt: %d frames, want fib, fib, main:\n%s", len(frames), r.Blocks[i+3])
	}
	for k, want := range []struct{ fn, args, file string }{{"fib", "n=19", src + ":2"}, {"fib", "n=20", src + ":4"}, {"main", "", "main.c:13"}} {
		f := frames[k]
		if f.Func != want.fn || f.Args != want.args || !strings.HasSuffix(f.File+":"+strconv.Itoa(f.Line), want.file) {
			t.Errorf("bt frame %d: %+v, want %s (%s) at %s", k, f, want.fn, want.args, want.file)
		}
	}
	if v := gdbtest.Vars(r.Blocks[i+4]); v["n"] != "19" {
		t.Errorf("info args: %v, want n = 19:\n%s", v, r.Blocks[i+4])
	}
}
