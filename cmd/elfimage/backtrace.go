package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/lang/scheme"
)

// captureMemory reads a capture's copy of the stack.
type captureMemory struct{ c *scheme.Capture }

func (m captureMemory) ReadUint64(addr uint64) (uint64, error) {
	v, ok := m.c.ReadStack(addr)
	if !ok {
		return 0, fmt.Errorf("address %#x outside the captured stack [%#x, %#x)", addr, m.c.StackAddr, m.c.StackAddr+uint64(len(m.c.Stack)))
	}
	return v, nil
}

// printBacktrace unwinds a capture with the images' CFI and prints one
// line per frame: number, procedure with its argument values, and
// file:line:column.
func printBacktrace(w io.Writer, c *scheme.Capture) { printBacktraceMax(w, c, 0) }

// printBacktraceMax prints at most max frames (0: the default limit of
// elfimage.Backtrace).
func printBacktraceMax(w io.Writer, c *scheme.Capture, max int) {
	frames, err := elfimage.Backtrace(c.Regs[:], captureMemory{c}, elfimage.BacktraceOptions{AtCall: true, Max: max})
	for i, f := range frames {
		if f.Proc.Internal {
			continue
		}
		var args []string
		for _, a := range f.Args {
			if a.Err != nil {
				args = append(args, a.Name+"=?")
			} else {
				args = append(args, fmt.Sprintf("%s=%d", a.Name, a.Value))
			}
		}
		name := f.Proc.Name
		if name == "" {
			name = "??"
		}
		fmt.Fprintf(w, "  #%d  %#x in (%s)  at %s\n", i, f.PC, strings.Join(append([]string{name}, args...), " "), f.Pos)
	}
	if err != nil {
		fmt.Fprintf(w, "  (backtrace stopped: %v)\n", err)
	}
}
