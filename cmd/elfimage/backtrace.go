package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
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
// line per frame: number, run-time pc (a return address), procedure with
// its argument values as their types show them (Arg.Text), file:line:column of the call, and the image with
// the link-time address of the call (pc-1). Runtime support frames and
// the host frame the walk ends in are not shown.
func printBacktrace(w io.Writer, c *scheme.Capture, locals bool) { printBacktraceMax(w, c, 0, locals) }

// printBacktraceMax prints at most max frames (0: the default limit of
// elfimage.Backtrace), with each frame's live variables when locals is set.
func printBacktraceMax(w io.Writer, c *scheme.Capture, max int, locals bool) {
	frames, err := elfimage.Backtrace(c.Regs[:], captureMemory{c}, elfimage.BacktraceOptions{AtCall: true, Max: max, Locals: locals})
	for i, f := range frames {
		if f.Proc.Internal || (f.Image == nil && i == len(frames)-1 && err == nil) {
			continue // runtime support, or the Go host that called the image
		}
		var args []string
		for _, a := range f.Args {
			if a.Err != nil {
				args = append(args, a.Name+"=?")
			} else {
				args = append(args, a.Name+"="+a.Text)
			}
		}
		name := f.Proc.Name
		if name == "" {
			name = "??"
		}
		where := ""
		if f.Image != nil {
			// The link-time address whose position is shown, as symbolize,
			// describe and addr2line take it: for a return address (every
			// frame of a capture, taken at a call), the byte before it.
			where = fmt.Sprintf("  [%s+%#x]", filepath.Base(f.Image.Path()), f.Image.LinkAddr(uintptr(f.PC-1)))
		}
		fmt.Fprintf(w, "  #%d  %#x in (%s)  at %s%s\n", i, f.PC, strings.Join(append([]string{name}, args...), " "), f.Pos, where)
		for _, l := range f.Locals {
			val := "<unreadable>"
			if l.Err == nil {
				val = l.Text
			}
			fmt.Fprintf(w, "        %s%s = %s\n", strings.Repeat("  ", indentOf(l.Depth)), l.Name, val)
		}
	}
	// The walk ends cleanly (err nil) at the Go frame that called the
	// image through the library's entry frame: the capture holds the
	// library's stack only, and that frame needs no more of it.
	switch {
	case errors.Is(err, elfimage.ErrMaxFrames):
		fmt.Fprintf(w, "  ... (more frames not shown)\n")
	case err != nil:
		fmt.Fprintf(w, "  (backtrace stopped: %v)\n", err)
	}
}

// indentOf is the extra indentation of a variable at lexical depth d.
func indentOf(d int) int {
	if d < 1 {
		return 0
	}
	return d - 1
}
