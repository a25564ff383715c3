package procview

import (
	"errors"
	"fmt"
	"io"

	"golang.org/x/sys/unix"

	"github.com/elfimage/elfimage/unwind"
)

// Memory is an io.ReaderAt over the memory of process PID, read with
// process_vm_readv(2) (the caller needs ptrace access to the process). The
// offset of ReadAt is a run-time address. A read that stops at an unmapped
// page returns the bytes before it and an error wrapping unwind.ErrMemory;
// addresses at or above 2^63 fail the same way. It is safe for concurrent
// use. Cost: one system call per 1 MiB.
type Memory struct {
	PID int
}

// ReadAt implements io.ReaderAt.
func (m Memory) ReadAt(p []byte, off int64) (n int, err error) {
	if off < 0 {
		return 0, fmt.Errorf("%w: address %#x", unwind.ErrMemory, uint64(off))
	}
	for n < len(p) {
		chunk := p[n:min(len(p), n+1<<20)]
		local := []unix.Iovec{{Base: &chunk[0]}}
		local[0].SetLen(len(chunk))
		remote := []unix.RemoteIovec{{Base: uintptr(off) + uintptr(n), Len: len(chunk)}}
		k, e := unix.ProcessVMReadv(m.PID, local, remote, 0)
		if e == unix.EINTR {
			continue
		}
		if k <= 0 {
			if e == nil {
				e = io.ErrUnexpectedEOF
			}
			return n, fmt.Errorf("%w: reading %d bytes at %#x in process %d: %w", unwind.ErrMemory, len(chunk), uint64(off)+uint64(n), m.PID, e)
		}
		n += k
	}
	return n, nil
}

// readFull reads len(p) bytes at addr, failing on a short read.
func readFull(r io.ReaderAt, p []byte, addr uint64) error {
	if addr >= 1<<63 {
		return fmt.Errorf("%w: address %#x", unwind.ErrMemory, addr)
	}
	n, err := r.ReadAt(p, int64(addr))
	if n == len(p) {
		return nil
	}
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	if !errors.Is(err, unwind.ErrMemory) {
		err = fmt.Errorf("%w: %w", unwind.ErrMemory, err)
	}
	return err
}

// sectionReader is an io.ReaderAt over [base, base+size) of memory,
// offsets relative to base: an ELF image in a process's memory read like
// a file.
type sectionReader struct {
	r          io.ReaderAt
	base, size uint64
}

func (s sectionReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || uint64(off) >= s.size {
		return 0, io.EOF
	}
	if rest := s.size - uint64(off); uint64(len(p)) > rest {
		p = p[:rest]
		n, err := s.r.ReadAt(p, int64(s.base+uint64(off)))
		if err == nil {
			err = io.EOF
		}
		return n, err
	}
	return s.r.ReadAt(p, int64(s.base+uint64(off)))
}
