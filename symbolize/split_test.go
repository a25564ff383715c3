package symbolize_test

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/elfimage/elfimage/internal/tooltest"
	"github.com/elfimage/elfimage/symbolize"
)

// buildObjects compiles each of testdata/csrc's files with cc and flags
// to an object in a new directory (so that -gsplit-dwarf leaves each
// .dwo beside its object) and links them; it returns the program.
func buildObjects(t *testing.T, cc string, flags ...string) string {
	t.Helper()
	tool := tooltest.Require(t, cc)
	dir := t.TempDir()
	var objs []string
	for _, src := range cSources(t) {
		obj := filepath.Join(dir, strings.TrimSuffix(src, ".c")+".o")
		cmd := exec.Command(tool, append(append([]string{}, flags...), "-c", "-o", obj, src)...)
		cmd.Dir = "testdata/csrc"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %v %s: %v\n%s", cc, flags, src, err, out)
		}
		objs = append(objs, obj)
	}
	prog := filepath.Join(dir, "prog")
	if out, err := exec.Command(tool, append([]string{"-o", prog}, objs...)...).CombinedOutput(); err != nil {
		t.Fatalf("link: %v\n%s", err, out)
	}
	return prog
}

func textOf(t *testing.T, path string) []byte {
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := f.Section(".text").Data()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSplitDWARF: gcc -O2 -g -gsplit-dwarf and clang-14 -O2 -g
// -gsplit-dwarf builds (DWARF 5 skeleton units, split units in .dwo
// files), and gcc -gdwarf-4 -gsplit-dwarf (GNU DW_AT_GNU_dwo_name
// skeletons, DW_AT_GNU_ranges_base), symbolize, inlined frames included, as llvm-symbolizer
// symbolizes the same code built without -gsplit-dwarf (the .text is
// checked to be the same). (llvm-symbolizer 14 on the split builds
// themselves loses the inlined frames that the .dwo units' range lists
// cover, for gcc (DWARF 4 and 5) and clang alike: the unsplit build is the oracle, and
// the test logs how often llvm-symbolizer disagrees with itself.)
// A DWARF package made of the .dwo files by llvm-dwp (prog.dwp, its
// .debug_cu_index) gives the same answers. Without the .dwo files and the
// package the answers are the skeleton's line table and the symbol table,
// as llvm-symbolizer's.
func TestSplitDWARF(t *testing.T) {
	for _, c := range []struct {
		name, cc string
		flags    []string
	}{
		{"gcc", "gcc", nil},
		{"gcc-dwarf4", "gcc", []string{"-gdwarf-4"}},
		{"clang-14", "clang-14", nil},
	} {
		cc := c.cc
		t.Run(c.name, func(t *testing.T) {
			split := buildObjects(t, cc, append([]string{"-O2", "-g", "-gsplit-dwarf"}, c.flags...)...)
			whole := buildObjects(t, cc, append([]string{"-O2", "-g"}, c.flags...)...)
			if !bytes.Equal(textOf(t, split), textOf(t, whole)) {
				t.Fatalf("-gsplit-dwarf changed the code")
			}
			dwos, _ := filepath.Glob(filepath.Join(filepath.Dir(split), "*.dwo"))
			if len(dwos) != len(cSources(t)) {
				t.Fatalf(".dwo files %v", dwos)
			}
			addrs := codeAddrs(t, split, 3000, 11)
			want := llvmSymbolize(t, whole, addrs)
			s, err := symbolize.Open(split)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			bad, inl := 0, 0
			for i, a := range addrs {
				got, err := s.Symbolize(a, nil)
				if err != nil {
					got = []symbolize.Frame{{}}
				}
				if len(got) > 1 {
					inl++
				}
				if !slices.Equal(got, want[i]) {
					if bad++; bad <= 10 {
						t.Errorf("%#x: ours (err %v):%s\n\tllvm-symbolizer, unsplit build:%s", a, err, fmtFrames(got), fmtFrames(want[i]))
					}
				}
			}
			if bad > 0 || inl == 0 {
				t.Errorf("%d of %d addresses differ; %d with inlined frames", bad, len(addrs), inl)
			}
			t.Logf("%d addresses, %d with inlined frames", len(addrs), inl)
			// The scan path (an address looked up without the unit's
			// index) on a sample.
			restore := symbolize.ScanAlways()
			for i := 0; i < len(addrs); i += 10 {
				got, err := s.Symbolize(addrs[i], nil)
				if err != nil || !slices.Equal(got, want[i]) {
					t.Errorf("%#x, scanned: ours (err %v):%s\n\tllvm-symbolizer, unsplit build:%s", addrs[i], err, fmtFrames(got), fmtFrames(want[i]))
					break
				}
			}
			restore()
			// llvm-symbolizer 14 on the split build itself: where it
			// differs from us, it differs from its own answer for the
			// unsplit build (it loses the inlined frames that the .dwo
			// units' range lists cover).
			direct := llvmSymbolize(t, split, addrs)
			lost := 0
			for i := range addrs {
				if !slices.Equal(direct[i], want[i]) {
					lost++
				}
			}
			t.Logf("llvm-symbolizer on the split build differs from its unsplit answer at %d of %d addresses", lost, len(addrs))

			// From a DWARF package (llvm-dwp), beside the program as
			// prog.dwp, with the .dwo files gone. Neither llvm-dwp 14
			// (it spins) nor binutils' dwp (it crashes) packs gcc 12's
			// DWARF 5 .dwo files: clang's only.
			if cc == "clang-14" {
				checkPackage(t, split, dwos, addrs, want)
			}

			// Without the .dwo files and the package.
			for _, d := range dwos {
				os.Remove(d)
			}
			bare := llvmSymbolize(t, split, addrs[:500])
			s2, err := symbolize.Open(split)
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			bad = 0
			for i, a := range addrs[:500] {
				got, err := s2.Symbolize(a, nil)
				if err != nil {
					got = []symbolize.Frame{{}}
				}
				if !slices.Equal(got, bare[i]) {
					if bad++; bad <= 5 {
						t.Errorf("without .dwo, %#x: ours (err %v):%s\n\tllvm-symbolizer:%s", a, err, fmtFrames(got), fmtFrames(bare[i]))
					}
				}
			}
		})
	}
}

// checkPackage packs the .dwo files of split into split.dwp with llvm-dwp,
// removes them, and checks the answers from the package against want.
func checkPackage(t *testing.T, split string, dwos []string, addrs []uint64, want [][]symbolize.Frame) {
	t.Helper()
	dwp := tooltest.Require(t, "llvm-dwp")
	if out, err := tooltest.RunGroup(exec.Command(dwp, "-e", split, "-o", split+".dwp"), 2*time.Minute); err != nil {
		t.Fatalf("llvm-dwp: %v\n%s", err, out)
	}
	defer os.Remove(split + ".dwp")
	for _, d := range dwos {
		if err := os.Rename(d, d+".away"); err != nil {
			t.Fatal(err)
		}
		defer os.Rename(d+".away", d)
	}
	s, err := symbolize.Open(split)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bad := 0
	for i, a := range addrs {
		got, err := s.Symbolize(a, nil)
		if err != nil || !slices.Equal(got, want[i]) {
			if bad++; bad <= 5 {
				t.Errorf("from the .dwp, %#x: ours (err %v):%s\n\tllvm-symbolizer, unsplit build:%s", a, err, fmtFrames(got), fmtFrames(want[i]))
			}
		}
	}
	if bad > 0 {
		t.Errorf("from the .dwp: %d of %d addresses differ", bad, len(addrs))
	}
}
