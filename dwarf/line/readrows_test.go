package line

import (
	"encoding/binary"
	"fmt"
	"testing"

	edwarf "github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// checkReadRows runs two readers of one program, one by Next and one by
// ReadRows in batches of the sizes in sizes (cycled), and fails t at the
// first row, error or register that differs: ReadRows must give Next's
// rows (their positions), stop where Next stops with Next's error, and
// leave the registers as Next leaves them. It returns the rows compared.
func checkReadRows(t testing.TB, next, batch *Reader, sizes []int) int {
	t.Helper()
	var row Row
	buf := make([]PosRow, 64)
	rows := 0
	for k := 0; rows < 1<<16; k++ {
		n, err := batch.ReadRows(buf[:sizes[k%len(sizes)]])
		for i := range n {
			nerr := next.Next(&row)
			if nerr != nil {
				t.Fatalf("row %d: ReadRows gave %+v; Next: %v", rows, buf[i], nerr)
			}
			want := PosRow{Address: row.Address, File: row.File, Line: row.Line, Column: row.Column, EndSequence: row.EndSequence}
			if buf[i] != want {
				t.Fatalf("row %d: ReadRows %+v; Next %+v", rows, buf[i], want)
			}
			rows++
		}
		if err != nil {
			nerr := next.Next(&row)
			if nerr == nil || nerr.Error() != err.Error() {
				t.Fatalf("after row %d: ReadRows: %v; Next: %v (%+v)", rows, err, nerr, row)
			}
		}
		if fmt.Sprint(batch.state, batch.line, batch.b.Off()) != fmt.Sprint(next.state, next.line, next.b.Off()) {
			t.Fatalf("after row %d: registers %+v line %d at %d; Next's %+v %d at %d", rows, batch.state, batch.line, batch.b.Off(), next.state, next.line, next.b.Off())
		}
		if err != nil {
			return rows
		}
		if n != sizes[k%len(sizes)] {
			t.Fatalf("ReadRows stored %d of %d rows without an error", n, sizes[k%len(sizes)])
		}
	}
	return rows
}

// FuzzReadRows compares ReadRows with Next (the oracle) on arbitrary
// .debug_line bytes, in batches of 1, 7 and 64 rows.
func FuzzReadRows(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		sec := Sections{Line: data, Str: data, LineStr: data}
		a, err := NewReader(sec, 0, "/cd")
		if err != nil {
			return
		}
		b, _ := NewReader(sec, 0, "/cd")
		checkReadRows(t, a, b, []int{1, 7, 64})
	})
}

// TestReadRows compares ReadRows with Next on the sample programs of
// every encoding and on the line programs gcc writes (-O2, DWARF 4 and
// 5, so with views, is_stmt changes and several sequences).
func TestReadRows(t *testing.T) {
	// Big-endian 4-byte addresses too (encodings leaves them out), for
	// ReadRows' own DW_LNE_set_address of 4 bytes in the file's order.
	cs := append(encodings(),
		encCase{"v5/dwarf32/addr4/BigEndian", edwarf.Encoding{Version: 5, Format: edwarf.Format32, AddrSize: 4, ByteOrder: binary.BigEndian}},
		encCase{"v4/dwarf32/addr4/BigEndian", edwarf.Encoding{Version: 4, Format: edwarf.Format32, AddrSize: 4, ByteOrder: binary.BigEndian}})
	for _, c := range cs {
		p := sampleProgram(c.enc)
		data, err := p.Encode(nil)
		if err != nil {
			t.Fatal(err)
		}
		sec := Sections{Line: data, Order: c.enc.ByteOrder}
		for _, sizes := range [][]int{{1}, {3, 64}, {64}} {
			a, err := NewReader(sec, 0, "/cd")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := NewReader(sec, 0, "/cd")
			if n := checkReadRows(t, a, b, sizes); n == 0 {
				t.Fatalf("%v: no rows", c.enc)
			}
		}
	}
	src := "static inline int mix(int x, int k) { return x * k + 3; }\n" +
		"int f(int x) {\n  int s = 0;\n  for (int i = 0; i < x; i++)\n    s += mix(i, x);\n  return s;\n}\n" +
		"int g(int x) { return mix(x, 7) ^ f(x); }\nint main(int c, char **v) { return g(c); }\n"
	for _, v := range []string{"-gdwarf-5", "-gdwarf-4"} {
		_, data := tooltest.GCCBinary(t, src, "-g", v, "-O2")
		sec := Sections{Line: data(".debug_line"), Str: data(".debug_str"), LineStr: data(".debug_line_str")}
		for off := uint64(0); off < uint64(len(sec.Line)); {
			a, err := NewReader(sec, off, "/cd")
			if err != nil {
				t.Fatalf("%s: %v", v, err)
			}
			b, _ := NewReader(sec, off, "/cd")
			if n := checkReadRows(t, a, b, []int{5, 64}); n < 4 {
				t.Fatalf("%s: %d rows at .debug_line+%#x", v, n, off)
			}
			off = a.Header().End
		}
	}
}
