package info_test

import (
	"crypto/sha256"
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

// benchSections builds benchSource with gcc and flags, or the Go program
// benchGoSource when gcc is false, and returns its DWARF sections. The
// binaries are kept between runs (in the temporary directory, named by
// a hash of what built them), so that runs of different versions of the
// reader decode the same bytes.
func benchSections(b *testing.B, gcc bool, flags ...string) info.Sections {
	var tool, src, name string
	if gcc {
		tool, src, name = tooltest.Require(b, "gcc"), benchSource(2000), "bench.c"
	} else {
		tool, src, name = tooltest.Require(b, "go"), benchGoSource, "main.go"
	}
	h := sha256.Sum256([]byte(fmt.Sprint(tool, flags, src)))
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("elfimage-info-bench-%x", h[:8]))
	exe := filepath.Join(dir, "bench")
	if _, err := os.Stat(exe); err != nil {
		tmp, err := os.MkdirTemp("", "elfimage-info-bench")
		if err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(tmp)
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(src), 0o644); err != nil {
			b.Fatal(err)
		}
		var cmd *exec.Cmd
		if gcc {
			cmd = exec.Command(tool, append(flags, "-o", "bench", name)...)
		} else {
			if err := os.WriteFile(filepath.Join(tmp, "go.mod"), []byte("module bench\n\ngo 1.22\n"), 0o644); err != nil {
				b.Fatal(err)
			}
			cmd = exec.Command(tool, "build", "-o", "bench", ".")
		}
		cmd.Dir = tmp
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %v\n%s", cmd.Args, err, out)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.Rename(filepath.Join(tmp, "bench"), exe); err != nil {
			b.Fatal(err)
		}
	}
	return elfSections(b, exe)
}

// benchGoSource is a Go program that links the HTTP server and client:
// about 8 MB of Go's DWARF 5.
const benchGoSource = `package main

import (
	"fmt"
	"net/http"
	"os"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Println(http.ListenAndServe(os.Args[1], nil))
	}
	_, err := http.Get("http://127.0.0.1:1")
	fmt.Println(err)
}
`

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
// DWARF 5 and DWARF 4, and a Go program linking net/http (Go's DWARF 5).
// The metric DIE/s counts entries, null entries included.
func BenchmarkReader(b *testing.B) {
	inputs := []struct {
		name string
		sec  func(*testing.B) info.Sections
	}{
		{"gcc-dwarf5", func(b *testing.B) info.Sections { return benchSections(b, true, "-O2", "-g", "-gdwarf-5") }},
		{"gcc-dwarf4", func(b *testing.B) info.Sections { return benchSections(b, true, "-O2", "-g", "-gdwarf-4") }},
		{"go", func(b *testing.B) info.Sections { return benchSections(b, false) }},
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
