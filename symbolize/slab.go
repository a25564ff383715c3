package symbolize

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// slab holds the large pointer-free arrays that the indexes of a file
// opened by Open keep (subroutines, segments, line rows and the bucket
// indexes over them), in anonymous mappings of its own advised for
// transparent huge pages (MADV_HUGEPAGE; Linux's default "madvise" mode
// gives huge pages only to such mappings). On a batch that indexes every
// unit, the first touches of fresh heap pages were a good part of the
// cost: a fault per 4 KiB page, some 4 µs each on a VM, where a huge page
// costs one fault per 2 MiB. Arrays are handed out one after the other
// (a bump allocator, never freed alone); an index allocates them at its
// capacity guesses (build, decodeLines), and the unused tail of one is
// not touched but, inside a huge page, is resident: a batch that indexes
// the 20,000-function gcc binary's every unit ends with about 2 MB more
// resident memory and 900 fewer page faults. The garbage collector
// neither sees nor scans the arrays (they hold no pointers); release
// unmaps them, which Close does: nothing may read them after that (Close
// must not run concurrently with Symbolize, and every query checks closed
// first).
//
// Arrays abandoned before Close stay in the slab until Close: one that an
// append outgrew (the array then grows on the heap), the narrow rows of a
// line table made wide (widen), the arrays of a build that failed (its
// error is kept, and it is not built again). Each is an array that an
// index allocated once, of at most its capacity guess (guessBudget bounds
// the guesses of all indexes) or what the index would have kept, so the
// slab holds at most about twice what the indexes keep plus the guesses.
//
// Where mmap fails, or the slab is nil or released, arrays come from the
// Go heap (make) as before; where madvise fails the mappings work with
// small pages. A slab is used only for large files (slabMinFile) and
// arrays (slabMinBytes): a small file's would map a whole huge page for a
// few kilobytes.
type slab struct {
	mu       sync.Mutex
	free     span     // the unused rest of the newest chunk
	spares   []span   // unused zeroed spans left behind (tails, lanes' rests), for later requests
	chunks   [][]byte // every chunk mapped, for release
	next     int      // the size of the next chunk
	lanes    []*slab  // idle lanes (lane), for the next job
	released atomic.Bool

	// A lane (parent not nil) allocates from win[off:end], a window of
	// its parent's memory that only the lane hands out: see lane.
	parent   *slab
	win      unsafe.Pointer
	off, end int
}

// span is size zeroed bytes at p, in one of a slab's chunks.
type span struct {
	p    unsafe.Pointer
	size int
}

// take returns the first size bytes of sp and drops them from it.
func (sp *span) take(size int) []byte {
	b := unsafe.Slice((*byte)(sp.p), size)
	sp.p, sp.size = unsafe.Add(sp.p, size), sp.size-size
	return b
}

const (
	// slabChunk is the size and alignment of the first chunk, one huge
	// page of x86-64 and arm64 (4 KiB granule); later chunks double, up
	// to slabMaxChunk.
	slabChunk    = 2 << 20
	slabMaxChunk = 64 << 20
	// slabFirstChunk is the size of the first chunk: address space,
	// not memory (a huge page is only faulted in where an array is
	// written), large enough for the indexes of files of some ten
	// megabytes of DWARF in one chunk, so that the arrays lie one after
	// the other without a chunk's unused end between them.
	slabFirstChunk = 8 << 20
	// slabMinBytes is the smallest array taken from a slab.
	slabMinBytes = 1 << 10
	// laneStep is the unit in which a lane's window is taken from its
	// parent or extended.
	laneStep = 4 << 10
)

// slabMinFile is the size of a file from which its indexes use a slab (a
// variable for the tests).
var slabMinFile = 1 << 20

// newSlab returns an empty slab, or nil where anonymous mappings are not
// available (slabMake then allocates on the heap).
func newSlab() *slab {
	if !slabSupported {
		return nil
	}
	return &slab{next: slabFirstChunk}
}

// bytes returns size zeroed bytes aligned to 8, or nil when the slab
// cannot provide them.
func (s *slab) bytes(size int) []byte {
	size = (size + 7) &^ 7
	if s.parent != nil {
		return s.laneBytes(size)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sp, ok := s.spanLocked(size)
	if !ok {
		return nil
	}
	return sp.take(size)
}

// spanLocked returns a span of at least size bytes (a multiple of 8)
// taken off s's spares or its newest chunk, mapping one when needed:
// exactly size bytes, but for a spare whose rest would be too small to
// keep. s.mu is held.
func (s *slab) spanLocked(size int) (span, bool) {
	if s.released.Load() {
		return span{}, false
	}
	for i := range s.spares {
		if sp := &s.spares[i]; sp.size >= size {
			if sp.size-size < slabMinBytes {
				r := *sp
				s.spares = append(s.spares[:i], s.spares[i+1:]...)
				return r, true
			}
			r := span{sp.p, size}
			sp.take(size)
			return r, true
		}
	}
	if s.free.size < size {
		n := max(s.next, (size+slabChunk-1)&^(slabChunk-1))
		c := mapChunk(n)
		if c == nil {
			return span{}, false
		}
		s.chunks = append(s.chunks, c)
		s.spare(s.free)
		s.free = span{unsafe.Pointer(unsafe.SliceData(c)), len(c)}
		s.next = min(2*s.next, slabMaxChunk)
	}
	r := span{s.free.p, size}
	s.free.take(size)
	return r, true
}

// spare keeps sp for later requests when it is large enough. s.mu is
// held.
func (s *slab) spare(sp span) {
	if sp.size >= slabMinBytes {
		s.spares = append(s.spares, sp)
	}
}

// lane returns a lane of s: a slab whose arrays come from a window of s's
// memory that only the lane hands out, so that the lane can take back the
// unused tail of its newest array (slabTrim) once its final length is
// known, for the lane's next array. One goroutine at a time allocates
// from a lane (a job of Prepare, a unit's build); it returns the lane to
// s with putLane. A window too small for a request is extended in place
// while it ends where s's newest chunk is free, and otherwise replaced
// (its rest kept as a spare of s). So the capacity guesses of arrays
// built one after the other on each of Prepare's workers need not add up
// in the slab, only the arrays' final lengths and the guesses in flight.
// A nil s gives a nil lane (the heap).
func (s *slab) lane() *slab {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.lanes); n > 0 {
		l := s.lanes[n-1]
		s.lanes = s.lanes[:n-1]
		return l
	}
	return &slab{parent: s}
}

// putLane returns the lane l (of lane) to its parent for later jobs.
func putLane(l *slab) {
	if l == nil {
		return
	}
	p := l.parent
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released.Load() {
		return
	}
	p.lanes = append(p.lanes, l)
}

// laneBytes is bytes for a lane; size is a multiple of 8.
func (l *slab) laneBytes(size int) []byte {
	p := l.parent
	if l.end-l.off < size {
		p.mu.Lock()
		ok := l.growLocked(size)
		p.mu.Unlock()
		if !ok {
			return nil
		}
	}
	b := unsafe.Slice((*byte)(unsafe.Add(l.win, l.off)), size)
	l.off += size
	return b
}

// growLocked makes room for size bytes in the lane's window: in place
// when the window ends where its parent's newest chunk is free, else in
// a new window (the old one's rest a spare). The parent's mu is held.
func (l *slab) growLocked(size int) bool {
	p := l.parent
	if p.released.Load() {
		return false
	}
	need := size - (l.end - l.off)
	step := (need + laneStep - 1) &^ (laneStep - 1)
	if l.win != nil && uintptr(l.win)+uintptr(l.end) == uintptr(p.free.p) && p.free.size >= need {
		n := min(step, p.free.size)
		p.free.take(n)
		l.end += n
		return true
	}
	sp, ok := p.spanLocked(max(step, (size+laneStep-1)&^(laneStep-1)))
	if !ok {
		return false
	}
	if l.win != nil {
		p.spare(span{unsafe.Add(l.win, l.off), l.end - l.off})
	}
	l.win, l.off, l.end = sp.p, 0, sp.size
	return true
}

// release unmaps the slab's chunks; later requests get heap memory. A
// lane's release does nothing (its parent's unmaps its windows).
func (s *slab) release() error {
	if s == nil || s.parent != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.released.Store(true)
	var err error
	for _, c := range s.chunks {
		if e := unmapChunk(c); e != nil && err == nil {
			err = e
		}
	}
	for _, l := range s.lanes {
		l.win, l.off, l.end = nil, 0, 0
	}
	s.chunks, s.free, s.spares, s.lanes = nil, span{}, nil, nil
	return err
}

// slabElem is the element types of the arrays in a slab, which must hold
// no pointers (the garbage collector does not scan the slab):
// TestSlabElemsPointerFree checks every type listed here.
type slabElem interface {
	int32 | uint32 | uint64 | subr | seg | narrowRow | symbol
}

// slabMake returns a zeroed array of n elements of T (pointer-free, see
// slabElem): from s when s is not nil and the array is large enough,
// otherwise from the heap.
func slabMake[T slabElem](s *slab, n int) []T {
	var zero T
	size := uintptr(n) * unsafe.Sizeof(zero)
	if s == nil || n <= 0 || size < slabMinBytes || unsafe.Alignof(zero) > 8 || size/unsafe.Sizeof(zero) != uintptr(n) {
		return make([]T, n)
	}
	b := s.bytes(int(size))
	if b == nil {
		return make([]T, n)
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// slabTrim returns a[:len(a):len(a)], and gives the unused tail of a
// back to the lane l when a is l's newest array (from slabMake with l):
// the lane's next array then starts right after a's last element.
// written is how many elements of a were ever written (at least len(a)):
// those beyond len(a) are zeroed again. An a of another lane or the heap
// is only resliced. Appending to the result allocates on the heap.
func slabTrim[T slabElem](l *slab, a []T, written int) []T {
	n := len(a)
	if l == nil || l.parent == nil || cap(a) == 0 {
		return a[:n:n]
	}
	var zero T
	size := (int(uintptr(cap(a))*unsafe.Sizeof(zero)) + 7) &^ 7 // as bytes rounded it
	// Compared as integers: a heap array's end may point past its
	// allocation.
	if p := uintptr(unsafe.Pointer(unsafe.SliceData(a))); l.win != nil && p+uintptr(size) == uintptr(l.win)+uintptr(l.off) {
		if w := min(written, cap(a)); w > n {
			clear(a[n:w])
		}
		l.off -= size - (int(uintptr(n)*unsafe.Sizeof(zero))+7)&^7
	}
	return a[:n:n]
}

// inUse returns the bytes of s's chunks handed out as arrays (or held by
// lanes in use): neither free in the newest chunk, nor spares, nor the
// rest of an idle lane's window.
func (s *slab) inUse() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.chunks {
		n += len(c)
	}
	n -= s.free.size
	for _, sp := range s.spares {
		n -= sp.size
	}
	for _, l := range s.lanes {
		n -= l.end - l.off
	}
	return n
}
