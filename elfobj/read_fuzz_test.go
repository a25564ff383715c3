package elfobj

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzFile: any bytes as a whole file. The reader never panics, refuses
// only with a *dwarf.FormatError, sees what debug/elf sees whenever both
// read the file (headers, program headers, sections and their decompressed
// contents, symbols, notes), refuses what debug/elf reads only by a
// documented stricter rule that debug/elf's view bears out, and, for
// relocatable objects, relocates sections as the independent relocator
// of this package's tests does.
func FuzzFile(f *testing.F) {
	for _, pat := range []string{"testdata/*.o", filepath.Join(goroot(f), "src/debug/elf/testdata/*.obj")} {
		m, _ := filepath.Glob(pat)
		for _, p := range m {
			if b, err := os.ReadFile(p); err == nil && len(b) < 64<<10 {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkOracle(t, "input", data)
		if fl, err := NewBytes(data); err == nil {
			checkRelocations(t, fl, data)
			exercise(fl)
		}
	})
}

// exercise calls every reading method on f (which must not panic).
func exercise(f *File) {
	f.BuildID()
	for i := range f.Progs {
		f.ProgData(i)
		if r, err := f.ProgNotes(i); err == nil {
			for _, ok := r.Next(); ok; _, ok = r.Next() {
			}
		}
	}
	for i := range f.Sections {
		f.Relocated(i)
		if t, err := f.Symbols(i); err == nil {
			for j := 0; j < t.Len() && j < 1000; j++ {
				t.Sym(j)
				t.NameBytes(j)
			}
		}
	}
}
