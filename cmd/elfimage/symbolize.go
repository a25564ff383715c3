package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/elfimage/elfimage"
)

func runSymbolize(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("symbolize", stderr)
	exe := fs.String("e", "", "the image `file` (required)")
	columns := fs.Bool("columns", false, "print file:line:column instead of addr2line's file:line")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *exe == "" {
		return fmt.Errorf("%w: -e FILE is required", errUsage)
	}
	img, err := inspect(*exe, false)
	if err != nil {
		return err
	}
	defer img.Close()
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	var bad []string
	one := func(s string) error {
		addr, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X"), 16, 64)
		if err != nil {
			// Like addr2line, answer every address; report the bad ones.
			bad = append(bad, s)
			fmt.Fprintf(w, "??\n??:0\n")
			return nil
		}
		return symbolize(w, img, addr, *columns)
	}
	if fs.NArg() > 0 {
		for _, a := range fs.Args() {
			if err := one(a); err != nil {
				return err
			}
		}
	} else {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			for _, f := range strings.Fields(sc.Text()) {
				if err := one(f); err != nil {
					return err
				}
			}
			w.Flush() // answer each line at once, for pipes
		}
		if err := sc.Err(); err != nil {
			return err
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("not hexadecimal addresses: %q", bad)
	}
	return nil
}

// symbolize prints addr2line -f's two lines for a link-time address: the
// procedure name, then file:line. Like addr2line, it prints "??" for an
// unknown procedure, "??:?" for an address in a procedure without line
// information and "??:0" for an address outside every procedure. Unlike
// addr2line, an address in the padding between procedures belongs to no
// procedure (addr2line names the procedure before it).
func symbolize(w io.Writer, img *elfimage.Image, addr uint64, columns bool) error {
	name, loc := "??", "??:0"
	p, err := img.ProcedureAt(addr)
	switch {
	case err == nil:
		name, loc = p.Name, "??:?"
	case !errors.Is(err, elfimage.ErrUnknownPC):
		return err // malformed symbols: say so rather than print ??
	}
	pos, err := img.PositionAt(addr)
	switch {
	case err == nil:
		if columns {
			loc = pos.String()
		} else {
			loc = fmt.Sprintf("%s:%d", pos.File, pos.Line)
		}
	case !errors.Is(err, elfimage.ErrUnknownPC):
		return err
	}
	fmt.Fprintf(w, "%s\n%s\n", name, loc)
	return nil
}
