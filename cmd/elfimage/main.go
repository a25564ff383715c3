// Command elfimage compiles, links, loads, runs and inspects elfimage ELF
// images.
//
// Usage:
//
//	elfimage demo [-o DIR]                 compile, link, load, run and explain the demo program
//	elfimage build [-o OUT] prog.scm       compile a Scheme file to an image
//	elfimage build -c [-o OUT] prog.scm    compile a Scheme file to an object for cc/ld
//	elfimage run [-read] prog.scm|prog.elf run a program from source (through the compile cache) or from an image
//	elfimage cache [-list|-clear|-dir]     list or clear the compile cache
//	elfimage dump [flags] prog.elf         headers, segments, sections, symbols, lines, CFI rows
//	elfimage symbolize -e prog.elf ADDR... addr2line -f style output from the image's DWARF
//	elfimage strip [-o OUT] [-debug-file FILE] prog.elf  split an image into a stripped image and its debug file
//
// Errors go to standard error and the exit status is 1 (2 for usage
// errors). Every command documents its flags with -h.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/elfimage/elfimage/internal/cleanup"
)

type command struct {
	name, args, summary string
	run                 func(args []string, stdout, stderr io.Writer) error
}

var commands []command

func init() {
	commands = []command{
		{"demo", "[-o DIR] [-cpuprofile FILE [-cpuprofile-rate HZ]]", "compile, link, load and run the embedded demo program; print its output, a backtrace, the image layout and the load time", runDemo},
		{"build", "[-c] [-arch ARCH] [-o OUT] [-dwarf N] [-dwarf64] [-debug-frame] [-debug-file FILE] prog.scm", "compile a Scheme file and write its image (default: prog.elf beside it; -arch aarch64 or x86-64 cross-compiles, default the host), or with -c a relocatable object for cc/ld (prog.o, for the host or -arch)", runBuild},
		{"run", "[-jit] [-read] [-v] [-gdb] [-perf-map] [-jitdump[=DIR]] [-dwarf N] [-cache off|DIR] [-cpuprofile FILE [-cpuprofile-rate HZ]] prog.scm|prog.elf", "run a program from source (compiled into the compile cache and run mapped from there, or linked in memory with -jit) or from an image; publish it to gdb and perf on request", runRun},
		{"dump", "[-headers] [-sections] [-symbols] [-notes] [-dynamic] [-relocs] [-procs] [-info] [-lines] [-frames] [-frames-interp] [-disasm [-proc NAME]] [--json] [-read] [-debug-dir DIRS] FILE|jit-PID.dump|perf-PID.map", "print any ELF file's header, program headers, sections, symbols, notes, dynamic section and relocations as readelf does (all when no flag is given), its DIE tree with location and range lists and its line programs as llvm-dwarfdump does, its CFI, its code disassembled with each instruction's line, CFA rule and (for an image of ours) live variables, and for an image of ours also its load view, procedure table, DIE tree, line table and CFI rows; or the records of a jitdump file or the entries of a perf map", runDump},
		{"describe", "[-debug-dir DIRS] prog.elf ADDR...", "print what the runtime knows at link-time addresses (hexadecimal): procedure, arity, docstring, properties, source position, live variables and their locations", runDescribe},
		{"symbolize", "-e FILE [-debug-file F] [-debug-dir DIRS] [-C] [-a] [-p] [-s] [-f] [-i[=false]] [--addr2line] [--output-style=GNU|LLVM|JSON] [--json] [-columns] [ADDR...]", "print the function, file:line and inlined frames of addresses in any ELF file, like addr2line -f -i (with addr2line's and llvm-symbolizer's flags; --addr2line: addr2line's defaults; --output-style=LLVM or JSON: llvm-symbolizer's output; addresses from stdin when none are given)", runSymbolize},
		{"cache", "[-list|-clear|-dir]", "list the compile cache's images (size, last use, whether current, source), remove them all, or print the cache directory", runCacheCmd},
		{"strip", "[-o OUT] [-debug-file FILE] [-procs=false] prog.elf", "remove the symbols, DWARF and rebase table from an image (in place, or into OUT), writing them to a separate debug FILE that gdb, lldb, debuginfod and the runtime find through the image's build ID and .gnu_debuglink", runStrip},
		{"stack", "[--json] [-max N] [-debug-dir DIRS] PID | --core CORE [--exe BINARY] [--perf-map FILE] [--sysroot DIR]", "print the symbolized backtrace of every thread of a live process or of a core file, across elfimage images (files and GDB JIT symbol files), Go frames and C libraries, like gdb's thread apply all bt", runStack},
	}
}

// errUsage marks errors that are the caller's mistake: exit status 2.
var errUsage = errors.New("usage")

// errReported is an error the command has already printed (for example a
// Scheme error with its backtrace): exit status 1, nothing more printed.
var errReported = errors.New("reported")

// errUsageShown is a usage error the flag package has already printed,
// with the command's usage.
var errUsageShown = errors.New("usage error shown")

func main() {
	os.Exit(cliMain())
}

// cliMain is the command with its signal handling: temporary files are
// removed on SIGINT and SIGTERM (package internal/cleanup).
func cliMain() int {
	cleanup.Catch()
	return run(os.Args[1:], os.Stdout, os.Stderr)
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		err := c.run(args[1:], stdout, stderr)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsageShown):
			return 2
		case errors.Is(err, errReported):
			return 1
		case errors.Is(err, errUsage):
			fmt.Fprintf(stderr, "elfimage %s: %s\n", c.name, message(c.name, err))
			return 2
		}
		fmt.Fprintf(stderr, "elfimage %s: %s\n", c.name, message(c.name, err))
		return 1
	}
	fmt.Fprintf(stderr, "elfimage: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "elfimage writes, loads, runs and inspects mmap-ready ELF images with DWARF.")
	fmt.Fprintln(w, "\nUsage: elfimage COMMAND [flags] [args]")
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n  %10s %s\n", c.name, c.args, "", c.summary)
	}
	fmt.Fprintln(w, "\nRun 'elfimage COMMAND -h' for a command's flags.")
}

// newFlags returns a FlagSet for a command that prints its usage to stderr.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	for _, c := range commands {
		if c.name == name {
			fs.Usage = func() {
				fmt.Fprintf(stderr, "Usage: elfimage %s %s\n\n%s.\n", c.name, c.args, c.summary)
				if h := commandHelp[c.name]; h != "" {
					fmt.Fprintf(stderr, "\n%s\n", h)
				}
				var n int
				fs.VisitAll(func(*flag.Flag) { n++ })
				if n > 0 {
					fmt.Fprintln(stderr, "\nFlags:")
					printFlags(stderr, fs)
				}
			}
		}
	}
	return fs
}

// parse parses args, turning flag errors into usage errors. Flags may
// come before, between or after the positional arguments
// ("build prog.scm -o prog.elf"); "--" ends flag parsing. The positional
// arguments are left in fs.Args().
func parse(fs *flag.FlagSet, args []string) error {
	if err := checkBoolSpace(fs, args); err != nil {
		return err
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return errUsageShown
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		// fs.Parse stops at the first positional argument, or after "--".
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	return fs.Parse(append([]string{"--"}, pos...))
}
