package publish_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/elfimage/elfimage/internal/qemutest"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// gdbJITSymbols are the symbols gdb looks for to find the GDB JIT
// interface (GDB manual, "JIT Compilation Interface").
var gdbJITSymbols = []string{"__jit_debug_register_code", "__jit_debug_descriptor"}

// TestLoadOnlyLinksNoGDBJIT: dependencies point one way. A program that
// only links and loads an image (testdata/loadonly) does not link the GDB
// JIT interface, so gdb finds no JIT descriptor in it; one that publishes
// (testdata/publishes) does. Both are built with go build and their
// symbol tables read with go tool nm; both are run.
func TestLoadOnlyLinksNoGDBJIT(t *testing.T) {
	goTool := tooltest.Require(t, "go")
	dir := t.TempDir()
	for _, c := range []struct {
		prog    string
		present bool
		output  string
	}{
		{"loadonly", false, "f <nil>\n"},
		{"publishes", true, "true\n"},
	} {
		exe := filepath.Join(dir, c.prog)
		build := exec.Command(goTool, "build", "-o", exe, "./testdata/"+c.prog)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build ./testdata/%s: %v\n%s", c.prog, err, out)
		}
		out, err := exec.Command(goTool, "tool", "nm", exe).CombinedOutput()
		if err != nil {
			t.Fatalf("go tool nm %s: %v\n%s", c.prog, err, out)
		}
		syms := map[string]bool{}
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) >= 3 {
				syms[f[len(f)-1]] = true
			}
		}
		if !syms["main.main"] {
			t.Fatalf("%s: go tool nm lists no main.main; output:\n%.2000s", c.prog, out)
		}
		for _, s := range gdbJITSymbols {
			if syms[s] != c.present {
				t.Errorf("%s: symbol %s present %v, want %v", c.prog, s, syms[s], c.present)
			}
		}
		// Built for the test's GOARCH: under qemu-user, run by qemu-aarch64.
		run, err := tooltest.RunTool(t, qemutest.Command(context.Background(), t, exe), 2*time.Minute)
		if err != nil || run != c.output {
			t.Errorf("%s: ran with %v, output %q; want %q", c.prog, err, run, c.output)
		}
	}
}
