//go:build !(linux && (amd64 || arm64))

package gdbjit

import (
	"errors"
	"fmt"
)

// Entry is a registered symbol file; see the linux implementation (amd64, arm64).
// On this platform none can be made.
type Entry struct{}

var errUnsupported = fmt.Errorf("gdbjit: %w on this platform (linux on amd64 and arm64 only)", errors.ErrUnsupported)

// Register returns an error matching errors.ErrUnsupported: the interface
// is implemented on linux on amd64 and arm64 only.
func Register(symfile []byte) (*Entry, error) { return nil, errUnsupported }

// RegisterBatch returns an error matching errors.ErrUnsupported.
func RegisterBatch(symfiles [][]byte) ([]*Entry, error) { return nil, errUnsupported }

// RegisterFunc is not supported on this platform.
func RegisterFunc(size int, fill func(dst []byte) error) (*Entry, error) {
	return nil, errUnsupported
}

// Unregister returns an error matching errors.ErrUnsupported.
func (e *Entry) Unregister() error { return errUnsupported }

// Addr returns 0.
func (e *Entry) Addr() uintptr { return 0 }

// SymfileAddr returns 0.
func (e *Entry) SymfileAddr() uintptr { return 0 }

// SymfileSize returns 0.
func (e *Entry) SymfileSize() int { return 0 }

// Len returns 0.
func Len() int { return 0 }

// DescriptorAddr returns 0: there is no descriptor on this platform.
func DescriptorAddr() uintptr { return 0 }

// RegisterProcs returns an error matching errors.ErrUnsupported.
func RegisterProcs(procs []Proc) (*Entry, error) { return nil, errUnsupported }
