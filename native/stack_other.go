//go:build !linux

package native

import (
	"errors"
	"fmt"
	"runtime"
)

// Stack is a machine stack outside the Go heap; only Linux implements it.
type Stack struct {
	top, bottom uintptr
}

var errNoMmap = fmt.Errorf("native: not implemented on %s: %w", runtime.GOOS, errors.ErrUnsupported)

// NewStack returns an error matching errors.ErrUnsupported outside Linux.
func NewStack(size int) (*Stack, error) { return nil, errNoMmap }

// Top returns the exclusive top of the stack.
func (s *Stack) Top() uintptr { return s.top }

// Bottom returns the lowest usable address.
func (s *Stack) Bottom() uintptr { return s.bottom }

// Size returns the usable size in bytes.
func (s *Stack) Size() int { return int(s.top - s.bottom) }

// EntrySP returns the value of RSP at the entry of the called function.
func (s *Stack) EntrySP() uintptr { return s.top - EntrySPOffset }

// Close does nothing outside Linux.
func (s *Stack) Close() error { return nil }

func (s *Stack) acquire() error { return errNoMmap }
func (s *Stack) release()       {}

// Alloc returns an error matching errors.ErrUnsupported outside Linux.
func Alloc(size int) ([]byte, error) { return nil, errNoMmap }

// Free returns an error matching errors.ErrUnsupported outside Linux.
func Free(b []byte) error { return errNoMmap }
