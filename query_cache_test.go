package elfimage_test

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/lang/scheme"
)

// TestRememberedAnswers checks the answers Procedure and PositionAt
// remember against the uncached paths (Procedures, which decodes every
// table entry, and the whole decoded line program), over more procedures
// than the image remembers, in orders that hit, miss and evict; and that a
// remembered answer stays valid after Close.
func TestRememberedAnswers(t *testing.T) {
	const n = 700 // more than the 256 remembered answers
	var src strings.Builder
	for i := range n {
		fmt.Fprintf(&src, "(define* (q%d a #:optional (b %d))\n  \"Doc %d.\"\n  (let ((c (+ a b)))\n    (* c %d)))\n", i, i, i, i+1)
	}
	src.WriteString("(define (main) (q0 1))\n")
	m, err := scheme.Compile("cache.scm", []byte(src.String()))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cache.elf")
	if err := elfimage.WriteFile(path, m, elfimage.LinkOptions{}); err != nil {
		t.Fatal(err)
	}
	im, err := elfimage.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	procs, err := im.Procedures()
	if err != nil {
		t.Fatal(err)
	}
	lines, err := im.LineTable()
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64]elfimage.Procedure{}
	var addrs []uint64
	for _, p := range procs {
		if p.Internal || p.Doc == "" {
			continue
		}
		p.Internal = false // Procedure does not fill it
		for _, a := range []uint64{p.Start, p.Start + p.Size/2, p.Start + p.Size - 1} {
			want[a] = p
			addrs = append(addrs, a)
		}
	}
	if len(addrs) < 3*n {
		t.Fatalf("%d addresses of described procedures, want %d", len(addrs), 3*n)
	}
	var kept elfimage.Procedure
	for pass, stride := range []int{1, 1, 7, 389, 1} {
		for k := range addrs {
			a := addrs[k*stride%len(addrs)]
			for range 2 { // the second is answered from memory
				got, err := im.Procedure(a)
				if err != nil || !reflect.DeepEqual(got, want[a]) {
					t.Fatalf("pass %d: Procedure(%#x) = %+v, %v; want %+v", pass, a, got, err, want[a])
				}
				pos, err := im.PositionAt(a)
				row, ok := lines.Lookup(a)
				if !ok || err != nil {
					t.Fatalf("pass %d: PositionAt(%#x): %v (line table has it: %v)", pass, a, err, ok)
				}
				f, _ := lines.File(row.File)
				if wantPos := (elfimage.Position{File: f.Path, Line: int(row.Line), Column: int(row.Column)}); pos != wantPos {
					t.Fatalf("pass %d: PositionAt(%#x) = %v, want %v", pass, a, pos, wantPos)
				}
			}
		}
		kept, _ = im.Procedure(addrs[len(addrs)/2])
	}
	// A repeated query allocates nothing.
	a := addrs[5]
	if allocs := testing.AllocsPerRun(100, func() { _, _ = im.Procedure(a); _, _ = im.PositionAt(a) }); allocs != 0 {
		t.Errorf("repeated Procedure and PositionAt: %v allocations", allocs)
	}
	// Misses are not remembered: an address outside every procedure
	// fails every time.
	for range 2 {
		if _, err := im.Procedure(1 << 60); err == nil {
			t.Fatal("Procedure(1<<60) answered")
		}
	}
	if err := im.Close(); err != nil {
		t.Fatal(err)
	}
	if w := want[addrs[len(addrs)/2]]; !reflect.DeepEqual(kept, w) || !strings.HasPrefix(kept.Doc, "Doc ") {
		t.Fatalf("after Close: %+v, want %+v", kept, w)
	}
}
