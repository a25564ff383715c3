package scheme

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/internal/a64sim"
)

// a64Options returns the a64sim options that check an AArch64 procedure
// of this compiler: its CFI, and its parameters' and variables' live
// ranges exactly (Vars, Complete) with the compiler's record of variable
// stores (defs, converted to a64sim.Pos). %capture's abort path, mov sp,
// x16, is a stack switch into %start's frame: sp = CFA-startFrameSize,
// where %start keeps its caller's x27 at CFA-24 and its frame record (x29,
// x30) at CFA-16 and CFA-8; the homes x19-x22, which the discarded frames
// saved and changed, are lost (their rules must say undefined).
func a64Options(p *elfimage.Proc, defs map[uint32]srcPos) a64sim.Options {
	opts := a64sim.Options{Vars: true, Complete: true, Defs: map[uint32]a64sim.Pos{}}
	for off, pos := range defs {
		opts.Defs[off] = a64sim.Pos{Line: pos.Line, Column: pos.Column}
	}
	if p.Name != symCapture {
		return opts
	}
	for off := 0; off+4 <= len(p.Code); off += 4 {
		if w := binary.LittleEndian.Uint32(p.Code[off:]); w&^(31<<5) == 0x9100001f { // mov sp, xN
			opts.StackSwitch = map[uint32]a64sim.Switch{uint32(off): {
				SP:        -startFrameSize,
				Saved:     map[int]int64{int(x27): -24, int(x29): -16, int(x30): -8},
				Clobbered: a64HomeRegs(),
			}}
		}
	}
	if opts.StackSwitch == nil {
		panic("%capture has no mov sp, xN")
	}
	return opts
}

// a64HomeRegs returns the numbers of the AArch64 home registers,
// x19 to x19+numHomes-1.
func a64HomeRegs() []int {
	var rs []int
	for h := range numHomes {
		rs = append(rs, int(x19)+h)
	}
	return rs
}

// TestAArch64CFIExact checks every AArch64 procedure of the test programs
// (the runtime's included) with a64sim, the AArch64 CFI and live-range
// simulator: the CFI is exact at every instruction and every live range
// of every parameter and variable holds its value, and none is missing.
// It is not vacuous: each procedure with its first CFA offset off by 8
// fails, and so does each with let variables when a live range starting
// just after a recorded store starts at the store (the value is not there
// yet) or when the record of stores is dropped.
func TestAArch64CFIExact(t *testing.T) {
	procs, vars, early := 0, 0, 0
	for _, name := range aarch64Programs {
		m, defs := compileFileDefsFor(t, arch.AArch64, name)
		for _, p := range m.Procs {
			procs++
			opts := a64Options(p, defs[p])
			if err := a64sim.Check(p, opts); err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			q := *p
			q.CFI = append([]frame.Insn(nil), p.CFI...)
			for i := range q.CFI {
				if q.CFI[i].Op == frame.OpDefCFAOffset {
					q.CFI[i].Offset -= 8
					if err := a64sim.Check(&q, opts); !errors.Is(err, a64sim.ErrCheck) {
						t.Errorf("%s: %s with the CFA off by 8 at %#x: %v", name, p.Name, q.CFI[i].PC, err)
					}
					break
				}
			}
			if !hasLetDef(p, defs[p]) {
				continue
			}
			vars++
			if err := a64sim.Check(p, a64Options(p, nil)); !errors.Is(err, a64sim.ErrCheck) {
				t.Errorf("%s: %s without its record of stores: %v", name, p.Name, err)
			}
			for off := range defs[p] {
				if v := earlyRange(p, off+4); v != nil {
					early++
					if err := a64sim.Check(v, opts); !errors.Is(err, a64sim.ErrCheck) {
						t.Errorf("%s: %s with a live range starting at the store at %#x: %v", name, p.Name, off, err)
					}
				}
			}
		}
	}
	if procs < 20 || vars < 5 || early < vars {
		t.Errorf("checked %d procedures, %d with let variables, %d early ranges; want at least 20, 5 and one per procedure with let variables", procs, vars, early)
	}
	t.Logf("%d procedures, %d with let variables, %d early-range mutants", procs, vars, early)
}

// hasLetDef reports whether defs records a store of a variable that is
// not one of p's parameters (whose values are also in their argument
// registers at entry, so that the record is not needed to find them).
func hasLetDef(p *elfimage.Proc, defs map[uint32]srcPos) bool {
	for _, pos := range defs {
		param := false
		for _, v := range p.Params {
			param = param || (v.Line == pos.Line && v.Column == pos.Column)
		}
		if !param {
			return true
		}
	}
	return false
}

// earlyRange returns a copy of p in which every live range of a scope
// variable that starts at start (just after the store that puts its
// value there) starts 4 bytes earlier, at the store, or nil when no range
// starts at start.
func earlyRange(p *elfimage.Proc, start uint32) *elfimage.Proc {
	found := false
	var walk func([]*elfimage.Scope) []*elfimage.Scope
	walk = func(ss []*elfimage.Scope) []*elfimage.Scope {
		out := make([]*elfimage.Scope, len(ss))
		for i, s := range ss {
			c := *s
			c.Vars = append([]elfimage.Var(nil), s.Vars...)
			for j := range c.Vars {
				c.Vars[j].Live = append([]elfimage.LiveRange(nil), c.Vars[j].Live...)
				for k := range c.Vars[j].Live {
					if c.Vars[j].Live[k].Start == start {
						c.Vars[j].Live[k].Start -= 4
						found = true
					}
				}
			}
			c.Scopes = walk(s.Scopes)
			out[i] = &c
		}
		return out
	}
	q := *p
	q.Scopes = walk(p.Scopes)
	if !found {
		return nil
	}
	return &q
}

// TestAbortLosesHomes: on %capture's abort path the CFI says the home
// registers are lost (undefined), on both backends, and each simulator
// fails that CFI without the undefined rules (a same-value rule would show
// a debugger the discarded frames' values as %start's caller's) and with
// x27's (r15's) save in %start's frame dropped.
func TestAbortLosesHomes(t *testing.T) {
	for _, a := range []*arch.Arch{arch.X86_64, arch.AArch64} {
		m, _ := compileFileDefsFor(t, a, "errors.scm")
		var capture *elfimage.Proc
		for _, p := range m.Procs {
			if p.Name == symCapture {
				capture = p
			}
		}
		if capture == nil {
			t.Fatalf("%s: no %s", a.Name, symCapture)
		}
		check := func(p *elfimage.Proc) error {
			if a == arch.AArch64 {
				return a64sim.Check(p, a64Options(p, nil))
			}
			return simulate(p)
		}
		if err := check(capture); err != nil {
			t.Fatalf("%s: %v", a.Name, err)
		}
		undef := 0
		for _, in := range capture.CFI {
			if in.Op == frame.OpUndefined {
				undef++
			}
		}
		if undef != numHomes {
			t.Errorf("%s: %d undefined rules in %s's CFI, want one per home (%d)", a.Name, undef, symCapture, numHomes)
		}
		ctl := arch.Reg(arch.X86_64_R15)
		if a == arch.AArch64 {
			ctl = arch.Reg(x27)
		}
		for what, keep := range map[string]func(frame.Insn) bool{
			"without the undefined rules": func(in frame.Insn) bool { return in.Op != frame.OpUndefined },
			"without the last save of the control block's register": func(in frame.Insn) bool {
				return !(in.Op == frame.OpOffset && in.Reg == ctl && in.PC > capture.CFI[0].PC+8)
			},
		} {
			q := *capture
			q.CFI = nil
			for _, in := range capture.CFI {
				if keep(in) {
					q.CFI = append(q.CFI, in)
				}
			}
			if len(q.CFI) == len(capture.CFI) {
				t.Fatalf("%s: %s: nothing dropped", a.Name, what)
			}
			if err := check(&q); err == nil {
				t.Errorf("%s: %s accepted %s", a.Name, symCapture, what)
			} else {
				t.Logf("%s %s: %v", a.Name, what, err)
			}
		}
	}
}
