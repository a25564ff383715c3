package main

// The bf command as its users run it, and its images as the tools see
// them: readelf, llvm-dwarfdump, gdb, lldb and perf.

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/internal/gdbtest"
	"github.com/elfimage/elfimage/internal/lldbtest"
	"github.com/elfimage/elfimage/internal/qemutest"
	"github.com/elfimage/elfimage/internal/readelf"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// bfProg is the bf command, built once per test binary.
var bfProg = tooltest.GoProgram{Pkg: ".", Name: "bf"}

// bfCommand returns the path of the bf command, built with go build (a
// normal binary, with its symbol table and DWARF, which the debuggers
// need).
func bfCommand(t *testing.T) string {
	t.Helper()
	return bfProg.Path(t)
}

func TestMain(m *testing.M) {
	code := m.Run()
	bfProg.Remove()
	os.Exit(code)
}

// testdata is the absolute path of the test programs' directory.
func testdata(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// runBF runs the bf command in dir with args and stdin, with a timeout.
func runBF(t *testing.T, dir, stdin string, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := qemutest.Command(ctx, t, bfCommand(t), args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		status = exit.ExitCode()
	default:
		t.Fatalf("bf %v: %v", args, err)
	}
	return o.String(), e.String(), status
}

// TestCommand runs the bf command on standard input and output: programs
// print, read, fail with positions; usage errors exit with 2.
func TestCommand(t *testing.T) {
	t.Parallel()
	td := testdata(t)
	dir := t.TempDir()
	other := "arm64" // the machine that is not this one
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	for name, src := range map[string]string{"left.b": "<", "bad.b": "+[", "hi.b": "+[+[>+<-]>.<]"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		dir, stdin string
		args       []string
		out, err   string
		status     int
	}{
		{td, "", []string{"hello.b"}, "Hello, World!\n", "", 0},
		{td, "", []string{"-fold=false", "numbers.b"}, string(numbers()), "", 0},
		{td, "one\ntwo\n", []string{"rev.b"}, "\nowt\neno", "", 0},
		{td, "abc", []string{"-eof", "keep", "-o", filepath.Join(dir, "cat.elf"), "cat.b"}, "", "", 0},
		{dir, "", []string{"left.b"}, "", "bf: left.b:1:1: the data pointer left the tape\n", 1},
		{dir, "", []string{"bad.b"}, "", "bf: bad.b:1:2: [ without a matching ]\n", 1},
		{dir, "", []string{"missing.b"}, "", "bf: open missing.b: no such file or directory\n", 1},
		{dir, "", []string{}, "", "usage: bf [flags] PROG.b", 2},
		{dir, "", []string{"-eof", "256", "hi.b"}, "", "bf: -eof \"256\": want 0 to 255, or keep\n", 2},
		{dir, "", []string{"-arch", "riscv64", "hi.b"}, "", "bf: -arch \"riscv64\": want amd64 (x86-64) or arm64 (aarch64)\n", 2},
		{dir, "", []string{"-arch", other, "hi.b"}, "", "bf: -arch " + other + ": code for another machine than this one (" + arch.ForGOARCH(runtime.GOARCH).Name + ") can only be written to an image (-o)\n", 2},
		{td, "", []string{"-arch", runtime.GOARCH, "hello.b"}, "Hello, World!\n", "", 0},
	} {
		out, errOut, status := runBF(t, tc.dir, tc.stdin, tc.args...)
		if out != tc.out || !strings.HasPrefix(errOut, tc.err) || (tc.err == "" && errOut != "") || status != tc.status {
			t.Errorf("bf %v: stdout %.100q, stderr %q, status %d; want %.100q, %q, %d", tc.args, out, errOut, status, tc.out, tc.err, tc.status)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "cat.elf")); err != nil || !bytes.HasPrefix(b, []byte(elf.ELFMAG)) {
		t.Errorf("-o wrote no image: %v", err)
	}

	// A write error on standard output names the command.
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		tooltest.Skip(t, "no /dev/full: %v", err)
	}
	defer full.Close()
	var stderr bytes.Buffer
	cmd := qemutest.Command(context.Background(), t, bfCommand(t), "hello.b")
	cmd.Dir, cmd.Stdout, cmd.Stderr = td, full, &stderr
	if err := cmd.Run(); err == nil || stderr.String() != "bf: hello.b:6:4: write: no space left on device\n" {
		t.Errorf("hello.b > /dev/full: %v, stderr %q", err, stderr.String())
	}
}

// writeImages writes the image of every test program for the machine
// goarch with -o -arch into a temporary directory and returns the image
// paths by program name.
func writeImages(t *testing.T, goarch string) map[string]string {
	t.Helper()
	files, _ := filepath.Glob("testdata/*.b")
	dir := t.TempDir()
	images := map[string]string{}
	for _, f := range files {
		name := filepath.Base(f)
		img := filepath.Join(dir, ProcName(name)+".elf")
		if _, errOut, status := runBF(t, testdata(t), "", "-arch", goarch, "-o", img, name); status != 0 {
			t.Fatalf("bf -o %s: %s", img, errOut)
		}
		images[name] = img
	}
	return images
}

// TestImagesVerify: for x86-64 and AArch64 (written by bf -arch -o on any
// host), llvm-dwarfdump --verify finds nothing wrong in the images, and
// readelf -wF reads the same CFA table as package frame (whose rows the
// CFI simulations check) for every row of the procedure.
func TestImagesVerify(t *testing.T) {
	t.Parallel()
	for _, goarch := range []string{"amd64", "arm64"} {
		t.Run(goarch, func(t *testing.T) { testImagesVerify(t, goarch) })
	}
}

func testImagesVerify(t *testing.T, goarch string) {
	dwarfdump := tooltest.Require(t, "llvm-dwarfdump")
	tooltest.Require(t, "readelf")
	a := arch.ForGOARCH(goarch)
	regName := a.RegName
	regs := []arch.Reg{arch.X86_64_RBP, arch.X86_64_RBX, arch.X86_64_R12}
	if a == arch.X86_64 {
		regName = func(r arch.Reg) string { return readelf.X86_64RegName(int(r)) }
	} else {
		regs = []arch.Reg{arch.AArch64_FP, 19, 20}
	}
	for name, path := range writeImages(t, goarch) {
		out, err := exec.Command(dwarfdump, "--verify", path).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "No errors.") {
			t.Errorf("llvm-dwarfdump --verify %s: %v\n%s", name, err, out)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text, stderr := readelf.Run(t, raw, "-wF")
		if stderr != "" {
			t.Errorf("readelf -wF %s: %s", name, stderr)
		}
		entries, err := readelf.ParseFramesInterp(text)
		if err != nil {
			t.Fatal(err)
		}
		l, err := readImage(raw, ProcName(name))
		if err != nil {
			t.Fatal(err)
		}
		f, _ := elf.NewFile(bytes.NewReader(raw))
		eh := f.Section(".eh_frame")
		ehData, _ := eh.Data()
		sec := frame.NewEHFrame(ehData, eh.Addr, binary.LittleEndian, 8)
		if f.Machine != a.Machine {
			t.Fatalf("%s: machine %v, want %v", name, f.Machine, a.Machine)
		}
		fdes := 0
		for _, ent := range entries {
			if ent.IsCIE {
				continue
			}
			fdes++
			fde, err := sec.FDEAt(ent.Offset)
			if err != nil {
				t.Fatal(err)
			}
			if fde.Start != l.addr || ent.PCBegin != l.addr || ent.PCEnd != l.addr+uint64(len(l.code)) {
				t.Errorf("%s: readelf's FDE covers [%#x, %#x), the procedure [%#x, %#x)", name, ent.PCBegin, ent.PCEnd, l.addr, l.addr+uint64(len(l.code)))
			}
			for _, row := range ent.Rows {
				ours := l.row(row.Loc)
				if ours == nil || ours.Loc != row.Loc {
					t.Errorf("%s: readelf has a row at %#x, package frame does not", name, row.Loc)
					continue
				}
				want := map[string]string{"CFA": ours.CFA.Format(regName), "ra": ours.Rule(a.RA).Format(regName)}
				for _, r := range regs {
					want[regName(r)] = ours.Rule(r).Format(regName)
				}
				for col, w := range want {
					got, ok := row.Cols[col]
					if !ok {
						got = "u" // readelf leaves out columns never set
					}
					if got != w {
						t.Errorf("%s: at %#x readelf shows %s %s, package frame %s", name, row.Loc, col, got, w)
					}
				}
			}
			// x86-64: entry, 4 prologue rows, 3 epilogue rows, the
			// stubs'; AArch64: entry, 3 prologue rows, 2 epilogue rows,
			// the stubs'.
			if minRows := map[string]int{"amd64": 8, "arm64": 7}[goarch]; len(ent.Rows) < minRows {
				t.Errorf("%s: readelf shows only %d rows", name, len(ent.Rows))
			}
		}
		if fdes != 1 {
			t.Errorf("%s: readelf shows %d FDEs, want 1", name, fdes)
		}
	}
}

// TestGDB runs hello.b under gdb with -gdb: a breakpoint on hello.b:8 set
// before the code exists stops at the line's first command, p *vm prints
// the structure by member, the cells and the locals hold what the program
// computed so far, and bt goes through the library's entry frame into
// the Go frames down to main.main, every frame named.
func TestGDB(t *testing.T) {
	t.Parallel()
	if why := qemutest.Emulated(); why != "" {
		t.Skipf("%s: gdb runs the program natively; the AArch64 session is TestGDBMultiarchAArch64, gdb-multiarch against qemu-aarch64 -g", why)
	}
	gdb := tooltest.Require(t, "gdb")
	prog := bfCommand(t)
	cmds := []string{
		"break hello.b:8",
		"run -gdb hello.b",
		"p *vm",
		"p vm->cells[0]@8",
		"p/d vm->cells[0]@8",
		"p vm->data - vm->cells",
		"info locals",
		"bt",
		"info line *$pc",
		"continue",
	}
	s := &gdbtest.Session{GDB: gdb, Program: prog, Dir: testdata(t), Cmds: cmds, NoScript: true, Timeout: 2 * time.Minute}
	r := gdbtest.MustRun(t, s)
	defer func() {
		if t.Failed() {
			t.Logf("gdb session:\n%s", r.Output)
		}
	}()
	// Cells 0 to 4 at line 8: the counter, H, e and the two seeds 30, 10;
	// the pointer at cell 2 (e).
	for cmd, wants := range map[string][]string{
		"run -gdb hello.b":       {"Breakpoint 1, hello (vm=0x", ") at hello.b:8\n8\t+++++++.."},
		"p *vm":                  {"{data = 0x", `in = 0, out = 1, errno = 0, cells = "\000He\036\n", '\000' <repeats 2999`},
		"p vm->cells[0]@8":       {`= "\000He\036\n\000\000"`},
		"p/d vm->cells[0]@8":     {"= {0, 72, 101, 30, 10, 0, 0, 0}"},
		"p vm->data - vm->cells": {"= 2"},
		"info locals":            {"cell = 101 'e'", "index = 2"},
		"info line *$pc":         {`Line 8 of "hello.b" starts at address`},
		"continue":               {"exited normally"},
	} {
		for _, w := range wants {
			if !strings.Contains(r.Block(t, cmd), w) {
				t.Errorf("%s: gdb printed\n%s\nwithout %q", cmd, r.Block(t, cmd), w)
			}
		}
	}
	if !regexp.MustCompile(`(?s)He.*Breakpoint 1.*llo, World!\n`).MatchString(r.Output) {
		t.Errorf("the program's output is not He, then the breakpoint, then llo, World!")
	}
	bt := r.Block(t, "bt")
	fs := gdbtest.Frames(bt)
	if len(fs) < 4 || fs[0].Func != "hello" || fs[0].File != "hello.b" || fs[0].Line != 8 {
		t.Errorf("bt does not start at hello at hello.b:8:\n%s", bt)
	}
	if !strings.Contains(bt, "#1  <signal handler called>\n") {
		t.Errorf("bt: frame 1 is not the entry frame (<signal handler called>, see elfimage.EntryImage):\n%s", bt)
	}
	if len(fs) == 0 || fs[len(fs)-1].Func != "main.main" {
		t.Errorf("bt does not reach main.main:\n%s", bt)
	}
	if strings.Contains(bt, "??") || strings.Contains(bt, "Backtrace stopped") {
		t.Errorf("bt has an unnamed frame or stopped:\n%s", bt)
	}
}

// TestLLDB runs hello.b under lldb-19 with -gdb (lldb's GDB JIT loader
// reads the published image): the breakpoint on hello.b:8 stops there,
// frame variable shows vm, cell and index with their types, *vm by
// member, and bt reaches main.main with every frame named.
func TestLLDB(t *testing.T) {
	t.Parallel()
	if why := qemutest.Emulated(); why != "" {
		t.Skipf("%s: lldb runs the program natively; the AArch64 session is TestLLDBAArch64, lldb against qemu-aarch64 -g", why)
	}
	lldb := tooltest.Require(t, lldbtest.Names...)
	prog := bfCommand(t)
	cmds := []string{
		"breakpoint set -f hello.b -l 8",
		"run",
		"frame variable",
		"frame variable *vm",
		"frame variable vm->cells[1] vm->cells[2]",
		"bt",
		"continue",
	}
	s := &lldbtest.Session{LLDB: lldb, Program: prog, Args: []string{"-gdb", "hello.b"}, Dir: testdata(t), Cmds: cmds, Timeout: 2 * time.Minute}
	r := lldbtest.MustRun(t, s)
	defer func() {
		if t.Failed() {
			t.Logf("lldb session:\n%s", r.Output)
		}
	}()
	if !strings.Contains(r.Blocks[1], "stop reason = breakpoint 1.1") {
		t.Fatalf("lldb did not stop at the breakpoint:\n%s", r.Blocks[1])
	}
	checkLLDBVars(t, r.Blocks[2])
	for _, w := range []string{"in = 0", "out = 1", "errno = 0", `cells = "\0He`} {
		if !strings.Contains(r.Blocks[3], w) {
			t.Errorf("frame variable *vm: no %q in\n%s", w, r.Blocks[3])
		}
	}
	if !strings.Contains(r.Blocks[4], "vm->cells[1] = 'H'") || !strings.Contains(r.Blocks[4], "vm->cells[2] = 'e'") {
		t.Errorf("frame variable vm->cells[1] vm->cells[2]:\n%s", r.Blocks[4])
	}
	fs := lldbtest.Frames(r.Blocks[5])
	if len(fs) < 3 || fs[0].Func != "hello" || fs[0].File != "hello.b" || fs[0].Line != 8 || fs[1].Func != elfimage.EntryName {
		t.Errorf("bt does not start with hello at hello.b:8 and %s:\n%s", elfimage.EntryName, r.Blocks[5])
	}
	reached := false
	for _, f := range fs {
		if f.Func == "" {
			t.Errorf("frame #%d has no name:\n%s", f.Num, r.Blocks[5])
		}
		reached = reached || f.Func == "main.main"
	}
	if !reached {
		t.Errorf("bt does not reach main.main:\n%s", r.Blocks[5])
	}
	if !strings.Contains(r.Output, "llo, World!") {
		t.Errorf("the program's output is missing")
	}
}

// perfRun runs perf in home with HOME set to it (tooltest.PerfOutput) and
// returns its standard output.
func perfRun(t *testing.T, perf, home string, args ...string) string {
	t.Helper()
	return tooltest.PerfOutput(t, perf, home, nil, args...)
}

// checkLLDBVars checks LLDB's frame variable at the stop at hello.b:8 of
// hello.b (block): the current cell is 'e' at index 2, and vm is a
// pointer.
func checkLLDBVars(t *testing.T, block string) {
	t.Helper()
	vars := lldbtest.Vars(block)
	for name, want := range map[string]lldbtest.Var{
		"cell":  {Type: "unsigned char", Value: "'e'"},
		"index": {Type: "long", Value: "2"},
	} {
		if vars[name] != want {
			t.Errorf("frame variable %s: %+v, want %+v", name, vars[name], want)
		}
	}
	if v := vars["vm"]; v.Type != "vm *" || !strings.HasPrefix(v.Value, "0x") {
		t.Errorf("frame variable vm: %+v", v)
	}
}

// reportRE is one line of perf report --stdio: overhead, [.] and the
// symbol, then the source line with --sort sym,srcline.
var reportRE = regexp.MustCompile(`(?m)^\s+([0-9.]+)%\s+\[\.\]\s+(\S+)\s*(\S*)$`)

// TestPerf records busy.b with perf, the code announced with -perf-map
// and with -jitdump: perf report names the procedure busy for most
// samples, jitdump also gives their source lines, and frame-pointer call
// chains go from busy through the entry frame into main.main.
func TestPerf(t *testing.T) {
	t.Parallel()
	if why := qemutest.Emulated(); why != "" {
		t.Skipf("%s: perf does not sample code qemu-user translates", why)
	}
	perf := tooltest.Require(t, "perf")
	prog := bfCommand(t)
	busy := filepath.Join(testdata(t), "busy.b")
	home := t.TempDir()
	probe := filepath.Join(home, "probe.data")
	if out, err := tooltest.RunTool(t, exec.Command(perf, "record", "-e", "cpu-clock", "-N", "-q", "-o", probe, "--", "true"), 2*time.Minute); err != nil {
		tooltest.Skip(t, "perf cannot record here (perf_event_open refused?): %v\n%s", err, out)
	}
	busyShare := func(report string, srcline bool) float64 {
		share := 0.0
		for _, m := range reportRE.FindAllStringSubmatch(report, -1) {
			if m[2] == "busy" && (!srcline || strings.HasPrefix(m[3], "busy.b:")) {
				v, _ := strconv.ParseFloat(m[1], 64)
				share += v
			}
		}
		return share
	}

	t.Run("perf-map", func(t *testing.T) {
		data := filepath.Join(home, "map.data")
		if out := perfRun(t, perf, home, "record", "-e", "cpu-clock", "-N", "-q", "-g", "-o", data, "--", prog, "-perf-map", busy); out != "ok\n" {
			t.Fatalf("busy.b printed %q", out)
		}
		// The map stays for perf report; remove it after.
		pid := strings.TrimSpace(strings.SplitN(perfRun(t, perf, home, "script", "-i", data, "-F", "pid"), "\n", 2)[0])
		defer os.Remove("/tmp/perf-" + pid + ".map")
		report := perfRun(t, perf, home, "report", "-i", data, "--stdio", "--no-children", "--sort", "sym", "-g", "none")
		if s := busyShare(report, false); s < 50 {
			t.Errorf("perf report gives busy %.1f%% of the samples, want most:\n%s", s, report)
		}
		script := perfRun(t, perf, home, "script", "-i", data, "-F", "ip,sym")
		chains, good := 0, 0
		for _, c := range strings.Split(script, "\n\n") {
			var syms []string // "ADDRESS SYMBOL" per frame, innermost first
			for _, l := range strings.Split(strings.TrimSpace(c), "\n") {
				if f := strings.Fields(l); len(f) == 2 {
					syms = append(syms, f[1])
				}
			}
			if len(syms) == 0 || syms[0] != "busy" {
				continue
			}
			chains++
			if len(syms) > 2 && syms[1] == elfimage.EntryName && slices.Contains(syms, "main.main") {
				good++
			}
		}
		if chains == 0 || good*10 < chains*8 {
			t.Errorf("%d of %d call chains from busy go through %s to main.main, want 80%%:\n%.2000s", good, chains, elfimage.EntryName, script)
		}
	})

	t.Run("jitdump", func(t *testing.T) {
		dir := filepath.Join(home, "jit")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		data, injected := filepath.Join(dir, "perf.data"), filepath.Join(dir, "perf.inj.data")
		if out := perfRun(t, perf, home, "record", "-e", "cpu-clock", "-N", "-q", "-k", "1", "-o", data, "--", prog, "-jitdump="+dir, busy); out != "ok\n" {
			t.Fatalf("busy.b printed %q", out)
		}
		perfRun(t, perf, home, "inject", "--jit", "-i", data, "-o", injected)
		report := perfRun(t, perf, home, "report", "-i", injected, "--stdio", "--sort", "sym,srcline")
		if s := busyShare(report, true); s < 50 {
			t.Errorf("perf report gives busy at busy.b lines %.1f%% of the samples, want most:\n%s", s, report)
		}
	})
}
