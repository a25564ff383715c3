package gdbjit

import (
	"bytes"
	"errors"
)

// Values of jit_descriptor.action_flag (GDB manual, "JIT Declarations",
// jit_actions_t).
const (
	actionNone       = 0 // JIT_NOACTION
	actionRegister   = 1 // JIT_REGISTER_FN
	actionUnregister = 2 // JIT_UNREGISTER_FN
)

// Errors, matched with errors.Is.
var (
	// ErrNotELF: the bytes given to Register do not start with an ELF
	// identification (the 4 bytes 0x7f 'E' 'L' 'F').
	ErrNotELF = errors.New("gdbjit: symbol file is not an ELF file")
	// ErrUnregistered: Unregister was called on an entry that is no
	// longer registered.
	ErrUnregistered = errors.New("gdbjit: entry not registered")
	// ErrInvalidProc: Symfile was given a procedure it cannot describe
	// (empty name, empty or overflowing range, overlapping procedures).
	ErrInvalidProc = errors.New("gdbjit: invalid procedure")
)

// checkSymfile checks the ELF magic; gdb ignores anything else with a
// warning.
func checkSymfile(b []byte) error {
	if len(b) < 4 || !bytes.Equal(b[:4], []byte("\x7fELF")) {
		return ErrNotELF
	}
	return nil
}
