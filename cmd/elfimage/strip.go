package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/internal/atomicfile"
	"github.com/elfimage/elfimage/internal/cleanup"
)

// runStrip is `elfimage strip`: elfimage.Strip of an image file.
func runStrip(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("strip", stderr)
	out := fs.String("o", "", "write the stripped image to `file` (default: replace the input)")
	debugFile := fs.String("debug-file", "", "write the symbols and debug sections to `file`, named by the stripped image's .gnu_debuglink (default: drop them)")
	procs := fs.Bool("procs", true, "keep the procedure table in the stripped image, for run-time queries without the debug file")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: want one image file, got %d arguments", errUsage, fs.NArg())
	}
	in := fs.Arg(0)
	if *out == "" {
		*out = in
	}
	if *debugFile != "" && sameFile(*debugFile, *out) {
		return fmt.Errorf("%w: -debug-file %s is the stripped image's own path", errUsage, *debugFile)
	}
	data, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	link := ""
	if *debugFile != "" {
		link = filepath.Base(*debugFile)
	}
	img, dbg, err := elfimage.Strip(data, elfimage.StripOptions{DebugLink: link, DropProcTable: !*procs})
	if err != nil {
		// Strip decodes bytes and has no file name: name the file here.
		if fe := (*elfimage.FormatError)(nil); errors.As(err, &fe) && fe.Source == "" {
			fe.Source = in
		}
		return err
	}
	if *debugFile == "" {
		return atomicfile.Write(*out, img, atomicfile.Options{Mode: 0o644, Sync: true, Track: cleanup.Track})
	}
	return writeSplit(*out, img, *debugFile, dbg)
}

// sameFile reports whether the paths a and b name the same file (by
// their absolute, cleaned names, or by inode when both exist).
func sameFile(a, b string) bool {
	if fa, err := os.Stat(a); err == nil {
		if fb, err := os.Stat(b); err == nil {
			return os.SameFile(fa, fb)
		}
	}
	aa, err1 := filepath.Abs(a)
	ab, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == ab
}
