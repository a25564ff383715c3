// Package gdbtest runs gdb in batch mode on a Go program that loads
// elfimage images, with the gdb Python script that registers each image
// with gdb as it is loaded ([Script], the interim debugger hook of
// gdbhook.go in package elfimage), and parses what gdb prints: the output
// of each command, "name = value" lists (info args, info locals) and
// backtraces.
//
// It is a test helper: it depends on nothing but the standard library,
// internal/tooltest and a gdb with Python (gdb 13 on Debian has it).
package gdbtest

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/elfimage/elfimage/internal/tooltest"
)

// Script is the gdb Python script (elfimage_gdb.py). Sourced before the
// program runs, it puts internal breakpoints on
// github.com/elfimage/elfimage.gdbImageLoaded and gdbImageUnloaded; on
// each hit it reads the global gdbImageEvent (version, action, base, size,
// text address, path address and length: seven little-endian uint64), runs
// `add-symbol-file PATH -o BASE` or `remove-symbol-file -a TEXT` (an image
// loaded from memory, whose PATH names no file, such as the library's entry
// image, is first copied from the process's memory to a temporary file), prints
// "elfimage: added symbol file PATH at 0xBASE" (or "removed ...") and lets
// the program continue. It also sets `breakpoint pending on`,
// `confirm off`, `print thread-events off` and
// `handle SIGURG nostop noprint pass` (Go's preemption signal).
//
//go:embed elfimage_gdb.py
var Script string

// ScriptName is the file name WriteScript gives the script.
const ScriptName = "elfimage_gdb.py"

// WriteScript writes [Script] to dir/[ScriptName] and returns that path.
// Errors are those of os.WriteFile.
func WriteScript(dir string) (string, error) {
	p := filepath.Join(dir, ScriptName)
	if err := os.WriteFile(p, []byte(Script), 0o644); err != nil {
		return "", err
	}
	return p, nil
}

// Session is one gdb batch run: gdb -q -nx -batch -iex 'set auto-load
// safe-path /' -x SCRIPT, then each command as one -ex, on Program.
type Session struct {
	GDB     string   // path of the gdb executable
	Program string   // the executable to debug (arguments go in a "run" command); may be empty with Args
	Args    []string // further gdb arguments before the commands (e.g. "-p", PID)
	Dir     string   // working directory of gdb; the script is written here
	Cmds    []string // gdb commands, in order (e.g. "break fib", "run ARGS", "info args")
	// Timeout bounds the whole run; 0 means 60 s. On timeout gdb's process
	// group is killed.
	Timeout time.Duration
	// NoScript runs gdb without the image hook script (for programs that
	// publish their images through the GDB JIT interface), with what the
	// script would have set: SIGURG passed silently, pending breakpoints
	// on.
	NoScript bool
	// LastMayFail makes Run accept an output that stops in the last
	// command (its marker printed, the end's not): in batch mode gdb stops
	// at a command that fails, and some last commands may fail where the
	// test judges their output (gdb 13 sometimes reports "Couldn't get
	// registers: No such process." when a multi-threaded program exits
	// during a continue).
	LastMayFail bool
}

// Result is what a Session printed (standard output and error merged),
// split by command.
type Result struct {
	// Output is everything gdb and the script printed, markers removed.
	Output string
	// Pre is what was printed before the first command (script loading).
	Pre string
	// Blocks[i] is what was printed while Cmds[i] ran (including the
	// program's own output when it shares gdb's standard output, and
	// breakpoint stops reported while it ran).
	Blocks []string
	// Cmds are the session's commands (Session.Cmds), for [Result.Block].
	Cmds []string
}

// Block returns what was printed while the first of the session's
// commands that is cmd ran (its Blocks entry); a session without that
// command fails t at once.
func (r *Result) Block(t testing.TB, cmd string) string {
	t.Helper()
	for i, c := range r.Cmds {
		if c == cmd && i < len(r.Blocks) {
			return r.Blocks[i]
		}
	}
	t.Fatalf("gdbtest: the session has no command %q", cmd)
	return ""
}

// marker separates the commands' outputs; printed with gdb's echo.
const marker = "@@gdbtest@@"

// Run runs the session and returns its output. A non-zero exit of gdb
// is not an error (in batch mode gdb exits 1 when the last command
// fails); a timeout, a failure to start gdb or output that lacks the
// markers is, and comes with the output so far in the Result.
func (s *Session) Run() (*Result, error) {
	args := append([]string{"-q", "-nx", "-batch", "-iex", "set auto-load safe-path /"}, s.Args...)
	if s.NoScript {
		args = append(args, "-iex", "handle SIGURG nostop noprint pass", "-iex", "set breakpoint pending on")
	} else {
		script, err := WriteScript(s.Dir)
		if err != nil {
			return nil, err
		}
		args = append(args, "-x", script)
	}
	for i, c := range s.Cmds {
		args = append(args, "-ex", fmt.Sprintf(`echo \n%s %d\n`, marker, i), "-ex", c)
	}
	args = append(args, "-ex", fmt.Sprintf(`echo \n%s end\n`, marker))
	if s.Program != "" {
		args = append(args, s.Program)
	}
	timeout := s.Timeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	cmd := exec.Command(s.GDB, args...)
	cmd.Dir = s.Dir
	out, runErr := tooltest.RunGroup(cmd, timeout)
	r := split(out, len(s.Cmds))
	r.Cmds = s.Cmds
	if errors.Is(runErr, tooltest.ErrTimeout) {
		return r, fmt.Errorf("gdbtest: gdb timed out after %v", timeout)
	}
	var exitErr *exec.ExitError
	if runErr != nil && !errors.As(runErr, &exitErr) {
		return r, fmt.Errorf("gdbtest: %w", runErr)
	}
	last := fmt.Sprintf("%s %d\n", marker, len(s.Cmds)-1)
	if !strings.Contains(out, marker+" end") && !(s.LastMayFail && strings.Contains(out, last)) {
		return r, fmt.Errorf("gdbtest: gdb stopped before the last command (%v)", runErr)
	}
	return r, nil
}

// MustRun runs s as [Session.Run] does and returns its result; an error
// of Run fails t at once, with gdb's output so far.
func MustRun(t testing.TB, s *Session) *Result {
	t.Helper()
	return tooltest.MustRun(t, s.Run)
}

// Must returns r, the result of a session run (by [Session.Run] or a
// retrying runner such as internal/qemutest.RunGDBStops), when err is nil;
// otherwise it fails t at once with err and gdb's output so far.
func Must(t testing.TB, r *Result, err error) *Result {
	t.Helper()
	return tooltest.Must(t, r, err)
}

// ToolOutput is r.Output, "" for a nil r ([tooltest.Outputter]).
func (r *Result) ToolOutput() string {
	if r == nil {
		return ""
	}
	return r.Output
}

// split cuts the raw output at the markers.
func split(raw string, n int) *Result {
	r := &Result{Blocks: make([]string, n)}
	var all strings.Builder
	cur := -1
	for _, line := range strings.SplitAfter(raw, "\n") {
		if rest, ok := strings.CutPrefix(line, marker+" "); ok {
			rest = strings.TrimSpace(rest)
			if i, err := strconv.Atoi(rest); err == nil && i >= 0 && i < n {
				cur = i
			} else {
				cur = n // "end" or garbage
			}
			continue
		}
		all.WriteString(line)
		switch {
		case cur < 0:
			r.Pre += line
		case cur < n:
			r.Blocks[cur] += line
		}
	}
	// Each marker's echo starts with a newline of its own: drop the
	// trailing newlines of each block.
	for i := range r.Blocks {
		r.Blocks[i] = strings.TrimRight(r.Blocks[i], "\n")
	}
	r.Pre = strings.TrimRight(r.Pre, "\n")
	r.Output = all.String()
	return r
}

// Vars parses "name = value" lines as printed by info args and info
// locals (one variable per line, values on one line) into a map; lines of
// another shape ("No locals.", "No arguments.") are ignored.
func Vars(block string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(block, "\n") {
		name, val, ok := strings.Cut(line, " = ")
		if !ok || name == "" || strings.ContainsAny(name, " \t()") {
			continue
		}
		m[name] = strings.TrimSpace(val)
	}
	return m
}

// Frame is one line of a gdb backtrace:
//
//	#1  0x00007ffff7e22081 in fib (n=25) at demo.scm:8
//	#0  fib (n=24) at demo.scm:6
type Frame struct {
	Num  int
	PC   uint64 // 0 when gdb omits it (frame 0 at the start of a line)
	Func string
	Args string // the text between the parentheses, "n=25" or "x=1, y=2"
	File string // "" when gdb prints none
	Line int
}

var frameRE = regexp.MustCompile(`^#(\d+)\s+(?:(0x[0-9a-f]+) in )?(\S+) \((.*)\)(?: at (\S+):(\d+))?`)

// Frames parses the frame lines of a bt or bt full output (other lines,
// such as bt full's locals, are skipped).
func Frames(block string) []Frame {
	var fs []Frame
	for _, line := range strings.Split(block, "\n") {
		m := frameRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		f := Frame{Func: m[3], Args: m[4], File: m[5]}
		f.Num, _ = strconv.Atoi(m[1])
		if m[2] != "" {
			f.PC, _ = strconv.ParseUint(m[2][2:], 16, 64)
		}
		if m[6] != "" {
			f.Line, _ = strconv.Atoi(m[6])
		}
		fs = append(fs, f)
	}
	return fs
}

// Funcs returns the function names of the frames of a bt output
// ([Frames]), innermost first.
func Funcs(block string) []string {
	var names []string
	for _, f := range Frames(block) {
		names = append(names, f.Func)
	}
	return names
}

var threadRE = regexp.MustCompile(`^Thread \d+ \(.*?LWP (\d+)`)

// Threads splits the output of `thread apply all bt` by thread: the lines
// after each thread's heading, "Thread 2 (Thread 0x7ffff... (LWP 4712)
// "name"):" (for a core, "Thread 2 (LWP 4712):"), up to the next heading,
// by the thread id (LWP) the heading names.
func Threads(block string) map[int]string {
	out := map[int]string{}
	tid := 0
	var lines []string
	flush := func() {
		if tid != 0 {
			out[tid] = strings.Join(lines, "\n")
		}
		lines = nil
	}
	for _, line := range strings.Split(block, "\n") {
		if m := threadRE.FindStringSubmatch(line); m != nil {
			flush()
			tid, _ = strconv.Atoi(m[1])
			continue
		}
		lines = append(lines, line)
	}
	flush()
	return out
}

// FullLocals parses a bt full output into the "name = value" lines listed
// under each frame, indexed like the frames.
func FullLocals(block string) []map[string]string {
	var out []map[string]string
	for _, line := range strings.Split(block, "\n") {
		if frameRE.MatchString(line) {
			out = append(out, map[string]string{})
			continue
		}
		if len(out) == 0 {
			continue
		}
		name, val, ok := strings.Cut(strings.TrimSpace(line), " = ")
		if ok && name != "" && !strings.ContainsAny(name, " \t()") {
			out[len(out)-1][name] = strings.TrimSpace(val)
		}
	}
	return out
}
