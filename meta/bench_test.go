package meta

import (
	"testing"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/line"
)

type benchImage struct {
	procs       []Proc
	sec, strs   []byte
	lines       line.Sections
	addrs       []uint64 // one address inside each procedure, shuffled
	compDirName string
}

// newBenchImage builds the 10,000-procedure table (strings inline, or
// shared in a separate section) and line program.
func newBenchImage(b *testing.B, shared bool) *benchImage {
	b.Helper()
	ps := genProcs(10000)
	lines, _ := genLines(b, ps)
	sec, err := Encode(ps)
	if err != nil {
		b.Fatal(err)
	}
	var strs []byte
	if shared {
		st := dwarf.NewStrTab()
		if sec, err = EncodeWith(ps, st); err != nil {
			b.Fatal(err)
		}
		strs = st.Bytes()
	}
	im := &benchImage{procs: ps, sec: sec, strs: strs, lines: lines, compDirName: "/home/user/src"}
	for i := range ps {
		j := (i * 7919) % len(ps) // a permutation: 7919 is prime and does not divide 10000
		p := ps[j]
		im.addrs = append(im.addrs, p.Start+p.Size*2/3)
	}
	return im
}

// BenchmarkFirstLookupInHeap is the CPU work of the first Procedure(pc)
// query on a 10,000-procedure table: NewTable, Lookup and Describe from
// scratch each iteration, on bytes already in the Go heap (and, after the
// first iterations, in the CPU caches). It measures no page fault and no
// read from a file: BenchmarkFirstLookupMmap measures the same query on a
// fresh mapping of a file, with its page faults (faults/op).
func BenchmarkFirstLookupInHeap(b *testing.B) {
	im := newBenchImage(b, false)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		tab, err := NewTable(im.sec, im.strs)
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
		i++
	}
}

// BenchmarkLookup is a repeated Lookup (name, range, line sequence).
func BenchmarkLookup(b *testing.B) {
	im := newBenchImage(b, false)
	tab, err := NewTable(im.sec, im.strs)
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tab.Lookup(im.addrs[i%len(im.addrs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkLookupDescribe is a repeated full query: Lookup and Describe.
func BenchmarkLookupDescribe(b *testing.B) {
	im := newBenchImage(b, false)
	tab, err := NewTable(im.sec, im.strs)
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		e, err := tab.Lookup(im.addrs[i%len(im.addrs)])
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tab.Describe(e); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkFirstPositionInHeap is the CPU work of the first
// file:line:column query: NewTable and Lookup for the sequence, the line
// program header, one sequence run, from scratch each iteration on bytes
// already in the Go heap (no page faults, warm caches).
// BenchmarkFirstPositionMmap measures it on a fresh file mapping.
func BenchmarkFirstPositionInHeap(b *testing.B) {
	im := newBenchImage(b, false)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		a := im.addrs[i%len(im.addrs)]
		tab, err := NewTable(im.sec, im.strs)
		if err != nil {
			b.Fatal(err)
		}
		e, err := tab.Lookup(a)
		if err != nil {
			b.Fatal(err)
		}
		r, err := line.NewReader(im.lines, e.LineUnit, im.compDirName)
		if err != nil {
			b.Fatal(err)
		}
		row, err := r.SequenceRow(e.LineSeq, a)
		if err != nil {
			b.Fatal(err)
		}
		_ = r.Files()[row.File].Path
		i++
	}
}

// BenchmarkPosition is a repeated position query with the table and the
// line program header cached: Lookup and one sequence run.
func BenchmarkPosition(b *testing.B) {
	im := newBenchImage(b, false)
	tab, err := NewTable(im.sec, im.strs)
	if err != nil {
		b.Fatal(err)
	}
	r, err := line.NewReader(im.lines, 0, im.compDirName)
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		a := im.addrs[i%len(im.addrs)]
		e, err := tab.Lookup(a)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.SequenceRow(e.LineSeq, a); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkFullLineDecode is the alternative the sequence index avoids:
// decoding the whole 10,000-sequence line program for one query.
func BenchmarkFullLineDecode(b *testing.B) {
	im := newBenchImage(b, false)
	b.ReportAllocs()
	for b.Loop() {
		tab, err := line.Decode(im.lines, 0, im.compDirName)
		if err != nil {
			b.Fatal(err)
		}
		if _, ok := tab.Lookup(im.addrs[0]); !ok {
			b.Fatal("no row")
		}
	}
}
