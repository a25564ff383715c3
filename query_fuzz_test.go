package elfimage_test

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"errors"
	"fmt"
	"path"
	"testing"

	"github.com/elfimage/elfimage"
	edwarf "github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/lang/scheme"
)

// queryLayout is what FuzzQueries derives from a pristine image with
// debug/elf: where its non-loaded tail starts (its first section, .symtab,
// after the last PT_LOAD's file bytes: the loader never reads past them)
// and the executable ranges to query.
type queryLayout struct {
	tail  int
	addrs []uint64
}

func layoutOf(t testing.TB, img []byte) queryLayout {
	f, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	var l queryLayout
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD {
			continue
		}
		l.tail = max(l.tail, int(p.Off+p.Filesz))
		if p.Flags&elf.PF_X != 0 {
			step := max(p.Memsz/16, 1)
			for a := p.Vaddr; a < p.Vaddr+p.Memsz; a += step {
				l.addrs = append(l.addrs, a)
			}
		}
	}
	if s := f.Section(".symtab"); s != nil && int(s.Offset) >= l.tail {
		l.tail = int(s.Offset)
	}
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Size > 0 {
			l.addrs = append(l.addrs, s.Value, s.Value+s.Size-1, s.Value+s.Size)
		}
	}
	if l.tail == 0 || l.tail >= len(img) || len(l.addrs) == 0 {
		t.Fatalf("image layout: tail at %#x of %#x bytes, %d addresses", l.tail, len(img), len(l.addrs))
	}
	return l
}

// queryErr fails t unless err is one of the documented query errors:
// ErrUnknownPC, ErrNoSection, ErrFault, or a format error of the image or
// of its DWARF.
func queryErr(t *testing.T, what string, addr uint64, err error) {
	t.Helper()
	var fe *elfimage.FormatError
	var de *edwarf.FormatError
	if err == nil || errors.Is(err, elfimage.ErrUnknownPC) || errors.Is(err, elfimage.ErrNoSection) ||
		errors.Is(err, elfimage.ErrFault) || errors.As(err, &fe) || errors.As(err, &de) {
		return
	}
	t.Fatalf("%s(%#x): undocumented error %v (%T)", what, addr, err, err)
}

// FuzzQueries corrupts the non-loaded tail of a real image (which the
// loader never reads, so any bytes get through it; the layout comes from
// the image) and runs the debug queries on it, checking them against each
// other and against independent readers of the same bytes:
//   - errors are the documented ones (queryErr);
//   - a procedure ProcedureAt returns contains the address and is a
//     function symbol debug/elf reads from the same bytes; Procedure and
//     SubprogramAt, when they answer, give ranges containing the address;
//   - PositionAt (which runs one sequence found through the procedure
//     table) agrees with the whole line program decoded by LineTable and
//     with Go's debug/dwarf line reader on the same bytes, when they decode;
//     a fresh image's first PositionAt (made without the query state when
//     the table allows) gives the answer or error of the image with its
//     state.
func FuzzQueries(f *testing.F) {
	m, err := scheme.Compile(scheme.DemoFile, scheme.DemoSource)
	if err != nil {
		f.Fatal(err)
	}
	img, err := elfimage.Link(m, elfimage.LinkOptions{})
	if err != nil {
		f.Fatal(err)
	}
	lay := layoutOf(f, img)
	checkPristineQueries(f, img, lay)
	f.Add(uint32(0), []byte{})
	f.Add(uint32(0x100), []byte{0xff, 0xff, 0xff, 0xff})
	f.Add(uint32(0x400), []byte{0x80, 0x80, 0x80, 0x80, 0x80})
	f.Fuzz(func(t *testing.T, at uint32, patch []byte) {
		b := append([]byte(nil), img...)
		off := lay.tail + int(at)%(len(b)-lay.tail)
		copy(b[off:], patch)
		im, err := elfimage.Load("fuzz.elf", b, nil)
		if err != nil {
			t.Fatalf("Load with only the tail changed: %v", err)
		}
		defer im.Close()
		// A fresh image's first PositionAt, which answers without the
		// query state when it can: the answer (or the error) of the
		// image with its state, below.
		firstAddr := lay.addrs[int(at/7)%len(lay.addrs)]
		fresh, err := elfimage.Load("fuzz.elf", b, nil)
		if err != nil {
			t.Fatal(err)
		}
		firstPos, firstErr := fresh.PositionAt(firstAddr)
		fresh.Close()
		_, err = im.Procedures()
		queryErr(t, "Procedures", 0, err)
		var goSyms []elf.Symbol
		var goLines *dwarf.LineReader
		if gf, err := elf.NewFile(bytes.NewReader(b)); err == nil {
			goSyms, _ = gf.Symbols()
			goLines = goLineReader(gf)
		}
		table, terr := im.LineTable()
		queryErr(t, "LineTable", 0, terr)
		for _, addr := range lay.addrs {
			p, err := im.ProcedureAt(addr)
			queryErr(t, "ProcedureAt", addr, err)
			if err == nil {
				if addr < p.Start || addr-p.Start >= p.Size {
					t.Fatalf("ProcedureAt(%#x) = %s [%#x, +%#x)", addr, p.Name, p.Start, p.Size)
				}
				if goSyms != nil && !hasSymbol(goSyms, p) {
					t.Fatalf("ProcedureAt(%#x) = %s [%#x, +%#x), which is no function symbol debug/elf reads", addr, p.Name, p.Start, p.Size)
				}
			}
			pos, err := im.PositionAt(addr)
			queryErr(t, "PositionAt", addr, err)
			if addr == firstAddr && (pos != firstPos || fmt.Sprint(err) != fmt.Sprint(firstErr)) {
				t.Fatalf("PositionAt(%#x) = %v, %v; as a fresh image's first query %v, %v", addr, pos, err, firstPos, firstErr)
			}
			if err == nil && terr == nil {
				if row, ok := table.Lookup(addr); ok && (int(row.Line) != pos.Line || int(row.Column) != pos.Column) {
					t.Fatalf("PositionAt(%#x) = %v; LineTable has line %d column %d", addr, pos, row.Line, row.Column)
				}
			}
			if err == nil && goLines != nil {
				// The line register is an unsigned integer (DWARF 5
				// 6.2.2), 32 bits as LLVM's and binutils' readers keep it;
				// debug/dwarf keeps an int, negative when
				// DW_LNS_advance_line goes below 0.
				var e dwarf.LineEntry
				if goLines.SeekPC(addr, &e) == nil && (int(uint32(e.Line)) != pos.Line || e.Column != pos.Column || path.Base(e.File.Name) != path.Base(pos.File)) {
					t.Fatalf("PositionAt(%#x) = %v; debug/dwarf reads %s:%d:%d", addr, pos, e.File.Name, e.Line, e.Column)
				}
			}
			pr, err := im.Procedure(addr)
			queryErr(t, "Procedure", addr, err)
			if err == nil && (addr < pr.Start || addr-pr.Start >= pr.Size) {
				t.Fatalf("Procedure(%#x) = %s [%#x, +%#x)", addr, pr.Name, pr.Start, pr.Size)
			}
			sp, err := im.SubprogramAt(addr)
			queryErr(t, "SubprogramAt", addr, err)
			if err == nil && (addr < sp.Low || addr >= sp.High) {
				t.Fatalf("SubprogramAt(%#x) = [%#x, %#x)", addr, sp.Low, sp.High)
			}
			_, err = im.Locals(addr)
			queryErr(t, "Locals", addr, err)
		}
	})
}

// checkPristineQueries checks the undamaged image img: every address of
// lay in a procedure is answered by ProcedureAt, Procedures lists that
// procedure, and PositionAt agrees with debug/dwarf's line reader.
func checkPristineQueries(t testing.TB, img []byte, lay queryLayout) {
	im, err := elfimage.Load("pristine.elf", img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	procs, err := im.Procedures()
	if err != nil {
		t.Fatal(err)
	}
	gf, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	lr := goLineReader(gf)
	if lr == nil {
		t.Fatal("debug/dwarf cannot read the image's line program")
	}
	found, positions := 0, 0
	for _, addr := range lay.addrs {
		p, err := im.ProcedureAt(addr)
		if errors.Is(err, elfimage.ErrUnknownPC) {
			continue
		}
		if err != nil || addr < p.Start || addr-p.Start >= p.Size || !listed(procs, p) {
			t.Fatalf("ProcedureAt(%#x) = %+v, %v; Procedures lists %d procedures", addr, p, err, len(procs))
		}
		found++
		var e dwarf.LineEntry
		if lr.SeekPC(addr, &e) != nil {
			continue
		}
		pos, err := im.PositionAt(addr)
		if err != nil || e.Line != pos.Line || e.Column != pos.Column || path.Base(e.File.Name) != path.Base(pos.File) {
			t.Fatalf("PositionAt(%#x) = %v, %v; debug/dwarf reads %s:%d:%d", addr, pos, err, e.File.Name, e.Line, e.Column)
		}
		positions++
	}
	if found < len(procs) || positions == 0 {
		t.Fatalf("%d addresses in procedures, %d with positions; the image has %d procedures", found, positions, len(procs))
	}
}

// listed reports whether procs has p's name and range.
func listed(procs []elfimage.Procedure, p elfimage.Procedure) bool {
	for _, q := range procs {
		if q.Name == p.Name && q.Start == p.Start && q.Size == p.Size {
			return true
		}
	}
	return false
}

// hasSymbol reports whether syms has a function symbol with p's name and
// range.
func hasSymbol(syms []elf.Symbol, p elfimage.Procedure) bool {
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Name == p.Name && s.Value == p.Start && s.Size == p.Size {
			return true
		}
	}
	return false
}

// goLineReader returns debug/dwarf's line reader for the first unit of f,
// or nil when debug/dwarf cannot read it.
func goLineReader(f *elf.File) (lr *dwarf.LineReader) {
	defer func() {
		if recover() != nil { // debug/dwarf is not hardened against every input
			lr = nil
		}
	}()
	d, err := f.DWARF()
	if err != nil {
		return nil
	}
	cu, err := d.Reader().Next()
	if err != nil || cu == nil {
		return nil
	}
	lr, err = d.LineReader(cu)
	if err != nil {
		return nil
	}
	return lr
}
