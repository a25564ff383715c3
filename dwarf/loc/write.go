package loc

import (
	"errors"
	"fmt"

	"github.com/elfimage/elfimage/dwarf"
)

// Section names.
const (
	SecLoc      = ".debug_loc"
	SecLocLists = ".debug_loclists"
	SecRanges   = ".debug_ranges"
	SecRngLists = ".debug_rnglists"
	SecAranges  = ".debug_aranges"
	SecAddr     = ".debug_addr"
)

// ErrInvalidList is wrapped by every error the writers return for input
// they refuse: an empty or reversed range (Start >= End), an address that
// does not fit the address size, a DWARF 2–4 expression longer than 65535
// bytes, a default location before DWARF 5, a section too large for the
// 32-bit format, an invalid encoding. Match it with errors.Is.
var ErrInvalidList = errors.New("loc: invalid list")

// Entry is one location list entry: the DWARF expression Expr gives the
// object's location for program counters in the half-open address range
// [Start, End) (DWARF 5 section 2.6.2).
//
// Default marks a DW_LLE_default_location entry (DWARF 5 only): Expr
// applies to every address no other entry of the list covers, and Start
// and End are ignored (the reader returns them as 0).
type Entry struct {
	Start, End uint64 // addresses, [Start, End)
	Expr       []byte // DWARF expression; empty means "optimized out"
	Default    bool
}

// Range is a half-open address range [Start, End) (DWARF 5 section 2.17.3).
type Range struct {
	Start, End uint64
}

// maxAddr returns the largest address that fits in size bytes.
func maxAddr(size uint8) uint64 {
	if size >= 8 {
		return ^uint64(0)
	}
	return 1<<(8*uint(size)) - 1
}

func checkEnc(enc dwarf.Encoding) error {
	if err := enc.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidList, err)
	}
	return nil
}

// lists is the writer shared by LocLists and RangeLists.
type lists struct {
	enc   dwarf.Encoding
	isLoc bool
	buf   []byte
	abs   []uint64 // offsets of absolute addresses in buf
}

func (l *lists) init(enc dwarf.Encoding, isLoc bool) error {
	if err := checkEnc(enc); err != nil {
		return err
	}
	l.enc, l.isLoc = enc, isLoc
	if enc.Version < 5 {
		return nil
	}
	// DWARF 5 section 7.29: unit_length, version, address_size,
	// segment_selector_size, offset_entry_count.
	if enc.Format == dwarf.Format64 {
		l.buf = append(l.buf, 0xff, 0xff, 0xff, 0xff)
		l.buf = append(l.buf, make([]byte, 8)...) // unit_length
	} else {
		l.buf = append(l.buf, make([]byte, 4)...) // unit_length
	}
	l.buf = dwarf.AppendUint(l.buf, enc.ByteOrder, 2, 5) // version
	l.buf = append(l.buf, enc.AddrSize)                  // address_size
	l.buf = append(l.buf, 0)                             // segment_selector_size
	l.buf = append(l.buf, 0, 0, 0, 0)                    // offset_entry_count
	return nil
}

func (l *lists) section() string {
	switch {
	case l.isLoc && l.enc.Version >= 5:
		return SecLocLists
	case l.isLoc:
		return SecLoc
	case l.enc.Version >= 5:
		return SecRngLists
	}
	return SecRanges
}

func (l *lists) addr(v uint64) {
	l.buf = dwarf.AppendUint(l.buf, l.enc.ByteOrder, int(l.enc.AddrSize), v)
}

// absAddr writes an absolute address and records where it is.
func (l *lists) absAddr(v uint64) {
	l.abs = append(l.abs, uint64(len(l.buf)))
	l.addr(v)
}

// add encodes one list. es are the entries; for a range list Expr and
// Default are unused.
func (l *lists) add(es []Entry, base uint64) (uint64, error) {
	max := maxAddr(l.enc.AddrSize)
	lo, anyBounded := ^uint64(0), false
	for i, e := range es {
		if e.Default {
			if !l.isLoc || l.enc.Version < 5 {
				return 0, fmt.Errorf("%w: entry %d: a default location needs DWARF 5 location lists", ErrInvalidList, i)
			}
		} else {
			if e.Start >= e.End {
				return 0, fmt.Errorf("%w: entry %d: empty or reversed range [%#x, %#x)", ErrInvalidList, i, e.Start, e.End)
			}
			if e.End > max {
				return 0, fmt.Errorf("%w: entry %d: end address %#x does not fit in %d bytes", ErrInvalidList, i, e.End, l.enc.AddrSize)
			}
			lo, anyBounded = min(lo, e.Start), true
		}
		if l.isLoc && l.enc.Version < 5 && len(e.Expr) > 0xffff {
			return 0, fmt.Errorf("%w: entry %d: expression of %d bytes longer than 65535", ErrInvalidList, i, len(e.Expr))
		}
	}
	if base > max {
		return 0, fmt.Errorf("%w: base address %#x does not fit in %d bytes", ErrInvalidList, base, l.enc.AddrSize)
	}
	mark, markAbs := len(l.buf), len(l.abs)
	off := uint64(mark)
	if l.enc.Version >= 5 {
		l.add5(es, lo, anyBounded)
	} else {
		l.add4(es, lo, base)
	}
	if n := uint64(len(l.buf)); l.enc.Format == dwarf.Format32 && n >= 0xfffffff0 {
		l.buf, l.abs = l.buf[:mark], l.abs[:markAbs]
		return 0, fmt.Errorf("%w: %s grows past 4 GiB, the limit of 32-bit DWARF", ErrInvalidList, l.section())
	}
	return off, nil
}

// add5 writes a DWARF 5 list: DW_LLE_base_address (the lowest start)
// followed by DW_LLE_offset_pair entries, or DW_LLE_start_length entries,
// whichever is shorter (offset pairs on a tie).
func (l *lists) add5(es []Entry, lo uint64, anyBounded bool) {
	a := int(l.enc.AddrSize)
	pairSize, startLenSize := 1+a, 0
	for _, e := range es {
		if e.Default {
			continue
		}
		pairSize += 1 + dwarf.Uleb128Size(e.Start-lo) + dwarf.Uleb128Size(e.End-lo)
		startLenSize += 1 + a + dwarf.Uleb128Size(e.End-e.Start)
	}
	pairs := anyBounded && pairSize <= startLenSize
	// Kind codes differ between the two sections (tables 7.10 and 7.30).
	kBase, kPair, kStartLen, kEnd := byte(dwarf.DW_RLE_base_address), byte(dwarf.DW_RLE_offset_pair), byte(dwarf.DW_RLE_start_length), byte(dwarf.DW_RLE_end_of_list)
	if l.isLoc {
		kBase, kPair, kStartLen, kEnd = byte(dwarf.DW_LLE_base_address), byte(dwarf.DW_LLE_offset_pair), byte(dwarf.DW_LLE_start_length), byte(dwarf.DW_LLE_end_of_list)
	}
	if pairs {
		l.buf = append(l.buf, kBase)
		l.absAddr(lo)
	}
	for _, e := range es {
		switch {
		case e.Default:
			l.buf = append(l.buf, byte(dwarf.DW_LLE_default_location))
		case pairs:
			l.buf = append(l.buf, kPair)
			l.buf = dwarf.AppendUleb128(l.buf, e.Start-lo)
			l.buf = dwarf.AppendUleb128(l.buf, e.End-lo)
		default:
			l.buf = append(l.buf, kStartLen)
			l.absAddr(e.Start)
			l.buf = dwarf.AppendUleb128(l.buf, e.End-e.Start)
		}
		if l.isLoc {
			l.buf = dwarf.AppendUleb128(l.buf, uint64(len(e.Expr)))
			l.buf = append(l.buf, e.Expr...)
		}
	}
	l.buf = append(l.buf, kEnd)
}

// add4 writes a DWARF 2–4 list: pairs relative to base, preceded by a base
// address selection entry for the lowest start when some entry starts
// below base.
func (l *lists) add4(es []Entry, lo, base uint64) {
	if len(es) > 0 && lo < base {
		l.addr(maxAddr(l.enc.AddrSize))
		l.absAddr(lo)
		base = lo
	}
	for _, e := range es {
		l.addr(e.Start - base)
		l.addr(e.End - base)
		if l.isLoc {
			l.buf = dwarf.AppendUint(l.buf, l.enc.ByteOrder, 2, uint64(len(e.Expr)))
			l.buf = append(l.buf, e.Expr...)
		}
	}
	l.addr(0)
	l.addr(0)
}

func (l *lists) bytes() []byte {
	if l.enc.Version >= 5 {
		// unit_length counts the bytes after itself.
		if l.enc.Format == dwarf.Format64 {
			l.enc.ByteOrder.PutUint64(l.buf[4:], uint64(len(l.buf)-12))
		} else {
			l.enc.ByteOrder.PutUint32(l.buf, uint32(len(l.buf)-4))
		}
	}
	return l.buf
}

// LocLists builds the location lists of one section: for DWARF 5 one
// .debug_loclists contribution (header with offset_entry_count 0, then
// the lists), for DWARF 2–4 .debug_loc (no header). The version, offset
// format, address size and byte order come from the encoding given to
// [NewLocLists].
//
// Units refer to a list with DW_AT_location of form DW_FORM_sec_offset
// (data4/data8 before version 4) holding the offset AddList returns; no
// offset table is written, so DW_FORM_loclistx cannot refer to these lists
// and DW_AT_loclists_base is not needed.
//
// Encoding choices: a DWARF 5 list is either DW_LLE_base_address (the
// lowest start address) followed by DW_LLE_offset_pair entries, or
// DW_LLE_start_length entries, whichever is shorter; it never depends on
// the unit's base address. A DWARF 2–4 list holds (begin, end) pairs
// relative to [LocLists.Base], preceded by a base address selection entry
// for the lowest start address when an entry starts below Base.
type LocLists struct {
	// Base is the base address the DWARF 2–4 lists are read against: the
	// DW_AT_low_pc of the unit whose DIEs refer to them (0 when it has
	// none). It may change between AddList calls when units with
	// different bases share the section. DWARF 5 lists ignore it.
	Base uint64
	l    lists
}

// NewLocLists returns an empty location list section for enc with base
// address base (see [LocLists.Base]). It fails (wrapping
// [ErrInvalidList]) when enc is not valid.
func NewLocLists(enc dwarf.Encoding, base uint64) (*LocLists, error) {
	b := &LocLists{Base: base}
	if err := b.l.init(enc, true); err != nil {
		return nil, err
	}
	return b, nil
}

// Section returns the name of the section being built: ".debug_loclists"
// for DWARF 5, ".debug_loc" before.
func (b *LocLists) Section() string { return b.l.section() }

// AddList appends a location list of entries in the given order (they may
// overlap; an empty list is valid) and returns its offset in the section,
// the value of DW_AT_location. Errors wrap [ErrInvalidList] and leave the
// section unchanged. Cost: linear in the entries and their expressions.
func (b *LocLists) AddList(entries []Entry) (offset uint64, err error) {
	return b.l.add(entries, b.Base)
}

// Bytes returns the section contents, with the DWARF 5 unit_length set to
// cover every list added so far. The slice is the builder's own: do not
// modify it, and call Bytes again after further AddList calls.
func (b *LocLists) Bytes() []byte { return b.l.bytes() }

// AddrOffsets returns the offsets in the section of every absolute address
// written so far (each AddrSize bytes: DWARF 5 DW_LLE_base_address and
// DW_LLE_start_length operands, the address of a DWARF 2–4 base address
// selection entry), in increasing order. Offset pairs are relative and
// not listed: a linker that moves the code by a constant adds it to
// exactly these words (and to the unit's DW_AT_low_pc). The slice is the
// builder's own; cost O(1).
func (b *LocLists) AddrOffsets() []uint64 { return b.l.abs }

// RangeLists builds the range lists of one section: for DWARF 5 one
// .debug_rnglists contribution (header with offset_entry_count 0, then
// the lists), for DWARF 2–4 .debug_ranges. It follows the same rules and
// encoding choices as [LocLists], with DW_RLE_* kinds and no expressions.
// Units refer to a list with DW_AT_ranges of form DW_FORM_sec_offset.
type RangeLists struct {
	// Base is the base address DWARF 2–4 lists are read against, as for
	// [LocLists.Base].
	Base    uint64
	l       lists
	scratch []Entry
}

// NewRangeLists returns an empty range list section for enc with base
// address base. It fails (wrapping [ErrInvalidList]) when enc is not
// valid.
func NewRangeLists(enc dwarf.Encoding, base uint64) (*RangeLists, error) {
	b := &RangeLists{Base: base}
	if err := b.l.init(enc, false); err != nil {
		return nil, err
	}
	return b, nil
}

// Section returns the name of the section being built: ".debug_rnglists"
// for DWARF 5, ".debug_ranges" before.
func (b *RangeLists) Section() string { return b.l.section() }

// AddList appends a range list of ranges in the given order and returns
// its offset in the section, the value of DW_AT_ranges. Errors wrap
// [ErrInvalidList] and leave the section unchanged. Cost: linear in the
// number of ranges.
func (b *RangeLists) AddList(ranges []Range) (offset uint64, err error) {
	b.scratch = b.scratch[:0]
	for _, r := range ranges {
		b.scratch = append(b.scratch, Entry{Start: r.Start, End: r.End})
	}
	return b.l.add(b.scratch, b.Base)
}

// Bytes returns the section contents, as [LocLists.Bytes].
func (b *RangeLists) Bytes() []byte { return b.l.bytes() }

// AddrOffsets returns the offsets of the absolute addresses in the
// section, as [LocLists.AddrOffsets].
func (b *RangeLists) AddrOffsets() []uint64 { return b.l.abs }
