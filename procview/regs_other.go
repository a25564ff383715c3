//go:build !amd64

package procview

import (
	"fmt"

	"github.com/elfimage/elfimage/unwind"
)

func threadRegs(tid int) (unwind.Frame, error) {
	return unwind.Frame{}, fmt.Errorf("%w: thread %d's registers (PTRACE_GETREGSET) are not read on this machine", ErrLiveStacksArch, tid)
}
