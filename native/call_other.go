//go:build !amd64 && !arm64

package native

import (
	"errors"
	"fmt"
	"runtime"
)

// call is not implemented on this GOARCH: there is no trampoline yet.
func call(fn, top, a1, a2, a3, a4, a5, a6 uintptr) (uintptr, error) {
	return 0, fmt.Errorf("native: Call is not implemented on %s: %w", runtime.GOARCH, errors.ErrUnsupported)
}

func setEntry(pc uintptr) error {
	return fmt.Errorf("native: entry routines are not implemented on %s: %w", runtime.GOARCH, errors.ErrUnsupported)
}

func entry() uintptr { return 0 }
