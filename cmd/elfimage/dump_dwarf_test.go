package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/internal/tooltest"
)

// TestDumpDWARF holds dump -json -info -lines against llvm-dwarfdump
// --debug-info --debug-line on gcc, g++ and clang output: a relocatable
// object (its DWARF relocated first) and an executable, DWARF 5 and 4
// (.debug_loclists/.debug_rnglists and .debug_loc/.debug_ranges). Every
// DIE's offset, depth, tag and attribute names, every location and range
// list entry (but the empty ones, which dwarf/loc skips) and every line
// row must agree.
func TestDumpDWARF(t *testing.T) {
	gcc := tooltest.Require(t, "gcc")
	dd := tooltest.Require(t, "llvm-dwarfdump", "llvm-dwarfdump-14")
	dir := t.TempDir()
	src := filepath.Join(dir, "d.c")
	writeSource(t, src, `#include <stdio.h>
struct pt { int x, y; };
static inline int dot(struct pt a, struct pt b) { return a.x * b.x + a.y * b.y; }
__attribute__((noinline)) int sum(const int *v, int n) {
	int s = 0;
	for (int i = 0; i < n; i++) { struct pt p = {v[i], i}; s += dot(p, p) ^ s; }
	return s;
}
int main(int argc, char **argv) { int v[4] = {argc, 2, 3, 4}; printf("%d\n", sum(v, argc + 3)); return 0; }
`)
	clang := tooltest.Require(t, "clang-14", "clang")
	gxx := tooltest.Require(t, "g++")
	cxx := filepath.Join(dir, "t.cc")
	writeSource(t, cxx, compatSrc)
	for _, c := range []struct {
		name, cc, version, kind string
		dwarf                   uint16
	}{
		{"g++-exe5", gxx, "-gdwarf-5", "", 5}, {"clang++-exe5", clang, "-gdwarf-5", "", 5},
		{"gcc-o5", gcc, "-gdwarf-5", "-c", 5}, {"gcc-exe5", gcc, "-gdwarf-5", "", 5}, {"gcc-o4", gcc, "-gdwarf-4", "-c", 4},
		{"gcc-exe4", gcc, "-gdwarf-4", "", 4}, {"clang-o5", clang, "-gdwarf-5", "-c", 5}, {"clang-exe5", clang, "-gdwarf-5", "", 5},
		{"clang-exe4", clang, "-gdwarf-4", "", 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, c.name)
			in := src
			if strings.HasPrefix(c.name, "g++") || strings.HasPrefix(c.name, "clang++") {
				in = cxx
			}
			args := []string{"-O2", c.version, "-o", out, in}
			if strings.HasPrefix(c.name, "clang++") {
				// clang as the C++ driver: the language, and the library.
				args = append(append([]string{"-x", "c++"}, args...), "-lstdc++")
			}
			if c.kind != "" {
				args = append(args, c.kind)
			}
			if msg, err := exec.Command(c.cc, args...).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", c.cc, err, msg)
			}
			code, js, errOut := runCLI(t, "dump", "-json", "-info", "-lines", out)
			if code != 0 {
				t.Fatalf("dump: exit %d: %s", code, errOut)
			}
			var doc dumpDoc
			if err := json.Unmarshal([]byte(js), &doc); err != nil {
				t.Fatal(err)
			}
			if len(doc.Units) == 0 || doc.Units[0].Version != c.dwarf {
				t.Fatalf("units %+v, want DWARF %d", doc.Units, c.dwarf)
			}
			info, err := exec.Command(dd, "--debug-info", out).Output()
			if err != nil {
				t.Fatal(err)
			}
			lines, err := exec.Command(dd, "--debug-line", out).Output()
			if err != nil {
				t.Fatal(err)
			}
			compareDIEs(t, doc, string(info))
			compareLines(t, doc, string(lines))
		})
	}
}

var (
	ddDIE   = regexp.MustCompile(`^0x([0-9a-f]+):( +)(DW_TAG_\w+|NULL)`)
	ddAttr  = regexp.MustCompile(`^\s+(DW_AT_\w+)\s`)
	ddEntry = regexp.MustCompile(`^\s+\[0x([0-9a-f]+), 0x([0-9a-f]+)\)`)
	ddRow   = regexp.MustCompile(`^0x([0-9a-f]{16}) +(\d+) +(\d+) +(\d+) +(\d+) +(\d+) +(.*)$`)
)

// compareDIEs compares the DIE trees: one line per DIE ("offset depth tag
// attr,attr"), one per list entry ("[start, end)").
func compareDIEs(t *testing.T, doc dumpDoc, text string) {
	t.Helper()
	var want []string
	for _, l := range strings.Split(text, "\n") {
		if m := ddDIE.FindStringSubmatch(l); m != nil {
			if m[3] == "NULL" {
				continue
			}
			off, _ := strconv.ParseUint(m[1], 16, 64)
			want = append(want, fmt.Sprintf("%#x %d %s", off, (len(m[2])-1)/2, m[3]))
		} else if m := ddAttr.FindStringSubmatch(l); m != nil && len(want) > 0 {
			want = append(want, "  "+m[1])
		} else if m := ddEntry.FindStringSubmatch(l); m != nil && len(want) > 0 {
			lo, _ := strconv.ParseUint(m[1], 16, 64)
			hi, _ := strconv.ParseUint(m[2], 16, 64)
			if lo == hi {
				// Empty entries cover no address: package dwarf/loc
				// skips them, and so does dump.
				continue
			}
			want = append(want, fmt.Sprintf("    [%#x, %#x)", lo, hi))
		}
	}
	var got []string
	lists := 0
	for _, u := range doc.Units {
		for _, d := range u.DIEs {
			got = append(got, fmt.Sprintf("%#x %d %s", d.Offset, d.Depth, d.Tag))
			for _, a := range d.Attrs {
				got = append(got, "  "+a.Name)
				for _, e := range a.List {
					got = append(got, fmt.Sprintf("    [%#x, %#x)", e.Start, e.End))
					lists++
				}
			}
		}
	}
	if lists == 0 {
		t.Error("no location or range list entries")
	}
	diffLines(t, "DIEs", strings.Join(got, "\n"), strings.Join(want, "\n"))
	t.Logf("%d DIE lines, %d list entries agree with llvm-dwarfdump", len(got), lists)
}

// compareLines compares every row of every line program.
func compareLines(t *testing.T, doc dumpDoc, text string) {
	t.Helper()
	var want []string
	for _, l := range strings.Split(text, "\n") {
		if m := ddRow.FindStringSubmatch(l); m != nil {
			addr, _ := strconv.ParseUint(m[1], 16, 64)
			want = append(want, fmt.Sprintf("%#x %s %s %s %s %s %s", addr, m[2], m[3], m[4], m[5], m[6], strings.TrimSpace(m[7])))
		}
	}
	var got []string
	for _, p := range doc.LinePrograms {
		for _, r := range p.Rows {
			got = append(got, fmt.Sprintf("%#x %d %d %d %d %d %s", r.Address, r.Line, r.Column, r.File, r.ISA, r.Discriminator, r.Flags))
		}
	}
	if len(got) == 0 {
		t.Error("no line rows")
	}
	diffLines(t, "line rows", strings.Join(got, "\n"), strings.Join(want, "\n"))
	t.Logf("%d line rows agree with llvm-dwarfdump", len(got))
}
