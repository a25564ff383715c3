package frame

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
)

// exercise decodes and executes everything in sec, checking the answers
// of its APIs against each other and against a re-encoding:
//   - every error is a *dwarf.FormatError or wraps ErrNoFDE;
//   - Entries, EntryAt, CIEAt and FDEAt agree on every entry;
//   - a well-formed table (rows contiguous from Start to Start+Size) gives
//     at each row's first and last address the row RowAt computes, and the
//     section's FindFDE finds an FDE covering that address;
//   - re-encoding a decoded FDE and its CIE with our encoder (when it
//     accepts the instructions) decodes to the same FDE range and the same
//     rows (reencode).
func exercise(t *testing.T, sec *Section) {
	t.Helper()
	var e Exec
	var row Row
	sec.Bases = Bases{Text: textBase, Data: dataBase, HasText: true, HasData: true}
	sec.Indirect = mapMem{0x50000: 0x123000, 0x50008: 0}
	// Oracles for the fast paths: an FDE parsed into a reused ParsedFDE
	// (fdeFast, once its CIE is kept) against a fresh parse, and rows of
	// runFast against the general interpreter (generic), errors included.
	var reused ParsedFDE
	generic := Exec{generic: true}
	var genRow Row
	sameRow := func(f *ParsedFDE, pc uint64) {
		t.Helper()
		err := e.RowAt(f, pc, &row)
		err2 := generic.RowAt(f, pc, &genRow)
		if fmt.Sprint(err) != fmt.Sprint(err2) || err == nil && !reflect.DeepEqual(visibleRow(&row), visibleRow(&genRow)) {
			t.Fatalf("FDE %#x: RowAt(%#x) = %+v, %v; general interpreter %+v, %v", f.Offset, pc, visibleRow(&row), err, visibleRow(&genRow), err2)
		}
	}
	n := 0
	err := sec.Entries(func(c *ParsedCIE, f *ParsedFDE) bool {
		if n++; n > 64 {
			return false
		}
		if c != nil {
			c2, err := sec.CIEAt(c.Offset)
			if err != nil || !reflect.DeepEqual(c2, *c) {
				t.Fatalf("CIEAt(%#x) = %+v, %v; Entries gave %+v", c.Offset, c2, err, *c)
			}
			if kind, next, err := sec.EntryAt(c.Offset); kind != EntryCIE || next != c.End || err != nil {
				t.Fatalf("EntryAt(%#x) = %v, %#x, %v; Entries gave a CIE ending at %#x", c.Offset, kind, next, err, c.End)
			}
			_, err = sec.DecodeInsns(c, nil)
			checkErr(t, "DecodeInsns(CIE)", err)
			checkErr(t, "InitialRow", e.InitialRow(sec, c, &row))
			return true
		}
		f2, err := sec.FDEAt(f.Offset)
		if err != nil || !reflect.DeepEqual(f2, *f) {
			t.Fatalf("FDEAt(%#x) = %+v, %v; Entries gave %+v", f.Offset, f2, err, *f)
		}
		if err := sec.fdeAt(f.Offset, &reused); err != nil || !reflect.DeepEqual(reused, f2) {
			t.Fatalf("FDE %#x parsed into a reused ParsedFDE = %+v, %v; fresh %+v", f.Offset, reused, err, f2)
		}
		for _, pc := range []uint64{f.Start, f.Start + f.Size/3, f.Start + f.Size/2, f.Start + f.Size - 1} {
			if f.Contains(pc) {
				sameRow(f, pc)
			}
		}
		if kind, next, err := sec.EntryAt(f.Offset); kind != EntryFDE || next != f.End || err != nil {
			t.Fatalf("EntryAt(%#x) = %v, %#x, %v; Entries gave an FDE ending at %#x", f.Offset, kind, next, err, f.End)
		}
		_, err = sec.DecodeInsns(nil, f)
		checkErr(t, "DecodeInsns(FDE)", err)
		rows, err := Table(f)
		checkErr(t, "Table", err)
		if err != nil {
			return true
		}
		// Rows gives the same rows in place, and stops when asked.
		var e2 Exec
		var inPlace Row
		n := 0
		stop := len(rows) / 2
		if err := e2.Rows(f, &inPlace, func(r *Row) bool {
			if n >= len(rows) || rowString(r) != rowString(&rows[n]) || r.Loc != rows[n].Loc || r.End != rows[n].End {
				t.Fatalf("FDE %#x: Rows' row %d is %s [%#x, %#x), Table's %v", f.Offset, n, rowString(r), r.Loc, r.End, rows)
			}
			n++
			return n <= stop
		}); err != nil || n != min(stop+1, len(rows)) {
			t.Fatalf("FDE %#x: Rows stopped after %d rows (%v), want %d of Table's %d", f.Offset, n, err, min(stop+1, len(rows)), len(rows))
		}
		if contiguous(f, rows) {
			var found ParsedFDE
			for _, r := range rows {
				if r.Loc == r.End {
					continue
				}
				for _, pc := range []uint64{r.Loc, r.End - 1} {
					if err := e.RowAt(f, pc, &row); err != nil || rowString(&row) != rowString(&r) {
						t.Fatalf("FDE %#x: RowAt(%#x) = %s, %v; Table's row is %s", f.Offset, pc, rowString(&row), err, rowString(&r))
					}
					if err := sec.FindFDE(pc, &found); err != nil || !found.Contains(pc) {
						t.Fatalf("FindFDE(%#x) = FDE %#x [%#x, +%#x), %v; FDE %#x covers it", pc, found.Offset, found.Start, found.Size, err, f.Offset)
					}
				}
			}
		}
		reencode(t, sec, f, rows)
		return true
	})
	checkErr(t, "Entries", err)
	for off := uint64(0); off < uint64(len(sec.Data())) && off < 64; off++ {
		_, err := sec.CIEAt(off)
		checkErr(t, "CIEAt", err)
		fresh, err := sec.FDEAt(off)
		checkErr(t, "FDEAt", err)
		if err2 := sec.fdeAt(off, &reused); (err == nil) != (err2 == nil) || err == nil && !reflect.DeepEqual(reused, fresh) {
			t.Fatalf("FDEAt(%#x) = %+v, %v; into a reused ParsedFDE %+v, %v", off, fresh, err, reused, err2)
		}
		_, _, err = sec.EntryAt(off)
		checkErr(t, "EntryAt", err)
	}
	var f ParsedFDE
	if err := sec.FindFDE(0x10010, &f); err == nil && !f.Contains(0x10010) {
		t.Fatalf("FindFDE(0x10010) = FDE %#x [%#x, +%#x)", f.Offset, f.Start, f.Size)
	} else {
		checkErr(t, "FindFDE", err)
	}
}

// checkErr fails t unless err is nil, a *dwarf.FormatError or wraps
// ErrNoFDE: the decoders' documented errors.
func checkErr(t *testing.T, what string, err error) {
	t.Helper()
	var fe *dwarf.FormatError
	if err != nil && !errors.As(err, &fe) && !errors.Is(err, ErrNoFDE) {
		t.Fatalf("%s: error %v (%T) is neither a *dwarf.FormatError nor ErrNoFDE", what, err, err)
	}
}

// contiguous reports whether rows tile [f.Start, f.Start+f.Size) in order.
func contiguous(f *ParsedFDE, rows []Row) bool {
	if len(rows) == 0 || rows[0].Loc != f.Start || f.Start+f.Size < f.Start {
		return false
	}
	for i, r := range rows {
		if r.End < r.Loc || i > 0 && r.Loc != rows[i-1].End {
			return false
		}
	}
	return rows[len(rows)-1].End == f.Start+f.Size
}

// rowString formats a row's range and rules, registers in numeric order,
// unspecified rules left out, expressions in full.
func rowString(r *Row) string {
	type reg struct {
		n    arch.Reg
		rule Rule
	}
	var regs []reg
	for i := 0; i < r.NumRules(); i++ {
		if n, rule := r.RuleAt(i); rule.Kind != RuleUnspecified {
			regs = append(regs, reg{n, rule})
		}
	}
	sort.Slice(regs, func(i, j int) bool { return regs[i].n < regs[j].n })
	s := fmt.Sprintf("[%#x,%#x) cfa=%v args=%d signed=%v", r.Loc, r.End, r.CFA, r.ArgsSize, r.RASigned)
	for _, x := range regs {
		s += fmt.Sprintf(" r%d=%v", x.n, x.rule)
	}
	return s
}

// rulesString is rowString without the range.
func rulesString(r *Row) string {
	s := rowString(r)
	return s[strings.IndexByte(s, ')')+1:]
}

// mergeRows drops empty rows and merges neighbours with equal rules: two
// encodings of one table may split it at different advances.
func mergeRows(rows []Row) []string {
	var out []string
	var loc, end uint64
	var rules string
	for i := range rows {
		r := &rows[i]
		if r.Loc == r.End {
			continue
		}
		if rs := rulesString(r); len(out) > 0 && rs == rules && r.Loc == end {
			end = r.End
			out[len(out)-1] = fmt.Sprintf("[%#x,%#x)%s", loc, end, rules)
			continue
		} else {
			loc, end, rules = r.Loc, r.End, rs
		}
		out = append(out, fmt.Sprintf("[%#x,%#x)%s", loc, end, rules))
	}
	return out
}

// reencode writes f (with rows, its table) back out with EncodeDebugFrame
// from what DecodeInsns decoded and checks the result decodes to the same
// range and rows. Instructions the encoder does not write (or refuses, such
// as unsorted locations) end the check.
func reencode(t *testing.T, sec *Section, f *ParsedFDE, rows []Row) {
	t.Helper()
	if !contiguous(f, rows) || f.CIE.CodeAlign == 0 || f.CIE.DataAlign == 0 {
		return
	}
	ci, err := sec.DecodeInsns(&f.CIE, nil)
	if err != nil {
		return
	}
	fi, err := sec.DecodeInsns(nil, f)
	if err != nil {
		return
	}
	cie := CIE{CodeAlign: f.CIE.CodeAlign, DataAlign: f.CIE.DataAlign, RA: f.CIE.RA, Signal: f.CIE.Signal}
	for _, d := range ci {
		if d.Op != OpAdvanceLoc {
			in := d.Insn
			in.PC = 0
			cie.Initial = append(cie.Initial, in)
		}
	}
	fde := FDE{Start: f.Start, Size: f.Size}
	for _, d := range fi {
		if d.Op != OpAdvanceLoc {
			fde.Insns = append(fde.Insns, d.Insn)
		}
	}
	enc := dwarf.Encoding{Version: 5, Format: dwarf.Format32, AddrSize: 8, ByteOrder: binary.LittleEndian}
	data, _, err := EncodeDebugFrame(cie, []FDE{fde}, enc)
	if err != nil {
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("EncodeDebugFrame: error %v does not wrap ErrInvalid", err)
		}
		return
	}
	got, err := NewDebugFrame(data, binary.LittleEndian, 8).FDEs()
	if err != nil || len(got) != 1 {
		t.Fatalf("re-encoded FDE %#x: %d FDEs, %v", f.Offset, len(got), err)
	}
	g := &got[0]
	if g.Start != f.Start || g.Size != f.Size || g.CIE.RA != f.CIE.RA || g.CIE.Signal != f.CIE.Signal {
		t.Fatalf("re-encoded FDE %#x: [%#x, +%#x) RA %d signal %v, decoded [%#x, +%#x) RA %d signal %v",
			f.Offset, g.Start, g.Size, g.CIE.RA, g.CIE.Signal, f.Start, f.Size, f.CIE.RA, f.CIE.Signal)
	}
	grows, err := Table(g)
	if err != nil {
		t.Fatalf("re-encoded FDE %#x: %v", f.Offset, err)
	}
	if a, b := mergeRows(rows), mergeRows(grows); !reflect.DeepEqual(a, b) {
		t.Fatalf("FDE %#x: rows\n%s\nre-encoded as\n%s", f.Offset, strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
	reencoded++
}

// reencoded counts the FDEs reencode compared, so that a test can check
// the comparison is not skipped for the seeds.
var reencoded int

// TestExerciseSeeds runs the fuzz targets' checks on the encoder's output
// for every encoding and checks every FDE got through to the re-encoding
// comparison.
func TestExerciseSeeds(t *testing.T) {
	cie, fdes := seedModel()
	for _, enc := range encodings() {
		eh, _, err := EncodeEHFrame(cie, fdes, 0x2000, enc)
		if err != nil {
			t.Fatal(err)
		}
		df, _, err := EncodeDebugFrame(cie, fdes, enc)
		if err != nil {
			t.Fatal(err)
		}
		reencoded = 0
		exercise(t, NewEHFrame(eh, 0x2000, enc.ByteOrder, enc.AddrSize))
		exercise(t, NewDebugFrame(df, enc.ByteOrder, enc.AddrSize))
		if reencoded != 2*len(fdes) {
			t.Errorf("%v: %d FDEs re-encoded and compared, want %d", enc, reencoded, 2*len(fdes))
		}
	}
	reencoded = 0
	exercise(t, NewDebugFrame(allInsnsFDE(), binary.LittleEndian, 8))
	t.Logf("allInsnsFDE: %d FDEs re-encoded", reencoded)
}

func seedModel() (CIE, []FDE) {
	return StandardCIE(arch.X86_64), testFDEs(0x10000)
}

func FuzzEHFrame(f *testing.F) {
	cie, fdes := seedModel()
	for _, enc := range encodings() {
		b, _, err := EncodeEHFrame(cie, fdes, 0x2000, enc)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, enc.AddrSize == 8, enc.ByteOrder == binary.BigEndian)
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 0, 0, 0, 0}, true, false)
	// Hand-built: every pointer format and application, aligned and
	// indirect pointers, augmentations P, L, R.
	for _, enc := range []dwarf.EHPE{0x00, 0x01, 0x02, 0x03, 0x04, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x1b, 0x23, 0x3b, 0x50, 0x80} {
		s, _, _, _ := buildEH(enc, enc, enc&0x0f|dwarf.DW_EH_PE_funcrel, 0x1234, 0x1234, 0x10)
		f.Add(s.b, true, false)
	}
	f.Fuzz(func(t *testing.T, data []byte, addr8, big bool) {
		as := uint8(4)
		if addr8 {
			as = 8
		}
		var bo binary.ByteOrder = binary.LittleEndian
		if big {
			bo = binary.BigEndian
		}
		exercise(t, NewEHFrame(data, 0x2000, bo, as))
	})
}

func FuzzDebugFrame(f *testing.F) {
	cie, fdes := seedModel()
	for _, enc := range encodings() {
		b, _, err := EncodeDebugFrame(cie, fdes, enc)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, enc.AddrSize == 8, enc.ByteOrder == binary.BigEndian)
	}
	f.Add(debugFrame64(), true, false)
	f.Add(allInsnsFDE(), true, false)
	f.Fuzz(func(t *testing.T, data []byte, addr8, big bool) {
		as := uint8(4)
		if addr8 {
			as = 8
		}
		var bo binary.ByteOrder = binary.LittleEndian
		if big {
			bo = binary.BigEndian
		}
		exercise(t, NewDebugFrame(data, bo, as))
	})
}

func FuzzEHFrameHdr(f *testing.F) {
	cie, fdes := seedModel()
	eh, offs, err := EncodeEHFrame(cie, fdes, 0x2000, dwarf.Default64)
	if err != nil {
		f.Fatal(err)
	}
	hdr, err := EncodeEHFrameHdr(0x1000, 0x2000, fdes, offs)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(hdr, eh, uint64(0x10010))
	f.Add(hdr, eh, uint64(0x30040+0x12345))
	f.Add([]byte{1, 0xff, 0xff, 0xff}, eh, uint64(0x10010))
	f.Fuzz(func(t *testing.T, hdr, eh []byte, pc uint64) {
		fi, err := NewFinder(eh, 0x2000, hdr, 0x1000, binary.LittleEndian, 8)
		if err != nil {
			return
		}
		var fde ParsedFDE
		var e Exec
		var row Row
		for _, p := range []uint64{pc, 0x10010, 0x30040 + 0x12345, pc + 1, pc &^ 0xff} {
			// Oracle for the little-endian 4-byte fast path: the generic
			// search of the same table.
			if fi.Hdr.le4 {
				a, ok, err := fi.Hdr.Lookup(p)
				fi.Hdr.le4 = false
				a2, ok2, err2 := fi.Hdr.Lookup(p)
				fi.Hdr.le4 = true
				if a != a2 || ok != ok2 || (err == nil) != (err2 == nil) {
					t.Fatalf("Lookup(%#x) = %#x, %v, %v; generic search %#x, %v, %v", p, a, ok, err, a2, ok2, err2)
				}
			}
			if fi.FindFDE(p, &fde) == nil {
				if !fde.Contains(p) {
					t.Fatalf("FindFDE(%#x) returned FDE [%#x, +%#x)", p, fde.Start, fde.Size)
				}
				// Oracle for the CIE kept in a reused ParsedFDE and the
				// initial row kept in a reused Exec: fresh ones.
				fresh, err := fi.Sec.FDEAt(fde.Offset)
				if err != nil || !reflect.DeepEqual(fresh, fde) {
					t.Fatalf("FDEAt(%#x) = %+v, %v; reused FindFDE gave %+v", fde.Offset, fresh, err, fde)
				}
				var e2 Exec
				var row2 Row
				err = e.RowAt(&fde, p, &row)
				err2 := e2.RowAt(&fresh, p, &row2)
				if (err == nil) != (err2 == nil) || err == nil && !reflect.DeepEqual(visibleRow(&row), visibleRow(&row2)) {
					t.Fatalf("RowAt(%#x) with a reused Exec = %+v, %v; fresh %+v, %v", p, row, err, row2, err2)
				}
				e3 := Exec{generic: true}
				var row3 Row
				err3 := e3.RowAt(&fresh, p, &row3)
				if fmt.Sprint(err) != fmt.Sprint(err3) || err == nil && !reflect.DeepEqual(visibleRow(&row), visibleRow(&row3)) {
					t.Fatalf("RowAt(%#x) = %+v, %v; general interpreter %+v, %v", p, visibleRow(&row), err, visibleRow(&row3), err3)
				}
			}
		}
	})
}

// visibleRow is what a Row's methods show: its fields and its rules in
// order (the arrays past NumRules are not part of its value).
func visibleRow(r *Row) any {
	type rule struct {
		Reg  arch.Reg
		Rule Rule
	}
	rules := make([]rule, r.NumRules())
	for i := range rules {
		rules[i].Reg, rules[i].Rule = r.RuleAt(i)
	}
	return []any{r.Loc, r.End, r.CFA, r.ArgsSize, r.RASigned, rules}
}
