//go:build unix

package symbolize

import (
	"os"
	"runtime"
	"syscall"
)

// mapFile maps file read-only. An empty file maps to nil.
func mapFile(file *os.File) ([]byte, func() error, error) {
	st, err := file.Stat()
	if err != nil {
		return nil, nil, err
	}
	n := st.Size()
	if n == 0 {
		return nil, func() error { return nil }, nil
	}
	if int64(int(n)) != n {
		return nil, nil, &os.PathError{Op: "mmap", Path: file.Name(), Err: syscall.EFBIG}
	}
	data, err := syscall.Mmap(int(file.Fd()), 0, int(n), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, &os.PathError{Op: "mmap", Path: file.Name(), Err: err}
	}
	runtime.KeepAlive(file)
	return data, func() error { return syscall.Munmap(data) }, nil
}
