package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/ccache"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/internal/atomicfile"
	"github.com/elfimage/elfimage/internal/cleanup"
	"github.com/elfimage/elfimage/lang/scheme"
	"github.com/elfimage/elfimage/publish"
)

func runBuild(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("build", stderr)
	out := fs.String("o", "", "output image `file` (default: the source name with .elf, or .o with -c)")
	object := fs.Bool("c", false, "write a relocatable object (ET_REL) for the system linker, its procedures callable from C (see lang/scheme's \"Objects\")")
	dwarfVersion := fs.Int("dwarf", 5, "DWARF `version` of the debug sections (3, 4 or 5)")
	dwarf64 := fs.Bool("dwarf64", false, "write the 64-bit DWARF format")
	debugFrame := fs.Bool("debug-frame", false, "also write .debug_frame")
	debugFile := fs.String("debug-file", "", "write the image stripped, with a .gnu_debuglink to its debug `file`, written too (as elfimage strip -debug-file)")
	archName := fs.String("arch", "", "target `architecture`: x86-64 (or amd64, x86_64) or aarch64 (or arm64) (default: the host's, for images and objects)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: want one source file, got %d arguments", errUsage, fs.NArg())
	}
	var target *arch.Arch
	switch *archName {
	case "":
	case "x86-64", "x86_64", "amd64":
		target = arch.X86_64
	case "aarch64", "arm64":
		target = arch.AArch64
	default:
		return fmt.Errorf("%w: -arch %q: want x86-64 or aarch64", errUsage, *archName)
	}
	src := fs.Arg(0)
	if *out == "" {
		ext := ".elf"
		if *object {
			ext = ".o"
		}
		*out = strings.TrimSuffix(src, filepath.Ext(src)) + ext
	}
	opts, err := linkOptions(*dwarfVersion, *dwarf64, *debugFrame)
	if err != nil {
		return err
	}
	if *object {
		if *debugFile != "" || *debugFrame {
			return fmt.Errorf("%w: -c writes an object with .eh_frame and its DWARF: -debug-file and -debug-frame are for images", errUsage)
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if target == nil {
			target = arch.Host()
		}
		mod, err := scheme.CompileObjectFor(target, src, b)
		if err != nil {
			return err
		}
		obj, err := elfimage.LinkObject(mod, opts)
		if err != nil {
			return err
		}
		return atomicfile.Write(*out, obj, atomicfile.Options{Mode: 0o644, Sync: true, Track: cleanup.Track})
	}
	mod, err := compileFileFor(target, src)
	if err != nil {
		return err
	}
	if *debugFile != "" {
		opts.DebugFile = *debugFile
		img, dbg, err := elfimage.LinkSplit(mod, opts)
		if err != nil {
			return err
		}
		return writeSplit(*out, img, *debugFile, dbg)
	}
	b, err := elfimage.Link(mod, opts)
	if err != nil {
		return err
	}
	// As elfimage.WriteFile, with the temporary file removed on SIGINT
	// and SIGTERM.
	return atomicfile.Write(*out, b, atomicfile.Options{Mode: 0o644, Sync: true, Track: cleanup.Track})
}

// writeSplit writes a debug file, then its stripped image, each
// atomically (as elfimage.WriteFile does).
func writeSplit(out string, img []byte, debugFile string, dbg []byte) error {
	o := atomicfile.Options{Mode: 0o644, Sync: true, Track: cleanup.Track}
	if err := atomicfile.Write(debugFile, dbg, o); err != nil {
		return err
	}
	return atomicfile.Write(out, img, o)
}

func linkOptions(version int, dwarf64, debugFrame bool) (elfimage.LinkOptions, error) {
	if version < 3 || version > 5 {
		return elfimage.LinkOptions{}, fmt.Errorf("%w: -dwarf %d: want 3, 4 or 5", errUsage, version)
	}
	enc := dwarf.Default64
	enc.Version = uint16(version)
	if dwarf64 {
		enc.Format = dwarf.Format64
	}
	return elfimage.LinkOptions{DWARF: enc, DebugFrame: debugFrame}, nil
}

// pageSizeKey is the cache key's extra part: "" on kernels whose page size
// is the ABI's, else the page size the images are linked with (arch.Host),
// so that a cache shared by machines of different page sizes keeps one
// image for each.
func pageSizeKey() string {
	if h := arch.Host(); h.PageSize != arch.ForMachine(h.Machine).PageSize {
		return fmt.Sprintf("page size %d", h.PageSize)
	}
	return ""
}

func compileFile(path string) (*elfimage.Module, error) { return compileFileFor(nil, path) }

// compileFileFor compiles the Scheme file at path for a (nil: the host).
func compileFileFor(a *arch.Arch, path string) (*elfimage.Module, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if a == nil {
		return scheme.Compile(path, src)
	}
	return scheme.CompileFor(a, path, src)
}

func runRun(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", stderr)
	read := fs.Bool("read", false, "load with the read() fallback instead of mmap")
	jit := fs.Bool("jit", false, "compile and link in memory and run from there (no image file; the program must be a .scm source)")
	dwarfVersion := fs.Int("dwarf", 5, "DWARF `version` when compiling from source (3, 4 or 5)")
	verbose := fs.Bool("v", false, "show the live local variables of every backtrace frame")
	perfMap := fs.Bool("perf-map", false, "announce the image's procedures to perf in /tmp/perf-PID.map")
	gdb := fs.Bool("gdb", false, "publish the image (symbols, lines, variables, CFI) to gdb through the GDB JIT interface")
	cacheFlag := fs.String("cache", "", "compile cache: `off|DIR`, off or the cache directory (default: $ELFIMAGE_CACHE, else $XDG_CACHE_HOME/elfimage, else ~/.cache/elfimage)")
	var prof cpuProfile
	prof.register(fs)
	var dump jitdumpFlag
	fs.Var(&dump, "jitdump", "write jit-PID.dump for perf inject --jit into `DIR`, created if needed (bare -jitdump: $JITDUMPDIR, else ~/.debug/jit)")
	df := addDebugFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		if dump.set && dump.dir == "" && fs.NArg() == 2 {
			return fmt.Errorf("%w: want one program, got 2 arguments %q; -jitdump takes its directory after '=': -jitdump=%s", errUsage, fs.Args(), fs.Arg(0))
		}
		return fmt.Errorf("%w: want one program (.scm source or image), got %d arguments", errUsage, fs.NArg())
	}
	path := fs.Arg(0)
	finder, err := df.finder()
	if err != nil {
		return err
	}
	lopts := &elfimage.LoadOptions{ForceRead: *read, DebugFiles: finder}
	var img *elfimage.Image
	switch {
	case *jit:
		if !isSource(path) {
			return fmt.Errorf("%w: -jit runs a .scm source, not an image", errUsage)
		}
		opts, err := linkOptions(*dwarfVersion, false, false)
		if err != nil {
			return err
		}
		mod, err := compileFile(path)
		if err != nil {
			return err
		}
		b, err := elfimage.Link(mod, opts)
		if err != nil {
			return err
		}
		if img, err = elfimage.Load(path, b, lopts); err != nil {
			return err
		}
		defer img.Close()
	case isSource(path):
		opts, err := linkOptions(*dwarfVersion, false, false)
		if err != nil {
			return err
		}
		c, err := runCache(*cacheFlag, stderr)
		if err != nil {
			return err
		}
		res, err := c.Load(ccache.Source{Path: path, Compile: compileAs(path), Link: opts, Extra: pageSizeKey()}, lopts)
		if err != nil {
			return err
		}
		defer res.Close()
		img = res.Image
	default:
		var err error
		if img, err = elfimage.Open(path, lopts); err != nil {
			return err
		}
		defer img.Close()
	}
	if *gdb {
		if err := publish.GDB(img); err != nil {
			return err
		}
	}
	if *perfMap {
		if err := publish.PerfMap(img); err != nil {
			return err
		}
	}
	if dump.set {
		w, err := publish.Jitdump(dump.dir, img)
		if err != nil {
			return err
		}
		defer w.Close()
	}
	stop, err := prof.start(stderr)
	if err != nil {
		return err
	}
	_, err = execute(img, stdout, stderr, *verbose)
	if perr := stop(); err == nil {
		err = perr
	}
	return err
}

// compileAs returns the compile function of the cache for a source the
// user named path: it compiles with that name, so compile errors say
// what the user typed, and records the absolute path and its directory
// as the module's file and compilation directory, so that the image does
// not depend on the working directory and tools find the source.
func compileAs(path string) func(abs string, src []byte) (*elfimage.Module, error) {
	return func(abs string, src []byte) (*elfimage.Module, error) {
		mod, err := scheme.Compile(path, src)
		if err != nil {
			return nil, err
		}
		mod.File, mod.CompDir = abs, filepath.Dir(abs)
		return mod, nil
	}
}

// jitdumpFlag is -jitdump (a boolean) or -jitdump=DIR.
type jitdumpFlag struct {
	set bool
	dir string
}

func (f *jitdumpFlag) String() string        { return f.dir }
func (f *jitdumpFlag) IsBoolFlag() bool      { return true }
func (f *jitdumpFlag) OptionalValue() string { return "DIR" }
func (f *jitdumpFlag) Set(v string) error {
	f.set = true
	switch v {
	case "true":
		f.dir = ""
	case "false":
		f.set = false
	default:
		f.dir = v
	}
	return nil
}

// isSource tells a Scheme source file from an image by its first bytes.
func isSource(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return strings.HasSuffix(path, ".scm")
	}
	defer f.Close()
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil {
		return true
	}
	return string(magic[:]) != "\x7fELF"
}

// execute runs a loaded Scheme image with its output on stdout (which
// must be a file for the generated code's write system calls; a pipe is
// used otherwise), prints each (backtrace) capture, and for an error the
// message and its backtrace.
func execute(img *elfimage.Image, stdout, stderr io.Writer, locals bool) (*scheme.Result, error) {
	out, wait, err := fileFor(stdout)
	if err != nil {
		return nil, err
	}
	res, runErr := scheme.Run(img, scheme.RunOptions{Stdout: out})
	if err := wait(); err != nil {
		return nil, err
	}
	if res != nil {
		defer func() {
			if res.Dropped > 0 {
				fmt.Fprintf(stdout, "(%d more backtraces were dropped: the capture area holds %d)\n", res.Dropped, len(res.Captures))
			}
		}()
		for i := range res.Captures {
			c := &res.Captures[i]
			if c.Kind != scheme.KindBacktrace {
				continue
			}
			fmt.Fprintf(stdout, "Backtrace:\n")
			printBacktrace(stdout, c, locals)
		}
	}
	var serr *scheme.Error
	if errors.As(runErr, &serr) {
		fmt.Fprintf(stderr, "error: %s", serr.Message)
		for _, a := range serr.Args {
			fmt.Fprintf(stderr, " %d", a)
		}
		fmt.Fprintln(stderr)
		if serr.Capture != nil {
			fmt.Fprintf(stderr, "Backtrace:\n")
			printBacktrace(stderr, serr.Capture, locals)
		}
		return res, errReported
	}
	var overflow *scheme.StackOverflowError
	if errors.As(runErr, &overflow) && overflow.Capture != nil {
		fmt.Fprintf(stderr, "error: stack overflow\nBacktrace (the innermost %d frames):\n", overflowFrames)
		printBacktraceMax(stderr, overflow.Capture, overflowFrames, locals)
		return res, errReported
	}
	return res, runErr
}

// overflowFrames is how many frames a stack overflow's backtrace shows.
const overflowFrames = 10

// fileFor returns an *os.File that writes to w: w itself when it is one,
// else the write end of a pipe copied to w until wait is called.
func fileFor(w io.Writer) (f *os.File, wait func() error, err error) {
	if f, ok := w.(*os.File); ok {
		return f, func() error { return nil }, nil
	}
	r, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(w, r)
		r.Close()
		done <- err
	}()
	return pw, func() error {
		pw.Close()
		return <-done
	}, nil
}
