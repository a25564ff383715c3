//go:build !linux

package symbolize

// slabSupported is false: the indexes' arrays come from the heap.
const slabSupported = false

func mapChunk(n int) []byte { return nil }

func unmapChunk(c []byte) error { return nil }
