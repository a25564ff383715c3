package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/elfimage/elfimage/debugfile"
	"github.com/elfimage/elfimage/procview"
)

// coreFlags are the flags of `elfimage stack --core CORE [--exe BINARY]
// [--perf-map FILE]`.
type coreFlags struct {
	core, exe, perfMap, sysroot string
}

// addCoreFlags defines --core and --exe on the stack command's flags.
func addCoreFlags(fs *flag.FlagSet) *coreFlags {
	cf := &coreFlags{}
	fs.StringVar(&cf.core, "core", "", "read the threads of the ELF core file `CORE` (from a crash, or gdb's gcore) instead of a live process")
	fs.StringVar(&cf.exe, "exe", "", "with --core: the process's executable `BINARY` (default: the path the core names for it)")
	fs.StringVar(&cf.perfMap, "perf-map", "", "with --core: the process's perf map `FILE`, which names code outside every module (default: /tmp/perf-PID.map when it is still there, owned by the process's user or root, and describes the core's code)")
	fs.StringVar(&cf.sysroot, "sysroot", "", "with --core: open the files the core names under `DIR` (as gdb's set sysroot), for a core of another machine: /usr/aarch64-linux-gnu for one of qemu-aarch64 -L /usr/aarch64-linux-gnu")
	return cf
}

// runStackCore is `elfimage stack --core CORE [--exe BINARY] [--perf-map
// FILE] [--sysroot DIR] [--json] [-max N]`: every thread's backtrace from a core file, as gdb's `thread
// apply all bt` on `gdb BINARY CORE` shows it, through
// procview.CoreStacks. Warnings about modules it could not use (missing
// or mismatched files, a truncated core) go to stderr.
func runStackCore(cf *coreFlags, args []string, asJSON bool, maxFrames int, finder *debugfile.Finder, stdout, stderr io.Writer) error {
	if cf.core == "" && cf.exe != "" {
		return fmt.Errorf("%w: --exe needs --core", errUsage)
	}
	if cf.core == "" && cf.sysroot != "" {
		return fmt.Errorf("%w: --sysroot needs --core", errUsage)
	}
	if cf.core == "" {
		return fmt.Errorf("%w: --perf-map needs --core", errUsage)
	}
	if len(args) != 0 {
		return fmt.Errorf("%w: --core takes no PID (got %q)", errUsage, args[0])
	}
	c, err := procview.OpenCore(cf.core)
	if err != nil {
		return err
	}
	defer c.Close()
	threads, view, err := procview.CoreStacks(c, &procview.CoreOptions{Options: procview.Options{MaxFrames: maxFrames, DebugFiles: finder}, Exe: cf.exe, PerfMap: cf.perfMap, Sysroot: cf.sysroot})
	if err != nil {
		return err
	}
	defer view.Close()
	for _, w := range view.Warnings() {
		fmt.Fprintf(stderr, "elfimage stack: warning: %v\n", w)
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	sig, addr := coreSignal(c)
	if asJSON {
		return writeCoreJSON(w, cf.core, c, threads, sig, addr)
	}
	fmt.Fprintf(w, "Core of process %d", c.PID)
	if c.Args != "" {
		fmt.Fprintf(w, ": %s", c.Args)
	}
	fmt.Fprintln(w)
	if sig != 0 {
		fmt.Fprintf(w, "Program terminated with signal %s (%v)", unix.SignalName(syscall.Signal(sig)), syscall.Signal(sig))
		if addr != nil {
			fmt.Fprintf(w, ", fault address %#x", *addr)
		}
		fmt.Fprintln(w, ".")
	}
	for i := range threads {
		fmt.Fprintln(w)
		writeThread(w, &threads[i])
	}
	return nil
}

// coreSignal returns the signal that caused the dump, as gdb's "Program
// terminated with signal" takes it: pr_cursig of the first thread (0 in a
// gcore of a live process, whose NT_SIGINFO only says how gdb stopped
// it), and the fault address of NT_SIGINFO when that is the same signal
// and has one (SIGSEGV, SIGBUS, SIGILL, SIGFPE).
func coreSignal(c *procview.Core) (int, *uint64) {
	sig := c.Threads[0].Signal
	if si := c.Siginfo; sig != 0 && si != nil && int(si.Signo) == sig {
		switch syscall.Signal(sig) {
		case syscall.SIGSEGV, syscall.SIGBUS, syscall.SIGILL, syscall.SIGFPE:
			return sig, &si.Addr
		}
	}
	return sig, nil
}

type coreJSON struct {
	File         string  `json:"file"`
	Command      string  `json:"command,omitempty"`
	Args         string  `json:"args,omitempty"`
	Signal       int     `json:"signal,omitempty"`
	SignalName   string  `json:"signal_name,omitempty"`
	FaultAddress *string `json:"fault_address,omitempty"`
}

// writeCoreJSON prints the stack command's JSON (writeStackJSON, so that
// it has every field the live case has) with one more member, "core":
// the core file, the process's name and arguments, and the signal.
func writeCoreJSON(w io.Writer, file string, c *procview.Core, threads []procview.Thread, sig int, addr *uint64) error {
	var b bytes.Buffer
	if err := writeStackJSON(&b, c.PID, threads); err != nil {
		return err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b.Bytes(), &obj); err != nil {
		return err
	}
	cj := coreJSON{File: file, Command: c.Command, Args: c.Args, Signal: sig}
	if sig != 0 {
		cj.SignalName = unix.SignalName(syscall.Signal(sig))
	}
	if addr != nil {
		s := fmt.Sprintf("0x%x", *addr)
		cj.FaultAddress = &s
	}
	raw, err := json.Marshal(cj)
	if err != nil {
		return err
	}
	obj["core"] = raw
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(obj)
}
