//go:build !arm64

package native

// syncICache does nothing: the instruction fetches of x86-64 are coherent
// with stores.
func syncICache(start, end uintptr) {}
