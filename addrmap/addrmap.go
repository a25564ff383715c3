package addrmap

import (
	"errors"
	"fmt"
	"iter"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
)

// ErrNotFound is returned by [Map.Lookup], [Map.LookupRange] and
// [Map.Acquire] when no registered range contains the address. It is
// returned itself, not wrapped, so that a miss allocates nothing.
var ErrNotFound = errors.New("addrmap: address not in any registered range")

// ErrOverlap is wrapped by the error [Map.Insert] returns when the new range
// intersects a registered one.
var ErrOverlap = errors.New("addrmap: range overlaps a registered range")

// ErrEmptyRange is wrapped by the error [Map.Insert] returns when start >= end.
var ErrEmptyRange = errors.New("addrmap: empty range")

// Range is a half-open address range [Start, End).
type Range struct {
	Start, End uintptr
}

// Contains reports whether Start <= pc < End.
func (r Range) Contains(pc uintptr) bool { return r.Start <= pc && pc < r.End }

// State word of a Ref: the number of Refs held in the low 63 bits,
// removedBit at the top.
const (
	removedBit = uint64(1) << 63
	countMask  = removedBit - 1
)

// Ref is a registered entry as held by a reader through [Map.Acquire]: its
// range and value stay valid (the owner's free function does not run) until
// [Ref.Release]. A *Ref is owned by the map; readers only call its methods.
// One Ref object serves every reader of the same entry, so Acquire allocates
// nothing.
type Ref[T any] struct {
	rng   Range
	v     T
	state atomic.Uint64 // removed | held count
	free  func(T)       // set by the remover before it sets removed
}

// Value returns the value registered for the range. It is valid until
// Release; it costs nothing.
func (r *Ref[T]) Value() T { return r.v }

// Range returns the registered half-open range [Start, End).
func (r *Ref[T]) Range() Range { return r.rng }

// Release gives back a Ref obtained from [Map.Acquire]. Call it exactly once
// per successful Acquire, when done with the value; the Ref and value must
// not be used afterwards. When the range was removed with [Map.RemoveFunc]
// and this is the last Ref held, Release runs the remover's free function
// in the calling goroutine before returning (and [Map.RemoveWait] returns).
// Otherwise it is one atomic add and allocates nothing. Releasing more
// times than acquired panics when the underflow is detected.
func (r *Ref[T]) Release() {
	n := r.state.Add(^uint64(0)) // -1
	if n&countMask == countMask {
		panic("addrmap: Release of a Ref that is not held")
	}
	if n == removedBit {
		r.runFree()
	}
}

// runFree runs the free function once the entry is removed and no Ref is
// held; the state transition to exactly removed|0 happens once.
func (r *Ref[T]) runFree() {
	if f := r.free; f != nil {
		r.free = nil
		f(r.v)
	}
}

// entry is one range of a view. v duplicates ref.v so that Lookup does not
// dereference ref. end is read and written atomically: it becomes 0 (a
// tombstone; a live range has end > start >= 0) when the range is removed,
// in place, so that a remove publishes nothing new. start, v and ref are
// written once, before the entry becomes visible to readers.
type entry[T any] struct {
	start uintptr
	end   uintptr
	v     T
	ref   *Ref[T]
}

// contains reports whether pc lies in the entry's range and the entry is not
// removed.
func (e *entry[T]) contains(pc uintptr) bool {
	return e.start <= pc && pc < atomic.LoadUintptr(&e.end)
}

// deltaMax is the number of ranges a view takes in its delta before the
// next insert merges them into a new base.
const deltaMax = 16

// deltaShare bounds the delta of a map of deltaShare ranges or more at one
// range per deltaShare live ones (and at deltaMax), so that under
// 1/deltaShare of its lookups reach the delta: a map of 64 to 127 ranges
// builds a new base every second insert, one of 1,024 or more every
// seventeenth. A smaller map keeps a delta of deltaMax, so that its
// inserts, the loads of a process with a few images, stay at one
// allocation each, amortised.
const deltaShare = 64

// deltaCap returns the number of ranges the delta of a map of live ranges
// takes before the next insert builds a new base.
func deltaCap(live int64) int32 {
	if live < deltaShare {
		return deltaMax
	}
	return int32(min(live/deltaShare, deltaMax))
}

// deltaVersions is the number of slots of a view's sorted copies of its
// delta: one of each length from 1 to deltaMax.
const deltaVersions = deltaMax * (deltaMax + 1) / 2

// Map maps half-open address ranges to values of type T. The zero value is
// an empty map ready to use. A Map must not be copied after first use.
type Map[T any] struct {
	mu   sync.Mutex              // serializes writers
	cur  atomic.Pointer[view[T]] // nil = empty
	live atomic.Int64            // live ranges, for Len
	dead int                     // tombstones in cur, under mu
	gaps []uintptr               // scratch of the base builds, under mu
}

// view is what readers load: a base snapshot and a delta of up to deltaMax
// ranges inserted since the base was built. Both only grow tombstones in
// place: a removal stores 0 into the entry's end. The delta is append-only:
// an insert writes delta[nd] in full and then publishes it by storing nd+1
// (atomically), so a reader that loads nd reads only entries written
// before; an insert into a full delta, or a removal that leaves more
// tombstones than deltaMax plus the live ranges, builds a new view from
// the live ranges (base and delta merged) and publishes it.
//
// dstarts and dorder keep the delta searchable by bisection without a
// lock or an allocation: for each length k of the delta (1 to deltaMax),
// dstarts[k(k-1)/2 : k(k-1)/2+k] holds the starts of delta[:k] sorted
// (among equal starts, a removed range's and the range inserted again
// after it, the later last) and dorder the same slots' indexes into
// delta. The insert that makes the delta k long writes that version and
// only then publishes nd = k; no version is written twice, so a reader
// that loaded nd reads a complete, unchanging copy.
//
// small holds the base's ranges when it has one or two (ents is then
// small[:n]), so that Lookup in a process with one or two registered
// ranges compares the pc with the view's first words and nothing else; a
// single range leaves small[1] empty with start ^0, so that no pc but ^0
// selects it; a base of more ranges leaves both empty (end 0), which no pc
// matches.
type view[T any] struct {
	small [2]entry[T]
	snapshot[T]
	nd      atomic.Int32 // entries of delta published
	delta   [deltaMax]entry[T]
	dstarts [deltaVersions]uintptr
	dorder  [deltaVersions]uint8
	// smallStarts and smallBuckets hold the base's starts and buckets
	// when it has one or two ranges (at most three buckets), so that
	// building such a view is one allocation, the view. (Last, so that
	// the fields lookups read keep their offsets.)
	smallStarts  [2]uintptr
	smallBuckets [3]int32
}

// appendDelta writes e into the delta's next slot with the sorted version
// of the longer delta, then publishes both. The caller holds the map's
// lock and has checked that the delta has room and that e overlaps no
// live range.
func (v *view[T]) appendDelta(e entry[T]) {
	k := int(v.nd.Load())
	v.delta[k] = e // not yet visible: readers read delta[:nd]
	prev, next := k*(k-1)/2, k*(k+1)/2
	ps, po := v.dstarts[prev:prev+k], v.dorder[prev:prev+k]
	ns, no := v.dstarts[next:next+k+1], v.dorder[next:next+k+1]
	j := 0
	for ; j < k && ps[j] <= e.start; j++ {
		ns[j], no[j] = ps[j], po[j]
	}
	ns[j], no[j] = e.start, uint8(k)
	copy(ns[j+1:], ps[j:])
	copy(no[j+1:], po[j:])
	v.nd.Store(int32(k + 1)) // publish
}

// smallEntry returns the entry of v.small that holds pc if any does: the
// second when it starts at or below pc (a conditional move), else the
// first. The caller checks that it contains pc.
func (v *view[T]) smallEntry(pc uintptr) *entry[T] {
	e := &v.small[0]
	if pc >= v.small[1].start {
		e = &v.small[1]
	}
	return e
}

// snapshot is an immutable set of ranges sorted by start, non-overlapping
// (except that entries may turn into tombstones). starts[i] ==
// ents[i].start: the search reads only starts, 8 bytes per range, so that
// 1,000 ranges take 8 KiB of cache.
//
// buckets is a direct-mapped index over a window of starts, so that a
// lookup costs two adjacent loads from it, a bisection of one or two
// candidates and the range check, whatever the number of ranges. Buckets
// are 1<<shift bytes, a power of two no larger than the median distance
// between consecutive starts; there are at most bucketsPerRange*n+1 of
// them for n ranges. The window is the run starts[lo:hi+1] that holds the
// most starts within bucketsPerRange*n buckets, so that a few ranges far
// from the others (a binary's text below a cluster of mmapped images) do
// not stretch it. Bucket b covers the addresses base + [b<<shift,
// (b+1)<<shift); buckets[b] is the index into starts of the last range
// starting at or before the bucket's first address, and the last bucket
// holds hi. The range holding a pc of bucket b is then one of
// starts[buckets[b] : buckets[b+1]+1]: one or two candidates for ranges
// spread as loaded objects are, which the lookup tells apart with one
// comparison, and more (crowded ranges) that it bisects. A pc outside the
// window bisects the starts below or above it. No lookup costs more than
// a bisection of all the starts. An empty snapshot has no buckets.
type snapshot[T any] struct {
	starts  []uintptr
	ents    []entry[T]
	lo, hi  int     // the window: starts[lo:hi+1]
	base    uintptr // starts[lo]
	shift   uint
	buckets []int32
}

// bucketsPerRange bounds the bucket index at 4 bytes × 4 per range.
const bucketsPerRange = 4

// build makes p the snapshot of ents (sorted, non-overlapping, all live),
// using *gaps as scratch. The starts and buckets go into roomStarts and
// roomBuckets when they fit, else into new slices.
func (p *snapshot[T]) build(ents []entry[T], gaps *[]uintptr, roomStarts []uintptr, roomBuckets []int32) {
	n := len(ents)
	if n == 0 {
		return
	}
	var starts []uintptr
	if n <= len(roomStarts) {
		starts = roomStarts[:n:n]
	} else {
		starts = make([]uintptr, n)
	}
	for i := range ents {
		starts[i] = ents[i].start
	}
	p.starts, p.ents = starts, ents
	if n > 1 {
		g := (*gaps)[:0]
		for i := 1; i < n; i++ {
			g = append(g, starts[i]-starts[i-1])
		}
		slices.Sort(g)
		p.shift = uint(bits.Len64(uint64(g[len(g)/2])) - 1) // gaps are >= 1
		*gaps = g
	}
	// The window: the most starts within bucketsPerRange*n buckets.
	limit := uint64(bucketsPerRange * n)
	for lo, hi := 0, 0; lo < n; lo++ {
		for hi+1 < n && uint64(starts[hi+1]-starts[lo])>>p.shift < limit {
			hi++
		}
		if hi-lo > p.hi-p.lo {
			p.lo, p.hi = lo, hi
		}
	}
	p.base = starts[p.lo]
	span := uint64(starts[p.hi] - p.base)
	nb := int(span>>p.shift) + 2 // the last start's bucket, and one past it
	if nb <= len(roomBuckets) {
		p.buckets = roomBuckets[:nb:nb]
	} else {
		p.buckets = make([]int32, nb)
	}
	i := p.lo
	for b := range nb {
		at := uint64(b) << p.shift // offset from base of the bucket's first address
		if b == nb-1 || at > span {
			at = span
		}
		for i < p.hi && uint64(starts[i+1]-p.base) <= at {
			i++
		}
		p.buckets[b] = int32(i)
	}
}

// search returns the index of the first entry whose start is > pc
// (0..len(s)). It allocates nothing.
func search[T any](s []entry[T], pc uintptr) int {
	lo, hi := 0, len(s)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if s[mid].start <= pc {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// find returns the index of the live entry containing pc, or -1. It
// allocates nothing.
func find[T any](p *snapshot[T], pc uintptr) int {
	if len(p.buckets) == 0 {
		return -1
	}
	var i int
	if off := uint64(pc - p.base); pc < p.base {
		if p.lo == 0 {
			return -1
		}
		i = bisect(p.starts[:p.lo], pc) // below the window
	} else if b := off >> p.shift; b < uint64(len(p.buckets)-1) {
		lo, hi := int(p.buckets[b]), int(p.buckets[b+1])
		if hi-lo <= 1 {
			// One or two candidates, as spread ranges give: the second
			// when it starts at or below pc (a conditional move, no loop).
			i = lo
			if uint(hi) < uint(len(p.starts)) && p.starts[hi] <= pc {
				i = hi
			}
		} else {
			i = lo + bisect(p.starts[lo:hi+1], pc)
		}
	} else {
		i = p.hi + bisect(p.starts[p.hi:], pc) // past the window's last start
	}
	if uint(i) < uint(len(p.ents)) && p.ents[i].contains(pc) {
		return i
	}
	return -1
}

// bucketEntry is the common case of find, small enough to be inlined:
// when pc lies in the bucket index's window and its bucket names one or
// two candidates, it returns the one that may hold pc (the caller checks
// that it does); otherwise nil, and find decides.
func (p *snapshot[T]) bucketEntry(pc uintptr) *entry[T] {
	b := uint64(pc-p.base) >> p.shift
	if pc < p.base || b >= uint64(len(p.buckets)-1) { // a published base has 2 buckets or more
		return nil
	}
	lo, hi := uint(p.buckets[b]), uint(p.buckets[b+1])
	if hi-lo > 1 || hi >= uint(len(p.starts)) {
		return nil
	}
	if p.starts[hi] <= pc {
		lo = hi
	}
	return &p.ents[lo]
}

// bisect returns the index of the last of the sorted starts that is <= pc,
// or 0 when none is (the caller checks the entry). The bisection is
// branch-free (arithmetic on the borrow of a subtraction, not a conditional
// jump, which the compiler does not turn into a conditional move in a loop),
// so random addresses cost no branch mispredictions: about log2(n) dependent
// loads from an array of 8 bytes per range.
func bisect(s []uintptr, pc uintptr) int {
	n := len(s)
	base := 0
	for n > 1 {
		half := n >> 1
		// borrow is 1 when pc < s[base+half]: step only when s[base+half] <= pc.
		_, borrow := bits.Sub64(uint64(pc), uint64(s[base+half]), 0)
		base += half & int(borrow-1)
		n -= half
	}
	return base
}

// lookup returns the live entry of v containing pc, or nil: the small
// base, the base's index, then a scan of the delta.
func (v *view[T]) lookup(pc uintptr) *entry[T] {
	if e := v.smallEntry(pc); e.contains(pc) {
		return e
	}
	return v.lookupBase(pc)
}

// lookupBase is lookup past the small base: the base's index, then the
// delta.
func (v *view[T]) lookupBase(pc uintptr) *entry[T] {
	if i := find(&v.snapshot, pc); i >= 0 {
		return &v.ents[i]
	}
	return v.lookupDelta(pc)
}

// lookupDelta returns the live entry of v's delta containing pc, or nil:
// a search of the delta's sorted starts, and a scan of the delta only
// when the range it finds has been removed (a live range starting before
// it may still hold pc).
func (v *view[T]) lookupDelta(pc uintptr) *entry[T] {
	k := int(v.nd.Load())
	if k == 0 {
		return nil
	}
	off := k * (k - 1) / 2
	s := v.dstarts[off : off+k]
	// The index of the last start <= pc is the count of starts <= pc
	// after the first: independent comparisons (no chain of dependent
	// loads as in a bisection, no branch), which for 16 starts or fewer
	// take fewer cycles than four bisection steps.
	i := 0
	for _, st := range s[1:] {
		_, borrow := bits.Sub64(uint64(pc), uint64(st), 0) // 1 when pc < st
		i += int(borrow ^ 1)
	}
	e := &v.delta[v.dorder[off+i]]
	if e.contains(pc) {
		return e
	}
	if s[i] > pc || atomic.LoadUintptr(&e.end) != 0 {
		// No start at or below pc, or a live range that ends at or
		// below it: the live ranges do not overlap, so none starting
		// before it reaches pc.
		return nil
	}
	return v.scanDelta(pc, k)
}

// scanDelta is lookupDelta by a scan of delta[:k].
func (v *view[T]) scanDelta(pc uintptr, k int) *entry[T] {
	for i := range v.delta[:k] {
		if e := &v.delta[i]; e.contains(pc) {
			return e
		}
	}
	return nil
}

// Lookup returns the value of the range [Start, End) with Start <= pc < End.
// When no range contains pc it returns the zero T and ErrNotFound itself.
//
// Lookup takes no lock and allocates nothing. When the base holds one or
// two ranges (a map of one range; what a build of two leaves) a hit costs
// two comparisons with the view's header. Otherwise it
// costs a load from the base snapshot's bucket index and a comparison or
// two when the ranges are spread over the address space (about 4.5 ns for
// 100 or 1,000 ranges on the machine of BENCHMARKS.md), O(log n) at worst
// for n ranges crowded together, plus a bisection of the up to 16 ranges
// inserted since the base was built when the base has none for pc.
// It sees either the state before or the one after any concurrent write.
// It gives no protection against the value being freed by a concurrent
// remover: use it only when the caller guarantees the value's lifetime
// itself, and [Map.Acquire] otherwise.
func (m *Map[T]) Lookup(pc uintptr) (T, error) {
	if v := m.cur.Load(); v != nil {
		// One or two ranges (in the base): answered from the view's
		// first words, with no call.
		if e := v.smallEntry(pc); e.contains(pc) {
			return e.v, nil
		}
		// Spread ranges: the bucket names one or two candidates, with
		// no call; when it names one that misses, no other range of the
		// base holds pc (find would check that one only).
		if e := v.bucketEntry(pc); e != nil {
			if e.contains(pc) {
				return e.v, nil
			}
		} else if i := find(&v.snapshot, pc); i >= 0 {
			return v.ents[i].v, nil
		}
		if e := v.lookupDelta(pc); e != nil {
			return e.v, nil
		}
	}
	var zero T
	return zero, ErrNotFound
}

// LookupRange is [Map.Lookup] that also returns the matching range; the same
// lifetime caveat applies.
func (m *Map[T]) LookupRange(pc uintptr) (Range, T, error) {
	if v := m.cur.Load(); v != nil {
		if e := v.lookup(pc); e != nil {
			return e.ref.rng, e.v, nil
		}
	}
	var zero T
	return Range{}, zero, ErrNotFound
}

// Acquire returns the entry whose range contains pc, held: its value stays
// valid, and the free function of a concurrent [Map.RemoveFunc] does not
// run, until the caller calls [Ref.Release] (exactly once). When no range
// contains pc it returns nil and ErrNotFound itself.
//
// Acquire takes no lock and allocates nothing: it searches the current
// view as Lookup does and increments the entry's count with one
// compare-and-swap. If the entry is being removed concurrently it reloads
// the view and retries (the remover marks the entry removed in the view
// before it sets the Ref's removed bit, so the retry misses it), so it is
// lock-free (a retry means a remover made progress), not wait-free.
func (m *Map[T]) Acquire(pc uintptr) (*Ref[T], error) {
	for {
		v := m.cur.Load()
		if v == nil {
			return nil, ErrNotFound
		}
		e := v.lookup(pc)
		if e == nil {
			return nil, ErrNotFound
		}
		r := e.ref
		for {
			st := r.state.Load()
			if st&removedBit != 0 {
				break // removed after we found it: the view now lacks it
			}
			if st&countMask == countMask-1 {
				panic("addrmap: Ref count overflow")
			}
			if r.state.CompareAndSwap(st, st+1) {
				return r, nil
			}
		}
	}
}

// overlapping returns a live entry of v intersecting [start, end), or nil.
// The caller holds m.mu.
func (v *view[T]) overlapping(start, end uintptr) *entry[T] {
	ents := v.ents
	i := search(ents, start) // ents[:i] start at or before start
	if i > 0 && atomic.LoadUintptr(&ents[i-1].end) > start {
		return &ents[i-1]
	}
	for ; i < len(ents) && ents[i].start < end; i++ {
		if atomic.LoadUintptr(&ents[i].end) != 0 {
			return &ents[i]
		}
	}
	nd := int(v.nd.Load())
	for i := range v.delta[:nd] {
		if e := &v.delta[i]; e.start < end && start < atomic.LoadUintptr(&e.end) {
			return e
		}
	}
	return nil
}

// rebuild publishes a new view of the live ranges of m's current view
// plus extra (when extra.ref is not nil), base and delta merged into the
// new base, with an empty delta. The caller holds m.mu.
func (m *Map[T]) rebuild(extra entry[T]) {
	old := m.cur.Load()
	n := int(m.live.Load())
	if extra.ref != nil {
		n++
	}
	m.dead = 0
	if n == 0 {
		m.cur.Store(nil)
		return
	}
	v := new(view[T])
	var ents []entry[T]
	if n <= len(v.small) {
		ents = v.small[:0:len(v.small)] // no allocation for one or two ranges
	} else {
		ents = make([]entry[T], 0, n)
	}
	if old != nil {
		for i := range old.ents {
			if e := &old.ents[i]; atomic.LoadUintptr(&e.end) != 0 {
				ents = append(ents, *e)
			}
		}
		for i := range old.delta[:old.nd.Load()] {
			if e := &old.delta[i]; atomic.LoadUintptr(&e.end) != 0 {
				ents = append(ents, *e)
			}
		}
	}
	if extra.ref != nil {
		ents = append(ents, extra)
	}
	// The base is sorted and so is each part appended after it only when
	// the delta was inserted in order; sort the whole (n log n, as the
	// gaps' sort of the build).
	slices.SortFunc(ents, func(a, b entry[T]) int {
		switch {
		case a.start < b.start:
			return -1
		case a.start > b.start:
			return 1
		}
		return 0
	})
	if len(ents) == 0 { // (m.live counts them: not reached)
		m.cur.Store(nil)
		return
	}
	if len(ents) <= len(v.small) {
		if &ents[0] != &v.small[0] {
			copy(v.small[:], ents)
		}
		ents = v.small[:len(ents):len(ents)]
		if len(ents) == 1 {
			v.small[1] = entry[T]{start: ^uintptr(0)} // selected by no pc but ^0, which it does not contain
		}
	}
	v.build(ents, &m.gaps, v.smallStarts[:], v.smallBuckets[:])
	m.cur.Store(v)
}

// Insert registers v for the half-open range [start, end). It returns an
// error wrapping ErrEmptyRange when start >= end and one wrapping ErrOverlap
// when the range intersects a registered range; the map is then unchanged.
//
// Insert serializes with other writers and allocates the entry's Ref. It
// checks for overlap in O(log n) for n ranges, appends the range to the
// current view's delta and publishes it with one atomic store. An
// insert that finds the delta full, or an empty map, builds a new view
// instead: the live ranges merged and sorted, the bucket index rebuilt
// (O(n log n) time; four allocations: the view, n entries, n starts, the
// buckets; the entries, starts and buckets of one or two ranges are kept
// in the view itself, which is then the only allocation),
// so that the cost is amortised over the inserts of the delta. The delta
// is full at 16 ranges, and in a map of n >= 64 ranges at n/64 when that
// is fewer: a map of 64 to 127 ranges builds on every second insert, so
// that lookups stay off the delta.
func (m *Map[T]) Insert(start, end uintptr, v T) error {
	return m.insert(start, end, v, nil)
}

// InsertRef is [Map.Insert] with the entry's Ref supplied by the caller
// instead of allocated: r must point to a zero Ref that was never passed
// to InsertRef before (InsertRef panics otherwise), typically a field of
// the value itself, so that registering the value costs no allocation of
// its own (the view's rebuild aside, as for Insert). From then on r is
// the map's: [Map.Acquire] returns it, and the caller must neither write
// nor copy it, even after the range is removed (a reader may still hold
// it). When InsertRef returns an error, r is left as it was and may be
// passed again. Errors and cost as for Insert, less the Ref's allocation.
func (m *Map[T]) InsertRef(start, end uintptr, v T, r *Ref[T]) error {
	if r == nil {
		panic("addrmap: InsertRef of a nil Ref")
	}
	return m.insert(start, end, v, r)
}

// insert is Insert, with the Ref r when it is not nil. r is checked under
// m.mu, where an insert writes it: of two InsertRef calls of one Ref
// racing on m, the second to take the lock panics.
func (m *Map[T]) insert(start, end uintptr, v T, r *Ref[T]) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r != nil && (r.rng != (Range{}) || r.state.Load() != 0 || r.free != nil) {
		panic("addrmap: InsertRef of a Ref that is not a fresh zero Ref")
	}
	if start >= end {
		return fmt.Errorf("addrmap: insert [%#x, %#x): %w", start, end, ErrEmptyRange)
	}
	cur := m.cur.Load()
	if cur != nil {
		if e := cur.overlapping(start, end); e != nil {
			return fmt.Errorf("addrmap: insert [%#x, %#x) over [%#x, %#x): %w",
				start, end, e.ref.rng.Start, e.ref.rng.End, ErrOverlap)
		}
	}
	if r == nil {
		r = new(Ref[T])
	}
	r.rng, r.v = Range{start, end}, v
	e := entry[T]{start, end, v, r}
	if cur == nil || cur.nd.Load() >= deltaCap(m.live.Load()+1) { // the delta's bound with e in the map
		m.rebuild(e)
	} else {
		cur.appendDelta(e)
	}
	m.live.Add(1)
	return nil
}

// unpublish marks the live entry starting exactly at start removed in the
// current view and returns its Ref, or nil. The caller holds m.mu.
func (m *Map[T]) unpublish(start uintptr) *Ref[T] {
	v := m.cur.Load()
	if v == nil {
		return nil
	}
	var e *entry[T]
	if i := search(v.ents, start); i > 0 && v.ents[i-1].start == start && atomic.LoadUintptr(&v.ents[i-1].end) != 0 {
		e = &v.ents[i-1]
	} else {
		for i := range v.delta[:v.nd.Load()] {
			if d := &v.delta[i]; d.start == start && atomic.LoadUintptr(&d.end) != 0 {
				e = d
				break
			}
		}
	}
	if e == nil {
		return nil
	}
	atomic.StoreUintptr(&e.end, 0) // later lookups miss
	m.live.Add(-1)
	if m.dead++; m.dead > deltaMax+int(m.live.Load()) {
		m.rebuild(entry[T]{}) // drop the tombstones (and the values they hold)
	}
	return e.ref
}

// RemoveFunc unregisters the range that starts exactly at start; removed
// reports whether there was one. The range is marked removed in the
// current view before RemoveFunc returns, so later lookups miss. free
// (which may be nil) then runs exactly once with the value, after every
// [Ref] acquired on the entry has been released: in the calling goroutine
// before RemoveFunc returns when none is held (freed is then true),
// otherwise in the goroutine whose [Ref.Release] drops the last one (freed
// is false: free may run at any time after, so the caller must not read
// what free writes unless it synchronizes with it). RemoveFunc never waits
// for readers. free runs without the map's lock held, so it may call the
// map; it should be short, since it may run on a reader's path. Readers
// that used [Map.Lookup] are not tracked.
//
// RemoveFunc serializes with other writers; it finds the range in O(log n)
// and marks it removed in place (one atomic store), allocating nothing,
// except when the view then holds more removed ranges than deltaMax (16)
// plus the live ones: it then builds a new view of the live ones, as an
// insert into a full delta does, which keeps the removed values from being
// held and the cost amortised.
func (m *Map[T]) RemoveFunc(start uintptr, free func(T)) (removed, freed bool) {
	m.mu.Lock()
	r := m.unpublish(start)
	m.mu.Unlock()
	if r == nil {
		return false, false
	}
	r.free = free // published to the last Release by the atomic below
	if r.state.Or(removedBit) == 0 {
		r.runFree()
		return true, true
	}
	return true, false
}

// RemoveWait unregisters the range that starts exactly at start and returns
// its value and true once no [Ref] acquired on it is held, or the zero T and
// false at once when no range starts there. It blocks while readers hold
// Refs: it must not be called by a goroutine that holds one on the same
// entry (that would deadlock). It allocates a channel and a closure.
func (m *Map[T]) RemoveWait(start uintptr) (T, bool) {
	var v T
	done := make(chan struct{})
	if ok, _ := m.RemoveFunc(start, func(x T) { v = x; close(done) }); !ok {
		return v, false
	}
	<-done
	return v, true
}

// Remove unregisters the range that starts exactly at start and returns its
// value and true at once, or the zero T and false when no range starts
// there. Later Acquires miss, but Remove neither waits for nor tracks the
// readers that still hold the value (through a [Ref] or [Map.Lookup]): use
// it only when nothing the value refers to is freed, or when the caller
// knows no reader holds it. Otherwise use [Map.RemoveFunc].
//
// Remove costs what [Map.RemoveFunc] does.
func (m *Map[T]) Remove(start uintptr) (T, bool) {
	m.mu.Lock()
	r := m.unpublish(start)
	m.mu.Unlock()
	if r == nil {
		var zero T
		return zero, false
	}
	r.state.Or(removedBit)
	return r.v, true
}

// Len returns the number of registered ranges. It takes no lock and
// allocates nothing.
func (m *Map[T]) Len() int { return int(m.live.Load()) }

// All returns an iterator over the registered ranges and their values, in
// increasing address order. The view is taken when iteration starts; later
// inserts do not affect it, a range removed meanwhile may be skipped. It
// takes no lock, allocates the iterator's closure and, like [Map.Lookup],
// does not protect the values against a concurrent remover.
func (m *Map[T]) All() iter.Seq2[Range, T] {
	return func(yield func(Range, T) bool) {
		v := m.cur.Load()
		if v == nil {
			return
		}
		// The delta's live entries, sorted (at most deltaMax, on the stack).
		var d [deltaMax]*entry[T]
		nd := 0
		for i := range v.delta[:v.nd.Load()] {
			if e := &v.delta[i]; atomic.LoadUintptr(&e.end) != 0 {
				d[nd] = e
				nd++
			}
		}
		slices.SortFunc(d[:nd], func(a, b *entry[T]) int {
			if a.start < b.start {
				return -1
			}
			return 1
		})
		j := 0
		for i := range v.ents {
			e := &v.ents[i]
			for ; j < nd && d[j].start < e.start; j++ {
				if !yield(d[j].ref.rng, d[j].v) {
					return
				}
			}
			if atomic.LoadUintptr(&e.end) != 0 && !yield(e.ref.rng, e.v) {
				return
			}
		}
		for ; j < nd; j++ {
			if !yield(d[j].ref.rng, d[j].v) {
				return
			}
		}
	}
}
