//go:build amd64 || arm64

package native

import (
	"sync/atomic"
	_ "unsafe" // for go:linkname
)

// Both runtime functions are exported on purpose for this use (see their
// comments in runtime/proc.go and go.dev/issue/67401).

//go:linkname entersyscall runtime.entersyscall
func entersyscall()

//go:linkname exitsyscall runtime.exitsyscall
func exitsyscall()

// trampoline saves its Go SP and frame pointer in the top words of the
// stack below top, switches SP to the stack, loads the argument registers,
// calls fn through the entry routine entry (or directly, or on arm64
// through its own built-in routine, when entry is 0), restores SP and the
// frame pointer and returns the result register (RAX, X0). Implemented in
// call_amd64.s and call_arm64.s, which show the layouts.
func trampoline(fn, top, entry, a1, a2, a3, a4, a5, a6 uintptr) uintptr

// entryPC is the entry routine installed by SetEntry, 0 for none.
var entryPC atomic.Uintptr

// call runs fn on the stack whose exclusive top is top while the runtime
// considers the goroutine in a system call. It must be nosplit: between
// entersyscall and exitsyscall the goroutine stack must not grow, the same
// rule syscall.Syscall6 follows.
//
//go:nosplit
func call(fn, top, a1, a2, a3, a4, a5, a6 uintptr) (uintptr, error) {
	entry := entryPC.Load()
	entersyscall()
	r := trampoline(fn, top, entry, a1, a2, a3, a4, a5, a6)
	exitsyscall()
	return r, nil
}

func setEntry(pc uintptr) error {
	if !entryPC.CompareAndSwap(0, pc) && entryPC.Load() != pc {
		return ErrEntrySet
	}
	return nil
}

func entry() uintptr { return entryPC.Load() }
