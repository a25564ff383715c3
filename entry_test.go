package elfimage

import (
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/internal/qemutest"
	"github.com/elfimage/elfimage/internal/tooltest"
	"github.com/elfimage/elfimage/native"
	"github.com/elfimage/elfimage/unwind"
)

// entryForTest returns the entry image, loading an image first as a
// program would.
func entryForTest(t *testing.T) *Image {
	t.Helper()
	b, err := Link(&Module{File: "t.s", Arch: hostArch, Procs: []*Proc{{Name: "ret", Code: []byte{0xc3}}}}, LinkOptions{}) // never run: its Load installs the entry image
	if err != nil {
		t.Fatal(err)
	}
	im, err := Load("t.elf", b, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { im.Close() })
	ent, err := EntryImage()
	if err != nil {
		t.Fatal(err)
	}
	return ent
}

// TestEntryImage: loading an image installs the entry image's routine in
// native; the image is registered but not listed, cannot be closed, has
// one internal procedure EntryName with a signal-frame FDE covering exactly
// its code, and readelf and llvm-dwarfdump accept it.
func TestEntryImage(t *testing.T) {
	if hostArch.Machine != elf.EM_X86_64 {
		t.Skip("checks the x86-64 entry routine's bytes and CFI; TestEntryImageAArch64 and TestEntryCFIAArch64 check the AArch64 one (on any host)")
	}
	ent := entryForTest(t)
	if again, err := EntryImage(); again != ent || err != nil {
		t.Errorf("second EntryImage: %p, %v; want the same image", again, err)
	}
	if native.Entry() != ent.Entry() || ent.Entry() == 0 {
		t.Errorf("native.Entry() = %#x, the entry image's entry %#x", native.Entry(), ent.Entry())
	}
	if got, err := Lookup(ent.Entry()); got != ent || err != nil {
		t.Errorf("Lookup(entry) = %v, %v", got, err)
	}
	for _, im := range Images() {
		if im == ent {
			t.Error("Images() lists the entry image")
		}
	}
	if err := ent.Close(); !errors.Is(err, ErrEntryImage) {
		t.Errorf("Close of the entry image: %v, want ErrEntryImage", err)
	}
	if got, err := Lookup(ent.Entry()); got != ent || err != nil {
		t.Errorf("after Close: Lookup(entry) = %v, %v", got, err)
	}
	procs, err := ent.Procedures()
	if err != nil {
		t.Fatal(err)
	}
	if len(procs) != 1 || procs[0].Name != EntryName || !procs[0].Internal || procs[0].Size != uint64(len(entryCode)) ||
		uintptr(procs[0].Start)+ent.Base() != ent.Entry() {
		t.Fatalf("procedures %+v, want the one internal %s of %d bytes at the entry", procs, EntryName, len(entryCode))
	}

	readelf := tooltest.Require(t, "readelf")
	dwarfdump := tooltest.Require(t, "llvm-dwarfdump")
	path := t.TempDir() + "/entry.elf"
	if err := WriteFile(path, entryModule(), LinkOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(readelf, "--debug-dump=frames", path).CombinedOutput()
	if err != nil {
		t.Fatalf("readelf: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `Augmentation:          "zRS"`) || strings.Count(string(out), "FDE cie=") != 1 ||
		!strings.Contains(string(out), "pc=0000000000001000..0000000000001009") {
		t.Errorf("readelf --debug-dump=frames: want one FDE of the 9 bytes at 0x1000 on a zRS CIE:\n%s", out)
	}
	if out, err := exec.Command(dwarfdump, "--verify", path).CombinedOutput(); err != nil || !strings.Contains(string(out), "No errors.") {
		t.Errorf("llvm-dwarfdump --verify: %v\n%s", err, out)
	}
}

// TestEntryCFI unwinds the entry routine at every instruction boundary
// over a synthetic top of a native stack laid out as the trampoline
// leaves it (Top-16: its SP, Top-24: its BP, Top-40: the return address
// into it), with rsp and rbp as the routine's code has them there: the
// caller must be the trampoline's frame, and the frame a signal frame.
func TestEntryCFI(t *testing.T) {
	if hostArch.Machine != elf.EM_X86_64 {
		t.Skip("checks the x86-64 entry routine's bytes and CFI; TestEntryImageAArch64 and TestEntryCFIAArch64 check the AArch64 one (on any host)")
	}
	ent := entryForTest(t)
	src, err := ent.unwindSource()
	if err != nil {
		t.Fatal(err)
	}
	const top = 0x7f00_0000_0000
	const goSP, goBP, raTramp = 0xc000_1230, 0xc000_1238, 0x4d_7eeb
	mem := &unwind.Snapshot{Base: top - 64, Data: make([]byte, 64)}
	put := func(below, v uint64) { binary.LittleEndian.PutUint64(mem.Data[64-below:], v) }
	put(native.SavedSPOffset, goSP)
	put(native.SavedBPOffset, goBP)
	put(native.EntryRoutineSPOffset, raTramp)
	put(native.EntrySPOffset-8, goBP) // pushed by the routine
	entrySP := uint64(top - native.EntryRoutineSPOffset)
	for _, c := range []struct {
		off       uint64
		rsp, rbp  uint64
		returnAdr bool // the pc is the return address of the call
	}{
		{0, entrySP, goBP, false},
		{1, entrySP - 8, goBP, false},
		{4, entrySP - 8, entrySP - 8, false},
		{7, entrySP - 8, entrySP - 8, true},
		{8, entrySP, goBP, false},
	} {
		var regs unwind.Regs
		regs.Set(arch.X86_64_RSP, c.rsp)
		regs.Set(arch.X86_64_RBP, c.rbp)
		pc := uint64(ent.Entry()) + c.off
		cur := unwind.FirstFrame(arch.X86_64, pc, regs)
		cur.First = !c.returnAdr
		var caller unwind.Frame
		if err := unwind.New(arch.X86_64, src, mem).Step(&cur, &caller); err != nil {
			t.Errorf("entry+%d: %v", c.off, err)
			continue
		}
		rbp, _ := caller.Regs.Get(arch.X86_64_RBP)
		if caller.PC != raTramp || caller.SP != goSP || rbp != goBP || !cur.Signal || !caller.AfterSignal {
			t.Errorf("entry+%d: caller pc %#x sp %#x rbp %#x (signal %v), want pc %#x sp %#x rbp %#x after a signal frame",
				c.off, caller.PC, caller.SP, rbp, cur.Signal, raTramp, goSP, goBP)
		}
		if cur.CFA != top-32 {
			t.Errorf("entry+%d: CFA %#x, want Top-32 %#x", c.off, cur.CFA, uint64(top-32))
		}
	}
}

// captureModule holds outer(buf), which calls capture(buf): capture stores
// its caller's rbp, rsp after the return and the return address at buf,
// buf+8 and buf+16.
func captureModule() *Module {
	return &Module{File: "capture.s", Entry: "outer", Procs: []*Proc{
		{Name: "capture", Code: []byte{
			0x48, 0x89, 0x2f, // mov [rdi], rbp
			0x48, 0x8d, 0x44, 0x24, 0x08, // lea rax, [rsp+8]
			0x48, 0x89, 0x47, 0x08, // mov [rdi+8], rax
			0x48, 0x8b, 0x04, 0x24, // mov rax, [rsp]
			0x48, 0x89, 0x47, 0x10, // mov [rdi+16], rax
			0xc3, // ret
		}, Lines: []LineRow{{Offset: 0, Line: 1}}},
		{Name: "outer", Code: []byte{
			0x55,             // push rbp
			0x48, 0x89, 0xe5, // mov rbp, rsp
			0xe8, 0, 0, 0, 0, // call capture
			0x5d, // pop rbp
			0xc3, // ret
		}, Lines: []LineRow{{Offset: 0, Line: 3}, {Offset: 4, Line: 4}},
			CFI:    frameCFI(),
			Relocs: []Reloc{{Offset: 5, Type: RelocPC32, Symbol: "capture", Addend: -4}}},
	}}
}

// frameCFI is the CFI of push rbp; mov rbp, rsp; call; pop rbp; ret.
func frameCFI() []frame.Insn {
	return []frame.Insn{
		{PC: 1, Op: frame.OpDefCFAOffset, Reg: arch.X86_64_RSP, Offset: 16},
		{PC: 1, Op: frame.OpOffset, Reg: arch.X86_64_RBP, Offset: -16},
		{PC: 4, Op: frame.OpDefCFARegister, Reg: arch.X86_64_RBP},
		{PC: 10, Op: frame.OpDefCFA, Reg: arch.X86_64_RSP, Offset: 8},
		{PC: 10, Op: frame.OpSameValue, Reg: arch.X86_64_RBP},
	}
}

// a64Code encodes AArch64 instruction words little-endian.
func a64Code(words ...uint32) []byte {
	var b []byte
	for _, w := range words {
		b = binary.LittleEndian.AppendUint32(b, w)
	}
	return b
}

// captureModuleAArch64 is captureModule in AArch64 code (assembled with
// aarch64-linux-gnu-as, checked with aarch64-linux-gnu-objdump -d): outer(buf)
// pushes a frame record and calls capture(buf), which stores x29 (outer's
// frame pointer), sp and x30 (the return address into outer) at buf,
// buf+8 and buf+16.
func captureModuleAArch64() *Module {
	return &Module{Arch: arch.AArch64, File: "capture.s", Entry: "outer", Procs: []*Proc{
		{Name: "capture", Code: a64Code(
			0xf900001d, // str x29, [x0]
			0x910003e1, // mov x1, sp
			0xf9000401, // str x1, [x0, #8]
			0xf900081e, // str x30, [x0, #16]
			0xd65f03c0, // ret
		), Lines: []LineRow{{Offset: 0, Line: 1}}},
		{Name: "outer", Code: a64Code(
			0xa9bf7bfd, // stp x29, x30, [sp, #-16]!
			0x910003fd, // mov x29, sp
			0x94000000, // bl capture
			0xa8c17bfd, // ldp x29, x30, [sp], #16
			0xd65f03c0, // ret
		), Lines: []LineRow{{Offset: 0, Line: 3}, {Offset: 8, Line: 4}, {Offset: 12, Line: 5}},
			CFI: []frame.Insn{
				{PC: 4, Op: frame.OpDefCFAOffset, Reg: arch.AArch64_SP, Offset: 16},
				{PC: 4, Op: frame.OpOffset, Reg: arch.AArch64_FP, Offset: -16},
				{PC: 4, Op: frame.OpOffset, Reg: arch.AArch64_LR, Offset: -8},
				{PC: 16, Op: frame.OpDefCFAOffset, Reg: arch.AArch64_SP, Offset: 0},
				{PC: 16, Op: frame.OpRestore, Reg: arch.AArch64_FP},
				{PC: 16, Op: frame.OpRestore, Reg: arch.AArch64_LR},
			},
			Relocs: []Reloc{{Offset: 8, Type: RelocAArch64Call26, Symbol: "capture"}}},
	}}
}

// TestEntryBacktrace: registers captured inside code called through
// native.Call unwind with Backtrace through the image's frames and the
// library's entry frame into the Go frame that called it
// (native.trampoline), where the walk ends cleanly; on amd64 with the
// x86-64 capture module, on arm64 (under qemu-user in CI) with the
// AArch64 one.
func TestEntryBacktrace(t *testing.T) {
	var m *Module
	var a *arch.Arch
	var fp, sp, ra arch.Reg
	switch runtime.GOARCH {
	case "amd64":
		m, a, fp, sp, ra = captureModule(), arch.X86_64, arch.X86_64_RBP, arch.X86_64_RSP, arch.X86_64_RA
	case "arm64":
		m, a, fp, sp, ra = captureModuleAArch64(), arch.AArch64, arch.AArch64_FP, arch.AArch64_SP, arch.AArch64_LR
	default:
		t.Skipf("no entry routine on %s", runtime.GOARCH)
	}
	b, err := Link(m, LinkOptions{})
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
	regs := make([]uint64, a.NumRegs)
	regs[fp] = binary.LittleEndian.Uint64(buf)
	regs[sp] = binary.LittleEndian.Uint64(buf[8:])
	regs[ra] = binary.LittleEndian.Uint64(buf[16:])
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
}

// TestEntryOwnRoutine: a program that installed an entry routine of its
// own before loading images keeps it; Open and Load work without the entry
// image, and EntryImage says why. Runs in a child process (an entry
// routine is installed once per process).
func TestEntryOwnRoutine(t *testing.T) {
	// The program's own routine is a copy of the library's, and capture's
	// return address is into outer after its call (x86-64: outer+9,
	// after CALL; AArch64: outer+12, after BL).
	code, mod, raOff := entryCode, captureModule(), uintptr(9)
	switch runtime.GOARCH {
	case "amd64":
	case "arm64":
		code, mod, raOff = entryCodeAArch64, captureModuleAArch64(), 12
	default:
		t.Skipf("no entry routine on %s", runtime.GOARCH)
	}
	if os.Getenv("ELFIMAGE_TEST_OWN_ENTRY") != "1" {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		// Under qemu-user the child runs under qemu-aarch64 too.
		cmd := qemutest.Command(context.Background(), t, exe, "-test.run=^TestEntryOwnRoutine$", "-test.v")
		cmd.Env = append(os.Environ(), "ELFIMAGE_TEST_OWN_ENTRY=1")
		if out, err := tooltest.RunTool(t, cmd, 5*time.Minute); err != nil || !strings.Contains(out, "--- PASS: TestEntryOwnRoutine") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	mem, err := unix.Mmap(-1, 0, len(code), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	copy(mem, code)
	own := uintptr(unsafe.Pointer(&mem[0]))
	native.SyncInstructionCache(own, len(code))
	if err := unix.Mprotect(mem, unix.PROT_READ|unix.PROT_EXEC); err != nil {
		t.Fatal(err)
	}
	if err := native.SetEntry(own); err != nil {
		t.Fatal(err)
	}
	b, err := Link(mod, LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	im, err := Load("capture.elf", b, nil)
	if err != nil {
		t.Fatalf("Load with the program's own entry routine: %v", err)
	}
	defer im.Close()
	if ent, err := EntryImage(); ent != nil || !errors.Is(err, native.ErrEntrySet) {
		t.Errorf("EntryImage: %v, %v; want ErrEntrySet", ent, err)
	}
	if native.Entry() != own {
		t.Errorf("native.Entry() = %#x, want the program's %#x", native.Entry(), own)
	}
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
	if ra := binary.LittleEndian.Uint64(buf[16:]); ra != uint64(im.Entry()+raOff) {
		t.Errorf("capture's return address %#x, want outer+%d %#x", ra, raOff, im.Entry()+raOff)
	}
}

// TestEntryImageAArch64 is TestEntryImage's check of the image for the
// AArch64 entry routine, linked on any host (entryModuleFor): one internal
// procedure EntryName of 20 bytes whose FDE, on a "zRS" CIE (a signal
// frame) with x30 as the return-address column, covers exactly its code;
// readelf -wF shows its rows (CFA sp+0 at entry, sp+16 with x29 and x30 at
// c-16 and c-8 between the STP and the LDP, sp+0 again at the RET, the
// caller's sp a DW_CFA_val_expression, "vexp", in every row) and
// llvm-dwarfdump --verify accepts it.
func TestEntryImageAArch64(t *testing.T) {
	mod := entryModuleFor(arch.AArch64)
	if len(mod.Procs) != 1 || mod.Procs[0].Name != EntryName || !mod.Procs[0].Internal || !mod.Procs[0].SignalFrame ||
		len(mod.Procs[0].Code) != 20 || string(mod.Procs[0].Code) != string(entryCodeAArch64) {
		t.Fatalf("AArch64 entry module %+v, want the one internal signal-frame %s of 20 bytes", mod.Procs, EntryName)
	}
	readelf := tooltest.Require(t, "readelf")
	dwarfdump := tooltest.Require(t, "llvm-dwarfdump")
	path := t.TempDir() + "/entry-a64.elf"
	if err := WriteFile(path, mod, LinkOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(readelf, "-h", "--debug-dump=frames", path).CombinedOutput()
	if err != nil {
		t.Fatalf("readelf: %v\n%s", err, out)
	}
	text := string(out)
	if !strings.Contains(text, "AArch64") || !strings.Contains(text, `Augmentation:          "zRS"`) || !strings.Contains(text, "Return address column: 30") ||
		strings.Count(text, "FDE cie=") != 1 || !strings.Contains(text, "pc=0000000000001000..0000000000001014") {
		t.Errorf("readelf -h --debug-dump=frames: want an AArch64 image with one FDE of the 20 bytes at 0x1000 on a zRS CIE, return address column 30:\n%s", text)
	}
	out, err = exec.Command(readelf, "-W", "-wF", path).CombinedOutput()
	if err != nil {
		t.Fatalf("readelf -wF: %v\n%s", err, out)
	}
	t.Logf("readelf -wF:\n%s", out)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^0000000000001000 sp\+0 +u +u +vexp *$`),
		regexp.MustCompile(`(?m)^0000000000001004 sp\+16 +c-16 +c-8 +vexp *$`),
		regexp.MustCompile(`(?m)^0000000000001010 sp\+0 +u +u +vexp *$`),
	} {
		if !want.Match(out) {
			t.Errorf("readelf -wF lacks a row matching %s:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "Warning") {
		t.Errorf("readelf -wF warns:\n%s", out)
	}
	if out, err := exec.Command(dwarfdump, "--verify", path).CombinedOutput(); err != nil || !strings.Contains(string(out), "No errors.") {
		t.Errorf("llvm-dwarfdump --verify: %v\n%s", err, out)
	}
}

// TestEntryCFIAArch64 is TestEntryCFI for the AArch64 entry routine,
// linked and loaded (LoadOptions.Arch, never run) on any host: it unwinds
// the routine at every instruction boundary over a synthetic top of a
// native stack laid out as the arm64 trampoline leaves it (Top-16: its
// SP, Top-24: its X29, Top-40 and Top-48: the frame record the routine
// pushes, the return address into the trampoline and its X29), with sp,
// x29 and x30 as the routine's code has them there (x30 clobbered by the
// callee at the return address after BLR): the caller must be the
// trampoline's frame, the CFA Top-32, and the frame a signal frame.
func TestEntryCFIAArch64(t *testing.T) {
	b, err := Link(entryModuleFor(arch.AArch64), LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	im, err := Load("entry-a64.elf", b, &LoadOptions{Arch: arch.AArch64})
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	src, err := im.unwindSource()
	if err != nil {
		t.Fatal(err)
	}
	const top = 0x7f00_0000_0000
	const goSP, goFP, raTramp = 0xc000_1230, 0xc000_1228, 0x4d_7ee8
	mem := &unwind.Snapshot{Base: top - 64, Data: make([]byte, 64)}
	put := func(below, v uint64) { binary.LittleEndian.PutUint64(mem.Data[64-below:], v) }
	// The arm64 layout (native/layout_arm64.go, call_arm64.s), spelled
	// out: the test must not share the constants the CFI is made from.
	put(16, goSP)               // native.SavedSPOffset on arm64
	put(24, goFP)               // native.SavedBPOffset on arm64
	put(40, raTramp)            // x30, pushed by the routine
	put(48, goFP)               // x29, pushed by the routine (EntrySP)
	entrySP := uint64(top - 32) // native.EntryRoutineSPOffset on arm64
	for _, c := range []struct {
		off       uint64
		sp, x29   uint64
		x30       uint64
		returnAdr bool // the pc is the return address of the BLR
	}{
		{0, entrySP, goFP, raTramp, false},
		{4, entrySP - 16, goFP, raTramp, false},
		{8, entrySP - 16, entrySP - 16, raTramp, false},
		{12, entrySP - 16, entrySP - 16, 0xbad, true},
		{16, entrySP, goFP, raTramp, false},
	} {
		var regs unwind.Regs
		regs.Set(arch.AArch64_SP, c.sp)
		regs.Set(arch.AArch64_FP, c.x29)
		regs.Set(arch.AArch64_LR, c.x30)
		pc := uint64(im.Entry()) + c.off
		cur := unwind.FirstFrame(arch.AArch64, pc, regs)
		cur.First = !c.returnAdr
		var caller unwind.Frame
		if err := unwind.New(arch.AArch64, src, mem).Step(&cur, &caller); err != nil {
			t.Errorf("entry+%d: %v", c.off, err)
			continue
		}
		fp, _ := caller.Regs.Get(arch.AArch64_FP)
		if caller.PC != raTramp || caller.SP != goSP || fp != goFP || !cur.Signal || !caller.AfterSignal {
			t.Errorf("entry+%d: caller pc %#x sp %#x x29 %#x (signal %v), want pc %#x sp %#x x29 %#x after a signal frame",
				c.off, caller.PC, caller.SP, fp, cur.Signal, raTramp, goSP, goFP)
		}
		if cur.CFA != top-32 {
			t.Errorf("entry+%d: CFA %#x, want Top-32 %#x", c.off, cur.CFA, uint64(top-32))
		}
	}
}
