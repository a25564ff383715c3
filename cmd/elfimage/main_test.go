package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// runCLI runs the command in-process and returns its exit status,
// standard output and standard error.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestDemo: the main job prints the program's output, a backtrace of at
// least three frames with names, file:line:column and argument values,
// the layout summary and the load time.
func TestDemo(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCLI(t, "demo", "-o", dir)
	if code != 0 {
		t.Fatalf("demo exited %d: %s", code, errOut)
	}
	for _, want := range []string{"fib(25) = 75025", "tak(18, 12, 6) = 7", "ack(2, 9) = 21", "sum(1..10000) = 50005000",
		"outer(3) = 104", "Backtrace:", "segment", ".debug_info", "== load:"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	frame := regexp.MustCompile(`#\d+ +0x[0-9a-f]+ in \((\S+)([^)]*)\) +at \S+demo\.scm:(\d+):(\d+)`)
	frames := frame.FindAllStringSubmatch(out, -1)
	want := []struct{ name, args, line string }{
		{"inner", " a=4 b=26", "33"}, {"middle", " x=3 y=13", "37"}, {"outer", " n=3", "41"}, {"main", "", "49"},
	}
	if len(frames) != len(want) {
		t.Fatalf("backtrace has %d frames, want %d:\n%s", len(frames), len(want), out)
	}
	for i, w := range want {
		if f := frames[i]; f[1] != w.name || f[2] != w.args || f[3] != w.line {
			t.Errorf("frame %d: %q, want %s%s at line %s", i, f[0], w.name, w.args, w.line)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "demo.elf")); err != nil {
		t.Errorf("demo -o kept no image: %v", err)
	}
}

// TestRunKernels: the classic kernels give the right results through
// `elfimage run`, from source and from a built image, on both load paths.
func TestRunKernels(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "kernels.scm")
	prog := `
(define (fib n) (if (< n 2) n (+ (fib (- n 1)) (fib (- n 2)))))
(define (tak x y z) (if (not (< y x)) z (tak (tak (- x 1) y z) (tak (- y 1) z x) (tak (- z 1) x y))))
(define (ack m n) (cond ((= m 0) (+ n 1)) ((= n 0) (ack (- m 1) 1)) (else (ack (- m 1) (ack m (- n 1))))))
(define (sum n) (let loop ((i 1) (acc 0)) (if (> i n) acc (loop (+ i 1) (+ acc i)))))
(define (main)
  (display (fib 25)) (newline)
  (display (tak 18 12 6)) (newline)
  (display (ack 2 9)) (newline)
  (display (sum 10000)) (newline))
`
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	const want = "75025\n7\n21\n50005000\n"
	img := filepath.Join(dir, "kernels.elf")
	if code, _, errOut := runCLI(t, "build", src, "-o", img); code != 0 {
		t.Fatalf("build: %d %s", code, errOut)
	}
	for _, args := range [][]string{{"run", src}, {"run", img}, {"run", "-read", img}} {
		code, out, errOut := runCLI(t, args...)
		if code != 0 || out != want {
			t.Errorf("%v: exit %d, output %q (stderr %q), want %q", args, code, out, errOut, want)
		}
	}
}

// TestRunError: (error ...) ends the run with a non-zero exit, the message
// and a backtrace on stderr.
func TestRunError(t *testing.T) {
	src := filepath.Join(t.TempDir(), "err.scm")
	prog := "(define (check x)\n  (when (> x 2) (error \"too big\" x 99))\n  x)\n(define (main) (check 1) (+ (check 5) 1))\n"
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, "run", src)
	if code != 1 || !strings.Contains(errOut, "error: too big 5 99") ||
		!regexp.MustCompile(`\(check x=5\) +at \S+err\.scm:2:`).MatchString(errOut) ||
		!regexp.MustCompile(`\(main\) +at \S+err\.scm:4:`).MatchString(errOut) {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
}

// TestUsage: errors go to stderr with a non-zero exit; -h documents every
// command.
func TestUsage(t *testing.T) {
	if code, _, errOut := runCLI(t); code != 2 || !strings.Contains(errOut, "Commands:") {
		t.Errorf("no arguments: exit %d, %q", code, errOut)
	}
	if code, _, _ := runCLI(t, "frobnicate"); code != 2 {
		t.Errorf("unknown command: exit %d", code)
	}
	for _, c := range commands {
		code, _, errOut := runCLI(t, c.name, "-h")
		if code != 0 || !strings.Contains(errOut, "Usage: elfimage "+c.name) {
			t.Errorf("%s -h: exit %d, %q", c.name, code, errOut)
		}
	}
	if code, _, errOut := runCLI(t, "run", filepath.Join(t.TempDir(), "missing.elf")); code != 1 || errOut == "" {
		t.Errorf("missing file: exit %d, %q", code, errOut)
	}
	bad := filepath.Join(t.TempDir(), "bad.scm")
	os.WriteFile(bad, []byte("(define (main)\n  (display (+ 1 nope)))\n"), 0o644)
	if code, _, errOut := runCLI(t, "build", bad); code != 1 || !strings.Contains(errOut, "bad.scm:2:") {
		t.Errorf("compile error: exit %d, %q (want file:line:column)", code, errOut)
	}
}

// TestSymbolizeMatchesAddr2line: for the address of every line-table row,
// and for addresses in runtime code without lines and outside any
// procedure, `elfimage symbolize` prints what addr2line -f prints.
func TestSymbolizeMatchesAddr2line(t *testing.T) {
	a2l := tooltest.Require(t, "addr2line")
	dir := t.TempDir()
	if code, _, errOut := runCLI(t, "demo", "-o", dir); code != 0 {
		t.Fatal(errOut)
	}
	path := filepath.Join(dir, "demo.elf")
	im, err := elfimage.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := im.LineTable()
	if err != nil {
		t.Fatal(err)
	}
	// Addresses outside every procedure, then every row's.
	addrs := []string{"0x0", "0x5", "0x100000"}
	for _, s := range tab.Sequences {
		for _, r := range s.Rows {
			addrs = append(addrs, fmt.Sprintf("%#x", r.Address))
		}
	}
	im.Close()
	if len(addrs) < 100 {
		t.Fatalf("only %d addresses", len(addrs))
	}
	code, ours, errOut := runCLI(t, append([]string{"symbolize", "-e", path}, addrs...)...)
	if code != 0 {
		t.Fatal(errOut)
	}
	theirs, err := exec.Command(a2l, append([]string{"-f", "-e", path}, addrs...)...).Output()
	if err != nil {
		t.Fatal(err)
	}
	clean := regexp.MustCompile(` \(discriminator \d+\)`).ReplaceAllString(string(theirs), "")
	ol, tl := strings.Split(ours, "\n"), strings.Split(clean, "\n")
	if len(ol) != len(tl) {
		t.Fatalf("symbolize printed %d lines, addr2line %d", len(ol), len(tl))
	}
	for i := range ol {
		if ol[i] != tl[i] {
			t.Errorf("address %s: symbolize %q, addr2line %q", addrs[i/2], ol[i], tl[i])
		}
	}
	// Addresses from standard input give the same answers.
	stdin, err := os.CreateTemp(t.TempDir(), "addrs")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(stdin, strings.Join(addrs, "\n"))
	stdin.Seek(0, 0)
	saved := os.Stdin
	os.Stdin = stdin
	defer func() { os.Stdin = saved }()
	if code, fromStdin, errOut := runCLI(t, "symbolize", "-e", path); code != 0 || fromStdin != ours {
		t.Errorf("symbolize from stdin: exit %d (%s), output differs from arguments", code, errOut)
	}
}

// TestDump prints every part of an image.
func TestDump(t *testing.T) {
	dir := t.TempDir()
	if code, _, errOut := runCLI(t, "demo", "-o", dir); code != 0 {
		t.Fatal(errOut)
	}
	code, out, errOut := runCLI(t, "dump", filepath.Join(dir, "demo.elf"))
	if code != 0 {
		t.Fatal(errOut)
	}
	// The demo is the running architecture's: its CFA rules at entry and
	// after the frame record is set up, and where the frame pointer and
	// the return address are saved.
	cfi := []string{"cfa=rsp+8", "cfa=rbp+16", "rbp=c-16", "rip=c-8"}
	if runtime.GOARCH == "arm64" {
		cfi = []string{"cfa=sp+0", "cfa=x29+16", "x29=c-16", "x30=c-8"}
	}
	for _, want := range append([]string{"ET_DYN", "  LOAD  ", "  GNU_EH_FRAME  ", "PTProcTable", "loaded at 0x", ".eh_frame_hdr", ".debug_line", "global  fib",
		"demo.scm:", "is_stmt"}, cfi...) {
		if !strings.Contains(out, want) {
			t.Errorf("dump lacks %q", want)
		}
	}
}

// TestRunStackOverflow: unbounded recursion is caught by the generated
// code's stack check; the run fails cleanly and the backtrace shows the
// innermost frames with the arguments each frame really had.
func TestRunStackOverflow(t *testing.T) {
	src := filepath.Join(t.TempDir(), "deep.scm")
	if err := os.WriteFile(src, []byte("(define (down n) (+ 1 (down (+ n 1))))\n(define (main) (down 0))\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, "run", src)
	frames := regexp.MustCompile(`\(down n=(\d+)\) +at \S+deep\.scm:1:`).FindAllStringSubmatch(errOut, -1)
	if code != 1 || !strings.Contains(errOut, "stack overflow") || len(frames) != overflowFrames {
		t.Fatalf("exit %d, %d frames, stderr:\n%s", code, len(frames), errOut)
	}
	for i := 1; i < len(frames); i++ {
		var inner, outer int
		fmt.Sscan(frames[i-1][1], &inner)
		fmt.Sscan(frames[i][1], &outer)
		if inner != outer+1 || outer < 1000 {
			t.Errorf("frame %d has n=%d, its caller n=%d: want consecutive values deep in the recursion", i-1, inner, outer)
		}
	}
}

// TestDescribeAndProcs: describe and dump -procs show what the runtime
// knows: arity with optional arguments and defaults, docstring,
// properties, position and the live variables with their locations;
// dump -info shows the DIE tree with lexical blocks and location lists;
// run -v adds the live variables to backtraces.
func TestDescribeAndProcs(t *testing.T) {
	dir := t.TempDir()
	if code, _, errOut := runCLI(t, "demo", "-o", dir); code != 0 {
		t.Fatal(errOut)
	}
	img := filepath.Join(dir, "demo.elf")
	code, procs, errOut := runCLI(t, "dump", "-procs", img)
	if code != 0 {
		t.Fatal(errOut)
	}
	for _, want := range []string{`(fib n) doc "Return the n-th Fibonacci number, the slow way." inline=#f category="math"`,
		"(sum-to n #:optional (from 1) (step (if (< n from) -1 1)))", "(inner a b)",
		"13 procedures, position index of ", "file " + filepath.Join(dir, "demo.scm"), `category="math" positions: `} {
		if !strings.Contains(procs, want) {
			t.Errorf("dump -procs lacks %q:\n%s", want, procs)
		}
	}
	// The address of inner's (backtrace) call, as the demo's backtrace
	// prints it in brackets.
	code, out, _ := runCLI(t, "demo", "-o", dir)
	m := regexp.MustCompile(`\(inner a=4 b=26\).*\[demo\.elf\+(0x[0-9a-f]+)\]`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("no inner frame in the demo backtrace:\n%s", out)
	}
	for _, want := range []string{"p = 104", "q = 105", "r = 104"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo backtrace lacks the local %q", want)
		}
	}
	code, desc, errOut := runCLI(t, "describe", img, m[1], "0x0")
	if code != 1 || !strings.Contains(desc, "0x0: ") {
		t.Errorf("describe with an unknown address: exit %d, %s %s", code, desc, errOut)
	}
	// p and q live in the first two callee-saved registers the compiler
	// allocates: rbx (3) and r12 (12) on x86-64, x19 and x20 on AArch64.
	p, q := "DW_OP_reg3", "DW_OP_reg12"
	if runtime.GOARCH == "arm64" {
		p, q = "DW_OP_reg19", "DW_OP_reg20"
	}
	for _, want := range []string{"inner+", "demo.scm:33:", "arity: 2 required, 0 optional: (inner a b)",
		`doc: "Innermost frame`, "live parameter a (declared 30:16, depth 0) in DW_OP_fbreg(-40)",
		"live variable p (declared 32:10, depth 1) in " + p, "live variable q (declared 33:13, depth 2) in " + q,
		"live variable r (declared 33:25, depth 3) in DW_OP_fbreg("} {
		if !strings.Contains(desc, want) {
			t.Errorf("describe lacks %q:\n%s", want, desc)
		}
	}
	code, info, errOut := runCLI(t, "dump", "-info", img)
	if code != 0 {
		t.Fatal(errOut)
	}
	for _, want := range []string{"DW_TAG_lexical_block", "DW_TAG_variable", "DW_AT_location               section offset",
		"DW_AT_description", "DW_AT_default_value", "DW_AT_elfimage_default_source \"(if (< n from) -1 1)\""} {
		if !strings.Contains(info, want) {
			t.Errorf("dump -info lacks %q", want)
		}
	}
}

// TestRunPerfMap: run -perf-map announces every procedure at its run-time
// address in /tmp/perf-PID.map, which dump then reads back.
func TestRunPerfMap(t *testing.T) {
	src := filepath.Join(t.TempDir(), "p.scm")
	if err := os.WriteFile(src, []byte("(define (f x) (* x 2))\n(define (main) (display (f 21)))\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI(t, "run", "-perf-map", src); code != 0 || out != "42" {
		t.Fatalf("run -perf-map: exit %d, %q, %s", code, out, errOut)
	}
	path := filepath.Join("/tmp", fmt.Sprintf("perf-%d.map", os.Getpid()))
	defer os.Remove(path)
	code, out, errOut := runCLI(t, "dump", path)
	// Run-time addresses: mmap's, far above the image's link addresses
	// (0x7f... natively, 0x55... under qemu-user).
	if code != 0 || !regexp.MustCompile(`\[0x[0-9a-f]{9,}, 0x[0-9a-f]{9,}\) f\n`).MatchString(out) || !strings.Contains(out, ") main\n") {
		t.Errorf("dump of the perf map: exit %d, %s\n%s", code, errOut, out)
	}
}
