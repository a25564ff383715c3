package elfimage_test

import (
	"debug/elf"
	"errors"
	"os"
	"testing"

	"github.com/elfimage/elfimage"

	"github.com/elfimage/elfimage/internal/qemutest"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// TestTruncatedAfterLoad: a file truncated by someone else after it was
// mapped makes reads of the lost pages raise SIGBUS; the debug queries
// turn that into ErrFault instead of killing the process, and the image
// still closes.
func TestTruncatedAfterLoad(t *testing.T) {
	if qemutest.Emulated() != "" {
		t.Skip("under qemu-user: qemu does not deliver the guest a SIGBUS with the faulting address of a truncated mapping (" + qemutest.Emulated() + ")")
	}
	path := writeDemo(t, elfimage.LinkOptions{})
	im, err := elfimage.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	if !im.Mapped() {
		tooltest.Skip(t, "the image was not mapped from its file")
	}
	ef, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	text := ef.Section(".text")
	ef.Close()
	if text == nil || text.Size <= 0x20 {
		t.Fatalf("the demo image has no .text of more than 0x20 bytes: %v", text)
	}
	pc := text.Addr + 0x20 // inside a procedure of the demo
	// Keep the loaded part (the tail's first bytes share its last page)
	// and drop the rest of the tail with the debug information.
	if err := os.Truncate(path, int64((im.Size()+4095)&^4095)); err != nil {
		t.Fatal(err)
	}
	procs := 0
	for _, q := range []struct {
		name string
		run  func() error
	}{
		{"Sections", func() error { _, err := im.Sections(); return err }},
		{"Procedure", func() error { _, err := im.Procedure(pc); return err }},
		{"PositionAt", func() error { _, err := im.PositionAt(pc); return err }},
		{"ProcedureAt", func() error { _, err := im.ProcedureAt(pc); return err }},
		{"Locals", func() error { _, err := im.Locals(pc); return err }},
	} {
		err := q.run()
		if !errors.Is(err, elfimage.ErrFault) {
			t.Errorf("%s on a truncated file: %v, want ErrFault", q.name, err)
		} else {
			procs++
		}
	}
	if procs == 0 {
		t.Fatal("no query saw the fault")
	}
}
