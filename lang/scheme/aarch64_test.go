package scheme

import (
	"debug/elf"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// linkAArch64 cross-compiles testdata/name for AArch64 (on any host) and
// links it into a file in a temporary directory.
func linkAArch64(t *testing.T, name string) (*elfimage.Module, string) {
	t.Helper()
	m, err := CompileFor(arch.AArch64, name, mustRead(t, filepath.Join("testdata", name)))
	if err != nil {
		t.Fatal(err)
	}
	if m.Arch != arch.AArch64 {
		t.Fatalf("module arch %v", m.Arch)
	}
	path := filepath.Join(t.TempDir(), strings.TrimSuffix(name, ".scm")+".elf")
	if err := elfimage.WriteFile(path, m, elfimage.LinkOptions{}); err != nil {
		t.Fatal(err)
	}
	return m, path
}

var aarch64Programs = []string{"demo.scm", "kernels.scm", "scopes.scm", "errors.scm"}

// TestAArch64DWARFAndCFI checks the cross-compiled AArch64 images with
// llvm-dwarfdump --verify and readelf -wF: the DWARF verifies, and every
// procedure's CFI, as readelf interprets it, has the frame record rules
// (CFA = x29+16, x29 at CFA-16, the return address x30 at CFA-8) in its
// body.
func TestAArch64DWARFAndCFI(t *testing.T) {
	dd := tooltest.Require(t, "llvm-dwarfdump", "llvm-dwarfdump-14")
	readelf := tooltest.Require(t, "readelf")
	for _, name := range aarch64Programs {
		m, path := linkAArch64(t, name)
		if out, err := exec.Command(dd, "--verify", path).CombinedOutput(); err != nil {
			t.Errorf("%s: llvm-dwarfdump --verify: %v\n%s", name, err, out)
		}
		out, err := exec.Command(readelf, "-wF", path).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: readelf -wF: %v\n%s", name, err, out)
		}
		fdes := strings.Split(string(out), " FDE ")[1:]
		if len(fdes) != len(m.Procs) {
			t.Errorf("%s: readelf shows %d FDEs, want one per procedure (%d)", name, len(fdes), len(m.Procs))
		}
		// Row: LOC CFA [x19 ...] x29 ra; the frame record rows end in
		// "x29+16 ... c-16 c-8".
		body := regexp.MustCompile(`(?m)^\s*[0-9a-f]{16} x29\+16 .*c-16\s+c-8\s*$`)
		for i, f := range fdes {
			if !strings.Contains(f, "x29") || !body.MatchString(f) {
				t.Errorf("%s: FDE %d has no row CFA = x29+16, x29 at c-16, ra at c-8:\n%s", name, i, f)
			}
		}
	}
}

// TestAArch64Disassembly disassembles the cross-compiled images with
// aarch64-linux-gnu-objdump -d: every word decodes to an instruction of
// the backend's repertoire, every bl and b to a symbol lands on a
// procedure's first instruction (the link-time CALL26/JUMP26 resolution),
// and every adrp+add pair addresses a string object in .data (the
// ADR_PREL_PG_HI21 and ADD_ABS_LO12_NC resolution), checked against the
// symbol table read with debug/elf.
func TestAArch64Disassembly(t *testing.T) {
	objdump := tooltest.Require(t, "aarch64-linux-gnu-objdump")
	known := map[string]bool{}
	for _, m := range strings.Fields("stp ldp mov movk sub add stur ldur ldr str strb cmp cmn cset bl b ret " +
		"cbz cbnz tbz mul sdiv udiv msub neg eor adrp svc udf b.eq b.ne b.cc b.cs b.ls b.hi b.lt b.ge b.le b.gt b.mi b.pl") {
		known[m] = true
	}
	insn := regexp.MustCompile(`^\s*([0-9a-f]+):\t([0-9a-f]{8}) \t(\S+)\s*(.*)$`)
	branch := regexp.MustCompile(`^[0-9a-f]+ <([^>+]+)(\+0x[0-9a-f]+)?>$`)
	adrp := regexp.MustCompile(`^(x\d+), ([0-9a-f]+) <`)
	addLo := regexp.MustCompile(`^(x\d+), (x\d+), #0x([0-9a-f]+)$`)
	for _, name := range aarch64Programs {
		m, path := linkAArch64(t, name)
		f, syms := tooltest.ELFSymbols(t, path)
		if f.Machine != elf.EM_AARCH64 {
			t.Errorf("%s: e_machine %v", name, f.Machine)
		}
		procAt, dataAt := map[string]uint64{}, map[uint64]string{}
		for _, s := range syms {
			if elf.ST_TYPE(s.Info) == elf.STT_FUNC {
				procAt[s.Name] = s.Value
			} else if strings.HasPrefix(s.Name, "%strobj.") {
				dataAt[s.Value] = s.Name
			}
		}
		out, err := exec.Command(objdump, "-d", "-z", path).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: objdump: %v\n%s", name, err, out)
		}
		n, calls, addrs := 0, 0, 0
		var pendReg string
		var pendPage uint64
		for _, line := range strings.Split(string(out), "\n") {
			mm := insn.FindStringSubmatch(line)
			if mm == nil {
				continue
			}
			n++
			op, args := mm[3], strings.TrimSpace(strings.SplitN(mm[4], "//", 2)[0])
			if !known[op] {
				// Zero padding between procedures decodes as udf #0
				// (a trap); anything else is a wrong encoding.
				t.Errorf("%s: unexpected instruction %q", name, strings.TrimSpace(line))
			}
			switch op {
			case "bl", "b":
				if bm := branch.FindStringSubmatch(args); bm != nil && bm[2] == "" {
					if _, ok := procAt[bm[1]]; !ok {
						t.Errorf("%s: %s to %s, not a procedure: %s", name, op, bm[1], line)
					}
					calls++
				} else if op == "bl" {
					t.Errorf("%s: bl into the middle of a procedure: %s", name, line)
				}
			case "adrp":
				am := adrp.FindStringSubmatch(args)
				if am == nil {
					t.Fatalf("%s: adrp %q", name, args)
				}
				pendReg = am[1]
				pendPage, _ = strconv.ParseUint(am[2], 16, 64)
				continue
			case "add":
				if pendReg != "" {
					lm := addLo.FindStringSubmatch(args)
					if lm == nil || lm[1] != pendReg || lm[2] != pendReg {
						t.Errorf("%s: adrp %s not followed by its add: %s", name, pendReg, line)
						break
					}
					lo, _ := strconv.ParseUint(lm[3], 16, 64)
					if _, ok := dataAt[pendPage+lo]; !ok {
						t.Errorf("%s: adrp+add address %#x is no string object: %s", name, pendPage+lo, line)
					}
					addrs++
				}
			}
			if pendReg != "" && op != "add" {
				t.Errorf("%s: adrp %s not followed by its add: %s", name, pendReg, line)
			}
			pendReg = ""
		}
		code := 0
		for _, p := range m.Procs {
			code += len(p.Code) / 4
		}
		t.Logf("%s: %d instructions, %d branches to procedures, %d string addresses", name, n, calls, addrs)
		if n < code || calls == 0 || addrs == 0 {
			t.Errorf("%s: %d instructions disassembled for %d in the module, %d calls, %d addresses checked", name, n, code, calls, addrs)
		}
	}
}

// TestCompileForAArch64 checks the module CompileFor makes for AArch64:
// its architecture, 4-byte instructions, only AArch64 instruction
// relocations in code (bl/b to procedures, adrp+add pairs to string
// objects) and the parameters' locations as on x86-64 (the frames agree);
// and the errors for a missing or unknown architecture and for an
// AArch64 object.
func TestCompileForAArch64(t *testing.T) {
	m, err := CompileFor(arch.AArch64, "kernels.scm", mustRead(t, "testdata/kernels.scm"))
	if err != nil {
		t.Fatal(err)
	}
	x, err := CompileFor(arch.X86_64, "kernels.scm", mustRead(t, "testdata/kernels.scm"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Arch != arch.AArch64 || x.Arch != arch.X86_64 || len(m.Procs) != len(x.Procs) {
		t.Fatalf("arch %v/%v, %d/%d procs", m.Arch, x.Arch, len(m.Procs), len(x.Procs))
	}
	kinds := map[elfimage.RelocType]int{}
	for i, p := range m.Procs {
		if len(p.Code)%4 != 0 || p.Name != x.Procs[i].Name {
			t.Errorf("%s: %d bytes of code, x86-64 proc %s", p.Name, len(p.Code), x.Procs[i].Name)
		}
		for j, v := range p.Params {
			if string(v.Location) != string(x.Procs[i].Params[j].Location) {
				t.Errorf("%s: parameter %s at %x, on x86-64 %x", p.Name, v.Name, v.Location, x.Procs[i].Params[j].Location)
			}
		}
		for k, r := range p.Relocs {
			kinds[r.Type]++
			switch r.Type {
			case elfimage.RelocAArch64Call26, elfimage.RelocAArch64Jump26:
				if r.Symbol != "main" && !strings.HasPrefix(r.Symbol, "%") && procByName(t, m, r.Symbol) == nil {
					t.Errorf("%s: branch to %s", p.Name, r.Symbol)
				}
			case elfimage.RelocAArch64AdrPage21:
				if k+1 >= len(p.Relocs) || p.Relocs[k+1].Type != elfimage.RelocAArch64AddLo12 || p.Relocs[k+1].Offset != r.Offset+4 || p.Relocs[k+1].Symbol != r.Symbol {
					t.Errorf("%s: adrp at %#x without its add", p.Name, r.Offset)
				}
			case elfimage.RelocAArch64AddLo12:
			default:
				t.Errorf("%s: relocation %+v", p.Name, r)
			}
		}
	}
	if kinds[elfimage.RelocAArch64Call26] == 0 || kinds[elfimage.RelocAArch64Jump26] == 0 || kinds[elfimage.RelocAArch64AdrPage21] == 0 {
		t.Errorf("relocation kinds %v", kinds)
	}
	for _, tc := range []struct {
		a    *arch.Arch
		want string
	}{
		{nil, "scheme: no architecture given"},
		{&arch.Arch{Name: "riscv64", Machine: elf.EM_RISCV}, "scheme: no backend for EM_RISCV"},
	} {
		if _, err := CompileFor(tc.a, "p.scm", []byte("(define (main) 0)")); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("CompileFor(%v) = %v, want %q", tc.a, err, tc.want)
		}
	}
	if m, _, err := compile(arch.AArch64, "p.scm", []byte("(define (main) 0)"), true); err != nil || m.Arch != arch.AArch64 {
		t.Errorf("AArch64 object: %v", err)
	}
}

// TestAArch64Defs checks the AArch64 record of variable stores: every
// entry is at an instruction that stores a register into a frame slot
// (stur, str) or a home register (mov x19-x22), as the simulators of the
// CFI tests expect.
func TestAArch64Defs(t *testing.T) {
	for _, name := range aarch64Programs {
		m, defs := compileFileDefsFor(t, arch.AArch64, name)
		n := 0
		for _, p := range m.Procs {
			for off := range defs[p] {
				w := uint32(p.Code[off]) | uint32(p.Code[off+1])<<8 | uint32(p.Code[off+2])<<16 | uint32(p.Code[off+3])<<24
				stur := w&0xffe00c00 == 0xf8000000
				str := w&0xffc00000 == 0xf9000000
				mov := w&0xffe0ffe0 == 0xaa0003e0 && w&31 >= 19 && w&31 <= 22
				if off%4 != 0 || !(stur || str || mov) {
					t.Errorf("%s %s: def at %#x is %08x, not a store", name, p.Name, off, w)
				}
				n++
			}
		}
		if n == 0 {
			t.Errorf("%s: no defs", name)
		}
	}
}
