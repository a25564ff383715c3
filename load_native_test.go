package elfimage

import (
	"encoding/binary"
	"testing"

	"github.com/elfimage/elfimage/native"
)

// TestCallLoadedCode calls the loaded `mov eax, 42; ret` through the entry
// point and through the relocated pointer in .data, for every load path.
func TestCallLoadedCode(t *testing.T) {
	s, err := native.NewStack(64 << 10)
	if err != nil {
		t.Fatalf("native stacks unavailable: %v", err)
	}
	defer s.Close()
	for name, im := range loadAll(t, buildTestImage()) {
		if got, err := native.CallErr(im.Entry(), s); err != nil || got != 42 {
			t.Errorf("%s: call Entry() = %d, %v; want 42", name, got, err)
		}
		ptr := uintptr(binary.LittleEndian.Uint64(im.Bytes()[tDataOff:]))
		if got, err := native.CallErr(ptr, s); err != nil || got != 42 {
			t.Errorf("%s: call through relocated pointer = %d, %v; want 42", name, got, err)
		}
	}
}
