//go:build linux && amd64

package elfimage_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/expr"
	"github.com/elfimage/elfimage/internal/gdbtest"
	"github.com/elfimage/elfimage/internal/lldbtest"
	"github.com/elfimage/elfimage/internal/tooltest"
	"github.com/elfimage/elfimage/internal/typedemo"
	"github.com/elfimage/elfimage/unwind"
)

// TestTypesDebuggers runs the typed image of internal/typedemo in a real
// program (testdata/typesprog, which links, loads and publishes it
// through the GDB JIT interface and calls it through native.Call) under
// gdb and lldb.
func TestTypesDebuggers(t *testing.T) {
	gdb := tooltest.Require(t, "gdb")
	lldb := tooltest.Require(t, "lldb-19", "lldb")
	prog := typesProg.Path(t)
	t.Run("gdb", func(t *testing.T) { typesGDB(t, gdb, prog) })
	t.Run("lldb", func(t *testing.T) { typesLLDB(t, lldb, prog) })
}

// splitMembers splits gdb's "{a = 1, b = {2, 3}, c = "x, y"}" into its
// top-level "name = value" members.
func splitMembers(s string) map[string]string {
	s = strings.TrimSpace(s)
	s = strings.TrimSuffix(strings.TrimPrefix(s, "{"), "}")
	out := map[string]string{}
	depth, quote, start := 0, byte(0), 0
	add := func(part string) {
		if name, val, ok := strings.Cut(strings.TrimSpace(part), " = "); ok {
			out[name] = val
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '{':
			depth++
		case c == '}':
			depth--
		case c == ',' && depth == 0:
			add(s[start:i])
			start = i + 1
		}
	}
	add(s[start:])
	return out
}

// typesGDB runs the typed image under gdb and checks what gdb shows of each type
// (ptype, p *vm, p vm->cells[0]@8, the variable-length array, the fixnum
// untagged by its location expression, the recursive list), in DWARF 5
// and in 64-bit DWARF 3. It also compares gdb's values of the members
// with FormatLocation's on the same bytes.
func typesGDB(t *testing.T, gdb, prog string) {
	for _, args := range []string{"5", "3 64"} {
		t.Run("dwarf "+args, func(t *testing.T) {
			cmds := []string{
				"break inspect",
				"run " + args,
				"info args",
				"ptype vm",
				"p *vm",
				"p vm->cells[0]@8",
				"p fix",
				"p cells",
				"ptype cells",
				"p ratio",
				"p pair",
				"p *vm->list",
				"p vm->list->next->value",
				"p vm->list->next->next",
				"ptype struct node",
				"ptype inspect",
				"ptype enum color",
				"p/x vm->w",
				"whatis vm->k",
				"p vm->name",
				"continue",
			}
			s := &gdbtest.Session{GDB: gdb, Program: prog, Dir: t.TempDir(), Cmds: cmds, NoScript: true, Timeout: 90 * time.Second}
			r := gdbtest.MustRun(t, s)
			b := func(cmd string) string { return r.Block(t, cmd) + "\n" }
			for cmd, wants := range map[string][]string{
				"run " + args: {"hit Breakpoint 1, inspect (vm=0x", ", n=5, fix=21) at /elfimage/typedemo/vm.c:4"},
				"info args":   {"n = 5\n", "fix = 21\n"},
				"ptype vm": {"type = struct vm {\n", "    uint8 *data;\n", "    int64 cells[8];\n", "    double f;\n", "    float g;\n",
					"    bool ok;\n", "    char c;\n", "    enum color col;\n", "    union num u;\n", "    struct node *list;\n",
					"    const int64 k;\n", "    word w;\n", "    char name[8];\n", "} *\n"},
				"p *vm": {`cells = {11, 22, 33, 44, 55, 66, 77, 88}, f = 3.5, g = -0.25, i32 = -7, i16 = -300, u16 = 65000`,
					`ok = true, c = 65 'A'`, `col = GREEN, u32 = 4000000000, u = {i = -1234567890123`, `k = 42, w = 3735928559, name = "vmname\000"}`,
					`data = 0x`, ` "hello"`},
				"p vm->cells[0]@8":        {"= {11, 22, 33, 44, 55, 66, 77, 88}"},
				"p fix":                   {"= 21\n"},
				"p cells":                 {"= {11, 22, 33, 44, 55}\n"},
				"ptype cells":             {"type = int64 [5]\n"},
				"p ratio":                 {"= 3.5\n"},
				"p pair":                  {"= {a = 5, b = 43}\n"},
				"p *vm->list":             {"= {value = 10, next = 0x"},
				"p vm->list->next->value": {"= 20\n"},
				"p vm->list->next->next":  {"(struct node *) 0x0"},
				"ptype struct node":       {"type = struct node {\n    int64 value;\n    struct node *next;\n}"},
				"ptype inspect":           {"type = int64 (struct vm *, uint64, fixnum)"},
				"ptype enum color":        {"type = enum color {RED, GREEN, BLUE}"},
				"p/x vm->w":               {"= 0xdeadbeef"},
				"whatis vm->k":            {"type = const int64"},
				"continue":                {"inspect returned 33"},
			} {
				for _, w := range wants {
					if !strings.Contains(b(cmd), w) {
						t.Errorf("%s: gdb printed\n%s\nwithout %q", cmd, b(cmd), w)
					}
				}
			}

			// gdb's members against ours, on the same bytes (a copy of
			// the fixture at the address gdb showed).
			m := regexp.MustCompile(`vm=(0x[0-9a-f]+)`).FindStringSubmatch(b("run " + args))
			if m == nil {
				t.Fatal("no address of vm")
			}
			var base uint64
			fmt.Sscan(m[1], &base)
			_, after, _ := strings.Cut(strings.TrimSpace(b("p *vm")), " = ") // "$1 = {...}"
			gdbVM := splitMembers(after)
			mem := make([]byte, typedemo.FillSize+16)
			typedemo.Fill(mem, base)
			vm, _, _ := typedemo.Types()
			var regs unwind.Regs
			regs.Set(arch.X86_64_RDI, base)
			st := &elfimage.FrameState{Regs: regs, Mem: fakeMem{base, mem}}
			ours, err := elfimage.FormatLocation(expr.Breg(arch.X86_64_RDI, 0), vm, st)
			if err != nil {
				t.Fatal(err)
			}
			ourVM := splitMembers(ours)
			// gdb shows one-byte integers as characters too, NaNs with
			// their payload, and strings behind uint8 pointers; the rest
			// must be the same text.
			for _, name := range []string{"cells", "f", "g", "i32", "i16", "u16", "ok", "c", "col", "u32", "list", "k", "w", "name"} {
				if gdbVM[name] == "" || gdbVM[name] != ourVM[name] {
					t.Errorf("member %s: gdb %q, FormatLocation %q", name, gdbVM[name], ourVM[name])
				}
			}
		})
	}
}

// typesLLDB runs the typed image under lldb-19 (its GDB JIT loader reads
// the published image) and checks frame variable, *vm, the
// variable-length array and type lookup, in DWARF 5 and 3. (lldb-19 reads
// no 64-bit DWARF at all, clang's -gdwarf64 output included: it sees the
// symbols only.)
func typesLLDB(t *testing.T, lldb, prog string) {
	for _, args := range []string{"5", "3"} {
		t.Run("dwarf "+args, func(t *testing.T) {
			s := &lldbtest.Session{LLDB: lldb, Program: prog, Args: strings.Fields(args), Dir: t.TempDir(), Timeout: 90 * time.Second,
				Cmds: []string{
					"breakpoint set -n inspect",
					"run",
					"frame variable",
					"frame variable *vm",
					"frame variable vm->cells[3] vm->list->next->value",
					"type lookup vm",
					"type lookup node",
					"continue",
				}}
			text := lldbtest.MustRun(t, s).Output
			for _, w := range []string{
				"stop reason = breakpoint 1.1",
				"`inspect(vm=0x", ", n=5, fix=21) at vm.c:4",
				"(vm *) vm = 0x",
				"(unsigned long) n = 5",
				"(fixnum) fix = 21",
				"(long[]) cells = ([0] = 11, [1] = 22, [2] = 33, [3] = 44, [4] = 55)",
				"(double) ratio = 3.5",
				"(pair) pair = (a = 5, b = 43)",
				"  cells = ([0] = 11, [1] = 22, [2] = 33, [3] = 44, [4] = 55, [5] = 66, [6] = 77, [7] = 88)\n",
				"  f = 3.5\n", "  g = -0.25\n", "  ok = true\n", "  c = 'A'\n", "  col = GREEN\n", "  u32 = 4000000000\n",
				"  k = 42\n", "  w = 3735928559\n", `  name = "vmname"`,
				"(long) vm->cells[3] = 44",
				"(long) vm->list->next->value = 20",
				"struct vm {\n", "    long cells[8];\n", "    color col;\n", "    num u;\n", "    node *list;\n", "    const long k;\n", "    word w;\n", "    char name[8];\n",
				"struct node {\n    long value;\n    node *next;\n}",
				"inspect returned 33",
			} {
				if !strings.Contains(text, w) {
					t.Errorf("lldb output lacks %q", w)
				}
			}
			if t.Failed() {
				t.Logf("lldb:\n%s", text)
			}
		})
	}
}
