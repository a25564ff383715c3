package symbolize

import (
	"encoding/binary"
	"slices"
	"testing"

	edwarf "github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/line"
)

// TestLineTableNarrow: a decoded line table answers every address as the
// program's rows say (in the sequence with the smallest end above the
// address, the last row at or before it), whether its rows are kept
// narrow or, because one row does not fit (a column or file index of
// 2^16 or more, an address 2^32 or more above its sequence's start), wide;
// also when that row comes after narrow sequences (their rows widened),
// and when a dropped sequence (discarded code) had made the table wide.
func TestLineTableNarrow(t *testing.T) {
	long := func(base uint64, n int, col uint32) []line.Row {
		var rows []line.Row
		for i := range n {
			a := base + uint64(i)*6
			rows = append(rows, line.Row{Address: a, File: 1 + uint64(i%3), Line: uint32(10 + i/2), Column: col + uint32(i%2), IsStmt: true})
			if i%5 == 0 { // two rows at one address: the last holds
				rows = append(rows, line.Row{Address: a, File: 1, Line: uint32(1000 + i), IsStmt: true})
			}
		}
		return rows
	}
	seq := func(start uint64, rows []line.Row) line.Sequence {
		return line.Sequence{Start: start, End: rows[len(rows)-1].Address + 8, Rows: rows}
	}
	files := []line.File{{Name: "a.c"}, {Name: "a.c"}, {Name: "b.h"}, {Name: "c.h"}}
	manyFiles := slices.Clone(files)
	for len(manyFiles) <= 1<<16+1 {
		manyFiles = append(manyFiles, line.File{Name: "x.h"})
	}
	// Sequences enough for the table's index of their ends: in reverse
	// address order, some adjacent (one's end the next one's start),
	// some apart, and (overlap) some overlapping the one before.
	many := func(n int, overlap bool) []line.Sequence {
		var seqs []line.Sequence
		at := uint64(0x410000)
		for i := range n {
			rows := long(at, 3+i%7, 2)
			seqs = append(seqs, seq(at, rows))
			switch end := rows[len(rows)-1].Address + 8; {
			case overlap && i%3 == 0:
				at = end - 10
			case i%4 == 0:
				at = end
			default:
				at = end + uint64(i%5)*0x40
			}
		}
		slices.Reverse(seqs)
		return seqs
	}
	cases := []struct {
		name  string
		files []line.File
		seqs  []line.Sequence
		live  live
		wide  bool
		below bool // a row below its sequence's start (hostile): patched in
	}{
		{"narrow", files, []line.Sequence{seq(0x401000, long(0x401000, 100, 3)), seq(0x400000, long(0x400000, 5, 0)), seq(0x500000, long(0x500000, 40, 1<<16-2))}, allLive, false, false},
		{"wide column after narrow sequences", files, []line.Sequence{seq(0x401000, long(0x401000, 100, 3)), seq(0x300000, long(0x300000, 50, 7)), seq(0x500000, long(0x500000, 40, 1<<16-1))}, allLive, true, false},
		{"wide span", files, []line.Sequence{seq(0x401000, long(0x401000, 60, 3)),
			seq(0x1000, append(long(0x1000, 40, 1), long(0x1000+1<<32+4, 40, 2)...))}, allLive, true, false},
		{"wide file", manyFiles, []line.Sequence{seq(0x401000, long(0x401000, 60, 3)),
			seq(0x600000, []line.Row{{Address: 0x600000, File: 1, Line: 1}, {Address: 0x600010, File: 1 << 16, Line: 2}})}, allLive, true, false},
		{"wide, dropped", files, []line.Sequence{seq(0x401000, long(0x401000, 60, 3)), seq(0x10, long(0x10, 40, 1<<17)), seq(0x402000, long(0x402000, 50, 4))}, live{0x1000, ^uint64(0)}, true, false},
		{"many sequences", files, many(70, false), allLive, false, false},
		{"many sequences, overlapping", files, many(45, true), allLive, false, false},
		{"many sequences, wide", files, append(many(40, false), seq(0x900000, long(0x900000, 10, 1<<16))), allLive, true, false},
		{"wide, a row below the start", files, []line.Sequence{seq(0x401000, long(0x401000, 60, 3)), seq(0xfffffffffffff000, long(0xfffffffffffff000, 40, 4))}, allLive, true, true},
	}
	for _, c := range cases {
		p := &line.Program{Enc: edwarf.Default64, CompDir: "/src", Files: c.files, Sequences: c.seqs}
		var strs edwarf.StrTab
		sec, err := p.Encode(&strs)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if c.below {
			// Before the last DW_LNE_end_sequence: a row below the
			// sequence's start, 0x2000 above it modulo 2^64, then
			// back to its end.
			end := c.seqs[len(c.seqs)-1].End
			setAddr := func(a uint64) []byte {
				return binary.LittleEndian.AppendUint64([]byte{0, 9, byte(edwarf.DW_LNE_set_address)}, a)
			}
			patch := append(setAddr(c.seqs[len(c.seqs)-1].Start+0x2000), byte(edwarf.DW_LNS_copy))
			patch = append(patch, setAddr(end)...)
			at := len(sec) - 3
			if sec[at] != 0 || sec[at+2] != byte(edwarf.DW_LNE_end_sequence) {
				t.Fatalf("%s: no end_sequence at the end: % x", c.name, sec[at:])
			}
			sec = slices.Insert(sec, at, patch...)
			binary.LittleEndian.PutUint32(sec, binary.LittleEndian.Uint32(sec)+uint32(len(patch)))
		}
		d := &dwarfData{line: sec, live: c.live}
		d.sec.LineStr, d.sec.Order = strs.Bytes(), binary.LittleEndian
		tab, err := decodeLines(d, 0, "/src")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if tab.wide != c.wide {
			t.Errorf("%s: wide = %v, want %v", c.name, tab.wide, c.wide)
		}
		if c.below {
			continue // unsorted rows: the model does not apply
		}
		if (len(tab.seqs) >= minBucketKeys) != (tab.endIndex.b != nil) {
			t.Errorf("%s: %d sequences, index of ends %v", c.name, len(tab.seqs), tab.endIndex.b != nil)
		}
		// The model's answer: sequences by end (stable), the last row
		// at or before the address, else the first.
		kept := slices.DeleteFunc(slices.Clone(c.seqs), func(s line.Sequence) bool { return !c.live.ok(s.Start) })
		slices.SortStableFunc(kept, func(a, b line.Sequence) int { return cmp(a.End, b.End) })
		want := func(addr uint64) (lineRow, bool) {
			for _, s := range kept {
				if s.End <= addr {
					continue
				}
				if s.Start > addr {
					return lineRow{}, false
				}
				r := s.Rows[0]
				for _, x := range s.Rows {
					if x.Address <= addr {
						r = x
					}
				}
				return lineRow{uint32(r.File), r.Line, r.Column}, true
			}
			return lineRow{}, false
		}
		n := 0
		for _, s := range c.seqs {
			for _, r := range append(s.Rows, line.Row{Address: s.Start}, line.Row{Address: s.End}) {
				for _, a := range []uint64{r.Address - 1, r.Address, r.Address + 1} {
					got, gok := tab.lookup(a)
					w, wok := want(a)
					if got != w || gok != wok {
						t.Fatalf("%s: lookup(%#x) = %v, %v; want %v, %v", c.name, a, got, gok, w, wok)
					}
					n++
				}
			}
		}
		if n == 0 {
			t.Fatalf("%s: nothing compared", c.name)
		}
	}
}
