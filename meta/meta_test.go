package meta

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/line"
)

// encodeShared encodes with strings in a separate section.
func encodeShared(ps []Proc) (sec, strs []byte, err error) {
	st := dwarf.NewStrTab()
	sec, err = EncodeWith(ps, st)
	return sec, st.Bytes(), err
}

func mustTable(t testing.TB, ps []Proc) (*Table, []byte, []byte) {
	t.Helper()
	sec, strs, err := encodeShared(ps)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := NewTable(sec, strs)
	if err != nil {
		t.Fatal(err)
	}
	return tab, sec, strs
}

// normal is what Describe returns for p: Defaults filled when Optional > 0.
func normal(p Proc) Proc {
	if p.Optional > 0 && len(p.Defaults) == 0 {
		p.Defaults = make([]string, p.Optional)
	}
	if !p.HasLineSeq {
		p.LineUnit, p.LineSeq = 0, 0
	}
	return p
}

// TestExactBytes pins the format: header, narrowest field widths, info
// entries with every optional part.
func TestExactBytes(t *testing.T) {
	ps := []Proc{
		{Name: "a", Start: 0x1000, Size: 0x10},
		{Name: "b", Start: 0x1020, Size: 0x200, Required: 1, Optional: 1, Args: []string{"x", "y"},
			Defaults: []string{"3"}, Doc: "d", Props: []Prop{{"p", "v"}},
			LineUnit: 0x40, LineSeq: 0x70, HasLineSeq: true},
	}
	sec, strs, err := encodeShared(ps)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{
		'E', 'I', 'P', '1', 1, 1, 1, 0, // magic, version, S=1, I=1, reserved
		2, 0, 0, 0, // N
		17, 0, 0, 0, // L
		0x00, 0x10, 0, 0, 0, 0, 0, 0, // base 0x1000
		0x00, 0, // a: start 0, info 0
		0x20, 3, // b: start 0x20, info 3
		0x10, 1, 0x00, // a: size, name "a", shape 0
		0x80, 0x04, 3, 0x1f, // b: size 0x200, name "b", shape required 1 | OPT|PROPS|DOC|LINE
		0x40, 0x30, // lineUnit 0x40, lineSeq 0x70-0x40
		1,    // optional 1
		5,    // "x"
		7, 9, // "y", default "3"
		11,        // doc "d"
		1, 13, 15, // 1 property "p" "v"
	}
	if !bytes.Equal(sec, want) {
		t.Errorf("table\n got % x\nwant % x", sec, want)
	}
	if ws := "\x00a\x00b\x00x\x00y\x003\x00d\x00p\x00v\x00"; string(strs) != ws {
		t.Errorf("strings %q, want %q", strs, ws)
	}
	// The self-contained form: each procedure's new strings just before
	// its entry, offsets relative to the info area.
	sec, err = Encode(ps)
	if err != nil {
		t.Fatal(err)
	}
	want = []byte{
		'E', 'I', 'P', '1', 1, 1, 1, FlagInlineStrings,
		2, 0, 0, 0, // N
		33, 0, 0, 0, // L
		0x00, 0x10, 0, 0, 0, 0, 0, 0, // base 0x1000
		0x00, 2, // a: start 0, info 2
		0x20, 19, // b: start 0x20, info 19
		'a', 0, // 0
		0x10, 0, 0x00, // 2: a
		'b', 0, 'x', 0, 'y', 0, '3', 0, 'd', 0, 'p', 0, 'v', 0, // 5 to 17
		0x80, 0x04, 5, 0x1f, 0x40, 0x30, 1, 7, 9, 11, 13, 1, 15, 17, // 19: b
	}
	if !bytes.Equal(sec, want) {
		t.Errorf("inline table\n got % x\nwant % x", sec, want)
	}
	tab, err := NewTable(sec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := tab.Lookup(0x1030); err != nil || e.Name() != "b" {
		t.Errorf("inline Lookup: %+v, %v", e, err)
	} else if p, err := tab.Describe(e); err != nil || !reflect.DeepEqual(p, ps[1]) {
		t.Errorf("inline Describe: %+v, %v", p, err)
	}
	// Wider fields: a start offset of 0x10000 needs 3 bytes, and 300
	// procedures push the info offsets past 255.
	var big []Proc
	for i := 0; i < 300; i++ {
		big = append(big, Proc{Name: "p", Start: uint64(i) * 0x40, Size: 1})
	}
	big = append(big, Proc{Name: "q", Start: 0x10000, Size: 1})
	sec, _, err = encodeShared(big)
	if err != nil {
		t.Fatal(err)
	}
	// The start index: records 64, 128, 192 and 256's starts, 3 bytes
	// each, between the header and the records.
	if want := HeaderSize + 4*3 + 301*5 + 301*3; sec[5] != 3 || sec[6] != 2 || sec[7]&FlagStartIndex == 0 || len(sec) != want {
		t.Errorf("S=%d I=%d flags=%#x len=%d, want 3, 2, start index, %d", sec[5], sec[6], sec[7], len(sec), want)
	}
	if got, want := sec[HeaderSize:HeaderSize+12], []byte{0x00, 0x10, 0, 0x00, 0x20, 0, 0x00, 0x30, 0, 0x00, 0x40, 0}; !bytes.Equal(got, want) {
		t.Errorf("start index % x, want % x", got, want)
	}
}

func TestRoundTrip(t *testing.T) {
	ps := genProcs(1000)
	genLines(t, ps)
	ps[5].HasLineSeq = false
	ps[7].Required, ps[7].Args = 9, []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}[:9+ps[7].Optional]
	ps[8].Name = "" // empty name
	ps[9].Props = []Prop{{"a", "1"}, {"b", ""}, {"", "x"}}
	shared, _, _ := mustTable(t, ps)
	sec, err := Encode(ps)
	if err != nil {
		t.Fatal(err)
	}
	inline, err := NewTable(sec, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tab := range []*Table{shared, inline} {
		roundTrip(t, tab, ps)
	}
	// Shared string table: names already present cost nothing more.
	st := dwarf.NewStrTab()
	for _, p := range ps {
		st.Add(p.Name)
	}
	before := st.Size()
	sec, err = EncodeWith(ps[:1], st)
	if err != nil {
		t.Fatal(err)
	}
	tab2, err := NewTable(sec, st.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if e, err := tab2.Lookup(ps[0].Start); err != nil || e.Name() != ps[0].Name {
		t.Errorf("shared strings: %+v, %v", e, err)
	}
	if grown := st.Size() - before; grown != len("x\x00lst\x00k\x0010\x00Return the 0-th thing.\x00inline\x00#f\x00") {
		t.Errorf("shared string table grew by %d bytes", grown)
	}
	// Empty table.
	empty, _, _ := mustTable(t, nil)
	if _, err := empty.Lookup(0); err != ErrNotFound {
		t.Errorf("empty table: %v", err)
	}
	if _, err := EncodeWith(ps, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("EncodeWith(nil): %v", err)
	}
}

func roundTrip(t *testing.T, tab *Table, ps []Proc) {
	t.Helper()
	if tab.Len() != len(ps) {
		t.Fatalf("Len %d, want %d", tab.Len(), len(ps))
	}
	for i, p := range ps {
		e, err := tab.At(i)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tab.Describe(e)
		if err != nil {
			t.Fatal(err)
		}
		if want := normal(p); !reflect.DeepEqual(got, want) {
			t.Fatalf("procedure %d:\n got %+v\nwant %+v", i, got, want)
		}
	}
}

// TestLookup checks every procedure's first and last byte and the gaps
// around them.
func TestLookup(t *testing.T) {
	ps := genProcs(2000)
	ps = append([]Proc{{Name: "zero", Start: 0, Size: 1}}, ps...)
	ps = append(ps, Proc{Name: "empty", Start: 0xffff_fff0, Size: 0}, Proc{Name: "top", Start: 0xffff_fff0 + 1, Size: 0xf})
	shared, _, _ := mustTable(t, ps)
	sec, err := Encode(ps)
	if err != nil {
		t.Fatal(err)
	}
	inline, err := NewTable(sec, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tab := range []*Table{shared, inline} {
		lookupAll(t, tab, ps)
	}
}

func lookupAll(t *testing.T, tab *Table, ps []Proc) {
	for i, p := range ps {
		for _, a := range []uint64{p.Start, p.Start + p.Size - 1, p.Start + p.Size/2} {
			if p.Size == 0 {
				continue
			}
			e, err := tab.Lookup(a)
			if err != nil || e.Index != i || e.Start != p.Start || e.Size != p.Size || string(e.NameBytes) != p.Name ||
				e.HasLineSeq != p.HasLineSeq || e.LineSeq != p.LineSeq {
				t.Fatalf("Lookup(%#x) = %+v, %v; want procedure %d %+v", a, e, err, i, p)
			}
		}
		end := p.Start + p.Size
		next := ^uint64(0)
		if i+1 < len(ps) {
			next = ps[i+1].Start
		}
		for a := end; a < next && a < end+20; a++ {
			if e, err := tab.Lookup(a); err != ErrNotFound {
				t.Fatalf("Lookup(%#x) in gap after %d = %+v, %v; want ErrNotFound", a, i, e, err)
			}
		}
	}
	if _, err := tab.Lookup(^uint64(0)); err != ErrNotFound {
		t.Errorf("Lookup(max) = %v", err)
	}
	if _, err := tab.At(len(ps)); !errors.Is(err, ErrNotFound) {
		t.Errorf("At(Len) = %v", err)
	}
	if _, err := tab.Describe(Entry{Index: -1}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Describe(-1) = %v", err)
	}
}

func TestInvalidProcs(t *testing.T) {
	ok := func() []Proc {
		return []Proc{{Name: "a", Start: 0x1000, Size: 0x10}, {Name: "b", Start: 0x1010, Size: 0x10}}
	}
	cases := map[string]func(ps []Proc){
		"overlap":        func(ps []Proc) { ps[1].Start = 0x100f },
		"unsorted":       func(ps []Proc) { ps[1].Start = 0x10 },
		"same start":     func(ps []Proc) { ps[0].Size = 0; ps[1].Start = 0x1000 },
		"wraps":          func(ps []Proc) { ps[1].Start, ps[1].Size = ^uint64(0)-1, 5 },
		"too far":        func(ps []Proc) { ps[1].Start = 0x1000 + 1<<32 },
		"args":           func(ps []Proc) { ps[0].Required = 1 },
		"negative":       func(ps []Proc) { ps[0].Required, ps[0].Optional, ps[0].Args = -1, 1, []string{} },
		"defaults":       func(ps []Proc) { ps[0].Defaults = []string{"1"} },
		"line":           func(ps []Proc) { ps[0].HasLineSeq, ps[0].LineUnit, ps[0].LineSeq = true, 10, 9 },
		"NUL in name":    func(ps []Proc) { ps[0].Name = "a\x00b" },
		"NUL in default": func(ps []Proc) { ps[0].Optional, ps[0].Args, ps[0].Defaults = 1, []string{"o"}, []string{"\x00"} },
		"NUL in prop":    func(ps []Proc) { ps[0].Props = []Prop{{"x", "\x00"}} },
	}
	if _, _, err := encodeShared(ok()); err != nil {
		t.Fatal(err)
	}
	for name, mod := range cases {
		ps := ok()
		mod(ps)
		if _, _, err := encodeShared(ps); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func wantFormatError(t *testing.T, what string, err error, off uint64, field string) {
	t.Helper()
	var fe *dwarf.FormatError
	if !errors.As(err, &fe) || fe.Source != SectionProcs || fe.Field != field || (off != ^uint64(0) && fe.Offset != off) {
		t.Errorf("%s: %v, want a FormatError in %s at %#x field %q", what, err, SectionProcs, off, field)
	}
}

func TestHostile(t *testing.T) {
	ps := genProcs(10)
	genLines(t, ps)
	sec, strs, err := encodeShared(ps)
	if err != nil {
		t.Fatal(err)
	}
	// Every truncation is refused by NewTable.
	for n := 0; n < len(sec); n++ {
		_, err := NewTable(sec[:n], strs)
		var fe *dwarf.FormatError
		if !errors.As(err, &fe) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	mod := func(f func(b []byte)) []byte {
		b := append([]byte(nil), sec...)
		f(b)
		return b
	}
	_, err = NewTable(mod(func(b []byte) { b[0] = 'X' }), strs)
	wantFormatError(t, "magic", err, 0, "magic")
	_, err = NewTable(mod(func(b []byte) { b[4] = 2 }), strs)
	wantFormatError(t, "version", err, 4, "version")
	_, err = NewTable(mod(func(b []byte) { b[5] = 0 }), strs)
	wantFormatError(t, "start size", err, 5, "start size")
	_, err = NewTable(mod(func(b []byte) { b[6] = 5 }), strs)
	wantFormatError(t, "info size", err, 6, "info size")
	_, err = NewTable(mod(func(b []byte) { b[7] = 8 }), strs)
	wantFormatError(t, "flags", err, 7, "flags")
	_, err = NewTable(mod(func(b []byte) { binary.LittleEndian.PutUint32(b[8:], 0xffffffff) }), strs)
	wantFormatError(t, "count", err, 8, "count")
	_, err = NewTable(append(sec[:len(sec):len(sec)], 0), strs)
	wantFormatError(t, "trailing byte", err, 8, "count")

	ss, is := int(sec[5]), int(sec[6])
	rec := ss + is
	infoOff := HeaderSize + len(ps)*rec
	// Record 3's info offset points past the info area.
	bad := mod(func(b []byte) {
		for k := 0; k < is; k++ {
			b[HeaderSize+3*rec+ss+k] = 0xff
		}
	})
	tab, err := NewTable(bad, strs)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tab.Lookup(ps[3].Start)
	wantFormatError(t, "info offset", err, uint64(HeaderSize+3*rec+ss), "info offset")
	if _, err := tab.Lookup(ps[2].Start); err != nil {
		t.Errorf("neighbour of a bad record: %v", err)
	}
	// Name offset outside the strings; strings not terminated.
	tab, _ = NewTable(sec, strs[:1])
	_, err = tab.Lookup(ps[0].Start)
	wantFormatError(t, "name offset", err, uint64(infoOff+1), "name") // size 32 takes 1 byte
	tab, _ = NewTable(sec, bytes.ReplaceAll(strs, []byte{0}, []byte{'z'}))
	_, err = tab.Lookup(ps[0].Start)
	wantFormatError(t, "unterminated", err, uint64(infoOff+1), "name")
	// A LEB128 number running off the end of the section.
	last := mod(func(b []byte) { b[len(b)-1] |= 0x80 })
	tab, _ = NewTable(last, strs)
	e, err := tab.Lookup(ps[9].Start)
	if err == nil {
		_, err = tab.Describe(e)
	}
	var fe *dwarf.FormatError
	if !errors.As(err, &fe) {
		t.Errorf("LEB128 past the end: %v", err)
	}
	// Huge counts: required, optional, nprops.
	hsec, hstrs, _ := encodeShared([]Proc{{Name: "h", Start: 0, Size: 1}})
	for _, shape := range [][]byte{
		{0x80, 0x80, 0x80, 0x80, 0x10}, // required 2^24
		{0x08, 0xff, 0xff, 0xff, 0x7f}, // OPT, optional ~2^28
		{0x04, 0xff, 0xff, 0xff, 0x7f}, // PROPS, nprops ~2^28
		{0xff, 0xff, 0xff, 0xff, 0x7f}, // everything, huge required
		{0x01, 0xff, 0xff, 0xff, 0xff}, // LINE, lineUnit runs off
		{0x30, 0x01, 0x01},             // 3 required, only 2 bytes left
		{0x08, 0x01, 0x01},             // 1 optional needs 2 bytes, has 1
		{0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, // overflowing lineSeq
	} {
		// Replace the shape (third byte of the info entry) and what follows.
		b := append(append([]byte(nil), hsec[:HeaderSize+2+2]...), shape...)
		binary.LittleEndian.PutUint32(b[12:], uint32(len(b)-HeaderSize-2))
		ht, err := NewTable(b, hstrs)
		if err != nil {
			t.Fatal(err)
		}
		e, err := ht.Lookup(0)
		if err == nil {
			_, err = ht.Describe(e)
		}
		if !errors.As(err, &fe) {
			t.Errorf("shape % x: %v, want a FormatError", shape, err)
		}
	}
}

// TestAllocs checks that Lookup and At allocate nothing, hits and misses.
func TestAllocs(t *testing.T) {
	ps := genProcs(1000)
	tab, _, _ := mustTable(t, ps)
	n := testing.AllocsPerRun(100, func() {
		if _, err := tab.Lookup(ps[500].Start + 3); err != nil {
			t.Fatal(err)
		}
		if _, err := tab.Lookup(0); err != ErrNotFound {
			t.Fatal(err)
		}
		if _, err := tab.At(7); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Errorf("Lookup allocates %v times per run", n)
	}
}

// TestPositionThroughTable is the runtime's source-position path: Lookup
// gives the sequence, one sequence is run, and the answer agrees with
// decoding the whole line program.
func TestPositionThroughTable(t *testing.T) {
	ps := genProcs(300)
	sec, _ := genLines(t, ps)
	tab, _, _ := mustTable(t, ps)
	full, err := line.Decode(sec, 0, "/home/user/src")
	if err != nil {
		t.Fatal(err)
	}
	r, err := line.NewReader(sec, 0, "/home/user/src")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		for a := p.Start; a < p.Start+p.Size; a += 3 {
			e, err := tab.Lookup(a)
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.SequenceRow(e.LineSeq, a)
			want, ok := full.Lookup(a)
			if err != nil || !ok || got != want {
				t.Fatalf("%#x: %+v, %v; want %+v", a, got, err, want)
			}
			if f := r.Files()[got.File].Path; f != "/home/user/src/big.scm" {
				t.Fatalf("file %q", f)
			}
		}
	}
}

// TestSizePerProcedure reports, and bounds, the table's cost per
// procedure on the benchmark's procedures (the figure in doc.go).
func TestSizePerProcedure(t *testing.T) {
	ps := genProcs(10000)
	genLines(t, ps)
	sec, strs, err := encodeShared(ps)
	if err != nil {
		t.Fatal(err)
	}
	per := float64(len(sec)) / float64(len(ps))
	// What DWARF's .debug_str already holds: names and parameter names.
	st := dwarf.NewStrTab()
	for _, p := range ps {
		st.Add(p.Name)
		for _, a := range p.Args {
			st.Add(a)
		}
	}
	before := st.Size()
	if _, err := EncodeWith(ps, st); err != nil {
		t.Fatal(err)
	}
	inline, err := Encode(ps)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("10000 procedures: shared-string table %d bytes (%.1f per procedure, record %d bytes) + its strings %d bytes (%.1f per procedure), of which %.1f per procedure are not already in .debug_str; self-contained table %d bytes (%.1f per procedure)",
		len(sec), per, sec[5]+sec[6], len(strs), float64(len(strs))/float64(len(ps)),
		float64(st.Size()-before)/float64(len(ps)), len(inline), float64(len(inline))/float64(len(ps)))
	if per > 24 {
		t.Errorf("%.1f bytes per procedure, want at most 24", per)
	}
	// Offsets into the larger combined area are sometimes a byte longer.
	if float64(len(inline)) > 1.02*float64(len(sec)+len(strs)) {
		t.Errorf("self-contained table %d bytes, more than 2%% over table and strings %d", len(inline), len(sec)+len(strs))
	}
}

// hostileStrings builds a one-procedure table whose required arguments
// all name strings in one long run of 'A's: at offset 0 (same), or each at
// the next offset (overlapping suffixes).
func hostileStrings(l, req int, overlap bool) []byte {
	info := make([]byte, l, l+1)
	for i := range info {
		info[i] = 'A'
	}
	info = append(info, 0)
	entry := len(info)
	info = dwarf.AppendUleb128(info, 16)
	info = dwarf.AppendUleb128(info, 0)
	info = dwarf.AppendUleb128(info, uint64(req)<<4)
	for i := range req {
		o := 0
		if overlap {
			o = i
		}
		info = dwarf.AppendUleb128(info, uint64(o))
	}
	sec := make([]byte, 24)
	copy(sec, "EIP1")
	sec[4], sec[5], sec[6], sec[7] = 1, 1, 4, FlagInlineStrings
	binary.LittleEndian.PutUint32(sec[8:], 1)
	binary.LittleEndian.PutUint32(sec[12:], uint32(len(info)))
	binary.LittleEndian.PutUint64(sec[16:], 0x1000)
	sec = append(sec, 0)
	sec = binary.LittleEndian.AppendUint32(sec, uint32(entry))
	return append(sec, info...)
}

// TestDescribeBoundsStrings: many fields naming one long string, or
// overlapping suffixes of it, cost memory linear in the table, not
// quadratic.
func TestDescribeBoundsStrings(t *testing.T) {
	for _, overlap := range []bool{false, true} {
		tab, err := NewTable(hostileStrings(20000, 10000, overlap), nil)
		if err != nil {
			t.Fatal(err)
		}
		e, err := tab.Lookup(0x1000)
		if err != nil {
			t.Fatal(err)
		}
		var p Proc
		allocs := testing.AllocsPerRun(1, func() { p, err = tab.Describe(e) })
		if overlap && err == nil {
			t.Errorf("overlapping strings accepted")
		}
		if !overlap && (err != nil || len(p.Args) != 10000) {
			t.Errorf("shared string: %v, %d args", err, len(p.Args))
		}
		if allocs > 100 {
			t.Errorf("overlap=%v: %v allocations", overlap, allocs)
		}
	}
}
