package elfobj

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"testing"
)

// TestNoteAlign8: in a note section aligned to 8 (.note.gnu.property, as
// ld writes it), the descriptor starts at the next multiple of 8 after
// the 12-byte header and the name, counted from the start of the notes:
// a 4-byte "GNU" name needs no padding, the descriptor is at 16, and the
// next note at 16 plus the descriptor padded to 8 (readelf -n reads the
// x86 feature property this way).
func TestNoteAlign8(t *testing.T) {
	le := binary.LittleEndian
	var b []byte
	desc1 := []byte{2, 0, 0, 0xc0, 4, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0} // GNU_PROPERTY_X86_FEATURE_1_AND: IBT, SHSTK
	b = le.AppendUint32(b, 4)
	b = le.AppendUint32(b, uint32(len(desc1)))
	b = le.AppendUint32(b, 5) // NT_GNU_PROPERTY_TYPE_0
	b = append(b, "GNU\x00"...)
	b = append(b, desc1...)
	desc2 := []byte{1, 2, 3}
	b = le.AppendUint32(b, 6)
	b = le.AppendUint32(b, uint32(len(desc2)))
	b = le.AppendUint32(b, 1)
	b = append(b, "Linux\x00\x00\x00\x00\x00\x00\x00"...) // 6-byte name at 0x2c, padded to 0x38: 12 bytes
	b = append(b, desc2...)
	r := NewNoteReader(b, 0x1000, elf.ELFDATA2LSB, 8, ".note.gnu.property")
	n1, ok1 := r.Next()
	n2, ok2 := r.Next()
	_, ok3 := r.Next()
	if !ok1 || string(n1.Name) != "GNU" || n1.Type != 5 || !bytes.Equal(n1.Desc, desc1) || n1.DescOffset != 0x1010 {
		t.Errorf("first note: %+v %v", n1, ok1)
	}
	if !ok2 || string(n2.Name) != "Linux" || !bytes.Equal(n2.Desc, desc2) || n2.Offset != 0x1020 || n2.DescOffset != 0x1038 {
		t.Errorf("second note: %+v %v", n2, ok2)
	}
	if ok3 || r.Err() != nil {
		t.Errorf("after the last note: %v %v", ok3, r.Err())
	}
}
