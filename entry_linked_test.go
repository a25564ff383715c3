package elfimage

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/native"
)

var updateEntryImages = flag.Bool("update-entry-images", false, "rewrite entry_x86_64.elf and entry_aarch64.elf from this tree's Link")

// TestEntryImageLinked checks that the prelinked entry images that
// EntryImage loads are what this tree's Link writes for each Arch, so that
// a change to Link or to the entry routine cannot leave them stale.
func TestEntryImageLinked(t *testing.T) {
	for _, c := range []struct {
		a    *arch.Arch
		file string
	}{{arch.X86_64, "entry_x86_64.elf"}, {arch.AArch64, "entry_aarch64.elf"}} {
		b, err := Link(entryModuleFor(c.a), LinkOptions{})
		if err != nil {
			t.Fatalf("%s: Link: %v", c.a.Name, err)
		}
		if *updateEntryImages {
			if err := os.WriteFile(c.file, b, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got := entryImageFor(c.a); !bytes.Equal(got, b) {
			t.Errorf("%s: the embedded %s (%d bytes) is not what Link writes (%d bytes); rerun with -update-entry-images", c.a.Name, c.file, len(got), len(b))
		}
	}
}

// TestEntrySPOffsets checks the entry routines' copies of package native's
// stack layout (which the prelinked images' CFI encodes) against package
// native on the host.
func TestEntrySPOffsets(t *testing.T) {
	var routine, saved int64
	switch hostArch {
	case arch.X86_64:
		routine, saved = entryRoutineSPOffsetX86_64, savedSPOffsetX86_64
	case arch.AArch64:
		routine, saved = a64EntryRoutineSPOffset, a64SavedSPOffset
	default:
		t.Skipf("no entry routine on %s", hostArch.Name)
	}
	if routine != native.EntryRoutineSPOffset || saved != native.SavedSPOffset {
		t.Errorf("%s: entry routine SP offset %d, saved SP offset %d; package native has %d and %d",
			hostArch.Name, routine, saved, native.EntryRoutineSPOffset, native.SavedSPOffset)
	}
}
