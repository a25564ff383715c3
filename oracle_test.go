package elfimage_test

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/arch/arm64/arm64asm"
	"golang.org/x/arch/x86/x86asm"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/internal/tooltest"
	"github.com/elfimage/elfimage/lang/scheme"
)

// linkExample compiles an example program from lang/scheme/testdata,
// writes its image and loads it.
func linkExample(t *testing.T, file string, opts elfimage.LinkOptions) (*elfimage.Module, string, *elfimage.Image) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("lang", "scheme", "testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, file), src, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := scheme.Compile(file, src)
	if err != nil {
		t.Fatal(err)
	}
	m.CompDir = dir
	path := filepath.Join(dir, strings.TrimSuffix(file, ".scm")+".elf")
	if err := elfimage.WriteFile(path, m, opts); err != nil {
		t.Fatal(err)
	}
	im, err := elfimage.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { im.Close() })
	return m, path, im
}

// exprText renders a location expression the way llvm-dwarfdump prints
// the operations our compiler uses.
func exprText(b []byte) string {
	op := dwarf.Op(b[0])
	switch {
	case op == dwarf.DW_OP_fbreg:
		v, _ := dwarf.Sleb128(b[1:])
		return fmt.Sprintf("DW_OP_fbreg %d", v)
	case op >= dwarf.DW_OP_reg0 && op <= dwarf.DW_OP_reg31:
		return fmt.Sprintf("DW_OP_reg%d", op-dwarf.DW_OP_reg0)
	}
	return op.String()
}

// TestLocationListsMatchLLVM reads every parameter's and variable's
// location list with llvm-dwarfdump, an independent reader, and compares
// each range and operation with what the compiler asked for.
func TestLocationListsMatchLLVM(t *testing.T) {
	dd := tooltest.Require(t, "llvm-dwarfdump", "llvm-dwarfdump-14")
	for _, e := range encodings {
		t.Run(e.name, func(t *testing.T) {
			m, path, im := linkExample(t, "scopes.scm", e.opts)
			procs, _ := im.Procedures()
			start := map[string]uint64{}
			for _, p := range procs {
				start[p.Name] = p.Start
			}
			// What the compiler asked for: "name line:col" -> ranges.
			want := map[string][]string{}
			add := func(p *elfimage.Proc, v elfimage.Var) {
				key := fmt.Sprintf("%s %d:%d", v.Name, v.Line, v.Column)
				for _, r := range v.Live {
					want[key] = append(want[key], fmt.Sprintf("[%#x, %#x): %s", start[p.Name]+uint64(r.Start), start[p.Name]+uint64(r.End), exprText(r.Location)))
				}
			}
			var walk func(p *elfimage.Proc, scopes []*elfimage.Scope)
			walk = func(p *elfimage.Proc, scopes []*elfimage.Scope) {
				for _, sc := range scopes {
					for _, v := range sc.Vars {
						add(p, v)
					}
					walk(p, sc.Scopes)
				}
			}
			for _, p := range m.Procs {
				for _, v := range p.Params {
					add(p, v)
				}
				walk(p, p.Scopes)
			}
			out, err := exec.Command(dd, "--debug-info", path).Output()
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][]string{}
			rangeRE := regexp.MustCompile(`\[0x([0-9a-f]+), 0x([0-9a-f]+)\): (DW_OP_\w+)(?: (-?\d+))?`)
			var name, line, col string
			inLoc := false
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				s := strings.TrimSpace(sc.Text())
				switch {
				case strings.Contains(s, "DW_TAG_"):
					name, line, col, inLoc = "", "", "", false
				case strings.HasPrefix(s, "DW_AT_name"):
					name = strings.Trim(strings.TrimPrefix(s, "DW_AT_name"), "\t (\")")
				case strings.HasPrefix(s, "DW_AT_decl_line"):
					line = strings.Trim(strings.TrimPrefix(s, "DW_AT_decl_line"), "\t ()")
				case strings.HasPrefix(s, "DW_AT_decl_column"):
					c, _ := strconv.ParseUint(strings.Trim(strings.TrimPrefix(s, "DW_AT_decl_column"), "\t ()"), 0, 32)
					col = fmt.Sprint(c)
				case strings.HasPrefix(s, "DW_AT_location"):
					inLoc = true
				}
				if inLoc {
					if mm := rangeRE.FindStringSubmatch(s); mm != nil {
						lo, _ := strconv.ParseUint(mm[1], 16, 64)
						hi, _ := strconv.ParseUint(mm[2], 16, 64)
						text := mm[3]
						if mm[4] != "" {
							text += " " + mm[4]
						}
						key := name + " " + line + ":" + col
						got[key] = append(got[key], fmt.Sprintf("[%#x, %#x): %s", lo, hi, text))
					}
				}
			}
			if len(want) < 10 {
				t.Fatalf("only %d variables with live ranges in the model", len(want))
			}
			for k, w := range want {
				if fmt.Sprint(got[k]) != fmt.Sprint(w) {
					t.Errorf("%s: llvm-dwarfdump reads %v, compiler wrote %v", k, got[k], w)
				}
			}
			for k, g := range got {
				if _, ok := want[k]; !ok {
					t.Errorf("%s: llvm-dwarfdump reads a location list %v the compiler did not write", k, g)
				}
			}
		})
	}
}

// instLen returns the length in bytes of the instruction of architecture a
// at the start of code: decoded with x86asm on x86-64; on AArch64, whose
// instructions are all 4 bytes, the word is decoded with arm64asm so that
// a misaligned walk or data in the code is an error; arm64asm does not
// know UDF #imm16 (a word whose top 16 bits are zero), the trap the
// compiler puts after calls that do not return.
func instLen(a *arch.Arch, code []byte) (int, error) {
	if a.Machine == elf.EM_AARCH64 {
		if len(code) < 4 {
			return 0, fmt.Errorf("%d bytes left, an instruction is 4", len(code))
		}
		if binary.LittleEndian.Uint32(code)>>16 == 0 {
			return 4, nil // UDF #imm16
		}
		if _, err := arm64asm.Decode(code); err != nil {
			return 0, fmt.Errorf("arm64asm: %v", err)
		}
		return 4, nil
	}
	inst, err := x86asm.Decode(code, 64)
	return inst.Len, err
}

// TestRuntimeAgreesWithGDB: at every instruction of the example programs,
// the runtime's procedure and source line (from the procedure table and
// one line sequence) are what gdb reads from the same image.
func TestRuntimeAgreesWithGDB(t *testing.T) {
	// The images are the running architecture's: Debian's gdb is built
	// for x86-64 only, gdb-multiarch reads AArch64 images as AArch64.
	gdbName := "gdb"
	if demoArch.Machine == elf.EM_AARCH64 {
		gdbName = "gdb-multiarch"
	}
	gdb := tooltest.Require(t, gdbName)
	for _, file := range []string{"demo.scm", "scopes.scm"} {
		t.Run(file, func(t *testing.T) {
			m, path, im := linkExample(t, file, elfimage.LinkOptions{})
			procs, _ := im.Procedures()
			start := map[string]uint64{}
			for _, p := range procs {
				start[p.Name] = p.Start
			}
			var addrs []uint64
			for _, p := range m.Procs {
				if p.Internal {
					continue
				}
				for off := 0; off < len(p.Code); {
					n, err := instLen(m.Arch, p.Code[off:])
					if err != nil {
						t.Fatalf("%s+%#x: %v", p.Name, off, err)
					}
					addrs = append(addrs, start[p.Name]+uint64(off))
					off += n
				}
			}
			var cmds strings.Builder
			for _, a := range addrs {
				fmt.Fprintf(&cmds, "echo @%#x\\n\ninfo symbol %#x\ninfo line *%#x\n", a, a, a)
			}
			script := filepath.Join(t.TempDir(), "cmds.gdb")
			if err := os.WriteFile(script, []byte(cmds.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := tooltest.RunTool(t, exec.Command(gdb, "-q", "-nx", "-batch", "-x", script, path), 5*time.Minute)
			if err != nil {
				t.Fatalf("%s: %v\n%s", gdbName, err, out)
			}
			symRE := regexp.MustCompile(`^(\S+)(?: \+ \d+)? in section \.text`)
			lineRE := regexp.MustCompile(`^Line (\d+) of "([^"]+)"`)
			blocks := strings.Split(out, "@")[1:]
			if len(blocks) != len(addrs) {
				t.Fatalf("%s answered for %d addresses, asked %d", gdbName, len(blocks), len(addrs))
			}
			for i, b := range blocks {
				lines := strings.Split(b, "\n")
				var gname, gline string
				for _, l := range lines[1:] {
					if mm := symRE.FindStringSubmatch(l); mm != nil {
						gname = mm[1]
					}
					if mm := lineRE.FindStringSubmatch(l); mm != nil {
						gline = mm[1]
					}
				}
				addr := addrs[i]
				p, err := im.Procedure(addr)
				if err != nil {
					t.Fatalf("%#x: %v", addr, err)
				}
				pos, err := im.PositionAt(addr)
				if err != nil {
					t.Fatalf("%#x: %v", addr, err)
				}
				if gname != p.Name || gline != fmt.Sprint(pos.Line) {
					t.Errorf("%#x: %s says %s line %s, runtime says %s line %d", addr, gdbName, gname, gline, p.Name, pos.Line)
				}
			}
			if len(addrs) < 200 {
				t.Errorf("only %d instructions", len(addrs))
			}
		})
	}
}
