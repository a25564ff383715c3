package elfimage_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/lang/scheme"
)

// benchProcs is the procedure count of the benchmark image (issue 3:
// queries on a freshly loaded 10,000-procedure image).
const benchProcs = 10000

var (
	benchOnce  sync.Once
	benchPath  string
	benchAddrs []uint64 // the middle of 64 procedures spread over the image
	benchErr   error
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
		dir, err := os.MkdirTemp("", "elfimage-bench")
		if err != nil {
			benchErr = err
			return
		}
		benchPath = filepath.Join(dir, "bench.elf")
		if benchErr = elfimage.WriteFile(benchPath, m, elfimage.LinkOptions{}); benchErr != nil {
			return
		}
		im, err := elfimage.Open(benchPath, nil)
		if err != nil {
			benchErr = err
			return
		}
		defer im.Close()
		procs, err := im.Procedures()
		if err != nil {
			benchErr = err
			return
		}
		var user []elfimage.Procedure
		for _, p := range procs {
			if !p.Internal {
				user = append(user, p)
			}
		}
		for i := range 64 {
			p := user[(i*7919)%len(user)]
			benchAddrs = append(benchAddrs, p.Start+p.Size/2)
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchPath
}

// firstQuery times one query on a freshly opened image, with the page
// faults of touching the mapped tail for the first time. Open and Close
// are in ns/op; the query alone is reported as ns/query, timed with the
// monotonic clock (b.StopTimer would add a stop-the-world memory
// statistics read to every iteration).
func firstQuery(b *testing.B, query func(im *elfimage.Image, addr uint64) error) {
	path := benchImage(b)
	var total time.Duration
	n := 0
	for b.Loop() {
		im, err := elfimage.Open(path, nil)
		if err != nil {
			b.Fatal(err)
		}
		addr := benchAddrs[n&63]
		t0 := time.Now()
		err = query(im, addr)
		total += time.Since(t0)
		n++
		if err != nil {
			b.Fatal(err)
		}
		im.Close()
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(n), "ns/query")
}

// repeatedQuery times a query on an image that has answered before.
func repeatedQuery(b *testing.B, query func(im *elfimage.Image, addr uint64) error) {
	im, err := elfimage.Open(benchImage(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer im.Close()
	addrs := benchAddrs
	for _, a := range addrs {
		if err := query(im, a); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		query(im, addrs[i&63])
		i++
	}
}

func procedure(im *elfimage.Image, addr uint64) error { _, err := im.Procedure(addr); return err }
func position(im *elfimage.Image, addr uint64) error  { _, err := im.PositionAt(addr); return err }
func procAt(im *elfimage.Image, addr uint64) error    { _, err := im.ProcedureAt(addr); return err }
func locals(im *elfimage.Image, addr uint64) error    { _, err := im.Locals(addr); return err }

func BenchmarkFirstProcedure(b *testing.B)   { firstQuery(b, procedure) }
func BenchmarkFirstPosition(b *testing.B)    { firstQuery(b, position) }
func BenchmarkFirstProcedureAt(b *testing.B) { firstQuery(b, procAt) }
func BenchmarkProcedure(b *testing.B)        { repeatedQuery(b, procedure) }
func BenchmarkPosition(b *testing.B)         { repeatedQuery(b, position) }
func BenchmarkProcedureAt(b *testing.B)      { repeatedQuery(b, procAt) }
func BenchmarkLocals(b *testing.B)           { repeatedQuery(b, locals) }

// BenchmarkFirstTouch is the floor under every first query: reading one
// byte of a tail page of a freshly opened image (one page fault).
func BenchmarkFirstTouch(b *testing.B) {
	firstQuery(b, func(im *elfimage.Image, addr uint64) error {
		data := im.Bytes()
		sink += data[len(data)-int(addr%4096)-1]
		return nil
	})
}

var sink byte
