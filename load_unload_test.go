package elfimage

import (
	"errors"
	"testing"

	"github.com/elfimage/elfimage/addrmap"
)

// TestCloseWhileAcquired: an image closed while a reader holds it through
// Acquire stays mapped and readable until Release, which unmaps it.
func TestCloseWhileAcquired(t *testing.T) {
	mapEntry(t)
	before := liveMappings.Load()
	im, err := Load("x", buildTestImage(), nil)
	if err != nil {
		t.Fatal(err)
	}
	pc := im.Entry()
	ref, err := Acquire(pc)
	if err != nil || ref.Value() != im {
		t.Fatalf("Acquire = %v, %v", ref, err)
	}
	if allocs := testing.AllocsPerRun(100, func() {
		r, _ := Acquire(pc)
		r.Release()
	}); allocs != 0 {
		t.Errorf("Acquire/Release allocates %v times", allocs)
	}
	if err := im.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Acquire(pc); !errors.Is(err, addrmap.ErrNotFound) {
		t.Errorf("Acquire after Close: %v", err)
	}
	if liveMappings.Load() != before+1 {
		t.Fatalf("Close unmapped an image a reader holds")
	}
	_ = ref.Value().Bytes()[0] // still mapped
	ref.Release()
	if liveMappings.Load() != before {
		t.Errorf("last Release did not unmap the closed image")
	}
}
