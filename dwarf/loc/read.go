package loc

import (
	"fmt"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/formaterr"
)

// Sections holds the sections location and range lists are read from;
// those a caller does not use may be nil. The lists' version decides which
// is read: LocLists and RngLists for DWARF 5, Loc and Ranges before.
type Sections struct {
	Loc      []byte // .debug_loc (DWARF 2–4)
	LocLists []byte // .debug_loclists (DWARF 5)
	Ranges   []byte // .debug_ranges (DWARF 2–4)
	RngLists []byte // .debug_rnglists (DWARF 5)
	// Addr is .debug_addr, read by the DWARF 5 indexed kinds
	// (DW_LLE_base_addressx, startx_endx, startx_length and their DW_RLE
	// twins); AddrBase is the referring unit's DW_AT_addr_base, the
	// offset in Addr of address index 0 (8 or 16, just past the section
	// header, when the unit has none).
	Addr     []byte
	AddrBase uint64
}

// internal entry kinds, shared by both DWARF 5 sections.
const (
	kEnd = iota
	kBaseAddressx
	kStartxEndx
	kStartxLength
	kOffsetPair
	kDefault
	kBaseAddress
	kStartEnd
	kStartLength
	kUnknown
)

// rleKinds maps a DW_RLE_* code (table 7.30) to an internal kind; DW_LLE_*
// codes (table 7.10) are the internal kinds themselves.
var rleKinds = [...]uint8{kEnd, kBaseAddressx, kStartxEndx, kStartxLength, kOffsetPair, kBaseAddress, kStartEnd, kStartLength}

// ListReader iterates over the entries of one location or range list
// without allocating. Make one with [NewLocListReader] or
// [NewRangeListReader], call [ListReader.Next] until it reports false,
// then check [ListReader.Err]. A ListReader is a value meant to live on
// the caller's stack; it holds no reference beyond the section slices.
type ListReader struct {
	b        dwarf.Buf
	addr     []byte
	addrBase uint64
	base     uint64
	addrSize uint8
	v5       bool
	isLoc    bool
	done     bool
	err      error
}

// NewLocListReader returns a reader of the location list at offset off
// of sec.LocLists (enc.Version 5) or sec.Loc (versions 2–4), the value of
// a DW_AT_location of class loclist (a loclistx index must first be
// resolved through the unit's offset table). enc gives the version,
// address size and byte order of the referring unit; cuBase is the unit's
// base address (its DW_AT_low_pc, or 0), the initial base of
// DW_LLE_offset_pair entries and of DWARF 2–4 pairs. An invalid enc or
// off makes the first Next report false with the error in Err. Cost:
// constant, no allocation.
func NewLocListReader(sec Sections, enc dwarf.Encoding, off, cuBase uint64) ListReader {
	data, name := sec.Loc, SecLoc
	if enc.Version >= 5 {
		data, name = sec.LocLists, SecLocLists
	}
	return newListReader(sec, enc, off, cuBase, data, name, true)
}

// NewRangeListReader is [NewLocListReader] for the range list at off of
// sec.RngLists (version 5) or sec.Ranges (versions 2–4), the value of a
// DW_AT_ranges. The entries it returns have no Expr.
func NewRangeListReader(sec Sections, enc dwarf.Encoding, off, cuBase uint64) ListReader {
	data, name := sec.Ranges, SecRanges
	if enc.Version >= 5 {
		data, name = sec.RngLists, SecRngLists
	}
	return newListReader(sec, enc, off, cuBase, data, name, false)
}

func newListReader(sec Sections, enc dwarf.Encoding, off, cuBase uint64, data []byte, name string, isLoc bool) ListReader {
	r := ListReader{
		addr: sec.Addr, addrBase: sec.AddrBase, base: cuBase, addrSize: enc.AddrSize,
		v5: enc.Version >= 5, isLoc: isLoc,
	}
	if err := enc.Validate(); err != nil {
		r.err, r.done = fmt.Errorf("loc: %v", err), true
		return r
	}
	r.b = dwarf.MakeBuf(name, enc.ByteOrder, data)
	r.b.Seek(off, "list offset")
	if r.b.Err() == nil && off == uint64(len(data)) {
		r.b.Fail("list offset", "offset at end of section")
	}
	return r
}

// Err returns the first error met, or nil. Decoding errors are
// *formaterr.Error values (for .debug_addr lookups, naming
// .debug_addr); an invalid encoding is a plain error.
func (r *ListReader) Err() error {
	if r.err != nil {
		return r.err
	}
	return r.b.Err()
}

// fail records a FormatError for the list section at off.
func (r *ListReader) fail(off uint64, field, msg string) {
	r.b.FailAt(off, field, msg)
	r.done = true
}

// addrx returns the address at index idx of .debug_addr.
func (r *ListReader) addrx(idx uint64) uint64 {
	if r.done || r.b.Err() != nil {
		return 0
	}
	a := uint64(r.addrSize)
	off := r.addrBase + idx*a
	if idx > (^uint64(0)-r.addrBase)/a || off > uint64(len(r.addr)) || uint64(len(r.addr))-off < a {
		r.err = &formaterr.Error{Source: SecAddr, Offset: off, Field: "address index",
			Msg: fmt.Sprintf("index %d (base %#x) outside .debug_addr of %#x bytes", idx, r.addrBase, len(r.addr))}
		r.done = true
		return 0
	}
	b := r.addr[off:]
	if a == 4 {
		return uint64(r.b.Order.Uint32(b))
	}
	return r.b.Order.Uint64(b)
}

// wrap returns base+off modulo the address size: offsets from a base
// address (DW_LLE_offset_pair, DW_RLE_offset_pair, DWARF 2–4 pairs) are
// unsigned, and producers rely on wrap-around to reach addresses below the
// base (Go's linker writes such offsets; LLVM's reader wraps them too).
func (r *ListReader) wrap(base, off uint64) uint64 {
	if r.addrSize >= 8 {
		return base + off
	}
	return (base + off) & (1<<(8*uint(r.addrSize)) - 1)
}

// add returns x+y, failing when the sum leaves the address space.
func (r *ListReader) add(at, x, y uint64, field string) uint64 {
	if !fitsRange(x, y, r.addrSize) {
		r.fail(at, field, fmt.Sprintf("address %#x + %#x overflows %d-byte addresses", x, y, r.addrSize))
		return 0
	}
	return x + y
}

// Next decodes entries up to the next one that covers addresses (or the
// next default location), stores it in e and reports true. It reports
// false at the end of the list or on an error (see [ListReader.Err]).
// Base address entries are applied, not returned; entries with an empty
// range (DWARF 4 "no effect", or a zero-length DWARF 5 entry) are skipped;
// an entry whose end is before its start is an error. e.Expr is a subslice
// of the section. Each call consumes input, so a list is read in time
// linear in its size. Cost: no allocation except for an error.
func (r *ListReader) Next(e *Entry) bool {
	for !r.done && r.Err() == nil {
		var ok bool
		if r.v5 {
			ok = r.next5(e)
		} else {
			ok = r.next4(e)
		}
		if r.Err() != nil {
			r.done = true
			return false
		}
		if ok {
			return true
		}
	}
	return false
}

// next5 decodes one DWARF 5 entry; it reports whether e was filled.
func (r *ListReader) next5(e *Entry) bool {
	at := r.b.Off()
	code := r.b.U8("entry kind")
	if r.b.Err() != nil {
		return false
	}
	kind := uint8(kUnknown)
	switch {
	case r.isLoc && code <= uint8(dwarf.DW_LLE_start_length):
		kind = code
	case !r.isLoc && int(code) < len(rleKinds):
		kind = rleKinds[code]
	}
	var start, end uint64
	switch kind {
	case kEnd:
		r.done = true
		return false
	case kBaseAddressx:
		r.base = r.addrx(r.b.Uleb("base address index"))
		return false
	case kBaseAddress:
		r.base = r.b.Addr(r.addrSize, "base address")
		return false
	case kStartxEndx:
		start = r.addrx(r.b.Uleb("start address index"))
		end = r.addrx(r.b.Uleb("end address index"))
	case kStartxLength:
		start = r.addrx(r.b.Uleb("start address index"))
		end = r.add(at, start, r.b.Uleb("length"), "length")
	case kOffsetPair:
		s, t := r.b.Uleb("starting offset"), r.b.Uleb("ending offset")
		start, end = r.wrap(r.base, s), r.wrap(r.base, t)
	case kDefault:
	case kStartEnd:
		start = r.b.Addr(r.addrSize, "starting address")
		end = r.b.Addr(r.addrSize, "ending address")
	case kStartLength:
		start = r.b.Addr(r.addrSize, "starting address")
		end = r.add(at, start, r.b.Uleb("length"), "length")
	default:
		if r.isLoc {
			r.fail(at, "entry kind", fmt.Sprintf("unknown location list entry kind %#x", code))
		} else {
			r.fail(at, "entry kind", fmt.Sprintf("unknown range list entry kind %#x", code))
		}
		return false
	}
	var expr []byte
	if r.isLoc {
		n := r.b.Uleb("location description length")
		expr = r.b.Bytes(n, "location description")
	}
	if r.Err() != nil {
		return false
	}
	if kind == kDefault {
		*e = Entry{Expr: expr, Default: true}
		return true
	}
	if start > end {
		r.fail(at, "ending address", fmt.Sprintf("range [%#x, %#x) ends before it starts", start, end))
		return false
	}
	if start == end {
		return false
	}
	*e = Entry{Start: start, End: end, Expr: expr}
	return true
}

// next4 decodes one DWARF 2–4 entry; it reports whether e was filled.
func (r *ListReader) next4(e *Entry) bool {
	at := r.b.Off()
	begin := r.b.Addr(r.addrSize, "beginning address")
	end := r.b.Addr(r.addrSize, "ending address")
	if r.b.Err() != nil {
		return false
	}
	if begin == 0 && end == 0 {
		r.done = true
		return false
	}
	if begin == maxAddr(r.addrSize) {
		r.base = end // base address selection entry
		return false
	}
	var expr []byte
	if r.isLoc {
		n := r.b.U16("location description length")
		expr = r.b.Bytes(uint64(n), "location description")
	}
	if begin > end {
		r.fail(at, "ending address", fmt.Sprintf("range [%#x, %#x) ends before it starts", begin, end))
		return false
	}
	start, stop := r.wrap(r.base, begin), r.wrap(r.base, end)
	if start > stop {
		r.fail(at, "ending address", fmt.Sprintf("range [%#x, %#x) wraps around the end of the address space", start, stop))
		return false
	}
	if r.Err() != nil || start == stop {
		return false
	}
	*e = Entry{Start: start, End: stop, Expr: expr}
	return true
}

// ReadLocList decodes the location list at offset off, as
// [NewLocListReader] describes: DWARF 5 .debug_loclists (every DW_LLE_*
// kind) or DWARF 2–4 .debug_loc (base address selection entries). It
// returns the entries that cover addresses, and default locations, in
// list order, with absolute addresses; Expr slices alias the section.
// Errors are *formaterr.Error. Cost: linear in the list's size; the
// result has at most one Entry per two bytes of input.
func ReadLocList(sec Sections, enc dwarf.Encoding, off uint64, cuBase uint64) ([]Entry, error) {
	r := NewLocListReader(sec, enc, off, cuBase)
	var out []Entry
	var e Entry
	for r.Next(&e) {
		out = append(out, e)
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// ReadRangeList decodes the range list at offset off of sec.RngLists
// (DWARF 5, every DW_RLE_* kind) or sec.Ranges (DWARF 2–4), as
// [NewRangeListReader] describes, and returns its ranges [Start, End) in
// list order with absolute addresses. Errors are *formaterr.Error.
// Cost: linear in the list's size.
func ReadRangeList(sec Sections, enc dwarf.Encoding, off uint64, cuBase uint64) ([]Range, error) {
	r := NewRangeListReader(sec, enc, off, cuBase)
	var out []Range
	var e Entry
	for r.Next(&e) {
		out = append(out, Range{Start: e.Start, End: e.End})
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// LocationAt returns the expression of the first entry of the location
// list at off (see [NewLocListReader]) whose [Start, End) contains pc, or
// else the list's default location (DW_LLE_default_location); ok is false
// when neither exists (the object has no location at pc). expr aliases the
// section. It reads the list up to the matching entry (to its end when
// the list has a default location and no entry matches). Errors are
// *formaterr.Error. Cost: linear in the list's size, no allocation.
func LocationAt(sec Sections, enc dwarf.Encoding, off, cuBase, pc uint64) (expr []byte, ok bool, err error) {
	r := NewLocListReader(sec, enc, off, cuBase)
	var e Entry
	var def []byte
	hasDef := false
	for r.Next(&e) {
		if e.Default {
			if !hasDef {
				def, hasDef = e.Expr, true
			}
			continue
		}
		if e.Start <= pc && pc < e.End {
			return e.Expr, true, nil
		}
	}
	if err := r.Err(); err != nil {
		return nil, false, err
	}
	return def, hasDef, nil
}

// RangeContains reports whether a range of the range list at off (see
// [NewRangeListReader]) contains pc, for example whether pc is inside a
// lexical block. Errors are *formaterr.Error. Cost: linear in the list's
// size, no allocation.
func RangeContains(sec Sections, enc dwarf.Encoding, off, cuBase, pc uint64) (bool, error) {
	r := NewRangeListReader(sec, enc, off, cuBase)
	var e Entry
	for r.Next(&e) {
		if e.Start <= pc && pc < e.End {
			return true, nil
		}
	}
	return false, r.Err()
}
