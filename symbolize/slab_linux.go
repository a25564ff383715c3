package symbolize

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

const slabSupported = true

// mapChunk maps n bytes (a multiple of slabChunk) of zeroed anonymous
// memory aligned to slabChunk, advised for transparent huge pages; nil
// when the mapping fails. A kernel without huge pages (madvise failing)
// leaves small pages, which work the same.
func mapChunk(n int) []byte {
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(n+slabChunk), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil
	}
	// Keep the aligned n bytes, unmap the rest: a huge page can only
	// back an aligned 2 MiB of the mapping.
	skip := -uintptr(p) & (slabChunk - 1)
	if skip > 0 {
		_ = unix.MunmapPtr(p, skip)
	}
	if tail := slabChunk - skip; tail > 0 {
		_ = unix.MunmapPtr(unsafe.Add(p, skip+uintptr(n)), tail)
	}
	c := unsafe.Slice((*byte)(unsafe.Add(p, skip)), n)
	_ = unix.Madvise(c, unix.MADV_HUGEPAGE)
	return c
}

// unmapChunk unmaps a chunk of mapChunk.
func unmapChunk(c []byte) error {
	return unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(c)), uintptr(len(c)))
}
