package symbolize

import (
	"encoding/binary"
	"testing"

	edwarf "github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/line"
)

// TestGuessBudget: a hostile file whose units each point at their own
// line program, every program claiming the rest of .debug_line (the
// programs overlap: each skips the later headers with one unknown
// extended opcode), indexes with a slab of a few times the sections'
// size, not the sum of the programs' claimed sizes (quadratic in the
// number of units), and every unit's index builds without error.
func TestGuessBudget(t *testing.T) {
	const n = 400
	enc := edwarf.Encoding{Version: 4, Format: edwarf.Format32, AddrSize: 8, ByteOrder: binary.LittleEndian}
	p := &line.Program{Enc: enc, CompDir: "/src", Files: []line.File{{Name: "a.c"}, {Name: "a.c"}}}
	var strs edwarf.StrTab
	hdr, err := p.Encode(&strs)
	if err != nil {
		t.Fatal(err)
	}
	if int(binary.LittleEndian.Uint32(hdr))+4 != len(hdr) {
		t.Fatalf("the header's unit_length %d, its size %d", binary.LittleEndian.Uint32(hdr), len(hdr))
	}
	// Each block: the header, then DW_LNE 0x80 (unknown, skipped) whose
	// length (a 5-byte ULEB128) reaches the section's end.
	block := len(hdr) + 7
	total := n * block
	var sec []byte
	uleb5 := func(v uint64) []byte {
		return []byte{byte(v) | 0x80, byte(v>>7) | 0x80, byte(v>>14) | 0x80, byte(v>>21) | 0x80, byte(v >> 28)}
	}
	for k := range n {
		off := k * block
		h := append([]byte(nil), hdr...)
		binary.LittleEndian.PutUint32(h, uint32(total-off-4))
		sec = append(sec, h...)
		sec = append(sec, 0)
		sec = append(sec, uleb5(uint64(total-(off+len(hdr)+6)))...)
		sec = append(sec, 0x80)
	}
	// One abbreviation: a compile unit without children, with
	// DW_AT_stmt_list, DW_AT_low_pc and DW_AT_high_pc (a length).
	abbrev := []byte{1, byte(edwarf.DW_TAG_compile_unit), 0,
		byte(edwarf.DW_AT_stmt_list), byte(edwarf.DW_FORM_sec_offset),
		byte(edwarf.DW_AT_low_pc), byte(edwarf.DW_FORM_addr),
		byte(edwarf.DW_AT_high_pc), byte(edwarf.DW_FORM_data4), 0, 0, 0}
	var infoSec []byte
	for k := range n {
		u := binary.LittleEndian.AppendUint32(nil, 0) // unit_length, patched
		u = binary.LittleEndian.AppendUint16(u, 4)
		u = binary.LittleEndian.AppendUint32(u, 0) // debug_abbrev_offset
		u = append(u, 8, 1)
		u = binary.LittleEndian.AppendUint32(u, uint32(k*block))
		u = binary.LittleEndian.AppendUint64(u, 0x400000+uint64(k)*0x100)
		u = binary.LittleEndian.AppendUint32(u, 0x100)
		binary.LittleEndian.PutUint32(u, uint32(len(u)-4))
		infoSec = append(infoSec, u...)
	}
	m := map[string][]byte{".debug_info": infoSec, ".debug_abbrev": abbrev, ".debug_line": sec}
	d, err := loadSections(func(name string) ([]byte, error) { return m[name], nil }, binary.LittleEndian)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.units) != n {
		t.Fatalf("%d units, want %d", len(d.units), n)
	}
	d.slab = newSlab()
	defer d.slab.release()
	for i := range d.units {
		if x := d.index(i); x.err != nil || x.lines == nil {
			t.Fatalf("unit %d: lines %v, error %v", i, x.lines, x.err)
		}
	}
	if len(d.lines) != n {
		t.Fatalf("%d line tables decoded, want %d", len(d.lines), n)
	}
	limit := int64(guessBudget*(len(infoSec)+len(sec))) + 64<<10
	if got := d.guessBytes.Load(); got > limit {
		t.Errorf("the capacity guesses took %d bytes, want at most %d (%d bytes of sections)", got, limit, len(infoSec)+len(sec))
	}
	if d.slab != nil {
		used := d.slab.inUse()
		if int64(used) > limit {
			t.Errorf("the slab holds %d bytes, want at most %d (%d bytes of sections)", used, limit, len(infoSec)+len(sec))
		}
	}
}
