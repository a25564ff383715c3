package elfimage_test

import (
	"encoding/binary"
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
	edwarf "github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/lang/scheme"
	"github.com/elfimage/elfimage/meta"
)

// benchProcs is the procedure count of the benchmark image (issue 3:
// queries on a freshly loaded 10,000-procedure image).
const benchProcs = 10000

var (
	benchOnce sync.Once
	benchPath string
	// benchLinesPath is the benchmark image without the procedure
	// table's position index: PositionAt runs the line sequence.
	benchLinesPath string
	benchAddrs     []uint64 // the middle of 64 procedures spread over the image
	benchErr       error
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
		// The same image as Link wrote it before the position index.
		benchLinesPath = filepath.Join(dir, "bench-lines.elf")
		old := elfimage.SetPositionIndex(false)
		benchErr = elfimage.WriteFile(benchLinesPath, m, elfimage.LinkOptions{})
		elfimage.SetPositionIndex(old)
		if benchErr != nil {
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
	firstQueryOn(b, benchImage(b), query)
}

// firstQueryOn is firstQuery on the image at path (benchPath or
// benchLinesPath).
func firstQueryOn(b *testing.B, path string, query func(im *elfimage.Image, addr uint64) error) {
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
// its bisection probes, the procedure's info entry, and then, when the
// table has a position index (meta.FlagPositions), the entry's position
// block (its first and last byte: the query scans up to the row) and the
// file name's string; else (an image linked before the index) the line
// program unit's header, .debug_line_str (the file name) and the
// procedure's line sequence. Each place more than a fault-around window
// (64 KiB) from the others costs a first-touch fault unless the kernel
// maps the whole 2 MiB span at once.
func BenchmarkFirstTouchPosition(b *testing.B) { firstTouchPosition(b, benchImage(b)) }

// BenchmarkFirstPositionLines and BenchmarkFirstTouchPositionLines are
// BenchmarkFirstPosition and BenchmarkFirstTouchPosition on the benchmark
// image linked without the position index: the line-sequence path of the
// images Link wrote before it.
func BenchmarkFirstPositionLines(b *testing.B) {
	benchImage(b)
	firstQueryOn(b, benchLinesPath, position)
}

func BenchmarkFirstTouchPositionLines(b *testing.B) {
	benchImage(b)
	firstTouchPosition(b, benchLinesPath)
}

func firstTouchPosition(b *testing.B, path string) {
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
		// The info area is the section's last L bytes (header field 12).
		infoOff := uint64(len(sec)) - uint64(binary.LittleEndian.Uint32(sec[12:]))
		for _, addr := range benchAddrs {
			o := []uint64{procsOff}
			// Table.Lookup's bisections (of the start index, then of
			// one chunk of records, or of all the records in a table
			// without the index), ending at the record's info field.
			probes := t.Probes(addr)
			for _, p := range probes {
				o = append(o, procsOff+uint64(p))
			}
			var rel uint64
			r := probes[len(probes)-1]
			for i := int(sec[6]) - 1; i >= 0; i-- {
				rel = rel<<8 | uint64(sec[r+i])
			}
			e, err := t.Lookup(addr)
			if err != nil || !e.HasLineSeq {
				b.Fatalf("procedure at %#x: %+v, %v", addr, e, err)
			}
			o = append(o, procsOff+infoOff+rel) // the entry
			if e.HasPositions {
				p, err := t.Position(e, addr)
				if err != nil {
					b.Fatal(err)
				}
				// The block, and the file name (Link's tables keep their
				// strings in the info area: FlagInlineStrings).
				if sec[7]&meta.FlagInlineStrings == 0 {
					b.Fatal("table strings not inline")
				}
				off, _ := e.PositionBlock()
				o = append(o, procsOff+uint64(off), procsOff+uint64(scanEnd(b, sec, t, e, addr)-1), procsOff+uint64(infoOff)+p.FileOff)
			} else {
				o = append(o, lineStrOff, lineOff+e.LineUnit, lineOff+e.LineSeq)
			}
			offs = append(offs, o)
		}
		im.Close()
	}
	n := 0
	firstQueryOn(b, path, func(im *elfimage.Image, addr uint64) error {
		data := im.Bytes()
		for _, off := range offs[n&63] {
			sink += data[off]
		}
		n++
		return nil
	})
}

// scanEnd returns the section offset just past the last byte
// Table.Position reads of e's position block for addr: the end of the
// first row past addr, or of the block.
func scanEnd(b *testing.B, sec []byte, t *meta.Table, e meta.Entry, addr uint64) int {
	_, rows, err := t.Positions(e)
	if err != nil {
		b.Fatal(err)
	}
	at, end := e.PositionBlock()
	fileOff, _ := edwarf.Uleb128(sec[at:end])
	at += edwarf.Uleb128Size(fileOff)
	var off uint64
	var line int64
	for _, r := range rows {
		at += edwarf.Uleb128Size(r.Offset-off) + edwarf.Sleb128Size(int64(r.Line)-line) + edwarf.Uleb128Size(uint64(r.Column))
		if r.Offset > addr-e.Start {
			return at
		}
		off, line = r.Offset, int64(r.Line)
	}
	return end
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
