package value_test

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/expr"
	"github.com/elfimage/elfimage/dwarf/info"
	"github.com/elfimage/elfimage/dwarf/value"
	"github.com/elfimage/elfimage/internal/gdbtest"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// globalsProg has initialized globals of every kind of type C has that
// the model shows.
const globalsProg = `#include <stdint.h>

enum color { RED, GREEN = 5, BLUE };
struct pair { int a; short b; };
union num { long i; double d; };
typedef struct node { int value; struct node *next; } node_t;
typedef unsigned long word;
struct all {
	char c; unsigned char uc; signed char sc; short s; unsigned short us;
	int i; unsigned u; long l; unsigned long ul; long long ll;
	float f; double d; _Bool b; enum color col; struct pair p; union num n;
	int arr[4]; char name[8]; const char *str; int zeros[16]; double ds[3];
	int8_t i8; uint8_t u8; int64_t i64; word w; struct pair pairs[2];
	char esc[6]; const struct pair *pp; volatile int vi;
};
node_t n2 = {2, 0};
node_t n1 = {1, &n2};
struct all all = {'a', 200, -5, -300, 65000, -7, 4000000000u, -1234567890123L, 18446744073709551615ul, 42,
	0.1f, 0.1, 1, GREEN, {1, 2}, {.d = 2.5}, {1, 2, 3, 4}, "vmname", "hello", {0}, {0.1, 2.5, -1},
	-5, 200, -9000000000, 0xdeadbeef, {{1, 2}, {3, 4}}, "a\tb\n\a", &all.p, 7};
const volatile int cvi = 42;
enum color colors[3] = {BLUE, RED, 7};
int matrix[2][3] = {{1, 2, 3}, {4, 5, 6}};
double neg = -0.25;
unsigned char bytes[4] = {0, 255, 'A', 10};

int main(void) { return all.i + n1.value; }
`

// fileMemory reads an executable's loaded segments from its file (the
// bytes past a segment's file size read as zeros, as .bss does).
type fileMemory struct{ f *elf.File }

func (m fileMemory) ReadUint64(addr uint64) (uint64, error) {
	var b [8]byte
	for _, p := range m.f.Progs {
		if p.Type != elf.PT_LOAD || addr < p.Vaddr || addr+8 > p.Vaddr+p.Memsz {
			continue
		}
		if off := addr - p.Vaddr; off < p.Filesz {
			n := min(8, p.Filesz-off)
			if _, err := p.ReadAt(b[:n], int64(off)); err != nil {
				return 0, err
			}
		}
		return binary.LittleEndian.Uint64(b[:]), nil
	}
	return 0, fmt.Errorf("address %#x not in the file", addr)
}

// TestFormatGDB: the globals of a program gcc compiled (DWARF 5, -O0)
// read with Reader from its .debug_info and formatted in the Print style
// from its file's bytes are what gdb's print shows of the same globals
// in the same file, up to the symbols gdb adds after pointers; their
// types spell as gdb's whatis does, for the types C and the model spell
// alike.
func TestFormatGDB(t *testing.T) {
	gdb := tooltest.Require(t, "gdb")
	exe := tooltest.GCC(t, globalsProg, "-g", "-O0", "-no-pie", "-fno-pie")
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data := func(name string) []byte {
		if s := f.Section(name); s != nil {
			b, _ := s.Data()
			return b
		}
		return nil
	}
	d, err := info.New(info.Sections{Info: data(".debug_info"), Abbrev: data(".debug_abbrev"), Str: data(".debug_str"),
		LineStr: data(".debug_line_str"), StrOffsets: data(".debug_str_offsets"), Addr: data(".debug_addr"), Order: binary.LittleEndian})
	if err != nil {
		t.Fatal(err)
	}
	r := value.NewReader(d)
	type global struct {
		t   *value.Type
		loc []byte
	}
	globals := map[string]global{}
	dr := d.Reader()
	for {
		e, err := dr.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e == nil {
			break
		}
		if e.Tag != dwarf.DW_TAG_variable {
			continue
		}
		name, _ := e.String(dwarf.DW_AT_name)
		lf, ok := e.Val(dwarf.DW_AT_location)
		if !ok || name == "" {
			continue
		}
		ty, err := r.TypeOf(e)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		globals[name] = global{ty, lf.Block}
	}
	names := []string{"all", "n1", "n2", "cvi", "colors", "matrix", "neg", "bytes"}
	var cmds []string
	for _, n := range names {
		cmds = append(cmds, "p "+n, "whatis "+n)
	}
	s := &gdbtest.Session{GDB: gdb, Program: exe, Dir: t.TempDir(), NoScript: true, Cmds: cmds}
	res := gdbtest.MustRun(t, s)
	sym := regexp.MustCompile(` <[A-Za-z_][A-Za-z_0-9.+]*>`)
	p := expr.Params{Section: ".debug_info", AddrSize: 8, Order: binary.LittleEndian}
	for i, n := range names {
		g, ok := globals[n]
		if !ok {
			t.Errorf("no global %s in the DWARF", n)
			continue
		}
		obj, err := value.Locate(g.loc, p, nilContext{})
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		ours, err := value.Format(g.t, obj, &value.Options{Mem: fileMemory{f}})
		if err != nil {
			t.Errorf("%s: %v", n, err)
		}
		_, theirs, _ := strings.Cut(strings.TrimSpace(res.Blocks[2*i]), " = ")
		theirs = sym.ReplaceAllString(theirs, "")
		if ours != theirs {
			t.Errorf("p %s:\n ours %s\n gdb  %s", n, ours, theirs)
		}
		_, what, _ := strings.Cut(strings.TrimSpace(res.Blocks[2*i+1]), " = ")
		what = strings.ReplaceAll(what, " [", "[") // gdb spells int [4] where the model has int[4]
		if n != "cvi" && g.t.String() != what {    // const volatile int: the model drops volatile
			t.Errorf("whatis %s: ours %s, gdb %s", n, g.t, what)
		}
	}
	if u := value.Under(globals["cvi"].t); u == nil || u.Kind != value.KindSigned || globals["cvi"].t.Kind != value.KindConst {
		t.Errorf("const volatile int reads as %v", globals["cvi"].t)
	}
}

// nilContext knows no register, CFA or frame base: enough for DW_OP_addr.
type nilContext struct{}

func (nilContext) Reg(arch.Reg) (uint64, bool)            { return 0, false }
func (nilContext) ReadMemory(uint64, int) (uint64, error) { return 0, fmt.Errorf("no memory") }
func (nilContext) CFA() (uint64, bool)                    { return 0, false }
func (nilContext) FrameBase() (uint64, bool)              { return 0, false }
