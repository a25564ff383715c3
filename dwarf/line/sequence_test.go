package line

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	edwarf "github.com/elfimage/elfimage/dwarf"
)

// twoUnits encodes a small unit followed by sampleProgram's unit, so the
// second unit sits at a non-zero offset, and returns the section, the
// second unit's offset and its sequences' section offsets.
func twoUnits(t testing.TB, enc edwarf.Encoding, lineStr *edwarf.StrTab) (sec []byte, unitOff uint64, seqOffs []uint64, p *Program) {
	t.Helper()
	first := &Program{Enc: enc, CompDir: "/x", Files: []File{{Name: "a.scm"}, {Name: "a.scm"}},
		Sequences: []Sequence{{Start: 0x10, End: 0x20, Rows: []Row{{Address: 0x10, File: 1, Line: 99, IsStmt: true}}}}}
	a, err := first.Encode(lineStr)
	if err != nil {
		t.Fatal(err)
	}
	p = sampleProgram(enc)
	b, offs, err := p.EncodeOffsets(lineStr)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := p.Encode(lineStr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(plain, b) {
		t.Fatal("EncodeOffsets data differs from Encode")
	}
	if len(offs) != len(p.Sequences) {
		t.Fatalf("%d offsets for %d sequences", len(offs), len(p.Sequences))
	}
	unitOff = uint64(len(a))
	for i := range offs {
		// Each reported offset is a DW_LNE_set_address opcode.
		if o := offs[i]; b[o] != 0 || b[o+2] != byte(edwarf.DW_LNE_set_address) {
			t.Fatalf("sequence %d: offset %#x does not hold DW_LNE_set_address: % x", i, o, b[o:o+3])
		}
		offs[i] += unitOff
	}
	return append(a, b...), unitOff, offs, p
}

// TestSequenceRow checks that running one sequence answers every address
// exactly as decoding the whole program does.
func TestSequenceRow(t *testing.T) {
	for _, c := range encodings() {
		t.Run(c.name, func(t *testing.T) {
			lineStr := edwarf.NewStrTab()
			sec, unitOff, offs, p := twoUnits(t, c.enc, lineStr)
			s := Sections{Line: sec, LineStr: lineStr.Bytes(), Order: c.enc.ByteOrder}
			tab, err := Decode(s, unitOff, "/home/user/src")
			if err != nil {
				t.Fatal(err)
			}
			r, err := NewReader(s, unitOff, "/home/user/src")
			if err != nil {
				t.Fatal(err)
			}
			for i, seq := range p.Sequences {
				first := seq.Rows[0].Address
				var addrs []uint64
				for _, row := range seq.Rows {
					addrs = append(addrs, row.Address-1, row.Address, row.Address+1)
				}
				addrs = append(addrs, seq.Start-1, seq.Start, seq.End-1, seq.End, seq.End+1)
				for _, a := range addrs {
					got, err := r.SequenceRow(offs[i], a)
					if a < first || a >= seq.End {
						if !errors.Is(err, ErrNotCovered) {
							t.Errorf("sequence %d addr %#x: got %+v, %v; want ErrNotCovered", i, a, got, err)
						}
						continue
					}
					want, ok := tab.Lookup(a)
					if err != nil || !ok || !sameRow(got, want) {
						t.Errorf("sequence %d addr %#x: got %+v, %v; want %+v, %v", i, a, got, err, want, ok)
					}
					if f := r.Files(); got.File >= uint64(len(f)) || f[got.File].Path != wantPaths[got.File] {
						t.Errorf("sequence %d addr %#x: file %d not resolved to %q", i, a, got.File, wantPaths[got.File])
					}
				}
			}
			// The reader is not disturbed: Next still starts at the first row.
			var row Row
			if err := r.Next(&row); err != nil || row.Address != p.Sequences[0].Rows[0].Address {
				t.Errorf("Next after SequenceRow: %+v, %v", row, err)
			}
		})
	}
}

func TestSequenceRowErrors(t *testing.T) {
	enc := edwarf.Default64
	sec, unitOff, offs, _ := twoUnits(t, enc, nil)
	s := Sections{Line: sec}
	r, err := NewReader(s, unitOff, "/cd")
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []uint64{0, unitOff, r.Header().ProgramOffset - 1, r.Header().End, 1 << 62} {
		_, err := r.SequenceRow(off, 0x1000)
		var fe *edwarf.FormatError
		if !errors.As(err, &fe) || fe.Field != "sequence offset" || fe.Offset != off {
			t.Errorf("SequenceRow(%#x): %v, want a FormatError at the sequence offset", off, err)
		}
	}
	// Cut the last sequence's DW_LNE_end_sequence (00 01 01) off the unit
	// by shortening unit_length: the run must fail, not return a row.
	cut := append([]byte(nil), sec[:len(sec)-3]...)
	le := binary.LittleEndian
	le.PutUint32(cut[unitOff:], le.Uint32(cut[unitOff:])-3)
	r, err = NewReader(Sections{Line: cut}, unitOff, "/cd")
	if err != nil {
		t.Fatal(err)
	}
	last := offs[len(offs)-1]
	_, err = r.SequenceRow(last, 0x210)
	var fe *edwarf.FormatError
	if !errors.As(err, &fe) || fe.Field != "DW_LNE_end_sequence" {
		t.Errorf("truncated sequence: %v, want a FormatError for DW_LNE_end_sequence", err)
	}
}

func TestSequenceRowAllocs(t *testing.T) {
	sec, unitOff, offs, _ := twoUnits(t, edwarf.Default64, nil)
	r, err := NewReader(Sections{Line: sec}, unitOff, "/cd")
	if err != nil {
		t.Fatal(err)
	}
	n := testing.AllocsPerRun(100, func() {
		if _, err := r.SequenceRow(offs[0], 0x1000+300); err != nil {
			t.Fatal(err)
		}
		if _, err := r.SequenceRow(offs[1], 0x1); err != ErrNotCovered {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Errorf("SequenceRow allocates %v times per run", n)
	}
}

// FuzzSequenceRow runs one sequence at arbitrary offsets of arbitrary
// .debug_line bytes: no panic, errors are FormatErrors or ErrNotCovered,
// a row found is at or below addr; and for the unit's first sequence
// (which starts at ProgramOffset) SequenceRow must give the row that
// reading the rows one by one with Next gives: the last row at or below
// addr before DW_LNE_end_sequence, when addr is below the end and the
// addresses do not decrease.
func FuzzSequenceRow(f *testing.F) {
	sec, _, offs, _ := twoUnits(f, edwarf.Default64, nil)
	for _, o := range offs {
		f.Add(sec, o, uint64(0x1000+9))
	}
	f.Fuzz(func(t *testing.T, data []byte, seqOff, addr uint64) {
		for unit := uint64(0); unit < uint64(len(data)); {
			r, err := NewReader(Sections{Line: data, Str: data, LineStr: data}, unit, "/cd")
			if err != nil {
				return
			}
			for _, off := range []uint64{seqOff, r.Header().ProgramOffset} {
				row, err := r.SequenceRow(off, addr)
				var fe *edwarf.FormatError
				switch {
				case err == nil:
					if row.EndSequence || row.Address > addr {
						t.Fatalf("row %+v for addr %#x", row, addr)
					}
				case errors.Is(err, ErrNotCovered), errors.As(err, &fe):
				default:
					t.Fatalf("error %T %v", err, err)
				}
				if off == r.Header().ProgramOffset {
					want, werr := firstSequenceRow(data, unit, addr)
					if werr == nil && (err != nil || row != want) {
						t.Fatalf("SequenceRow(%#x, %#x) = %+v, %v; Next gives %+v", off, addr, row, err, want)
					}
					if errors.Is(werr, ErrNotCovered) && !errors.Is(err, ErrNotCovered) {
						t.Fatalf("SequenceRow(%#x, %#x) = %+v, %v; Next gives no row covering it", off, addr, row, err)
					}
				}
			}
			unit = r.Header().End
		}
	})
}

// errSkip: firstSequenceRow has no answer to compare with.
var errSkip = errors.New("no comparison")

// firstSequenceRow reads the first sequence of the unit at unit row by row
// with Next and returns the last row at or below addr, ErrNotCovered when
// addr is outside [first row, end_sequence), or errSkip when the sequence
// does not decode or its addresses decrease.
func firstSequenceRow(data []byte, unit, addr uint64) (Row, error) {
	r, err := NewReader(Sections{Line: data, Str: data, LineStr: data}, unit, "/cd")
	if err != nil {
		return Row{}, errSkip
	}
	var rows []Row
	for len(rows) < 1<<14 {
		var row Row
		if err := r.Next(&row); err != nil {
			return Row{}, errSkip
		}
		if len(rows) > 0 && row.Address < rows[len(rows)-1].Address {
			return Row{}, errSkip
		}
		rows = append(rows, row)
		if row.EndSequence {
			break
		}
	}
	if len(rows) == 0 || !rows[len(rows)-1].EndSequence {
		return Row{}, errSkip
	}
	if addr < rows[0].Address || addr >= rows[len(rows)-1].Address {
		return Row{}, ErrNotCovered
	}
	var want Row
	for _, row := range rows[:len(rows)-1] {
		if row.Address <= addr {
			want = row
		}
	}
	return want, nil
}

// TestInitSequenceReuse: InitSequence into a Reader that held another
// unit (the first one, its tables built as NewReader builds them, then
// a run of Next) leaves nothing of it: header, file paths and sequence rows are those of
// NewSequenceReader; and a failing InitSequence reports
// NewSequenceReader's error.
func TestInitSequenceReuse(t *testing.T) {
	for _, c := range encodings() {
		t.Run(c.name, func(t *testing.T) {
			lineStr := edwarf.NewStrTab()
			sec, unitOff, offs, p := twoUnits(t, c.enc, lineStr)
			s := Sections{Line: sec, LineStr: lineStr.Bytes(), Order: c.enc.ByteOrder}
			want, err := NewSequenceReader(s, unitOff, "/home/user/src")
			if err != nil {
				t.Fatal(err)
			}
			var r Reader
			if err := r.init(s, 0, "/x", false); err != nil {
				t.Fatal(err)
			}
			var row Row
			if err := r.Next(&row); err != nil {
				t.Fatal(err)
			}
			if err := r.InitSequence(s, unitOff, "/home/user/src"); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*r.Header(), *want.Header()) {
				t.Errorf("header %+v, want %+v", *r.Header(), *want.Header())
			}
			for i := range uint64(len(p.Files) + 1) {
				got, gok := r.FilePath(i)
				w, wok := want.FilePath(i)
				if got != w || gok != wok {
					t.Errorf("FilePath(%d) = %q, %v; want %q, %v", i, got, gok, w, wok)
				}
			}
			for i, seq := range p.Sequences {
				for _, a := range []uint64{seq.Start, seq.End - 1} {
					got, gerr := r.SequenceRow(offs[i], a)
					w, werr := want.SequenceRow(offs[i], a)
					if !sameRow(got, w) || (gerr == nil) != (werr == nil) {
						t.Errorf("sequence %d addr %#x: %+v, %v; want %+v, %v", i, a, got, gerr, w, werr)
					}
				}
			}
			bad := append([]byte(nil), sec...)
			bad[unitOff+4] = 9 // version 9
			_, werr := NewSequenceReader(Sections{Line: bad, LineStr: s.LineStr, Order: s.Order}, unitOff, "")
			gerr := r.InitSequence(Sections{Line: bad, LineStr: s.LineStr, Order: s.Order}, unitOff, "")
			if werr == nil || gerr == nil || gerr.Error() != werr.Error() {
				t.Errorf("InitSequence of a bad version: %v; NewSequenceReader: %v", gerr, werr)
			}
		})
	}
}

// TestAppendJoinPath: appendJoinPath appends what joinPath returns, for
// clean and unclean paths, into a dst with room and without.
func TestAppendJoinPath(t *testing.T) {
	parts := []string{"", "/", "a", "/abs", "a/", "./a", "a/../b", "..", "a//b/", "./", "x/./y/."}
	for _, d0 := range parts {
		for _, d := range parts {
			for _, n := range parts {
				for idx := range uint64(2) {
					want := joinPath([]byte(d0), []byte(d), idx, []byte(n))
					for _, c := range []int{2, 80} {
						dst := append(make([]byte, 0, c), "p:"...)
						got := appendJoinPath(dst, []byte(d0), []byte(d), idx, []byte(n))
						if string(got) != "p:"+want {
							t.Fatalf("appendJoinPath(%q, %q, %d, %q) = %q; want %q", d0, d, idx, n, got, "p:"+want)
						}
					}
				}
			}
		}
	}
}
