package elfimage_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/lang/scheme"
	"github.com/elfimage/elfimage/meta"
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
// statistics read to every iteration), and as cpu-ns/query, the CPU time
// of the thread running it (its page faults included; other processes on
// a loaded machine do not stretch it as they stretch the wall time), net
// of the cost of reading that clock; faults/query counts its minor page
// faults.
func firstQuery(b *testing.B, query func(im *elfimage.Image, addr uint64) error) {
	path := benchImage(b)
	runtime.LockOSThread() // the thread CPU clock must be this goroutine's
	defer runtime.UnlockOSThread()
	clockCost := threadClockCost()
	var total, cpu time.Duration
	var faults int64
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		im, err := elfimage.Open(path, nil)
		if err != nil {
			b.Fatal(err)
		}
		addr := benchAddrs[n&63]
		f0 := minorFaults()
		c0 := threadCPU()
		t0 := time.Now()
		err = query(im, addr)
		total += time.Since(t0)
		cpu += threadCPU() - c0 - clockCost
		faults += minorFaults() - f0
		n++
		if err != nil {
			b.Fatal(err)
		}
		im.Close()
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(n), "ns/query")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "cpu-ns/query")
	b.ReportMetric(float64(faults)/float64(n), "faults/query")
}

// threadCPU returns the CPU time of the calling thread.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// threadClockCost is the least thread CPU time two back-to-back reads
// of that clock measure: what each timed interval carries besides the
// query.
func threadClockCost() time.Duration {
	best := time.Duration(1 << 62)
	for range 1000 {
		c0 := threadCPU()
		if d := threadCPU() - c0; d < best {
			best = d
		}
	}
	return best
}

// minorFaults returns the process's minor page faults so far.
func minorFaults() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Minflt
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

// BenchmarkFirstTouchPosition is the floor under a first PositionAt: on a
// freshly opened image, read one byte of each place of the file the query
// must read, and nothing else: the procedure table's header, the records
// its bisection probes, the procedure's info entry, the line program
// unit's header, .debug_line_str (the file name) and the procedure's line
// sequence. Each place more than a fault-around window (64 KiB) from the
// others costs a first-touch fault; in a 10,000-procedure image they are
// four to six windows.
func BenchmarkFirstTouchPosition(b *testing.B) {
	path := benchImage(b)
	var offs [][]uint64 // per benchAddrs entry, the file offsets to touch
	{
		im, err := elfimage.Open(path, nil)
		if err != nil {
			b.Fatal(err)
		}
		procsOff := sectionOffset(b, im, meta.SectionProcs)
		lineOff := sectionOffset(b, im, ".debug_line")
		lineStrOff := sectionOffset(b, im, ".debug_line_str")
		sec, err := im.Section(meta.SectionProcs)
		if err != nil {
			b.Fatal(err)
		}
		t, err := meta.NewTable(sec, nil)
		if err != nil {
			b.Fatal(err)
		}
		ss, is := int(sec[5]), int(sec[6])
		rec := ss + is
		infoOff := meta.HeaderSize + t.Len()*rec
		for _, addr := range benchAddrs {
			o := []uint64{procsOff, lineStrOff}
			lo, hi := 0, t.Len()
			for lo < hi { // Table.Lookup's bisection
				m := int(uint(lo+hi) >> 1)
				o = append(o, procsOff+uint64(meta.HeaderSize+m*rec))
				e, err := t.At(m)
				if err != nil {
					b.Fatal(err)
				}
				if e.Start <= addr {
					lo = m + 1
				} else {
					hi = m
				}
			}
			r := meta.HeaderSize + (lo-1)*rec + ss
			var rel uint64
			for i := is - 1; i >= 0; i-- {
				rel = rel<<8 | uint64(sec[r+i])
			}
			e, err := t.At(lo - 1)
			if err != nil || !e.HasLineSeq {
				b.Fatalf("procedure at %#x: %+v, %v", addr, e, err)
			}
			o = append(o, procsOff+uint64(infoOff)+rel, lineOff+e.LineUnit, lineOff+e.LineSeq)
			offs = append(offs, o)
		}
		im.Close()
	}
	n := 0
	firstQuery(b, func(im *elfimage.Image, addr uint64) error {
		data := im.Bytes()
		for _, off := range offs[n&63] {
			sink += data[off]
		}
		n++
		return nil
	})
}

func sectionOffset(b *testing.B, im *elfimage.Image, name string) uint64 {
	secs, err := im.Sections()
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range secs {
		if s.Name == name {
			return s.Offset
		}
	}
	b.Fatalf("no section %s", name)
	return 0
}

var sink byte
