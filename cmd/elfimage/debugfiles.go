package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/elfimage/elfimage/debugfile"
	"github.com/elfimage/elfimage/debugfile/debuginfod"
	"github.com/elfimage/elfimage/symbolize"
)

// debugFlags are the flags of the commands that read debug information
// from separate debug files (symbolize, stack).
type debugFlags struct {
	dirs string // -debug-dir: colon-separated global debug directories
}

const debugFilesHelp = `
A file without DWARF is read with its separate debug file, found as gdb,
elfutils and llvm-symbolizer find it: DIR/.build-id/xx/yyyy.debug by its
build ID, then its .gnu_debuglink name (build ID, else CRC-32, checked) beside the file, in
.debug/ beside it and under DIR/ followed by the file's directory, for each
DIR of -debug-dir; then, when DEBUGINFOD_URLS is set, from those debuginfod
servers into the elfutils client's cache (DEBUGINFOD_CACHE_PATH, else
$XDG_CACHE_HOME/debuginfod_client, else ~/.cache/debuginfod_client), with
DEBUGINFOD_TIMEOUT (seconds for each 100 KiB, default 90),
DEBUGINFOD_MAXTIME (seconds for the whole file) and DEBUGINFOD_MAXSIZE
(bytes) as elfutils documents them; DEBUGINFOD_PROGRESS prints progress.
`

func addDebugFlags(fs *flag.FlagSet) *debugFlags {
	df := &debugFlags{}
	fs.StringVar(&df.dirs, "debug-dir", debugfile.DefaultDebugDir, "the global debug `DIRS` (colon-separated), as gdb's debug-file-directory, searched for separate debug files")
	return df
}

// finder returns the separate debug file finder of the flags, with the
// debuginfod client of the environment when DEBUGINFOD_URLS is set. A
// malformed DEBUGINFOD_ variable is an error.
func (df *debugFlags) finder() (*debugfile.Finder, error) {
	f := &debugfile.Finder{DebugDirs: filepath.SplitList(df.dirs)}
	if f.DebugDirs == nil {
		f.DebugDirs = []string{}
	}
	c, err := debuginfod.FromEnv()
	if err != nil {
		return nil, err
	}
	if c != nil {
		f.Remote = c.Debuginfo
	}
	return f, nil
}

// openSymbolizer opens file for symbolize: with its debug file debugFile
// when one is given, otherwise alone when it has DWARF, otherwise with the
// separate debug file the finder finds. When none is found, the file is
// read alone (symbol table answers) and a warning saying what was tried
// goes to stderr.
func openSymbolizer(file, debugFile string, df *debugFlags, stderr io.Writer) (*symbolize.Symbolizer, error) {
	if debugFile != "" {
		t, err := debugfile.ReadTarget(file)
		if err != nil {
			return nil, err
		}
		d, err := debugfile.ReadTarget(debugFile)
		if err != nil {
			return nil, fmt.Errorf("debug file: %w", err)
		}
		if t.BuildID != nil && d.BuildID != nil && !bytes.Equal(t.BuildID, d.BuildID) {
			return nil, fmt.Errorf("%s has build ID %x and %s %x: not its debug file", debugFile, d.BuildID, file, t.BuildID)
		}
		return symbolize.OpenDebug(file, debugFile)
	}
	sym, err := symbolize.Open(file)
	if err != nil {
		return nil, err
	}
	if ok, err := sym.HasDWARF(); err != nil || ok {
		return sym, nil // a malformed section is reported by the addresses it fails
	}
	p, err := findDebugFile(file, df)
	if err != nil {
		fmt.Fprintf(stderr, "elfimage symbolize: warning: %s has no DWARF: %v\n", file, err)
		return sym, nil
	}
	sym.Close()
	return symbolize.OpenDebug(file, p)
}

// findDebugFile returns the path of file's separate debug file.
func findDebugFile(file string, df *debugFlags) (string, error) {
	t, err := debugfile.ReadTarget(file)
	if err != nil {
		return "", err
	}
	f, err := df.finder()
	if err != nil {
		return "", err
	}
	return f.Find(context.Background(), t)
}
