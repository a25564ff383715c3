package native

// The top of every Stack while Call runs code on it, as byte offsets below
// [Stack.Top] (call_arm64.s shows the whole AArch64 layout). The entry
// routine ([SetEntry]) finds the trampoline's Go frame through them: its
// call frame information describes its caller, the trampoline, as the
// frame whose stack pointer is the word at Top()-SavedSPOffset, whose frame
// pointer (X29) is the word at Top()-SavedBPOffset and whose return address
// into the trampoline is the X30 the routine saves at Top()-40, which lets
// debuggers and unwinders step from native frames across the stack switch
// into Go. Every stack pointer value below is 16-byte aligned, as AAPCS64
// (§6.4.5.1) and the hardware's SP alignment check require.
const (
	// SavedSPOffset: the trampoline's stack pointer on the Go stack
	// (after its prologue, as Go's call frame information for it
	// expects). The trampoline's own return address into its Go caller
	// is the word at that SP (Go's arm64 frame layout).
	SavedSPOffset = 16
	// SavedBPOffset: the trampoline's frame pointer (X29), which points
	// at its frame record on the Go stack (8 bytes below its SP).
	SavedBPOffset = 24
	// EntryRoutineSPOffset: the entry routine's stack pointer at its
	// first instruction (≡ 0 mod 16); X30 holds the return address into
	// the trampoline. The word at Top()-32, just above it, holds Go's g
	// register (X28), restored after the call.
	EntryRoutineSPOffset = 32
	// EntrySPOffset: the called code's stack pointer at its first
	// instruction ([Stack.EntrySP], ≡ 0 mod 16), where the entry routine
	// saved its frame record: X29 (the trampoline's frame pointer) at
	// EntrySP and X30 (the return address into the trampoline) at
	// EntrySP+8. The word at Top()-8 is left unused: perf's DWARF
	// unwinder cannot read the last word of its copy of the stack.
	EntrySPOffset = 48
)
