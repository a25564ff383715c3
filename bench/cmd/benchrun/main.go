// Command benchrun measures elfimage side by side with the tools a user
// would pick instead (issue 7) and writes the tables of BENCHMARKS.md.
// bench/run installs the peer tools and runs it; run it directly only to
// reproduce rows:
//
//	go run ./bench/cmd/benchrun [-quick] [-only REGEXP] [-reps N] [-out FILE] [-work DIR]
//
// Every row is measured -reps times (rounds), interleaved with its peer
// where the peer is a separate program, and reported as the median with
// the spread (min–max) of the rounds. Rows are named by IDs such as
// load/procs=1000 or link/procs=100000; -only runs the rows whose ID the
// regular expression matches and then prints the tables without writing
// the file (unless -out is given). The peers are C harnesses in bench/c
// built with gcc, GNU as, llvm-mc, addr2line, llvm-symbolizer and glibc's
// dlopen and _dl_find_object; a missing tool leaves its cells "n/a".
//
// The generated tables go between the markers
// "<!-- bench/run:begin -->" and "<!-- bench/run:end -->" of the output
// file; everything outside the markers is left as it is (the markers are
// inserted after the first heading when absent).
//
// benchrun -memproc DIR N is the Go half of the Memory row: a process that
// opens DIR/img0.elf .. DIR/img{N-1}.elf and prints its smaps_rollup
// before and after.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// config is what the flags select.
type config struct {
	quick bool
	only  *regexp.Regexp
	reps  int
	root  string // repository root (where go.mod is)
	work  string // scratch directory for generated files and harnesses
	out   string // file to write, "" for stdout only
}

func main() {
	if len(os.Args) == 4 && os.Args[1] == "-memproc" {
		if err := memProc(os.Args[2], os.Args[3]); err != nil {
			fmt.Fprintln(os.Stderr, "benchrun:", err)
			os.Exit(1)
		}
		return
	}
	quick := flag.Bool("quick", false, "fewer rounds and smaller inputs: the whole run takes under two minutes")
	only := flag.String("only", "", "run only the rows whose ID matches this `regexp` (e.g. 'load/procs=1000$'); implies printing instead of writing BENCHMARKS.md unless -out is given")
	reps := flag.Int("reps", 0, "rounds per row (default 3 with -quick, 7 otherwise)")
	out := flag.String("out", "", "`file` to write the tables into (default BENCHMARKS.md at the repository root; \"-\" prints them)")
	work := flag.String("work", "", "scratch `directory` (default: a new temporary directory, removed at the end)")
	flag.Parse()
	cfg := &config{quick: *quick, reps: *reps}
	if cfg.reps <= 0 {
		cfg.reps = 7
		if cfg.quick {
			cfg.reps = 3
		}
	}
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			fatal(err)
		}
		cfg.only = re
	}
	root, err := repoRoot()
	if err != nil {
		fatal(err)
	}
	cfg.root = root
	switch {
	case *out == "-":
	case *out != "":
		cfg.out = *out
	case cfg.only == nil:
		cfg.out = filepath.Join(root, "BENCHMARKS.md")
	}
	if *work != "" {
		cfg.work = *work
		if err := os.MkdirAll(cfg.work, 0o755); err != nil {
			fatal(err)
		}
	} else {
		d, err := os.MkdirTemp("", "elfimage-bench")
		if err != nil {
			fatal(err)
		}
		cfg.work = d
		defer os.RemoveAll(d)
	}
	if err := run(cfg); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "benchrun:", err)
	os.Exit(1)
}

// want reports whether the row with this ID is selected.
func (c *config) want(id string) bool { return c.only == nil || c.only.MatchString(id) }

// wantAny reports whether any row whose ID starts with prefix may be
// selected (a cheap filter before preparing a section's inputs).
func (c *config) wantAny(ids ...string) bool {
	for _, id := range ids {
		if c.want(id) {
			return true
		}
	}
	return false
}

// repoRoot walks up from the working directory to the directory holding
// go.mod.
func repoRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		p := filepath.Dir(d)
		if p == d {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		d = p
	}
}

// logf prints progress to standard error.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// run measures every selected section and writes the report.
func run(cfg *config) error {
	start := time.Now()
	h := readMachine()
	logf("machine: %s, %d cores, load average %s", h.cpu, h.cores, h.load)
	tools := findTools()
	var secs []section
	add := func(name string, f func(*config, *toolset) (section, error)) {
		s, err := f(cfg, tools)
		if err != nil {
			logf("%s: %v", name, err)
			s = section{title: name, notes: []string{"Not measured: " + err.Error()}}
		}
		if len(s.rows) > 0 || len(s.notes) > 0 {
			secs = append(secs, s)
		}
	}
	add("Load", loadSection)
	add("Link and write", linkSection)
	add("Lookup", lookupSection)
	add("Symbolize", symbolizeSection)
	add("CFI dump", framesSection)
	add("Unwind, describe and publish", goBenchSection)
	add("Memory", memorySection)
	add("Self-profiling", profileSection)
	h.loadEnd = loadAvg()
	h.elapsed = time.Since(start)
	text := render(cfg, h, tools, secs)
	if cfg.out == "" {
		fmt.Print(text)
		return nil
	}
	if err := writeBetweenMarkers(cfg.out, text); err != nil {
		return err
	}
	logf("wrote %s (%v)", cfg.out, h.elapsed.Round(time.Second))
	return nil
}

// toolset holds the paths of the external programs, "" when missing.
type toolset struct {
	gcc, as, llvmMC, objcopy, addr2line, llvmSymbolizer string
	goCmd                                               string
}

func findTools() *toolset {
	look := func(names ...string) string {
		for _, n := range names {
			if p, err := exec.LookPath(n); err == nil {
				return p
			}
		}
		return ""
	}
	t := &toolset{
		gcc: look("gcc", "cc"), as: look("as"), llvmMC: look("llvm-mc", "llvm-mc-14", "llvm-mc-15", "llvm-mc-16"),
		objcopy: look("objcopy"), addr2line: look("addr2line"),
		llvmSymbolizer: look("llvm-symbolizer", "llvm-symbolizer-14", "llvm-symbolizer-15", "llvm-symbolizer-16"),
		goCmd:          look("go"),
	}
	return t
}

// command runs name with args in dir and returns its standard output; the
// error carries standard error.
func command(dir string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, lastLines(stderr.String(), 20))
	}
	return string(out), nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
