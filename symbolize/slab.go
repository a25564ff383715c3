package symbolize

import (
	"sync"
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
	free     []byte   // the unused rest of the newest chunk
	chunks   [][]byte // every chunk mapped, for release
	next     int      // the size of the next chunk
	released bool
}

const (
	// slabChunk is the size and alignment of the first chunk, one huge
	// page of x86-64 and arm64 (4 KiB granule); later chunks double, up
	// to slabMaxChunk.
	slabChunk    = 2 << 20
	slabMaxChunk = 64 << 20
	// slabMinBytes is the smallest array taken from a slab.
	slabMinBytes = 1 << 10
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
	return &slab{next: slabChunk}
}

// bytes returns size zeroed bytes aligned to 8, or nil when the slab
// cannot provide them.
func (s *slab) bytes(size int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return nil
	}
	size = (size + 7) &^ 7
	if len(s.free) < size {
		n := max(s.next, (size+slabChunk-1)&^(slabChunk-1))
		c := mapChunk(n)
		if c == nil {
			return nil
		}
		s.chunks = append(s.chunks, c)
		s.free = c
		s.next = min(2*s.next, slabMaxChunk)
	}
	b := s.free[:size:size]
	s.free = s.free[size:]
	return b
}

// release unmaps the slab's chunks; later requests get heap memory.
func (s *slab) release() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.released = true
	var err error
	for _, c := range s.chunks {
		if e := unmapChunk(c); e != nil && err == nil {
			err = e
		}
	}
	s.chunks, s.free = nil, nil
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
