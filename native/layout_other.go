//go:build !amd64 && !arm64

package native

// The stack layout offsets of amd64 (layout_amd64.go), defined on every
// GOARCH without a trampoline so that code naming them builds; Call
// itself returns errors.ErrUnsupported there.
const (
	SavedSPOffset        = 16
	SavedBPOffset        = 24
	EntryRoutineSPOffset = 40
	EntrySPOffset        = 56
)
