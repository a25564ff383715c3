package elfimage_test

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/internal/tooltest"
	"github.com/elfimage/elfimage/lang/scheme"
)

// demoObjectFor compiles the demo program with scheme.CompileObjectFor
// for a into a module.
func demoObjectFor(t *testing.T, a *arch.Arch) *elfimage.Module {
	t.Helper()
	m, err := scheme.CompileObjectFor(a, scheme.DemoFile, scheme.DemoSource)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// objectRela returns the relocations of section name of f (SHT_RELA,
// 24-byte entries), none when it has no such section.
func objectRela(t *testing.T, f *elf.File, name string) []elf.Rela64 {
	t.Helper()
	s := f.Section(name)
	if s == nil {
		return nil
	}
	b, err := s.Data()
	if err != nil {
		t.Fatal(err)
	}
	var rs []elf.Rela64
	for ; len(b) >= 24; b = b[24:] {
		rs = append(rs, elf.Rela64{Off: binary.LittleEndian.Uint64(b), Info: binary.LittleEndian.Uint64(b[8:]), Addend: int64(binary.LittleEndian.Uint64(b[16:]))})
	}
	return rs
}

// objectArch is what the object tests expect of one architecture's
// objects where the architectures differ; the rest they check alike.
type objectArch struct {
	arch *arch.Arch
	// ehFrame is the section type of .eh_frame.
	ehFrame elf.SectionType
	// insnAlign is the alignment of every procedure's start (low_pc).
	insnAlign uint64
	// relocPrefix starts the name of every relocation type of the
	// machine, as debug/elf spells it (relocName).
	relocPrefix string
}

var (
	// objectX86_64: .eh_frame is SHT_X86_64_UNWIND (the psABI's type).
	objectX86_64 = objectArch{arch.X86_64, elf.SectionType(0x70000001), 1, "R_X86_64_"}
	// objectAArch64: .eh_frame is SHT_PROGBITS (SHT_X86_64_UNWIND is
	// x86-64's), instructions are 4-byte words, relocations AAELF64's.
	objectAArch64 = objectArch{arch.AArch64, elf.SHT_PROGBITS, 4, "R_AARCH64_"}
)

// TestLinkObjectDWARF reads x86-64 objects of the demo program in every
// DWARF encoding with Go's debug/elf (checkObjectDWARF).
func TestLinkObjectDWARF(t *testing.T) {
	checkObjectDWARF(t, objectX86_64)
}

// checkObjectDWARF reads objects of the demo program for oa in every
// DWARF encoding with Go's debug/elf, which applies an ET_REL file's
// relocations to its debug sections before decoding: every subprogram
// gets its model's name and linkage name (an unrelocated DW_FORM_strp
// would read the string at offset 0), every low_pc is inside .text and
// aligned to oa.insnAlign, the compile unit is named after the demo file
// and each line row's address is inside .text. The object is ET_REL for
// the architecture's machine with no program header, its .eh_frame of
// type oa.ehFrame; the local symbols come before the global ones, which
// .symtab's sh_info indexes; each relocation section is SHF_INFO_LINK,
// linked to the symbol table, named after its target, with 24-byte
// entries of the machine's relocation types only.
func checkObjectDWARF(t *testing.T, oa objectArch) {
	for _, e := range encodings {
		t.Run(e.name, func(t *testing.T) {
			m := demoObjectFor(t, oa.arch)
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
			if f.Type != elf.ET_REL || f.Machine != oa.arch.Machine || len(f.Progs) != 0 {
				t.Fatalf("type %v machine %v, %d program headers; want ET_REL, %v, none", f.Type, f.Machine, len(f.Progs), oa.arch.Machine)
			}
			if s := f.Section(".eh_frame"); s == nil || s.Type != oa.ehFrame {
				t.Errorf(".eh_frame: %v, want %v", s, oa.ehFrame)
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
					if lo, _ := ent.Val(dwarf.AttrLowpc).(uint64); lo >= text.Size || lo%oa.insnAlign != 0 {
						t.Errorf("%s: low_pc %#x outside .text (%#x bytes) or not %d-byte aligned", n, lo, text.Size, oa.insnAlign)
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
				if s.Type != elf.SHT_RELA {
					continue
				}
				if s.Flags&elf.SHF_INFO_LINK == 0 || f.Sections[s.Link].Type != elf.SHT_SYMTAB || s.Entsize != 24 ||
					s.Name != ".rela"+f.Sections[s.Info].Name {
					t.Errorf("%s: flags %v link %d info %d entsize %d; want SHF_INFO_LINK, the symbol table, its target, 24", s.Name, s.Flags, s.Link, s.Info, s.Entsize)
				}
				for _, r := range objectRela(t, f, s.Name) {
					typ := elf.R_TYPE64(r.Info)
					if typ == 0 || !strings.HasPrefix(relocName(oa.arch, typ), oa.relocPrefix) {
						t.Errorf("%s at %#x: type %d is not a relocation type of %v", s.Name, r.Off, typ, oa.arch.Machine)
					}
				}
			}
		})
	}
}

// TestLinkObjectTools: in every DWARF encoding, llvm-dwarfdump --verify
// accepts the x86-64 object and the program gcc links from it, and
// eu-elflint --gnu-ld the object (checkObjectTools).
func TestLinkObjectTools(t *testing.T) {
	checkObjectTools(t, arch.X86_64, tooltest.Require(t, "gcc"))
}

// checkObjectTools: in every DWARF encoding, eu-elflint --gnu-ld and
// llvm-dwarfdump --verify accept the object of the demo program for a;
// the C compiler gcc links it with a C main into a program that, run as
// run (a command such as qemu-aarch64 -L SYSROOT; none for a program of
// this machine) followed by the program's path, exits 0 when fib(10) is
// 55; and llvm-dwarfdump --verify accepts the program's DWARF, which the
// linker relocated with the object's relocations. Each command has 2
// minutes (tooltest.RunTool: then it is killed with its process group);
// one that fails, runs out of time or prints "error" (but "No errors")
// fails t.
func checkObjectTools(t *testing.T, a *arch.Arch, gcc string, run ...string) {
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
			if err := elfimage.WriteObject(obj, demoObjectFor(t, a), opts); err != nil {
				t.Fatal(err)
			}
			exe := filepath.Join(dir, e.name)
			for _, c := range [][]string{
				{elflint, "--gnu-ld", obj},
				{dwarfdump, "--verify", obj},
				{gcc, "-o", exe, main, obj},
				append(slices.Clone(run), exe),
				{dwarfdump, "--verify", exe},
			} {
				out, err := tooltest.RunTool(t, exec.Command(c[0], c[1:]...), 2*time.Minute)
				if err != nil {
					t.Fatalf("%s: %v\n%s", strings.Join(c, " "), err, out)
				}
				if strings.Contains(out, "error") && !strings.Contains(out, "No errors") {
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
	checkLinkErrors(t, []linkErrorCase{
		{"debug file", &elfimage.Module{Procs: []*elfimage.Proc{proc("f")}}, elfimage.LinkOptions{DebugFile: "x.debug"}, false, "DebugFile", ""},
		{"debug frame", &elfimage.Module{Procs: []*elfimage.Proc{proc("f")}}, elfimage.LinkOptions{DebugFrame: true}, false, "DebugFrame", ""},
		{"proc table", &elfimage.Module{Procs: []*elfimage.Proc{proc("f")}}, elfimage.LinkOptions{DropProcTable: true}, false, "DropProcTable", ""},
		{"unknown symbol", &elfimage.Module{Procs: []*elfimage.Proc{proc("f", call("g"))}}, elfimage.LinkOptions{}, false, `unknown symbol "g"`, ""},
		{"extern in an image", &elfimage.Module{Procs: []*elfimage.Proc{proc("f", call("g"))}, Externs: []string{"g"}}, elfimage.LinkOptions{}, true, "Externs", ""},
		{"extern twice", &elfimage.Module{Procs: []*elfimage.Proc{proc("f", call("g"))}, Externs: []string{"g", "g"}}, elfimage.LinkOptions{}, false, "twice", ""},
		{"extern is a proc", &elfimage.Module{Procs: []*elfimage.Proc{proc("f"), proc("g")}, Externs: []string{"g"}}, elfimage.LinkOptions{}, false, "names an object", ""},
		{"abs64 in code", &elfimage.Module{Procs: []*elfimage.Proc{{Name: "f", Code: make([]byte, 9), Relocs: []elfimage.Reloc{{Offset: 1, Type: elfimage.RelocAbs64, Symbol: "f"}}}}}, elfimage.LinkOptions{}, false, "only allowed in Module.Data", ""},
		{"link names clash", &elfimage.Module{Procs: []*elfimage.Proc{{Name: "a?", LinkName: "a_p", Code: []byte{0xc3}}, {Name: "b?", LinkName: "a_p", Code: []byte{0xc3}}}}, elfimage.LinkOptions{}, false, "LinkName", ""},
		{"link name is a name", &elfimage.Module{Procs: []*elfimage.Proc{{Name: "a?", LinkName: "b", Code: []byte{0xc3}}, {Name: "b", Code: []byte{0xc3}}}}, elfimage.LinkOptions{}, false, "LinkName", ""},
	})
}

// linkErrorCase is a module that LinkObject (or Link) must refuse with a
// *LinkError.
type linkErrorCase struct {
	name string
	m    *elfimage.Module
	opts elfimage.LinkOptions
	link bool // Link, not LinkObject
	// want is in the error's text; with object set, in its Msg, and
	// object is its Object.
	want, object string
}

// checkLinkErrors links each case's module, each in a subtest, and checks
// the *LinkError.
func checkLinkErrors(t *testing.T, cases []linkErrorCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			if c.link {
				_, err = elfimage.Link(c.m, c.opts)
			} else {
				_, err = elfimage.LinkObject(c.m, c.opts)
			}
			var le *elfimage.LinkError
			switch {
			case !errors.As(err, &le):
				t.Errorf("error %v, want a *LinkError", err)
			case c.object == "" && !strings.Contains(err.Error(), c.want):
				t.Errorf("error %v, want a *LinkError mentioning %q", err, c.want)
			case c.object != "" && (le.Object != c.object || !strings.Contains(le.Msg, c.want)):
				t.Errorf("error %v, want a *LinkError for %q mentioning %q", err, c.object, c.want)
			}
		})
	}
}
