package elfimage

import (
	"debug/elf"
	"testing"
	"unsafe"
)

// TestGDBHookEvent: loading fills gdbImageEvent as documented for a
// debugger (version 2, action, base, size, text address, the path's own
// bytes and length), and Close fills it again with action 2 before
// unmapping; a second Close changes nothing.
func TestGDBHookEvent(t *testing.T) {
	m := &Module{File: "hook.s", Arch: hostArch, Procs: []*Proc{{Name: "a", Code: []byte{0x90, 0xc3}}}}
	b, err := Link(m, LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	name := string([]byte("/some/dir/hook image.elf")) // not a constant: its bytes are the heap copy's
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
	check := func(action uint64) {
		t.Helper()
		gdbMu.Lock()
		ev := gdbImageEvent
		gdbMu.Unlock()
		if ev.Version != 2 || ev.Action != action || ev.Base != uint64(im.Base()) || ev.Size != im.Size() || ev.Text != text || text == 0 {
			t.Errorf("event %+v, want version 2, action %d, base %#x, size %#x, text %#x", ev, action, im.Base(), im.Size(), text)
		}
		// The path is the image's own string, as a debugger reads it.
		if ev.Path != uint64(uintptr(unsafe.Pointer(unsafe.StringData(name)))) || ev.PathLen != uint64(len(name)) {
			t.Errorf("event path at %#x (%d bytes), want %p (%d bytes)", ev.Path, ev.PathLen, unsafe.StringData(name), len(name))
		}
	}
	check(gdbActionLoaded)
	if err := im.Close(); err != nil {
		t.Fatal(err)
	}
	check(gdbActionUnloaded)
	gdbMu.Lock()
	gdbImageEvent.Action = 0
	gdbMu.Unlock()
	if err := im.Close(); err != nil {
		t.Fatal(err)
	}
	gdbMu.Lock()
	again := gdbImageEvent.Action
	gdbMu.Unlock()
	if again != 0 {
		t.Errorf("a second Close sent event action %d", again)
	}
}

// TestGDBHookNoAlloc: telling a debugger of a load and an unload
// allocates nothing (the interim hook used to copy the path and insert it
// into a global map on every load).
func TestGDBHookNoAlloc(t *testing.T) {
	im := &Image{path: "/a/path.elf", mem: make([]byte, 4096), plan: plan{size: 4096}}
	if n := testing.AllocsPerRun(100, func() {
		notifyDebuggerLoaded(im)
		notifyDebuggerUnloaded(im)
	}); n != 0 {
		t.Errorf("%v allocations per load and unload notification, want 0", n)
	}
}

// BenchmarkGDBHook: the debugger notifications of one load and its Close.
func BenchmarkGDBHook(b *testing.B) {
	im := &Image{path: "/a/path.elf", mem: make([]byte, 4096), plan: plan{size: 4096}}
	b.ReportAllocs()
	for b.Loop() {
		notifyDebuggerLoaded(im)
		notifyDebuggerUnloaded(im)
	}
}

// The event's layout is part of the debugger interface: seven uint64.
var _ = [1]struct{}{}[unsafe.Sizeof(gdbEvent{})-56]
