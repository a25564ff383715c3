package publish_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/lang/scheme"
	"github.com/elfimage/elfimage/publish"
)

// The cost of publishing a loaded 10,000-procedure image (benchImage) to
// debuggers and profilers, without one attached. Bytes/op of Symfile is
// the file size: the symbol file is a moved copy of the whole image.

func openBench(b *testing.B) *elfimage.Image {
	im, err := elfimage.Open(benchImage(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { im.Close() })
	if fi, err := os.Stat(im.Path()); err == nil {
		b.SetBytes(fi.Size())
	}
	return im
}

// BenchmarkSymfile: the symbol file gdb is given, Rebase of the image.
func BenchmarkSymfile(b *testing.B) {
	im := openBench(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := im.Symfile(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchProcs, "ns/proc")
}

// BenchmarkPublishGDB: Symfile, registration with the GDB JIT interface
// (copy into fresh memory, list link, notification) and unregistration.
func BenchmarkPublishGDB(b *testing.B) {
	im := openBench(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := publish.GDB(im); err != nil {
			b.Fatal(err)
		}
		if err := publish.UnpublishGDB(im); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchProcs, "ns/proc")
}

// BenchmarkJitdumpFunctions: the records' contents for every procedure
// (code, lines, CFI decoded from .eh_frame).
func BenchmarkJitdumpFunctions(b *testing.B) {
	im := openBench(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := publish.JitdumpFunctions(im); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchProcs, "ns/proc")
}

// BenchmarkPerfMapEntries: one perf map entry per procedure.
func BenchmarkPerfMapEntries(b *testing.B) {
	im := openBench(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := publish.PerfMapEntries(im); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchProcs, "ns/proc")
}

// benchProcs is the procedure count of the benchmark image, the root
// package's query benchmark image (issue 3).
const benchProcs = 10000

var (
	benchOnce sync.Once
	benchPath string
	benchErr  error
)

// benchImage writes, once per test binary, an image of benchProcs
// procedures with docstrings, optional arguments and nested lets.
func benchImage(b *testing.B) string {
	benchOnce.Do(func() {
		var src strings.Builder
		for i := range benchProcs {
			fmt.Fprintf(&src, "(define* (p%d a #:optional (b %d))\n  \"Procedure %d.\"\n  (let ((c (+ a b)))\n    (let* ((d (* c 2)) (e (- d a)))\n      (+ c d e))))\n", i, i, i)
		}
		src.WriteString("(define (main) (p0 1))\n")
		m, err := scheme.Compile("bench.scm", []byte(src.String()))
		if err != nil {
			benchErr = err
			return
		}
		dir, err := os.MkdirTemp("", "elfimage-publish-bench")
		if err != nil {
			benchErr = err
			return
		}
		benchPath = filepath.Join(dir, "bench.elf")
		benchErr = elfimage.WriteFile(benchPath, m, elfimage.LinkOptions{})
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchPath
}
