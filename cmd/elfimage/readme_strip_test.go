package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/elfimage/elfimage/internal/tooltest"
)

// TestREADMEStripRecipes runs the commands of the README's "Stripped
// images and debug files" section as written, from the repository root,
// in bash with standard input closed, /tmp/ replaced by a test
// directory. Each must exit 0 without a warning; run prints fib(10);
// describe of the stripped images gives fib's line and its parameter
// (through the debug file beside them); readelf shows the .gnu_debuglink
// and no .debug_info; gdb reads the lines and scope from the debug file,
// and stops in fib with n = 10 in the image published with run -gdb,
// reading its debug file from the build-ID directory; dump -headers
// names eu-strip's debug file and its notes. The commands of its
// subsection "Serving debug files with debuginfod" run after them as one
// bash script (they share a background server and exported variables)
// in a network namespace with only loopback, so that debuginfod, which
// listens on every interface, is reachable on 127.0.0.1 alone:
// symbolize and describe of the stripped image shipped alone, and gdb,
// get fib's line through the server.
func TestREADMEStripRecipes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gdb on a fresh build of the CLI; skipped with -short")
	}
	skipRecipesEmulated(t)
	cmds := readmeSection(t, "Stripped images and debug files")
	served := recipeCommands(readmeText(t, "### Serving debug files with debuginfod"))
	cmds = cmds[:len(cmds)-len(served)]
	dir, root := recipeDirs(t)
	var seen []string
	for _, c := range cmds {
		c = strings.ReplaceAll(c, "/tmp/", dir+"/")
		tool, _, _ := strings.Cut(c, " ")
		switch tool {
		case "gdb", "readelf", "eu-strip", "go":
			tooltest.Require(t, tool)
		}
		out := runRecipe(t, root, c)
		if strings.Contains(strings.ToLower(out), "warning") {
			t.Errorf("%s: prints a warning:\n%s", c, out)
		}
		var want []string
		switch {
		case strings.Contains(c, "elfimage run ") && tool != "gdb":
			want = []string{"55"}
		case strings.Contains(c, "elfimage describe "):
			want = []string{"0x2024: fib+0x4", "prog.scm:1:", "arity: 1 required", "live parameter n "}
		case tool == "readelf" && strings.Contains(c, " -S "):
			want = []string{".gnu_debuglink", ".elfimage.procs"}
			if strings.Contains(out, ".debug_info") || strings.Contains(out, ".symtab") {
				t.Errorf("%s: the stripped image has symbols or DWARF:\n%s", c, out)
			}
		case tool == "gdb" && strings.Contains(c, "-batch"):
			want = []string{`Line 1 of "` + dir + `/prog.scm"`, "Symbol n is "}
		case tool == "gdb":
			want = []string{"hit Breakpoint 1, fib (n=10) at " + dir + "/prog.scm:1", " n = 10 ", "in main () at " + dir + "/prog.scm:2"}
		case strings.Contains(c, "dump -headers"):
			want = []string{"stripped; debug file " + dir + "/eu.debug", "note: " + dir + "/eu.elf: program header 8 (PTLineProgram)", "ignored"}
		}
		flat := " " + strings.Join(strings.Fields(out), " ") + " "
		for _, w := range want {
			if !strings.Contains(flat, strings.Join(strings.Fields(w), " ")) {
				t.Errorf("%s: output lacks %q", c, w)
			}
		}
		if t.Failed() {
			t.Fatalf("output of %s:\n%s", c, out)
		}
		seen = append(seen, tool)
	}
	t.Logf("ran %d commands: %q", len(seen), seen)
	runServedRecipe(t, root, dir, served)
	for _, w := range []string{"gdb", "eu-strip", "readelf"} {
		n := 0
		for _, s := range seen {
			if s == w {
				n++
			}
		}
		if n == 0 {
			t.Errorf("the README's strip recipes run no %s", w)
		}
	}
}

// runServedRecipe runs the debuginfod recipe cmds (with /tmp/ replaced by
// dir) as one bash script in a loopback-only network namespace, without
// the test's DEBUGINFOD_ variables, and checks what its commands print.
func runServedRecipe(t *testing.T, root, dir string, cmds []string) {
	for _, tool := range []string{"debuginfod", "debuginfod-find", "gdb"} {
		tooltest.Require(t, tool)
	}
	if len(cmds) < 5 {
		t.Fatalf("the debuginfod recipe has %d commands: %q", len(cmds), cmds)
	}
	script := "set -e\n" + strings.ReplaceAll(strings.Join(cmds, "\n"), "/tmp/", dir+"/") + "\n"
	cmd := loopbackCommand(t, "bash", "-c", script)
	cmd.Dir = root
	out, err := tooltest.RunGroup(cmd, 3*time.Minute)
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "debuginfod.log"))
		t.Fatalf("the debuginfod recipe: %v\n%s\ndebuginfod's log:\n%s", err, out, log)
	}
	t.Logf("the debuginfod recipe printed:\n%s", out)
	flat := " " + strings.Join(strings.Fields(out), " ") + " "
	for _, w := range []string{
		"fib " + dir + "/prog.scm:1",           // symbolize
		"0x2024: fib+0x4", "live parameter n ", // describe
		`Line 1 of "` + dir + `/prog.scm"`, // gdb
	} {
		if !strings.Contains(flat, w) {
			t.Errorf("the debuginfod recipe's output lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(strings.ToLower(out), "warning") {
		t.Errorf("the debuginfod recipe prints a warning:\n%s", out)
	}
}
