package line

import (
	"bytes"
	"debug/dwarf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"

	edwarf "github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// goLineReader builds a one-CU .debug_info whose DW_AT_stmt_list points at
// offset off of line, and returns Go's debug/dwarf line reader for it.
func goLineReader(line, lineStr, str []byte, off uint64, compDir string, addrSize uint8, bo binary.ByteOrder) (*dwarf.LineReader, error) {
	order := bo.(binary.AppendByteOrder)
	abbrev := []byte{1, 0x11, 0, 0x03, 0x08, 0x1b, 0x08, 0x10, 0x17, 0, 0, 0}
	var die []byte
	die = append(die, 1)
	die = append(die, "prog.src\x00"...)
	die = append(die, compDir...)
	die = append(die, 0)
	die = order.AppendUint32(die, uint32(off))
	var info []byte
	info = order.AppendUint32(info, uint32(2+4+1+len(die)))
	info = order.AppendUint16(info, 4)
	info = order.AppendUint32(info, 0)
	info = append(info, addrSize)
	info = append(info, die...)
	d, err := dwarf.New(abbrev, nil, nil, info, line, nil, nil, str)
	if err != nil {
		return nil, err
	}
	if lineStr != nil {
		if err := d.AddSection(".debug_line_str", lineStr); err != nil {
			return nil, err
		}
	}
	e, err := d.Reader().Next()
	if err != nil {
		return nil, err
	}
	return d.LineReader(e)
}

func sampleProgram(enc edwarf.Encoding) *Program {
	rows := func(base uint64) []Row {
		return []Row{
			{Address: base, File: 1, Line: 10, Column: 1, IsStmt: true},
			{Address: base + 4, File: 1, Line: 11, Column: 5, IsStmt: true, PrologueEnd: true},
			{Address: base + 4, File: 1, Line: 12, Column: 7, IsStmt: true},
			{Address: base + 9, File: 2, Line: 3, Column: 0, IsStmt: false, Discriminator: 3},
			{Address: base + 300, File: 2, Line: 2000, Column: 200, IsStmt: true, BasicBlock: true},
			{Address: base + 317, File: 1, Line: 0, IsStmt: true},
			{Address: base + 100000, File: 1, Line: 1, IsStmt: true, EpilogueBegin: true},
			{Address: base + 100001, File: 3, Line: 1 << 20, Column: 1 << 16, IsStmt: true},
		}
	}
	return &Program{
		Enc:     enc,
		CompDir: "/home/user/src",
		Dirs:    []string{"lib", "/usr/include"},
		Files: []File{
			{Name: "main.scm", Dir: 0},
			{Name: "main.scm", Dir: 0},
			{Name: "util.scm", Dir: 1},
			{Name: "stdio.h", Dir: 2},
		},
		Sequences: []Sequence{
			{Start: 0x1000, End: 0x1000 + 100010, Rows: rows(0x1000)},
			{Start: 0x400000, End: 0x400100, Rows: []Row{{Address: 0x400000, File: 1, Line: 5, IsStmt: true}, {Address: 0x400010, File: 1, Line: 4, IsStmt: true}}},
			{Start: 0x200, End: 0x220, Rows: []Row{{Address: 0x210, File: 2, Line: 7, IsStmt: true}}},
		},
	}
}

var wantPaths = []string{"/home/user/src/main.scm", "/home/user/src/main.scm", "/home/user/src/lib/util.scm", "/usr/include/stdio.h"}

type encCase struct {
	name string
	enc  edwarf.Encoding
}

func encodings() []encCase {
	var cs []encCase
	for _, v := range []uint16{2, 3, 4, 5} {
		for _, f := range []edwarf.Format{edwarf.Format32, edwarf.Format64} {
			for _, as := range []uint8{4, 8} {
				for _, bo := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
					if bo == binary.BigEndian && (as == 4 || f == edwarf.Format64) {
						continue
					}
					e := edwarf.Encoding{Version: v, Format: f, AddrSize: as, ByteOrder: bo}
					cs = append(cs, encCase{fmt.Sprintf("v%d/%v/addr%d/%v", v, f, as, bo), e})
				}
			}
		}
	}
	return cs
}

func sameRow(a, b Row) bool {
	a.OpIndex, b.OpIndex = 0, 0
	return a == b
}

func TestRoundTrip(t *testing.T) {
	for _, c := range encodings() {
		t.Run(c.name, func(t *testing.T) {
			p := sampleProgram(c.enc)
			lineStr := edwarf.NewStrTab()
			prefix := []byte("padding!") // the unit need not start at 0
			b, err := p.Encode(lineStr)
			if err != nil {
				t.Fatal(err)
			}
			sec := Sections{Line: append(prefix, b...), LineStr: lineStr.Bytes(), Order: c.enc.ByteOrder}
			tab, err := Decode(sec, uint64(len(prefix)), p.CompDir)
			if err != nil {
				t.Fatal(err)
			}
			if tab.Version != c.enc.Version || tab.Format != c.enc.Format {
				t.Errorf("header version %d format %v, want %d %v", tab.Version, tab.Format, c.enc.Version, c.enc.Format)
			}
			if tab.End != uint64(len(sec.Line)) {
				t.Errorf("unit end %#x, want %#x", tab.End, len(sec.Line))
			}
			for i, want := range wantPaths {
				if i == 0 && c.enc.Version < 5 {
					continue
				}
				f, ok := tab.File(uint64(i))
				if !ok || f.Path != want {
					t.Errorf("file %d = %+v, want path %q", i, f, want)
				}
			}
			// Sequences come back sorted by Start with the same rows.
			if len(tab.Sequences) != 3 {
				t.Fatalf("%d sequences, want 3", len(tab.Sequences))
			}
			order := []int{2, 0, 1}
			for i, si := range order {
				in, out := p.Sequences[si], tab.Sequences[i]
				if out.Start != in.Rows[0].Address || out.End != in.End {
					t.Errorf("sequence %d: [%#x, %#x), want [%#x, %#x)", i, out.Start, out.End, in.Rows[0].Address, in.End)
				}
				if len(out.Rows) != len(in.Rows) {
					t.Fatalf("sequence %d: %d rows, want %d", i, len(out.Rows), len(in.Rows))
				}
				for j := range in.Rows {
					if !sameRow(out.Rows[j], in.Rows[j]) {
						t.Errorf("sequence %d row %d:\n got %+v\nwant %+v", i, j, out.Rows[j], in.Rows[j])
					}
				}
			}
			// Go's debug/dwarf must read the same rows.
			gr, err := goLineReader(sec.Line, sec.LineStr, nil, uint64(len(prefix)), p.CompDir, c.enc.AddrSize, c.enc.ByteOrder)
			if err != nil {
				t.Fatal(err)
			}
			// debug/dwarf does not join a relative DWARF 5 directory
			// with directory 0 (DWARF 5 section 6.2.4 item 20 says
			// it is relative to the compilation directory; gdb and
			// LLVM join them).
			goPaths := slicesCloneS(wantPaths)
			if c.enc.Version >= 5 {
				goPaths[2] = "lib/util.scm"
			}
			var want []Row
			for _, s := range p.Sequences {
				want = append(want, s.Rows...)
				want = append(want, Row{Address: s.End, EndSequence: true})
			}
			var e dwarf.LineEntry
			for i := 0; ; i++ {
				err := gr.Next(&e)
				if err == io.EOF {
					if i != len(want) {
						t.Errorf("debug/dwarf read %d rows, want %d", i, len(want))
					}
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if i >= len(want) {
					t.Fatalf("debug/dwarf read extra row %+v", e)
				}
				w := want[i]
				if e.Address != w.Address || e.EndSequence != w.EndSequence {
					t.Errorf("debug/dwarf row %d: address %#x end %v, want %#x %v", i, e.Address, e.EndSequence, w.Address, w.EndSequence)
				}
				if w.EndSequence {
					continue
				}
				if e.File == nil || e.File.Name != goPaths[w.File] || e.Line != int(w.Line) || e.Column != int(w.Column) ||
					e.IsStmt != w.IsStmt || e.PrologueEnd != w.PrologueEnd || e.EpilogueBegin != w.EpilogueBegin ||
					e.BasicBlock != w.BasicBlock || e.Discriminator != int(w.Discriminator) {
					t.Errorf("debug/dwarf row %d: %+v (file %v), want %+v", i, e, e.File, w)
				}
			}
		})
	}
}

func TestLookup(t *testing.T) {
	p := sampleProgram(edwarf.Default64)
	lineStr := edwarf.NewStrTab()
	b, err := p.Encode(lineStr)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := Decode(Sections{Line: b, LineStr: lineStr.Bytes()}, 0, p.CompDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		addr uint64
		ok   bool
		line uint32
	}{
		{0, false, 0},
		{0x1ff, false, 0},
		{0x200, false, 0}, // sequence [0x200,0x220) has its first row at 0x210
		{0x210, true, 7},
		{0x21f, true, 7},
		{0x220, false, 0},
		{0x1000, true, 10},
		{0x1003, true, 10},
		{0x1004, true, 12}, // the last row at an address wins
		{0x1009, true, 3},
		{0x1000 + 299, true, 3},
		{0x1000 + 300, true, 2000},
		{0x1000 + 100001, true, 1 << 20},
		{0x1000 + 100009, true, 1 << 20},
		{0x1000 + 100010, false, 0},
		{0x400000, true, 5},
		{0x4000ff, true, 4},
		{0x400100, false, 0},
		{^uint64(0), false, 0},
	} {
		r, ok := tab.Lookup(c.addr)
		if ok != c.ok || r.Line != c.line {
			t.Errorf("Lookup(%#x) = line %d, %v; want %d, %v", c.addr, r.Line, ok, c.line, c.ok)
		}
	}
	if n := testing.AllocsPerRun(100, func() { tab.Lookup(0x1000 + 300) }); n != 0 {
		t.Errorf("Lookup allocates %v times", n)
	}
}

// TestEncodingChoices checks that the encoder picks short encodings: a
// small advance is one special opcode, and an address advance that is not
// a multiple of minimum_instruction_length uses DW_LNS_fixed_advance_pc.
func TestEncodingChoices(t *testing.T) {
	base := &Program{Enc: edwarf.Default64, Files: []File{{Name: "a"}, {Name: "a"}}}
	seq := func(rows ...Row) []Sequence {
		return []Sequence{{Start: 0x100, End: 0x200, Rows: rows}}
	}
	body := func(p *Program) []byte {
		b, err := p.Encode(nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewReader(Sections{Line: b}, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		return b[r.Header().ProgramOffset:]
	}
	setAddr := []byte{0, 9, 2, 0, 1, 0, 0, 0, 0, 0, 0}
	p := *base
	p.Sequences = seq(Row{Address: 0x100, File: 1, Line: 1, IsStmt: true}, Row{Address: 0x104, File: 1, Line: 3, IsStmt: true})
	want := append(slicesClone(setAddr), 13+5, 13+(2+5)+14*4, byte(edwarf.DW_LNS_advance_pc), 0xfc, 0x01, 0, 1, 1)
	if got := body(&p); !bytes.Equal(got, want) {
		t.Errorf("program\n got % x\nwant % x", got, want)
	}
	p = *base
	p.MinInstLength = 4
	p.Sequences = seq(Row{Address: 0x100, File: 1, Line: 1, IsStmt: true}, Row{Address: 0x103, File: 1, Line: 1, IsStmt: true}, Row{Address: 0x10b, File: 1, Line: 1, IsStmt: true})
	got := body(&p)
	if !bytes.Contains(got, []byte{byte(edwarf.DW_LNS_fixed_advance_pc), 3, 0, 13 + 5}) {
		t.Errorf("no fixed_advance_pc for an unaligned advance: % x", got)
	}
	tab, err := Decode(Sections{Line: func() []byte { b, _ := p.Encode(nil); return b }()}, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range tab.Sequences[0].Rows {
		if r.Address != p.Sequences[0].Rows[i].Address {
			t.Errorf("row %d address %#x, want %#x", i, r.Address, p.Sequences[0].Rows[i].Address)
		}
	}
}

func slicesClone(b []byte) []byte { return append([]byte(nil), b...) }

func slicesCloneS(b []string) []string { return append([]string(nil), b...) }

func TestInvalidPrograms(t *testing.T) {
	ok := func() *Program {
		return &Program{Enc: edwarf.Default64, Files: []File{{Name: "a"}, {Name: "a"}},
			Sequences: []Sequence{{Start: 0x10, End: 0x20, Rows: []Row{{Address: 0x10, File: 1, Line: 1}, {Address: 0x14, File: 1, Line: 2}}}}}
	}
	if _, err := ok().Encode(nil); err != nil {
		t.Fatalf("valid program refused: %v", err)
	}
	cases := map[string]func(p *Program){
		"unsorted":        func(p *Program) { p.Sequences[0].Rows[0].Address = 0x15 },
		"below start":     func(p *Program) { p.Sequences[0].Rows[0].Address = 0xf },
		"at end":          func(p *Program) { p.Sequences[0].Rows[1].Address = 0x20 },
		"start after end": func(p *Program) { p.Sequences[0].Start = 0x21 },
		"file range":      func(p *Program) { p.Sequences[0].Rows[1].File = 2 },
		"file 0 in v4":    func(p *Program) { p.Enc.Version = 4; p.Sequences[0].Rows[1].File = 0 },
		"dir range":       func(p *Program) { p.Files[1].Dir = 1 },
		"addr size":       func(p *Program) { p.Enc.AddrSize = 4; p.Sequences[0].End = 1 << 32 },
		"version":         func(p *Program) { p.Enc.Version = 6 },
		"opcode base":     func(p *Program) { p.OpcodeBase = 10 },
		"empty v4 name":   func(p *Program) { p.Enc.Version = 4; p.Files[1].Name = "" },
		"NUL in name":     func(p *Program) { p.Files[1].Name = "a\x00b" },
		"end_sequence":    func(p *Program) { p.Sequences[0].Rows[0].EndSequence = true },
	}
	for name, mod := range cases {
		p := ok()
		mod(p)
		if _, err := p.Encode(edwarf.NewStrTab()); !errors.Is(err, ErrInvalidProgram) {
			t.Errorf("%s: err = %v, want ErrInvalidProgram", name, err)
		}
	}
	// Line 0 is allowed.
	p := ok()
	p.Sequences[0].Rows[0].Line = 0
	if _, err := p.Encode(nil); err != nil {
		t.Errorf("line 0 refused: %v", err)
	}
}

func TestDecodeErrors(t *testing.T) {
	p := sampleProgram(edwarf.Default64)
	b, err := p.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	mod := func(f func(b []byte) []byte) []byte { return f(slicesClone(b)) }
	cases := map[string]struct {
		data  []byte
		field string
	}{
		"header_length past end": {mod(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[8:], 1<<20); return b }), "header_length"},
		"unit past section":      {mod(func(b []byte) []byte { binary.LittleEndian.PutUint32(b, 1<<20); return b }), "unit_length"},
		"version 1":              {mod(func(b []byte) []byte { b[4] = 1; return b }), "version"},
		"truncated":              {b[:20], "unit_length"},
		"line_range 0":           {mod(func(b []byte) []byte { b[4+2+2+4+4] = 0; return b }), "line_range"},
		"opcode length":          {mod(func(b []byte) []byte { b[4+2+2+4+6+1] = 7; return b }), "standard_opcode_lengths"},
	}
	for name, c := range cases {
		_, err := Decode(Sections{Line: c.data}, 0, "")
		var fe *edwarf.FormatError
		if !errors.As(err, &fe) || fe.Source != ".debug_line" || fe.Field != c.field {
			t.Errorf("%s: err = %v, want FormatError in .debug_line field %s", name, err, c.field)
		}
	}
	// A truncated program (rows without end_sequence) reads as an error
	// or as fewer sequences, never a panic.
	for n := range len(b) {
		Decode(Sections{Line: b[:n]}, 0, "")
	}
}

// TestGCC decodes the line program gcc writes for a small C file and
// compares every row with Go's debug/dwarf.
func TestGCC(t *testing.T) {
	src := "#include <stdio.h>\nstatic int sq(int x) { return x * x; }\nint main(int argc, char **argv) {\n  int s = 0;\n  for (int i = 0; i < argc; i++)\n    s += sq(i);\n  printf(\"%d\\n\", s);\n  return 0;\n}\n"
	for _, v := range []string{"-gdwarf-5", "-gdwarf-4"} {
		f, data := tooltest.GCCBinary(t, src, "-g", v, "-O1")
		sec := Sections{Line: data(".debug_line"), Str: data(".debug_str"), LineStr: data(".debug_line_str")}
		d, err := f.DWARF()
		if err != nil {
			t.Fatal(err)
		}
		cus := 0
		for r := d.Reader(); ; {
			e, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			if e == nil {
				break
			}
			if e.Tag != dwarf.TagCompileUnit {
				r.SkipChildren()
				continue
			}
			r.SkipChildren()
			off, ok := e.Val(dwarf.AttrStmtList).(int64)
			if !ok {
				continue
			}
			compDir, _ := e.Val(dwarf.AttrCompDir).(string)
			cus++
			gr, err := d.LineReader(e)
			if err != nil {
				t.Fatal(err)
			}
			ours, err := NewReader(sec, uint64(off), compDir)
			if err != nil {
				t.Fatalf("%s: %v", v, err)
			}
			compareReaders(t, ours, gr, true)
			tab, err := Decode(sec, uint64(off), compDir)
			if err != nil {
				t.Fatal(err)
			}
			main, _ := d.LineReader(e)
			var le dwarf.LineEntry
			for main.Next(&le) == nil {
				if le.EndSequence {
					continue
				}
				r, ok := tab.Lookup(le.Address)
				if !ok || r.Address != le.Address {
					t.Errorf("%s: Lookup(%#x) = %+v, %v", v, le.Address, r, ok)
				}
			}
		}
		if cus == 0 {
			t.Errorf("%s: no compile unit with a line program", v)
		}
	}
}

// compareReaders runs both readers to the end and compares every row.
// With fullPaths unset only base names of files are compared (Go resolves
// DWARF 5 directories differently for relative and absolute corner cases).
func compareReaders(t testing.TB, ours *Reader, gr *dwarf.LineReader, fullPaths bool) {
	t.Helper()
	var row Row
	var e dwarf.LineEntry
	for i := 0; ; i++ {
		err1 := ours.Next(&row)
		err2 := gr.Next(&e)
		if err1 != nil || err2 != nil {
			if err1 == io.EOF && err2 != io.EOF || err1 != io.EOF && err2 == io.EOF && err1 == nil {
				t.Fatalf("row %d: ours %v, debug/dwarf %v", i, err1, err2)
			}
			return
		}
		if row.Address != e.Address || row.EndSequence != e.EndSequence {
			t.Fatalf("row %d: address %#x end %v; debug/dwarf %#x %v", i, row.Address, row.EndSequence, e.Address, e.EndSequence)
		}
		if row.EndSequence {
			continue
		}
		if row.Line != uint32(e.Line) || row.Column != uint32(e.Column) || row.IsStmt != e.IsStmt {
			t.Fatalf("row %d: %+v; debug/dwarf %+v", i, row, e)
		}
		var name string
		if fs := ours.Files(); row.File < uint64(len(fs)) {
			name = fs[row.File].Path
		}
		if e.File == nil {
			continue
		}
		gn := e.File.Name
		if !fullPaths {
			name, gn = baseName(name), baseName(gn)
		}
		if name != gn {
			t.Fatalf("row %d: file %q; debug/dwarf %q", i, name, gn)
		}
	}
}

func baseName(s string) string {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' || s[i] == '\\' {
			return s[i+1:]
		}
	}
	return s
}

func BenchmarkLookup(b *testing.B) {
	p := sampleProgram(edwarf.Default64)
	lineStr := edwarf.NewStrTab()
	sec, err := p.Encode(lineStr)
	if err != nil {
		b.Fatal(err)
	}
	tab, err := Decode(Sections{Line: sec, LineStr: lineStr.Bytes()}, 0, p.CompDir)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		tab.Lookup(0x1000 + 300)
	}
}
