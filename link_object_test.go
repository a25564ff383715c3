package elfimage_test

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/internal/tooltest"
	"github.com/elfimage/elfimage/lang/scheme"
)

// demoObject compiles the demo program with scheme.CompileObject into a
// module.
func demoObject(t *testing.T) *elfimage.Module {
	t.Helper()
	m, err := scheme.CompileObject(scheme.DemoFile, scheme.DemoSource)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestLinkObjectDWARF reads objects of the demo program in every DWARF
// encoding with Go's debug/elf, which applies an ET_REL file's
// relocations to its debug sections before decoding: every subprogram
// gets its model's name (an unrelocated DW_FORM_strp would read the
// string at offset 0), every address is inside .text, and each line
// row's address is inside its procedure.
func TestLinkObjectDWARF(t *testing.T) {
	for _, e := range encodings {
		t.Run(e.name, func(t *testing.T) {
			m := demoObject(t)
			opts := e.opts
			opts.DebugFrame = false
			b, err := elfimage.LinkObject(m, opts)
			if err != nil {
				t.Fatal(err)
			}
			f, err := elf.NewFile(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if f.Type != elf.ET_REL || f.Machine != elf.EM_X86_64 || len(f.Progs) != 0 {
				t.Fatalf("type %v machine %v, %d program headers; want ET_REL, EM_X86_64, none", f.Type, f.Machine, len(f.Progs))
			}
			text := f.Section(".text")
			d, err := f.DWARF()
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]bool{}
			for _, p := range m.Procs {
				want[p.Name] = true
			}
			r := d.Reader()
			got := map[string]bool{}
			for {
				ent, err := r.Next()
				if err != nil {
					t.Fatal(err)
				}
				if ent == nil {
					break
				}
				switch ent.Tag {
				case dwarf.TagCompileUnit:
					if n, _ := ent.Val(dwarf.AttrName).(string); n != scheme.DemoFile {
						t.Errorf("compile unit named %q, want %q", n, scheme.DemoFile)
					}
					lr, err := d.LineReader(ent)
					if err != nil || lr == nil {
						t.Fatalf("line table: %v", err)
					}
					var row dwarf.LineEntry
					n := 0
					for lr.Next(&row) == nil {
						if row.Address > text.Size || row.File == nil || !strings.HasSuffix(row.File.Name, scheme.DemoFile) {
							t.Errorf("line row at %#x in %v: outside .text (%#x bytes) or another file", row.Address, row.File, text.Size)
						}
						n++
					}
					if n == 0 {
						t.Error("no line rows")
					}
				case dwarf.TagSubprogram:
					n, _ := ent.Val(dwarf.AttrName).(string)
					if !want[n] {
						t.Errorf("subprogram %q is not a procedure of the module", n)
					}
					got[n] = true
					lo, _ := ent.Val(dwarf.AttrLowpc).(uint64)
					if lo >= text.Size {
						t.Errorf("%s: low_pc %#x outside .text (%#x bytes)", n, lo, text.Size)
					}
					if ln, ok := ent.Val(dwarf.AttrLinkageName).(string); ok && ln != scheme.CName(n) {
						t.Errorf("%s: linkage name %q, want %q", n, ln, scheme.CName(n))
					}
				}
			}
			if len(got) != len(want) {
				t.Errorf("subprograms %v, want %v", got, want)
			}
			syms, err := f.Symbols()
			if err != nil {
				t.Fatal(err)
			}
			local := true
			for _, s := range syms {
				isLocal := elf.ST_BIND(s.Info) == elf.STB_LOCAL
				if isLocal && !local {
					t.Errorf("local symbol %q after a global one", s.Name)
				}
				local = isLocal
			}
			if s := f.Section(".symtab"); s.Info == 0 || int(s.Info) > len(syms) || elf.ST_BIND(syms[s.Info-1].Info) != elf.STB_GLOBAL {
				t.Errorf(".symtab sh_info %d does not index the first global symbol", s.Info)
			}
			for _, s := range f.Sections {
				if s.Type == elf.SHT_RELA && (s.Flags&elf.SHF_INFO_LINK == 0 || f.Sections[s.Link].Type != elf.SHT_SYMTAB || s.Entsize != 24 ||
					s.Name != ".rela"+f.Sections[s.Info].Name) {
					t.Errorf("%s: flags %v link %d info %d entsize %d; want SHF_INFO_LINK, the symbol table, its target, 24", s.Name, s.Flags, s.Link, s.Info, s.Entsize)
				}
			}
		})
	}
}

// TestLinkObjectTools: in every DWARF encoding, llvm-dwarfdump --verify
// accepts the object and the program gcc links from it, and eu-elflint
// --gnu-ld the object.
func TestLinkObjectTools(t *testing.T) {
	gcc := tooltest.Require(t, "gcc")
	dwarfdump := tooltest.Require(t, "llvm-dwarfdump")
	elflint := tooltest.Require(t, "eu-elflint")
	dir := t.TempDir()
	main := filepath.Join(dir, "main.c")
	if err := os.WriteFile(main, []byte("#include <stdint.h>\nint64_t fib(int64_t);\nint main(void) { return fib(10) != 55; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, e := range encodings {
		t.Run(e.name, func(t *testing.T) {
			opts := e.opts
			opts.DebugFrame = false
			obj := filepath.Join(dir, e.name+".o")
			if err := elfimage.WriteObject(obj, demoObject(t), opts); err != nil {
				t.Fatal(err)
			}
			exe := filepath.Join(dir, e.name)
			for _, c := range [][]string{
				{elflint, "--gnu-ld", obj},
				{dwarfdump, "--verify", obj},
				{gcc, "-o", exe, main, obj},
				{exe},
				{dwarfdump, "--verify", exe},
			} {
				out, err := exec.Command(c[0], c[1:]...).CombinedOutput()
				if err != nil {
					t.Fatalf("%s: %v\n%s", strings.Join(c, " "), err, out)
				}
				if strings.Contains(string(out), "error") && !strings.Contains(string(out), "No errors") {
					t.Errorf("%s:\n%s", strings.Join(c, " "), out)
				}
			}
		})
	}
}

// TestLinkObjectRefuses: what an object cannot hold is a *LinkError
// naming it.
func TestLinkObjectRefuses(t *testing.T) {
	proc := func(name string, relocs ...elfimage.Reloc) *elfimage.Proc {
		return &elfimage.Proc{Name: name, Code: []byte{0xe8, 0, 0, 0, 0, 0xc3}, Relocs: relocs}
	}
	call := func(sym string) elfimage.Reloc {
		return elfimage.Reloc{Offset: 1, Type: elfimage.RelocPC32, Symbol: sym, Addend: -4}
	}
	for _, c := range []struct {
		name string
		m    *elfimage.Module
		opts elfimage.LinkOptions
		link bool // Link, not LinkObject
		want string
	}{
		{"debug file", &elfimage.Module{Procs: []*elfimage.Proc{proc("f")}}, elfimage.LinkOptions{DebugFile: "x.debug"}, false, "DebugFile"},
		{"debug frame", &elfimage.Module{Procs: []*elfimage.Proc{proc("f")}}, elfimage.LinkOptions{DebugFrame: true}, false, "DebugFrame"},
		{"proc table", &elfimage.Module{Procs: []*elfimage.Proc{proc("f")}}, elfimage.LinkOptions{DropProcTable: true}, false, "DropProcTable"},
		{"unknown symbol", &elfimage.Module{Procs: []*elfimage.Proc{proc("f", call("g"))}}, elfimage.LinkOptions{}, false, `unknown symbol "g"`},
		{"extern in an image", &elfimage.Module{Procs: []*elfimage.Proc{proc("f", call("g"))}, Externs: []string{"g"}}, elfimage.LinkOptions{}, true, "Externs"},
		{"extern twice", &elfimage.Module{Procs: []*elfimage.Proc{proc("f", call("g"))}, Externs: []string{"g", "g"}}, elfimage.LinkOptions{}, false, "twice"},
		{"extern is a proc", &elfimage.Module{Procs: []*elfimage.Proc{proc("f"), proc("g")}, Externs: []string{"g"}}, elfimage.LinkOptions{}, false, "names an object"},
		{"abs64 in code", &elfimage.Module{Procs: []*elfimage.Proc{{Name: "f", Code: make([]byte, 9), Relocs: []elfimage.Reloc{{Offset: 1, Type: elfimage.RelocAbs64, Symbol: "f"}}}}}, elfimage.LinkOptions{}, false, "only allowed in Module.Data"},
		{"link names clash", &elfimage.Module{Procs: []*elfimage.Proc{{Name: "a?", LinkName: "a_p", Code: []byte{0xc3}}, {Name: "b?", LinkName: "a_p", Code: []byte{0xc3}}}}, elfimage.LinkOptions{}, false, "LinkName"},
		{"link name is a name", &elfimage.Module{Procs: []*elfimage.Proc{{Name: "a?", LinkName: "b", Code: []byte{0xc3}}, {Name: "b", Code: []byte{0xc3}}}}, elfimage.LinkOptions{}, false, "LinkName"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			if c.link {
				_, err = elfimage.Link(c.m, c.opts)
			} else {
				_, err = elfimage.LinkObject(c.m, c.opts)
			}
			var le *elfimage.LinkError
			if !errors.As(err, &le) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want a *LinkError mentioning %q", err, c.want)
			}
		})
	}
}
