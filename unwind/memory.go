package unwind

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime/debug"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrMemory is wrapped by the errors of the [Memory] implementations of
// this package when an address cannot be read (outside a snapshot,
// unmapped, or a fault).
var ErrMemory = errors.New("unwind: memory not readable")

// Snapshot is a [SizedMemory] over a copy of part of an address space,
// typically a thread's stack captured by a profiler or crash handler (the
// bytes [Base, Base+len(Data))). Order is the target byte order
// (nil: little-endian). Reads allocate nothing unless they fail; a
// Snapshot may be used by several goroutines at once.
type Snapshot struct {
	Base  uint64
	Data  []byte
	Order binary.ByteOrder
}

// ReadUint64 implements [Memory]. Errors wrap [ErrMemory]. Cost: O(1).
func (s *Snapshot) ReadUint64(addr uint64) (uint64, error) { return s.ReadSized(addr, 8) }

// ReadSized implements [SizedMemory]: size (1 to 8) bytes at addr as an
// unsigned integer. Errors wrap [ErrMemory]. Cost: O(1).
func (s *Snapshot) ReadSized(addr uint64, size int) (uint64, error) {
	if size < 1 || size > 8 || addr < s.Base || addr-s.Base > uint64(len(s.Data)) || uint64(len(s.Data))-(addr-s.Base) < uint64(size) {
		return 0, fmt.Errorf("%w: %d bytes at %#x outside the snapshot [%#x, %#x)", ErrMemory, size, addr, s.Base, s.Base+uint64(len(s.Data)))
	}
	b := s.Data[addr-s.Base:]
	bo := s.Order
	if bo == nil {
		bo = binary.LittleEndian
	}
	var v uint64
	if bo == binary.LittleEndian {
		for i := size - 1; i >= 0; i-- {
			v = v<<8 | uint64(b[i])
		}
	} else {
		for i := range size {
			v = v<<8 | uint64(b[i])
		}
	}
	return v, nil
}

// Local is a [SizedMemory] over the memory of the calling process, for
// unwinding in-process (a stack the caller knows is live, for example a
// thread stopped in a signal handler, or the stack of native code called
// from Go). If Hi > Lo, reads outside [Lo, Hi) fail without touching
// memory; otherwise any address may be read, and a read of unmapped memory
// is turned into an error by runtime/debug.SetPanicOnFault instead of
// crashing the process. Reads are native-endian and allocate nothing unless
// they fail.
type Local struct {
	Lo, Hi uint64
}

// ReadUint64 implements [Memory]. Errors wrap [ErrMemory]. Cost: one load.
func (m *Local) ReadUint64(addr uint64) (uint64, error) { return m.ReadSized(addr, 8) }

// ReadSized implements [SizedMemory]. Errors wrap [ErrMemory].
func (m *Local) ReadSized(addr uint64, size int) (v uint64, err error) {
	if size < 1 || size > 8 || addr+uint64(size) < addr {
		return 0, fmt.Errorf("%w: %d bytes at %#x", ErrMemory, size, addr)
	}
	if m.Hi > m.Lo && (addr < m.Lo || addr+uint64(size) > m.Hi) {
		return 0, fmt.Errorf("%w: %d bytes at %#x outside [%#x, %#x)", ErrMemory, size, addr, m.Lo, m.Hi)
	}
	defer func(old bool) {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			v, err = 0, fmt.Errorf("%w: fault reading %d bytes at %#x", ErrMemory, size, addr)
		}
	}(debug.SetPanicOnFault(true))
	a := uintptr(addr)
	p := *(*unsafe.Pointer)(unsafe.Pointer(&a)) // an address outside the Go heap
	switch size {
	case 8:
		return *(*uint64)(p), nil
	case 4:
		return uint64(*(*uint32)(p)), nil
	case 2:
		return uint64(*(*uint16)(p)), nil
	case 1:
		return uint64(*(*uint8)(p)), nil
	}
	var b [8]byte
	for i := range size {
		pa := uintptr(addr) + uintptr(i)
		b[i] = *(*uint8)(*(*unsafe.Pointer)(unsafe.Pointer(&pa)))
	}
	return nativeSized(b[:], size), nil
}

func nativeSized(b []byte, size int) uint64 {
	var v uint64
	if isLittleEndian() {
		for i := size - 1; i >= 0; i-- {
			v = v<<8 | uint64(b[i])
		}
		return v
	}
	for i := range size {
		v = v<<8 | uint64(b[i])
	}
	return v
}

func isLittleEndian() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}

// Remote is a [SizedMemory] over another process's memory, read with
// process_vm_readv(2) (the caller needs ptrace access to the process: the
// same user and, with Yama ptrace_scope 1, an ancestor or CAP_SYS_PTRACE).
// Reads are native-endian. A Remote is not safe for concurrent use (it
// holds the read buffer); its reads allocate nothing unless they fail.
type Remote struct {
	PID int

	buf    [8]byte
	local  [1]unix.Iovec
	remote [1]unix.RemoteIovec
}

// NewRemote returns a Remote for process pid.
func NewRemote(pid int) *Remote { return &Remote{PID: pid} }

// ReadUint64 implements [Memory]. Errors wrap [ErrMemory]. Cost: one
// system call.
func (m *Remote) ReadUint64(addr uint64) (uint64, error) { return m.ReadSized(addr, 8) }

// ReadSized implements [SizedMemory]. Errors wrap [ErrMemory] (and the
// system call's errno).
func (m *Remote) ReadSized(addr uint64, size int) (uint64, error) {
	if size < 1 || size > 8 {
		return 0, fmt.Errorf("%w: bad size %d", ErrMemory, size)
	}
	m.local[0].Base = &m.buf[0]
	m.local[0].SetLen(size)
	m.remote[0] = unix.RemoteIovec{Base: uintptr(addr), Len: size}
	n, err := unix.ProcessVMReadv(m.PID, m.local[:], m.remote[:], 0)
	if err != nil || n != size {
		if err == nil {
			err = errors.New("short read")
		}
		return 0, fmt.Errorf("%w: %d bytes at %#x in process %d: %w", ErrMemory, size, addr, m.PID, err)
	}
	return nativeSized(m.buf[:], size), nil
}
