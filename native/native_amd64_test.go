//go:build linux

package native

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Hand-assembled x86-64 code (checked with objdump -D -b binary -mi386:x86-64).
var (
	// mov eax, 42; ret
	codeRet42 = []byte{0xb8, 0x2a, 0x00, 0x00, 0x00, 0xc3}
	// ret: returns RAX as found at entry (must be 0: AL=0 for variadic callees).
	codeRet = []byte{0xc3}
	// mov rax, <reg>; ret for rdi, rsi, rdx, rcx, r8, r9.
	codeArgReg = [MaxArgs][]byte{
		{0x48, 0x89, 0xf8, 0xc3},
		{0x48, 0x89, 0xf0, 0xc3},
		{0x48, 0x89, 0xd0, 0xc3},
		{0x48, 0x89, 0xc8, 0xc3},
		{0x4c, 0x89, 0xc0, 0xc3},
		{0x4c, 0x89, 0xc8, 0xc3},
	}
	// mov rax, rsp; ret
	codeRSP = []byte{0x48, 0x89, 0xe0, 0xc3}
	// mov rax, rsp; and rax, 15; ret
	codeRSPMod16 = []byte{0x48, 0x89, 0xe0, 0x48, 0x83, 0xe0, 0x0f, 0xc3}
	// sum(n) = n + sum(n-1), sum(0) = 0; one 16-byte frame per level:
	//	0: test rdi,rdi; je 16; push rbx; mov rbx,rdi; dec rdi; call 0
	//	   add rax,rbx; pop rbx; ret; 16: xor eax,eax; ret
	codeSum = []byte{
		0x48, 0x85, 0xff, 0x74, 0x11, 0x53, 0x48, 0x89, 0xfb, 0x48, 0xff, 0xcf,
		0xe8, 0xef, 0xff, 0xff, 0xff, 0x48, 0x01, 0xd8, 0x5b, 0xc3, 0x31, 0xc0, 0xc3,
	}
	// spin(ctl=rdi, n=rsi): store 1 to [rdi+8] ("started"); then until
	// [rdi] != 0 (return 1) or n iterations pass (return 0).
	codeSpin = []byte{
		0x48, 0xc7, 0x47, 0x08, 0x01, 0x00, 0x00, 0x00, // mov qword [rdi+8], 1
		0x48, 0x8b, 0x07, // loop: mov rax, [rdi]
		0x48, 0x85, 0xc0, // test rax, rax
		0x75, 0x08, // jne done
		0x48, 0xff, 0xce, // dec rsi
		0x75, 0xf3, // jne loop
		0x31, 0xc0, 0xc3, // xor eax, eax; ret
		0xb8, 0x01, 0x00, 0x00, 0x00, 0xc3, // done: mov eax, 1; ret
	}
	// abort(ctl=rdi, entrySP=rsi): store RSP at entry to [rdi]; push rbp,
	// rbx; call inner, which clobbers rbx, rbp, r12-r15 (r14 is Go's g
	// register), xmm15 (Go's zero register), sets DF, loads rsi into rsp and
	// returns 77 from there. The normal path (return 1) is never taken.
	codeAbort = []byte{
		0x48, 0x89, 0x27, // mov [rdi], rsp
		0x55, 0x53, // push rbp; push rbx
		0xe8, 0x08, 0x00, 0x00, 0x00, // call inner
		0xb8, 0x01, 0x00, 0x00, 0x00, 0x5b, 0x5d, 0xc3, // mov eax,1; pop rbx; pop rbp; ret
		0x48, 0xc7, 0xc3, 0xff, 0xff, 0xff, 0xff, // inner: mov rbx, -1
		0x48, 0xc7, 0xc5, 0xff, 0xff, 0xff, 0xff, // mov rbp, -1
		0x49, 0xc7, 0xc4, 0xff, 0xff, 0xff, 0xff, // mov r12, -1
		0x49, 0xc7, 0xc5, 0xff, 0xff, 0xff, 0xff, // mov r13, -1
		0x49, 0xc7, 0xc6, 0xff, 0xff, 0xff, 0xff, // mov r14, -1
		0x49, 0xc7, 0xc7, 0xff, 0xff, 0xff, 0xff, // mov r15, -1
		0x66, 0x45, 0x0f, 0x76, 0xff, // pcmpeqd xmm15, xmm15
		0xfd,             // std
		0x48, 0x89, 0xf4, // mov rsp, rsi
		0xb8, 0x4d, 0x00, 0x00, 0x00, 0xc3, // mov eax, 77; ret
	}
)

// The stack pointer at the called code's entry is ≡ 8 (mod 16): CALL
// pushed the return address.
const (
	entrySPMod16 = 8
	entrySPRule  = "psABI §3.2.2"
)

// entryRoutineRAOffset: the return address into entryRoutine, from its
// start (after call r11).
const entryRoutineRAOffset = 7

// directRA reports whether ra, the return address at EntrySP of a call
// without an entry routine, is into the trampoline.
func directRA(ra uintptr) bool {
	f := runtime.FuncForPC(ra - 1)
	return f != nil && strings.HasPrefix(f.Name(), "github.com/elfimage/elfimage/native.trampoline")
}

// entryRoutine is the entry routine of package elfimage's entry image,
// push rbp; mov rbp, rsp; call r11; pop rbp; ret, mapped once per process
// (an entry routine cannot be replaced).
var entryRoutine = sync.OnceValue(func() uintptr {
	code := []byte{0x55, 0x48, 0x89, 0xe5, 0x41, 0xff, 0xd3, 0x5d, 0xc3}
	mem, err := unix.Mmap(-1, 0, len(code), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		panic(err)
	}
	copy(mem, code)
	if err := unix.Mprotect(mem, unix.PROT_READ|unix.PROT_EXEC); err != nil {
		panic(err)
	}
	return uintptr(unsafe.Pointer(&mem[0]))
})

// codeLoad: mov rax, [rdi]; ret — returns the word at its argument.
var codeLoad = []byte{0x48, 0x8b, 0x07, 0xc3}

// checkTop checks the top of a Stack during a call: the trampoline's SP
// and BP, whose frame record returns into native.call, the return address
// at EntrySP, which entryRA must accept, and with an entry routine the
// return address into the trampoline and the frame record the routine
// pushed.
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
	if goBP != goSP+8 {
		t.Errorf("saved BP %#x, want the trampoline's frame record at SP+8 = %#x", goBP, goSP+8)
	}
	// The trampoline's frame record: [BP] is native.call's BP, [BP+8] the
	// return address into native.call. Read through the native code, on
	// the goroutine stack that is still live during the call.
	caller := runtime.FuncForPC(Call(load, s, goBP+8) - 1)
	if caller == nil || caller.Name() != "github.com/elfimage/elfimage/native.call" {
		t.Errorf("the trampoline's frame record returns into %v, want native.call", caller)
	}
	if routine {
		ra := word(EntryRoutineSPOffset)
		if f := runtime.FuncForPC(ra - 1); f == nil || !strings.HasPrefix(f.Name(), "github.com/elfimage/elfimage/native.trampoline") {
			t.Errorf("return address %#x at Top-%d is in %v, want native.trampoline", ra, EntryRoutineSPOffset, f)
		}
		if got := word(EntrySPOffset - 8); got != goBP {
			t.Errorf("frame pointer pushed by the entry routine %#x, want the trampoline's %#x", got, goBP)
		}
	}
	if got := word(EntrySPOffset); !entryRA(got) {
		t.Errorf("return address at EntrySP %#x is not into the entry routine", got)
	}
}

func ExampleCall() {
	// mov eax, edi; add eax, esi; ret — in memory mapped read-write, then
	// made read-execute.
	code := []byte{0x89, 0xf8, 0x01, 0xf0, 0xc3}
	mem, _ := unix.Mmap(-1, 0, len(code), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	defer unix.Munmap(mem)
	copy(mem, code)
	unix.Mprotect(mem, unix.PROT_READ|unix.PROT_EXEC)

	s, err := NewStack(1 << 20)
	if err != nil {
		panic(err)
	}
	defer s.Close()
	fmt.Println(Call(uintptr(unsafe.Pointer(&mem[0])), s, 40, 2))
	// Output: 42
}
