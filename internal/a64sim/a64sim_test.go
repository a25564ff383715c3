package a64sim_test

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/expr"
	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/internal/a64sim"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// words encodes AArch64 instruction words little-endian.
func words(ws ...uint32) []byte {
	var b []byte
	for _, w := range ws {
		b = binary.LittleEndian.AppendUint32(b, w)
	}
	return b
}

const (
	x19 = arch.Reg(19)
	x20 = arch.Reg(20)
	fp  = arch.AArch64_FP
	lr  = arch.AArch64_LR
)

// framed is a procedure with a frame record and a frame pointer, two
// saved callee-saved registers, a stack adjustment the CFA rule on x29
// does not see, a call, a branch and a join (TestProgramsDisassemble checks
// the words against aarch64-linux-gnu-objdump):
//
//	 0: stp x29, x30, [sp, #-32]!
//	 4: mov x29, sp
//	 8: stp x19, x20, [sp, #16]
//	12: sub sp, sp, #0x10
//	16: mov x19, x0
//	20: cbz x19, 36
//	24: add x20, x19, #0x1
//	28: blr x20
//	32: b 40
//	36: mov x0, #0x0
//	40: mov sp, x29
//	44: ldp x19, x20, [sp, #16]
//	48: ldp x29, x30, [sp], #32
//	52: ret
//
// Its parameter a is in x0, then in x19; the variable b, in scope from
// 24 to 36, is computed into x20 at 24.
func framed() *elfimage.Proc {
	return &elfimage.Proc{
		Name: "framed",
		Code: words(0xa9be7bfd, 0x910003fd, 0xa90153f3, 0xd10043ff, 0xaa0003f3, 0xb4000093, 0x91000674,
			0xd63f0280, 0x14000002, 0xd2800000, 0x910003bf, 0xa94153f3, 0xa8c27bfd, 0xd65f03c0),
		CFI: []frame.Insn{
			{PC: 4, Op: frame.OpDefCFAOffset, Offset: 32},
			{PC: 4, Op: frame.OpOffset, Reg: fp, Offset: -32},
			{PC: 4, Op: frame.OpOffset, Reg: lr, Offset: -24},
			{PC: 8, Op: frame.OpDefCFARegister, Reg: fp},
			{PC: 12, Op: frame.OpOffset, Reg: x19, Offset: -16},
			{PC: 12, Op: frame.OpOffset, Reg: x20, Offset: -8},
			{PC: 48, Op: frame.OpRestore, Reg: x19},
			{PC: 48, Op: frame.OpRestore, Reg: x20},
			{PC: 52, Op: frame.OpDefCFA, Reg: arch.AArch64_SP, Offset: 0},
			{PC: 52, Op: frame.OpRestore, Reg: fp},
			{PC: 52, Op: frame.OpRestore, Reg: lr},
		},
		Params: []elfimage.Var{{Name: "a", Line: 1, Column: 1, Live: []elfimage.LiveRange{
			{Start: 0, End: 20, Location: expr.Reg(0)},
			{Start: 20, End: 48, Location: expr.Reg(19)},
		}}},
		Scopes: []*elfimage.Scope{{Ranges: []elfimage.CodeRange{{Start: 24, End: 36}}, Vars: []elfimage.Var{
			{Name: "b", Line: 2, Column: 1, Live: []elfimage.LiveRange{{Start: 28, End: 36, Location: expr.Reg(20)}}},
		}}},
	}
}

// framedDefs says which instruction of framed computes b.
var framedDefs = map[uint32]a64sim.Pos{24: {Line: 2, Column: 1}}

// leaf is a procedure with an sp-based CFA, a frame record with x29
// pointing at it, a callee-saved register saved with str, and a call
// through a register:
//
//	 0: sub sp, sp, #0x20
//	 4: stp x29, x30, [sp, #16]
//	 8: add x29, sp, #0x10
//	12: str x19, [sp, #8]
//	16: mov x19, x1
//	20: blr x0
//	24: add x0, x0, x19
//	28: ldr x19, [sp, #8]
//	32: ldp x29, x30, [sp, #16]
//	36: add sp, sp, #0x20
//	40: ret
func leaf() *elfimage.Proc {
	return &elfimage.Proc{
		Name: "leaf",
		Code: words(0xd10083ff, 0xa9017bfd, 0x910043fd, 0xf90007f3, 0xaa0103f3, 0xd63f0000, 0x8b130000,
			0xf94007f3, 0xa9417bfd, 0x910083ff, 0xd65f03c0),
		CFI: []frame.Insn{
			{PC: 4, Op: frame.OpDefCFAOffset, Offset: 32},
			{PC: 8, Op: frame.OpOffset, Reg: fp, Offset: -16},
			{PC: 8, Op: frame.OpOffset, Reg: lr, Offset: -8},
			{PC: 16, Op: frame.OpOffset, Reg: x19, Offset: -24},
			{PC: 32, Op: frame.OpRestore, Reg: x19},
			{PC: 36, Op: frame.OpRestore, Reg: fp},
			{PC: 36, Op: frame.OpRestore, Reg: lr},
			{PC: 40, Op: frame.OpDefCFAOffset, Offset: 0},
		},
	}
}

// TestProgramsDisassemble checks the hand-assembled words of the test
// procedures against aarch64-linux-gnu-objdump.
func TestProgramsDisassemble(t *testing.T) {
	objdump := tooltest.Require(t, "aarch64-linux-gnu-objdump")
	for _, tc := range []struct {
		p    *elfimage.Proc
		want []string
	}{
		{framed(), []string{"stp\tx29, x30, [sp, #-32]!", "mov\tx29, sp", "stp\tx19, x20, [sp, #16]", "sub\tsp, sp, #0x10", "mov\tx19, x0",
			"cbz\tx19, 0x24", "add\tx20, x19, #0x1", "blr\tx20", "b\t0x28", "mov\tx0, #0x0", "mov\tsp, x29",
			"ldp\tx19, x20, [sp, #16]", "ldp\tx29, x30, [sp], #32", "ret"}},
		{leaf(), []string{"sub\tsp, sp, #0x20", "stp\tx29, x30, [sp, #16]", "add\tx29, sp, #0x10", "str\tx19, [sp, #8]", "mov\tx19, x1", "blr\tx0",
			"add\tx0, x0, x19", "ldr\tx19, [sp, #8]", "ldp\tx29, x30, [sp, #16]", "add\tsp, sp, #0x20", "ret"}},
	} {
		path := t.TempDir() + "/code.bin"
		if err := os.WriteFile(path, tc.p.Code, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(objdump, "-D", "-b", "binary", "-m", "aarch64", path).CombinedOutput()
		if err != nil {
			t.Fatalf("objdump: %v\n%s", err, out)
		}
		var got []string
		for _, l := range strings.Split(string(out), "\n") {
			f := strings.SplitN(l, "\t", 3)
			if len(f) == 3 && strings.HasSuffix(f[0], ":") {
				got = append(got, strings.TrimSpace(strings.SplitN(f[2], "//", 2)[0]))
			}
		}
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%s: objdump shows\n%s\nwant\n%s", tc.p.Name, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
}

// TestCorrect: the procedures with their exact CFI pass, with variables
// checked.
func TestCorrect(t *testing.T) {
	if err := a64sim.Check(framed(), a64sim.Options{Vars: true, Complete: true, Defs: framedDefs}); err != nil {
		t.Error(err)
	}
	if err := a64sim.Check(leaf(), a64sim.Options{}); err != nil {
		t.Error(err)
	}
}

// mutate returns p with its CFI changed by f.
func mutate(p *elfimage.Proc, f func(cfi []frame.Insn) []frame.Insn) *elfimage.Proc {
	p.CFI = f(append([]frame.Insn(nil), p.CFI...))
	return p
}

// drop removes the CFI instruction for reg with op at pc.
func drop(pc uint64, op frame.Op, reg arch.Reg) func([]frame.Insn) []frame.Insn {
	return func(cfi []frame.Insn) []frame.Insn {
		for i, in := range cfi {
			if in.PC == pc && in.Op == op && in.Reg == reg {
				return append(cfi[:i], cfi[i+1:]...)
			}
		}
		panic("no such instruction")
	}
}

// change applies f to the CFI instruction for reg with op at pc.
func change(pc uint64, op frame.Op, reg arch.Reg, f func(*frame.Insn)) func([]frame.Insn) []frame.Insn {
	return func(cfi []frame.Insn) []frame.Insn {
		for i := range cfi {
			if cfi[i].PC == pc && cfi[i].Op == op && cfi[i].Reg == reg {
				f(&cfi[i])
				return cfi
			}
		}
		panic("no such instruction")
	}
}

// TestMutants: one wrong CFI instruction, or one wrong live range, and the
// check fails with ErrCheck, naming the right place.
func TestMutants(t *testing.T) {
	off8 := func(in *frame.Insn) { in.Offset -= 8 }
	for _, tc := range []struct {
		name string
		p    *elfimage.Proc
		opts a64sim.Options
		want string // in the error
	}{
		{"CFA off by 8 after stp", mutate(framed(), change(4, frame.OpDefCFAOffset, 0, off8)), a64sim.Options{},
			"framed+0x4 "},
		{"CFA off by 8 in an sp frame", mutate(leaf(), change(4, frame.OpDefCFAOffset, 0, off8)), a64sim.Options{},
			"leaf+0x4 "},
		{"CFA still x29 at ret", mutate(framed(), drop(52, frame.OpDefCFA, arch.AArch64_SP)), a64sim.Options{},
			"framed+0x34 "},
		{"CFA never moved to x29", mutate(framed(), drop(8, frame.OpDefCFARegister, fp)), a64sim.Options{},
			"framed+0x10 "},
		{"missing restore of x19", mutate(framed(), drop(48, frame.OpRestore, x19)), a64sim.Options{},
			"below sp"},
		{"missing restore of x29", mutate(leaf(), drop(36, frame.OpRestore, fp)), a64sim.Options{},
			"leaf+0x28 "},
		{"missing save of x19", mutate(framed(), drop(12, frame.OpOffset, x19)), a64sim.Options{},
			"framed+0x14 "},
		{"save of x19 off by 8", mutate(leaf(), change(16, frame.OpOffset, x19, off8)), a64sim.Options{},
			"leaf+0x10 "},
		{"RA at the x29 slot", mutate(framed(), change(4, frame.OpOffset, lr, off8)), a64sim.Options{},
			"caller's x30 is at CFA-32"},
		{"RA undefined", mutate(framed(), change(4, frame.OpOffset, lr, func(in *frame.Insn) { in.Op, in.Offset = frame.OpUndefined, 0 })), a64sim.Options{},
			"x30 is lost (undefined), but x30 holds it"},
		{"RA not saved across the call", mutate(leaf(), drop(8, frame.OpOffset, lr)), a64sim.Options{},
			"leaf+0x18 "},
		{"parameter in x19 too early", func() *elfimage.Proc {
			p := framed()
			p.Params[0].Live[0].End, p.Params[0].Live[1].Start = 16, 16
			return p
		}(), a64sim.Options{Vars: true}, "framed+0x10 "},
		{"parameter in x19 after the restore", func() *elfimage.Proc {
			p := framed()
			p.Params[0].Live[1].End = 52
			return p
		}(), a64sim.Options{Vars: true, Defs: framedDefs}, "framed+0x30 "},
		{"parameter not listed where it is", func() *elfimage.Proc {
			p := framed()
			p.Params[0].Live[1].End = 36
			return p
		}(), a64sim.Options{Vars: true, Complete: true, Defs: framedDefs}, "no live range lists it"},
		{"variable live before its definition", func() *elfimage.Proc {
			p := framed()
			p.Scopes[0].Vars[0].Live[0].Start = 24
			return p
		}(), a64sim.Options{Vars: true, Defs: framedDefs}, "framed+0x18 "},
	} {
		err := a64sim.Check(tc.p, tc.opts)
		if err == nil {
			t.Errorf("%s: passes", tc.name)
			continue
		}
		if !errors.Is(err, a64sim.ErrCheck) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an ErrCheck containing %q", tc.name, err, tc.want)
		}
	}
}

// TestEveryInsnMutant: dropping any one CFI instruction of either
// procedure, or moving its offset by 8, fails the check.
func TestEveryInsnMutant(t *testing.T) {
	for _, mk := range []func() *elfimage.Proc{framed, leaf} {
		good := mk().CFI
		for i := range good {
			for _, how := range []string{"dropped", "off by 8"} {
				p := mk()
				if how == "dropped" {
					p.CFI = append(p.CFI[:i:i], p.CFI[i+1:]...)
				} else if p.CFI[i].Offset != 0 {
					p.CFI[i].Offset -= 8
				} else {
					continue
				}
				if err := a64sim.Check(p, a64sim.Options{}); err == nil {
					t.Errorf("%s: CFI instruction %d (%v %v at %d) %s passes", p.Name, i, good[i].Op, good[i].Reg, good[i].PC, how)
				}
			}
		}
	}
}

// TestCode: code the simulation cannot follow, or that is wrong
// whatever its CFI, fails.
func TestCode(t *testing.T) {
	for _, tc := range []struct {
		name string
		code []byte
		kind error
		want string
	}{
		{"floating point", words(0x1e604020, 0xd65f03c0), a64sim.ErrUnsupported, "not simulated"}, // fmov d0, d1; ret
		{"indirect branch", words(0xd61f0000), a64sim.ErrUnsupported, "not simulated"},            // br x0
		{"sp from a register", words(0x9100001f, 0xd65f03c0), a64sim.ErrUnsupported, "sp"},        // mov sp, x0
		{"falls off the end", words(0xd2800000), a64sim.ErrCheck, "falls off the end"},            // mov x0, #0
		{"branch out", words(0x14000002), a64sim.ErrCheck, "outside the procedure"},               // b .+8
		{"unreached", words(0xd65f03c0, 0xd2800000), a64sim.ErrCheck, "never reached"},            // ret; mov x0, #0
		{"ret without the frame", words(0xa9bf7bfd, 0xd65f03c0), a64sim.ErrCheck, "CFA"},          // stp ...!; ret
		{"x19 clobbered", words(0xd2800013, 0xd65f03c0), a64sim.ErrCheck, "x19 holding"},          // mov x19, #0; ret
		{"ret through x0", words(0xd65f0000), a64sim.ErrCheck, "returns through x0"},              // ret x0
		{"signed RA", nil, a64sim.ErrUnsupported, "signed"},
	} {
		p := &elfimage.Proc{Name: "p", Code: tc.code}
		if tc.code == nil {
			p.Code = words(0xd65f03c0)
			p.CFI = []frame.Insn{{PC: 0, Op: frame.OpNegateRAState}}
		}
		err := a64sim.Check(p, a64sim.Options{})
		if err == nil || !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %v containing %q", tc.name, err, tc.kind, tc.want)
		}
	}
	// Trailing UDF #0 padding is not "never reached".
	if err := a64sim.Check(&elfimage.Proc{Name: "pad", Code: words(0xd65f03c0, 0)}, a64sim.Options{}); err != nil {
		t.Errorf("ret; udf #0: %v", err)
	}
}

// TestCheckTable links both procedures into an AArch64 image and checks
// the rows read back from its .eh_frame (what debuggers read), correct and
// with the CFA off by 8.
func TestCheckTable(t *testing.T) {
	for _, bad := range []bool{false, true} {
		procs := []*elfimage.Proc{framed(), leaf()}
		if bad {
			procs[1] = mutate(leaf(), change(4, frame.OpDefCFAOffset, 0, func(in *frame.Insn) { in.Offset -= 8 }))
		}
		for _, p := range procs {
			p.Lines = []elfimage.LineRow{{Offset: 0, Line: 1, Column: 1, IsStmt: true}}
		}
		b, err := elfimage.Link(&elfimage.Module{Arch: arch.AArch64, File: "t.s", Procs: procs}, elfimage.LinkOptions{})
		if err != nil {
			t.Fatal(err)
		}
		f, err := elf.NewFile(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		syms, _ := f.Symbols()
		eh := f.Section(".eh_frame")
		data, _ := eh.Data()
		fdes, err := frame.NewEHFrame(data, eh.Addr, binary.LittleEndian, 8).FDEs()
		if err != nil || len(fdes) != 2 {
			t.Fatal(len(fdes), err)
		}
		var errs []error
		for _, s := range syms {
			for i := range fdes {
				if s.Value == fdes[i].Start && elf.ST_TYPE(s.Info) == elf.STT_FUNC {
					rows, err := frame.Table(&fdes[i])
					if err != nil {
						t.Fatal(err)
					}
					errs = append(errs, a64sim.CheckTable(s.Name, b[s.Value:s.Value+s.Size], s.Value, rows, a64sim.Options{}))
				}
			}
		}
		if len(errs) != 2 {
			t.Fatalf("%d procedures found", len(errs))
		}
		if !bad && (errs[0] != nil || errs[1] != nil) {
			t.Errorf("correct image: %v", errors.Join(errs...))
		}
		if bad && (errs[0] != nil || errs[1] == nil || !strings.Contains(errs[1].Error(), "leaf+0x4 ")) {
			t.Errorf("image with leaf's CFA off by 8: %v, %v", errs[0], errs[1])
		}
	}
}

// abort is a procedure with a non-local exit: on x0 != 0 it switches to an
// outer frame with mov sp, x16 (sp = that frame's CFA-32; the frame keeps
// its caller's x29, x30 at CFA-16, CFA-8 and x28 at CFA-24) and returns
// from it:
//
//	 0: stp x29, x30, [sp, #-16]!
//	 4: mov x29, sp
//	 8: cbnz x0, 20
//	12: ldp x29, x30, [sp], #16
//	16: ret
//	20: mov sp, x16
//	24: ldr x28, [sp, #8]
//	28: add sp, sp, #0x10
//	32: ldp x29, x30, [sp], #16
//	36: ret
func abort() *elfimage.Proc {
	sp := arch.AArch64_SP
	return &elfimage.Proc{
		Name: "abort",
		Code: words(0xa9bf7bfd, 0x910003fd, 0xb5000060, 0xa8c17bfd, 0xd65f03c0,
			0x9100021f, 0xf94007fc, 0x910043ff, 0xa8c17bfd, 0xd65f03c0),
		CFI: []frame.Insn{
			{PC: 4, Op: frame.OpDefCFAOffset, Offset: 16},
			{PC: 4, Op: frame.OpOffset, Reg: fp, Offset: -16},
			{PC: 4, Op: frame.OpOffset, Reg: lr, Offset: -8},
			{PC: 8, Op: frame.OpDefCFARegister, Reg: fp},
			{PC: 16, Op: frame.OpRememberState},
			{PC: 16, Op: frame.OpDefCFA, Reg: sp, Offset: 0},
			{PC: 16, Op: frame.OpRestore, Reg: fp},
			{PC: 16, Op: frame.OpRestore, Reg: lr},
			{PC: 20, Op: frame.OpRestoreState},
			{PC: 24, Op: frame.OpDefCFA, Reg: sp, Offset: 32},
			{PC: 24, Op: frame.OpOffset, Reg: 28, Offset: -24},
			{PC: 28, Op: frame.OpSameValue, Reg: 28},
			{PC: 32, Op: frame.OpDefCFAOffset, Offset: 16},
			{PC: 36, Op: frame.OpDefCFAOffset, Offset: 0},
			{PC: 36, Op: frame.OpRestore, Reg: fp},
			{PC: 36, Op: frame.OpRestore, Reg: lr},
		},
	}
}

var abortSwitch = map[uint32]a64sim.Switch{20: {SP: -32, Saved: map[int]int64{28: -24, 29: -16, 30: -8}}}

// TestStackSwitch: the non-local exit passes with Options.StackSwitch,
// is unsupported without it, and a wrong rule after it fails.
func TestStackSwitch(t *testing.T) {
	if err := a64sim.Check(abort(), a64sim.Options{StackSwitch: abortSwitch}); err != nil {
		t.Error(err)
	}
	if err := a64sim.Check(abort(), a64sim.Options{}); !errors.Is(err, a64sim.ErrUnsupported) {
		t.Errorf("without StackSwitch: %v", err)
	}
	for _, tc := range []struct {
		name string
		p    *elfimage.Proc
		want string
	}{
		{"outer CFA off by 8", mutate(abort(), change(24, frame.OpDefCFA, arch.AArch64_SP, func(in *frame.Insn) { in.Offset -= 8 })), "abort+0x18 "},
		{"x28's save dropped", mutate(abort(), drop(24, frame.OpOffset, 28)), "abort+0x18 "},
		{"x28's restore dropped", mutate(abort(), drop(28, frame.OpSameValue, 28)), "abort+0x20 "},
		{"x29 not restored at ret", mutate(abort(), drop(36, frame.OpRestore, fp)), "abort+0x24 "},
	} {
		err := a64sim.Check(tc.p, a64sim.Options{StackSwitch: abortSwitch})
		if !errors.Is(err, a64sim.ErrCheck) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an ErrCheck containing %q", tc.name, err, tc.want)
		}
	}
}

// TestStackSwitchClobbered: registers the discarded frames changed
// (Switch.Clobbered) are lost after the switch: the CFI must mark them
// undefined (a same-value rule fails), and an undefined rule for a
// register that still holds the caller's value fails too.
func TestStackSwitchClobbered(t *testing.T) {
	sw := map[uint32]a64sim.Switch{20: {SP: -32, Saved: abortSwitch[20].Saved, Clobbered: []int{19, 21}}}
	undef := func(regs ...arch.Reg) *elfimage.Proc {
		p := abort()
		for _, r := range regs {
			p.CFI = append(p.CFI, frame.Insn{PC: 24, Op: frame.OpUndefined, Reg: r})
		}
		slices.SortStableFunc(p.CFI, func(a, b frame.Insn) int { return int(a.PC) - int(b.PC) })
		return p
	}
	if err := a64sim.Check(undef(19, 21), a64sim.Options{StackSwitch: sw}); err != nil {
		t.Error(err)
	}
	for _, tc := range []struct {
		name string
		p    *elfimage.Proc
		want string
	}{
		{"x21 claimed", undef(19), "abort+0x18 LDR X28, [SP,#8]: the CFI says x21 holds the caller's value, but it holds a value of the frames a stack switch discarded"},
		{"x20 lost though kept", undef(19, 20, 21), "abort+0x18 LDR X28, [SP,#8]: the CFI says the caller's x20 is lost (undefined), but x20 holds it"},
	} {
		err := a64sim.Check(tc.p, a64sim.Options{StackSwitch: sw})
		if !errors.Is(err, a64sim.ErrCheck) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an ErrCheck containing %q", tc.name, err, tc.want)
		}
	}
}

// TestTailCall: a B the linker relocates (Proc.Relocs) leaves the
// procedure, which must have restored the caller's frame.
func TestTailCall(t *testing.T) {
	reloc := []elfimage.Reloc{{Offset: 12, Symbol: "other"}}
	good := &elfimage.Proc{
		Name: "tail", Relocs: reloc,
		// stp x29, x30, [sp, #-16]!; mov x29, sp; ldp x29, x30, [sp], #16; b other
		Code: words(0xa9bf7bfd, 0x910003fd, 0xa8c17bfd, 0x14000000),
		CFI: []frame.Insn{
			{PC: 4, Op: frame.OpDefCFAOffset, Offset: 16},
			{PC: 4, Op: frame.OpOffset, Reg: fp, Offset: -16},
			{PC: 4, Op: frame.OpOffset, Reg: lr, Offset: -8},
			{PC: 8, Op: frame.OpDefCFARegister, Reg: fp},
			{PC: 12, Op: frame.OpDefCFA, Reg: arch.AArch64_SP, Offset: 0},
			{PC: 12, Op: frame.OpRestore, Reg: fp},
			{PC: 12, Op: frame.OpRestore, Reg: lr},
		},
	}
	if err := a64sim.Check(good, a64sim.Options{}); err != nil {
		t.Error(err)
	}
	bad := &elfimage.Proc{
		Name: "tail", Relocs: []elfimage.Reloc{{Offset: 8, Symbol: "other"}},
		// stp x29, x30, [sp, #-16]!; mov x29, sp; b other: the frame is still there
		Code: words(0xa9bf7bfd, 0x910003fd, 0x14000000),
		CFI:  good.CFI[:4],
	}
	if err := a64sim.Check(bad, a64sim.Options{}); !errors.Is(err, a64sim.ErrCheck) || !strings.Contains(err.Error(), "tail-calls with sp = CFA-16") {
		t.Errorf("tail call inside the frame: %v", err)
	}
}
