//go:build linux

package native

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Stack is a machine stack outside the Go heap for Call: an anonymous
// private mapping whose lowest and highest pages are PROT_NONE (the guard
// pages) and whose pages between them are readable and writable. It serves
// one call at a time.
//
// The guard page below catches overflow. The one above keeps samples of
// the stack inside it: a profiler copies a fixed amount from SP upwards
// (perf record --call-graph dwarf: 8 KiB by default), and without the guard
// the copy runs on into whatever the kernel mapped just above the stack,
// often JIT code. perf's DWARF unwinder then reads the unwind tables of
// that code from its copy of the stack rather than from the ELF file it
// synthesised for it, and fails or invents frames; with the guard the
// kernel's copy ends at Top.
//
// Generated code must check its own SP against a limit above Bottom (leaving
// room for its largest frame and anything it calls) and abort instead of
// overflowing: a guard-page hit is a SIGSEGV on a non-Go stack, which kills
// the process.
type Stack struct {
	mem    []byte  // the whole mapping, guard pages included
	bottom uintptr // lowest usable address, just above the lower guard page
	top    uintptr // exclusive top, page aligned: the upper guard page's start
	state  atomic.Int32
}

const (
	stateIdle int32 = iota
	stateBusy
	stateClosed
)

// NewStack maps a Stack of size bytes, rounded up to whole pages, plus one
// guard page below it and one above, with mmap(2) (MAP_PRIVATE|
// MAP_ANONYMOUS|MAP_NORESERVE|MAP_STACK: pages cost memory only once
// touched). size must be > 0. The cost is three system calls. Errors: a non-positive size, or the mmap/mprotect
// error wrapped (for example unix.ENOMEM).
func NewStack(size int) (*Stack, error) {
	if size <= 0 {
		return nil, fmt.Errorf("native: stack size %d is not positive", size)
	}
	page := unix.Getpagesize()
	n := (size + page - 1) &^ (page - 1)
	if n < size || n > int(^uint(0)>>1)-2*page {
		return nil, fmt.Errorf("native: stack size %d too large", size)
	}
	mem, err := unix.Mmap(-1, 0, n+2*page, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE|unix.MAP_STACK)
	if err != nil {
		return nil, fmt.Errorf("native: mmap stack of %d bytes: %w", n+2*page, err)
	}
	for _, guard := range [][]byte{mem[:page], mem[page+n:]} {
		if err := unix.Mprotect(guard, unix.PROT_NONE); err != nil {
			unix.Munmap(mem)
			return nil, fmt.Errorf("native: mprotect guard page: %w", err)
		}
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	return &Stack{mem: mem, bottom: base + uintptr(page), top: base + uintptr(page+n)}, nil
}

// Top returns the exclusive top of the stack: a page-aligned (so 16-byte
// aligned) address; the usable range is [Bottom(), Top()). Call uses the 48
// bytes [Top()-48, Top()) for its own state (see [EntrySPOffset]; on arm64
// the 48 bytes below Top, the entry routine's frame record included); the called
// code's frame starts at EntrySP. Top is valid until Close and costs nothing.
func (s *Stack) Top() uintptr { return s.top }

// Bottom returns the lowest usable address, just above the lower guard page.
// Generated code must keep its SP above a limit of its choosing above Bottom.
func (s *Stack) Bottom() uintptr { return s.bottom }

// Size returns the usable size in bytes, Top()-Bottom().
func (s *Stack) Size() int { return int(s.top - s.bottom) }

// EntrySP returns the value of RSP at the entry of the function Call runs:
// Top()-EntrySPOffset (Top()-56), ≡ 8 (mod 16), where the return address
// into the entry routine (or the trampoline) lies. Code that loads EntrySP
// into RSP and executes RET returns from Call with its RAX, whatever its
// depth and whatever it did to other registers. On arm64 it is SP at the
// function's entry, Top()-48 (16-byte aligned), where the entry routine's
// frame record (X29, X30) lies: code that moves EntrySP into SP and runs
// LDP X29, X30, [SP], #16; RET returns from Call with its X0.
func (s *Stack) EntrySP() uintptr { return s.top - EntrySPOffset }

// Close unmaps the stack. It returns ErrBusy (and unmaps nothing) while a
// call runs on s, ErrClosed if s was already closed, or the munmap error.
func (s *Stack) Close() error {
	if !s.state.CompareAndSwap(stateIdle, stateClosed) {
		if s.state.Load() == stateClosed {
			return ErrClosed
		}
		return ErrBusy
	}
	mem := s.mem
	s.mem = nil
	if err := unix.Munmap(mem); err != nil {
		return fmt.Errorf("native: munmap stack: %w", err)
	}
	return nil
}

func (s *Stack) acquire() error {
	if !s.state.CompareAndSwap(stateIdle, stateBusy) {
		if s.state.Load() == stateClosed {
			return ErrClosed
		}
		return ErrBusy
	}
	return nil
}

func (s *Stack) release() { s.state.Store(stateIdle) }

// Alloc maps size bytes (> 0; whole pages are mapped) of zeroed, readable
// and writable anonymous memory outside the Go heap, for data that
// generated code reads and writes (control blocks, capture areas). The
// garbage collector neither scans nor moves it; never store Go pointers in
// it. Release it with Free. The cost is one mmap(2). Errors: a non-positive
// size or the mmap error wrapped.
func Alloc(size int) ([]byte, error) {
	if size <= 0 {
		return nil, fmt.Errorf("native: alloc size %d is not positive", size)
	}
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("native: mmap %d bytes: %w", size, err)
	}
	return b, nil
}

// Free unmaps memory returned by Alloc. b must be that slice, or a reslice
// of it that keeps its start and capacity (b[:n]); anything else returns an
// error wrapping unix.EINVAL and unmaps nothing. The cost is one munmap(2).
func Free(b []byte) error {
	if err := unix.Munmap(b[:cap(b)]); err != nil {
		return fmt.Errorf("native: munmap: %w", err)
	}
	return nil
}
