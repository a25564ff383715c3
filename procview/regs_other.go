//go:build !amd64

package procview

import (
	"errors"

	"github.com/elfimage/elfimage/unwind"
)

func threadRegs(tid int) (unwind.Frame, error) {
	return unwind.Frame{}, errors.New("procview: thread registers are read on amd64 only")
}
