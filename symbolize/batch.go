package symbolize

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// SymbolizeBatch answers many link-time addresses at once: for each
// addrs[i], in order, it appends to frames the frames that
// Symbolize(addrs[i], ...) appends and then calls done(i, end, err) with
// end = len(frames) and Symbolize's error for the address (nil, or
// ErrNoInfo, a *formaterr.Error and so on, as Symbolize returns them), so
// that the frames of addrs[i] are frames[end of i-1 : end] (from len(frames)
// on entry for the first); done may be nil. The frames of an address with
// an error are none. The answers are Symbolize's, byte for byte, in any
// order of addrs and with repeated addresses. The frames passed in stay
// where they are; frames past len(frames) may be overwritten.
//
// Addresses in ascending order are answered for less: each lookup starts
// from where the previous one ended (the compile unit, its line
// sequence, the symbol), and the checks Symbolize makes per call (the
// fault guard, the loaded debug sections and symbol table) are made once
// per batch. An address below the one before it is looked up from the
// start, as by Symbolize.
//
// It returns the extended frames and nil, or frames unchanged and
// ErrClosed after Close (then done is not called). A fault on the mapped
// file fails the address being answered with ErrFault, as Symbolize
// reports it; the addresses after it are answered one by one by
// Symbolize. It is safe for concurrent use with Symbolize, Prepare and
// other batches.
//
// Cost: for ascending addresses, per address a comparison or two with
// the previous unit's range and symbol, the bucket-index lookups of its
// subroutine and line row, the frames and a call of done; no allocation
// when frames has room. Units not indexed yet are indexed as by Symbolize
// (Prepare first indexes them in parallel).
func (s *Symbolizer) SymbolizeBatch(addrs []uint64, frames []Frame, done func(i, end int, err error)) ([]Frame, error) {
	if s.closed {
		return frames, ErrClosed
	}
	if done == nil {
		done = func(int, int, error) {}
	}
	i := 0
	if s.debug == nil {
		// A separate debug file's symbols answer what the file's own do
		// not: that case is left to symbolize, address by address.
		frames, i = s.batch(addrs, frames, done)
	}
	for ; i < len(addrs); i++ {
		more, err := s.Symbolize(addrs[i], frames)
		if more != nil || err == nil {
			frames = more // not on a fault, which returns nil
		}
		done(i, len(frames), err)
	}
	return frames, nil
}

// batchCursor is where SymbolizeBatch's previous lookup ended: indexes
// into the arrays of the unit and the symbol table it used, each -1 for
// none (then the next lookup searches from the start); and the debug
// sections and symbol table, loaded on first use as symbolize loads them.
type batchCursor struct {
	cu  int        // d.cus's range at or before the address
	ui  int        // the unit of cus[cu], when x is set
	x   *unitIndex // the index of units[ui]; nil: none yet
	seq int        // x.lines.seqs's sequence that held the address
	sym int        // the symbol table's symbol at or before the address

	dLoaded, symsLoaded bool
	d                   *dwarfData
	dErr                error
	syms                *symtab
	symErr              error
}

// batch answers addrs as SymbolizeBatch does, from the first on, until a
// fault on the mapped file: then it drops the frames of the address the
// fault interrupted, fails that address with the fault (as Symbolize's
// guard reports it), and returns the extended frames and the index of the
// next address; len(addrs) when it answered all.
func (s *Symbolizer) batch(addrs []uint64, frames []Frame, done func(i, end int, err error)) (out []Frame, next int) {
	// Committed after each address: what a fault leaves.
	out, next = frames, 0
	if s.mapped {
		defer func() {
			r := recover()
			if r == nil {
				return
			}
			if re, ok := r.(runtime.Error); ok && s.isFault(re) {
				done(next, len(out), fmt.Errorf("%w: %v", ErrFault, re))
				next++
				return
			}
			panic(r)
		}()
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	}
	c := batchCursor{cu: -1, seq: -1, sym: -1}
	for i, a := range addrs {
		var err error
		frames, err = s.answer(&c, a, frames)
		out, next = frames, i+1
		done(i, len(frames), err)
	}
	return out, next
}

// answer is symbolize for one address of a batch, the lookups starting
// from c (which it moves to the address).
func (s *Symbolizer) answer(c *batchCursor, addr uint64, frames []Frame) ([]Frame, error) {
	n0 := len(frames)
	la, ok := s.f.linkAddr(addr)
	if !ok {
		return frames, ErrNoInfo
	}
	if !c.dLoaded {
		c.d, c.dErr = s.dwarf()
		c.dLoaded = true
	}
	if c.dErr != nil {
		return frames, c.dErr
	}
	if d := c.d; d != nil {
		ui := d.unitFrom(&c.cu, la)
		if ui >= 0 {
			x := c.x
			if x == nil || c.ui != ui {
				u := &d.units[ui]
				if u.split != nil || scanAlways.Load() {
					c.x = nil
					return s.symbolize(addr, frames)
				}
				if x = u.idx.Load(); x == nil {
					// The unit's first address is scanned, its second
					// indexes it: as Symbolize does.
					c.x = nil
					return s.symbolize(addr, frames)
				}
				c.x, c.ui, c.seq = x, ui, -1
			}
			if x.err != nil {
				return frames, x.err
			}
			frames = x.framesFrom(&c.seq, la, frames)
		}
	}
	if !c.symsLoaded {
		c.syms, c.symErr = s.symbols()
		c.symsLoaded = true
	}
	if c.symErr != nil {
		return frames[:n0], c.symErr
	}
	var name, file string
	if syms := c.syms; syms.sorted.Load() {
		name, file, ok = syms.lookupFrom(&c.sym, la)
	} else {
		name, file, ok = syms.lookup(la)
	}
	if len(frames) == n0 {
		if !ok {
			return frames, ErrNoInfo
		}
		frames = append(frames, Frame{})
	}
	if ok {
		f := &frames[len(frames)-1]
		f.Function = name
		if f.File == "" && file != "" {
			f.File, f.FileFromSymbol = file, true
		}
	}
	return frames, nil
}

// unitFrom is unitFor, starting from the range *cu (d.cus's last range
// starting at or before an earlier address; -1 for none), which it moves
// to addr's: when addr is at or after that range's start and before the
// next range's, the answer is that range's unit or none, without a
// search.
func (d *dwarfData) unitFrom(cu *int, addr uint64) int {
	cus := d.cus
	k := *cu
	if k < 0 || k >= len(cus) || addr < cus[k].start {
		k = -1
	} else if k+1 < len(cus) && addr >= cus[k+1].start {
		k++
		if k+1 < len(cus) && addr >= cus[k+1].start {
			k = -1
		}
	}
	if k < 0 {
		if len(cus) == 0 || addr < cus[0].start {
			return -1
		}
		// The last range starting at or before addr (cus are sorted
		// and disjoint).
		lo, hi := 0, len(cus)
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if cus[m].start <= addr {
				lo = m + 1
			} else {
				hi = m
			}
		}
		k = lo - 1
	}
	*cu = k
	if addr >= cus[k].end {
		return -1
	}
	return cus[k].cu
}

// framesFrom is frames, with the line sequence looked up from *seq
// (lookupFrom).
func (x *unitIndex) framesFrom(seq *int, addr uint64, frames []Frame) []Frame {
	leaf := x.leaf(addr)
	if leaf < 0 {
		if f, l, c := lineAtFrom(x.lines, seq, addr); f != "" {
			frames = append(frames, Frame{File: f, Line: l, Column: c})
		}
		return frames
	}
	// appendSubrFrames over the chain of leaf, as frames walks it.
	var call *subr
	for i, n := leaf, 0; i >= 0 && n <= len(x.subrs); n++ { // n: no cycle through hostile parents
		s := &x.subrs[i]
		if call != nil {
			frames[len(frames)-1].Inlined = true
		}
		// The frame is written in place, field by field: one built on
		// the stack and copied out is read back in 16-byte loads from
		// narrower stores, which the CPU cannot forward (a stall per
		// frame when measured).
		frames = append(frames, Frame{})
		f := &frames[len(frames)-1]
		f.Function = x.names[s.name : s.name+s.nameLen]
		if call == nil {
			f.File, f.Line, f.Column = lineAtFrom(x.lines, seq, addr)
		} else {
			f.File = x.lines.file(uint64(call.callFile))
			f.Line, f.Column = call.callLine, call.callCol
		}
		if !s.inlined() {
			break
		}
		call, i = s, s.parent()
	}
	return frames
}

// lineAtFrom is lineAt with the sequence looked up from *seq.
func lineAtFrom(t *lineTable, seq *int, addr uint64) (file string, line, col uint32) {
	if t == nil {
		return "", 0, 0
	}
	r, ok := t.lookupFrom(seq, addr)
	if !ok {
		return "", 0, 0
	}
	if file = t.file(uint64(r.file)); file == "" {
		return "", 0, 0
	}
	return file, r.line, r.col
}

// lookupFrom is lookup, trying first the sequence *seq (the one an
// earlier lookup took; -1 for none) and the one after it, and setting
// *seq to the one it takes. The sequence lookup takes for addr is the
// first whose end is above addr (the sequences are sorted by end):
// seqs[k] is it when addr is below its end and at or above the end of
// seqs[k-1]; otherwise it is searched for as lookup does (seqOf).
func (t *lineTable) lookupFrom(seq *int, addr uint64) (lineRow, bool) {
	k, n := *seq, len(t.seqs)
	switch {
	case k < 0 || k >= n || (k > 0 && addr < t.seqs[k-1].end):
		k = t.seqOf(addr)
	case addr < t.seqs[k].end:
	case k+1 < n && addr < t.seqs[k+1].end:
		k++
	default:
		k = t.seqOf(addr)
	}
	if k == n {
		*seq = -1
		return lineRow{}, false
	}
	*seq = k
	s := &t.seqs[k]
	if s.start > addr {
		return lineRow{}, false
	}
	return t.rowIn(s, addr), true
}

// seqOf returns the index of the sequence lookup takes for addr: the
// first whose end is above addr (len(t.seqs) for none).
func (t *lineTable) seqOf(addr uint64) int {
	lo, hi := 0, len(t.seqs)
	if t.endIndex.b != nil {
		lo = lastOf(&t.endIndex, t.ends, addr) + 1
		hi = lo
	}
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.seqs[m].end <= addr {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// rowIn is lookup's row of addr in sequence s, which starts at or before
// addr.
func (t *lineTable) rowIn(s *lineSeq, addr uint64) lineRow {
	x := &noIndex
	if s.index >= 0 {
		x = &t.indexes[s.index]
	}
	if t.wide {
		i := x.last(t.addrs[s.first:s.last], addr)
		return t.rows[int(s.first)+max(i, 0)]
	}
	i := lastOf(x, t.off[s.first:s.last], addr-s.start)
	r := t.narrow[int(s.first)+max(i, 0)]
	return lineRow{uint32(r.file), r.line, uint32(r.col)}
}

// lookupFrom is lookup on a sorted symtab, starting from the symbol *k
// (addrs[*k] at or before an earlier address; -1 for none), which it
// moves to the last symbol at or before addr: the next two symbols are
// compared before the bucket index is read.
func (t *symtab) lookupFrom(k *int, addr uint64) (name, file string, ok bool) {
	addrs := t.addrs
	i := *k
	switch {
	case i < 0 || i >= len(addrs) || addr < addrs[i]:
		i = t.index.last(addrs, addr)
	case i+1 == len(addrs) || addr < addrs[i+1]:
	case i+2 == len(addrs) || addr < addrs[i+2]:
		i++
	default:
		i = t.index.last(addrs, addr)
	}
	*k = i
	if i < 0 {
		return "", "", false
	}
	s := t.sym(i)
	if !covers(addrs[i], s, addr) {
		return "", "", false
	}
	return t.names[s.name : s.name+s.nameLen], t.names[s.file : s.file+s.fileLen], true
}
