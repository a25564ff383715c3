package native

// The top of every Stack while Call runs code on it, as byte offsets below
// [Stack.Top] (call_amd64.s shows the whole layout; call_arm64.s the
// AArch64 one, with other values). The entry routine
// ([SetEntry]) finds the trampoline's Go frame through them: its call frame
// information describes its caller, the trampoline, as the frame whose
// stack pointer is the word at Top()-SavedSPOffset, whose frame pointer is
// the word at Top()-SavedBPOffset and whose return address into the
// trampoline is at Top()-EntryRoutineSPOffset, which lets debuggers and
// unwinders step from native frames across the stack switch into Go.
const (
	// SavedSPOffset: the trampoline's stack pointer on the Go stack
	// (after its prologue, as Go's call frame information for it
	// expects).
	SavedSPOffset = 16
	// SavedBPOffset: the trampoline's frame pointer (RBP), which points
	// at its frame record on the Go stack.
	SavedBPOffset = 24
	// EntryRoutineSPOffset: the entry routine's stack pointer at its
	// first instruction, where the return address into the trampoline
	// is; ≡ 8 (mod 16).
	EntryRoutineSPOffset = 40
	// EntrySPOffset: the called code's stack pointer at its first
	// instruction ([Stack.EntrySP]), where the return address into the
	// entry routine (or the trampoline, without one) is; ≡ 8 (mod 16).
	// The 8 bytes above it hold the frame pointer the entry routine
	// pushes. The word at Top()-8 is left unused: perf's DWARF unwinder
	// cannot read the last word of its copy of the stack.
	EntrySPOffset = 56
)
