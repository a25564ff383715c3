package elfimage

import "github.com/elfimage/elfimage/native"

// The AArch64 entry routine's CFI (entry_aarch64.go) is written with the
// arm64 layout's offsets: each of these constants overflows, failing the
// build, if native's differ.
const (
	_ = uint(native.SavedSPOffset - a64SavedSPOffset)
	_ = uint(a64SavedSPOffset - native.SavedSPOffset)
	_ = uint(native.EntryRoutineSPOffset - a64EntryRoutineSPOffset)
	_ = uint(a64EntryRoutineSPOffset - native.EntryRoutineSPOffset)
)
