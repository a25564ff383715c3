package symbolize_test

import (
	"errors"
	"os"
	"reflect"
	"testing"

	"github.com/elfimage/elfimage/internal/tooltest"
	"github.com/elfimage/elfimage/symbolize"
)

// TestSlabAnswers checks that Symbolizers whose indexes are in a slab
// (Open) answer as those whose indexes are on the heap (New), for a Go
// and a gcc binary (the slab forced for files of any size), and that
// Close releases the slab.
func TestSlabAnswers(t *testing.T) {
	defer symbolize.SetSlabMinFile(0)()
	files := []string{buildGo(t)}
	if gcc := tooltest.Optional(t, "gcc"); gcc != "" {
		files = append(files, buildC(t, gcc, "-O2", "-g"))
	}
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		addrs := codeAddrs(t, path, 4000, 5)
		opened, err := symbolize.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		heap, err := symbolize.New(data)
		if err != nil {
			t.Fatal(err)
		}
		if symbolize.SlabSupported && symbolize.SlabChunks(opened) < 0 || symbolize.SlabChunks(heap) >= 0 {
			t.Fatalf("slabs: Open's %d chunks, New's %d", symbolize.SlabChunks(opened), symbolize.SlabChunks(heap))
		}
		if err := opened.Prepare(addrs); err != nil {
			t.Fatal(err)
		}
		known := 0
		for _, a := range addrs {
			f1, err1 := opened.Symbolize(a, nil)
			f2, err2 := heap.Symbolize(a, nil)
			if !reflect.DeepEqual(f1, f2) || (err1 == nil) != (err2 == nil) {
				t.Fatalf("%s %#x: slab %v, %v; heap %v, %v", path, a, f1, err1, f2, err2)
			}
			if err1 == nil && f1[0].Line != 0 {
				known++
			}
		}
		if known < len(addrs)/2 {
			t.Fatalf("%s: %d of %d addresses have a line", path, known, len(addrs))
		}
		if symbolize.SlabSupported && symbolize.SlabChunks(opened) <= 0 {
			t.Fatalf("%s: the slab holds nothing after indexing", path)
		}
		if err := opened.Close(); err != nil {
			t.Fatal(err)
		}
		if symbolize.SlabChunks(opened) > 0 {
			t.Fatal("Close kept the slab's chunks")
		}
		if _, err := opened.Symbolize(addrs[0], nil); !errors.Is(err, symbolize.ErrClosed) {
			t.Fatalf("Symbolize after Close: %v", err)
		}
	}
}
