//go:build linux

package meta

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/elfimage/elfimage/dwarf/line"
)

// mappedImage writes the table, strings and line program to one file and
// returns a function that maps it afresh (each call a new mapping whose
// pages are not yet faulted in, as after loading an image) and one that
// unmaps.
func mappedImage(b *testing.B, im *benchImage) (mapFile func() (sec, strs []byte, lines line.Sections, all []byte), unmap func([]byte)) {
	path := filepath.Join(b.TempDir(), "tail")
	var data []byte
	data = append(data, im.sec...)
	data = append(data, im.strs...)
	data = append(data, im.lines.Line...)
	data = append(data, im.lines.LineStr...)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	n1, n2, n3 := len(im.sec), len(im.sec)+len(im.strs), len(im.sec)+len(im.strs)+len(im.lines.Line)
	mapFile = func() ([]byte, []byte, line.Sections, []byte) {
		m, err := syscall.Mmap(int(f.Fd()), 0, len(data), syscall.PROT_READ, syscall.MAP_PRIVATE)
		if err != nil {
			b.Fatal(err)
		}
		return m[:n1], m[n1:n2], line.Sections{Line: m[n2:n3], LineStr: m[n3:]}, m
	}
	unmap = func(m []byte) {
		if err := syscall.Munmap(m); err != nil {
			b.Fatal(err)
		}
	}
	return mapFile, unmap
}

// minorFaults returns the process's minor page faults so far.
func minorFaults() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Minflt
}

// faultMeter accumulates page faults and time of the timed query only.
type faultMeter struct {
	faults int64
	n      int
	t0     int64
}

func (f *faultMeter) begin() { f.t0 = minorFaults() }
func (f *faultMeter) end()   { f.faults += minorFaults() - f.t0; f.n++ }
func (f *faultMeter) report(b *testing.B) {
	b.ReportMetric(float64(f.faults)/float64(f.n), "faults/op")
}

// BenchmarkFirstLookupMmap is BenchmarkFirstLookupInHeap on a fresh
// mapping of a file each iteration, as after loading an image: the file is
// in the page cache (it was just written), so the first touch of each page
// is a minor fault, which is timed and counted (faults/op); the mmap and
// munmap themselves are not timed. A cold page cache (a major fault, a
// disk read) is not measured: dropping it needs root.
func BenchmarkFirstLookupMmap(b *testing.B) {
	b.Run("inline", func(b *testing.B) { firstLookupMmap(b, false) })
	b.Run("shared", func(b *testing.B) { firstLookupMmap(b, true) })
}

func firstLookupMmap(b *testing.B, shared bool) {
	im := newBenchImage(b, shared)
	mapFile, unmap := mappedImage(b, im)
	i := 0
	var fm faultMeter
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		sec, strs, _, m := mapFile()
		b.StartTimer()
		fm.begin()
		tab, err := NewTable(sec, strs)
		if err != nil {
			b.Fatal(err)
		}
		e, err := tab.Lookup(im.addrs[i%len(im.addrs)])
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tab.Describe(e); err != nil {
			b.Fatal(err)
		}
		fm.end()
		b.StopTimer()
		unmap(m)
		b.StartTimer()
		i++
	}
	fm.report(b)
}

// BenchmarkFirstPositionMmap is BenchmarkFirstPositionInHeap on a fresh
// mapping of a file (in the page cache) each iteration, with the minor
// faults of its first touches timed and counted, as in
// BenchmarkFirstLookupMmap.
func BenchmarkFirstPositionMmap(b *testing.B) {
	b.Run("inline", func(b *testing.B) { firstPositionMmap(b, false) })
	b.Run("shared", func(b *testing.B) { firstPositionMmap(b, true) })
}

func firstPositionMmap(b *testing.B, shared bool) {
	im := newBenchImage(b, shared)
	mapFile, unmap := mappedImage(b, im)
	i := 0
	var fm faultMeter
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		sec, strs, lines, m := mapFile()
		b.StartTimer()
		a := im.addrs[i%len(im.addrs)]
		fm.begin()
		tab, err := NewTable(sec, strs)
		if err != nil {
			b.Fatal(err)
		}
		e, err := tab.Lookup(a)
		if err != nil {
			b.Fatal(err)
		}
		r, err := line.NewReader(lines, e.LineUnit, im.compDirName)
		if err != nil {
			b.Fatal(err)
		}
		row, err := r.SequenceRow(e.LineSeq, a)
		if err != nil {
			b.Fatal(err)
		}
		_ = r.Files()[row.File].Path
		fm.end()
		b.StopTimer()
		unmap(m)
		b.StartTimer()
		i++
	}
	fm.report(b)
}
