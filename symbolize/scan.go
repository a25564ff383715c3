package symbolize

import "sync/atomic"

// scanAlways makes every lookup scan (a test knob: the scan path then
// answers every address of the tests that compare with llvm-symbolizer).
var scanAlways atomic.Bool

// openSubr is a subroutine DIE on the chain that scanFrames keeps: the
// subroutines enclosing the DIE being read, and that DIE.
type openSubr struct {
	me   int32 // number in preorder among the unit's subroutines
	s    subr
	refs nameRefs
}

// scanFrames appends the DWARF frames of addr in unit u, as frames does
// with the unit's index, without building the index: one walk of the
// unit's DIEs that keeps only the chain of subroutines enclosing the DIE
// being read and, of the ranges that hold addr, the chain of the one
// flattenSubrs would pick (the one that starts last; of equal starts, the
// later in preorder). It fails where building the index fails, but for
// the budget of copied names (it copies only the names it returns).
//
// Symbolize scans for the first address asked in a unit outside Prepare:
// a lone address (a crash report, a debugger's question, the command
// given one address) then costs one walk and touches little fresh memory,
// where the index would sort, flatten and copy the whole unit. The second
// address in the unit builds the index.
func (d *dwarfData) scanFrames(u *unit, addr uint64, frames []Frame) ([]Frame, error) {
	t, err := d.abbrevTable(u)
	if err != nil {
		return frames, err
	}
	var lines *lineTable
	if u.root.hasStmt {
		if lines, err = d.lineTable(u); err != nil {
			return frames, err
		}
	}
	sc := getScratch()
	defer putScratch(sc)
	chain, best := sc.chain[:0], sc.best[:0]
	rs := sc.rs[:0]
	found, bestStart := false, uint64(0)
	budget, total := d.rangeBudget(u), uint64(0)
	sc.parents, err = d.walkSubrs(u, t, sc.parents, func(a *attrs, inlined bool, me, parent int32) error {
		// The chain is the enclosing subroutines: drop the ones whose
		// subtrees have ended.
		for len(chain) > 0 && chain[len(chain)-1].me != parent {
			chain = chain[:len(chain)-1]
		}
		chain = append(chain, openSubr{me: me, s: newSubr(a, inlined, parent), refs: a.nameRefs})
		var err error
		rs, err = d.appendRanges(rs[:0], u, a, func(lo, hi uint64) cuRange { return cuRange{lo, hi, int(me)} }, budget-total)
		total += uint64(len(rs))
		if err != nil {
			return err
		}
		for _, r := range rs {
			if r.start <= addr && addr < r.end && (!found || r.start >= bestStart) {
				found, bestStart = true, r.start
				best = append(best[:0], chain...)
			}
		}
		return nil
	})
	sc.chain, sc.best, sc.rs = chain[:0], best[:0], rs[:0]
	if err != nil {
		return frames, err
	}
	if !found {
		return appendLineFrame(frames, lines, addr), nil
	}
	if sc.names == nil {
		sc.names = map[uint64]nameResult{}
	}
	defer clear(sc.names)
	i := len(best) - 1
	return appendSubrFrames(frames, lines, addr, func() (*subr, string) {
		if i < 0 {
			return nil, ""
		}
		o := &best[i]
		i--
		link, name, _, _ := d.names(u, &o.refs, sc.names, 0)
		if len(link) == 0 {
			link = name
		}
		return &o.s, string(link)
	}), nil
}
