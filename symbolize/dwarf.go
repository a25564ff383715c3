package symbolize

import (
	"container/heap"
	"encoding/binary"
	"fmt"
	"math/bits"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/info"
	"github.com/elfimage/elfimage/dwarf/loc"
	"github.com/elfimage/elfimage/formaterr"
	"github.com/elfimage/elfimage/internal/radix"
)

// dwarfData is the DWARF of one file: sections, unit headers, the map
// from addresses to units, and per-unit indexes built on first use.
type dwarfData struct {
	sec    info.Sections
	ranges []byte // .debug_ranges
	line   []byte // .debug_line
	data   *info.Data
	units  []unit
	cus    []cuRange // sorted, disjoint
	// unitErrs are the errors of units left out of cus because their
	// ranges (or line program, without ranges) could not be read.
	unitErrs []error

	mu         sync.Mutex // guards abbrevs, abbrevWork
	abbrevs    map[uint64]*abbrevTable
	abbrevWork uint64

	lineMu sync.Mutex // guards lines
	lines  map[uint64]*lineResult

	// live tells ranges and line sequences of discarded code (ignored)
	// from the others.
	live live

	// le is sec.Order == binary.LittleEndian, decided once (comparing
	// the interfaces calls the runtime, per attribute read).
	le bool

	nameBytes  atomic.Int64 // the units' names copied so far (nameBudget)
	guessBytes atomic.Int64 // the bytes of the capacity guesses so far (guessBudget)
	// rowsSeen packs the narrow rows kept (high 32 bits) and the bytes
	// of line program they came from (low 32 bits) of the narrow line
	// tables decoded so far, while both fit: decodeLines' guesses after
	// the first tables (rowGuess).
	rowsSeen atomic.Uint64

	// strCopy, once set (copyStr), is a copy of .debug_str: a unit whose
	// names are all in .debug_str has it as its names (build), which then
	// need no copy of their own. strOnce guards making it.
	strCopy atomic.Pointer[string]
	strOnce sync.Once

	// slab, when set (Open's large files), holds the indexes' large
	// arrays; nil: the heap.
	slab *slab

	// indexed counts the units whose index is built: once it is
	// len(units), Prepare has nothing left to do.
	indexed atomic.Int64

	// dir is the directory of the file read, where .dwo files are
	// also looked for (split.go), and dwpPath its DWARF package file
	// (the file's path and ".dwp"); "" when unknown.
	dir, dwpPath string
	dwpOnce      sync.Once
	dwp          *dwpFile
	dwpErr       error
}

// lineResult is the line table at one .debug_line offset, decoded once.
type lineResult struct {
	once sync.Once
	t    *lineTable
	err  error
}

// unit is one compile or partial unit.
type unit struct {
	hdr     *info.UnitHeader
	root    attrs
	base    uint64 // DW_AT_low_pc of the root: base of range lists
	compDir string

	// split is set for a skeleton unit (DWARF 5 DW_UT_skeleton): its
	// DIEs are in a .dwo file (split.go).
	split *splitRef
	// rangesBase is added to DW_AT_ranges offsets: the skeleton's
	// DW_AT_GNU_ranges_base, for a GNU DWARF 4 split unit.
	rangesBase uint64

	mu      sync.Mutex
	idx     atomic.Pointer[unitIndex]
	scanned atomic.Bool // an address was looked up without the index (scanFrames)
}

// cuRange maps [start, end) to units[cu].
type cuRange struct {
	start, end uint64
	cu         int
}

// unitIndex is what a unit's lookups use, built once. Its arrays hold no
// pointers (the garbage collector skips them) and are kept small: on a
// large batch their first touches (page faults) are a good part of the
// cost of indexing.
type unitIndex struct {
	segs     []seg            // sorted, disjoint: [start, end) → innermost subroutine
	longSegs map[int32]uint64 // the ends of the segments of 2^32 bytes or more, by index in segs
	segIndex bucketIndex      // over the segments' starts
	subrs    []subr           // subprogram and inlined_subroutine DIEs in preorder
	names    string           // the subroutines' names; suffixes share bytes (build)
	lines    *lineTable
	err      error // the build failed: every lookup in the unit reports it
}

// seg maps [start, start+size) to subrs[die]. The start is kept beside
// the rest (not in an array of its own): with the bucket index a lookup
// compares with one or two starts, and then reads the segment from the
// same cache line instead of missing on a second array. A segment of 2^32
// bytes or more (hostile input, or code spread over the address space)
// has size 0 and its end in its unitIndex's longSegs: 16 bytes a segment
// instead of 24, without splitting a long range into many segments.
type seg struct {
	start uint64
	size  uint32
	die   int32
}

// segEnd returns the end of segs[i], whose long ends are in long.
func segEnd(segs []seg, long map[int32]uint64, i int) uint64 {
	if s := &segs[i]; s.size != 0 {
		return s.start + uint64(s.size)
	}
	return long[int32(i)]
}

// subr is a DW_TAG_subprogram or DW_TAG_inlined_subroutine: 24 bytes.
type subr struct {
	// up is the index of the nearest enclosing subroutine plus one (0
	// for none; indexes are below 2^31-1), with inlinedBit set for an
	// inlined subroutine.
	up       uint32
	callLine uint32
	callCol  uint32
	callFile uint32 // DW_AT_call_file, clamped to 2^32-1 (no such file)
	name     uint32 // the name is unitIndex.names[name : name+nameLen]
	nameLen  uint32
}

// inlinedBit marks an inlined subroutine in subr.up.
const inlinedBit = 1 << 31

// parent returns the index of the nearest subroutine enclosing s, -1 for
// none.
func (s *subr) parent() int32 { return int32(s.up&^inlinedBit) - 1 }

// inlined reports whether s is a DW_TAG_inlined_subroutine.
func (s *subr) inlined() bool { return s.up&inlinedBit != 0 }

// newSubr is the subr of a subroutine DIE with attributes a.
func newSubr(a *attrs, inlined bool, parent int32) subr {
	var s subr
	setSubr(&s, a, inlined, parent)
	return s
}

// setSubr sets the fields of s, a zero subr, for a subroutine DIE with
// attributes a (its name is set apart).
func setSubr(s *subr, a *attrs, inlined bool, parent int32) {
	up := uint32(parent + 1)
	if inlined {
		up |= inlinedBit
	}
	s.up = up
	s.callFile, s.callLine, s.callCol = uint32(min(a.callFile, 1<<32-1)), uint32(min(a.callLine, 1<<32-1)), uint32(min(a.callCol, 1<<32-1))
}

// name returns the name of subrs[i].
func (x *unitIndex) name(i int32) string {
	s := &x.subrs[i]
	return x.names[s.name : s.name+s.nameLen]
}

// nameRefs are the attributes of a subr that lead to its name (a part of
// its attrs), kept only while the unit's index is built.
type nameRefs struct {
	name, linkage strRef
	spec, origin  uint64
}

// scratch holds the working arrays of one index build that the index
// does not keep, reused from build to build through scratchPool: indexing
// many units then touches fresh memory (a page fault per page, which costs
// microseconds on a VM) only for what the indexes keep.
type scratch struct {
	parents []int32
	rs      []cuRange
	order   []int32
	stack   []int32
	keys    []uint64   // flattenSubrs' sort keys
	keys2   []uint64   // and radix.Sort's scratch for them
	starts  []uint64   // flattenSubrs' segment starts, for the index
	picks   []namePick // the names build copies
	needed  []bool     // build's subroutines on some address's chain
	// groupPicks' table, groups and group of each pick, and build's
	// arena offset of each group.
	slots, longest, group []int32
	offs                  []uint32
	chain                 []openSubr // scanFrames' chains
	best                  []openSubr
	// The cache of build's name resolution, cleared after use (a cleared
	// map keeps its table; the pool drops it at a garbage collection).
	names map[uint64]nameResult
}

// namePick is the name of one subroutine, in the sections, and the
// address of its last byte: names that end at one byte are suffixes of
// the longest of them, and share its copy.
type namePick struct {
	end  uintptr
	name []byte
	subr int32
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// nameBudget bounds the bytes of all units' names, as a multiple of the
// sections they come from (see build): each unit copies the names it
// needs, and a hostile file can make many units name one long string.
const nameBudget = 16

// guessBudget bounds the bytes that the indexes' capacity guesses
// (build, decodeLines) allocate in all, as a multiple of .debug_info and
// .debug_line: a guess comes from a unit's or line program's header, and
// a hostile file can make many units point at overlapping line programs
// that each claim the rest of .debug_line, a guess of up to 12 MiB each
// (in the slab, which only Close frees). Well-formed files take about
// 4 bytes per byte of .debug_line and 1 per byte of .debug_info.
const guessBudget = 8

// guessCap returns n, a capacity guess in elements of size bytes each,
// while the guesses so far leave room for it in guessBudget, else 0: the
// array then grows by append from the heap, in proportion to what it
// holds.
func (d *dwarfData) guessCap(n uint64, size uintptr) int {
	b := int64(n) * int64(size)
	if d.guessBytes.Add(b) > guessBudget*int64(len(d.sec.Info)+len(d.line)) {
		d.guessBytes.Add(-b)
		return 0
	}
	return int(n)
}

// maxScratch is the largest capacity, in elements, that a scratch array
// keeps when returned to the pool; a bigger one (a huge unit) is dropped.
const maxScratch = 1 << 20

func getScratch() *scratch { return scratchPool.Get().(*scratch) }

func putScratch(sc *scratch) {
	if max(cap(sc.parents), cap(sc.rs), cap(sc.order), cap(sc.stack), cap(sc.keys), cap(sc.keys2), cap(sc.starts), cap(sc.picks), cap(sc.slots), cap(sc.group), cap(sc.needed)) > maxScratch {
		return
	}
	scratchPool.Put(sc)
}

// atLeast returns s emptied, or a new slice when s has less than n
// capacity.
func atLeast[T any](s []T, n uint64) []T {
	if uint64(cap(s)) < n {
		return make([]T, 0, n)
	}
	return s[:0]
}

// loadDWARF reads the DWARF sections of f and the unit headers and root
// DIEs, and builds the unit map. It returns nil, nil when f has no
// .debug_info. Cost: decompression of the sections, linear in the number
// of units.
func loadDWARF(f *elfFile) (*dwarfData, error) {
	return loadLive(f.debugSection, f.order(), f.codeBounds())
}

// live tells the address ranges and line sequences of code that is in
// the file from those the linker left behind for code it discarded
// (-ffunction-sections -Wl,--gc-sections, COMDAT groups): it resolves
// references to a discarded section to a tombstone, 0 (GNU ld; so with
// DW_AT_high_pc a length, [0, size)), or -1 or -2 (lld, newer GNU ld;
// DWARF 6 proposes -1). A range or sequence that starts below low (the
// file's lowest code address) or at or above tomb is such a leftover and
// is ignored, as binutils addr2line ignores it: the address then gets
// the symbol table's answer, or "??" (llvm-symbolizer 14 answers the
// discarded function for addresses near 0).
type live struct {
	low, tomb uint64
}

// ok reports whether a range or sequence starting at start may be of
// live code.
func (l live) ok(start uint64) bool { return start >= l.low && start < l.tomb }

// allLive takes every range as live (files read without their ELF
// headers: tests).
var allLive = live{0, ^uint64(0)}

// loadSections is loadDWARF over a function that returns a debug section
// by name (nil when missing), of byte order order, every range live.
func loadSections(section func(name string) ([]byte, error), order binary.ByteOrder) (*dwarfData, error) {
	return loadLive(section, order, allLive)
}

// clearTombstones returns .debug_addr with its tombstones (-1 and -2 of
// the entries' size: what lld writes for discarded code when asked, and
// newer linkers by default) replaced by 0, in a copy (sec is left as it
// is). A range list entry DW_RLE_startx_length whose start is a
// tombstone would otherwise overflow the address space, an error that
// loses the whole unit's coverage; at 0 it is below l.low and ignored as
// any GNU ld tombstone. Without tombstones, or when l.low is 0 (0 could
// be code), sec is returned. The section is walked by its DWARF 5
// contribution headers (section 7.27: unit_length, version 5,
// address_size, segment_selector_size); one that does not start with such
// a header (GNU DWARF 4 split DWARF's headerless .debug_addr), or a
// malformed header, ends the walk. Cost: one pass.
func clearTombstones(sec []byte, order binary.ByteOrder, l live) []byte {
	if l.low == 0 || len(sec) < 8 {
		return sec
	}
	var out []byte
	for off := 0; len(sec)-off >= 8; {
		n, hdr := uint64(order.Uint32(sec[off:])), 8
		if n == 0xffffffff {
			if len(sec)-off < 16 {
				break
			}
			n, hdr = order.Uint64(sec[off+4:]), 16
			n += 12 // the length counts from after the 12-byte unit_length
		} else {
			n += 4
		}
		if n > uint64(len(sec)-off) || n < uint64(hdr) || order.Uint16(sec[off+hdr-4:]) != 5 {
			break
		}
		size := int(sec[off+hdr-2])
		end := off + int(n)
		if size == 4 || size == 8 {
			for at := off + hdr; at+size <= end; at += size {
				var v, top uint64
				if size == 4 {
					v, top = uint64(order.Uint32(sec[at:])), 1<<32-1
				} else {
					v, top = order.Uint64(sec[at:]), ^uint64(0)
				}
				if v == top || v == top-1 {
					if out == nil {
						out = append([]byte(nil), sec...)
					}
					clear(out[at : at+size])
				}
			}
		}
		off = end
	}
	if out == nil {
		return sec
	}
	return out
}

// loadLive is loadSections with the ranges and sequences l says are of
// discarded code ignored.
func loadLive(section func(name string) ([]byte, error), order binary.ByteOrder, l live) (*dwarfData, error) {
	d := &dwarfData{abbrevs: map[uint64]*abbrevTable{}, lines: map[uint64]*lineResult{}, live: l}
	var err error
	get := func(name string) []byte {
		if err != nil {
			return nil
		}
		var p []byte
		p, err = section(name)
		return p
	}
	d.sec.Info = get(".debug_info")
	if d.sec.Info == nil || err != nil {
		return nil, err
	}
	d.sec.Abbrev = get(".debug_abbrev")
	d.sec.Str = get(".debug_str")
	d.sec.LineStr = get(".debug_line_str")
	d.sec.StrOffsets = get(".debug_str_offsets")
	d.sec.Addr = clearTombstones(get(".debug_addr"), order, l)
	d.sec.RngLists = get(".debug_rnglists")
	d.ranges = get(".debug_ranges")
	d.line = get(".debug_line")
	d.sec.Order = order
	d.le = order == binary.LittleEndian
	if err != nil {
		return nil, err
	}
	if d.data, err = info.New(d.sec); err != nil {
		return nil, err
	}
	hdrs := d.data.Units()
	d.units = make([]unit, 0, len(hdrs))
	var rs []cuRange
	for i := range hdrs {
		h := &hdrs[i]
		if h.Type != dwarf.DW_UT_compile && h.Type != dwarf.DW_UT_partial && h.Type != dwarf.DW_UT_skeleton && h.Type != dwarf.DW_UT_split_compile {
			continue
		}
		if h.DataOffset >= h.End {
			continue
		}
		d.units = append(d.units, unit{hdr: h})
		u := &d.units[len(d.units)-1]
		b := dwarf.MakeBuf(secInfo, d.sec.Order, d.sec.Info)
		b.Seek(h.DataOffset, "unit")
		b.SetEnd(int(h.End))
		t, err := d.abbrevTable(u)
		if err != nil {
			return nil, err
		}
		code := b.Uleb("abbrev code")
		a := t.lookup(code)
		if b.Err() == nil && a == nil {
			b.FailAt(h.DataOffset, "abbrev code", fmt.Sprintf("code %d not in the table at .debug_abbrev+%#x", code, h.AbbrevOffset))
		}
		if b.Err() != nil {
			return nil, b.Err()
		}
		d.readAttrs(&b, u, a, &u.root)
		if b.Err() != nil {
			return nil, b.Err()
		}
		if u.root.hasLow {
			u.base = u.root.lowPC
		}
		if cd, ok := d.str(u, u.root.compDir); ok {
			u.compDir = string(cd)
		}
		if h.Type == dwarf.DW_UT_skeleton || h.Enc.Version < 5 && u.root.dwoName.form != 0 {
			u.split = &splitRef{}
		}
		ci := len(d.units) - 1
		n := len(rs)
		// A unit whose coverage cannot be read covers nothing: its
		// addresses fall back to the symbol table, the other units'
		// are unaffected (the error is kept in unitErrs).
		rs, err = d.appendRanges(rs, u, &u.root, func(lo, hi uint64) cuRange { return cuRange{lo, hi, ci} }, noBudget)
		if err != nil {
			rs = rs[:n]
			d.unitErrs = append(d.unitErrs, err)
			continue
		}
		if len(rs) == n && u.root.hasStmt {
			// No ranges: the line program's sequences give the coverage.
			t, err := d.lineTable(u)
			if err != nil {
				d.unitErrs = append(d.unitErrs, err)
				continue
			}
			for _, s := range t.seqs {
				rs = append(rs, cuRange{s.start, s.end, ci})
			}
		}
	}
	d.cus = flattenCUs(rs)
	return d, nil
}

const noBudget = ^uint64(0)

// appendRanges appends the address ranges of a DIE (low/high PC, or
// DW_AT_ranges) as made by mk. Empty ranges are dropped. It counts the
// ranges against *budget... (budget noBudget means unlimited).
func (d *dwarfData) appendRanges(dst []cuRange, u *unit, a *attrs, mk func(lo, hi uint64) cuRange, budget uint64) ([]cuRange, error) {
	if a.hasLow && a.hasHigh {
		hi := a.highPC
		if a.highIsLen {
			hi = a.lowPC + a.highPC
		}
		if a.lowPC < hi && d.live.ok(a.lowPC) {
			dst = append(dst, mk(a.lowPC, hi))
		}
		return dst, nil
	}
	if !a.hasRanges {
		return dst, nil
	}
	r := loc.NewRangeListReader(d.locSections(u), u.hdr.Enc, a.ranges+u.rangesBase, u.base)
	var e loc.Entry
	for r.Next(&e) {
		if e.Start < e.End && d.live.ok(e.Start) {
			dst = append(dst, mk(e.Start, e.End))
			if budget != noBudget && uint64(len(dst)) > budget {
				return dst, &formaterr.Error{Source: ".debug_rnglists", Offset: a.ranges, Field: "range list", Msg: "more ranges than the unit's size allows"}
			}
		}
	}
	return dst, r.Err()
}

func (d *dwarfData) locSections(u *unit) loc.Sections {
	return loc.Sections{Ranges: d.ranges, RngLists: d.sec.RngLists, Addr: d.sec.Addr, AddrBase: u.hdr.AddrBase}
}

// cuHeap is a min-heap of unit indexes, for flattenCUs.
type cuHeap []int

func (h cuHeap) Len() int           { return len(h) }
func (h cuHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h cuHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *cuHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *cuHeap) Pop() any          { x := (*h)[len(*h)-1]; *h = (*h)[:len(*h)-1]; return x }

// flattenCUs turns possibly overlapping unit ranges into disjoint ones;
// where ranges overlap the unit first in .debug_info wins (as in LLVM's
// DWARFDebugAranges). Cost: O(n log n).
func flattenCUs(rs []cuRange) []cuRange {
	type ev struct {
		at    uint64
		cu    int
		start bool
	}
	evs := make([]ev, 0, 2*len(rs))
	for _, r := range rs {
		evs = append(evs, ev{r.start, r.cu, true}, ev{r.end, r.cu, false})
	}
	slices.SortFunc(evs, func(a, b ev) int {
		if a.at != b.at {
			if a.at < b.at {
				return -1
			}
			return 1
		}
		return 0
	})
	var out []cuRange
	var h cuHeap
	active := map[int]int{}
	prev := uint64(0)
	for i := 0; i < len(evs); {
		at := evs[i].at
		// Emit [prev, at) for the smallest active unit.
		for h.Len() > 0 && active[h[0]] == 0 {
			heap.Pop(&h)
		}
		if h.Len() > 0 && prev < at {
			cu := h[0]
			if n := len(out); n > 0 && out[n-1].cu == cu && out[n-1].end == prev {
				out[n-1].end = at
			} else {
				out = append(out, cuRange{prev, at, cu})
			}
		}
		for ; i < len(evs) && evs[i].at == at; i++ {
			if evs[i].start {
				if active[evs[i].cu] == 0 {
					heap.Push(&h, evs[i].cu)
				}
				active[evs[i].cu]++
			} else {
				active[evs[i].cu]--
			}
		}
		prev = at
	}
	return out
}

// unitFor returns the index of the unit covering addr, or -1.
func (d *dwarfData) unitFor(addr uint64) int {
	// A branch-free bisection for the last range starting at or before
	// addr: random addresses would mispredict a branch per step.
	cus := d.cus
	if len(cus) == 0 || addr < cus[0].start {
		return -1
	}
	base, n := 0, len(cus)
	for n > 1 {
		half := n >> 1
		// borrow is 1 when addr < cus[base+half].start: step only when not.
		_, borrow := bits.Sub64(addr, cus[base+half].start, 0)
		base += half & int(borrow-1)
		n -= half
	}
	if addr >= cus[base].end {
		return -1
	}
	return cus[base].cu
}

// abbrevTable returns u's abbreviation table, parsing it the first time.
// Tables are shared by offset; the total parsed is bounded by a multiple
// of the section.
func (d *dwarfData) abbrevTable(u *unit) (*abbrevTable, error) {
	off := u.hdr.AbbrevOffset
	// Fixed form sizes depend on the encoding: key on it too.
	key := off<<8 | uint64(u.hdr.Enc.Version)<<4 | uint64(u.hdr.Enc.Format) | uint64(u.hdr.Enc.AddrSize)<<56
	d.mu.Lock()
	defer d.mu.Unlock()
	if t, ok := d.abbrevs[key]; ok {
		return t, nil
	}
	it, err := d.data.AbbrevTable(off)
	if err != nil {
		return nil, err
	}
	t, n := convertAbbrev(it, u.hdr.Enc, d.le)
	d.abbrevWork += n
	if budget := 8*uint64(len(d.sec.Abbrev)) + 4096; d.abbrevWork > budget {
		return nil, &formaterr.Error{Source: secAbbrev, Offset: off, Field: "debug_abbrev_offset",
			Msg: fmt.Sprintf("abbreviation tables overlap: %d bytes parsed for a %d-byte section", d.abbrevWork, len(d.sec.Abbrev))}
	}
	d.abbrevs[key] = t
	return t, nil
}

// unitOf returns the unit containing .debug_info offset off.
func (d *dwarfData) unitOf(off uint64) *unit {
	lo, hi := 0, len(d.units)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if d.units[m].hdr.Offset <= off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 || off >= d.units[lo-1].hdr.End || off < d.units[lo-1].hdr.DataOffset {
		return nil
	}
	return &d.units[lo-1]
}

// index returns the index of units[i], building it on first use.
func (d *dwarfData) index(i int) *unitIndex { return d.indexLines(i, false) }

// indexLines is index; linesQueued tells build that the unit's line
// program is decoded by a job of its own (Prepare's), so that build asks
// for the line table after its DIE walk, in place, instead of decoding it
// on a goroutine of its own.
func (d *dwarfData) indexLines(i int, linesQueued bool) *unitIndex {
	u := &d.units[i]
	if x := u.idx.Load(); x != nil {
		return x
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if x := u.idx.Load(); x != nil {
		return x
	}
	// A fault on the mapped file panics out of build: the unit's index
	// is then that fault from now on (as lineTable's), rather than built
	// again by every query, each taking more of the slab, which only
	// Close frees.
	built := false
	defer func() {
		if !built {
			u.idx.Store(&unitIndex{err: fmt.Errorf("%w: indexing the unit at .debug_info+%#x", ErrFault, u.hdr.Offset)})
			d.indexed.Add(1)
		}
	}()
	x := d.build(u, linesQueued)
	built = true
	u.idx.Store(x)
	d.indexed.Add(1)
	return x
}

// build walks the DIEs of u once, collecting subroutines and their
// ranges, resolves their names and reads the line table. linesQueued:
// see indexLines.
func (d *dwarfData) build(u *unit, linesQueued bool) *unitIndex {
	x := &unitIndex{}
	t, err := d.abbrevTable(u)
	if err != nil {
		x.err = err
		return x
	}
	// The line program and the DIEs are independent: a large unit's line
	// program is decoded on another goroutine while this one walks the
	// DIEs, or, when Prepare queued it as a job of its own, by that job,
	// and the table asked for after the walk (the table is the same
	// either way; an error of the line program still wins over one of
	// the DIEs, as when it came first).
	var waitLines func() (*lineTable, error)
	if u.root.hasStmt {
		if linesQueued {
			waitLines = func() (*lineTable, error) { return d.lineTable(u) }
		} else if u.hdr.End-u.hdr.Offset >= concurrentLines && runtime.GOMAXPROCS(0) > 1 {
			waitLines = d.lineTableAsync(u)
		} else if x.lines, err = d.lineTable(u); err != nil {
			x.err = err
			return x
		}
	}
	if waitLines != nil {
		defer func() {
			lines, err := waitLines()
			if err != nil {
				*x = unitIndex{err: err}
				return
			}
			x.lines = lines
		}()
	}
	sc := getScratch()
	// subrs are the subroutines, rs their ranges, with the cu field
	// holding the subr index.
	//
	// Capacity guesses from gcc and Go output: a subroutine DIE per 40
	// bytes of unit (gcc -O2 C: about one per 50; Go: fewer), so that the
	// arrays rarely grow (a growth copies into fresh pages). What the
	// index keeps is allocated at the guess; the untouched tail of a
	// large allocation fresh from the OS costs address space and GC
	// accounting, not pages (a reused one is cleared, so touched). The
	// rest comes from the scratch.
	// The guesses of all units are bounded by guessCap.
	guess := min((u.hdr.End-u.hdr.DataOffset)/40+1, 1<<16)
	// The subroutines, then the segments and their index, come one after
	// the other from a lane of the slab, each array's unused tail given
	// back once its length is known (slabTrim).
	sl := d.slab.lane()
	defer putLane(sl)
	subrs := slabMake[subr](sl, d.guessCap(guess, unsafe.Sizeof(subr{})))[:0]
	rs := atLeast(sc.rs, guess)
	// Names are resolved as the walk meets the subroutines. With a copy
	// of .debug_str (copyStr) and every name in .debug_str, the names are
	// the copy's (direct: each subr gets its name's offset there, and
	// nothing is copied). Otherwise they are copied out of the (mapped)
	// sections into one string per unit (below), so that a unit's names
	// cost one allocation and stay valid after Close: picks are the names
	// to copy, from the first name outside .debug_str on (a DW_FORM_string
	// in .debug_info, .debug_line_str) with those named directly before
	// it.
	if sc.names == nil {
		sc.names = map[uint64]nameResult{}
	}
	names := sc.names
	strs := d.strCopy.Load()
	direct := strs != nil
	strBase, strLen := uintptr(unsafe.Pointer(unsafe.SliceData(d.sec.Str))), uintptr(len(d.sec.Str))
	picks := sc.picks[:0]
	if !direct {
		picks = atLeast(sc.picks, guess)
	}
	defer func() {
		clear(names)
		sc.rs, sc.picks = rs, picks[:0]
		putScratch(sc)
	}()
	// The name of the last subroutine named only through references
	// (inlined copies, out-of-line instances: often many of one origin in
	// a row, between subprograms with names of their own): names gives
	// the same answer for the same references.
	var lastRefs nameRefs
	var lastLink []byte
	haveLast := false
	budget := d.rangeBudget(u)
	sc.parents, err = d.walkSubrs(u, t, sc.parents, func(a *attrs, inlined bool, me, parent int32) error {
		// The subroutine is written in place, field by field, and its
		// name references compared in place: a struct built on the
		// stack and then copied out is read back in 16-byte loads from
		// narrower stores, which the CPU cannot forward (a stall per
		// subroutine, most of this function's time when measured).
		subrs = append(subrs, subr{})
		setSubr(&subrs[len(subrs)-1], a, inlined, parent)
		var link []byte
		// Without a name or linkage name of its own (form 0, whose
		// value is unused), the name follows from the references alone.
		if byRef := a.name.form == 0 && a.linkage.form == 0; byRef && haveLast && a.spec == lastRefs.spec && a.origin == lastRefs.origin {
			link = lastLink
		} else {
			var name []byte
			link, name, _, _ = d.names(u, &a.nameRefs, names, 0)
			if len(link) == 0 {
				link = name
			}
			if byRef {
				lastRefs, lastLink, haveLast = a.nameRefs, link, true
			}
		}
		if len(link) != 0 {
			if direct {
				if off := uintptr(unsafe.Pointer(unsafe.SliceData(link))) - strBase; off < strLen && uintptr(len(link)) <= strLen-off {
					s := &subrs[me]
					s.name, s.nameLen = uint32(off), uint32(len(link))
					goto ranges
				}
				direct = false
				picks = strPicks(picks, subrs[:me], d.sec.Str)
			}
			picks = append(picks, namePick{end: uintptr(unsafe.Pointer(&link[len(link)-1])), name: link, subr: me})
		}
	ranges:
		if a.hasLow && a.hasHigh {
			// appendRanges' first case, inlined (nearly every
			// subroutine of compilers' output).
			hi := a.highPC
			if a.highIsLen {
				hi = a.lowPC + a.highPC
			}
			if a.lowPC < hi && d.live.ok(a.lowPC) {
				rs = append(rs, cuRange{a.lowPC, hi, int(me)})
			}
			return nil
		}
		var err error
		rs, err = d.appendRanges(rs, u, a, func(lo, hi uint64) cuRange { return cuRange{lo, hi, int(me)} }, budget)
		return err
	})
	if err != nil {
		x.err = err
		return x
	}
	x.subrs = slabTrim(sl, subrs, len(subrs))
	var starts []uint64
	starts, x.segs, x.longSegs = flattenSubrs(rs, sc, sl)
	x.segIndex = newBucketIndexIn(sl, starts)
	if direct {
		x.names = *strs
		return x
	}
	// Only the names of the subroutines on some chain (marked in
	// isNeeded, from the scratch) are kept.
	isNeeded := sc.needed[:0]
	if cap(isNeeded) < len(x.subrs) {
		isNeeded = make([]bool, len(x.subrs))
	} else {
		isNeeded = isNeeded[:len(x.subrs)]
		clear(isNeeded)
	}
	sc.needed = isNeeded
	for _, s := range x.segs {
		for i := s.die; i >= 0 && !isNeeded[i]; i = x.subrs[i].parent() {
			isNeeded[i] = true
		}
	}
	k := 0
	for _, p := range picks {
		if isNeeded[p.subr] {
			picks[k] = p
			k++
		}
	}
	picks = picks[:k]
	// A unit's names are copied into one string. Names are keyed by their
	// last byte: a name cannot hold a NUL, so names with the same last
	// byte are suffixes of the longest of them, which is copied once and
	// serves them all (names shared through DW_AT_abstract_origin,
	// repeated offsets, and the suffixes linkers merge into longer
	// strings). A unit's names are therefore no larger than the sections;
	// across units they are bounded by nameBudget (hostile files with many
	// units naming one long string).
	// Names grouped by last byte: each group is the longest name and its
	// suffixes, copied once.
	longest, group := groupPicks(picks, sc)
	total := 0
	for _, l := range longest {
		total += len(picks[l].name)
	}
	if total > 1<<32-1 || d.nameBytes.Add(int64(total)) > nameBudget*int64(len(d.sec.Str)+len(d.sec.LineStr)+len(d.sec.Info))+1<<20 {
		x.err = &formaterr.Error{Source: secInfo, Offset: u.hdr.Offset, Field: "DW_AT_name",
			Msg: fmt.Sprintf("the units' names exceed %d times the sections they come from", nameBudget)}
		return x
	}
	var arena strings.Builder
	arena.Grow(total)
	// offs[g] is where group g's longest name starts in the arena.
	offs := atLeast(sc.offs, uint64(len(longest)))
	for _, l := range longest {
		offs = append(offs, uint32(arena.Len()))
		arena.Write(picks[l].name)
	}
	sc.offs = offs
	for k, p := range picks {
		g := group[k]
		s := &x.subrs[p.subr]
		s.name = offs[g] + uint32(len(picks[longest[g]].name)-len(p.name))
		s.nameLen = uint32(len(p.name))
	}
	x.names = arena.String()
	return x
}

// strPicks appends to picks the names of subrs, which are offsets into
// str (build's direct names), and clears them in subrs: they are to be
// copied with the unit's other names.
func strPicks(picks []namePick, subrs []subr, str []byte) []namePick {
	for i := range subrs {
		s := &subrs[i]
		if s.nameLen == 0 {
			continue
		}
		name := str[s.name : s.name+s.nameLen]
		picks = append(picks, namePick{end: uintptr(unsafe.Pointer(&name[len(name)-1])), name: name, subr: int32(i)})
		s.name, s.nameLen = 0, 0
	}
	return picks
}

// copyStr sets d.strCopy to a copy of .debug_str, once, unless the
// section is empty or of 4 GiB or more (a name's offset is 32 bits). The
// copy counts in the names' budget (nameBudget). Prepare calls it for a
// batch that indexes at least as many bytes of units as the section has,
// where copying the whole section costs less than copying each unit's
// names (and the copy is smaller than the units' copies together: gcc
// output shares a name between the out-of-line and inlined instances of
// a function, in different units). Cost: one copy of the section.
func (d *dwarfData) copyStr() {
	d.strOnce.Do(func() {
		if n := len(d.sec.Str); n == 0 || n > 1<<32-1 {
			return
		}
		d.nameBytes.Add(int64(len(d.sec.Str)))
		s := string(d.sec.Str)
		d.strCopy.Store(&s)
	})
}

// groupPicks groups picks by last byte: it returns, for each distinct
// last byte in order of first appearance, the index of its longest pick
// (of equal lengths the first), and sets group[i] to the group of
// picks[i]. Names that end at one byte are suffixes of that run's longest
// (see build). An open-addressing table on the last byte's address
// (sized to twice the picks, from sc) replaces a sort. Cost: O(n)
// expected, no allocation once the scratch has grown.
func groupPicks(picks []namePick, sc *scratch) (longest, group []int32) {
	size := 1 << bits.Len(uint(2*len(picks)))
	slots := sc.slots
	if cap(slots) < size {
		slots = make([]int32, size)
	} else {
		slots = slots[:size]
		clear(slots)
	}
	longest, group = sc.longest[:0], atLeast(sc.group, uint64(len(picks)))
	mask := uintptr(size - 1)
	for i, p := range picks {
		// Fibonacci hashing of the address; slots hold group+1.
		h := uintptr(uint64(p.end)*0x9e3779b97f4a7c15>>32) & mask
		for {
			g := slots[h] - 1
			if g < 0 {
				slots[h] = int32(len(longest)) + 1
				group = append(group, int32(len(longest)))
				longest = append(longest, int32(i))
				break
			}
			if l := longest[g]; picks[l].end == p.end {
				if len(p.name) > len(picks[l].name) {
					longest[g] = int32(i)
				}
				group = append(group, g)
				break
			}
			h = (h + 1) & mask
		}
	}
	sc.slots, sc.longest, sc.group = slots, longest, group
	return longest, group
}

// rangeBudget is the most address ranges the subroutines of u may have
// (appendRanges' budget): more than one per byte of the unit and of the
// range list sections can only come from range lists shared by many DIEs.
func (d *dwarfData) rangeBudget(u *unit) uint64 {
	return uint64(len(d.sec.RngLists)+len(d.ranges)) + (u.hdr.End - u.hdr.DataOffset)
}

// walkSubrs reads the DIEs of u in preorder, skipping the attributes of
// all but the subroutines (DW_TAG_subprogram and
// DW_TAG_inlined_subroutine, the unit's root excepted), and calls visit
// for each subroutine with its attributes, its number in preorder among
// the unit's subroutines and the number of the nearest subroutine
// enclosing it (-1 for none). parents is a working
// array, returned for reuse. The walk stops at visit's first error, or
// the first malformed DIE (a *formaterr.Error).
func (d *dwarfData) walkSubrs(u *unit, t *abbrevTable, parents []int32, visit func(a *attrs, inlined bool, me, parent int32) error) ([]int32, error) {
	b := dwarf.MakeBuf(secInfo, d.sec.Order, d.sec.Info)
	b.Seek(u.hdr.DataOffset, "unit")
	b.SetEnd(int(u.hdr.End))
	if b.Err() != nil {
		return parents[:0], b.Err()
	}
	// parents[k] is the nearest subroutine enclosing the DIEs at depth
	// k+1.
	parents = parents[:0]
	first := true
	n := int32(0)
	var a attrs
	le := d.le
	// The walk keeps its offset in pos (b's cursor is set from it for
	// what b reads: a long code, a subroutine's attributes, an
	// unplanned DIE, and every failure, which b reports as it did).
	data, pos, end := b.Data(), int(b.Off()), int(b.End())
	for pos < end {
		off := pos
		var code uint64
		if c := data[pos]; c < 0x80 {
			code, pos = uint64(c), pos+1 // a one-byte code: nearly all
		} else {
			b.Seek(uint64(pos), "abbrev code")
			if code = b.Uleb("abbrev code"); b.Err() != nil {
				break
			}
			pos = int(b.Off())
		}
		if code == 0 {
			if len(parents) > 0 {
				parents = parents[:len(parents)-1]
			}
			continue
		}
		ab := t.lookup(code)
		if ab == nil {
			b.FailAt(uint64(off), "abbrev code", fmt.Sprintf("code %d not in the table at .debug_abbrev+%#x", code, u.hdr.AbbrevOffset))
			break
		}
		parent := int32(-1)
		if len(parents) > 0 {
			parent = parents[len(parents)-1]
		}
		me := parent
		if !first && (ab.tag == dwarf.DW_TAG_subprogram || ab.tag == dwarf.DW_TAG_inlined_subroutine) {
			if p, ok := d.readPlanned(data, pos, end, u, ab, &a); ok {
				pos = p
			} else {
				b.Seek(uint64(pos), "attribute value")
				d.readAttrs(&b, u, ab, &a)
				if b.Err() != nil {
					break
				}
				pos = int(b.Off())
			}
			me, n = n, n+1
			if err := visit(&a, ab.tag == dwarf.DW_TAG_inlined_subroutine, me, parent); err != nil {
				return parents, err
			}
		} else if ab.fixed >= 0 && ab.fixed <= end-pos {
			pos += ab.fixed
		} else if p, ok := skipInPlace(data, pos, end, ab.skip, le, nil); ok && !slowAttrs {
			// (ok only for a planned abbreviation: ab.skip is nil
			// otherwise.)
			pos = p
		} else {
			b.Seek(uint64(pos), "attribute value")
			if ab.fixed >= 0 {
				b.Skip(uint64(ab.fixed), "attribute value") // fails: past the end
			}
			for i := range ab.specs {
				if ab.fixed >= 0 {
					break
				}
				if s := &ab.specs[i]; s.size >= 0 {
					b.Skip(uint64(s.size), "attribute value")
				} else {
					skipForm(&b, s, u.hdr.Enc)
				}
			}
			if b.Err() != nil {
				break
			}
			pos = int(b.Off())
		}
		first = false
		if ab.children {
			if len(parents) >= info.MaxDepth {
				b.FailAt(uint64(off), "DIE nesting", fmt.Sprintf("deeper than %d levels", info.MaxDepth))
				break
			}
			parents = append(parents, me)
		}
	}
	return parents, b.Err()
}

// names resolves the linkage name and the name of a DIE with attributes a
// in unit u, following DW_AT_specification, then DW_AT_abstract_origin,
// depth first as LLVM's DWARFDie::findRecursively does, at most
// maxNameHops references deep from the DIE asked at depth 0 (LLVM has no
// such limit; compilers use two or three). The names point into the
// sections.
//
// cache holds the results for referenced DIEs by offset, with the depth of
// references each needed, and only the results the limit did not cut: so
// an answer never depends on which DIEs were resolved before it (a scan
// and the unit's index agree). hops is how many references deep the
// answer reached, cut whether the limit stopped it. Cost: a DIE read per
// reference not cached; references that loop (hostile input) are followed
// to the limit each time, at most 2^(maxNameHops+1) reads for one name.
func (d *dwarfData) names(u *unit, a *nameRefs, cache map[uint64]nameResult, depth int) (link, name []byte, hops int, cut bool) {
	link, _ = d.str(u, a.linkage)
	name, _ = d.str(u, a.name)
	for _, ref := range [2]uint64{a.spec, a.origin} {
		if (len(link) != 0 && len(name) != 0) || ref == noRef {
			continue
		}
		if depth >= maxNameHops {
			return link, name, hops, true
		}
		// A cached result is used where it would not be cut here.
		r, ok := cache[ref]
		if !ok || depth+1+r.hops > maxNameHops {
			var rcut bool
			r.link, r.name, r.hops, rcut = d.namesAt(ref, cache, depth+1)
			if rcut {
				cut = true
			} else {
				cache[ref] = r
			}
		}
		hops = max(hops, 1+r.hops)
		if len(link) == 0 {
			link = r.link
		}
		if len(name) == 0 {
			name = r.name
		}
	}
	return link, name, hops, cut
}

// nameResult is what names found for a referenced DIE.
type nameResult struct {
	link, name []byte
	hops       int
}

// namesAt is names for the DIE at .debug_info offset off, in any unit.
// A bad reference gives no names.
func (d *dwarfData) namesAt(off uint64, cache map[uint64]nameResult, depth int) (link, name []byte, hops int, cut bool) {
	u := d.unitOf(off)
	if u == nil {
		return nil, nil, 0, false
	}
	t, err := d.abbrevTable(u)
	if err != nil {
		return nil, nil, 0, false
	}
	b := dwarf.MakeBuf(secInfo, d.sec.Order, d.sec.Info)
	b.Seek(off, "reference")
	b.SetEnd(int(u.hdr.End))
	ab := t.lookup(b.Uleb("abbrev code"))
	if b.Err() != nil || ab == nil {
		return nil, nil, 0, false
	}
	var a attrs
	d.readAttrs(&b, u, ab, &a)
	if b.Err() != nil {
		return nil, nil, 0, false
	}
	return d.names(u, &a.nameRefs, cache, depth)
}

// flattenSubrs turns the subroutine ranges, in DIE preorder, into
// disjoint segments naming the innermost subroutine, as LLVM's
// DWARFUnit::updateAddressDieMap does for properly nested ranges: a later
// (deeper) DIE's range overrides the part of earlier ranges it covers.
//
// It also returns the segments' starts, for building their index: that
// array is sc.starts, reused by the next build; and the ends of the
// segments of 2^32 bytes or more (see seg), nil when there are none. The
// working arrays come from sc, the segments from sl (slabMake).
func flattenSubrs(rs []cuRange, sc *scratch, sl *slab) ([]uint64, []seg, map[int32]uint64) {
	if len(rs) == 0 {
		return nil, nil, nil
	}
	order := sc.order[:0]
	for i := range rs {
		order = append(order, int32(i))
	}
	sc.order = order
	// Order by start, then preorder (so the enclosing DIE first). Compilers
	// write subroutines mostly in address order, or (gcc for C: a unit's
	// functions last defined first) in the reverse order: check first;
	// then sort packed integer keys (start offset, index) when they fit
	// in 64 bits (pdqsort is fast on nearly sorted integers), else pairs.
	sorted, reversed := true, true
	lo, hi := rs[0].start, rs[0].start
	for i := 1; i < len(rs); i++ {
		sorted = sorted && rs[i-1].start <= rs[i].start
		reversed = reversed && rs[i-1].start >= rs[i].start
		lo, hi = min(lo, rs[i].start), max(hi, rs[i].start)
	}
	idxBits := bits.Len(uint(len(rs)))
	switch {
	case sorted && presorted:
	case reversed && presorted:
		// Starts that do not increase: the reverse order, but for the
		// runs of equal starts, which stay in preorder.
		for i := 0; i < len(rs); {
			j := i + 1
			for j < len(rs) && rs[j].start == rs[i].start {
				j++
			}
			// rs[i:j] share a start: they go, in preorder, to the
			// positions that mirror theirs.
			for k := i; k < j; k++ {
				order[len(rs)-j+(k-i)] = int32(k)
			}
			i = j
		}
	case bits.Len64(hi-lo)+idxBits <= packedSortBits:
		keys := sc.keys[:0]
		for i, r := range rs {
			keys = append(keys, (r.start-lo)<<idxBits|uint64(i))
		}
		keys, sc.keys2 = radix.Sort(keys, sc.keys2, bits.Len64(hi-lo)+idxBits)
		for i, k := range keys {
			order[i] = int32(k & (1<<idxBits - 1))
		}
		sc.keys = keys
	default:
		slices.SortStableFunc(order, func(a, b int32) int {
			ra, rb := rs[a], rs[b]
			if ra.start != rb.start {
				if ra.start < rb.start {
					return -1
				}
				return 1
			}
			return 0 // equal starts: preorder, so the enclosing DIE first
		})
	}
	w := segWriter{out: slabMake[seg](sl, len(rs)+len(rs)/2)[:0], starts: atLeast(sc.starts, uint64(len(rs)+len(rs)/2))}
	stack := sc.stack[:0] // indexes into rs
	cur := uint64(0)
	for _, ri := range order {
		r := &rs[ri]
		for len(stack) > 0 {
			top := &rs[stack[len(stack)-1]]
			if top.end > r.start {
				break
			}
			w.emit(max(cur, top.start), top.end, int32(top.cu))
			cur = max(cur, top.end)
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 {
			top := &rs[stack[len(stack)-1]]
			w.emit(max(cur, top.start), r.start, int32(top.cu))
		}
		cur = max(cur, r.start)
		stack = append(stack, ri)
	}
	for len(stack) > 0 {
		top := &rs[stack[len(stack)-1]]
		w.emit(max(cur, top.start), top.end, int32(top.cu))
		cur = max(cur, top.end)
		stack = stack[:len(stack)-1]
	}
	sc.stack, sc.starts = stack, w.starts
	return w.starts, slabTrim(sl, w.out, len(w.out)), w.long
}

// segWriter collects flattenSubrs' segments and their starts.
type segWriter struct {
	out     []seg
	starts  []uint64
	long    map[int32]uint64 // the ends of segments of 2^32 bytes or more
	lastEnd uint64           // the end of out[len(out)-1]
}

// emit appends the segment [lo, hi) of subroutine die, extending the
// last segment instead when it is die's and ends at lo; an empty range
// adds nothing.
func (w *segWriter) emit(lo, hi uint64, die int32) {
	if lo >= hi {
		return
	}
	if n := len(w.out); n > 0 && w.out[n-1].die == die && w.lastEnd == lo {
		// Extend the last segment to hi.
		lo = w.out[n-1].start
		w.out, w.starts = w.out[:n-1], w.starts[:n-1]
		delete(w.long, int32(n-1))
	}
	size := hi - lo
	if size > 1<<32-1 {
		if w.long == nil {
			w.long = map[int32]uint64{}
		}
		w.long[int32(len(w.out))] = hi
		size = 0
	}
	w.out = append(w.out, seg{lo, uint32(size), die})
	w.starts = append(w.starts, lo)
	w.lastEnd = hi
}

// presorted lets flattenSubrs take ranges that are in (or in the
// reverse of) start order without sorting them (a variable so that tests
// compare with the sorts).
var presorted = true

// leaf returns the innermost subroutine covering addr, or -1.
// Cost: the bucket index's load and a comparison with one or two
// segments (the same cache lines as the answer), no allocation.
func (x *unitIndex) leaf(addr uint64) int32 {
	segs := x.segs
	lo, hi, ok := x.segIndex.window(len(segs), addr)
	if !ok {
		return -1
	}
	// upper_bound over segs[lo:hi] by start, minus one.
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if segs[m].start <= addr {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if i := lo - 1; i >= 0 && addr < segEnd(segs, x.longSegs, i) {
		return segs[i].die
	}
	return -1
}
