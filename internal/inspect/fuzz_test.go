package inspect

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/elfimage/elfimage/dwarf/info"
	"github.com/elfimage/elfimage/elfobj"
)

// FuzzInspect runs every view on arbitrary files elfobj accepts. Oracles:
// nothing panics; the views hold one row per entry of the tables the
// reader decoded (sections, symbols of each table, relocations of each
// relocation section, by its size); the JSON form of each view reads back
// to values with the same JSON.
func FuzzInspect(f *testing.F) {
	seeds, _ := filepath.Glob("../../elfobj/testdata/*.o")
	for _, s := range seeds {
		if b, err := os.ReadFile(s); err == nil {
			f.Add(b)
		}
	}
	if b, err := os.ReadFile("/bin/true"); err == nil && len(b) < 1<<20 {
		f.Add(b)
	}
	f.Fuzz(inspectAll)
}

// inspectAll is FuzzInspect's body.
func inspectAll(t *testing.T, data []byte) {
	ef, err := elfobj.NewBytes(data)
	if err != nil {
		return
	}
	// Compressed sections may claim up to elfobj.MaxDecompressed
	// (1 GiB) each, which the reader inflates: a fuzz input gets a
	// few MiB.
	var claimed uint64
	for _, s := range ef.Sections {
		if s.Size > s.FileSize {
			claimed += s.Size - s.FileSize
		}
	}
	if claimed > 4<<20 {
		return
	}
	h := FileHeader(ef)
	WriteHeader(io.Discard, h)
	ps := ProgramHeaders(ef)
	if len(ps) != len(ef.Progs) {
		t.Fatalf("%d program headers, file has %d", len(ps), len(ef.Progs))
	}
	WritePrograms(io.Discard, h, ps)
	ss := Sections(ef)
	if len(ss) != len(ef.Sections) {
		t.Fatalf("%d sections, file has %d", len(ss), len(ef.Sections))
	}
	for i, s := range ss {
		if s.Name != ef.Sections[i].Name || s.Offset != ef.Sections[i].Offset {
			t.Fatalf("section %d: %+v, file has %+v", i, s, ef.Sections[i])
		}
	}
	WriteSections(io.Discard, h, ss)
	ts, err := SymbolTables(ef)
	if err == nil {
		for _, st := range ts {
			tab, err := ef.Symbols(st.Section)
			if err != nil || tab.Len() != len(st.Symbols) {
				t.Fatalf("%s: %d symbols, reader %v, %v", st.Name, len(st.Symbols), tab, err)
			}
		}
	}
	WriteSymbols(io.Discard, h, ts)
	ns, _ := Notes(ef)
	WriteNotes(io.Discard, ns)
	ds, _ := Dynamic(ef)
	WriteDynamic(io.Discard, ds)
	rs, err := Relocations(ef)
	if err == nil {
		for _, r := range rs {
			s := ef.Sections[r.Section]
			if b, err := ef.SectionData(r.Section); err == nil {
				if n := len(b) / ef.RelSize(s.Type == elf.SHT_RELA); n != len(r.Entries) {
					t.Fatalf("%s: %d entries, %d bytes hold %d", r.Name, len(r.Entries), len(b), n)
				}
			}
		}
	}
	WriteRelocations(io.Discard, h, rs)
	roundTrip(t, ss)
	roundTrip(t, ts)
	if sec, err := ReadDebugSections(ef); err == nil && sec.Info.Info != nil {
		if d, err := info.New(sec.Info); err == nil {
			n := 0
			_ = DebugInfo(d, sec, func(u Unit) error {
				WriteUnit(io.Discard, u)
				n += len(u.DIEs)
				if n > 1<<16 {
					return io.EOF
				}
				return nil
			})
			_ = DebugLine(sec.Line, CompDirs(d), func(p LineProgram) error {
				WriteLineProgram(io.Discard, p)
				return nil
			})
		}
	}
}

// roundTrip checks that v's JSON reads back to values that write the
// same JSON again (names that are not UTF-8 become U+FFFD on the first
// pass, so the second pass is the fixed point).
func roundTrip[T any](t *testing.T, v T) {
	t.Helper()
	pass := func(x T) (T, []byte) {
		b, err := json.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		var back T
		if err := json.NewDecoder(bytes.NewReader(b)).Decode(&back); err != nil {
			t.Fatal(err)
		}
		return back, b
	}
	once, b1 := pass(v)
	twice, b2 := pass(once)
	if _, b3 := pass(twice); !bytes.Equal(b2, b3) || len(b1) == 0 {
		t.Fatalf("JSON round trip: %s became %s", b2, b3)
	}
}
