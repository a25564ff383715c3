package symbolize

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"testing"

	"github.com/elfimage/elfimage/internal/qemutest"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// TestLineTableAsync: the line table decoded on build's extra goroutine
// equals the one decoded in place, and a fault there (the file truncated
// under its mapping) reaches the caller's guard as ErrFault, not a crash
// of the process.
func TestLineTableAsync(t *testing.T) {
	gcc := tooltest.Require(t, "gcc")
	dir := t.TempDir()
	path := filepath.Join(dir, "prog")
	args := []string{"-O2", "-g", "-o", path, "hash.c", "main.c", "parse.c", "sort.c", "tree.c"}
	cmd := exec.Command(gcc, args...)
	cmd.Dir = "testdata/csrc"
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, msg)
	}
	open := func() (*Symbolizer, *dwarfData) {
		s, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		d, err := s.dwarf()
		if err != nil || d == nil || len(d.units) == 0 {
			t.Fatalf("dwarf: %v, %v", d, err)
		}
		return s, d
	}
	s1, d1 := open()
	defer s1.Close()
	s2, d2 := open()
	defer s2.Close()
	compared := 0
	for i := range d1.units {
		u1, u2 := &d1.units[i], &d2.units[i]
		if !u1.root.hasStmt {
			continue
		}
		want, werr := d1.lineTable(u1)
		got, gerr := d2.lineTableAsync(u2)()
		if werr != nil || gerr != nil {
			t.Fatalf("unit %d: in place %v, async %v", i, werr, gerr)
		}
		if !reflect.DeepEqual(want, got) {
			t.Errorf("unit %d: the async line table differs", i)
		}
		compared++
	}
	if compared == 0 {
		t.Fatal("no unit with a line program")
	}

	if why := qemutest.Emulated(); why != "" {
		t.Skipf("the fault half: %s (qemu-user delivers SIGBUS without the faulting address)", why)
	}
	s3, d3 := open()
	defer s3.Close()
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	err := func() (err error) {
		defer s3.guard(&err)
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		for i := range d3.units {
			if d3.units[i].root.hasStmt {
				_, err = d3.lineTableAsync(&d3.units[i])()
				return err
			}
		}
		return nil
	}()
	if !errors.Is(err, ErrFault) {
		t.Fatalf("after truncation: %v, want ErrFault", err)
	}
}
