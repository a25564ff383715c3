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
