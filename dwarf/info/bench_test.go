package info_test

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/dwarf/info"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// benchSource is a C program of benchFuncs functions, each with a
// structure parameter, locals, a loop and an inlined helper, so that gcc
// writes the usual mix of forms: strp/line_strp names, data1/2 lines,
// exprloc locations, sec_offset/loclistx location lists, ref4 types,
// implicit_const files, flag_present.
func benchSource(n int) string {
	var b strings.Builder
	b.WriteString("struct pt { int x, y; long z; const char *name; };\n")
	b.WriteString("static inline long mix(long a, long b) { return a * 31 + b; }\n")
	for i := range n {
		fmt.Fprintf(&b, "long fn%d(struct pt p, int k) {\n\tlong s = %d;\n\tfor (int j = 0; j < k; j++)\n\t\ts = mix(s, p.x + j * p.y);\n\treturn s + p.z + p.name[%d];\n}\n", i, i, i%7)
	}
	b.WriteString("int main(int c, char **v) { struct pt p = {c, 2, 3, v[0]}; return (int)fn0(p, c); }\n")
	return b.String()
}

// benchSections builds benchSource with gcc and flags and returns its
// DWARF sections.
func benchSections(b *testing.B, flags ...string) info.Sections {
	gcc := tooltest.Require(b, "gcc")
	dir := b.TempDir()
	src := filepath.Join(dir, "bench.c")
	if err := os.WriteFile(src, []byte(benchSource(2000)), 0o644); err != nil {
		b.Fatal(err)
	}
	exe := filepath.Join(dir, "bench")
	if out, err := exec.Command(gcc, append(flags, "-o", exe, src)...).CombinedOutput(); err != nil {
		b.Fatalf("gcc: %v\n%s", err, out)
	}
	return elfSections(b, exe)
}

// elfSections returns the DWARF sections of the ELF file at path
// (decompressed).
func elfSections(b *testing.B, path string) info.Sections {
	f, err := elf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	data := func(name string) []byte {
		s := f.Section(name)
		if s == nil {
			return nil
		}
		d, err := s.Data()
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	return info.Sections{Info: data(".debug_info"), Abbrev: data(".debug_abbrev"), Str: data(".debug_str"),
		LineStr: data(".debug_line_str"), StrOffsets: data(".debug_str_offsets"), Addr: data(".debug_addr"),
		RngLists: data(".debug_rnglists"), LocLists: data(".debug_loclists")}
}

// BenchmarkReader decodes every DIE of a binary: New, then Next to the
// end. The inputs are a 2,000-function C program built by gcc -O2 with
// DWARF 5 and DWARF 4, and the elfimage command (Go's linker's DWARF 5). The
// metric DIE/s counts entries, null entries included.
func BenchmarkReader(b *testing.B) {
	inputs := []struct {
		name string
		sec  func(*testing.B) info.Sections
	}{
		{"gcc-dwarf5", func(b *testing.B) info.Sections { return benchSections(b, "-O2", "-g", "-gdwarf-5") }},
		{"gcc-dwarf4", func(b *testing.B) info.Sections { return benchSections(b, "-O2", "-g", "-gdwarf-4") }},
		{"go", func(b *testing.B) info.Sections {
			// The elfimage command, built with DWARF (go test strips
			// its own binary).
			exe := filepath.Join(b.TempDir(), "elfimage")
			gocmd := tooltest.Require(b, "go")
			if out, err := exec.Command(gocmd, "build", "-ldflags=-compressdwarf=false", "-o", exe, "github.com/elfimage/elfimage/cmd/elfimage").CombinedOutput(); err != nil {
				b.Fatalf("go build: %v\n%s", err, out)
			}
			return elfSections(b, exe)
		}},
	}
	for _, in := range inputs {
		b.Run(in.name, func(b *testing.B) {
			sec := in.sec(b)
			if len(sec.Info) == 0 {
				b.Skip("no .debug_info")
			}
			b.SetBytes(int64(len(sec.Info)))
			b.ReportAllocs()
			dies := 0
			for b.Loop() {
				d, err := info.New(sec)
				if err != nil {
					b.Fatal(err)
				}
				r := d.Reader()
				for {
					e, err := r.Next()
					if err != nil {
						b.Fatal(err)
					}
					if e == nil {
						break
					}
					dies++
				}
			}
			b.ReportMetric(float64(dies)/b.Elapsed().Seconds(), "DIE/s")
		})
	}
}
