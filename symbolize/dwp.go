package symbolize

import (
	"encoding/binary"
	"fmt"

	"github.com/elfimage/elfimage/formaterr"
)

// DWARF package files (.dwp, DWARF 5 section 7.3.5): the .dwo files of a
// program gathered into one file, whose .debug_cu_index maps each split
// unit's dwo_id to its contribution (offset and size) in each of the
// package's sections.

// DW_SECT_* column identifiers of a version 5 unit index (DWARF 5 table
// 7.1).
const (
	sectInfo       = 1
	sectAbbrev     = 3
	sectLine       = 4
	sectLocLists   = 5
	sectStrOffsets = 6
	sectMacro      = 7
	sectRngLists   = 8
	sectMax        = 8
)

// secCUIndex names the section in errors.
const secCUIndex = ".debug_cu_index"

// unitIndexHdrSize is the size of a unit index header in bytes: version
// (2), padding (2), section count, unit count, slot count (4 each).
const unitIndexHdrSize = 16

// cuIndex is a decoded .debug_cu_index. Its tables stay in the section's
// bytes; only the header and the column map are decoded.
type cuIndex struct {
	b                 []byte
	order             binary.ByteOrder
	sections, units   uint32
	slots             uint32
	hashOff, indexOff uint64           // the signatures and the row indexes
	offsOff, sizesOff uint64           // the offset and size rows
	column            [sectMax + 1]int // DW_SECT_* → column, -1 when absent
}

// contribution is one unit's part of a package section: [off, off+size).
type contribution struct{ off, size uint64 }

// parseCUIndex decodes the header of a version 5 .debug_cu_index and
// checks that its tables, in byte order order (the DWARF's), lie inside
// b: slot_count a power of two not
// below unit_count, section_count columns of known, distinct DW_SECT_*
// identifiers including DW_SECT_INFO. Errors are *formaterr.Error
// (Section ".debug_cu_index") naming the offset and field. Cost:
// O(section_count).
func parseCUIndex(b []byte, order binary.ByteOrder) (*cuIndex, error) {
	bad := func(off uint64, field, msg string) error {
		return &formaterr.Error{Source: secCUIndex, Offset: off, Field: field, Msg: msg}
	}
	if len(b) < unitIndexHdrSize {
		return nil, bad(0, "header", fmt.Sprintf("%d bytes, the header needs %d", len(b), unitIndexHdrSize))
	}
	le := order
	x := &cuIndex{b: b, order: order, sections: le.Uint32(b[4:]), units: le.Uint32(b[8:]), slots: le.Uint32(b[12:])}
	if v := le.Uint16(b); v != 5 {
		return nil, bad(0, "version", fmt.Sprintf("version %d: only version 5 (DWARF 5) indexes are read", v))
	}
	if x.slots == 0 || x.slots&(x.slots-1) != 0 {
		return nil, bad(12, "slot_count", fmt.Sprintf("%d is not a power of two", x.slots))
	}
	if x.units > x.slots {
		return nil, bad(8, "unit_count", fmt.Sprintf("%d units in %d slots", x.units, x.slots))
	}
	if x.sections == 0 || x.sections > sectMax {
		return nil, bad(4, "section_count", fmt.Sprintf("%d columns, want 1 to %d", x.sections, sectMax))
	}
	n := uint64(len(b))
	x.hashOff = unitIndexHdrSize
	x.indexOff = x.hashOff + 8*uint64(x.slots)
	cols := x.indexOff + 4*uint64(x.slots)
	x.offsOff = cols + 4*uint64(x.sections)
	x.sizesOff = x.offsOff + 4*uint64(x.sections)*uint64(x.units)
	if end := x.sizesOff + 4*uint64(x.sections)*uint64(x.units); end > n {
		return nil, bad(4, "section_count", fmt.Sprintf("the tables of %d slots, %d units and %d columns need %d bytes, the section has %d", x.slots, x.units, x.sections, end, n))
	}
	for i := range x.column {
		x.column[i] = -1
	}
	for c := range int(x.sections) {
		at := cols + 4*uint64(c)
		id := le.Uint32(b[at:])
		if id == 0 || id > sectMax || id == 2 || x.column[id] >= 0 {
			return nil, bad(at, "section identifier", fmt.Sprintf("DW_SECT %d unknown or repeated", id))
		}
		x.column[id] = c
	}
	if x.column[sectInfo] < 0 {
		return nil, bad(cols, "section identifier", "no DW_SECT_INFO column")
	}
	return x, nil
}

// lookup returns the row (1-based) of the unit with signature sig,
// probing the hash table as DWARF 5 section 7.3.5.4 says: slot sig mod
// slot_count, then steps of ((sig >> 32) mod slot_count) | 1, until the
// signature or an empty slot (row 0); at most slot_count probes. ok is
// false when the unit is not there, or its row is past unit_count.
func (x *cuIndex) lookup(sig uint64) (row uint32, ok bool) {
	le := x.order
	mask := uint64(x.slots - 1)
	h, step := sig&mask, (sig>>32)&mask|1
	for range x.slots {
		r := le.Uint32(x.b[x.indexOff+4*h:])
		if r == 0 {
			return 0, false
		}
		if le.Uint64(x.b[x.hashOff+8*h:]) == sig {
			return r, r <= x.units
		}
		h = (h + step) & mask
	}
	return 0, false
}

// contribution returns row's contribution to section id (DW_SECT_*);
// ok is false when the index has no such column.
func (x *cuIndex) contribution(row uint32, id int) (contribution, bool) {
	if id < 1 || id > sectMax || x.column[id] < 0 || row == 0 || row > x.units {
		return contribution{}, false
	}
	le := x.order
	at := 4 * (uint64(row-1)*uint64(x.sections) + uint64(x.column[id]))
	return contribution{uint64(le.Uint32(x.b[x.offsOff+at:])), uint64(le.Uint32(x.b[x.sizesOff+at:]))}, true
}
