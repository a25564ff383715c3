package unwind

import (
	"fmt"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/frame"
)

// An Unwinder remembers the rows it computed: a profiler or a debugger
// unwinds the same return addresses over and over, and a remembered row
// spares the .eh_frame_hdr search, the FDE parse and the CFA program (about
// three quarters of a step). Rows are remembered only for Finders whose CFI
// cannot change while they are used ([*Source] and [*frame.Finder]: their
// sections' bytes must not change, as [frame.Exec] already requires), and
// only while the Unwinder's Finder and Arch stay the same values: any other
// Finder (a process-wide registry whose modules come and go, [Sources])
// is searched on every step.
//
// The cache holds rowCacheSize compact rows in two-way sets chosen by a
// hash of the lookup pc, the most recent row of a set first
// (rowCacheSize × 120 bytes, 30 KB, allocated on the first step with such
// a Finder): 64 pcs of a stack then all stay, where a direct-mapped cache
// evicted about one in five. A compact row holds what Step applies: the CFA as
// register + offset and up to maxCompactRules register rules of the kinds
// that need no expression; other rows (CFA or register expressions, more
// rules) are computed on every step, as before.
const (
	rowCacheSize    = 256 // a power of two
	maxCompactRules = 8
)

// compactRow is a row of the call frame table reduced to what Step needs.
type compactRow struct {
	pc     uint64 // the lookup pc it was computed for
	gen    uint32 // rowCache.gen when stored; 0: empty
	cfaReg arch.Reg
	n      uint8 // rules in use
	// spCFA: the SP has no rule of its own, so the caller's SP is the CFA;
	// raUndef: the RA column is undefined (outermost frame).
	spCFA, raUndef, raSigned, signal bool
	cfaOff                           int64
	reg                              [maxCompactRules]arch.Reg
	kind                             [maxCompactRules]frame.RuleKind
	off                              [maxCompactRules]int64 // the offset, or the source register of RuleRegister
}

// rowCache is an Unwinder's remembered rows, valid for one Finder and
// Arch (owner, a).
type rowCache struct {
	gen   uint32
	owner Finder
	a     *arch.Arch
	rows  [rowCacheSize]compactRow
}

// cacheable reports whether f's CFI is immutable (see above).
func cacheable(f Finder) bool {
	switch f.(type) {
	case *Source, *frame.Finder:
		return true
	}
	return false
}

// rowCache returns the Unwinder's cache for its current Finder and Arch,
// or nil when its Finder's rows are not remembered. A new Finder or Arch
// forgets every row.
func (u *Unwinder) rowCache() *rowCache {
	c := u.rows
	if c != nil && c.owner == u.Finder && c.a == u.Arch {
		return c
	}
	if !cacheable(u.Finder) {
		return nil
	}
	if c == nil {
		c = new(rowCache)
		u.rows = c
	}
	c.gen++
	if c.gen == 0 { // wrapped: clear the old generations' rows
		c.rows = [rowCacheSize]compactRow{}
		c.gen = 1
	}
	c.owner, c.a = u.Finder, u.Arch
	return c
}

// set returns the two-way set of lookup pc pc.
func (c *rowCache) set(pc uint64) *[2]compactRow {
	i := (pc * 0x9e3779b97f4a7c15) >> (64 - 7) & (rowCacheSize/2 - 1)
	return (*[2]compactRow)(c.rows[2*i : 2*i+2])
}

// lookup returns the remembered row of lookup pc pc, or nil.
func (c *rowCache) lookup(pc uint64) *compactRow {
	s := c.set(pc)
	if e := &s[0]; e.pc == pc && e.gen == c.gen {
		return e
	}
	if e := &s[1]; e.pc == pc && e.gen == c.gen {
		return e
	}
	return nil
}

// slot returns the slot to store the row of lookup pc pc in: the first of
// its set, whose row moves to the second (evicting the least recent).
func (c *rowCache) slot(pc uint64) *compactRow {
	s := c.set(pc)
	s[1] = s[0]
	return &s[0]
}

// compact stores into e the compact form of row for ABI a and reports
// whether the row has one (see rowCache).
func compact(e *compactRow, row *frame.Row, a *arch.Arch) bool {
	if row.CFA.Kind != frame.RuleCFA {
		return false
	}
	n := min(a.NumRegs, MaxRegs)
	e.cfaReg, e.cfaOff, e.n = row.CFA.Reg, row.CFA.Offset, 0
	e.spCFA, e.raUndef, e.raSigned = true, false, row.RASigned
	regs, rules := row.Rules()
	for j := range rules {
		reg, rule := regs[j], &rules[j]
		if reg == a.SP && rule.Kind != frame.RuleUnspecified && rule.Kind != frame.RuleSameValue {
			e.spCFA = false
		}
		if reg == a.RA && rule.Kind == frame.RuleUndefined {
			e.raUndef = true
		}
		if int(reg) >= n {
			continue
		}
		var off int64
		switch rule.Kind {
		case frame.RuleUnspecified, frame.RuleSameValue:
			continue
		case frame.RuleUndefined:
		case frame.RuleOffset, frame.RuleValOffset:
			off = rule.Offset
		case frame.RuleRegister:
			off = int64(rule.Reg)
		default: // expressions
			return false
		}
		if e.n == maxCompactRules {
			return false
		}
		e.reg[e.n], e.kind[e.n], e.off[e.n] = reg, rule.Kind, off
		e.n++
	}
	return true
}

// stepCompact is Step's work once the row is known, from its compact form:
// the same results and errors as the general path.
func (u *Unwinder) stepCompact(e *compactRow, cur, caller *Frame) error {
	a := u.Arch
	v, ok := cur.Regs.Get(e.cfaReg)
	if !ok {
		return fmt.Errorf("%w: CFA register %s at pc %#x", ErrUnknownRegister, a.RegName(e.cfaReg), cur.PC)
	}
	cfa := v + uint64(e.cfaOff)
	if a.PtrSize == 4 {
		cfa &= 0xffffffff
	}
	cur.CFA = cfa
	cur.Signal = e.signal
	n := min(a.NumRegs, MaxRegs)
	caller.Regs = cur.Regs
	caller.Regs.valid &= 1<<n - 1
	for j := range int(e.n) {
		reg := e.reg[j]
		switch e.kind[j] {
		case frame.RuleUndefined:
			caller.Regs.Clear(reg)
		case frame.RuleOffset:
			addr := cfa + uint64(e.off[j])
			v, err := u.read(addr)
			if err != nil {
				return fmt.Errorf("unwind: reading saved %s at %#x (pc %#x): %w", a.RegName(reg), addr, cur.PC, err)
			}
			caller.Regs.Set(reg, v)
		case frame.RuleValOffset:
			caller.Regs.Set(reg, cfa+uint64(e.off[j]))
		case frame.RuleRegister:
			if v, ok := cur.Regs.Get(arch.Reg(e.off[j])); ok {
				caller.Regs.Set(reg, v)
			} else {
				caller.Regs.Clear(reg)
			}
		}
	}
	return u.returnTo(a, cfa, cur, caller, e.spCFA, e.raUndef, e.raSigned)
}
