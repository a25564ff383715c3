package elfimage

import (
	"debug/elf"
	"sync"
	"unsafe"
)

// Debugger hook: the loader's zero-copy way for a debugger to see the
// images a running process loads, beside the GDB JIT interface (GDB
// manual, "JIT Compilation Interface"), which package publish uses and
// which copies each image. Like ld.so's r_debug breakpoint (r_brk), it is
// part of the loader and costs a load nothing but two empty calls and a
// few stores: no allocation, no import of any publisher.
//
// After [Open] or [Load] has mapped, relocated and registered an image, the
// loader fills [gdbImageEvent] and calls gdbImageLoaded; [Image.Close]
// does the same with gdbImageUnloaded before it unmaps the image. Both
// functions do nothing: a debugger puts a breakpoint on them by name,
//
//	break 'github.com/elfimage/elfimage.gdbImageLoaded'
//	break 'github.com/elfimage/elfimage.gdbImageUnloaded'
//
// and on each hit reads the event (below) and runs
// `add-symbol-file PATH -o BASE` or `remove-symbol-file -a TEXT`.
// internal/gdbtest holds a gdb Python script that does exactly that.
//
// The arguments are also passed to the hooks (with Go's register ABI they
// are in RAX, RBX and RCX at the hook's first instruction), but the global event
// is the documented interface: its layout does not depend on the Go
// version, the ABI or the binary's DWARF (a debugger finds it by its
// .symtab name alone, so `-ldflags=-w` binaries work; `-ldflags=-s`
// binaries lose the names and with them the hook).

// gdbEvent is the layout a debugger reads at the symbol
// github.com/elfimage/elfimage.gdbImageEvent while stopped in one of the
// hooks: seven little-endian uint64 fields, 56 bytes, in this order.
// Version 1 had six, ending with the address of a NUL-terminated copy of
// the path, which cost an allocation and a global map insert per load;
// version 2 points at the path's own bytes and gives their length.
type gdbEvent struct {
	// Version of this layout: 2.
	Version uint64
	// Action: 1 the image was loaded (gdbImageLoaded), 2 it is about to be
	// unloaded (gdbImageUnloaded).
	Action uint64
	// Base is the run-time address of the image's link-time address 0: the
	// offset to pass to `add-symbol-file -o`.
	Base uint64
	// Size is the size in bytes of the loaded range [Base, Base+Size).
	Size uint64
	// Text is the run-time address of the first byte of the first
	// executable PT_LOAD segment, or 0 when there is none: an address for
	// `remove-symbol-file -a`.
	Text uint64
	// Path is the address of the path given to Open (or of the name
	// given to Load, which need not name a file: a debugger checks that
	// the file exists), PathLen bytes of UTF-8 without a terminator
	// (Path is 0 when PathLen is). The bytes are those of
	// [Image.Path], kept alive by the image until it is unloaded.
	Path    uint64
	PathLen uint64
}

// Actions of gdbEvent.
const (
	gdbActionLoaded   = 1
	gdbActionUnloaded = 2
)

var (
	// gdbMu serialises events: an event and its hook call happen under it,
	// so that a debugger stopped in a hook reads the matching event.
	gdbMu sync.Mutex
	// gdbImageEvent is read by debuggers; see gdbEvent.
	gdbImageEvent = gdbEvent{Version: 2}
)

// gdbImageLoaded is called once for every image after it is loaded and
// registered, with gdbImageEvent describing it (Action 1). path points at
// the image's path (len n), base is its load base. It does nothing; it
// exists for a debugger's breakpoint and must not be inlined.
//
//go:noinline
func gdbImageLoaded(path *byte, n int, base uintptr) {}

// gdbImageUnloaded is called once for every image before it is unmapped
// by Close, with gdbImageEvent describing it (Action 2). It does nothing;
// it exists for a debugger's breakpoint and must not be inlined.
//
//go:noinline
func gdbImageUnloaded(path *byte, n int, base uintptr) {}

// notifyDebuggerLoaded tells a debugger that im is loaded: it fills
// gdbImageEvent and calls gdbImageLoaded. Cost: a lock, a few stores and
// an empty call; no allocation.
func notifyDebuggerLoaded(im *Image) {
	gdbMu.Lock()
	defer gdbMu.Unlock()
	im.setGDBEvent(gdbActionLoaded)
	gdbImageLoaded(unsafe.StringData(im.path), len(im.path), im.Base())
}

// notifyDebuggerUnloaded tells a debugger that im is about to be unmapped:
// it fills gdbImageEvent and calls gdbImageUnloaded. It must be called
// once per image (Close guards it with Image.closed), while im's memory
// is still mapped.
func notifyDebuggerUnloaded(im *Image) {
	gdbMu.Lock()
	defer gdbMu.Unlock()
	im.setGDBEvent(gdbActionUnloaded)
	gdbImageUnloaded(unsafe.StringData(im.path), len(im.path), im.Base())
}

// setGDBEvent fills gdbImageEvent for im; gdbMu must be held.
func (im *Image) setGDBEvent(action uint64) {
	base := uint64(im.Base())
	var text uint64
	for _, s := range im.segs {
		if s.Flags&elf.PF_X != 0 && s.Size > 0 {
			text = base + s.Addr
			break
		}
	}
	gdbImageEvent.Action = action
	gdbImageEvent.Base = base
	gdbImageEvent.Size = im.size
	gdbImageEvent.Text = text
	gdbImageEvent.Path = uint64(uintptr(unsafe.Pointer(unsafe.StringData(im.path))))
	gdbImageEvent.PathLen = uint64(len(im.path))
}
