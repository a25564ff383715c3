package elfimage_test

import (
	"os"
	"testing"

	"github.com/elfimage/elfimage"
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
		if err := elfimage.PublishGDB(im); err != nil {
			b.Fatal(err)
		}
		if err := im.UnpublishGDB(); err != nil {
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
		if _, err := im.JitdumpFunctions(); err != nil {
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
		if _, err := im.PerfMapEntries(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchProcs, "ns/proc")
}
