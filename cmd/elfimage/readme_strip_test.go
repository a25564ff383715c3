package main

import (
	"path/filepath"
	"strings"
	"testing"

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
// names eu-strip's debug file and its notes.
func TestREADMEStripRecipes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gdb on a fresh build of the CLI; skipped with -short")
	}
	cmds := readmeSection(t, "Stripped images and debug files")
	dir := t.TempDir()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
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
			want = []string{"0x1024: fib+0x4", "prog.scm:1:", "arity: 1 required", "live parameter n "}
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
			want = []string{"stripped; debug file " + dir + "/eu.debug", "note: " + dir + "/eu.elf: program header 7 (PTLineProgram)", "ignored"}
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
