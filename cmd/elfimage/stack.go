package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/elfimage/elfimage/procview"
)

// runStack is `elfimage stack [--json] [-max N] PID`: the symbolized
// backtrace of every thread of a live process, like gdb's `thread apply
// all bt`, through package procview.
func runStack(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("stack", stderr)
	asJSON := fs.Bool("json", false, "print one JSON object with every thread's frames")
	maxFrames := fs.Int("max", procview.DefaultMaxFrames, "at most `N` frames per thread")
	cf := addCoreFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if cf.core != "" || cf.exe != "" {
		return runStackCore(cf, fs.Args(), *asJSON, *maxFrames, stdout, stderr)
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: want one PID", errUsage)
	}
	pid, err := strconv.Atoi(fs.Arg(0))
	if err != nil || pid <= 0 {
		return fmt.Errorf("%w: bad PID %q", errUsage, fs.Arg(0))
	}
	threads, view, err := procview.Stacks(pid, &procview.Options{MaxFrames: *maxFrames})
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
// then the module in brackets.
//
//	Thread 4711 "elfimage":
//	#0  0x00007f0000001042 in spin at spin.scm:1 [jit@0x7f0000000040]
//	#1  0x00007f0000001026 in %start [spin.elf]
//	#2  0x00007f0000001010 in %enter (signal frame) [spin.elf]
//	#3  0x000000000056fea5 in github.com/elfimage/elfimage/native.call at /src/native/call_amd64.go:27 [/usr/bin/elfimage]
//	#4  runtime.stopm at /go/src/runtime/proc.go:3008 [/usr/bin/elfimage]
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
		if len(f.Funcs) == 0 {
			fmt.Fprintf(w, "#%-2d 0x%016x in ??%s%s\n", n, f.PC, sig, mod)
			n++
			continue
		}
		for j, fn := range f.Funcs {
			name := fn.Function
			if name == "" {
				name = "??"
			}
			loc := ""
			if fn.File != "" {
				loc = fmt.Sprintf(" at %s:%d", fn.File, fn.Line)
			}
			if j == 0 {
				fmt.Fprintf(w, "#%-2d 0x%016x in %s%s%s%s\n", n, f.PC, name, loc, sig, mod)
			} else {
				fmt.Fprintf(w, "#%-2d %s%s%s\n", n, name, loc, mod)
			}
			n++
		}
	}
	if t.Err != nil && !errors.Is(t.Err, procview.ErrMaxFrames) {
		fmt.Fprintf(w, "Backtrace stopped: %v\n", t.Err)
	} else if t.Err != nil {
		fmt.Fprintf(w, "(more frames not shown: %v)\n", t.Err)
	}
}

type stackJSON struct {
	PID     int          `json:"pid"`
	Threads []threadJSON `json:"threads"`
}

type threadJSON struct {
	TID    int         `json:"tid"`
	Name   string      `json:"name"`
	Frames []frameJSON `json:"frames"`
	Error  string      `json:"error,omitempty"`
}

type frameJSON struct {
	PC     string     `json:"pc"`
	SP     string     `json:"sp"`
	Module string     `json:"module,omitempty"`
	Signal bool       `json:"signal,omitempty"`
	Funcs  []funcJSON `json:"functions"`
}

type funcJSON struct {
	Function string `json:"function"`
	File     string `json:"file,omitempty"`
	Line     uint32 `json:"line,omitempty"`
	Column   uint32 `json:"column,omitempty"`
	Inlined  bool   `json:"inlined,omitempty"`
}

func writeStackJSON(w io.Writer, pid int, threads []procview.Thread) error {
	out := stackJSON{PID: pid, Threads: []threadJSON{}}
	for _, t := range threads {
		tj := threadJSON{TID: t.TID, Name: t.Name, Frames: []frameJSON{}}
		if t.Err != nil {
			tj.Error = t.Err.Error()
		}
		for _, f := range t.Frames {
			fj := frameJSON{PC: fmt.Sprintf("0x%x", f.PC), SP: fmt.Sprintf("0x%x", f.SP), Module: f.Module, Signal: f.Signal, Funcs: []funcJSON{}}
			for _, fn := range f.Funcs {
				fj.Funcs = append(fj.Funcs, funcJSON{fn.Function, fn.File, fn.Line, fn.Column, fn.Inlined})
			}
			tj.Frames = append(tj.Frames, fj)
		}
		out.Threads = append(out.Threads, tj)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
