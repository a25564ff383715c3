package native

// syncInstructionCache runs the cache maintenance over [start, end);
// implemented in call_arm64.s.
//
//go:noescape
func syncInstructionCache(start, end uintptr)

func syncICache(start, end uintptr) { syncInstructionCache(start, end) }

// directEntry is the built-in entry routine of the arm64 trampoline
// (call_arm64.s); it is only called from assembly.
func directEntry()

// directEntry is referenced only from call_arm64.s.
var _ = directEntry
