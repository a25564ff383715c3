package info

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	edwarf "github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// compilerCSrc and compilerCXXSrc use the constructs whose attributes
// take the less common forms: bit fields (data_bit_offset), enumerators
// with negative values (sdata), arrays with bounds, function pointers,
// variadic functions, static locals (addr/exprloc), inlining with
// location lists (sec_offset or loclistx, rnglistx), const and volatile;
// in C++ namespaces, classes, templates and linkage names.
const compilerCSrc = `#include <stdarg.h>
#include <stdio.h>
enum color { RED = -2, GREEN = 0, BLUE = 300000 };
struct flags { unsigned a : 3, b : 5; signed c : 7; };
union u { int i; float f; char bytes[4]; };
typedef int (*binop)(int, int);
static int add(int a, int b) { return a + b; }
static inline int twice(int x) { volatile int y = x; return y * 2; }
int sum(int n, ...) { va_list ap; va_start(ap, n); int s = 0; for (int i = 0; i < n; i++) s += va_arg(ap, int); va_end(ap); return s; }
int grid[3][5];
int main(int argc, char **argv) {
	static const char *names[] = { "a", "b" };
	struct flags f = { 1, 2, -3 };
	union u v = { .i = argc };
	enum color c = argc > 1 ? BLUE : RED;
	binop op = add;
	for (int i = 0; i < argc; i++) grid[i % 3][i % 5] = twice(op(i, f.c));
	printf("%d %s %d %d\n", sum(3, argc, f.a, f.b), names[argc & 1], v.bytes[0], (int)c);
	return grid[1][2];
}
`

const compilerCXXSrc = `#include <cstdio>
namespace geo {
template <typename T> struct vec { T x, y; T dot(const vec &o) const { return x * o.x + y * o.y; } };
class shape { public: virtual ~shape() {} virtual double area() const = 0; };
class rect : public shape { double w, h; public: rect(double w, double h) : w(w), h(h) {} double area() const override { return w * h; } };
}
int main(int argc, char **) {
	geo::vec<int> a{argc, 2}, b{3, argc};
	geo::vec<double> c{1.5, 2.5};
	geo::rect r(argc, 2);
	const geo::shape &s = r;
	std::printf("%d %g %g\n", a.dot(b), c.dot(c), s.area());
	return 0;
}
`

// TestCompilers compares every entry our reader decodes with Go's
// debug/dwarf on what gcc, g++, clang and clang++ write with DWARF 5 and
// 4 at -O2, and on a Go binary: every attribute of every DIE, with its
// value resolved through the string, address and list sections.
func TestCompilers(t *testing.T) {
	all := map[edwarf.Form]bool{} // the forms met, over all compilers
	skipped := false
	for _, c := range []struct {
		name     string
		compiler []string
		src, ext string
		flags    []string
	}{
		{"gcc-dwarf5", []string{"gcc"}, compilerCSrc, "c", []string{"-O2", "-g", "-gdwarf-5"}},
		{"gcc-dwarf4", []string{"gcc"}, compilerCSrc, "c", []string{"-O2", "-g", "-gdwarf-4"}},
		{"g++-dwarf5", []string{"g++"}, compilerCXXSrc, "cc", []string{"-O2", "-g", "-gdwarf-5"}},
		{"clang-dwarf5", []string{"clang-14", "clang"}, compilerCSrc, "c", []string{"-O2", "-g", "-gdwarf-5"}},
		{"clang-dwarf4", []string{"clang-14", "clang"}, compilerCSrc, "c", []string{"-O2", "-g", "-gdwarf-4"}},
		{"clang++-dwarf5", []string{"clang++-14", "clang++"}, compilerCXXSrc, "cc", []string{"-O2", "-g", "-gdwarf-5"}},
		{"clang++-dwarf4", []string{"clang++-14", "clang++"}, compilerCXXSrc, "cc", []string{"-O2", "-g", "-gdwarf-4"}},
		{"go", []string{"go"}, "", "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			skipped = true
			cc := tooltest.Require(t, c.compiler...)
			skipped = false
			dir := t.TempDir()
			exe := filepath.Join(dir, "a.out")
			var cmd *exec.Cmd
			if c.src == "" {
				// A Go binary with DWARF (go test strips its own).
				cmd = exec.Command(cc, "build", "-o", exe, "github.com/elfimage/elfimage/cmd/elfimage")
			} else {
				src := filepath.Join(dir, "a."+c.ext)
				if err := os.WriteFile(src, []byte(c.src), 0o644); err != nil {
					t.Fatal(err)
				}
				cmd = exec.Command(cc, append(c.flags, "-o", exe, src)...)
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
			}
			f, err := elf.Open(exe)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			data := func(name string) []byte {
				s := f.Section(name)
				if s == nil {
					return nil
				}
				d, err := s.Data()
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			d, err := New(Sections{Info: data(".debug_info"), Abbrev: data(".debug_abbrev"), Str: data(".debug_str"),
				LineStr: data(".debug_line_str"), StrOffsets: data(".debug_str_offsets"), Addr: data(".debug_addr"),
				RngLists: data(".debug_rnglists"), LocLists: data(".debug_loclists")})
			if err != nil {
				t.Fatal(err)
			}
			gd, err := f.DWARF()
			if err != nil {
				t.Fatal(err)
			}
			if msg := diffGo(d, gd, true); msg != "" {
				t.Error(msg)
			}
			forms := map[string]int{}
			r := d.Reader()
			n := 0
			for ; ; n++ {
				e, err := r.Next()
				if err != nil {
					t.Fatal(err)
				}
				if e == nil {
					break
				}
				for _, fl := range e.Fields {
					forms[fl.Form.String()]++
					all[fl.Form] = true
				}
			}
			t.Logf("%d entries agree; forms %v", n, forms)
		})
	}
	if skipped {
		return
	}
	// The comparison covers the forms compilers use.
	for _, f := range []edwarf.Form{edwarf.DW_FORM_addr, edwarf.DW_FORM_addrx, edwarf.DW_FORM_data1, edwarf.DW_FORM_data2,
		edwarf.DW_FORM_data4, edwarf.DW_FORM_data8, edwarf.DW_FORM_sdata, edwarf.DW_FORM_udata, edwarf.DW_FORM_implicit_const,
		edwarf.DW_FORM_string, edwarf.DW_FORM_strp, edwarf.DW_FORM_line_strp, edwarf.DW_FORM_strx1, edwarf.DW_FORM_exprloc,
		edwarf.DW_FORM_block1, edwarf.DW_FORM_flag, edwarf.DW_FORM_flag_present, edwarf.DW_FORM_ref4, edwarf.DW_FORM_ref_addr,
		edwarf.DW_FORM_sec_offset, edwarf.DW_FORM_loclistx, edwarf.DW_FORM_rnglistx} {
		if !all[f] {
			t.Errorf("no compiler wrote %v", f)
		}
	}
}
