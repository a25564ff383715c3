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

// trampoline saves its Go SP and BP in the 16 bytes below top, switches
// SP to top-16, loads the argument registers, calls fn through the entry
// routine entry (or directly when entry is 0), restores SP and BP and
// returns RAX. Implemented in call_amd64.s, which shows the layout.
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
