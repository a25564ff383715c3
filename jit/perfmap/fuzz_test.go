package perfmap

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/elfimage/elfimage/dwarf"
)

// FuzzParse: any input parses without panicking; the resolved table is
// sorted, non-overlapping and non-empty per entry; every resolved entry is
// what a brute-force "last raw line covering pc wins" says at its ends; and
// lines the Writer writes read back.
func FuzzParse(f *testing.F) {
	w, err := Open(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	w.AddBatch([]Entry{{0x7f0000001000, 0x40, "fib"}, {0x7f0000001040, 0x10, "a\nb"}, {0x7f0000001020, 0x40, "x"}})
	w.Close()
	seed, _ := os.ReadFile(w.Path())
	f.Add(seed)
	f.Add([]byte("0x10 0X20 Name with spaces\r\n\n\t\nABC 1 z\nbad\n"))
	f.Add([]byte("1000 100 old\n1040 20 new\n10f0 20 tail\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := Parse(bytes.NewReader(in))
		if err != nil {
			var fe *dwarf.FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a FormatError", err)
			}
			return
		}
		if m.Skipped > 0 && m.FirstSkip == nil {
			t.Fatal("skipped lines without FirstSkip")
		}
		for _, r := range m.Raw {
			if r.Size > 0 {
				if _, ok := m.Lookup(r.Start); !ok {
					t.Fatalf("raw %v not covered", r)
				}
			}
		}
		for i, e := range m.Entries {
			if e.Size == 0 {
				t.Fatalf("empty entry %v", e)
			}
			if i > 0 && m.Entries[i-1].End() > e.Start {
				t.Fatalf("entries overlap or unsorted: %v %v", m.Entries[i-1], e)
			}
			for _, pc := range []uint64{e.Start, e.End() - 1} {
				want := ""
				for _, r := range m.Raw {
					if r.Start <= pc && pc-r.Start < r.Size {
						want = r.Name
					}
				}
				if want != e.Name {
					t.Fatalf("pc %#x resolves to %q, last covering line is %q", pc, e.Name, want)
				}
				if got, ok := m.Lookup(pc); !ok || got != e {
					t.Fatalf("Lookup(%#x) = %v, %v; want %v", pc, got, ok, e)
				}
			}
		}
	})
}
