package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/elfimage/elfimage"
)

func runDescribe(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("describe", stderr)
	df := addDebugFlags(fs)
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		fmt.Fprint(stderr, debugFilesHelp)
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() < 2 {
		return fmt.Errorf("%w: want an image and at least one address", errUsage)
	}
	var addrs []uint64
	for _, a := range fs.Args()[1:] {
		addr, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(a, "0x"), "0X"), 16, 64)
		if err != nil {
			return fmt.Errorf("%w: address %q is not a hexadecimal number: describe takes link-time addresses in hexadecimal, as dump -symbols prints them", errUsage, a)
		}
		addrs = append(addrs, addr)
	}
	img, err := inspect(fs.Arg(0), false, df)
	if err != nil {
		return err
	}
	defer img.Close()
	var failed []string
	for i, addr := range addrs {
		if err := describe(stdout, img, addr); err != nil { // report it and go on with the other addresses
			a := fs.Arg(i + 1)
			fmt.Fprintf(stdout, "%s: %s\n", a, message("describe", err))
			failed = append(failed, a)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("nothing known at %s", strings.Join(failed, ", "))
	}
	return nil
}

// describe prints what the runtime knows at a link-time address: the
// procedure from the image's procedure table, the source position from
// its line sequence, and the live parameters and variables from DWARF.
func describe(w io.Writer, img *elfimage.Image, addr uint64) error {
	p, err := img.Procedure(addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%#x: %s+%#x, procedure [%#x, %#x)\n", addr, p.Name, addr-p.Start, p.Start, p.Start+p.Size)
	if pos, err := img.PositionAt(addr); err == nil {
		fmt.Fprintf(w, "  at %s\n", pos)
	}
	var params []string
	for i, a := range p.Args {
		if i < p.Required {
			params = append(params, a)
			continue
		}
		if i == p.Required {
			params = append(params, "#:optional")
		}
		if d := p.Defaults[i-p.Required]; d != "" {
			params = append(params, "("+a+" "+d+")")
		} else {
			params = append(params, a)
		}
	}
	fmt.Fprintf(w, "  arity: %d required, %d optional: (%s)\n", p.Required, p.Optional, strings.Join(append([]string{p.Name}, params...), " "))
	if p.Doc != "" {
		fmt.Fprintf(w, "  doc: %q\n", p.Doc)
	}
	for _, pr := range p.Properties {
		fmt.Fprintf(w, "  property %s = %s\n", pr.Name, pr.Value)
	}
	locals, err := img.Locals(addr)
	if err != nil {
		return err
	}
	if len(locals) == 0 {
		fmt.Fprintf(w, "  live: nothing\n")
	}
	for _, l := range locals {
		kind := "variable"
		if l.Param {
			kind = "parameter"
		}
		declared := "" // unknown (line 0): left out
		switch {
		case l.Line > 0 && l.Column > 0:
			declared = fmt.Sprintf("declared %d:%d, ", l.Line, l.Column)
		case l.Line > 0:
			declared = fmt.Sprintf("declared %d, ", l.Line)
		}
		fmt.Fprintf(w, "  live %s %s (%sdepth %d) in %s\n", kind, l.Name, declared, l.Depth, exprString(l.Location))
	}
	describeTypes(w, locals)
	return nil
}

// describeTypes prints the type of each live variable that has one other
// than the default integer, then the layout of every structure, union and
// enumeration they lead to (through pointers, arrays, typedefs and
// members), each once:
//
//	type of vm: struct vm *
//	struct vm (144 bytes):
//	  +0 data: uint8 *
//	  +8 cells: int64[8]
func describeTypes(w io.Writer, locals []elfimage.Local) {
	var queue []*elfimage.Type
	seen := map[*elfimage.Type]bool{}
	var walk func(t *elfimage.Type)
	walk = func(t *elfimage.Type) {
		for t != nil && !seen[t] {
			seen[t] = true
			switch t.Kind {
			case elfimage.KindStruct, elfimage.KindUnion, elfimage.KindEnum:
				queue = append(queue, t)
				for _, m := range t.Members {
					walk(m.Type)
				}
				return
			}
			t = t.Elem
		}
	}
	for _, l := range locals {
		if t := l.Type; t != nil && (t.Kind != elfimage.KindSigned || t.Name != "integer" || t.Size != 8) {
			fmt.Fprintf(w, "  type of %s: %s", l.Name, t)
			if t.Kind == elfimage.KindTypedef && t.Elem != nil {
				fmt.Fprintf(w, " (typedef of %s)", t.Elem)
			}
			fmt.Fprintln(w)
			walk(t)
		}
	}
	for _, t := range queue {
		fmt.Fprintf(w, "  %s (%d bytes):", t, t.Size)
		if t.Kind == elfimage.KindEnum {
			var vals []string
			for _, e := range t.Enumerators {
				vals = append(vals, fmt.Sprintf("%s = %d", e.Name, e.Value))
			}
			fmt.Fprintf(w, " %s\n", strings.Join(vals, ", "))
			continue
		}
		fmt.Fprintln(w)
		for _, m := range t.Members {
			fmt.Fprintf(w, "    +%d %s: %s\n", m.Offset, m.Name, m.Type)
		}
	}
}
