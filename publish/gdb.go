package publish

import (
	"errors"
	"fmt"
	"sync"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/jit/gdbjit"
	"github.com/elfimage/elfimage/native"
)

// Debugger view of loaded images, published through the GDB JIT interface
// (GDB manual, "JIT Compilation Interface"; package jit/gdbjit).
//
// gdb does not relocate the symbol files it is given, so an image loaded at
// an arbitrary base is published as its own file moved to that base
// (elfimage.Rebase, [elfimage.Image.Symfile]): a copy of the whole file
// (headers, symbols, DWARF, CFI) in which every address is the run-time
// one. This costs one copy of the file and a pass over its headers,
// symbols and listed debug addresses at publication (BENCHMARKS.md), and
// the copy's memory while published; nothing at load time when not asked
// for. The alternatives were weighed: linking every image at a preferred
// base and mapping it there when free would spare the copy but break the
// layout rule p_offset == p_vaddr and fall back to this path whenever the
// address is taken; the loader's debugger hook (gdbhook.go in the root
// package) needs a gdb script. Published images are complete: gdb
// resolves breakpoints by procedure name or file:line, unwinds through
// .eh_frame, prints arguments and locals from their location lists, and a
// gdb attached later (gdb -p) finds them by walking the list.

// ErrPublished is returned (wrapped, naming the image) by [GDB] for an
// image that is already published.
var ErrPublished = errors.New("publish: image already published to gdb")

// gdbState is one image's publication: its GDB JIT entry (nil while
// being published) and the removal of its close hook.
type gdbState struct {
	entry  *gdbjit.Entry
	remove func()
}

var (
	// gdbMu guards published. An image's state is owned by whoever
	// removes it from the map under gdbMu: that one unregisters the entry.
	gdbMu     sync.Mutex
	published = map[*elfimage.Image]*gdbState{}
	// entryMu serializes publishing the entry image.
	entryMu sync.Mutex
)

// GDB registers images with gdb through the GDB JIT interface, each as its
// [elfimage.Image.Symfile] written straight into the interface's entry
// memory (one debugger notification per image, which is what the
// interface allows: see gdbjit.RegisterBatch). A gdb attached now or later
// then knows their procedures, lines, variables and frames at their
// run-time addresses; pending breakpoints on their procedures resolve.
// Closing a published image unregisters it before unmapping it, as the
// interface requires (through [elfimage.Image.OnClose]); [UnpublishGDB]
// does so earlier. Every call also publishes the library's entry image
// ([elfimage.EntryImage], linked and loaded by this call if no image was
// loaded yet), the frame between every image's code and its Go caller,
// unless it is published already: GDB() with no images publishes just
// that, for a program whose code gdb learns of otherwise, through package
// gdbjit. Where there is no entry image (outside amd64, or when the
// program installed its own entry routine) there is nothing to add.
//
// Errors: [ErrPublished] (wrapped, naming the image) for an image published
// already, elfimage.ErrClosed (wrapped) for a closed image, the errors of
// Symfile and EntryImage, or a gdbjit error; on error none of images is
// published. Cost: Symfile per image into one populated mmap of its size;
// with gdb attached, gdb reads and indexes each symbol file while the
// process is stopped (BENCHMARKS.md).
func GDB(images ...*elfimage.Image) error {
	ent, err := elfimage.EntryImage()
	switch {
	case errors.Is(err, errors.ErrUnsupported), errors.Is(err, native.ErrEntrySet):
		ent = nil
	case err != nil:
		return err
	}
	for _, im := range images {
		if GDBPublished(im) {
			return fmt.Errorf("%w: %s", ErrPublished, im.Path())
		}
	}
	if ent != nil {
		if err := publishEntry(ent); err != nil {
			return err
		}
	}
	for i, im := range images {
		if im == ent {
			continue // published above
		}
		if err := publishOne(im); err != nil {
			for _, done := range images[:i] {
				if done != ent {
					UnpublishGDB(done)
				}
			}
			return err
		}
	}
	return nil
}

// publishEntry publishes the entry image unless it is published already:
// gdb needs its CFI to unwind from any published image's code into the Go
// code that called it.
func publishEntry(ent *elfimage.Image) error {
	entryMu.Lock()
	defer entryMu.Unlock()
	if GDBPublished(ent) {
		return nil
	}
	return publishOne(ent)
}

// publishOne registers im's Symfile with gdb and ties the registration to
// im's life.
func publishOne(im *elfimage.Image) error {
	st := &gdbState{}
	gdbMu.Lock()
	if published[im] != nil {
		gdbMu.Unlock()
		return fmt.Errorf("%w: %s", ErrPublished, im.Path())
	}
	published[im] = st // reserved: entry nil until registered
	gdbMu.Unlock()
	// Close unregisters the entry before unmapping, unless UnpublishGDB
	// took the state first; registered before the entry, so that a
	// closed image is refused before its memory is read.
	remove, err := im.OnClose(func() error {
		gdbMu.Lock()
		mine := published[im] == st
		if mine {
			delete(published, im)
		}
		e := st.entry
		gdbMu.Unlock()
		if !mine || e == nil {
			return nil
		}
		if err := e.Unregister(); err != nil {
			return fmt.Errorf("publish: %s: unpublish from gdb: %w", im.Path(), err)
		}
		return nil
	})
	if err != nil {
		gdbMu.Lock()
		delete(published, im)
		gdbMu.Unlock()
		return fmt.Errorf("publish: %w", err)
	}
	e, err := gdbjit.RegisterFunc(len(im.Bytes()), im.SymfileInto)
	gdbMu.Lock()
	mine := published[im] == st
	if err == nil && mine {
		st.entry, st.remove = e, remove
		gdbMu.Unlock()
		return nil
	}
	if mine {
		delete(published, im)
	}
	gdbMu.Unlock()
	remove()
	if err != nil {
		return fmt.Errorf("publish: %s: to gdb: %w", im.Path(), err)
	}
	e.Unregister() // closed while publishing
	return fmt.Errorf("publish: %s: %w while publishing", im.Path(), elfimage.ErrClosed)
}

// UnpublishGDB unregisters the image from the GDB JIT interface (gdb drops
// its symbols). It does nothing for an image that is not published.
// Errors: the gdbjit error, wrapped. Cost: one debugger notification and
// an munmap.
func UnpublishGDB(im *elfimage.Image) error {
	gdbMu.Lock()
	st := published[im]
	if st == nil || st.entry == nil { // not published, or still being published
		gdbMu.Unlock()
		return nil
	}
	delete(published, im)
	gdbMu.Unlock()
	st.remove()
	if err := st.entry.Unregister(); err != nil {
		return fmt.Errorf("publish: %s: unpublish from gdb: %w", im.Path(), err)
	}
	return nil
}

// GDBPublished reports whether the image is published to gdb (or being
// published by a concurrent [GDB]). Cost: one map lookup under a lock.
func GDBPublished(im *elfimage.Image) bool {
	gdbMu.Lock()
	defer gdbMu.Unlock()
	return published[im] != nil
}
