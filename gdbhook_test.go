package elfimage

import (
	"bytes"
	"debug/elf"
	"testing"
	"unsafe"
)

// TestGDBHookEvent: loading fills gdbImageEvent as documented for a
// debugger (version, action, base, size, text address, NUL-terminated
// path), Close fills it again with action 2 before unmapping, and the path
// copy is released after Close (a second Close changes nothing).
func TestGDBHookEvent(t *testing.T) {
	m := &Module{File: "hook.s", Procs: []*Proc{{Name: "a", Code: []byte{0x90, 0xc3}}}}
	b, err := Link(m, LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const name = "/some/dir/hook image.elf"
	im, err := Load(name, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	var text uint64
	for _, s := range im.Segments() {
		if s.Flags&elf.PF_X != 0 {
			text = uint64(im.Base()) + s.Addr
			break
		}
	}
	gdbMu.Lock()
	path := gdbPaths[im]
	gdbMu.Unlock()
	check := func(action uint64) {
		t.Helper()
		gdbMu.Lock()
		ev := gdbImageEvent
		gdbMu.Unlock()
		if ev.Version != 1 || ev.Action != action || ev.Base != uint64(im.Base()) || ev.Size != im.Size() || ev.Text != text || text == 0 {
			t.Errorf("event %+v, want version 1, action %d, base %#x, size %#x, text %#x", ev, action, im.Base(), im.Size(), text)
		}
		// The path is the kept NUL-terminated copy.
		if ev.Path != uint64(uintptr(unsafe.Pointer(&path[0]))) {
			t.Errorf("event path at %#x, want the kept copy at %p", ev.Path, &path[0])
		}
		if i := bytes.IndexByte(path, 0); i != len(name) || string(path[:i]) != name {
			t.Errorf("kept path %q, want %q and a NUL", path, name)
		}
	}
	check(gdbActionLoaded)
	if err := im.Close(); err != nil {
		t.Fatal(err)
	}
	check(gdbActionUnloaded)
	gdbMu.Lock()
	_, kept := gdbPaths[im]
	gdbMu.Unlock()
	if kept {
		t.Error("path copy still kept after Close")
	}
	if err := im.Close(); err != nil {
		t.Fatal(err)
	}
}

// The event's layout is part of the debugger interface: six uint64.
var _ = [1]struct{}{}[unsafe.Sizeof(gdbEvent{})-48]
