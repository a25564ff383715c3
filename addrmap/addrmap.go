// Package addrmap is the process-wide registry that maps an instruction
// pointer (or any address) to the value registered for the half-open address
// range [Start, End) that contains it; elfimage uses it to find the loaded
// image that holds a PC.
//
// A [Map] keeps an immutable snapshot: a slice of non-overlapping ranges
// sorted by Start, published through an atomic pointer. Readers
// ([Map.Lookup], [Map.Len], [Map.All]) take no lock and never block: they load
// the current snapshot and bisect it, so a lookup costs O(log n) and
// allocates nothing. Writers ([Map.Insert], [Map.Remove]) are serialized by a
// mutex, copy the snapshot, change the copy and publish it (copy-on-write),
// so a write costs O(n) time and allocation. The design fits registries that
// are read on every PC lookup (symbolizing, unwinding, profiling) and written
// when code is loaded or unloaded.
//
// Safe unload is not yet implemented: Remove publishes a snapshot without
// the range at once, but a reader that already obtained a value from an
// older snapshot may still hold it. Removing a range does not wait for such
// readers, so the owner of a value (for example an image being closed) must
// make sure no reader still uses it before freeing what it refers to.
package addrmap

import (
	"errors"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"
)

// ErrNotFound is returned by [Map.Lookup] when no registered range contains
// the address.
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

type entry[T any] struct {
	Range
	v T
}

// Map maps half-open address ranges to values of type T. The zero value is
// an empty map ready to use. A Map must not be copied after first use.
type Map[T any] struct {
	mu   sync.Mutex                 // serializes writers
	snap atomic.Pointer[[]entry[T]] // sorted by Start, non-overlapping; nil = empty
}

func (m *Map[T]) load() []entry[T] {
	if p := m.snap.Load(); p != nil {
		return *p
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

// Lookup returns the value of the range [Start, End) with Start <= pc < End.
// When no range contains pc it returns the zero T and ErrNotFound itself
// (not wrapped, so that a miss allocates nothing either).
//
// Lookup takes no lock, allocates nothing and costs O(log n) for n ranges.
// It sees either the snapshot before or the one after any concurrent write.
func (m *Map[T]) Lookup(pc uintptr) (T, error) {
	s := m.load()
	i := search(s, pc)
	if i > 0 && pc < s[i-1].End {
		return s[i-1].v, nil
	}
	var zero T
	return zero, ErrNotFound
}

// LookupRange is Lookup that also returns the matching range.
func (m *Map[T]) LookupRange(pc uintptr) (Range, T, error) {
	s := m.load()
	i := search(s, pc)
	if i > 0 && pc < s[i-1].End {
		return s[i-1].Range, s[i-1].v, nil
	}
	var zero T
	return Range{}, zero, ErrNotFound
}

// Insert registers v for the half-open range [start, end). It returns an
// error wrapping ErrEmptyRange when start >= end and one wrapping ErrOverlap
// when the range intersects a registered range; the map is then unchanged.
//
// Insert serializes with other writers, copies the snapshot (O(n) time, one
// allocation of n+1 entries) and publishes the new one atomically.
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
	s := make([]entry[T], 0, len(old)+1)
	s = append(s, old[:i]...)
	s = append(s, entry[T]{Range{start, end}, v})
	s = append(s, old[i:]...)
	m.snap.Store(&s)
	return nil
}

// Remove unregisters the range that starts exactly at start and returns its
// value and true, or the zero T and false when no range starts there.
//
// Remove serializes with other writers and publishes a copy without the
// range (O(n)). It does not wait for readers that already hold the value:
// see the package documentation.
func (m *Map[T]) Remove(start uintptr) (T, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.load()
	i := search(old, start)
	if i == 0 || old[i-1].Start != start {
		var zero T
		return zero, false
	}
	i--
	v := old[i].v
	if len(old) == 1 {
		m.snap.Store(nil)
		return v, true
	}
	s := make([]entry[T], 0, len(old)-1)
	s = append(s, old[:i]...)
	s = append(s, old[i+1:]...)
	m.snap.Store(&s)
	return v, true
}

// Len returns the number of registered ranges in the current snapshot.
// It takes no lock and allocates nothing.
func (m *Map[T]) Len() int { return len(m.load()) }

// All returns an iterator over the ranges of the current snapshot and their
// values, in increasing address order. The snapshot is taken when iteration
// starts; later writes do not affect it. It takes no lock.
func (m *Map[T]) All() iter.Seq2[Range, T] {
	return func(yield func(Range, T) bool) {
		for _, e := range m.load() {
			if !yield(e.Range, e.v) {
				return
			}
		}
	}
}
