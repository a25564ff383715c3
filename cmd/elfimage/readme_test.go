package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/elfimage/elfimage/internal/lldbtest"
	"github.com/elfimage/elfimage/internal/qemutest"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// readmeSection returns the commands of the code blocks (lines indented
// by four spaces) of the README section whose heading is title, as a user
// pastes them into a shell: continuation lines joined, comments and blank
// lines dropped.
func readmeSection(t *testing.T, title string) []string {
	t.Helper()
	return recipeCommands(readmeText(t, "## "+title))
}

// readmeText returns the text of the README under the heading line
// heading ("## Title" for a section, "### Title" for a subsection), up to
// the next section heading ("## ").
func readmeText(t *testing.T, heading string) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no heading %q", heading)
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	return sec
}

// recipeDirs returns the directories of a test that runs README
// commands: dir, a test directory that stands for the commands' /tmp/,
// and root, the repository root (absolute) they run from.
func recipeDirs(t *testing.T) (dir, root string) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return t.TempDir(), root
}

// recipeCommands returns the commands of the code blocks of the README
// text sec, as readmeSection does.
func recipeCommands(sec string) []string {
	var cmds []string
	cur := ""
	for _, line := range strings.Split(sec, "\n") {
		code, ok := strings.CutPrefix(line, "    ")
		if !ok {
			continue
		}
		code = strings.TrimSpace(code)
		if cur == "" && (code == "" || strings.HasPrefix(code, "#")) {
			continue
		}
		if c, more := strings.CutSuffix(code, `\`); more {
			cur += c
			continue
		}
		cmds = append(cmds, cur+code)
		cur = ""
	}
	return cmds
}

// TestREADMEDebuggerRecipes runs the commands of the README's "Debuggers
// and profilers" section as written, from the repository root, in bash
// with standard input closed (the debuggers run their -ex/-o commands,
// then quit at the end of input), /tmp/ replaced by a test directory.
// Each must exit 0 and print no warning but LLDB's for a breakpoint that
// is pending; the gdb recipe must stop in fib with n = 10 and unwind to
// main.main, each LLDB recipe the same in LLDB's words, never stopping on
// SIGURG; the stack recipes (a live process, a gcore of it) must show the
// spinning thread from spin to main.main.
func TestREADMEDebuggerRecipes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gdb and lldb-19 on a fresh build of the CLI; skipped with -short")
	}
	skipRecipesEmulated(t)
	cmds := readmeSection(t, "Debuggers and profilers")
	dir, root := recipeDirs(t)
	var ngdb, nlldb int
	for _, c := range cmds {
		c = strings.ReplaceAll(c, "/tmp/", dir+"/")
		tool, _, _ := strings.Cut(c, " ")
		switch tool {
		case "gdb":
			tooltest.Require(t, "gdb")
			ngdb++
		case "lldb-19":
			tooltest.Require(t, lldbtest.Names...)
			nlldb++
		case "go":
			tooltest.Require(t, "go")
		}
		if strings.Contains(c, "gcore ") {
			tooltest.Require(t, "gcore")
		}
		out := runRecipe(t, root, c)
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(strings.ToLower(line), "warning") && !(tool == "lldb-19" && line == "WARNING:  Unable to resolve breakpoint to any actual locations.") {
				t.Errorf("%s: prints a warning: %q", c, line)
			}
		}
		var want []string
		if strings.Contains(c, "elfimage stack") {
			// stack PID, stack --core of a gcore: the spinning thread
			// with its argument, through the stack switch to main.main.
			want = []string{" in spin (n=", " in elfimage.entry () (signal frame) [jit@", " in main.main () at "}
		}
		switch tool {
		case "gdb":
			want = []string{"hit Breakpoint 1, fib (n=10) at " + dir + "/prog.scm:1", " n = 10 ",
				"in main () at " + dir + "/prog.scm:2", " in main.main () at "}
		case "lldb-19":
			want = []string{"1 location added to breakpoint 1", "stop reason = breakpoint 1.1",
				"`fib(n=10) at prog.scm:1:17", "`main at prog.scm:2:25", "elfimage`main.main at main.go:", " (long) n = 10 "}
			if strings.Contains(out, "stop reason = signal SIGURG") {
				t.Errorf("%s: LLDB stopped on SIGURG", c)
			}
		}
		// gdb wraps long lines at 80 columns when not on a terminal:
		// compare with every run of white space made one space.
		flat := " " + strings.Join(strings.Fields(out), " ") + " "
		for _, w := range want {
			if !strings.Contains(flat, strings.Join(strings.Fields(w), " ")) {
				t.Errorf("%s: output lacks %q", c, w)
			}
		}
		if t.Failed() {
			t.Fatalf("output of %s:\n%s", c, out)
		}
	}
	nstack := 0
	for _, c := range cmds {
		if strings.Contains(c, "elfimage stack") {
			nstack++
		}
	}
	if ngdb < 1 || nlldb < 2 || nstack < 2 {
		t.Errorf("README recipes: %d gdb, %d lldb-19 and %d stack commands, want at least 1, 2 (run -jit -gdb and run -gdb FILE) and 2 (PID, --core):\n%q", ngdb, nlldb, nstack, cmds)
	}
}

// skipRecipesEmulated skips t, a test of README commands that run
// programs under gdb (and lldb-19 or perf), when the test binary runs
// under qemu-user (qemutest.Emulated): the commands are the host's, and
// go run and go build in them build the CLI for the test's GOARCH
// (arm64), which the host's debuggers cannot run (ptrace of a program the
// kernel cannot execute). The native test run runs them.
func skipRecipesEmulated(t *testing.T) {
	t.Helper()
	if why := qemutest.Emulated(); why != "" {
		t.Skipf("%s: the README's commands run the CLI built for arm64 under the host's gdb (ptrace), which qemu-user does not emulate", why)
	}
}

// runRecipe runs one shell command line in dir with bash, standard input
// closed, the environment entries env (KEY=VALUE) added to the test's, and
// returns its output (standard output and error merged); a non-zero exit
// or a run over 2 minutes fails the test.
func runRecipe(t *testing.T, dir, line string, env ...string) string {
	t.Helper()
	cmd := exec.Command(tooltest.Require(t, "bash"), "-c", line)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := tooltest.RunGroup(cmd, 2*time.Minute)
	if err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	return out
}
