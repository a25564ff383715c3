package symbolize

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
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

// TestSlabElemsPointerFree: every element type slabMake accepts (the
// union slabElem, read from slab.go) holds no pointer, string, slice,
// map, interface, channel or function, at any depth: a field added with
// one fails here, as a type added to the union without a case here does.
func TestSlabElemsPointerFree(t *testing.T) {
	types := map[string]reflect.Type{
		"int32":     reflect.TypeFor[int32](),
		"uint32":    reflect.TypeFor[uint32](),
		"uint64":    reflect.TypeFor[uint64](),
		"subr":      reflect.TypeFor[subr](),
		"seg":       reflect.TypeFor[seg](),
		"narrowRow": reflect.TypeFor[narrowRow](),
		"symbol":    reflect.TypeFor[symbol](),
	}
	f, err := parser.ParseFile(token.NewFileSet(), "slab.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != "slabElem" {
			return true
		}
		var terms func(e ast.Expr)
		terms = func(e ast.Expr) {
			switch e := e.(type) {
			case *ast.BinaryExpr:
				terms(e.X)
				terms(e.Y)
			case *ast.Ident:
				names = append(names, e.Name)
			default:
				t.Errorf("slabElem: term %T not a type name", e)
			}
		}
		for _, m := range ts.Type.(*ast.InterfaceType).Methods.List {
			terms(m.Type)
		}
		return false
	})
	if len(names) == 0 {
		t.Fatal("no slabElem union in slab.go")
	}
	var pointerFree func(typ reflect.Type) bool
	pointerFree = func(typ reflect.Type) bool {
		switch typ.Kind() {
		case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
			reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
			return true
		case reflect.Array:
			return pointerFree(typ.Elem())
		case reflect.Struct:
			for i := range typ.NumField() {
				if !pointerFree(typ.Field(i).Type) {
					return false
				}
			}
			return true
		}
		return false
	}
	for _, n := range names {
		typ, ok := types[n]
		if !ok {
			t.Errorf("slabElem's %s: not checked here (add it to types)", n)
			continue
		}
		if !pointerFree(typ) {
			t.Errorf("slabElem's %s (%v) holds a pointer: arrays in a slab must not", n, typ)
		}
	}
}

// TestSlabLane: a lane's arrays are zeroed, 8-aligned and disjoint; the
// unused tail of its newest array comes back for the next one (which
// starts right after the elements kept, and is zeroed again where the
// trimmed array had written beyond its length); trimming any other
// array moves nothing; spares left by a lane are handed out again.
func TestSlabLane(t *testing.T) {
	s := newSlab()
	if !slabSupported {
		if s.lane() != nil {
			t.Fatal("a lane without a slab")
		}
		return
	}
	defer s.release()
	l := s.lane()
	addr := func(b []uint32) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
	a := slabMake[uint32](l, 10_000)[:0]
	for i := range 7_000 {
		a = append(a, uint32(i+1))
	}
	// Written up to 7,000, kept 5,001 (an odd count: the tail starts at
	// the next 8 bytes).
	a = slabTrim(l, a[:5_001], 7_000)
	if len(a) != 5_001 || cap(a) != 5_001 || a[5_000] != 5_001 {
		t.Fatalf("trimmed: len %d cap %d", len(a), cap(a))
	}
	b := slabMake[uint32](l, 4_000)
	if got, want := addr(b), addr(a)+5_002*4; got != want {
		t.Fatalf("the next array at %#x, want %#x (right after the kept elements)", got, want)
	}
	for i, v := range b {
		if v != 0 {
			t.Fatalf("the next array's [%d] = %d, not zeroed again", i, v)
		}
	}
	// a is no longer the newest: trimming it moves nothing.
	if a2 := slabTrim(l, a[:100], 5_001); len(a2) != 100 || cap(a2) != 100 {
		t.Fatal("trim of an older array")
	}
	if c := slabMake[uint32](l, 300); addr(c) != addr(b)+4_000*4 {
		t.Fatal("an older array's trim gave space back")
	}
	// A second lane's arrays, and the first one's after them, do not
	// overlap; the first lane's window then moves (its rest a spare).
	l2 := s.lane()
	if l2 == l {
		t.Fatal("the same lane twice")
	}
	x := slabMake[uint64](l2, 1<<16)
	y := slabMake[uint64](l, 1<<16)
	for i := range x {
		x[i], y[i] = 1, 2
	}
	for i := range x {
		if x[i] != 1 {
			t.Fatal("a lane's arrays overlap another's")
		}
	}
	putLane(l2)
	if s.lane() != l2 {
		t.Fatal("an idle lane not reused")
	}
	s.mu.Lock()
	spares := len(s.spares)
	s.mu.Unlock()
	if spares == 0 {
		t.Fatal("no spare left by the lane whose window moved")
	}
	// A heap array (too small for the slab) is only resliced.
	h := slabMake[uint32](l, 8)
	if h = slabTrim(l, h[:3], 8); len(h) != 3 || cap(h) != 3 {
		t.Fatal("trim of a heap array")
	}
	if slabTrim[uint32](nil, make([]uint32, 4, 9), 4) == nil {
		t.Fatal("trim without a lane")
	}
	if err := s.release(); err != nil {
		t.Fatal(err)
	}
	if b := slabMake[uint32](l, 1<<12); len(b) != 1<<12 {
		t.Fatal("a lane after release")
	}
	if s.lane() == nil || s.inUse() != 0 {
		t.Fatal("lane or inUse after release")
	}
}

// TestSlabLanesConcurrent: goroutines allocating from lanes of one slab
// (taken and put back for each of their jobs), trimming as they go, each
// filling its arrays with its own mark, find their marks intact at the
// end. Run with -race.
func TestSlabLanesConcurrent(t *testing.T) {
	s := newSlab()
	if s == nil {
		t.Skip("no slab here")
	}
	defer s.release()
	const workers, jobs = 4, 60
	kept := make([][][]uint32, workers)
	done := make(chan int)
	for w := range workers {
		go func() {
			defer func() { done <- w }()
			for j := range jobs {
				l := s.lane()
				for k := range 3 {
					n := 500 + (w*7919+j*104729+k*31)%20_000
					a := slabMake[uint32](l, n)[:0]
					for range n / (k + 2) {
						a = append(a, uint32(w+1))
					}
					a = slabTrim(l, a[:len(a)/2], len(a))
					kept[w] = append(kept[w], a)
				}
				putLane(l)
			}
		}()
	}
	for range workers {
		<-done
	}
	for w, arrays := range kept {
		for _, a := range arrays {
			for _, v := range a {
				if v != uint32(w+1) {
					t.Fatalf("worker %d: an array holds %d", w, v)
				}
			}
		}
	}
}
