package elfimage

import (
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/elfimage/elfimage/jit/gdbjit"
)

// Debugger view of loaded images, published through the GDB JIT interface
// (GDB manual, "JIT Compilation Interface"; package jit/gdbjit).
//
// gdb does not relocate the symbol files it is given, so an image loaded at
// an arbitrary base is published as its own file moved to that base
// ([Rebase]): a copy of the whole file (headers, symbols, DWARF, CFI) in
// which every address is the run-time one. This costs one copy of the file
// and a pass over its headers, symbols and listed debug addresses at
// publication (BENCHMARKS.md), and the copy's memory while published;
// nothing at load time when not asked for. The alternatives were weighed:
// linking every image at a preferred base and mapping it there when free
// would spare the copy but break the layout rule p_offset == p_vaddr and
// fall back to this path whenever the address is taken; the interim hook
// in gdbhook.go needs a gdb script. Published images are complete: gdb
// resolves breakpoints by procedure name or file:line, unwinds through
// .eh_frame, prints arguments and locals from their location lists, and a
// gdb attached later (gdb -p) finds them by walking the list.

// ErrPublished is returned by [PublishGDB] for an image that is already
// published.
var ErrPublished = errors.New("elfimage: image already published to gdb")

// Symfile returns the image's debugging view at its run-time address:
// [Rebase] of the image file by [Image.Base]. It is the symbol file
// [PublishGDB] hands to gdb; written to a file it is also what
// `add-symbol-file FILE` (without -o) takes. Errors: those of Rebase,
// [ErrFault] when the mapped file was truncated. Cost: one copy of the
// file, linear in its symbols and debug addresses.
func (im *Image) Symfile() ([]byte, error) {
	out := make([]byte, len(im.data))
	if err := im.symfileInto(out); err != nil {
		return nil, err
	}
	return out, nil
}

// symfileInto writes the Symfile into out (len(out) == len(im.data)).
func (im *Image) symfileInto(out []byte) (err error) {
	defer im.guardFaults(&err, debug.SetPanicOnFault(true))
	return rebaseInto(im.path, out, im.data, uint64(im.Base()))
}

// PublishGDB registers images with gdb through the GDB JIT interface, each
// as its [Image.Symfile] written straight into the interface's entry
// memory (one debugger notification per image, which is what the
// interface allows: see gdbjit.RegisterBatch). A gdb attached now or later then knows their
// procedures, lines, variables and frames at their run-time addresses;
// pending breakpoints on their procedures resolve. [Image.Close]
// unregisters a published image before unmapping it, as the interface
// requires; [Image.UnpublishGDB] does so earlier. Every call also
// publishes the library's entry image ([EntryImage]), the frame between
// every image's code and its Go caller, when it is loaded and not
// published yet (PublishGDB() with no images publishes just that, for a
// program whose code gdb learns of otherwise, through package gdbjit).
//
// Errors: [ErrPublished] (wrapped, naming the image) for an image published
// already, the errors of Symfile, or a gdbjit error; on error none of
// images is published. Cost: Symfile per image into one populated mmap of its size;
// with gdb attached, gdb reads and indexes each symbol file while the
// process is stopped (BENCHMARKS.md).
func PublishGDB(images ...*Image) error {
	for _, im := range images {
		im.closeMu.Lock()
		closed, published := im.closed, im.gdb != nil
		im.closeMu.Unlock()
		if closed {
			return fmt.Errorf("elfimage: %s: publish a closed image", im.path)
		}
		if published {
			return fmt.Errorf("%w: %s", ErrPublished, im.path)
		}
	}
	if err := publishEntryGDB(); err != nil {
		return err
	}
	for i, im := range images {
		if im.isEntry() {
			continue // published above
		}
		if err := im.publishGDB(); err != nil {
			for _, done := range images[:i] {
				done.UnpublishGDB()
			}
			return err
		}
	}
	return nil
}

// publishGDB registers im's Symfile with gdb.
func (im *Image) publishGDB() error {
	e, err := gdbjit.RegisterFunc(len(im.data), im.symfileInto)
	if err == nil {
		im.closeMu.Lock()
		if im.closed || im.gdb != nil { // lost a race with Close or another PublishGDB
			err = fmt.Errorf("elfimage: %s: closed or published while publishing", im.path)
		} else {
			im.gdb = e
		}
		im.closeMu.Unlock()
		if err != nil {
			e.Unregister()
		}
	}
	if err != nil {
		return fmt.Errorf("elfimage: publish to gdb: %w", err)
	}
	return nil
}

// publishEntryGDB publishes the entry image ([EntryImage]), when loaded,
// unless it is published already: gdb needs its CFI to unwind from any
// published image's code into the Go code that called it.
func publishEntryGDB() error {
	ent := entryImg.Load()
	if ent == nil {
		return nil
	}
	entryMu.Lock()
	defer entryMu.Unlock()
	if ent.GDBPublished() {
		return nil
	}
	return ent.publishGDB()
}

// UnpublishGDB unregisters the image from the GDB JIT interface (gdb drops
// its symbols). It does nothing for an image that is not published.
// Errors: the gdbjit error, wrapped. Cost: one debugger notification and
// an munmap.
func (im *Image) UnpublishGDB() error {
	im.closeMu.Lock()
	defer im.closeMu.Unlock()
	return im.unpublishLocked()
}

// GDBPublished reports whether the image is published to gdb.
func (im *Image) GDBPublished() bool {
	im.closeMu.Lock()
	defer im.closeMu.Unlock()
	return im.gdb != nil
}

func (im *Image) unpublishLocked() error {
	if im.gdb == nil {
		return nil
	}
	e := im.gdb
	im.gdb = nil
	if err := e.Unregister(); err != nil {
		return fmt.Errorf("elfimage: %s: unpublish from gdb: %w", im.path, err)
	}
	return nil
}
