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
// where %start keeps its caller's x28 at CFA-24 and its frame record (x29,
// x30) at CFA-16 and CFA-8.
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
				SP:    -startFrameSize,
				Saved: map[int]int64{int(x28): -24, int(x29): -16, int(x30): -8},
			}}
		}
	}
	if opts.StackSwitch == nil {
		panic("%capture has no mov sp, xN")
	}
	return opts
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
