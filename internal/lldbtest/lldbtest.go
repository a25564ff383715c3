// Package lldbtest runs LLDB (lldb-19) in batch mode on a Go program that
// publishes code through the GDB JIT interface, and parses what LLDB
// prints: the output of each command, backtraces (bt) and variable lists
// (frame variable).
//
// LLDB's GDB JIT loader is on by default on Linux, so no script is needed:
// a breakpoint set by name before the code exists stays pending ("no
// locations (pending)") and resolves when the symbol file is registered
// ("1 location added to breakpoint 1"). Go programs receive SIGURG
// constantly (goroutine preemption), and LLDB stops on it unless told
// otherwise: every Session first runs [HandleSIGURG], which lldb-19
// accepts before the process exists and applies when it is launched.
//
// It is a test helper: it depends on nothing but the standard library and
// internal/tooltest.
package lldbtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/elfimage/elfimage/internal/tooltest"
)

// Names is where internal/tooltest.Require looks for LLDB: the Debian package
// lldb-19 installs lldb-19 (and no lldb unless lldb is installed too).
var Names = []string{"lldb-19"}

// HandleSIGURG makes LLDB pass Go's preemption signal to the program
// without stopping or printing; lldb-19 takes it before `run`.
const HandleSIGURG = "process handle -p true -s false -n false SIGURG"

// Session is one LLDB batch run:
//
//	lldb-19 -b -x -o HandleSIGURG -o 'settings set auto-confirm true' \
//	    -o CMD... -- PROGRAM ARGS...
//
// -x skips ~/.lldbinit; auto-confirm answers LLDB's questions (breakpoint
// delete with no argument asks one) as a terminal user would with "yes".
type Session struct {
	LLDB    string   // path of the lldb executable
	Program string   // the executable to debug
	Args    []string // its arguments
	Dir     string   // working directory of lldb and so of the program
	Env     []string // extra environment entries (KEY=VALUE) for lldb and the program
	// Cmds are LLDB commands, in order; typically breakpoints, then
	// "run", then "bt", "frame variable", "continue".
	Cmds []string
	// Timeout bounds the whole run; 0 means 60 s. On timeout LLDB's
	// process group is killed.
	Timeout time.Duration
}

// Result is what a Session printed (standard output and error merged,
// the program's own output included), split by command.
type Result struct {
	// Output is everything LLDB and the program printed.
	Output string
	// Blocks[i] is what was printed while Cmds[i] ran, without LLDB's
	// echo of the command.
	Blocks []string
}

// setup are the commands run before Session.Cmds.
var setup = []string{HandleSIGURG, "settings set auto-confirm true"}

// Run runs the session and returns its output. A non-zero exit of LLDB
// is not an error (LLDB exits 1 in batch mode after a command fails); a
// timeout, a failure to start LLDB or an output that lacks the echo of
// some command is, and comes with the output so far in the Result.
func (s *Session) Run() (*Result, error) {
	args := []string{"-b", "-x"}
	cmds := append(append([]string{}, setup...), s.Cmds...)
	for _, c := range cmds {
		args = append(args, "-o", c)
	}
	args = append(args, "--", s.Program)
	args = append(args, s.Args...)
	timeout := s.Timeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	cmd := exec.Command(s.LLDB, args...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), s.Env...)
	out, runErr := tooltest.RunGroup(cmd, timeout)
	r, splitErr := Split(out, cmds)
	r.Blocks = r.Blocks[len(setup):]
	if errors.Is(runErr, tooltest.ErrTimeout) {
		return r, fmt.Errorf("lldbtest: lldb timed out after %v", timeout)
	}
	var exitErr *exec.ExitError
	if runErr != nil && !errors.As(runErr, &exitErr) {
		return r, fmt.Errorf("lldbtest: %w", runErr)
	}
	if splitErr != nil {
		return r, fmt.Errorf("lldbtest: %w (lldb: %v)", splitErr, runErr)
	}
	return r, nil
}

// MustRun runs s as [Session.Run] does and returns its result; an error
// of Run fails t at once, with LLDB's output so far.
func MustRun(t testing.TB, s *Session) *Result {
	t.Helper()
	return tooltest.MustRun(t, s.Run)
}

// Must returns r, the result of a session run (by [Session.Run] or a
// retrying runner such as internal/qemutest.RunLLDBStops), when err is nil;
// otherwise it fails t at once with err and LLDB's output so far.
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

// Split cuts the output of `lldb -b -o CMD...` at LLDB's echo of each
// command, "(lldb) CMD" on a line of its own or after program output
// that did not end its line, found in order: Blocks[i] is what follows
// the echo of cmds[i] up to the next echo (trailing newlines dropped).
// An echo that is missing is an error; the blocks before it are filled.
func Split(raw string, cmds []string) (*Result, error) {
	r := &Result{Output: raw, Blocks: make([]string, len(cmds))}
	var starts, ends []int // of each echo found
	var err error
	pos := 0
	for i, c := range cmds {
		echo := "(lldb) " + c + "\n"
		j := strings.Index(raw[pos:], echo)
		if j < 0 {
			err = fmt.Errorf("lldb did not run command %d %q", i, c)
			break
		}
		starts = append(starts, pos+j)
		ends = append(ends, pos+j+len(echo))
		pos += j + len(echo)
	}
	for k := range starts {
		end := len(raw)
		if k+1 < len(starts) {
			end = starts[k+1]
		}
		r.Blocks[k] = strings.TrimRight(raw[ends[k]:end], "\n")
	}
	return r, err
}

// Frame is one frame line of an LLDB backtrace (indented, the selected
// frame marked with "*" before "frame"):
//
//	frame #0: 0x00007ffff7e22048 JIT(0x7ffff7e1d040)`fib(n=10) at prog.scm:1:17
//	frame #2: 0x00007ffff7e22026 JIT(0x7ffff7e1d040)`%start + 22
//	frame #11: 0x000000000060b7fe elfimage`main.main at main.go:55
type Frame struct {
	Num    int
	PC     uint64
	Module string // "elfimage", "JIT(0x7ffff7e1d040)" (the symbol file's address)
	Func   string // the function name without arguments
	Args   string // the text between the parentheses after the name, "n=10"; "" when LLDB shows none
	Offset int    // N of "name + N" (LLDB shows it when it has no line for the pc)
	File   string // base name of the source file; "" when LLDB shows none
	Line   int
	Column int // 0 when LLDB shows none
}

var frameRE = regexp.MustCompile("^\\s*\\*?\\s*frame #(\\d+): (0x[0-9a-f]+) ([^`]+)`(.*?)(?: at ([^\\s:]+):(\\d+)(?::(\\d+))?)?$")

// Frames parses the frame lines of a bt output (other lines are
// skipped).
func Frames(block string) []Frame {
	var fs []Frame
	for _, line := range strings.Split(block, "\n") {
		m := frameRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		f := Frame{Module: m[3], File: m[5]}
		f.Num, _ = strconv.Atoi(m[1])
		f.PC, _ = strconv.ParseUint(m[2][2:], 16, 64)
		f.Line, _ = strconv.Atoi(m[6])
		f.Column, _ = strconv.Atoi(m[7])
		fn := m[4]
		if name, off, ok := strings.Cut(fn, " + "); ok {
			if n, err := strconv.Atoi(off); err == nil {
				fn, f.Offset = name, n
			}
		}
		f.Func, f.Args = splitArgs(fn)
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

// splitArgs cuts "fib(n=10)" into "fib" and "n=10": the parenthesised
// text at the end, found by balancing from the end, when the name before
// it is not empty (Go names such as main.(*T).m keep their parentheses).
func splitArgs(s string) (name, args string) {
	if !strings.HasSuffix(s, ")") {
		return s, ""
	}
	depth := 0
	for i := len(s) - 1; i >= 0; i-- {
		switch s[i] {
		case ')':
			depth++
		case '(':
			depth--
			if depth == 0 {
				if i == 0 || s[i-1] == '.' {
					return s, ""
				}
				return s[:i], s[i+1 : len(s)-1]
			}
		}
	}
	return s, ""
}

// Var is one line of `frame variable`: "(long) n = 10".
type Var struct {
	Type, Value string
}

var varRE = regexp.MustCompile(`^\((.+?)\) (\S+) = (.*)$`)

// Vars parses the one-line variables of a `frame variable` output into a
// map by name; other lines (members of aggregates, messages) are ignored.
func Vars(block string) map[string]Var {
	m := map[string]Var{}
	for _, line := range strings.Split(block, "\n") {
		if v := varRE.FindStringSubmatch(strings.TrimSpace(line)); v != nil {
			m[v[2]] = Var{Type: v[1], Value: strings.TrimSpace(v[3])}
		}
	}
	return m
}

var exitRE = regexp.MustCompile(`Process \d+ exited with status = (-?\d+) \(0x[0-9a-f]+\)( lost connection)?`)

// Exit finds LLDB's report of the program's end in block, "Process N
// exited with status = S (0x...)", and returns S. lost is set when LLDB
// adds "lost connection" (S is then -1, not the program's status): lldb-19's
// lldb-server resumes a stopped process one thread at a time, and when
// the program exits at once (after its last GDB JIT notification, say) a
// thread is gone before its turn, the resume fails and LLDB drops the
// process, which has run to its end all the same. ok is false when block
// has no such report.
func Exit(block string) (status int, lost, ok bool) {
	m := exitRE.FindStringSubmatch(block)
	if m == nil {
		return 0, false, false
	}
	status, _ = strconv.Atoi(m[1])
	return status, m[2] != "", true
}
