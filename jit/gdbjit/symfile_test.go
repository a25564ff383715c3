package gdbjit

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/internal/tooltest"
)

var testProcs = []Proc{
	{Name: "inner", Addr: 0x7f0000001040, Size: 0x20, File: "/src/b.scm", Line: 7,
		Lines: []Line{{Offset: 4, Line: 8}, {Offset: 0x10, Line: 9}}},
	{Name: "outer", Addr: 0x7f0000001000, Size: 0x30, File: "/src/a.scm", Line: 1,
		Lines: []Line{{Offset: 8, Line: 2}}},
	{Name: "nolines", Addr: 0x7f0000001080, Size: 0x10},
}

func TestSymfileELF(t *testing.T) {
	b, err := Symfile(testProcs)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if f.Type != elf.ET_EXEC || f.Machine != hostArch.Machine || f.Class != elf.ELFCLASS64 {
		t.Errorf("header: %v %v %v", f.Type, f.Machine, f.Class)
	}
	const lo, hi = 0x7f0000001000, 0x7f0000001090
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC != 0 {
			if s.Name != ".text" || s.Type != elf.SHT_NOBITS || s.Flags&elf.SHF_EXECINSTR == 0 || s.Addr != lo || s.Size != hi-lo {
				t.Errorf("ALLOC section %s %v %v [%#x, +%#x), want only .text NOBITS EXEC [%#x, %#x)", s.Name, s.Type, s.Flags, s.Addr, s.Size, lo, hi)
			}
		} else if s.Addr != 0 {
			t.Errorf("non-ALLOC section %s at %#x, want 0", s.Name, s.Addr)
		}
	}
	for _, name := range []string{".symtab", ".strtab", ".debug_info", ".debug_abbrev", ".debug_line", ".debug_str", ".debug_line_str"} {
		if f.Section(name) == nil {
			t.Errorf("no %s", name)
		}
	}
	if len(f.Progs) != 1 || f.Progs[0].Type != elf.PT_LOAD || f.Progs[0].Vaddr != lo || f.Progs[0].Memsz != hi-lo ||
		f.Progs[0].Filesz != 0 || f.Progs[0].Flags != elf.PF_R|elf.PF_X {
		t.Errorf("program headers %+v, want one R+X PT_LOAD over [%#x, %#x)", f.Progs, lo, hi)
	}
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]elf.Symbol{}
	for _, s := range syms {
		got[s.Name] = s
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || elf.ST_BIND(s.Info) != elf.STB_GLOBAL || f.Sections[s.Section].Name != ".text" {
			t.Errorf("symbol %s: %v %v in section %d", s.Name, elf.ST_TYPE(s.Info), elf.ST_BIND(s.Info), s.Section)
		}
	}
	for _, p := range testProcs {
		s, ok := got[p.Name]
		if !ok || s.Value != p.Addr || s.Size != p.Size {
			t.Errorf("symbol %s = %+v, want [%#x, +%#x)", p.Name, s, p.Addr, p.Size)
		}
	}
	if len(syms) != len(testProcs) {
		t.Errorf("%d symbols, want %d", len(syms), len(testProcs))
	}

	// DWARF through Go's reader.
	d, err := f.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	r := d.Reader()
	subs := map[string][2]uint64{}
	var cu *dwarf.Entry
	for {
		e, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e == nil {
			break
		}
		switch e.Tag {
		case dwarf.TagCompileUnit:
			cu = e
		case dwarf.TagSubprogram:
			rs, err := d.Ranges(e)
			if err != nil || len(rs) != 1 {
				t.Fatalf("ranges of %v: %v %v", e, rs, err)
			}
			subs[e.Val(dwarf.AttrName).(string)] = rs[0]
		}
	}
	for _, p := range testProcs {
		if rg := subs[p.Name]; rg != [2]uint64{p.Addr, p.Addr + p.Size} {
			t.Errorf("subprogram %s range %#x, want [%#x, %#x)", p.Name, rg, p.Addr, p.Addr+p.Size)
		}
	}
	lr, err := d.LineReader(cu)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		addr uint64
		file string
		line int
	}
	var rows []row
	var le dwarf.LineEntry
	for lr.Next(&le) == nil {
		if le.EndSequence {
			rows = append(rows, row{le.Address, "end", 0})
			continue
		}
		rows = append(rows, row{le.Address, le.File.Name, le.Line})
	}
	want := []row{
		{0x7f0000001000, "/src/a.scm", 1}, {0x7f0000001008, "/src/a.scm", 2}, {0x7f0000001030, "end", 0},
		{0x7f0000001040, "/src/b.scm", 7}, {0x7f0000001044, "/src/b.scm", 8}, {0x7f0000001050, "/src/b.scm", 9}, {0x7f0000001060, "end", 0},
	}
	if len(rows) != len(want) {
		t.Fatalf("line rows %v, want %v", rows, want)
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("line row %d = %v, want %v", i, rows[i], want[i])
		}
	}
}

func TestSymfileTools(t *testing.T) {
	b, err := Symfile(testProcs)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "sym.elf")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("readelf", func(t *testing.T) {
		readelf := tooltest.Require(t, "readelf")
		var stderr bytes.Buffer
		cmd := exec.Command(readelf, "-W", "-a", "--debug-dump=info,line", path)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil || stderr.Len() > 0 {
			t.Fatalf("readelf: %v\n%s", err, stderr.String())
		}
		for _, re := range []string{
			`\.text\s+NOBITS\s+00007f0000001000 [0-9a-f]+ 000090 00 +AX`,
			`00007f0000001000\s+48 FUNC\s+GLOBAL DEFAULT\s+1 outer`,
			`00007f0000001040\s+32 FUNC\s+GLOBAL DEFAULT\s+1 inner`,
			`LOAD\s+0x0+ 0x00007f0000001000 0x00007f0000001000 0x0+ 0x0+90 R E 0x1`,
		} {
			if !regexp.MustCompile(re).Match(out) {
				t.Errorf("readelf output lacks %s:\n%s", re, out)
			}
		}
	})
	t.Run("llvm-dwarfdump", func(t *testing.T) {
		dd := tooltest.Require(t, "llvm-dwarfdump", "llvm-dwarfdump-14")
		out, err := exec.Command(dd, "--verify", path).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "No errors.") {
			t.Fatalf("llvm-dwarfdump --verify: %v\n%s", err, out)
		}
	})
}

func TestSymfileNoLines(t *testing.T) {
	b, err := Symfile([]Proc{{Name: "f", Addr: 0x1000, Size: 1}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range f.Sections {
		if strings.HasPrefix(s.Name, ".debug") {
			t.Errorf("debug section %s without any File", s.Name)
		}
	}
}

func TestSymfileRejects(t *testing.T) {
	for name, ps := range map[string][]Proc{
		"none":         nil,
		"empty name":   {{Addr: 0x1000, Size: 1}},
		"size 0":       {{Name: "f", Addr: 0x1000}},
		"wraps":        {{Name: "f", Addr: ^uint64(0) - 1, Size: 4}},
		"overlap":      {{Name: "f", Addr: 0x1000, Size: 0x10}, {Name: "g", Addr: 0x100f, Size: 1}},
		"line 0":       {{Name: "f", Addr: 0x1000, Size: 4, File: "a"}},
		"row order":    {{Name: "f", Addr: 0x1000, Size: 4, File: "a", Line: 1, Lines: []Line{{2, 2}, {1, 3}}}},
		"row at 0":     {{Name: "f", Addr: 0x1000, Size: 4, File: "a", Line: 1, Lines: []Line{{0, 2}}}},
		"row past end": {{Name: "f", Addr: 0x1000, Size: 4, File: "a", Line: 1, Lines: []Line{{4, 2}}}},
	} {
		if _, err := Symfile(ps); !errors.Is(err, ErrInvalidProc) {
			t.Errorf("%s: %v, want ErrInvalidProc", name, err)
		}
	}
}

// BenchmarkSymfile1000 builds a symbol file for 1,000 procedures with a
// line each; ns/op divided by 1,000 is the cost per procedure.
func BenchmarkSymfile1000(b *testing.B) {
	ps := make([]Proc, 1000)
	for i := range ps {
		ps[i] = Proc{Name: "proc" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + fmt.Sprint(i),
			Addr: 0x7f0000000000 + uint64(i)*64, Size: 48, File: "/src/prog.scm", Line: i + 1,
			Lines: []Line{{Offset: 8, Line: i + 2}}}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Symfile(ps); err != nil {
			b.Fatal(err)
		}
	}
}
