package elfimage

import (
	"debug/elf"
	"sync"
	"unsafe"
)

// Debugger hook: the interim way for a debugger to see images loaded by a
// running process, until the GDB JIT interface (GDB manual, "JIT
// Compilation Interface") is published by the jit/gdbjit package.
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
// are in RAX and RBX at the hook's first instruction), but the global event
// is the documented interface: its layout does not depend on the Go
// version, the ABI or the binary's DWARF (a debugger finds it by its
// .symtab name alone, so `-ldflags=-w` binaries work; `-ldflags=-s`
// binaries lose the names and with them the hook).

// gdbEvent is the layout a debugger reads at the symbol
// github.com/elfimage/elfimage.gdbImageEvent while stopped in one of the
// hooks: six little-endian uint64 fields, 48 bytes, in this order.
type gdbEvent struct {
	// Version of this layout: 1.
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
	// Path is the address of the NUL-terminated path given to Open (or the
	// name given to Load, which need not name a file: a debugger checks
	// that the file exists). The bytes stay valid until the image is
	// unloaded.
	Path uint64
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
	gdbImageEvent = gdbEvent{Version: 1}
	// gdbPaths keeps the NUL-terminated path copies of loaded images alive,
	// by image. The Go collector never moves heap objects, so the address
	// stored in gdbImageEvent.Path stays valid while the copy is here.
	gdbPaths = map[*Image][]byte{}
)

// gdbImageLoaded is called once for every image after it is loaded and
// registered, with gdbImageEvent describing it (Action 1). path is the
// NUL-terminated path of the image, base its load base. It does nothing;
// it exists for a debugger's breakpoint and must not be inlined.
//
//go:noinline
func gdbImageLoaded(path *byte, base uintptr) {}

// gdbImageUnloaded is called once for every image before it is unmapped
// by Close, with gdbImageEvent describing it (Action 2). It does nothing;
// it exists for a debugger's breakpoint and must not be inlined.
//
//go:noinline
func gdbImageUnloaded(path *byte, base uintptr) {}

// notifyDebuggerLoaded tells a debugger that im is loaded: it keeps a
// NUL-terminated copy of im's path, fills gdbImageEvent and calls
// gdbImageLoaded. Cost: one allocation of the path and a map insert.
func notifyDebuggerLoaded(im *Image) {
	p := make([]byte, len(im.path)+1)
	copy(p, im.path)
	gdbMu.Lock()
	defer gdbMu.Unlock()
	gdbPaths[im] = p
	im.setGDBEvent(gdbActionLoaded, p)
	gdbImageLoaded(&p[0], im.Base())
}

// notifyDebuggerUnloaded tells a debugger that im is about to be unmapped:
// it fills gdbImageEvent, calls gdbImageUnloaded and drops the path copy.
// It must be called while im's memory is still mapped; a second call for
// the same image does nothing.
func notifyDebuggerUnloaded(im *Image) {
	gdbMu.Lock()
	defer gdbMu.Unlock()
	p, ok := gdbPaths[im]
	if !ok {
		return
	}
	im.setGDBEvent(gdbActionUnloaded, p)
	gdbImageUnloaded(&p[0], im.Base())
	delete(gdbPaths, im)
}

// setGDBEvent fills gdbImageEvent for im; gdbMu must be held.
func (im *Image) setGDBEvent(action uint64, path []byte) {
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
	gdbImageEvent.Path = uint64(uintptr(unsafe.Pointer(&path[0])))
}
