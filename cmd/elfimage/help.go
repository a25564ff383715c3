package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// commandHelp is the text `COMMAND -h` prints after the summary, for the
// commands that need more than their flags.
var commandHelp = map[string]string{
	"run":   cacheHelp + "\n\n" + profileHelp,
	"demo":  profileHelp,
	"cache": cacheHelp,
	"describe": `ADDR is a link-time address in hexadecimal, with or without 0x: an address of
the image file, as dump -symbols, -procs and -lines print them and as
backtraces print them in brackets ([prog.elf+0x20a9]), not a run-time address.`,
}

// profileHelp explains -cpuprofile (run, demo).
const profileHelp = `-cpuprofile FILE writes a CPU profile of the run in pprof's format (package
selfprof: perf_event_open samples of every thread, the image's procedures
with their source lines and the Go functions that called them, in the same
stacks), for go tool pprof -top FILE (-lines, -traces, -http=:8080). It
needs perf_event_open on the process itself: kernel.perf_event_paranoid at
most 2, or CAP_PERFMON, and in a container a seccomp profile allowing it.`

// optionalValue is a flag whose value is optional: -name alone, or
// -name=VALUE; OptionalValue names the value in -h.
type optionalValue interface {
	IsBoolFlag() bool
	OptionalValue() string
}

// printFlags prints fs's flags as flag.PrintDefaults does, except that a
// flag whose value is optional shows as -name[=VALUE] and a boolean flag
// that defaults to true as -name[=false], and that a note says how those
// take their value.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	var optional bool
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		var head string
		switch v := f.Value.(type) {
		case optionalValue:
			head = fmt.Sprintf("-%s[=%s]", f.Name, v.OptionalValue())
			optional = true
		case interface{ IsBoolFlag() bool }:
			head = "-" + f.Name
			if v.IsBoolFlag() && f.DefValue == "true" {
				head += "[=false]"
				optional = true
			}
		default:
			head = "-" + f.Name + " " + name
		}
		fmt.Fprintf(w, "  %s\n    \t%s", head, strings.ReplaceAll(usage, "\n", "\n    \t"))
		switch {
		case f.DefValue == "" || f.DefValue == "0" || f.DefValue == "false":
		case fmt.Sprintf("%T", f.Value) == "*flag.stringValue":
			fmt.Fprintf(w, " (default %q)", f.DefValue)
		default:
			fmt.Fprintf(w, " (default %v)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
	if optional {
		fmt.Fprintln(w, "\nA flag shown as -flag[=VALUE] takes its value only after '=' (with a space,\nthe value would be read as an argument); other flags take theirs after '=' or\na space.")
	}
}

// checkBoolSpace returns a usage error for a boolean or optional-value
// flag given bare and followed by "true" or "false" ("-i false"), which
// the flag package would take as -i followed by an argument "false".
func checkBoolSpace(fs *flag.FlagSet, args []string) error {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return nil
		}
		if !strings.HasPrefix(a, "-") || strings.Contains(a, "=") || a == "-" {
			continue
		}
		f := fs.Lookup(strings.TrimLeft(a, "-"))
		if f == nil {
			continue
		}
		b, ok := f.Value.(interface{ IsBoolFlag() bool })
		if !ok || !b.IsBoolFlag() {
			i++ // the flag's value
			continue
		}
		if i+1 < len(args) && (args[i+1] == "true" || args[i+1] == "false") {
			return fmt.Errorf("%w: %s %s: this flag takes its value after '=': %s=%s", errUsage, a, args[i+1], a, args[i+1])
		}
	}
	return nil
}

// message returns err's text for a line that already starts with
// "elfimage CMD: ": without a leading "elfimage: " (the library's prefix),
// "ccache: " or "CMD: " (a package named like the command), so that the
// line has one prefix.
func message(cmd string, err error) string {
	s := err.Error()
	for _, p := range []string{"elfimage: ", "ccache: ", cmd + ": "} {
		s = strings.TrimPrefix(s, p)
	}
	return s
}
