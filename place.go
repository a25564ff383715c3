package elfimage

import (
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Placement of file mappings above a page-table anchor.
//
// The copy-on-write store of an image's relocations needs the page-table
// page (the last level, which maps the pmdSpan bytes around the data page,
// 2 MiB with 4 KiB pages) and, when nothing else of the process lies in
// the same 1 GiB, the level above it. When the image is the only mapping in
// that span, the fault allocates and zeroes those pages and munmap frees
// them again, then flushes the whole TLB of the process (freed page tables
// cannot be flushed page by page), on every core that ran one of its
// threads. The kernel places a mapping of a file of 2 MiB or more at a
// 2 MiB boundary, so an image with a large tail always paid that, a small
// one by chance of its neighbours (`perf stat -e kmem:mm_page_alloc`: 1.1
// pages allocated per load of a 75 KB image, 3.2 for a 134 MB one).
//
// Open instead maps the file right above an anchor: one PROT_NONE page of
// anonymous memory at the start of a pmdSpan-aligned span, which holds no
// memory and stays mapped when the image is closed, so that the page-table
// pages of the span outlive the image and the next image mapped above the
// anchor finds them. A writable segment within the first pmdSpan minus a
// page of the file (in the images Link writes, whatever their size: the
// data page follows the headers' page, before the code) then costs the
// copy-on-write fault alone; one further out still keeps the upper level. Free anchors are kept in a stack (the most
// recently used, whose page tables are there, first); at most maxAnchors
// exist, so a process holding more images open at once maps the rest where
// the kernel chooses, and at most maxAnchors pages of address space and
// their page tables stay reserved after every image is closed.

// maxAnchors bounds the anchors in existence.
const maxAnchors = 16

var anchors struct {
	mu    sync.Mutex
	free  []unsafe.Pointer // anchors with no image above them
	total int              // anchors in existence, free or in use
}

// pmdSpan is the bytes one last-level page-table page maps: a page of
// 8-byte entries, each mapping a page (2 MiB with 4 KiB pages).
var pmdSpan = uintptr(os.Getpagesize()) * uintptr(os.Getpagesize()/8)

// takeAnchor pops a free anchor; ok is false when there is none and no
// more may be made (then create is false too).
func takeAnchor() (a unsafe.Pointer, create bool) {
	anchors.mu.Lock()
	defer anchors.mu.Unlock()
	if n := len(anchors.free); n > 0 {
		a = anchors.free[n-1]
		anchors.free = anchors.free[:n-1]
		return a, false
	}
	if anchors.total < maxAnchors {
		anchors.total++ // reserved; dropAnchor gives it back on failure
		return nil, true
	}
	return nil, false
}

// putAnchor returns an anchor whose image is unmapped (nil: none).
func putAnchor(a unsafe.Pointer) {
	if a == nil {
		return
	}
	anchors.mu.Lock()
	anchors.free = append(anchors.free, a)
	anchors.mu.Unlock()
}

// dropAnchor unmaps an anchor (nil: one reserved by takeAnchor but not
// made) and forgets it.
func dropAnchor(a unsafe.Pointer) {
	if a != nil {
		unix.RawSyscall(unix.SYS_MUNMAP, uintptr(a), uintptr(os.Getpagesize()), 0)
	}
	anchors.mu.Lock()
	anchors.total--
	anchors.mu.Unlock()
}

// mapFileAnchored maps size bytes of fd as mapFile does, right above an
// anchor when one is free or may be made, and returns the anchor used (nil:
// none; the caller gives it back with putAnchor once the mapping is gone).
// Cost: one mmap with a free anchor; making one adds an mmap of reserved
// address space and up to two munmaps of what the image does not use.
func mapFileAnchored(fd, size int) ([]byte, unsafe.Pointer, error) {
	page := uintptr(os.Getpagesize())
	a, create := takeAnchor()
	if a != nil {
		want := unsafe.Add(a, page)
		p, err := unix.MmapPtr(fd, 0, want, uintptr(size), unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_FIXED_NOREPLACE)
		switch {
		case err == nil && p == want:
			liveMappings.Add(1)
			return unsafe.Slice((*byte)(p), size), a, nil
		case err == nil:
			// A kernel before Linux 4.17 (and qemu-user) takes
			// MAP_FIXED_NOREPLACE for a hint: the room above the
			// anchor is taken, and the mapping elsewhere is good.
			dropAnchor(a)
			liveMappings.Add(1)
			return unsafe.Slice((*byte)(p), size), nil, nil
		}
		// Something else was mapped above the anchor meanwhile, or the
		// image is larger than the room left there: make a new one.
		dropAnchor(a)
		if a, create = takeAnchor(); a != nil {
			putAnchor(a) // not two attempts at the free ones
			create = false
		}
	}
	if !create {
		mem, err := mapFile(fd, size)
		return mem, nil, err
	}
	// Reserve room for the image and a span boundary before it, map the
	// file one page above the boundary, and give back the rest.
	n := alignUp(uint64(size), uint64(page))
	resv := uintptr(n) + pmdSpan
	r, err := unix.MmapPtr(-1, 0, nil, resv, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
	if err != nil {
		dropAnchor(nil)
		mem, err := mapFile(fd, size)
		return mem, nil, err
	}
	lead := uintptr(alignUp(uint64(uintptr(r)), uint64(pmdSpan))) - uintptr(r)
	a = unsafe.Add(r, lead)
	p, err := unix.MmapPtr(fd, 0, unsafe.Add(a, page), uintptr(size), unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_FIXED)
	if err != nil {
		unix.RawSyscall(unix.SYS_MUNMAP, uintptr(r), resv, 0)
		dropAnchor(nil)
		return nil, nil, err
	}
	if lead > 0 {
		unix.RawSyscall(unix.SYS_MUNMAP, uintptr(r), lead, 0)
	}
	if used := lead + page + uintptr(n); used < resv {
		unix.RawSyscall(unix.SYS_MUNMAP, uintptr(r)+used, resv-used, 0)
	}
	liveMappings.Add(1)
	return unsafe.Slice((*byte)(p), size), a, nil
}
