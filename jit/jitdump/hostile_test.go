package jitdump

import (
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"github.com/elfimage/elfimage/dwarf"
)

// TestHugeCountBounded: a CODE_DEBUG_INFO record claiming 2^40 line
// entries in a few bytes is refused before anything proportional to the
// count is allocated (issue 6, point 3).
func TestHugeCountBounded(t *testing.T) {
	le := binary.LittleEndian
	var b []byte
	b = le.AppendUint32(b, Magic)
	b = le.AppendUint32(b, 1)  // version
	b = le.AppendUint32(b, 40) // total_size
	b = le.AppendUint32(b, 62) // e_machine
	b = le.AppendUint32(b, 0)  // pad
	b = le.AppendUint32(b, 1)  // pid
	b = le.AppendUint64(b, 0)  // timestamp
	b = le.AppendUint64(b, 0)  // flags
	rec := len(b)
	b = le.AppendUint32(b, uint32(JIT_CODE_DEBUG_INFO))
	b = le.AppendUint32(b, 0) // total_size, patched
	b = le.AppendUint64(b, 0) // timestamp
	b = le.AppendUint64(b, 0x1000)
	b = le.AppendUint64(b, 1<<40) // nr_entry
	b = append(b, make([]byte, 64)...)
	le.PutUint32(b[rec+4:], uint32(len(b)-rec))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Parse(b)
	runtime.ReadMemStats(&after)
	var fe *dwarf.FormatError
	if !errors.As(err, &fe) || fe.Field != "nr_entry" {
		t.Errorf("err = %v, want FormatError on nr_entry", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<10 {
		t.Errorf("%d bytes of input allocated %d bytes", len(b), n)
	}
}
