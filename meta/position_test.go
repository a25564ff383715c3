package meta

import (
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/line"
)

// withRows gives every procedure of ps (which must have line sequences)
// the rows of prog's sequence i, and the file path the line program's
// header resolves for them.
func withRows(t testing.TB, ps []Proc, sec line.Sections, prog *line.Program) {
	r, err := line.NewSequenceReader(sec, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	for i := range ps {
		p := &ps[i]
		p.File, _ = r.FilePath(prog.Sequences[i].Rows[0].File)
		for _, row := range prog.Sequences[i].Rows {
			p.Rows = append(p.Rows, Row{Offset: row.Address - p.Start, Line: row.Line, Column: row.Column})
		}
	}
}

// lineAnswer is what the line sequence says for addr, as [Table.Position]
// gives it (ok false: not covered).
func lineAnswer(t testing.TB, r *line.Reader, seq, addr uint64) (file string, ln, col uint32, ok bool) {
	row, err := r.SequenceRow(seq, addr)
	if err == line.ErrNotCovered {
		return "", 0, 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	file, _ = r.FilePath(row.File)
	return file, row.Line, row.Column, true
}

// TestPositions: in both string forms, Position gives at every address of
// every procedure (and one before and past it) what the procedure's line
// sequence gives, Lookup's entries carry the block, Positions returns
// the file and rows, and Describe neither.
func TestPositions(t *testing.T) {
	ps := genProcs(30)
	lsec, prog := genLines(t, ps)
	withRows(t, ps, lsec, prog)
	r, err := line.NewSequenceReader(lsec, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	shared, strs, err := encodeShared(ps)
	if err != nil {
		t.Fatal(err)
	}
	inline, err := Encode(ps)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		sec, strs []byte
	}{{"inline", inline, nil}, {"shared", shared, strs}} {
		tab, err := NewTable(c.sec, c.strs)
		if err != nil {
			t.Fatal(err)
		}
		if c.sec[7]&FlagPositions == 0 {
			t.Fatalf("%s: flags %#x", c.name, c.sec[7])
		}
		for i, p := range ps {
			for a := p.Start - 1; a <= p.Start+p.Size; a++ {
				e, err := tab.Lookup(a)
				if err == ErrNotFound {
					continue
				}
				if err != nil || !e.HasPositions {
					t.Fatalf("%s: Lookup(%#x): %+v, %v", c.name, a, e, err)
				}
				pos, err := tab.Position(e, a)
				file, ln, col, ok := lineAnswer(t, r, e.LineSeq, a)
				if !ok {
					if err != ErrNotFound {
						t.Fatalf("%s: Position(%#x) = %+v, %v, want ErrNotFound", c.name, a, pos, err)
					}
					continue
				}
				if err != nil || string(pos.File) != file || pos.Line != ln || pos.Column != col {
					t.Fatalf("%s: Position(%#x) = %q:%d:%d, %v, want %q:%d:%d", c.name, a, pos.File, pos.Line, pos.Column, err, file, ln, col)
				}
			}
			e, _ := tab.At(i)
			file, rows, err := tab.Positions(e)
			if err != nil || file != p.File || !reflect.DeepEqual(rows, p.Rows) {
				t.Fatalf("%s: Positions(%d): %q %v, %v", c.name, i, file, rows, err)
			}
			if d, err := tab.Describe(e); err != nil || d.File != "" || d.Rows != nil || d.Name != p.Name {
				t.Fatalf("%s: Describe(%d): %+v, %v", c.name, i, d, err)
			}
			if _, err := tab.Position(e, p.Start+p.Size); err != ErrNotFound {
				t.Fatalf("%s: Position past the end: %v", c.name, err)
			}
		}
	}
}

// TestPositionsOptional: a table where some procedures have no rows (no
// block: their positions come from the line sequence) and one with no
// rows at all (no flag, the format of the tables written before the
// index); rows without a line sequence and rows out of order are refused.
func TestPositionsOptional(t *testing.T) {
	ps := genProcs(4)
	lsec, prog := genLines(t, ps)
	withRows(t, ps, lsec, prog)
	ps[1].Rows, ps[1].File = nil, ""
	sec, err := Encode(ps)
	if err != nil {
		t.Fatal(err)
	}
	tab, _ := NewTable(sec, nil)
	for i := range ps {
		e, err := tab.At(i)
		if err != nil || e.HasPositions != (i != 1) || !e.HasLineSeq {
			t.Errorf("At(%d): %+v, %v", i, e, err)
		}
		if i == 1 {
			if _, err := tab.Position(e, e.Start); !errors.Is(err, ErrNotFound) || err == ErrNotFound {
				t.Errorf("Position without a block: %v", err)
			}
		}
	}
	plain := genProcs(4)
	genLines(t, plain)
	sec, err = Encode(plain)
	if err != nil || sec[7]&FlagPositions != 0 {
		t.Fatalf("no rows: flags %#x, %v", sec[7], err)
	}
	bad := genProcs(2)
	bad[0].Rows = []Row{{Offset: 0, Line: 1}}
	if _, err := Encode(bad); !errors.Is(err, ErrInvalid) {
		t.Errorf("rows without a line sequence: %v", err)
	}
	genLines(t, bad)
	bad[0].Rows = []Row{{Offset: 4, Line: 1}, {Offset: 2, Line: 1}}
	if _, err := Encode(bad); !errors.Is(err, ErrInvalid) {
		t.Errorf("rows going back: %v", err)
	}
	bad[0].Rows = []Row{{Offset: bad[0].Size, Line: 1}}
	if _, err := Encode(bad); !errors.Is(err, ErrInvalid) {
		t.Errorf("row past the end: %v", err)
	}
	bad[0].Rows, bad[0].File = []Row{{Offset: 0, Line: 1}}, "a\x00b"
	if _, err := Encode(bad); !errors.Is(err, ErrInvalid) {
		t.Errorf("file with a NUL: %v", err)
	}
}

// TestPositionsHostile corrupts each field of a position block: the
// reader returns a FormatError naming the section, the field's offset
// and the field, never a panic or a wrong answer.
func TestPositionsHostile(t *testing.T) {
	ps := genProcs(1)
	ps[0].Size = 0x300
	ps[0].HasLineSeq, ps[0].LineSeq = true, 0x40
	ps[0].File = "/src/f.scm"
	ps[0].Rows = []Row{{Offset: 0, Line: 5, Column: 1}, {Offset: 0x100, Line: 3, Column: 200}, {Offset: 0x200, Line: 9}}
	st := dwarf.NewStrTab()
	sec, err := EncodeWith(ps, st)
	if err != nil {
		t.Fatal(err)
	}
	strs := st.Bytes()
	tab, _ := NewTable(sec, strs)
	e, err := tab.At(0)
	if err != nil || !e.HasPositions {
		t.Fatal(e, err)
	}
	off, end := e.PositionBlock()
	// The block: file (1 byte), then rows 00 05 01 | 80 02 7e c8 01 | 80 02 06 00.
	want := []byte{byte(st.Add("/src/f.scm")), 0x00, 0x05, 0x01, 0x80, 0x02, 0x7e, 0xc8, 0x01, 0x80, 0x02, 0x06, 0x00}
	if got := sec[off:end]; string(got) != string(want) {
		t.Fatalf("block % x, want % x", got, want)
	}
	// posLen, in the entry's head (which starts where the block ends):
	// after size, name, shape, lineUnit and lineSeq.
	at := end
	for range 5 {
		_, n := dwarf.Uleb128(sec[at:])
		at += n
	}
	posLenAt := uint64(at)
	if v, _ := dwarf.Uleb128(sec[at:]); v != uint64(end-off) {
		t.Fatalf("posLen at %#x is %d, want %d", at, v, end-off)
	}
	mod := func(f func(b []byte)) *Table {
		b := append([]byte(nil), sec...)
		f(b)
		tab, err := NewTable(b, strs)
		if err != nil {
			t.Fatal(err)
		}
		return tab
	}
	query := func(tab *Table, addr uint64) error {
		e, err := tab.At(0)
		if err != nil {
			return err
		}
		_, err = tab.Position(e, addr)
		if err == nil {
			_, _, err = tab.Positions(e)
		}
		return err
	}
	a := ps[0].Start + 0x250
	// posLen longer than the info area before the entry.
	infoStart := HeaderSize + int(sec[5]) + int(sec[6]) // one record
	wantFormatError(t, "posLen", query(mod(func(b []byte) { b[posLenAt] = byte(end - infoStart + 1) }), a), posLenAt, "posLen")
	// The file string's offset outside the string section.
	if len(strs) >= 0x80 {
		t.Fatalf("string section of %d bytes: the test needs a one-byte offset past it", len(strs))
	}
	wantFormatError(t, "file offset", query(mod(func(b []byte) { b[off] = byte(len(strs)) }), a), uint64(off), "position file")
	// A row offset past the procedure's end, and one that overflows.
	wantFormatError(t, "row offset", query(mod(func(b []byte) { b[off+4], b[off+5] = 0x80, 0x7f }), a), uint64(off+4), "position row offset")
	// A line going below 0.
	wantFormatError(t, "row line", query(mod(func(b []byte) { b[off+6] = 0x70 }), a), uint64(off+6), "position row line")
	// A LEB128 number cut by the block's end (its last row's column).
	wantFormatError(t, "truncated", query(mod(func(b []byte) { b[end-1] = 0x80 }), a), uint64(end-1), "position row column")
	// A block that starts one byte late, inside its first row: read as
	// rows shifted by a byte, whose last is cut by the block's end.
	wantFormatError(t, "shifted", query(mod(func(b []byte) { b[posLenAt] = byte(end - off - 1) }), a), ^uint64(0), "position row column")
	// Every truncation of the section's info area: refused or answered,
	// never a panic.
	for n := len(sec) - 1; n > HeaderSize; n-- {
		b := append([]byte(nil), sec[:n]...)
		binary.LittleEndian.PutUint32(b[12:], binary.LittleEndian.Uint32(b[12:])-uint32(len(sec)-n))
		tab, err := NewTable(b, strs)
		if err != nil {
			continue
		}
		_ = query(tab, a)
	}
}

// FuzzPositions derives a procedure's rows from the input, encodes them
// both as a position block (both string forms) and as a DWARF line
// sequence, and checks that [Table.Position] gives at every address what
// [line.Reader.SequenceRow] gives: the oracle of the index Link writes.
func FuzzPositions(f *testing.F) {
	f.Add([]byte{0, 1, 1, 4, 2, 3, 0, 7, 0, 9, 3, 1}, uint16(40), uint8(5))
	f.Add([]byte{5, 0x80, 0x10, 2, 0, 1, 0, 0, 0, 0xff, 0xff, 0xff}, uint16(300), uint8(4))
	f.Add([]byte{}, uint16(1), uint8(2))
	f.Fuzz(func(t *testing.T, in []byte, size uint16, version uint8) {
		if size == 0 {
			size = 1
		}
		start := uint64(0x10000)
		var rows []line.Row
		var mrows []Row
		var off uint64
		ln := uint32(1)
		for len(in) >= 3 && len(rows) < 200 {
			off += uint64(in[0] % 16)
			ln = uint32(int64(ln) + int64(int8(in[1]))*int64(1+in[2]>>6))
			col := uint32(in[2] & 0x3f)
			if in[2]&0x20 != 0 {
				col *= 1000
			}
			in = in[3:]
			if off >= uint64(size) {
				break
			}
			rows = append(rows, line.Row{Address: start + off, File: 1, Line: ln, Column: col, IsStmt: true})
			mrows = append(mrows, Row{Offset: off, Line: ln, Column: col})
		}
		if len(rows) == 0 {
			return
		}
		v := uint16(2 + version%4)
		prog := &line.Program{Enc: dwarf.Encoding{Version: v, Format: dwarf.Format32, AddrSize: 8}, CompDir: "/c",
			Files:     []line.File{{Name: "x/../f.scm"}, {Name: "x/../f.scm"}},
			Sequences: []line.Sequence{{Start: start, End: start + uint64(size), Rows: rows}}}
		lineStr := dwarf.NewStrTab()
		data, offs, err := prog.EncodeOffsets(lineStr)
		if err != nil {
			return // rows the DWARF writer refuses
		}
		r, err := line.NewSequenceReader(line.Sections{Line: data, LineStr: lineStr.Bytes(), Order: binary.LittleEndian}, 0, "/c")
		if err != nil {
			t.Fatal(err)
		}
		file, _ := r.FilePath(1)
		ps := []Proc{{Name: "p", Start: start, Size: uint64(size), HasLineSeq: true, LineSeq: offs[0], File: file, Rows: mrows}}
		inline, err := Encode(ps)
		if err != nil {
			t.Fatal(err)
		}
		st := dwarf.NewStrTab()
		shared, err := EncodeWith(ps, st)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range [][2][]byte{{inline, nil}, {shared, st.Bytes()}} {
			tab, err := NewTable(c[0], c[1])
			if err != nil {
				t.Fatal(err)
			}
			for a := start - 1; a <= start+uint64(size); a++ {
				wf, wl, wc, ok := lineAnswer(t, r, offs[0], a)
				e, err := tab.Lookup(a)
				if err == ErrNotFound {
					if ok {
						t.Fatalf("%#x: Lookup: not found, the sequence says %s:%d:%d", a, wf, wl, wc)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				p, err := tab.Position(e, a)
				if !ok {
					if err != ErrNotFound {
						t.Fatalf("%#x: %q:%d:%d, %v, want ErrNotFound", a, p.File, p.Line, p.Column, err)
					}
					continue
				}
				if err != nil || string(p.File) != wf || p.Line != wl || p.Column != wc {
					t.Fatalf("%#x: %q:%d:%d, %v, want %s:%d:%d", a, p.File, p.Line, p.Column, err, wf, wl, wc)
				}
			}
		}
	})
}
