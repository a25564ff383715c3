package symbolize

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/elfimage/elfimage/dwarf"
)

// TestSkipInPlace: skipping a DIE of variable size in place ends where
// skipping it value by value (walkSubrs' other path) ends, whenever it
// accepts the bytes; and it never accepts bytes that path fails on.
// Random abbreviations of fixed, LEB128, block and string forms over
// random bytes, both byte orders, truncated at random.
func TestSkipInPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	forms := []dwarf.Form{dwarf.DW_FORM_data1, dwarf.DW_FORM_data2, dwarf.DW_FORM_data4, dwarf.DW_FORM_data8,
		dwarf.DW_FORM_addr, dwarf.DW_FORM_strp, dwarf.DW_FORM_flag_present, dwarf.DW_FORM_implicit_const,
		dwarf.DW_FORM_udata, dwarf.DW_FORM_sdata, dwarf.DW_FORM_exprloc, dwarf.DW_FORM_block, dwarf.DW_FORM_block1,
		dwarf.DW_FORM_block2, dwarf.DW_FORM_block4, dwarf.DW_FORM_string, dwarf.DW_FORM_strx, dwarf.DW_FORM_data16}
	enc := dwarf.Encoding{Version: 5, Format: dwarf.Format32, AddrSize: 8}
	accepted, agreed := 0, 0
	for iter := range 20000 {
		order := binary.ByteOrder(binary.LittleEndian)
		if iter%2 == 1 {
			order = binary.BigEndian
		}
		a := abbrev{}
		for range 1 + rng.IntN(6) {
			s := attrSpec{form: forms[rng.IntN(len(forms))]}
			s.fs, _ = s.form.Spec()
			s.size = fixedSize(&s.fs, enc)
			a.specs = append(a.specs, s)
		}
		a.fixed = -1
		var steps []skipStep
		planSkip(&a, &steps)
		if !a.skipOK {
			t.Fatalf("abbreviation of known forms not planned: %+v", a.specs)
		}
		data := make([]byte, rng.IntN(40))
		for i := range data {
			switch rng.IntN(4) {
			case 0:
				data[i] = 0
			case 1:
				data[i] = 0x80 | byte(rng.IntN(128)) // LEB128 continuation
			default:
				data[i] = byte(rng.IntN(8))
			}
		}
		pos := rng.IntN(len(data) + 1)
		end := pos + rng.IntN(len(data)-pos+1)
		b := dwarf.MakeBuf(secInfo, order, data)
		b.Seek(uint64(pos), "test")
		b.SetEnd(end)
		for i := range a.specs {
			if s := &a.specs[i]; s.size >= 0 {
				b.Skip(uint64(s.size), "attribute value")
			} else {
				skipForm(&b, s, enc)
			}
		}
		p, ok := skipInPlace(data, pos, end, a.skip, order == binary.LittleEndian, nil)
		if !ok {
			continue
		}
		accepted++
		if b.Err() != nil {
			t.Fatalf("specs %+v, data %x [%d:%d]: in place ends at %d, value by value fails: %v", a.specs, data, pos, end, p, b.Err())
		}
		if uint64(p) != b.Off() {
			t.Fatalf("specs %+v, data %x [%d:%d]: in place ends at %d, value by value at %d", a.specs, data, pos, end, p, b.Off())
		}
		agreed++
	}
	if accepted < 2000 {
		t.Fatalf("only %d of 20,000 DIEs skipped in place: the test's bytes are too rarely valid", accepted)
	}
	t.Logf("%d skipped in place, all agreeing", agreed)
}
