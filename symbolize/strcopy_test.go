package symbolize

import (
	"os/exec"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/elfimage/elfimage/internal/tooltest"
)

// TestNamesStrCopy: a unit indexed with a copy of .debug_str (copyStr,
// as Prepare makes for a batch of many units) names every subroutine that
// a lookup can reach as the unit's own copy of its names does, both for units whose names all
// lie in .debug_str (they then name in the section's copy) and for units
// with names elsewhere (DW_FORM_string: gcc writes names of up to three
// bytes in place), which keep their own copy.
func TestNamesStrCopy(t *testing.T) {
	gcc := tooltest.Require(t, "gcc")
	dir := t.TempDir()
	for _, v := range []string{"4", "5"} {
		path := filepath.Join(dir, "prog"+v)
		cmd := exec.Command(gcc, "-O2", "-g", "-gdwarf-"+v, "-o", path, "hash.c", "main.c", "parse.c", "sort.c", "tree.c")
		cmd.Dir = "testdata/csrc"
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("gcc: %v\n%s", err, msg)
		}
		open := func() (*Symbolizer, *dwarfData) {
			s, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			d, err := s.dwarf()
			if err != nil || d == nil || len(d.units) == 0 {
				t.Fatalf("dwarf: %v, %v", d, err)
			}
			return s, d
		}
		s1, own := open()
		defer s1.Close()
		s2, shared := open()
		defer s2.Close()
		shared.copyStr()
		strs := shared.strCopy.Load()
		if strs == nil || *strs != string(shared.sec.Str) {
			t.Fatalf("DWARF %s: no copy of .debug_str", v)
		}
		direct, kept, named := 0, 0, 0
		for i := range own.units {
			x1, x2 := own.index(i), shared.index(i)
			if x1.err != nil || x2.err != nil {
				t.Fatalf("DWARF %s unit %d: %v, %v", v, i, x1.err, x2.err)
			}
			if len(x1.subrs) != len(x2.subrs) {
				t.Fatalf("DWARF %s unit %d: %d and %d subroutines", v, i, len(x1.subrs), len(x2.subrs))
			}
			// The subroutines lookups can name: those on the chain of
			// some segment (the others may have a name with the
			// section's copy only).
			chained := map[int32]bool{}
			for _, sg := range x1.segs {
				for k := sg.die; k >= 0 && !chained[k]; k = x1.subrs[k].parent() {
					chained[k] = true
				}
			}
			for k := range x1.subrs {
				// Every subroutine's name lies in the unit's names.
				if sb := &x2.subrs[k]; uint64(sb.name)+uint64(sb.nameLen) > uint64(len(x2.names)) {
					t.Errorf("DWARF %s unit %d subroutine %d: name [%d, +%d) outside the unit's %d bytes of names", v, i, k, sb.name, sb.nameLen, len(x2.names))
				}
				if !chained[int32(k)] {
					continue
				}
				if n1, n2 := x1.name(int32(k)), x2.name(int32(k)); n1 != n2 {
					t.Errorf("DWARF %s unit %d subroutine %d: %q with the unit's copy, %q with the section's", v, i, k, n1, n2)
				} else if n1 != "" {
					named++
				}
			}
			if len(x2.names) > 0 && unsafeSameString(x2.names, *strs) {
				direct++
			} else {
				kept++
			}
		}
		if direct == 0 || kept == 0 || named == 0 {
			t.Errorf("DWARF %s: %d units named in the copy of .debug_str, %d in their own, %d names: want both kinds", v, direct, kept, named)
		}
	}
}

// unsafeSameString reports whether a and b are the same bytes in memory.
func unsafeSameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}
