package symbolize

import (
	"debug/elf"
	"slices"
	"testing"
)

// FuzzReadDIEsPath: on arbitrary .debug_info, .debug_abbrev and
// .debug_str, the in-place reads of planned abbreviations (readPlanned,
// skipInPlace, the walk's one-byte codes) give the DIEs the form-by-form
// path gives, and fail where it fails, with its error.
func FuzzReadDIEsPath(f *testing.F) {
	names := []string{".debug_info", ".debug_abbrev", ".debug_str"}
	for _, flags := range [][]string{{"-gdwarf-5"}, {"-gdwarf-4"}} {
		p := fuzzSeedBinary(f, flags...)
		if p == "" {
			continue
		}
		ef, err := elf.Open(p)
		if err != nil {
			f.Fatal(err)
		}
		var secs [3][]byte
		for i, n := range names {
			if s := ef.Section(n); s != nil {
				secs[i], _ = s.Data()
			}
		}
		ef.Close()
		f.Add(secs[0], secs[1], secs[2])
	}
	f.Fuzz(func(t *testing.T, info, abbrev, str []byte) {
		m := map[string][]byte{names[0]: info, names[1]: abbrev, names[2]: str}
		section := func(n string) ([]byte, error) { return m[n], nil }
		fast, _, ferr := ReadDIEsPath(section, false)
		slow, _, serr := ReadDIEsPath(section, true)
		if (ferr == nil) != (serr == nil) || (ferr != nil && ferr.Error() != serr.Error()) {
			t.Fatalf("in place: %v; form by form: %v", ferr, serr)
		}
		if !slices.Equal(fast, slow) {
			t.Fatalf("in place %d DIEs, form by form %d: differ", len(fast), len(slow))
		}
	})
}
