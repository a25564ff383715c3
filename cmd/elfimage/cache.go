package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/elfimage/elfimage/ccache"
	"github.com/elfimage/elfimage/internal/cleanup"
)

// cacheHelp is the text `run -h` and `cache -h` print after the summary.
const cacheHelp = `Compile cache. run prog.scm compiles into $XDG_CACHE_HOME/elfimage (else
~/.cache/elfimage), one file per source and link options, named PROG-HASH.elf
from the source's absolute path, and runs the image mapped from there; the file
stays after the run, so perf report, addr2line -e, gdb and elfimage symbolize -e
read it afterwards ('elfimage cache' lists the files). The image is reused
while its key matches: the SHA-256 of the source's bytes, the elfimage build
that compiled it (its Go build ID: any rebuild of elfimage invalidates the
cache), the link options (-dwarf) and the cache format version.

Before a cached image runs, its owner and mode, the SHA-256 of the whole file,
its key and the loader's checks are verified; a truncated, corrupt or stale
image is rebuilt, never executed. The directory is created with mode 0700; a
directory or image not owned by you or writable by group or others is not
used (a warning says why). Writes go to a temporary file renamed into place,
so concurrent runs of one source are safe. When the directory cannot be
written, the image goes to a temporary file removed at exit, with a warning.

Turn it off or move it with -cache=off|DIR or ELFIMAGE_CACHE=off|DIR. The
entries are bounded to 256M in total (ELFIMAGE_CACHE_SIZE=N[K|M|G], 0: no
bound): after a store, the least recently used go first. Temporary files of
every command are removed on SIGINT and SIGTERM.`

func runCacheCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("cache", stderr)
	list := fs.Bool("list", false, "list the cached images (the default): size, last use, whether current, source and file")
	clearAll := fs.Bool("clear", false, "remove every cached image")
	dir := fs.Bool("dir", false, "print the cache directory (\"off\" when ELFIMAGE_CACHE=off)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	n := 0
	for _, b := range []bool{*list, *clearAll, *dir} {
		if b {
			n++
		}
	}
	if n > 1 {
		return fmt.Errorf("%w: give one of -list, -clear, -dir", errUsage)
	}
	cfg, err := ccache.Env()
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *dir {
		if cfg.Off {
			fmt.Fprintln(stdout, "off")
		} else {
			fmt.Fprintln(stdout, cfg.Dir)
		}
		return nil
	}
	if cfg.Off {
		return fmt.Errorf("the cache is off (%s=off)", ccache.EnvCache)
	}
	if _, err := os.Stat(cfg.Dir); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stdout, "%s: no cache yet\n", cfg.Dir) // and none created by looking
		return nil
	}
	c, err := ccache.Open(cfg.Dir)
	if err != nil {
		return err
	}
	if *clearAll {
		files, bytes, err := c.Clear()
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "removed %d files (%s) from %s\n", files, size(bytes), c.Dir())
		return nil
	}
	ents, err := c.Entries()
	if err != nil {
		return err
	}
	var total int64
	for _, e := range ents {
		total += e.Size
	}
	bound := "no bound"
	if cfg.MaxBytes > 0 {
		bound = "bound " + size(cfg.MaxBytes)
	}
	fmt.Fprintf(stdout, "%s: %d images, %s (%s)\n", c.Dir(), len(ents), size(total), bound)
	if len(ents) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "SIZE\tUSED\tSTATE\tSOURCE\tIMAGE")
	for _, e := range ents {
		state, source := "current", e.Key.Source
		if why := e.Stale(""); why != "" {
			state = "stale: " + why
		}
		if e.Err != nil {
			state, source = "unusable: "+e.Err.Error(), "?"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", size(e.Size), e.Used.Format("2006-01-02 15:04:05"), state, source, e.Path)
	}
	return tw.Flush()
}

// size formats a byte count with a binary unit.
func size(n int64) string {
	switch {
	case n >= 10<<30:
		return fmt.Sprintf("%dG", n>>30)
	case n >= 10<<20:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 10<<10:
		return fmt.Sprintf("%dK", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// runCache returns the compile cache of `run`: flag is -cache's value
// ("" for the environment's choice). A cache that is off gives the zero
// Cache (temporary files, no warning); one that cannot be opened, or no
// directory at all (no HOME), gives the zero Cache with a warning. A
// malformed ELFIMAGE_CACHE_SIZE is a usage error.
func runCache(flag string, stderr io.Writer) (*ccache.Cache, error) {
	warn := func(msg string) { fmt.Fprintf(stderr, "elfimage run: warning: %s\n", msg) }
	const temp = "; the image goes to a temporary file, removed at exit, which perf, addr2line and gdb will not find afterwards"
	cfg, err := ccache.Env()
	if err != nil && !errors.Is(err, ccache.ErrNoDir) {
		return nil, fmt.Errorf("%w: %s", errUsage, message("run", err))
	}
	switch flag {
	case "":
	case "off":
		cfg.Off = true
	default:
		cfg.Off, err = false, nil
		if cfg.Dir, err = filepath.Abs(flag); err != nil {
			return nil, err
		}
	}
	if !cfg.Off && err != nil {
		warn(message("run", err) + temp)
		return &ccache.Cache{Track: cleanup.Track}, nil
	}
	if cfg.Off {
		return &ccache.Cache{Track: cleanup.Track}, nil
	}
	c, err := ccache.Open(cfg.Dir)
	if err != nil {
		warn("not using the compile cache: " + message("run", err) + temp)
		return &ccache.Cache{Track: cleanup.Track}, nil
	}
	c.MaxBytes, c.Warn, c.Track = cfg.MaxBytes, warn, cleanup.Track
	return c, nil
}
