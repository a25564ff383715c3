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

// entry is one range of a snapshot. v duplicates ref.v so that Lookup does
// not dereference ref.
type entry[T any] struct {
	Range
	v   T
	ref *Ref[T]
}

// Map maps half-open address ranges to values of type T. The zero value is
// an empty map ready to use. A Map must not be copied after first use.
type Map[T any] struct {
	mu   sync.Mutex                  // serializes writers
	snap atomic.Pointer[snapshot[T]] // nil = empty
}

// snapshot is an immutable set of ranges sorted by Start, non-overlapping.
// starts[i] == ents[i].Start: the search reads only starts, 8 bytes per
// range, so that 1,000 ranges take 8 KiB of cache.
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
// a bisection of all the starts.
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

func newSnapshot[T any](ents []entry[T]) *snapshot[T] {
	if len(ents) == 0 {
		return nil
	}
	n := len(ents)
	starts := make([]uintptr, n)
	for i := range ents {
		starts[i] = ents[i].Start
	}
	p := &snapshot[T]{starts: starts, ents: ents}
	if n > 1 {
		gaps := make([]uintptr, n-1)
		for i := range gaps {
			gaps[i] = starts[i+1] - starts[i]
		}
		slices.Sort(gaps)
		p.shift = uint(bits.Len64(uint64(gaps[len(gaps)/2])) - 1) // gaps are >= 1
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
	p.buckets = make([]int32, nb)
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
	return p
}

func (m *Map[T]) load() []entry[T] {
	if p := m.snap.Load(); p != nil {
		return p.ents
	}
	return nil
}

// search returns the index of the first entry whose Start is > pc
// (0..len(s)). It allocates nothing.
func search[T any](s []entry[T], pc uintptr) int {
	lo, hi := 0, len(s)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if s[mid].Start <= pc {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// find returns the index of the entry containing pc, or -1. It allocates
// nothing.
func find[T any](p *snapshot[T], pc uintptr) int {
	if p == nil {
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
	if uint(i) < uint(len(p.ents)) {
		if e := &p.ents[i]; e.Start <= pc && pc < e.End {
			return i
		}
	}
	return -1
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

// Lookup returns the value of the range [Start, End) with Start <= pc < End.
// When no range contains pc it returns the zero T and ErrNotFound itself.
//
// Lookup takes no lock and allocates nothing. It costs a load from the
// snapshot's bucket index and a comparison or two when the ranges are
// spread over the address space (about 4.5 ns for 100 or 1,000 ranges on
// the machine of BENCHMARKS.md), O(log n) at worst for n ranges crowded
// together.
// It sees either the snapshot before or the one after any concurrent write.
// It gives no protection against the value being freed by a concurrent
// remover: use it only when the caller guarantees the value's lifetime
// itself, and [Map.Acquire] otherwise.
func (m *Map[T]) Lookup(pc uintptr) (T, error) {
	p := m.snap.Load()
	if i := find(p, pc); i >= 0 {
		return p.ents[i].v, nil
	}
	var zero T
	return zero, ErrNotFound
}

// LookupRange is [Map.Lookup] that also returns the matching range; the same
// lifetime caveat applies.
func (m *Map[T]) LookupRange(pc uintptr) (Range, T, error) {
	p := m.snap.Load()
	if i := find(p, pc); i >= 0 {
		return p.ents[i].Range, p.ents[i].v, nil
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
// snapshot as Lookup does and increments the entry's count with one
// compare-and-swap. If the entry is being removed concurrently it reloads
// the snapshot and retries, so it is lock-free (a retry means a remover
// made progress), not wait-free.
func (m *Map[T]) Acquire(pc uintptr) (*Ref[T], error) {
	for {
		p := m.snap.Load()
		i := find(p, pc)
		if i < 0 {
			return nil, ErrNotFound
		}
		r := p.ents[i].ref
		for {
			st := r.state.Load()
			if st&removedBit != 0 {
				break // removed after we loaded p: the current snapshot lacks it
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

// Insert registers v for the half-open range [start, end). It returns an
// error wrapping ErrEmptyRange when start >= end and one wrapping ErrOverlap
// when the range intersects a registered range; the map is then unchanged.
//
// Insert serializes with other writers, copies the snapshot and builds its
// index (O(n log n) time for n ranges, the sort of the gaps between starts;
// six allocations: the entry's Ref, n+1 entries, n+1 starts, the gaps, the
// buckets, the snapshot) and publishes the new one atomically.
func (m *Map[T]) Insert(start, end uintptr, v T) error {
	if start >= end {
		return fmt.Errorf("addrmap: insert [%#x, %#x): %w", start, end, ErrEmptyRange)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.load()
	i := search(old, start) // old[:i] start at or before start
	if i > 0 && old[i-1].End > start {
		return fmt.Errorf("addrmap: insert [%#x, %#x) over [%#x, %#x): %w",
			start, end, old[i-1].Start, old[i-1].End, ErrOverlap)
	}
	if i < len(old) && old[i].Start < end {
		return fmt.Errorf("addrmap: insert [%#x, %#x) over [%#x, %#x): %w",
			start, end, old[i].Start, old[i].End, ErrOverlap)
	}
	r := &Ref[T]{rng: Range{start, end}, v: v}
	s := make([]entry[T], 0, len(old)+1)
	s = append(s, old[:i]...)
	s = append(s, entry[T]{r.rng, v, r})
	s = append(s, old[i:]...)
	m.snap.Store(newSnapshot(s))
	return nil
}

// unpublish removes the entry starting exactly at start from the snapshot
// and returns its Ref, or nil. The caller holds m.mu.
func (m *Map[T]) unpublish(start uintptr) *Ref[T] {
	old := m.load()
	i := search(old, start)
	if i == 0 || old[i-1].Start != start {
		return nil
	}
	i--
	r := old[i].ref
	s := make([]entry[T], 0, len(old)-1)
	s = append(s, old[:i]...)
	s = append(s, old[i+1:]...)
	m.snap.Store(newSnapshot(s))
	return r
}

// RemoveFunc unregisters the range that starts exactly at start; removed
// reports whether there was one. The new snapshot is published before
// RemoveFunc returns, so later lookups miss. free (which may be nil) then
// runs exactly once with the value, after every [Ref] acquired on the entry
// has been released: in the calling goroutine before RemoveFunc returns when
// none is held (freed is then true), otherwise in the goroutine whose
// [Ref.Release] drops the last one (freed is false: free may run at any
// time after, so the caller must not read what free writes unless it
// synchronizes with it). RemoveFunc never waits for readers. free runs without the map's lock held,
// so it may call the map; it should be short, since it may run on a
// reader's path. Readers that used [Map.Lookup] are not tracked.
//
// RemoveFunc serializes with other writers and copies the snapshot and its
// index (O(n log n), as Insert).
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
// Remove serializes with other writers and copies the snapshot and its
// index (O(n log n), as Insert).
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

// Len returns the number of registered ranges in the current snapshot.
// It takes no lock and allocates nothing.
func (m *Map[T]) Len() int { return len(m.load()) }

// All returns an iterator over the ranges of the current snapshot and their
// values, in increasing address order. The snapshot is taken when iteration
// starts; later writes do not affect it. It takes no lock and, like
// [Map.Lookup], does not protect the values against a concurrent remover.
func (m *Map[T]) All() iter.Seq2[Range, T] {
	return func(yield func(Range, T) bool) {
		for _, e := range m.load() {
			if !yield(e.Range, e.v) {
				return
			}
		}
	}
}
