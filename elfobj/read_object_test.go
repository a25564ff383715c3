package elfobj

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/internal/tooltest"
)

// objects returns the relocatable objects of testdata (built by
// testdata/build.sh from testdata/reloc.c: gcc and clang, x86-64, i386,
// AArch64 and Arm, DWARF 4 and 5, zlib, GNU zlib and zstd compression).
func objects(t *testing.T) map[string][]byte {
	paths, _ := filepath.Glob("testdata/*.o")
	if len(paths) < 10 {
		t.Fatalf("only %d objects in testdata", len(paths))
	}
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = b
	}
	return out
}

// dwarfOf builds debug/dwarf's reader over this reader's relocated DWARF
// sections of f.
func dwarfOf(t *testing.T, f *File) *dwarf.Data {
	t.Helper()
	sec := func(name string) []byte {
		b, err := f.DebugSection(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return b
	}
	d, err := dwarf.New(sec(".debug_abbrev"), nil, nil, sec(".debug_info"), sec(".debug_line"), nil, sec(".debug_ranges"), sec(".debug_str"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{".debug_addr", ".debug_line_str", ".debug_str_offsets", ".debug_rnglists", ".debug_loclists"} {
		if b := sec(name); b != nil {
			if err := d.AddSection(name, b); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
	}
	return d
}

// dumpDWARF prints every DIE with its attributes and every unit's line
// table rows.
func dumpDWARF(t *testing.T, d *dwarf.Data) string {
	t.Helper()
	var b strings.Builder
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e == nil {
			break
		}
		fmt.Fprintf(&b, "%#x %v %v\n", e.Offset, e.Tag, e.Children)
		for _, f := range e.Field {
			fmt.Fprintf(&b, "\t%v %v %#v\n", f.Attr, f.Class, f.Val)
		}
		if e.Tag == dwarf.TagCompileUnit {
			lr, err := d.LineReader(e)
			if err != nil {
				t.Fatal(err)
			}
			for lr != nil {
				var le dwarf.LineEntry
				if err := lr.Next(&le); err != nil {
					break
				}
				fmt.Fprintf(&b, "\tline %#x %s:%d:%d\n", le.Address, le.File.Name, le.Line, le.Column)
			}
		}
	}
	return b.String()
}

// TestObjects: the relocatable objects of gcc and clang for x86-64, i386,
// AArch64 and Arm, compressed or not, read as debug/elf reads them; their
// debug sections and .eh_frame relocate without error and as the
// independent relocator relocates them; the DWARF that debug/dwarf decodes
// from the relocated sections is the DWARF debug/elf's own relocation
// gives (every DIE, attribute and line row); and without relocation the
// names would be wrong (the relocations matter).
func TestObjects(t *testing.T) {
	for _, name := range sortedKeys(objects(t)) {
		data := objects(t)[name]
		t.Run(filepath.Base(name), func(t *testing.T) {
			checkOracle(t, name, data)
			f, err := NewBytes(data)
			if err != nil {
				t.Fatal(err)
			}
			if f.Type != elf.ET_REL {
				t.Fatalf("type %v", f.Type)
			}
			checkRelocations(t, f, data)
			relocated := 0
			for i, s := range f.Sections {
				if !strings.HasPrefix(s.Name, ".debug_") && !strings.HasPrefix(s.Name, ".zdebug_") && s.Name != ".eh_frame" {
					continue
				}
				got, err := f.Relocated(i)
				if err != nil {
					t.Fatalf("%s: %v", s.Name, err)
				}
				plain, _ := f.SectionData(i)
				if !bytes.Equal(got, plain) {
					relocated++
				}
			}
			// SHT_RELA objects keep 0 at every place; SHT_REL ones keep
			// the addend there, so only relocations against symbols
			// other than section symbols change their bytes.
			if wantChanged := map[bool]int{true: 3, false: 1}[f.FindSectionType(elf.SHT_RELA) >= 0]; relocated < wantChanged {
				t.Errorf("only %d debug sections changed by their relocations, want %d", relocated, wantChanged)
			}
			ef, err := elf.NewFile(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			want, err := ef.DWARF()
			if err != nil {
				t.Fatal(err)
			}
			got := dumpDWARF(t, dwarfOf(t, f))
			if w := dumpDWARF(t, want); got != w {
				t.Errorf("DWARF of the relocated sections differs from debug/elf's:\n%s", firstDiff(got, w))
			}
			if !strings.Contains(got, `"compute"`) || !strings.Contains(got, `"reloc.c"`) {
				t.Errorf("names missing from the DWARF:\n%s", got)
			}
		})
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n\tgot  %s\n\twant %s", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("%d lines, want %d", len(al), len(bl))
}

var dwarfdumpName = regexp.MustCompile(`DW_AT_(name|producer)\s+\("([^"]*)"\)`)

// TestObjectsDwarfdump: the names llvm-dwarfdump 14 prints for each object
// (it relocates the sections itself) are the names in this reader's
// relocated DWARF, in order. (LLVM 14 cannot read zstd sections: those
// objects are left to the debug/elf comparison.)
func TestObjectsDwarfdump(t *testing.T) {
	tool := tooltest.Require(t, "llvm-dwarfdump-14", "llvm-dwarfdump")
	for _, name := range sortedKeys(objects(t)) {
		if strings.Contains(name, "zstd") {
			continue
		}
		t.Run(filepath.Base(name), func(t *testing.T) {
			out, err := exec.Command(tool, "--debug-info", name).CombinedOutput()
			if err != nil {
				t.Fatalf("llvm-dwarfdump: %v\n%s", err, out)
			}
			var want []string
			for _, m := range dwarfdumpName.FindAllStringSubmatch(string(out), -1) {
				want = append(want, m[2])
			}
			f, err := NewBytes(objects(t)[name])
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			r := dwarfOf(t, f).Reader()
			for {
				e, err := r.Next()
				if err != nil || e == nil {
					break
				}
				for _, a := range []dwarf.Attr{dwarf.AttrProducer, dwarf.AttrName} {
					for _, fl := range e.Field {
						if fl.Attr == a {
							if s, ok := fl.Val.(string); ok {
								got = append(got, s)
							}
						}
					}
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			if len(want) < 10 || !slices.Equal(got, want) {
				t.Errorf("names %q, llvm-dwarfdump %q", got, want)
			}
		})
	}
}
