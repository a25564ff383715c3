package line

import (
	"debug/dwarf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"

	edwarf "github.com/elfimage/elfimage/dwarf"
)

func fuzzSeeds(f *testing.F) {
	for _, c := range encodings() {
		if c.enc.ByteOrder != binary.LittleEndian {
			continue
		}
		p := sampleProgram(c.enc)
		b, err := p.Encode(nil) // inline DW_FORM_string paths: no side section needed
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzDecode decodes arbitrary bytes as .debug_line: no panic, errors are
// FormatErrors, and Lookup agrees with the rows.
func FuzzDecode(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := Decode(Sections{Line: data, Str: data, LineStr: data}, 0, "/cd")
		if err != nil {
			var fe *edwarf.FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %T %v is not a *dwarf.FormatError", err, err)
			}
			return
		}
		for i := 1; i < len(tab.Sequences); i++ {
			if tab.Sequences[i].Start < tab.Sequences[i-1].End {
				return // overlapping sequences: Lookup picks one
			}
		}
		for _, s := range tab.Sequences {
			for _, r := range s.Rows {
				if r.Address >= s.End {
					continue
				}
				got, ok := tab.Lookup(r.Address)
				if !ok || got.Address > r.Address {
					t.Fatalf("Lookup(%#x) = %+v, %v", r.Address, got, ok)
				}
			}
		}
	})
}

// FuzzDiffGo compares our reader with Go's debug/dwarf LineReader on
// arbitrary .debug_line bytes wherever both accept them.
func FuzzDiffGo(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		ours, err := NewReader(Sections{Line: data}, 0, "/cd")
		if err != nil {
			return
		}
		if h := ours.Header(); h.Version >= 5 && h.AddrSize != 8 {
			// DW_LNE_set_address: we read as many bytes as the
			// extended opcode's length gives, debug/dwarf reads the
			// header's address_size and skips the rest; they agree on
			// well-formed programs (length 1+address_size) only.
			return
		}
		if ours.Header().MaxOpsPerInst != 1 {
			// VLIW programs: debug/dwarf (Go 1.26) leaves op_index
			// unchanged at DW_LNE_set_address and
			// DW_LNS_fixed_advance_pc, which DWARF 5 section 6.2.5
			// resets to 0; the two readers then differ by design.
			return
		}
		g, err := goLineReader(data, nil, nil, 0, "/cd", 8, binary.LittleEndian)
		if err != nil {
			return
		}
		// Go's reader may reject what we accept or vice versa; compare
		// rows only while both produce them.
		var oursRows []Row
		var row Row
		for len(oursRows) < 1<<16 {
			if err := ours.Next(&row); err != nil {
				if err != io.EOF {
					return
				}
				break
			}
			oursRows = append(oursRows, row)
		}
		var ge goEntry
		i := 0
		for ; i < len(oursRows); i++ {
			if err := goNext(g, &ge); err != nil {
				return // Go rejects (or panics): nothing to compare
			}
			r := oursRows[i]
			if r.Address != ge.Address || r.EndSequence != ge.EndSequence {
				t.Fatalf("row %d: address %#x end %v; debug/dwarf %#x %v", i, r.Address, r.EndSequence, ge.Address, ge.EndSequence)
			}
			if r.EndSequence {
				continue
			}
			if r.Line != uint32(ge.Line) || r.Column != uint32(ge.Column) || r.IsStmt != ge.IsStmt {
				t.Fatalf("row %d: %+v; debug/dwarf %+v", i, r, ge)
			}
			if ge.File != nil {
				fs := ours.Files()
				if r.File >= uint64(len(fs)) {
					t.Fatalf("row %d: file %d out of range but debug/dwarf has %q", i, r.File, ge.File.Name)
				}
				if baseName(fs[r.File].Path) != baseName(ge.File.Name) {
					t.Fatalf("row %d: file %q; debug/dwarf %q", i, fs[r.File].Path, ge.File.Name)
				}
			}
		}
		if err := goNext(g, &ge); err == nil {
			t.Fatalf("debug/dwarf has row %d %+v after our last", i, ge)
		}
	})
}

type goEntry = dwarf.LineEntry

// goNext is g.Next with debug/dwarf's own panics (an index out of range
// in LineReader.updateFile on some hostile programs, Go 1.26) turned
// into an error: only our reader is under test.
func goNext(g *dwarf.LineReader, e *goEntry) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("debug/dwarf panicked: %v", r)
		}
	}()
	return g.Next(e)
}

// FuzzSequenceReader compares NewSequenceReader with NewReader on
// arbitrary .debug_line bytes: the same error or none, the same header
// but for Dirs, FilePath equal to Files' paths, and the same rows and
// (after a DW_LNE_define_file) files from Next.
func FuzzSequenceReader(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		sec := Sections{Line: data, Str: data, LineStr: data}
		full, err := NewReader(sec, 0, "/cd")
		lazy, lerr := NewSequenceReader(sec, 0, "/cd")
		if (err == nil) != (lerr == nil) || (err != nil && err.Error() != lerr.Error()) {
			t.Fatalf("NewReader: %v; NewSequenceReader: %v", err, lerr)
		}
		if err != nil {
			return
		}
		fh, lh := *full.Header(), *lazy.Header()
		if lazy.tabs.on {
			if lh.Dirs != nil || lazy.Files() != nil {
				t.Fatalf("lazy reader built its tables: %q, %d files", lh.Dirs, len(lazy.Files()))
			}
			lh.Dirs = fh.Dirs
		}
		if fmt.Sprint(fh) != fmt.Sprint(lh) {
			t.Fatalf("header %+v; lazy %+v", fh, lh)
		}
		files := full.Files()
		for i := range uint64(len(files)) + 2 {
			want, wok := "", i < uint64(len(files))
			if wok {
				want = files[i].Path
			}
			if got, ok := lazy.FilePath(i); got != want || ok != wok {
				t.Fatalf("FilePath(%d) = %q, %v; want %q, %v", i, got, ok, want, wok)
			}
			for _, r := range []*Reader{lazy, full} {
				dst := make([]byte, 3, 3+int(i%2)*64) // with and without room
				copy(dst, "ab/")
				if got, ok := r.AppendFilePath(dst, i); string(got) != "ab/"+want || ok != wok {
					t.Fatalf("AppendFilePath(%d) = %q, %v; want %q, %v", i, got, ok, "ab/"+want, wok)
				}
			}
		}
		var fr, lr Row
		for range 1 << 12 {
			ferr, lerr := full.Next(&fr), lazy.Next(&lr)
			if (ferr == nil) != (lerr == nil) || (ferr != nil && ferr.Error() != lerr.Error()) || fr != lr {
				t.Fatalf("Next: %+v, %v; lazy %+v, %v", fr, ferr, lr, lerr)
			}
			if ferr != nil {
				break
			}
		}
		if !lazy.tabs.on && fmt.Sprint(full.Files()) != fmt.Sprint(lazy.Files()) {
			t.Fatalf("files %+v; lazy %+v", full.Files(), lazy.Files())
		}
	})
}
