package elfimage

import (
	"encoding/binary"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/native"
	"github.com/elfimage/elfimage/unwind"
)

// TestEntryBacktraceAArch64 is TestEntryBacktrace on arm64 (under
// qemu-user in CI): registers captured inside code called through
// native.Call unwind with Backtrace through the image's frame and the
// library's AArch64 entry frame into the Go frame that called it
// (native.trampoline), where the walk ends cleanly.
func TestEntryBacktraceAArch64(t *testing.T) {
	b, err := Link(captureModuleAArch64(), LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	im, err := Load("capture.elf", b, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	s, err := native.NewStack(64 << 10)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	buf, err := native.Alloc(24)
	if err != nil {
		t.Fatal(err)
	}
	defer native.Free(buf)
	native.Call(im.Entry(), s, uintptr(unsafe.Pointer(&buf[0])))
	regs := make([]uint64, arch.AArch64.NumRegs)
	regs[arch.AArch64_FP] = binary.LittleEndian.Uint64(buf)
	regs[arch.AArch64_SP] = binary.LittleEndian.Uint64(buf[8:])
	regs[arch.AArch64_LR] = binary.LittleEndian.Uint64(buf[16:])
	// The native stack keeps the call's words after the return; the walk
	// reads only the native stack.
	mem := &unwind.Local{Lo: uint64(s.Bottom()), Hi: uint64(s.Top())}
	frames, err := Backtrace(regs, mem, BacktraceOptions{AtCall: true})
	if err != nil {
		t.Fatalf("Backtrace: %v (frames %+v)", err, frames)
	}
	var names []string
	for _, f := range frames {
		names = append(names, f.Proc.Name)
	}
	if len(frames) != 3 || frames[0].Proc.Name != "outer" || frames[0].Pos.Line != 4 || frames[1].Proc.Name != EntryName ||
		frames[1].Image == nil || frames[2].Image != nil {
		t.Fatalf("frames %q (%+v), want outer at line 4, %s, then the Go caller", names, frames, EntryName)
	}
	fn := runtime.FuncForPC(uintptr(frames[2].PC))
	if fn == nil || !strings.HasPrefix(fn.Name(), "github.com/elfimage/elfimage/native.trampoline") {
		t.Errorf("the last frame's pc %#x is in %v, want native.trampoline", frames[2].PC, fn)
	}
	if frames[1].CFA != uint64(s.Top()-32) {
		t.Errorf("the entry frame's CFA %#x, want Top-32 %#x", frames[1].CFA, s.Top()-32)
	}
	t.Logf("frames %q, pcs %#x %#x %#x", names, frames[0].PC, frames[1].PC, frames[2].PC)
}
