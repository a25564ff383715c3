//go:build linux

package native

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/arch/arm64/arm64asm"
	"golang.org/x/sys/unix"
)

// a64 encodes AArch64 instruction words little-endian.
func a64(words ...uint32) []byte {
	b := make([]byte, 0, 4*len(words))
	for _, w := range words {
		b = append(b, byte(w), byte(w>>8), byte(w>>16), byte(w>>24))
	}
	return b
}

// Hand-assembled AArch64 code (assembled with aarch64-linux-gnu-as and
// checked with aarch64-linux-gnu-objdump -d).
const a64Ret = 0xd65f03c0 // ret

var (
	// mov x0, #42; ret
	codeRet42 = a64(0xd2800540, a64Ret)
	// ret: returns X0 as found at entry (0 without arguments).
	codeRet = a64(a64Ret)
	// mov x0, <reg>; ret for x0 (just ret), x1, x2, x3, x4, x5.
	codeArgReg = [MaxArgs][]byte{
		a64(a64Ret),
		a64(0xaa0103e0, a64Ret),
		a64(0xaa0203e0, a64Ret),
		a64(0xaa0303e0, a64Ret),
		a64(0xaa0403e0, a64Ret),
		a64(0xaa0503e0, a64Ret),
	}
	// mov x0, sp; ret
	codeRSP = a64(0x910003e0, a64Ret)
	// mov x0, sp; and x0, x0, #15; ret
	codeRSPMod16 = a64(0x910003e0, 0x92400c00, a64Ret)
	// sum(n) = n + sum(n-1), sum(0) = 0; one 16-byte frame per level:
	//	0: cbz x0, 24; stp x30, x0, [sp, #-16]!; sub x0, x0, #1; bl 0
	//	   ldp x30, x1, [sp], #16; add x0, x0, x1; 24: ret
	codeSum = a64(0xb40000c0, 0xa9bf03fe, 0xd1000400, 0x97fffffd, 0xa8c107fe, 0x8b010000, a64Ret)
	// spin(ctl=x0, n=x1): store 1 to [x0+8] ("started"); then until
	// [x0] != 0 (return 1) or n iterations pass (return 0).
	codeSpin = a64(
		0xd2800022, // mov x2, #1
		0xf9000402, // str x2, [x0, #8]
		0xf9400002, // loop: ldr x2, [x0]
		0xb50000a2, // cbnz x2, done
		0xf1000421, // subs x1, x1, #1
		0x54ffffa1, // b.ne loop
		0xd2800000, // mov x0, #0
		a64Ret,
		0xd2800020, // done: mov x0, #1
		a64Ret,
	)
	// abort(ctl=x0, entrySP=x1): store SP at entry to [x0]; push a frame
	// record, call inner, which clobbers x19-x27 (all of AAPCS64's
	// callee-saved registers but x28, Go's g, which the code must not
	// touch), x29, x30, v8 and v15, moves x1 into SP and runs the entry
	// routine's epilogue with x0 = 77. The normal path (return 1) is never
	// taken.
	codeAbort = a64(
		0x910003e2, // mov x2, sp
		0xf9000002, // str x2, [x0]
		0xa9bf7bfd, // stp x29, x30, [sp, #-16]!
		0x910003fd, // mov x29, sp
		0x94000004, // bl inner
		0xd2800020, // mov x0, #1
		0xa8c17bfd, // ldp x29, x30, [sp], #16
		a64Ret,
		0x92800013, 0x92800014, 0x92800015, 0x92800016, 0x92800017, // inner: mov x19..x23, #-1
		0x92800018, 0x92800019, 0x9280001a, 0x9280001b, // mov x24..x27, #-1
		0x9280001d, // mov x29, #-1
		0x9280001e, // mov x30, #-1
		0x6f07e7e8, // movi v8.2d, #-1
		0x6f07e7ef, // movi v15.2d, #-1
		0x9100003f, // mov sp, x1
		0xa8c17bfd, // ldp x29, x30, [sp], #16
		0xd28009a0, // mov x0, #77
		a64Ret,
	)
	// codeLoad: ldr x0, [x0]; ret — returns the word at its argument.
	codeLoad = a64(0xf9400000, a64Ret)
	// codeLR: mov x0, x30; ret — returns its return address.
	codeLR = a64(0xaa1e03e0, a64Ret)
)

// The stack pointer at the called code's entry is 16-byte aligned: AAPCS64
// keeps SP so at every public interface (and the hardware checks it).
const (
	entrySPMod16 = 0
	entrySPRule  = "AAPCS64 §6.4.5.1"
)

// entryRoutineRAOffset: the return address into entryRoutine, from its
// start (after blr x16).
const entryRoutineRAOffset = 12

// directRA reports whether ra, the called code's return address without an
// installed entry routine, is into the trampoline's built-in routine.
func directRA(ra uintptr) bool {
	f := runtime.FuncForPC(ra - 4)
	return f != nil && f.Name() == "github.com/elfimage/elfimage/native.directEntry"
}

// entryRoutine is the AArch64 entry routine, stp x29, x30, [sp, #-16]!;
// mov x29, sp; blr x16; ldp x29, x30, [sp], #16; ret, mapped once per
// process (an entry routine cannot be replaced).
var entryRoutine = sync.OnceValue(func() uintptr {
	code := a64(0xa9bf7bfd, 0x910003fd, 0xd63f0200, 0xa8c17bfd, a64Ret)
	mem, err := unix.Mmap(-1, 0, len(code), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		panic(err)
	}
	copy(mem, code)
	SyncInstructionCache(uintptr(unsafe.Pointer(&mem[0])), len(mem))
	if err := unix.Mprotect(mem, unix.PROT_READ|unix.PROT_EXEC); err != nil {
		panic(err)
	}
	return uintptr(unsafe.Pointer(&mem[0]))
})

// checkTop checks the top of a Stack during a call: the trampoline's SP
// and frame pointer, whose frame returns into native.call, the called
// code's return address in X30, which entryRA must accept, and the frame
// record the entry routine (or the built-in one) saved at EntrySP: the
// trampoline's X29 and the return address into the trampoline.
func checkTop(t *testing.T, entryRA func(uintptr) bool, routine bool) {
	t.Helper()
	s := newStack(t, 64<<10)
	load := loadCode(t, codeLoad)
	word := func(off uintptr) uintptr { return Call(load, s, s.Top()-off) }
	var here int
	goSP, goBP := word(SavedSPOffset), word(SavedBPOffset)
	if here := uintptr(unsafe.Pointer(&here)); goSP >= here || here-goSP > 4096 {
		t.Errorf("saved SP %#x is not just below this frame (%#x) on the goroutine stack", goSP, here)
	}
	if goBP != goSP-8 {
		t.Errorf("saved frame pointer %#x, want the trampoline's frame record at SP-8 = %#x", goBP, goSP-8)
	}
	// Go's arm64 frame: the trampoline's return address into native.call
	// at its SP. Read through the native code, on the goroutine stack
	// that is still live during the call.
	caller := runtime.FuncForPC(Call(load, s, goSP) - 4)
	if caller == nil || caller.Name() != "github.com/elfimage/elfimage/native.call" {
		t.Errorf("the trampoline returns into %v, want native.call", caller)
	}
	ra := word(EntrySPOffset - 8)
	if f := runtime.FuncForPC(ra - 4); f == nil || !strings.HasPrefix(f.Name(), "github.com/elfimage/elfimage/native.trampoline") {
		t.Errorf("return address %#x at EntrySP+8 is in %v, want native.trampoline", ra, f)
	}
	if got := word(EntrySPOffset); got != goBP {
		t.Errorf("frame pointer saved at EntrySP %#x, want the trampoline's %#x", got, goBP)
	}
	if got := Call(loadCode(t, codeLR), s); !entryRA(got) {
		t.Errorf("return address in x30 %#x is not into the entry routine (installed: %v)", got, routine)
	}
}

func TestSyncInstructionCache(t *testing.T) {
	// Rewrite code in place (mov x0, #42 → mov x0, #43) through a
	// writable mapping, make it executable again and run it: without the
	// cache maintenance real hardware may run the stale instruction.
	mem, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	s := newStack(t, 64<<10)
	fn := uintptr(unsafe.Pointer(&mem[0]))
	for i, want := range []uintptr{42, 43, 44} {
		if err := unix.Mprotect(mem, unix.PROT_READ|unix.PROT_WRITE); err != nil {
			t.Fatal(err)
		}
		copy(mem[100:], a64(0xd2800000|uint32(want)<<5, a64Ret)) // mov x0, #want; ret
		copy(mem, a64(0x14000019))                               // b 100
		SyncInstructionCache(fn, 108)
		SyncInstructionCache(fn, 0) // no-ops
		SyncInstructionCache(fn, -1)
		if err := unix.Mprotect(mem, unix.PROT_READ|unix.PROT_EXEC); err != nil {
			t.Fatal(err)
		}
		if got := Call(fn, s); got != want {
			t.Errorf("round %d: rewritten code returned %d, want %d", i, got, want)
		}
	}
}

// TestSyncInstructionCacheCode reads the machine code of
// syncInstructionCache in this test binary and checks that it holds the
// maintenance sequence hardware needs after code is written by data
// stores (ARM ARM B2.4.4), in order: MRS of CTR_EL0 for the line sizes,
// DC CVAU in a loop, DSB ISH, IC IVAU in a loop, DSB ISH, ISB. qemu-user
// keeps no caches apart, so TestSyncInstructionCache passes there with or
// without them: this is what can be shown without hardware. The Go func
// value is the ABIInternal wrapper, which calls the assembly routine
// (ABI0) with its first BL; the routine is read from there to its RET.
// golang.org/x/arch's decoder names every instruction but IC (a SYS alias
// it leaves undecoded): IC IVAU, Xt is recognised by its fields, SYS #3,
// C7, C5, #1, Xt.
func TestSyncInstructionCacheCode(t *testing.T) {
	// Addresses are offsets from the wrapper's start, base (go vet
	// accepts a pointer made from reflect.Value.Pointer directly).
	base := unsafe.Pointer(reflect.ValueOf(syncInstructionCache).Pointer())
	wrapper := uintptr(base)
	insn := func(off int) (uint32, arm64asm.Inst, error) {
		b := unsafe.Slice((*byte)(unsafe.Add(base, off)), 4)
		in, err := arm64asm.Decode(b)
		return binary.LittleEndian.Uint32(b), in, err
	}
	fn := runtime.FuncForPC(wrapper)
	if fn == nil {
		t.Fatalf("no function at %#x", wrapper)
	}
	routine := 0 // offset of the routine from base
	for off := 0; routine == 0 && off < 64*4 && runtime.FuncForPC(wrapper+uintptr(off)) == fn; off += 4 {
		if _, in, err := insn(off); err == nil && in.Op == arm64asm.BL {
			routine = off + int(in.Args[0].(arm64asm.PCRel))
		}
	}
	at := wrapper + uintptr(routine)
	if routine == 0 || runtime.FuncForPC(at) == nil || runtime.FuncForPC(at).Entry() != at {
		t.Fatalf("%s at %#x: no BL to the start of a function", fn.Name(), wrapper)
	}
	var got []string
	for off := routine; ; off += 4 {
		if off == routine+256*4 {
			t.Fatalf("no RET in the 256 instructions at %#x", at)
		}
		w, in, err := insn(off)
		if w&0xfffff000 == 0xd50b7000 && w>>8&0xf == 5 && w>>5&7 == 1 { // SYS #3, C7, C5, #1, Xt
			got = append(got, fmt.Sprintf("IC IVAU, X%d", w&31))
			continue
		}
		if err != nil {
			t.Fatalf("%#x: %08x: %v", wrapper+uintptr(off), w, err)
		}
		if in.Op == arm64asm.RET {
			break
		}
		switch in.Op {
		case arm64asm.MRS, arm64asm.DC, arm64asm.DSB, arm64asm.ISB:
			got = append(got, in.String())
		}
	}
	t.Logf("%s at %#x (called from %#x): %q", runtime.FuncForPC(at).Name(), at, wrapper, got)
	// S3_3_C0_C0_1 is CTR_EL0 (op0 3, op1 3, CRn 0, CRm 0, op2 1).
	want := []string{"MRS X2, S3_3_C0_C0_1", "DC CVAU, X6", "DSB ISH", "IC IVAU, X6", "DSB ISH", "ISB SY"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("cache maintenance of syncInstructionCache: %q, want %q", got, want)
	}
}

func ExampleCall() {
	// add x0, x0, x1; ret — in memory mapped read-write, made coherent
	// for instruction fetches, then made read-execute.
	code := []byte{0x00, 0x00, 0x01, 0x8b, 0xc0, 0x03, 0x5f, 0xd6}
	mem, _ := unix.Mmap(-1, 0, len(code), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	defer unix.Munmap(mem)
	copy(mem, code)
	fn := uintptr(unsafe.Pointer(&mem[0]))
	SyncInstructionCache(fn, len(code))
	unix.Mprotect(mem, unix.PROT_READ|unix.PROT_EXEC)

	s, err := NewStack(1 << 20)
	if err != nil {
		panic(err)
	}
	defer s.Close()
	fmt.Println(Call(fn, s, 40, 2))
	// Output: 42
}
