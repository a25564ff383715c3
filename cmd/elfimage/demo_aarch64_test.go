//go:build linux && amd64

package main

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/elfimage/elfimage/internal/qemutest"
	"github.com/elfimage/elfimage/internal/tooltest"
	"github.com/elfimage/elfimage/lang/scheme"
)

// TestDemoAArch64 cross-builds elfimage for linux/arm64 and runs
// `elfimage demo -o DIR` under qemu-aarch64: the demo compiles the Scheme
// demo for AArch64 (its host), links, loads and runs it, and its run
// section (the program's output and the backtrace with the Scheme frames'
// arguments, lines and locals) is the one the x86-64 demo prints, once
// addresses and the image's offsets, which differ by architecture, are
// masked.
func TestDemoAArch64(t *testing.T) {
	qemu := tooltest.Require(t, "qemu-aarch64")
	dir := t.TempDir()
	bin := qemutest.BuildArm64(t, dir, ".", "elfimage")
	armDir, hostDir := filepath.Join(dir, "arm64"), filepath.Join(dir, "amd64")
	out, err := tooltest.RunTool(t, exec.Command(qemu, bin, "demo", "-o", armDir), 5*time.Minute)
	if err != nil {
		t.Fatalf("qemu-aarch64 elfimage demo: %v\n%s", err, out)
	}
	code, hostOut, errOut := runCLI(t, "demo", "-o", hostDir)
	if code != 0 {
		t.Fatalf("demo exited %d: %s", code, errOut)
	}
	addr := regexp.MustCompile(`0x[0-9a-f]+ in |\[demo\.elf\+0x[0-9a-f]+\]`)
	runSection := func(s, dir string) string {
		i, j := strings.Index(s, "== run"), strings.Index(s, "== image")
		if i < 0 || j < i {
			t.Fatalf("demo output has no run section:\n%s", s)
		}
		return addr.ReplaceAllString(strings.ReplaceAll(s[i:j], dir, "DIR"), "ADDR ")
	}
	got, want := runSection(out, armDir), runSection(hostOut, hostDir)
	if got != want {
		t.Errorf("AArch64 demo run section\n%s\nwant (x86-64)\n%s", got, want)
	}
	if !strings.Contains(got, "fib(25) = 75025") || !strings.Contains(got, "(inner a=4 b=26)") {
		t.Errorf("AArch64 demo run section lacks the program output or backtrace:\n%s", got)
	}
}

// sameOutputPrograms are the programs of TestRunAArch64SameOutput beside
// lang/scheme/testdata/*.scm and gdbProg: the paths of the AArch64
// backend the kernels do not reach.
var sameOutputPrograms = map[string]string{
	// Frame slots beyond ldur/stur's ±256 bytes (x16 holds the address).
	"deep-slots.scm": "(define (f a) " + strings.Repeat("(+ a ", 45) + "1" + strings.Repeat(")", 45) + ")\n" +
		"(define (main) (display (f 2)) (newline) (f 3))",
	// Every movz/movn/movk pattern of 64-bit constants, signed division.
	"constants.scm": `(define (show x) (display x) (newline))
(define (main)
  (show 0) (show -1) (show 65535) (show 65536) (show -65536) (show 4294967295)
  (show 81985529216486895) (show -81985529216486896) (show 9223372036854775807)
  (show (- -9223372036854775807 1)) (show -4294967296) (show 281470681808895)
  (show (quotient -7 2)) (show (remainder -7 2)) (show (modulo -7 2)) (show (modulo 7 -2))
  (show (modulo -8 2)) (show (quotient 7 -1)) (show (* -3 4)) (show (- 5))
  0)`,
	// An error with values from a define* with defaults, three calls deep.
	"error-deep.scm": `(define* (check n #:optional (lim 10) (twice (* n 2)))
  (if (> n lim) (error "too big" n lim twice) (+ n lim twice)))
(define (mid n) (let ((m (+ n 1))) (+ 1 (check m))))
(define (main) (display (mid 3)) (newline) (display (mid 20)) 0)`,
	// A stack overflow: the prologue's check, the abort path.
	"overflow.scm": `(define (down n) (+ 1 (down (+ n 1))))
(define (main) (display "before") (newline) (down 0))`,
}

// TestRunAArch64SameOutput runs the Scheme programs of lang/scheme's
// testdata, gdbProg and sameOutputPrograms with `elfimage run -v` here
// (x86-64) and, cross-built for linux/arm64, under qemu-aarch64 (where
// they compile for AArch64), and checks that standard output, standard
// error (errors and backtraces with arguments and locals, addresses and
// image offsets masked) and the exit status are the same.
func TestRunAArch64SameOutput(t *testing.T) {
	qemu := tooltest.Require(t, "qemu-aarch64")
	dir := t.TempDir()
	bin := qemutest.BuildArm64(t, dir, ".", "elfimage")
	progs := map[string]string{"gdb-prog.scm": gdbProg}
	for k, v := range sameOutputPrograms {
		progs[k] = v
	}
	files, _ := filepath.Glob("../../lang/scheme/testdata/*.scm")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		progs[filepath.Base(f)] = string(b)
	}
	if len(progs) < len(sameOutputPrograms)+4 {
		t.Fatalf("only %d programs", len(progs))
	}
	addr := regexp.MustCompile(`0x[0-9a-f]+ in |\[[^\]\s]+\+0x[0-9a-f]+\]`)
	mask := func(s string) string { return addr.ReplaceAllString(strings.ReplaceAll(s, dir, "DIR"), "ADDR ") }
	for name, src := range progs {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		code, hostOut, hostErr := runCLI(t, "run", "-v", path)
		stdout, stderr, err := tooltest.RunToolSplit(t, exec.Command(qemu, bin, "run", "-v", path), 3*time.Minute)
		armCode := 0
		if err != nil {
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("%s: qemu-aarch64 elfimage run: %v", name, err)
			}
			armCode = ee.ExitCode()
		}
		got := fmt.Sprintf("exit %d\n-- stdout\n%s-- stderr\n%s", armCode, mask(stdout), mask(stderr))
		want := fmt.Sprintf("exit %d\n-- stdout\n%s-- stderr\n%s", code, mask(hostOut), mask(hostErr))
		if got != want {
			t.Errorf("%s: AArch64 under qemu\n%s\nwant (x86-64)\n%s", name, got, want)
		}
		if testing.Verbose() {
			t.Logf("%s:\n%s", name, got)
		}
	}
}

// TestBuildAndDumpAArch64 cross-compiles the demo with build -arch
// aarch64 on this host and reads the image back with dump, which loads
// an image of another architecture for reading: the AArch64 disassembly
// of inner with its CFA rules and live variables (p in x19 inside its
// let), and the usage errors of -arch.
func TestBuildAndDumpAArch64(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "demo.scm")
	if err := os.WriteFile(src, scheme.DemoSource, 0o644); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "demo.elf")
	if code, _, errOut := runCLI(t, "build", "-arch", "aarch64", "-o", img, src); code != 0 {
		t.Fatalf("build -arch aarch64 exited %d: %s", code, errOut)
	}
	code, out, errOut := runCLI(t, "dump", "-disasm", "-proc", "inner", img)
	if code != 0 {
		t.Fatalf("dump -disasm exited %d: %s", code, errOut)
	}
	for _, want := range []string{"stp x29, x30, [sp,#-16]!", "cfa=x29+16 x29=c-16 ra=c-8", "p=DW_OP_reg19", "bl ", "<%capture>", "ret "} {
		if !strings.Contains(out, want) {
			t.Errorf("dump -disasm -proc inner lacks %q:\n%s", want, out)
		}
	}
	for _, tc := range [][]string{{"build", "-arch", "mips", src}, {"build", "-c", "-arch", "mips", src}} {
		if code, _, errOut := runCLI(t, tc...); code != 2 || !strings.Contains(errOut, "-arch") {
			t.Errorf("%q: exit %d, %s; want a usage error naming -arch", tc, code, errOut)
		}
	}
}

// TestRunPageSizeAArch64: on AArch64 kernels with 16 KiB and 64 KiB pages
// (qemu-aarch64 -p), `elfimage run` compiles and links for the running
// kernel's page size and prints what it prints with 4 KiB pages, `build`
// writes segments aligned to that page size, and one compile cache serves
// both page sizes with an image for each.
func TestRunPageSizeAArch64(t *testing.T) {
	qemu := tooltest.Require(t, "qemu-aarch64")
	dir := t.TempDir()
	bin := qemutest.BuildArm64(t, dir, ".", "elfimage")
	src := filepath.Join(dir, "prog.scm")
	if err := os.WriteFile(src, []byte(gdbProg), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "cache")
	run := func(page string, args ...string) string {
		t.Helper()
		out, err := tooltest.RunTool(t, exec.Command(qemu, append([]string{"-p", page, bin}, args...)...), 3*time.Minute)
		if err != nil {
			t.Fatalf("qemu-aarch64 -p %s elfimage %s: %v\n%s", page, strings.Join(args, " "), err, out)
		}
		return strings.ReplaceAll(out, dir, "DIR")
	}
	want := run("4096", "run", "-cache", cache, src)
	for _, page := range []string{"16384", "65536", "4096"} {
		if got := run(page, "run", "-cache", cache, src); got != want {
			t.Errorf("page size %s: run prints\n%s\nwant (4 KiB pages)\n%s", page, got, want)
		}
		out := filepath.Join(dir, "prog-"+page+".elf")
		run(page, "build", "-o", out, src)
		f, err := elf.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_LOAD && (fmt.Sprint(p.Align) != page || fmt.Sprint(p.Off%p.Align) != "0") {
				t.Errorf("page size %s: built PT_LOAD at offset %#x, p_align %#x", page, p.Off, p.Align)
			}
		}
		f.Close()
	}
	entries, err := filepath.Glob(filepath.Join(cache, "*.elf"))
	if err != nil || len(entries) != 3 {
		t.Errorf("compile cache holds %v (%v), want one image per page size", entries, err)
	}
}
