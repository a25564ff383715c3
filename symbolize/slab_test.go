package symbolize

import (
	"testing"
	"unsafe"
)

func TestSlab(t *testing.T) {
	s := newSlab()
	if !slabSupported {
		if s != nil {
			t.Fatal("newSlab without support: not nil")
		}
		return
	}
	type span struct{ lo, hi uintptr }
	var spans []span
	for i, n := range []int{1 << 10, 3000, 1 << 20, 5 << 20, 7, 1 << 12} {
		b := slabMake[uint32](s, n)
		if len(b) != n || cap(b) != n {
			t.Fatalf("slabMake(%d): len %d cap %d", n, len(b), cap(b))
		}
		for j, v := range b {
			if v != 0 {
				t.Fatalf("slabMake(%d)[%d] = %d, not zeroed", n, j, v)
			}
			b[j] = uint32(i + 1)
		}
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		if lo%8 != 0 {
			t.Fatalf("slabMake(%d) at %#x: not 8-aligned", n, lo)
		}
		spans = append(spans, span{lo, lo + uintptr(4*n)})
	}
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if a.lo < b.hi && b.lo < a.hi {
				t.Fatalf("arrays overlap: %#x %#x", a, b)
			}
		}
	}
	if len(s.chunks) == 0 {
		t.Fatal("no chunk mapped for arrays above slabMinBytes")
	}
	if err := s.release(); err != nil {
		t.Fatal(err)
	}
	if s.chunks != nil {
		t.Fatal("chunks kept after release")
	}
	// After release and without a slab, arrays come from the heap.
	if b := slabMake[uint64](s, 1<<16); len(b) != 1<<16 || b[0] != 0 {
		t.Fatal("slabMake after release")
	}
	if len(s.chunks) != 0 {
		t.Fatal("a chunk mapped after release")
	}
	if b := slabMake[uint64](nil, 1<<16); len(b) != 1<<16 {
		t.Fatal("slabMake(nil)")
	}
	var nilSlab *slab
	if err := nilSlab.release(); err != nil {
		t.Fatal(err)
	}
}
