//go:build linux && amd64

package gdbjit

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/elfimage/elfimage/internal/gdbtest"
	"github.com/elfimage/elfimage/internal/tooltest"
)

var (
	progOnce sync.Once
	progPath string
	progErr  error
	progDir  string
)

// TestMain removes the directory of the built test program.
func TestMain(m *testing.M) {
	code := m.Run()
	if progDir != "" {
		os.RemoveAll(progDir)
	}
	os.Exit(code)
}

// buildProg builds testdata/jitprog with the go command, normally (with
// .symtab and DWARF: go test strips its own test binaries), once per test
// run, and returns its path. It skips the test when no go command is found
// (fails it when CI is set).
func buildProg(t *testing.T) string {
	t.Helper()
	goCmd := tooltest.Require(t, "go")
	progOnce.Do(func() {
		progDir, progErr = os.MkdirTemp("", "gdbjit-test-")
		if progErr != nil {
			return
		}
		progPath, progErr = buildTestdataProg(goCmd, "jitprog")
	})
	if progErr != nil {
		t.Fatal(progErr)
	}
	return progPath
}

// buildTestdataProg builds ./testdata/NAME into progDir with cgo off and
// returns the executable's path.
func buildTestdataProg(goCmd, name string) (string, error) {
	path := filepath.Join(progDir, name)
	cmd := exec.Command(goCmd, "build", "-o", path, "./testdata/"+name)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./testdata/%s: %v\n%s", name, err, out)
	}
	return path, nil
}

// TestSymbolsInSymtab checks, with debug/elf on a normally built program
// that imports the package, that both symbols of the interface are global
// in .symtab under their exact names, once each, with the descriptor
// statically initialised to version 1, and that the descriptor's run-time
// address is its .symtab address (where gdb reads it).
func TestSymbolsInSymtab(t *testing.T) {
	prog := buildProg(t)
	f, syms := tooltest.ELFSymbols(t, prog)
	found := map[string]elf.Symbol{}
	for _, s := range syms {
		if s.Name == "__jit_debug_descriptor" || s.Name == "__jit_debug_register_code" {
			if _, dup := found[s.Name]; dup {
				t.Errorf("%s defined twice in .symtab", s.Name)
			}
			found[s.Name] = s
		}
	}
	d, ok := found["__jit_debug_descriptor"]
	if !ok {
		t.Fatal("__jit_debug_descriptor not in .symtab")
	}
	if elf.ST_BIND(d.Info) != elf.STB_GLOBAL || elf.ST_TYPE(d.Info) != elf.STT_OBJECT || d.Size != 24 {
		t.Errorf("__jit_debug_descriptor: bind %v type %v size %d, want STB_GLOBAL STT_OBJECT 24",
			elf.ST_BIND(d.Info), elf.ST_TYPE(d.Info), d.Size)
	}
	// The static initialisation, in the file, as gdb reads it before the
	// program runs.
	sec := f.Sections[d.Section]
	if sec.Type != elf.SHT_PROGBITS || sec.Flags&elf.SHF_WRITE == 0 {
		t.Errorf("__jit_debug_descriptor in %s (%v, %v), want a writable PROGBITS section", sec.Name, sec.Type, sec.Flags)
	}
	data, err := sec.Data()
	if err != nil {
		t.Fatal(err)
	}
	init := data[d.Value-sec.Addr:][:24]
	if want := append([]byte{1, 0, 0, 0}, make([]byte, 20)...); !bytes.Equal(init, want) {
		t.Errorf("__jit_debug_descriptor initialised to % x, want % x", init, want)
	}
	r, ok := found["__jit_debug_register_code"]
	if !ok {
		t.Fatal("__jit_debug_register_code not in .symtab")
	}
	if elf.ST_BIND(r.Info) != elf.STB_GLOBAL || elf.ST_TYPE(r.Info) != elf.STT_FUNC {
		t.Errorf("__jit_debug_register_code: bind %v type %v, want STB_GLOBAL STT_FUNC", elf.ST_BIND(r.Info), elf.ST_TYPE(r.Info))
	}
	text := f.Section(".text")
	code, err := text.Data()
	if err != nil {
		t.Fatal(err)
	}
	if b := code[r.Value-text.Addr]; b != 0xc3 {
		t.Errorf("__jit_debug_register_code starts with %#x, want RET (0xc3)", b)
	}
	out, err := exec.Command(prog, "addr").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != fmt.Sprintf("%#x", d.Value) {
		t.Errorf("DescriptorAddr() = %s at run time, .symtab says %#x", got, d.Value)
	}
}

// gdbTimeout bounds one gdbRun; the registration benchmarks raise it.
var gdbTimeout = 60 * time.Second

// gdbRun runs gdb in batch mode on target (a program, or -p PID) with
// each of cmds (a gdbtest.Session without the image hook script, thread
// events not printed) and returns what each command printed (standard
// output and error merged) and the whole output. It fails the test when
// gdb times out or stops before the last command; an error in the last
// command is the caller's to judge (gdbtest.Session.LastMayFail).
func gdbRun(t *testing.T, gdb string, target []string, cmds []string) ([]string, string) {
	t.Helper()
	s := &gdbtest.Session{GDB: gdb, Args: append([]string{"-iex", "set print thread-events off"}, target...),
		Cmds: cmds, NoScript: true, LastMayFail: true, Timeout: gdbTimeout}
	r := gdbtest.MustRun(t, s)
	return r.Blocks, r.Output
}

func mustContain(t *testing.T, what, block, want string) {
	t.Helper()
	if !strings.Contains(block, want) {
		t.Errorf("%s: output lacks %q:\n%s", what, want, block)
	}
}

// TestGDBBreakBeforeCode runs testdata/jitprog under gdb: a breakpoint on
// jitfunc set before the code exists fires when the code runs, the
// backtrace names it with its file and line, the line table is the one
// registered, and after Unregister gdb no longer knows the address.
func TestGDBBreakBeforeCode(t *testing.T) {
	gdb := tooltest.Require(t, "gdb")
	prog := buildProg(t)
	cmds := []string{
		0:  "break jitfunc",
		1:  "break main.afterUnregister",
		2:  "run run",
		3:  "bt",
		4:  "info symbol $pc",
		5:  "info line *$pc",
		6:  "info line jitfunc2",
		7:  "info symbol 'main.jitAddr'",
		8:  "stepi",
		9:  "info line *$pc",
		10: "continue",
		11: "info symbol main.jitAddr",
		12: "info line jitfunc",
		13: "delete",
		14: "continue",
	}
	b, all := gdbRun(t, gdb, []string{prog}, cmds)
	if t.Failed() {
		return
	}
	m := regexp.MustCompile(`jitprog: code at (0x[0-9a-f]+)`).FindStringSubmatch(all)
	if m == nil {
		t.Fatalf("program did not print its code address:\n%s", all)
	}
	addr, _ := strconv.ParseUint(m[1][2:], 16, 64)

	mustContain(t, "break jitfunc", b[0], "Breakpoint 1 (jitfunc) pending.")
	mustContain(t, "run", b[2], "hit Breakpoint 1, jitfunc () at /jit/gdbjit/jitfunc.src:10")
	frames := gdbtest.Frames(b[3])
	if len(frames) < 2 {
		t.Fatalf("bt: %d frames:\n%s", len(frames), b[3])
	}
	if f := frames[0]; f.Func != "jitfunc" || f.File != "/jit/gdbjit/jitfunc.src" || f.Line != 10 {
		t.Errorf("bt frame 0 = %+v, want jitfunc at /jit/gdbjit/jitfunc.src:10", f)
	}
	// gdb unwound out of the JIT code (no CFI: its prologue analyser) into
	// the Go trampoline that called it.
	if f := frames[1]; f.Func != "github.com/elfimage/elfimage/native.trampoline" {
		t.Errorf("bt frame 1 = %+v, want native.trampoline", f)
	}
	mustContain(t, "info symbol $pc", b[4], "jitfunc in section .text")
	if strings.Count(b[4], "jitfunc in section") != 1 {
		t.Errorf("info symbol $pc: the symbol file is registered more than once:\n%s", b[4])
	}
	mustContain(t, "info line *$pc", b[5], fmt.Sprintf(`Line 10 of "/jit/gdbjit/jitfunc.src" starts at address %#x <jitfunc>`, addr))
	mustContain(t, "info line jitfunc2", b[6], fmt.Sprintf(`Line 20 of "/jit/gdbjit/jitfunc.src" starts at address %#x <jitfunc2>`, addr+16))
	mustContain(t, "info symbol jitAddr (registered)", b[7], "jitfunc in section .text")
	mustContain(t, "info line after stepi", b[9], fmt.Sprintf(`Line 11 of "/jit/gdbjit/jitfunc.src" starts at address %#x <jitfunc+5>`, addr+5))
	mustContain(t, "continue", b[10], "jitprog: jitfunc returned 42")
	mustContain(t, "continue", b[10], "hit Breakpoint 2, main.afterUnregister")
	mustContain(t, "info symbol jitAddr (unregistered)", b[11], "No symbol matches main.jitAddr.")
	mustContain(t, "info line jitfunc (unregistered)", b[12], `Function "jitfunc" not defined.`)
	mustContain(t, "last continue", b[14], "jitprog: done")
	if t.Failed() {
		t.Logf("gdb output:\n%s", all)
	}
}

// TestGDBAttach starts testdata/jitprog, which registers three symbol
// files in one batch and unregisters the middle one, then attaches gdb to
// the running process: gdb walks the list from first_entry and finds the
// two registered procedures, not the unregistered one.
func TestGDBAttach(t *testing.T) {
	gdb := tooltest.Require(t, "gdb")
	prog := buildProg(t)
	cmd := exec.Command(prog, "wait")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	line := tooltest.StartLine(t, cmd)
	var a, b, c uint64
	if _, err := fmt.Sscanf(line, "ready %v %v %v", &a, &b, &c); err != nil {
		t.Fatalf("ready line %q: %v", line, err)
	}
	cmds := []string{
		fmt.Sprintf("info symbol %#x", a),
		fmt.Sprintf("info symbol %#x", b),
		fmt.Sprintf("info symbol %#x", c),
		"info line jitC",
		"detach",
	}
	blocks, all := gdbRun(t, gdb, []string{"-p", strconv.Itoa(cmd.Process.Pid)}, cmds)
	mustContain(t, "info symbol A", blocks[0], "jitA in section .text")
	mustContain(t, "info symbol B", blocks[1], fmt.Sprintf("No symbol matches %#x.", b))
	mustContain(t, "info symbol C", blocks[2], "jitC in section .text")
	mustContain(t, "info line jitC", blocks[3], fmt.Sprintf(`Line 32 of "/jit/gdbjit/jitfunc.src" starts at address %#x <jitC>`, c))
	if t.Failed() {
		t.Logf("gdb output:\n%s", all)
	}
}
