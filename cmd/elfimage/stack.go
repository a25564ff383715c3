package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/elfimage/elfimage/procview"
)

// stackHelp is the part of `stack -h` after the flags.
const stackHelp = `
Each frame is unwound with its module's call frame information (.eh_frame,
or Go's .debug_frame). A frame without any (code outside every module, such
as code linked in memory by run -jit without -gdb, or a module without an
FDE for its pc) is unwound by frame pointer when the chain is plausible: the
frame pointer is aligned and not below the stack pointer, the frame record
lies on the same stack, so frames grow toward higher addresses, and the
return address is in executable memory just after a call instruction; an
innermost frame at its function's entry or in its epilogue (the function
start comes from the perf map or the symbol table) has its return address
at the stack pointer. native.Call's switch from the native stack to the Go
stack is crossed through the values its trampoline saved at the top of the
native stack. Code outside every module is named from /tmp/perf-PID.map
(run -perf-map) when it is owned by the process's user or root, and images
published with -gdb from the GDB JIT interface's list.

Every frame ends with how it was found ("via registers" for the innermost
frame, "via cfi", "via signal" for the caller of a signal frame, "via fp",
"via prologue", "via epilogue", "via stack-switch"); frames with DWARF show
their arguments as gdb's bt does and their file:line:column. A walk that
ends before the outermost frame says why ("Backtrace stopped: ...", and
"error" in --json): no plausible frame pointer, a return address outside
executable memory, unreadable memory, malformed CFI; at the -max limit the
text ends with "(More stack frames follow...)". As with gdb's bt,
the exit status is 0 whenever stacks were printed (eu-stack exits 1 when
a walk stopped early); it is 1 when the process could not be examined.
`

// runStack is `elfimage stack [--json] [-max N] PID`: the symbolized
// backtrace of every thread of a live process, like gdb's `thread apply
// all bt`, through package procview.
func runStack(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("stack", stderr)
	asJSON := fs.Bool("json", false, "print one JSON object with every thread's frames")
	maxFrames := fs.Int("max", procview.DefaultMaxFrames, "at most `N` frames per thread")
	cf := addCoreFlags(fs)
	df := addDebugFlags(fs)
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		fmt.Fprint(stderr, stackHelp)
		fmt.Fprint(stderr, debugFilesHelp)
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	finder, err := df.finder()
	if err != nil {
		return err
	}
	if cf.core != "" || cf.exe != "" || cf.perfMap != "" || cf.sysroot != "" {
		return runStackCore(cf, fs.Args(), *asJSON, *maxFrames, finder, stdout, stderr)
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: want one PID", errUsage)
	}
	pid, err := strconv.Atoi(fs.Arg(0))
	if err != nil || pid <= 0 {
		return fmt.Errorf("%w: bad PID %q", errUsage, fs.Arg(0))
	}
	threads, view, err := procview.Stacks(pid, &procview.Options{MaxFrames: *maxFrames, DebugFiles: finder})
	if err != nil {
		return err
	}
	defer view.Close()
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	if *asJSON {
		return writeStackJSON(w, pid, threads)
	}
	for i := range threads {
		if i > 0 {
			fmt.Fprintln(w)
		}
		writeThread(w, &threads[i])
	}
	return nil
}

// writeThread prints one thread as gdb's bt does: one line per source
// frame, inlined frames numbered separately and printed without a pc,
// the arguments, file:line:column, the module in brackets, and how the
// frame was found; then why the walk stopped, if it did before the
// outermost frame.
//
//	Thread 4711 "elfimage":
//	#0  0x00007f0000001042 in spin (n=99) at /src/spin.scm:4:7 [jit@0x7f0000000040] via registers
//	#1  0x00007f0000001026 in %start () [jit@0x7f0000000040] via cfi
//	#2  0x00007f0000004007 in elfimage.entry () (signal frame) [jit@0x7f0000003040] via cfi
//	#3  0x000000000056feeb in github.com/elfimage/elfimage/native.trampoline.abi0 () at /src/native/call_amd64.s:46 [/usr/bin/elfimage] via signal
//	#4  0x000000000056fea5 in github.com/elfimage/elfimage/native.call (fn=139993475543040, ...) at /src/native/call.go:39:2 [/usr/bin/elfimage] via cfi
//	#5  runtime.stopm () at /go/src/runtime/proc.go:3008:8 [/usr/bin/elfimage]
func writeThread(w io.Writer, t *procview.Thread) {
	fmt.Fprintf(w, "Thread %d %q:\n", t.TID, t.Name)
	n := 0
	for _, f := range t.Frames {
		mod := ""
		if f.Module != "" && f.Module[0] == '[' {
			mod = " " + f.Module // [vdso], [jit@0x...]
		} else if f.Module != "" {
			mod = " [" + f.Module + "]"
		}
		sig := ""
		if f.Signal {
			sig = " (signal frame)"
		}
		via := " via " + f.Method.String()
		if len(f.Funcs) == 0 {
			fmt.Fprintf(w, "#%-2d 0x%016x in ??%s%s%s\n", n, f.PC, sig, mod, via)
			n++
			continue
		}
		for j, fn := range f.Funcs {
			name := fn.Function
			if name == "" {
				name = "??"
			}
			if j < len(f.Args) && f.Args[j] != nil {
				name += " (" + argList(f.Args[j]) + ")"
			}
			loc := ""
			if fn.File != "" && !fn.FileFromSymbol { // gdb shows no STT_FILE name
				loc = fmt.Sprintf(" at %s:%d", fn.File, fn.Line)
				if fn.Column != 0 {
					loc += fmt.Sprintf(":%d", fn.Column)
				}
			}
			if j == 0 {
				fmt.Fprintf(w, "#%-2d 0x%016x in %s%s%s%s%s\n", n, f.PC, name, loc, sig, mod, via)
			} else {
				fmt.Fprintf(w, "#%-2d %s%s%s\n", n, name, loc, mod)
			}
			n++
		}
	}
	if t.Err != nil && !errors.Is(t.Err, procview.ErrMaxFrames) {
		fmt.Fprintf(w, "Backtrace stopped: %v\n", t.Err)
	} else if t.Err != nil {
		fmt.Fprintf(w, "(More stack frames follow...: %v)\n", t.Err)
	}
}

// argList formats arguments as gdb's bt: "n=3, s=0x1234", with values
// on entry as gdb prints them ("n=n@entry=3", "n=4, n@entry=3").
func argList(args []procview.Arg) string {
	var b strings.Builder
	for i, a := range args {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(a.String())
	}
	return b.String()
}

type stackJSON struct {
	PID     int          `json:"pid"`
	Threads []threadJSON `json:"threads"`
}

type threadJSON struct {
	TID    int         `json:"tid"`
	Name   string      `json:"name"`
	Frames []frameJSON `json:"frames"`
	// Error is why the walk stopped before the outermost frame.
	Error string `json:"error,omitempty"`
}

type frameJSON struct {
	PC     string     `json:"pc"`
	SP     string     `json:"sp"`
	CFA    string     `json:"cfa,omitempty"`
	Module string     `json:"module,omitempty"`
	Signal bool       `json:"signal,omitempty"`
	Method string     `json:"unwound"`
	Funcs  []funcJSON `json:"functions"`
}

type funcJSON struct {
	Function string     `json:"function"`
	File     string     `json:"file,omitempty"`
	Line     uint32     `json:"line,omitempty"`
	Column   uint32     `json:"column,omitempty"`
	Inlined  bool       `json:"inlined,omitempty"`
	Args     *[]argJSON `json:"args,omitempty"` // absent when the DWARF has no function here
}

type argJSON struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Entry string `json:"entry,omitempty"` // the value on entry (gdb's name@entry), when known
}

func writeStackJSON(w io.Writer, pid int, threads []procview.Thread) error {
	out := stackJSON{PID: pid, Threads: []threadJSON{}}
	for _, t := range threads {
		tj := threadJSON{TID: t.TID, Name: t.Name, Frames: []frameJSON{}}
		if t.Err != nil {
			tj.Error = t.Err.Error()
		}
		for _, f := range t.Frames {
			fj := frameJSON{PC: fmt.Sprintf("0x%x", f.PC), SP: fmt.Sprintf("0x%x", f.SP), Module: f.Module, Signal: f.Signal, Method: f.Method.String(), Funcs: []funcJSON{}}
			if f.CFA != 0 {
				fj.CFA = fmt.Sprintf("0x%x", f.CFA)
			}
			for j, fn := range f.Funcs {
				fu := funcJSON{Function: fn.Function, File: fn.File, Line: fn.Line, Column: fn.Column, Inlined: fn.Inlined}
				if fn.FileFromSymbol {
					fu.File = ""
				}
				if j < len(f.Args) && f.Args[j] != nil {
					args := []argJSON{}
					for _, a := range f.Args[j] {
						args = append(args, argJSON{a.Name, a.Value, a.Entry})
					}
					fu.Args = &args
				}
				fj.Funcs = append(fj.Funcs, fu)
			}
			tj.Frames = append(tj.Frames, fj)
		}
		out.Threads = append(out.Threads, tj)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
