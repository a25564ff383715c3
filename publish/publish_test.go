package publish_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/publish"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if benchPath != "" {
		os.RemoveAll(filepath.Dir(benchPath))
	}
	os.Exit(code)
}

// twoProcs links and loads an image of two procedures, f and g.
func twoProcs(t *testing.T) *elfimage.Image {
	t.Helper()
	cfi := []frame.Insn{}
	m := &elfimage.Module{File: "two.s", Procs: []*elfimage.Proc{
		{Name: "f", Code: []byte{0x90, 0x90, 0xc3}, CFI: cfi},
		{Name: "g", Code: []byte{0x90, 0xc3}, CFI: cfi},
	}}
	b, err := elfimage.Link(m, elfimage.LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The code is x86-64's (Module.Arch nil) and is never run: it is
	// loaded as x86-64 on any machine (Load's default Arch is the running
	// program's).
	im, err := elfimage.Load("two.elf", b, &elfimage.LoadOptions{Arch: arch.X86_64})
	if err != nil {
		t.Fatal(err)
	}
	return im
}

// TestEntryPublished: GDB publishes the entry image with the first
// image, and the perf map entries and jitdump functions of any image
// include the entry routine, with its CFI, in address order.
func TestEntryPublished(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the entry image exists on amd64 only")
	}
	im := twoProcs(t)
	defer im.Close()
	ent, err := elfimage.EntryImage()
	if err != nil {
		t.Fatal(err)
	}
	if err := publish.GDB(im); err != nil {
		t.Fatal(err)
	}
	if !publish.GDBPublished(im) || !publish.GDBPublished(ent) {
		t.Error("the image or the entry image is not published to gdb after GDB")
	}
	// Published again explicitly, or with no image: nothing to do; once
	// unpublished, GDB() publishes it again.
	if err := publish.GDB(ent); !errors.Is(err, publish.ErrPublished) {
		t.Errorf("GDB(entry image) when published: %v, want ErrPublished", err)
	}
	if err := publish.GDB(im); !errors.Is(err, publish.ErrPublished) {
		t.Errorf("GDB(image) when published: %v, want ErrPublished", err)
	}
	if err := publish.GDB(); err != nil {
		t.Errorf("GDB(): %v", err)
	}
	if err := publish.UnpublishGDB(ent); err != nil || publish.GDBPublished(ent) {
		t.Fatalf("UnpublishGDB of the entry image: %v (published %v)", err, publish.GDBPublished(ent))
	}
	if err := publish.GDB(); err != nil || !publish.GDBPublished(ent) {
		t.Errorf("GDB() with the entry image unpublished: %v (published %v)", err, publish.GDBPublished(ent))
	}
	if err := publish.UnpublishGDB(ent); err != nil {
		t.Fatal(err)
	}
	if err := publish.GDB(ent); err != nil || !publish.GDBPublished(ent) {
		t.Errorf("GDB(entry image): %v (published %v)", err, publish.GDBPublished(ent))
	}
	entries, err := publish.PerfMapEntries(im)
	if err != nil {
		t.Fatal(err)
	}
	fns, err := publish.JitdumpFunctions(im)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 || len(fns) != 3 {
		t.Fatalf("%d perf map entries, %d jitdump functions; want the image's 2 and the entry routine", len(entries), len(fns))
	}
	entryProc, err := ent.ProcedureByName(elfimage.EntryName)
	if err != nil {
		t.Fatal(err)
	}
	entryCode := ent.Bytes()[entryProc.Start : entryProc.Start+entryProc.Size]
	found := 0
	for i := range entries {
		if i > 0 && (entries[i].Start <= entries[i-1].Start || fns[i].Addr <= fns[i-1].Addr) {
			t.Errorf("entries or functions not in address order: %+v", entries)
		}
		if entries[i].Name == elfimage.EntryName {
			found++
			if entries[i].Start != uint64(ent.Entry()) || entries[i].Size != uint64(len(entryCode)) {
				t.Errorf("perf map entry %+v, want the entry routine at %#x", entries[i], ent.Entry())
			}
		}
		if fns[i].Name == elfimage.EntryName {
			found++
			if fns[i].Addr != uint64(ent.Entry()) || string(fns[i].Code) != string(entryCode) || fns[i].CIE == nil || !fns[i].CIE.Signal || len(fns[i].CFI) == 0 {
				t.Errorf("jitdump function %+v, want the entry routine with its signal-frame CFI", fns[i])
			}
		}
	}
	if found != 2 {
		t.Errorf("the entry routine is in %d of the two lists", found)
	}
	// The entry image's own lists name it once.
	if own, err := publish.PerfMapEntries(ent); err != nil || len(own) != 1 {
		t.Errorf("the entry image's perf map entries: %+v, %v", own, err)
	}
}

// TestCloseUnpublishes: closing a published image unregisters it (its
// close hook runs once), and a closed image cannot be published.
func TestCloseUnpublishes(t *testing.T) {
	im := twoProcs(t)
	if err := publish.GDB(im); err != nil {
		t.Fatal(err)
	}
	if !publish.GDBPublished(im) {
		t.Fatal("not published after GDB")
	}
	if err := im.Close(); err != nil {
		t.Fatal(err)
	}
	if publish.GDBPublished(im) {
		t.Error("still published after Close")
	}
	if err := publish.UnpublishGDB(im); err != nil {
		t.Errorf("UnpublishGDB after Close: %v", err)
	}
	if err := publish.GDB(im); !errors.Is(err, elfimage.ErrClosed) {
		t.Errorf("GDB of a closed image: %v, want ErrClosed", err)
	}
	if publish.GDBPublished(im) {
		t.Error("a closed image is published after a failed GDB")
	}
	// Unpublished before Close: Close has nothing to unregister.
	im2 := twoProcs(t)
	if err := publish.GDB(im2); err != nil {
		t.Fatal(err)
	}
	if err := publish.UnpublishGDB(im2); err != nil || publish.GDBPublished(im2) {
		t.Fatalf("UnpublishGDB: %v (published %v)", err, publish.GDBPublished(im2))
	}
	if err := im2.Close(); err != nil {
		t.Fatal(err)
	}
}
