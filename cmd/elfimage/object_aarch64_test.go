//go:build linux && amd64

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

	"github.com/elfimage/elfimage/internal/gdbtest"
	"github.com/elfimage/elfimage/internal/lldbtest"
	"github.com/elfimage/elfimage/internal/qemutest"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// aarch64Sysroot is where Debian's cross packages (libc6-arm64-cross,
// libc6-dev-arm64-cross) put the AArch64 C library: qemu-aarch64 -L
// finds the dynamic loader and libc there, gdb-multiarch's sysroot.
const aarch64Sysroot = "/usr/aarch64-linux-gnu"

// crossLink links the C sources and objects in args with
// aarch64-linux-gnu-gcc -g and the GNU ld (bfd), gold or lld linker ld
// into exe. lld is one binary for every target: gcc finds it as ld.lld
// in a -B directory holding a link to it.
func crossLink(t *testing.T, dir, ld, exe string, args ...string) {
	t.Helper()
	gcc := tooltest.Require(t, "aarch64-linux-gnu-gcc")
	flags := []string{"-g", "-fuse-ld=" + ld}
	switch ld {
	case "lld":
		bin := filepath.Join(dir, "lld-bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(tooltest.Require(t, "ld.lld"), filepath.Join(bin, "ld.lld")); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
		flags = append(flags, "-B", bin+"/")
	default:
		tooltest.Require(t, "aarch64-linux-gnu-ld."+ld)
	}
	tool(t, gcc, append(append(flags, args...), "-o", exe)...)
}

// qemuRun returns the command prefix that runs an AArch64 program here
// (runProgram): qemu-aarch64 -L aarch64Sysroot.
func qemuRun(t *testing.T) []string {
	t.Helper()
	return []string{tooltest.Require(t, "qemu-aarch64"), "-L", aarch64Sysroot}
}

// TestObjectLinkersAArch64 is TestObjectLinkers for build -c -arch
// aarch64: eu-elflint --gnu-ld and llvm-dwarfdump --verify accept the
// object; aarch64-linux-gnu-readelf shows AAELF64's relocations
// (R_AARCH64_CALL26 and JUMP26 to the procedures' global symbols,
// ADR_PREL_PG_HI21 + ADD_ABS_LO12_NC for the string objects, ABS64 in
// .data, PREL32 for .eh_frame's pc_begin, ABS32 and ABS64 in the DWARF
// against section symbols); aarch64-linux-gnu-objdump -dr shows each
// instruction relocation under an instruction of its kind (bl, b, adrp,
// add) whose field holds 0; and GNU ld, gold and lld (through
// aarch64-linux-gnu-gcc) link it with examples/cobj/main.c into programs
// that print under qemu-aarch64 what the x86-64 ones print, whose DWARF
// llvm-dwarfdump verifies and whose .eh_frame_hdr has an FDE at fib
// (checkLinkedObject).
func TestObjectLinkersAArch64(t *testing.T) {
	elflint := tooltest.Require(t, "eu-elflint")
	readelf := tooltest.Require(t, "aarch64-linux-gnu-readelf")
	objdump := tooltest.Require(t, "aarch64-linux-gnu-objdump")
	dwarfdump := tooltest.Require(t, "llvm-dwarfdump")
	dir := t.TempDir()
	obj := buildObjectArch(t, "aarch64", dir, "../../examples/cobj/fib.scm", "fib.o")
	if out := tool(t, elflint, "--gnu-ld", obj); !strings.Contains(out, "No errors") {
		t.Errorf("eu-elflint --gnu-ld: %s", out)
	}
	rel := tool(t, readelf, "-W", "-h", "-r", "-S", "-s", obj)
	checkOutput(t, "readelf -h -r -S -s", rel, []string{
		"Machine:                           AArch64", "Type:                              REL (Relocatable file)",
		"R_AARCH64_CALL26       0000000000000000 fib + 0", "R_AARCH64_JUMP26       0000000000000000 fib + 0",
		"R_AARCH64_CALL26       0000000000000000 .text + ",
		"R_AARCH64_ADR_PREL_PG_HI21 0000000000000000 .data + ", "R_AARCH64_ADD_ABS_LO12_NC 0000000000000000 .data + ",
		"Relocation section '.rela.data'", "R_AARCH64_ABS64        0000000000000000 .rodata + ",
		"Relocation section '.rela.eh_frame'", "R_AARCH64_PREL32       0000000000000000 .text + 0",
		"Relocation section '.rela.debug_info'", "Relocation section '.rela.debug_line'", "Relocation section '.rela.debug_aranges'",
		"R_AARCH64_ABS32        0000000000000000 .debug_str + ", "R_AARCH64_ABS32        0000000000000000 .debug_abbrev + 0",
		"R_AARCH64_ABS32        0000000000000000 .debug_line + 0", "R_AARCH64_ABS32        0000000000000000 .debug_line_str + ",
		"R_AARCH64_ABS64        0000000000000000 .text + 0",
		" .note.GNU-stack ", " .eh_frame         PROGBITS ", " LOCAL  DEFAULT    1 $x",
		" GLOBAL DEFAULT    1 fib", " GLOBAL DEFAULT    1 show_fib", " GLOBAL DEFAULT    1 even_p", " GLOBAL DEFAULT    1 scheme_main",
	}, []string{"R_X86_64", ".eh_frame_hdr", ".note.gnu.build-id", " GLOBAL DEFAULT    1 main"})
	// main's tail call (show-fib 10): a JUMP26 to the global symbol.
	if !regexp.MustCompile(`R_AARCH64_JUMP26 +[0-9a-f]{16} show_fib \+ 0\n`).MatchString(rel) {
		t.Errorf("readelf -r shows no R_AARCH64_JUMP26 to show_fib")
	}
	checkObjdumpRelocs(t, tool(t, objdump, "-dr", obj))
	if out := tool(t, dwarfdump, "--verify", obj); !strings.Contains(out, "No errors.") {
		t.Errorf("llvm-dwarfdump --verify %s:\n%s", obj, out)
	}
	for _, ld := range []string{"bfd", "gold", "lld"} {
		t.Run(ld, func(t *testing.T) {
			exe := filepath.Join(dir, "prog-"+ld)
			crossLink(t, dir, ld, exe, "../../examples/cobj/main.c", obj)
			checkLinkedObject(t, readelf, dwarfdump, exe, qemuRun(t))
			// addr2line and symbolize name fib at its first line, and the
			// return address of its first recursive call at line 4 (the
			// $x mapping symbols the linker keeps do not hide fib).
			fib := symbolAddr(t, exe, "fib")
			at, err := strconv.ParseUint(fib, 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			addr2line := tooltest.Require(t, "aarch64-linux-gnu-addr2line")
			for _, c := range []struct {
				addr uint64
				line string
			}{{at, ":1\n"}, {at + 0x64, ":4\n"}} {
				if out := tool(t, addr2line, "-f", "-e", exe, fmt.Sprintf("%x", c.addr)); !strings.HasPrefix(out, "fib\n/") || !strings.HasSuffix(out, "examples/cobj/fib.scm"+c.line) {
					t.Errorf("addr2line -f %#x: %q, want fib at fib.scm%s", c.addr, out, c.line)
				}
				code, got, stderr := runCLI(t, "symbolize", "-e", exe, "-f", fmt.Sprintf("%#x", c.addr))
				if code != 0 || !strings.HasPrefix(got, "fib\n") || !strings.HasSuffix(got, "fib.scm"+c.line) {
					t.Errorf("symbolize -f %#x: exit %d, %q %s; want fib at fib.scm%s", c.addr, code, got, stderr, c.line)
				}
			}
		})
	}
}

// objdumpInsn is a line of objdump -d: address, word, mnemonic.
var objdumpInsn = regexp.MustCompile(`^\s*([0-9a-f]+):\s+([0-9a-f]{8})\s+(\S+)`)

// objdumpReloc is a line of objdump -r under an instruction.
var objdumpReloc = regexp.MustCompile(`^\s*([0-9a-f]+): (R_AARCH64_\S+)\s+(\S+)`)

// checkObjdumpRelocs checks aarch64-linux-gnu-objdump -dr output: every
// relocation sits at the instruction just listed, of the kind its type
// patches, with the field it patches 0, and each kind occurs.
func checkObjdumpRelocs(t *testing.T, out string) {
	t.Helper()
	kinds := map[string]struct {
		mnemonic string
		field    uint32
	}{
		"R_AARCH64_CALL26":           {"bl", 0x03ffffff},
		"R_AARCH64_JUMP26":           {"b", 0x03ffffff},
		"R_AARCH64_ADR_PREL_PG_HI21": {"adrp", 3<<29 | 0x7ffff<<5},
		"R_AARCH64_ADD_ABS_LO12_NC":  {"add", 0xfff << 10},
	}
	seen := map[string]int{}
	var addr, mnemonic string
	var word uint64
	for _, line := range strings.Split(out, "\n") {
		if m := objdumpInsn.FindStringSubmatch(line); m != nil {
			addr, mnemonic = m[1], m[3]
			word, _ = strconv.ParseUint(m[2], 16, 32)
			continue
		}
		m := objdumpReloc.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		k, ok := kinds[m[2]]
		switch {
		case !ok:
			t.Errorf("objdump -dr: unexpected relocation %s", strings.TrimSpace(line))
		case m[1] != addr || mnemonic != k.mnemonic || uint32(word)&k.field != 0:
			t.Errorf("objdump -dr: %s at %s against %s follows %s: %s %08x; want a %s with the field 0", m[2], m[1], m[3], addr, mnemonic, word, k.mnemonic)
		}
		seen[m[2]]++
	}
	for k := range kinds {
		if seen[k] == 0 {
			t.Errorf("objdump -dr shows no %s:\n%s", k, out)
		}
	}
}

// externC provides the C functions examples/cobj/extern.scm calls, for
// a C program: cxx_thrower returns its argument instead of throwing (the
// cross compiler has no C++ library here), c_backtrace lists the frames
// above it with glibc's backtrace(), which unwinds with libgcc through
// the object's .eh_frame.
const externC = `#include <execinfo.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
int64_t walk(int64_t);
int64_t through(int64_t);
int64_t fail(int64_t);
int64_t cxx_thrower(int64_t n) { return n; }
int64_t c_backtrace(int64_t n) {
  void *pcs[16];
  int k = backtrace(pcs, 16);
  char **names = backtrace_symbols(pcs, k);
  for (int i = 0; i < k; i++) printf("frame %s\n", names[i]);
  fflush(stdout);
  return n;
}
int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "fail") == 0) { fail(21); return 0; }
  printf("walk: %ld\nthrough: %ld\n", (long)walk(2), (long)through(1));
  return 0;
}
`

// TestObjectExternAArch64: with bfd, gold and lld, AArch64 Scheme code of
// examples/cobj/extern.scm calls C functions (define-extern, CALL26
// against undefined symbols, which the linker binds to the program's
// functions); glibc's backtrace() from a C function Scheme calls lists
// the three Scheme frames between it and main (libgcc reads the object's
// .eh_frame under qemu-aarch64); a Scheme error prints its message and
// values to standard error and ends the process with SIGABRT
// (checkExternRun).
func TestObjectExternAArch64(t *testing.T) {
	readelf := tooltest.Require(t, "aarch64-linux-gnu-readelf")
	dir := t.TempDir()
	obj := buildObjectArch(t, "aarch64", dir, "../../examples/cobj/extern.scm", "extern.o")
	rel := tool(t, readelf, "-W", "-r", "-s", obj)
	checkOutput(t, "readelf -r -s", rel, []string{"R_AARCH64_CALL26       0000000000000000 cxx_thrower + 0", "R_AARCH64_CALL26       0000000000000000 c_backtrace + 0", "NOTYPE  GLOBAL DEFAULT  UND c_backtrace"}, nil)
	main := filepath.Join(dir, "extern.c")
	if err := os.WriteFile(main, []byte(externC), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ld := range []string{"bfd", "gold", "lld"} {
		t.Run(ld, func(t *testing.T) {
			exe := filepath.Join(dir, "extern-"+ld)
			// -rdynamic: backtrace_symbols names functions from the
			// dynamic symbol table.
			crossLink(t, dir, ld, exe, "-rdynamic", main, obj)
			run := qemuRun(t)
			out, stderr, err := runProgram(t, run, exe)
			if err != nil {
				t.Fatalf("qemu-aarch64 %s: %v\n%s%s", exe, err, out, stderr)
			}
			if !strings.Contains(out, "walk: 10\nthrough: 44\n") {
				t.Errorf("walk(2), through(1): %q, want 10 and 44", out)
			}
			checkExternRun(t, run, exe, out)
		})
	}
	if t.Failed() {
		t.Logf("readelf -r -s:\n%s", rel)
	}
}

// TestObjectGDBMultiarchAArch64 is objectDebuggers' gdb check for
// AArch64: gdb-multiarch connected to qemu-aarch64 -g (a loopback-only
// namespace, qemutest.Wrapper) running examples/cobj/main.c linked with
// the object of fib.scm stops at fib with its argument and line, and its
// backtrace goes through a Scheme frame (the CFI of the object's
// .eh_frame and the DWARF locations of its .debug_info, relocated by the
// linker) to the C main, with file:line in each frame (checkFibGDB).
func TestObjectGDBMultiarchAArch64(t *testing.T) {
	dir, exe, wrapper, progOut := fibcAArch64Debugger(t, tooltest.Require(t, "gdb-multiarch"))
	cmds := append([]string{"set sysroot " + aarch64Sysroot, qemutest.GDBConnect}, fibGDBCmds("continue")...)
	s := &gdbtest.Session{GDB: wrapper, Program: exe, Dir: dir, NoScript: true, Timeout: 5 * time.Minute, Cmds: append(cmds, "delete", "continue")}
	r := qemutest.MustRunGDBStops(t, s, 2)
	t.Logf("gdb-multiarch:\n%s", r.Output)
	checkFibGDB(t, r, 2, "examples/cobj/fib.scm")
	if !strings.Contains(r.Blocks[8], "exited normally") {
		t.Errorf("last continue: the program did not exit normally:\n%s", r.Blocks[8])
	}
	if out, err := os.ReadFile(progOut); err != nil || string(out) != objectOutput {
		t.Errorf("program output %q (%v), want %q", out, err, objectOutput)
	}
}

// fibcAArch64Debugger links examples/cobj/main.c with the AArch64 object
// of fib.scm (GNU ld) into dir/fibc, a new test directory, and returns
// the wrapper that stands for debugger with the program under
// qemu-aarch64 -g (qemutest.Wrapper) and the file that receives the
// program's output. It sets QEMU_LD_PREFIX for the test: qemu-aarch64
// finds the dynamic loader there (as with -L), and the wrapper's qemu
// inherits the environment.
func fibcAArch64Debugger(t *testing.T, debugger string) (dir, exe, wrapper, progOut string) {
	t.Helper()
	dir = t.TempDir()
	obj := buildObjectArch(t, "aarch64", dir, "../../examples/cobj/fib.scm", "fib.o")
	exe = filepath.Join(dir, "fibc")
	crossLink(t, dir, "bfd", exe, "../../examples/cobj/main.c", obj)
	t.Setenv("QEMU_LD_PREFIX", aarch64Sysroot)
	wrapper, progOut = qemutest.Wrapper(t, dir, debugger, exe)
	return dir, exe, wrapper, progOut
}

// TestBuildObjectArch: build -c takes -arch (aarch64 or x86-64) and
// writes an object of that machine.
func TestBuildObjectArch(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ arch, machine string }{{"aarch64", "AArch64"}, {"x86-64", "Advanced Micro Devices X86-64"}} {
		obj := filepath.Join(dir, c.arch+".o")
		if code, _, stderr := runCLI(t, "build", "-c", "-arch", c.arch, "-o", obj, "../../examples/cobj/fib.scm"); code != 0 {
			t.Fatalf("build -c -arch %s: exit %d: %s", c.arch, code, stderr)
		}
		hdr := tool(t, tooltest.Require(t, "readelf"), "-h", obj)
		if !strings.Contains(hdr, fmt.Sprintf("Machine:                           %s\n", c.machine)) || !strings.Contains(hdr, "REL (Relocatable file)") {
			t.Errorf("build -c -arch %s: readelf -h:\n%s", c.arch, hdr)
		}
	}
}

// TestObjectProgramsAArch64: the test programs of lang/scheme (the demo,
// the kernels, scopes, errors), each built with build -c for x86-64 and
// for AArch64 and linked with a C main that calls scheme_main, print the
// same standard output and error and end the same way (exit 0, or
// SIGABRT after a Scheme error), the x86-64 program run here, the
// AArch64 one under qemu-aarch64.
func TestObjectProgramsAArch64(t *testing.T) {
	gcc := tooltest.Require(t, "gcc")
	dir := t.TempDir()
	main := filepath.Join(dir, "main.c")
	if err := os.WriteFile(main, []byte("#include <stdint.h>\nint64_t scheme_main(void);\nint main(void) { scheme_main(); return 0; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"demo", "kernels", "scopes", "errors"} {
		t.Run(name, func(t *testing.T) {
			src := filepath.Join("../../lang/scheme/testdata", name+".scm")
			x86 := buildObjectArch(t, "x86-64", dir, src, name+"-x86-64.o")
			a64 := buildObjectArch(t, "aarch64", dir, src, name+"-aarch64.o")
			x86Exe, a64Exe := filepath.Join(dir, name+"-x86-64"), filepath.Join(dir, name+"-aarch64")
			tool(t, gcc, "-o", x86Exe, main, x86)
			crossLink(t, dir, "bfd", a64Exe, main, a64)
			wantOut, wantErr, wantRun := runProgram(t, nil, x86Exe)
			gotOut, gotErr, gotRun := runProgram(t, qemuRun(t), a64Exe)
			// qemu-aarch64 reports a fatal signal on a line of its own.
			gotErr = qemuSignalLine.ReplaceAllString(gotErr, "")
			status := func(err error) string {
				if ee, ok := err.(*exec.ExitError); ok {
					return ee.ProcessState.String()
				}
				return fmt.Sprint(err)
			}
			if gotOut != wantOut || gotErr != wantErr || status(gotRun) != status(wantRun) {
				t.Errorf("AArch64: %s, stdout %q, stderr %q\nx86-64: %s, stdout %q, stderr %q",
					status(gotRun), gotOut, gotErr, status(wantRun), wantOut, wantErr)
			}
			if wantOut == "" && wantErr == "" {
				t.Errorf("%s prints nothing", name)
			}
		})
	}
}

// TestObjectLLDBAArch64 is TestObjectGDBMultiarchAArch64 with lldb-19
// (gdb-remote to qemu's stub; the C library's symbols found under
// aarch64Sysroot through target.exec-search-paths):
// it stops at fib with its argument and line, its backtrace goes through
// the Scheme frames of the linked object to the C main with file:line in
// each frame, and the program ends with its usual output.
func TestObjectLLDBAArch64(t *testing.T) {
	dir, exe, wrapper, progOut := fibcAArch64Debugger(t, tooltest.Require(t, "lldb-19", "lldb"))
	s := &lldbtest.Session{LLDB: wrapper, Program: exe, Dir: dir, Timeout: 5 * time.Minute, Cmds: append(
		[]string{"settings set target.exec-search-paths " + aarch64Sysroot + "/lib"}, append(qemutest.LLDBConnect(),
			"breakpoint set -n fib",
			"continue",
			"continue",
			"bt",
			"frame variable",
			"breakpoint delete -f",
			"continue",
		)...)}
	r := qemutest.MustRunLLDBStops(t, s, 2)
	t.Logf("lldb:\n%s", r.Output)
	src := "fib.scm"
	if want := "fibc`fib(n=20) at " + src + ":2:3"; !strings.Contains(r.Blocks[6], want) {
		t.Errorf("first continue: no stop at %q:\n%s", want, r.Blocks[6])
	}
	frames := lldbtest.Frames(r.Blocks[8])
	if len(frames) < 3 {
		t.Fatalf("bt: %d frames, want fib, fib, main first:\n%s", len(frames), r.Blocks[8])
	}
	for i, want := range []struct{ fn, args, at string }{{"fib", "n=19", src + ":2"}, {"fib", "n=20", src + ":4"}, {"main", "", "main.c:13"}} {
		f := frames[i]
		if f.Func != want.fn || f.Args != want.args || f.File+":"+strconv.Itoa(f.Line) != want.at {
			t.Errorf("bt frame %d: %+v, want %s(%s) at %s:\n%s", i, f, want.fn, want.args, want.at, r.Blocks[8])
		}
	}
	if v := lldbtest.Vars(r.Blocks[9]); v["n"].Value != "19" {
		t.Errorf("frame variable %v, want n = 19:\n%s", v, r.Blocks[9])
	}
	checkExit(t, r.Blocks[11])
	if out, err := os.ReadFile(progOut); err != nil || string(out) != objectOutput {
		t.Errorf("program output %q (%v), want %q", out, err, objectOutput)
	}
}
