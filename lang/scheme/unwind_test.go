package scheme

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/frame"
)

// testFrame is one frame found by unwinding a capture with the module's
// own CFI (interpreted by the test's cfiRows).
type testFrame struct {
	proc      *elfimage.Proc
	pc        uint64
	line, col uint32
	cfa       uint64
	args      []int64
}

// unwindStep finds the procedure of m (at syms) holding the return
// address in regs (indexed by DWARF number of a; lookups use pc-1) and
// the registers of its caller by the procedure's CFI (cfiRowsFor): the
// CFA, the saved registers and the return address (at CFA-8 on x86-64,
// by the x30 rule on AArch64). last is set for the outermost procedure
// (return address undefined, or %start, whose caller is the library's
// entry frame).
func unwindStep(t *testing.T, a *arch.Arch, m *elfimage.Module, syms map[string]uintptr, regs [33]uint64, read func(uint64) uint64) (p *elfimage.Proc, off uint32, cfa uint64, caller [33]uint64, last bool) {
	t.Helper()
	pc := regs[a.RA]
	for _, q := range m.Procs {
		if s := uint64(syms[q.Name]); pc-1 >= s && pc-1 < s+uint64(len(q.Code)) {
			p = q
		}
	}
	if p == nil {
		t.Fatalf("pc %#x in no procedure", pc)
	}
	off = uint32(pc - 1 - uint64(syms[p.Name]))
	row := cfiRowsFor(a, p)[off]
	cfa = regs[row.cfaReg] + uint64(row.cfaOff)
	if row.raUndef || p.Name == symStart {
		return p, off, cfa, regs, true
	}
	caller = regs
	for r, o := range row.saved {
		if o != 0 {
			caller[r] = read(cfa + uint64(o))
		}
	}
	if row.rbpRule == frame.OpOffset {
		caller[a.FP] = read(cfa + uint64(row.rbpOff))
	}
	if a.Machine == arch.X86_64.Machine {
		caller[a.RA] = read(cfa - 8)
	}
	caller[a.SP] = cfa
	return p, off, cfa, caller, false
}

// unwindCapture walks c with the CFI of m, whose procs are at syms.
func unwindCapture(t *testing.T, m *elfimage.Module, syms map[string]uintptr, c *Capture) []testFrame {
	t.Helper()
	read := func(addr uint64) uint64 {
		v, ok := c.ReadStack(addr)
		if !ok {
			t.Fatalf("read of %#x outside the captured stack", addr)
		}
		return v
	}
	regs := c.Regs
	var frames []testFrame
	for len(frames) < 100 {
		p, off, cfa, caller, last := unwindStep(t, c.Arch, m, syms, regs, read)
		fr := testFrame{proc: p, pc: regs[c.Arch.RA], cfa: cfa}
		for _, r := range p.Lines {
			if r.Offset <= off {
				fr.line, fr.col = r.Line, r.Column
			}
		}
		for _, v := range p.Params {
			if v.Location[0] != byte(dwarf.DW_OP_fbreg) {
				t.Fatalf("%s: location %x", p.Name, v.Location)
			}
			fb, _ := dwarf.Sleb128(v.Location[1:])
			fr.args = append(fr.args, int64(read(cfa+uint64(fb))))
		}
		frames = append(frames, fr)
		if last {
			return frames
		}
		regs = caller
	}
	t.Fatal("unwind did not end")
	return nil
}

func TestDemo(t *testing.T) {
	m, err := Compile(DemoFile, DemoSource)
	if err != nil {
		t.Fatal(err)
	}
	f := loadFlat(t, m)
	var res *Result
	out := captureOutput(t, func(w *os.File) {
		res, err = runEntry(f.syms[symStart], RunOptions{Stdout: w}, f.inImage)
	})
	if err != nil {
		t.Fatal(err)
	}
	if out != DemoOutput {
		t.Errorf("demo printed %q, want %q", out, DemoOutput)
	}
	if len(res.Captures) != 1 {
		t.Fatalf("%d captures", len(res.Captures))
	}
	frames := unwindCapture(t, m, f.syms, &res.Captures[0])
	var got []string
	for _, fr := range frames {
		got = append(got, fmtFrame(fr))
	}
	// Positions: (backtrace) in inner, the call of inner in middle, of
	// middle in outer, of outer in main (inside (display (outer 3))).
	want := []string{
		"inner:33:37(4,26)",
		"middle:37:12(3,13)",
		"outer:41:12(3)",
		"main:49:36()",
		"%start:0:0()",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("backtrace\n got %v\nwant %v", got, want)
	}
}

func fmtFrame(fr testFrame) string {
	var b strings.Builder
	b.WriteString(fr.proc.Name)
	b.WriteString(":" + itoa(int64(fr.line)) + ":" + itoa(int64(fr.col)) + "(")
	for i, a := range fr.args {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(itoa(a))
	}
	b.WriteString(")")
	return b.String()
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
