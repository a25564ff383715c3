package frame

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/internal/readelf"
	"github.com/elfimage/elfimage/internal/tooltest"
)

const (
	rax = arch.X86_64_RAX
	rbx = arch.X86_64_RBX
	rbp = arch.X86_64_RBP
	rsp = arch.X86_64_RSP
	r12 = arch.X86_64_R12
	ra  = arch.X86_64_RA
)

// pltExpr is the CFA expression GNU ld writes for .plt entries:
// rsp + 8 + ((rip & 15) >= 11) << 3.
var pltExpr = []byte{0x77, 8, 0x80, 0, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22}

// testFDEs is a model exercising every instruction form the encoder picks.
func testFDEs(base uint64) []FDE {
	return []FDE{
		{Start: base, Size: 0x40, Insns: []Insn{ // push rbp; mov rbp, rsp; ...; leave; ret
			{PC: 1, Op: OpDefCFAOffset, Offset: 16},
			{PC: 1, Op: OpOffset, Reg: rbp, Offset: -16},
			{PC: 4, Op: OpDefCFARegister, Reg: rbp},
			{PC: 0x3e, Op: OpDefCFA, Reg: rsp, Offset: 8},
		}},
		{Start: base + 0x40, Size: 0x20000}, // no instructions: the CIE's row
		{Start: base + 0x20040, Size: 0x30000, Insns: []Insn{
			{PC: 0x50, Op: OpDefCFAOffset, Offset: 0x1000},       // advance_loc1
			{PC: 0x50, Op: OpOffset, Reg: rbx, Offset: -24},      // offset
			{PC: 0x50, Op: OpOffset, Reg: 70, Offset: -32},       // offset_extended (reg >= 64)
			{PC: 0x50, Op: OpOffset, Reg: r12, Offset: 16},       // offset_extended_sf
			{PC: 0x50, Op: OpValOffset, Reg: rax, Offset: -8},    // val_offset
			{PC: 0x1234, Op: OpRememberState},                    // advance_loc2
			{PC: 0x1234, Op: OpRegister, Reg: rbx, Reg2: rax},    //
			{PC: 0x1234, Op: OpValOffset, Reg: rax, Offset: 16},  // val_offset_sf
			{PC: 0x1234, Op: OpUndefined, Reg: r12},              //
			{PC: 0x1235, Op: OpSameValue, Reg: rbx},              //
			{PC: 0x1235, Op: OpArgsSize, Offset: 16},             //
			{PC: 0x1236, Op: OpRestoreState},                     //
			{PC: 0x12345, Op: OpRestore, Reg: rbx},               // advance_loc4
			{PC: 0x12345, Op: OpRestore, Reg: 70},                // restore_extended
			{PC: 0x12346, Op: OpDefCFA, Reg: rbp, Offset: -16},   // def_cfa_sf
			{PC: 0x12347, Op: OpDefCFAOffset, Offset: -8},        // def_cfa_offset_sf
			{PC: 0x12348, Op: OpDefCFAExpression, Expr: pltExpr}, //
			{PC: 0x12349, Op: OpExpression, Reg: rbp, Expr: []byte{byte(dwarf.DW_OP_breg0) + 7, 0}},
			{PC: 0x1234a, Op: OpValExpression, Reg: rbx, Expr: []byte{byte(dwarf.DW_OP_breg0) + 7, 8}},
			{PC: 0x1234b, Op: OpNop},
			{PC: 0x1234c, Op: OpUndefined, Reg: ra}, // outermost frame
		}},
	}
}

// model row: what a test expects, computed from the model independently of
// the encoder and decoder.
type modelRow struct {
	loc  uint64
	cfa  string
	regs map[arch.Reg]string
}

func fmtRule(r Rule) string { return r.Format(x86Name) }

// expectRows executes the model Insns directly (semantics of DWARF 5
// section 6.4.2) and returns one row per distinct PC.
func expectRows(cie CIE, f FDE) []modelRow {
	type state struct {
		cfa  Rule
		regs map[arch.Reg]Rule
	}
	clone := func(s state) state {
		m := map[arch.Reg]Rule{}
		for k, v := range s.regs {
			m[k] = v
		}
		return state{s.cfa, m}
	}
	exec := func(s *state, in Insn, init *state, stack *[]state) {
		switch in.Op {
		case OpDefCFA:
			s.cfa = Rule{Kind: RuleCFA, Reg: in.Reg, Offset: in.Offset}
		case OpDefCFARegister:
			s.cfa.Reg = in.Reg
		case OpDefCFAOffset:
			s.cfa.Offset = in.Offset
		case OpDefCFAExpression:
			s.cfa = Rule{Kind: RuleCFAExpression, Expr: in.Expr}
		case OpOffset:
			s.regs[in.Reg] = Rule{Kind: RuleOffset, Offset: in.Offset}
		case OpValOffset:
			s.regs[in.Reg] = Rule{Kind: RuleValOffset, Offset: in.Offset}
		case OpRegister:
			s.regs[in.Reg] = Rule{Kind: RuleRegister, Reg: in.Reg2}
		case OpExpression:
			s.regs[in.Reg] = Rule{Kind: RuleExpression}
		case OpValExpression:
			s.regs[in.Reg] = Rule{Kind: RuleValExpression}
		case OpUndefined:
			s.regs[in.Reg] = Rule{Kind: RuleUndefined}
		case OpSameValue:
			s.regs[in.Reg] = Rule{Kind: RuleSameValue}
		case OpRestore:
			s.regs[in.Reg] = init.regs[in.Reg]
		case OpRememberState:
			*stack = append(*stack, clone(*s))
		case OpRestoreState:
			*s = (*stack)[len(*stack)-1]
			*stack = (*stack)[:len(*stack)-1]
		}
	}
	s := state{regs: map[arch.Reg]Rule{}}
	var stack []state
	for _, in := range cie.Initial {
		exec(&s, in, &s, &stack)
	}
	init := clone(s)
	snap := func(loc uint64) modelRow {
		r := modelRow{loc: loc, cfa: fmtRule(s.cfa), regs: map[arch.Reg]string{}}
		for k, v := range s.regs {
			r.regs[k] = fmtRule(v)
		}
		return r
	}
	var rows []modelRow
	pc := uint64(0)
	for _, in := range f.Insns {
		if in.PC != pc {
			rows = append(rows, snap(f.Start+pc))
			pc = in.PC
		}
		exec(&s, in, &init, &stack)
	}
	return append(rows, snap(f.Start+pc))
}

func checkRows(t *testing.T, what string, got []Row, want []modelRow) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Loc != w.loc || fmtRule(g.CFA) != w.cfa {
			t.Errorf("%s row %d: loc %#x CFA %s, want %#x %s", what, i, g.Loc, fmtRule(g.CFA), w.loc, w.cfa)
		}
		for reg, rule := range w.regs {
			if s := fmtRule(g.Rule(reg)); s != rule {
				t.Errorf("%s row %d (loc %#x): reg %d %s, want %s", what, i, g.Loc, reg, s, rule)
			}
		}
		for j := 0; j < g.NumRules(); j++ {
			reg, rule := g.RuleAt(j)
			if _, ok := w.regs[reg]; !ok && rule.Kind != RuleUnspecified {
				t.Errorf("%s row %d: unexpected rule for reg %d: %s", what, i, reg, fmtRule(rule))
			}
		}
	}
}

// checkDecoded checks that decoding gives back the model's instructions.
func checkDecoded(t *testing.T, sec *Section, f *ParsedFDE, want FDE) {
	t.Helper()
	ds, err := sec.DecodeInsns(nil, f)
	if err != nil {
		t.Fatal(err)
	}
	var got []Insn
	for _, d := range ds {
		if d.Op == OpAdvanceLoc || d.Op == OpNop && d.Off >= f.InsnsOff+uint64(len(f.Insns))-8 {
			continue // advances and trailing padding
		}
		if len(d.Expr) == 0 {
			d.Expr = nil
		}
		got = append(got, d.Insn)
	}
	wantIns := want.Insns
	// The trailing-padding filter may drop a modelled OpNop at the end; compare without nops.
	strip := func(in []Insn) []Insn {
		var o []Insn
		for _, x := range in {
			if x.Op != OpNop {
				o = append(o, x)
			}
		}
		return o
	}
	if !reflect.DeepEqual(strip(got), strip(wantIns)) {
		t.Errorf("FDE %#x: decoded\n%v\nwant\n%v", f.Offset, strip(got), strip(wantIns))
	}
}

func encodings() []dwarf.Encoding {
	var out []dwarf.Encoding
	for _, f := range []dwarf.Format{dwarf.Format32, dwarf.Format64} {
		for _, as := range []uint8{8, 4} {
			for _, bo := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
				out = append(out, dwarf.Encoding{Version: 5, Format: f, AddrSize: as, ByteOrder: bo})
			}
		}
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	cie := StandardCIE(arch.X86_64)
	for _, enc := range encodings() {
		t.Run(fmt.Sprintf("%v-addr%d-%v", enc.Format, enc.AddrSize, enc.ByteOrder), func(t *testing.T) {
			const ehAddr, textAddr = 0x2000, 0x10000
			fdes := testFDEs(textAddr)
			eh, ehOffs, err := EncodeEHFrame(cie, fdes, ehAddr, enc)
			if err != nil {
				t.Fatal(err)
			}
			df, dfOffs, err := EncodeDebugFrame(cie, fdes, enc)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				sec  *Section
				offs []uint64
			}{
				{NewEHFrame(eh, ehAddr, enc.ByteOrder, enc.AddrSize), ehOffs},
				{NewDebugFrame(df, enc.ByteOrder, enc.AddrSize), dfOffs},
			} {
				size := len(c.sec.Data())
				if c.sec.IsEHFrame() {
					size -= 4 // terminator
				}
				if size%int(enc.AddrSize) != 0 {
					t.Errorf("%s: size %d not a multiple of the address size", c.sec.Name(), len(c.sec.Data()))
				}
				got, err := c.sec.FDEs()
				if err != nil {
					t.Fatalf("%s: %v", c.sec.Name(), err)
				}
				if len(got) != len(fdes) {
					t.Fatalf("%s: %d FDEs, want %d", c.sec.Name(), len(got), len(fdes))
				}
				for i := range got {
					f := &got[i]
					if f.Offset != c.offs[i] || f.Start != fdes[i].Start || f.Size != fdes[i].Size {
						t.Errorf("%s FDE %d: off %#x [%#x,+%#x), want %#x [%#x,+%#x)", c.sec.Name(), i, f.Offset, f.Start, f.Size, c.offs[i], fdes[i].Start, fdes[i].Size)
					}
					if f.CIE.Offset != 0 || f.CIE.RA != ra || f.CIE.CodeAlign != 1 || f.CIE.DataAlign != -8 {
						t.Errorf("%s FDE %d: CIE %+v", c.sec.Name(), i, f.CIE)
					}
					rows, err := Table(f)
					if err != nil {
						t.Fatalf("%s FDE %d: %v", c.sec.Name(), i, err)
					}
					checkRows(t, fmt.Sprintf("%s FDE %d", c.sec.Name(), i), rows, expectRows(cie, fdes[i]))
					checkDecoded(t, c.sec, f, fdes[i])
				}
			}
		})
	}
}

// TestSizeIndependentOfAddress: the linker sizes .eh_frame with made-up
// addresses and writes it with real ones.
func TestSizeIndependentOfAddress(t *testing.T) {
	cie := StandardCIE(arch.X86_64)
	a, _, err := EncodeEHFrame(cie, testFDEs(0), 0, dwarf.Default64)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := EncodeEHFrame(cie, testFDEs(0x7f000000), 0x7f100000, dwarf.Default64)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != len(b) {
		t.Fatalf("size %d at address 0, %d at 0x7f100000", len(a), len(b))
	}
	if bytes.Equal(a, b) {
		t.Fatal("addresses made no difference")
	}
}

func TestEncoderRefuses(t *testing.T) {
	cie := StandardCIE(arch.X86_64)
	for _, c := range []struct {
		name string
		cie  CIE
		fdes []FDE
	}{
		{"unsorted", cie, []FDE{{Start: 0x1000, Size: 16, Insns: []Insn{{PC: 4, Op: OpNop}, {PC: 2, Op: OpNop}}}}},
		{"past size", cie, []FDE{{Start: 0x1000, Size: 16, Insns: []Insn{{PC: 17, Op: OpNop}}}}},
		{"unaligned offset", cie, []FDE{{Start: 0x1000, Size: 16, Insns: []Insn{{PC: 1, Op: OpOffset, Reg: rbx, Offset: -12}}}}},
		{"unaligned code", CIE{CodeAlign: 4, DataAlign: -8, RA: 30}, []FDE{{Start: 0x1000, Size: 16, Insns: []Insn{{PC: 2, Op: OpNop}}}}},
		{"zero code align", CIE{DataAlign: -8}, nil},
		{"CIE pc", CIE{CodeAlign: 1, DataAlign: -8, Initial: []Insn{{PC: 1, Op: OpNop}}}, nil},
		{"empty expr", cie, []FDE{{Start: 0x1000, Size: 16, Insns: []Insn{{PC: 1, Op: OpDefCFAExpression}}}}},
		{"far", cie, []FDE{{Start: 0x100000000, Size: 16}}},
		{"overflow", cie, []FDE{{Start: ^uint64(0) - 4, Size: 16}}},
		{"bad op", cie, []FDE{{Start: 0x1000, Size: 16, Insns: []Insn{{PC: 1, Op: 99}}}}},
	} {
		_, _, err := EncodeEHFrame(c.cie, c.fdes, 0x1000, dwarf.Default64)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", c.name, err)
		}
	}
	fdes := []FDE{{Start: 0x1000, Size: 16}, {Start: 0x1008, Size: 16}}
	if _, err := EncodeEHFrameHdr(0, 0x100, fdes, []uint64{0, 0x18}); !errors.Is(err, ErrInvalid) {
		t.Errorf("overlapping FDEs in .eh_frame_hdr: err %v", err)
	}
}

func TestCIEDedup(t *testing.T) {
	std := StandardCIE(arch.X86_64)
	same := StandardCIE(arch.X86_64)
	sig := StandardCIE(arch.X86_64)
	sig.Signal = true
	fdes := []FDE{{Start: 0x1000, Size: 8}, {Start: 0x1008, Size: 8, CIE: &same}, {Start: 0x1010, Size: 8, CIE: &sig}}
	data, _, err := EncodeEHFrame(std, fdes, 0x400, dwarf.Default64)
	if err != nil {
		t.Fatal(err)
	}
	sec := NewEHFrame(data, 0x400, binary.LittleEndian, 8)
	var cies []ParsedCIE
	var fcie []uint64
	if err := sec.Entries(func(c *ParsedCIE, f *ParsedFDE) bool {
		if c != nil {
			cies = append(cies, *c)
		} else {
			fcie = append(fcie, f.CIE.Offset)
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(cies) != 2 || cies[0].Signal || !cies[1].Signal || string(cies[1].Augmentation) != "zRS" {
		t.Fatalf("CIEs %+v", cies)
	}
	if fcie[0] != fcie[1] || fcie[2] == fcie[0] {
		t.Fatalf("FDE CIE offsets %v", fcie)
	}
}

// TestReadelf writes .eh_frame, .eh_frame_hdr and .debug_frame into a
// minimal ELF file and checks readelf reads them without complaint and
// prints the same rows as Table.
func TestReadelf(t *testing.T) {
	for _, format := range []dwarf.Format{dwarf.Format32, dwarf.Format64} {
		t.Run(format.String(), func(t *testing.T) {
			enc := dwarf.Default64
			enc.Format = format
			cie := StandardCIE(arch.X86_64)
			const hdrAddr, ehAddr, textAddr = 0x1000, 0x2000, 0x10000
			fdes := testFDEs(textAddr)
			eh, offs, err := EncodeEHFrame(cie, fdes, ehAddr, enc)
			if err != nil {
				t.Fatal(err)
			}
			hdr, err := EncodeEHFrameHdr(hdrAddr, ehAddr, fdes, offs)
			if err != nil {
				t.Fatal(err)
			}
			df, _, err := EncodeDebugFrame(cie, fdes, enc)
			if err != nil {
				t.Fatal(err)
			}
			last := fdes[len(fdes)-1]
			file := readelf.WriteELF(elf.EM_X86_64, []readelf.Section{
				{Name: ".eh_frame_hdr", Flags: elf.SHF_ALLOC, Addr: hdrAddr, Data: hdr, Align: 4},
				{Name: ".eh_frame", Flags: elf.SHF_ALLOC, Addr: ehAddr, Data: eh, Align: 8},
				{Name: ".text", Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Addr: textAddr, Data: make([]byte, last.Start+last.Size-textAddr), Align: 16},
				{Name: ".debug_frame", Data: df, Align: 8},
			})
			raw, stderr := readelf.Run(t, file, "-W", "--debug-dump=frames")
			if stderr != "" || strings.Contains(strings.ToLower(raw), "warning") || strings.Contains(raw, "unknown") {
				t.Errorf("readelf --debug-dump=frames complains:\n%s\n%s", stderr, raw)
			}
			text, stderr := readelf.Run(t, file, "-W", "--debug-dump=frames-interp")
			if stderr != "" {
				t.Errorf("readelf stderr: %s", stderr)
			}
			n := compareWithReadelf(t, NewEHFrame(eh, ehAddr, binary.LittleEndian, 8), text, ".eh_frame", 0)
			n += compareWithReadelf(t, NewDebugFrame(df, binary.LittleEndian, 8), text, ".debug_frame", 0)
			if n != 2*len(fdes) {
				t.Errorf("compared %d FDEs, want %d", n, 2*len(fdes))
			}
			if t.Failed() {
				t.Logf("readelf:\n%s", text)
			}
			// llvm-dwarfdump, a second independent reader.
			if dd := tooltest.Require(t, "llvm-dwarfdump", "llvm-dwarfdump-14"); dd != "" {
				name := filepath.Join(t.TempDir(), "cfi.elf")
				if err := os.WriteFile(name, file, 0o644); err != nil {
					t.Fatal(err)
				}
				out, err := exec.Command(dd, "--debug-frame", name).CombinedOutput()
				lo := strings.ToLower(string(out))
				if err != nil || strings.Contains(lo, "error") || strings.Contains(lo, "warning") || strings.Count(string(out), " FDE ") != 2*len(fdes) {
					t.Errorf("llvm-dwarfdump: %v\n%s", err, out)
				}
			}
			// The header as readelf sees it.
			hdrText, _ := readelf.Run(t, file, "-W", "--debug-dump=frames", "-l")
			if !strings.Contains(hdrText, "GNU_EH_FRAME") {
				t.Errorf("no PT_GNU_EH_FRAME")
			}
		})
	}
}

func TestFinder(t *testing.T) {
	cie := StandardCIE(arch.X86_64)
	const hdrAddr, ehAddr, textAddr = 0x1000, 0x2000, 0x10000
	fdes := []FDE{ // deliberately unsorted, with gaps
		{Start: textAddr + 0x100, Size: 0x20},
		{Start: textAddr, Size: 0x10},
		{Start: textAddr + 0x40, Size: 0x40},
	}
	eh, offs, err := EncodeEHFrame(cie, fdes, ehAddr, dwarf.Default64)
	if err != nil {
		t.Fatal(err)
	}
	hdr, err := EncodeEHFrameHdr(hdrAddr, ehAddr, fdes, offs)
	if err != nil {
		t.Fatal(err)
	}
	if len(hdr) != EHFrameHdrSize(len(fdes)) {
		t.Fatalf("header size %d, EHFrameHdrSize %d", len(hdr), EHFrameHdrSize(len(fdes)))
	}
	withHdr, err := NewFinder(eh, ehAddr, hdr, hdrAddr, binary.LittleEndian, 8)
	if err != nil {
		t.Fatal(err)
	}
	if withHdr.Hdr.EHFramePtr != ehAddr || withHdr.Hdr.Count != 3 {
		t.Fatalf("hdr %+v", withHdr.Hdr)
	}
	scan, _ := NewFinder(eh, ehAddr, nil, 0, binary.LittleEndian, 8)
	for _, fi := range []*Finder{withHdr, scan} {
		var got ParsedFDE
		for i, f := range fdes {
			for _, pc := range []uint64{f.Start, f.Start + f.Size/2, f.Start + f.Size - 1} {
				if err := fi.FindFDE(pc, &got); err != nil || got.Offset != offs[i] {
					t.Errorf("FindFDE(%#x) = %#x, %v; want FDE %#x", pc, got.Offset, err, offs[i])
				}
			}
		}
		for _, pc := range []uint64{0, textAddr - 1, textAddr + 0x10, textAddr + 0x3f, textAddr + 0x80, textAddr + 0x120, ^uint64(0)} {
			if err := fi.FindFDE(pc, &got); !errors.Is(err, ErrNoFDE) {
				t.Errorf("FindFDE(%#x): err %v, want ErrNoFDE", pc, err)
			}
		}
	}
}

func TestZeroAllocLookup(t *testing.T) {
	cie := StandardCIE(arch.X86_64)
	const hdrAddr, ehAddr, textAddr = 0x1000, 0x2000, 0x10000
	fdes := testFDEs(textAddr)
	eh, offs, _ := EncodeEHFrame(cie, fdes, ehAddr, dwarf.Default64)
	hdr, _ := EncodeEHFrameHdr(hdrAddr, ehAddr, fdes, offs)
	fi, err := NewFinder(eh, ehAddr, hdr, hdrAddr, binary.LittleEndian, 8)
	if err != nil {
		t.Fatal(err)
	}
	var e Exec
	var fde ParsedFDE
	var row Row
	pc := fdes[2].Start + 0x1235
	n := testing.AllocsPerRun(100, func() {
		if err := fi.FindFDE(pc, &fde); err != nil {
			t.Fatal(err)
		}
		if err := e.RowAt(&fde, pc, &row); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Fatalf("FindFDE+RowAt: %v allocations per run", n)
	}
	if row.Loc != pc || row.Rule(rbx).Kind != RuleSameValue || row.ArgsSize != 16 {
		t.Fatalf("row at %#x: loc %#x rbx %v args %d", pc, row.Loc, row.Rule(rbx).Kind, row.ArgsSize)
	}
}

func BenchmarkFindFDERowAt(b *testing.B) {
	cie := StandardCIE(arch.X86_64)
	fdes := testFDEs(0x10000)
	eh, offs, _ := EncodeEHFrame(cie, fdes, 0x2000, dwarf.Default64)
	hdr, _ := EncodeEHFrameHdr(0x1000, 0x2000, fdes, offs)
	fi, _ := NewFinder(eh, 0x2000, hdr, 0x1000, binary.LittleEndian, 8)
	var e Exec
	var fde ParsedFDE
	var row Row
	b.ReportAllocs()
	for b.Loop() {
		_ = fi.FindFDE(0x10010, &fde)
		_ = e.RowAt(&fde, 0x10010, &row)
	}
}
