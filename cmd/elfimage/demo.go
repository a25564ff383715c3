package main

import (
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/elfobj"
	"github.com/elfimage/elfimage/internal/cleanup"
	"github.com/elfimage/elfimage/lang/scheme"
)

func runDemo(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("demo", stderr)
	outDir := fs.String("o", "", "write the image into `DIR` and keep it (default: a temporary directory, removed at exit)")
	var prof cpuProfile
	prof.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	dir := *outDir
	if dir == "" {
		d, remove, err := cleanup.TempDir("elfimage-demo")
		if err != nil {
			return err
		}
		defer remove()
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}

	name := scheme.DemoFile
	fmt.Fprintf(stdout, "== compile %s (%d bytes of Scheme) and link\n", name, len(scheme.DemoSource))
	mod, err := scheme.Compile(name, scheme.DemoSource)
	if err != nil {
		return err
	}
	// The source is written beside the image: that is where debuggers
	// should find it.
	if mod.CompDir, err = filepath.Abs(dir); err != nil {
		return err
	}
	path := filepath.Join(dir, "demo.elf")
	if err := elfimage.WriteFile(path, mod, elfimage.LinkOptions{}); err != nil {
		return err
	}
	// Keep the source beside the image so debuggers can show it.
	if err := os.WriteFile(filepath.Join(dir, name), scheme.DemoSource, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "   wrote %s\n\n", path)

	start := time.Now()
	img, err := elfimage.Open(path, nil)
	loadTime := time.Since(start)
	if err != nil {
		return err
	}
	defer img.Close()

	fmt.Fprintf(stdout, "== run (output of the program)\n")
	stop, err := prof.start(stderr)
	if err != nil {
		return err
	}
	_, err = execute(img, stdout, stdout, true)
	if perr := stop(); err == nil {
		err = perr
	}
	if err != nil {
		return err
	}

	fmt.Fprintf(stdout, "\n== image %s\n", path)
	if err := summarize(stdout, img); err != nil {
		return err
	}
	med, err := medianLoad(path, 50)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n== load: %v for the load above (%s: one mmap of the whole file, mprotect, relocations); median of 50 more loads: %v\n",
		loadTime.Round(100*time.Nanosecond), loadPath(img), med.Round(100*time.Nanosecond))
	if *outDir != "" {
		fmt.Fprintf(stdout, "   look inside: elfimage dump %s\n", path)
	} else {
		fmt.Fprintf(stdout, "   (the image is removed at exit; use -o DIR to keep it)\n")
	}
	keep := dir
	if *outDir == "" {
		keep = "/tmp/elfimage-demo"
	}
	printToolCommands(stdout, keep, *outDir == "")
	return nil
}

// backtraceLine is the line of the demo program that takes a backtrace
// inside nested lets: a breakpoint there shows arguments and locals.
func backtraceLine() int {
	for i, l := range strings.Split(string(scheme.DemoSource), "\n") {
		if strings.Contains(l, "(backtrace)") {
			return i + 1
		}
	}
	return 1
}

// printToolCommands prints the commands that show the demo's code in gdb
// and perf, for the image and source kept in dir (first written there by
// demo -o dir when rerun is set).
func printToolCommands(w io.Writer, dir string, rerun bool) {
	abs, err := filepath.Abs(dir)
	if err == nil {
		dir = abs
	}
	img, src := filepath.Join(dir, "demo.elf"), filepath.Join(dir, scheme.DemoFile)
	fmt.Fprintf(w, "\n== see the demo's code in gdb and perf: paste these from the repository root\n")
	if rerun {
		fmt.Fprintf(w, "   go run ./cmd/elfimage demo -o %s      # keep the image and source\n", dir)
	}
	fmt.Fprintf(w, "   go build -o /tmp/elfimage ./cmd/elfimage\n")
	fmt.Fprintf(w, "   # gdb: the image is published through the GDB JIT interface (-gdb); no script needed\n")
	fmt.Fprintf(w, "   gdb -q -iex \"add-auto-load-safe-path $(go env GOROOT)\" -iex 'set breakpoint pending on' \\\n")
	fmt.Fprintf(w, "       -ex 'break %s:%d' -ex run -ex bt -ex 'info args' -ex 'info locals' -ex continue -ex 'info locals' -ex kill \\\n", scheme.DemoFile, backtraceLine())
	fmt.Fprintf(w, "       --args /tmp/elfimage run -gdb %s\n", img)
	fmt.Fprintf(w, "   # perf, image mapped from its file: names and lines come from the file itself\n")
	fmt.Fprintf(w, "   perf record -e cpu-clock -o /tmp/demo.perf -- /tmp/elfimage run %s\n", img)
	fmt.Fprintf(w, "   perf report -i /tmp/demo.perf --stdio --sort sym,srcline\n")
	fmt.Fprintf(w, "   # perf, code linked in memory (-jit) and described in a jitdump\n")
	fmt.Fprintf(w, "   perf record -k 1 -e cpu-clock -g -o /tmp/demo-jit.perf -- /tmp/elfimage run -jit -jitdump=/tmp/demo-jit %s\n", src)
	fmt.Fprintf(w, "   perf inject --jit -i /tmp/demo-jit.perf -o /tmp/demo-jit.injected.perf\n")
	fmt.Fprintf(w, "   perf report -i /tmp/demo-jit.injected.perf --stdio --sort sym,srcline\n")
}

// summarize prints the segments and sections with their sizes and the
// bytes spent on alignment padding.
func summarize(w io.Writer, img *elfimage.Image) error {
	fileSize := uint64(len(img.Bytes()))
	segs := img.Segments()
	fmt.Fprintf(w, "   %d bytes: %d loaded in %d segments, %d in the non-loaded tail\n",
		fileSize, img.Size(), len(segs), fileSize-img.Size())
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "   segment\taddress\tsize\t\n")
	for _, s := range segs {
		fmt.Fprintf(tw, "   %s\t%#x\t%d\t\n", progFlags(s.Flags), s.Addr, s.Size)
	}
	tw.Flush()
	secs, err := img.Sections()
	if err != nil {
		return err
	}
	if len(secs) > 0 {
		secs = slices.Clone(secs[1:]) // without the null section
	}
	slices.SortFunc(secs, func(a, b elfimage.SectionHeader) int { return int(a.Offset) - int(b.Offset) })
	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "   section\toffset\tsize\tloaded\n")
	var used uint64
	for _, s := range secs {
		loaded := "no"
		if s.Flags&elf.SHF_ALLOC != 0 {
			loaded = "yes"
		}
		fmt.Fprintf(tw, "   %s\t%#x\t%d\t%s\n", s.Name, s.Offset, s.Size, loaded)
		used += s.Size
	}
	tw.Flush()
	h, err := elfobj.DecodeHeader(img.Bytes())
	if err != nil {
		return err
	}
	// ELF header, program and section headers.
	hdrs := uint64(h.HeaderSize()) + uint64(h.ProgHeaderSize())*uint64(h.Phnum) + uint64(h.SectionHeaderSize())*uint64(len(secs)+1)
	pad := fileSize - used - hdrs
	fmt.Fprintf(w, "   padding and headers: %d bytes of headers, about %d bytes of alignment padding (%.1f%% of the file)\n",
		hdrs, pad, 100*float64(pad)/float64(fileSize))
	return nil
}

func medianLoad(path string, n int) (time.Duration, error) {
	ts := make([]time.Duration, n)
	for i := range ts {
		start := time.Now()
		img, err := elfimage.Open(path, nil)
		ts[i] = time.Since(start)
		if err != nil {
			return 0, err
		}
		img.Close()
	}
	slices.Sort(ts)
	return ts[n/2], nil
}
