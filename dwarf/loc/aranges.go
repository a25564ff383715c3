package loc

import (
	"encoding/binary"
	"fmt"

	"github.com/elfimage/elfimage/dwarf"
)

// ArangeSet is one set of .debug_aranges (DWARF 5 section 6.1.2): the
// address ranges covered by the unit at CUOffset in .debug_info.
type ArangeSet struct {
	// Offset is the section offset of the set's unit_length field.
	Offset uint64
	// Enc holds the set's version (2), offset format, address size and
	// byte order.
	Enc dwarf.Encoding
	// CUOffset is debug_info_offset, the unit header's offset.
	CUOffset uint64
	// Ranges are the tuples as [Start, Start+length), in section order,
	// without the (0, 0) terminator.
	Ranges []Range
}

// EncodeAranges returns one .debug_aranges set (DWARF 5 sections 6.1.2 and
// 7.21) for the unit at cuOffset of .debug_info: header of version 2 in
// enc's offset format (enc.Version is not used: the set's version is 2 in
// DWARF 2 to 5), address size enc.AddrSize, segment_selector_size 0,
// padding so that the tuples are aligned to twice the address size from
// the start of the set, one (address, length) tuple per range in the given
// order, and the (0, 0) terminator. The set's size is a multiple of the
// tuple size, so sets may be concatenated.
//
// Errors wrap [ErrInvalidList]: an invalid encoding, an empty or reversed
// range, an address or cuOffset that does not fit. Cost: linear in ranges.
func EncodeAranges(enc dwarf.Encoding, cuOffset uint64, ranges []Range) ([]byte, error) {
	e := enc
	e.Version = 2
	if err := checkEnc(e); err != nil {
		return nil, err
	}
	osz, a := e.Format.OffsetSize(), int(e.AddrSize)
	if osz == 4 && cuOffset > 0xffffffff {
		return nil, fmt.Errorf("%w: debug_info_offset %#x does not fit 32-bit DWARF", ErrInvalidList, cuOffset)
	}
	max := maxAddr(e.AddrSize)
	for i, r := range ranges {
		if r.Start >= r.End || r.End > max {
			return nil, fmt.Errorf("%w: range %d: [%#x, %#x) empty, reversed or wider than %d-byte addresses", ErrInvalidList, i, r.Start, r.End, a)
		}
	}
	order := e.ByteOrder
	var b []byte
	if e.Format == dwarf.Format64 {
		b = append(b, 0xff, 0xff, 0xff, 0xff)
	}
	lenAt := len(b)
	b = dwarf.AppendUint(b, order, osz, 0)        // unit_length
	start := len(b)                               // unit_length counts from here
	b = dwarf.AppendUint(b, order, 2, 2)          // version
	b = dwarf.AppendUint(b, order, osz, cuOffset) // debug_info_offset
	b = append(b, e.AddrSize)                     // address_size
	b = append(b, 0)                              // segment_selector_size
	for len(b)%(2*a) != 0 {
		b = append(b, 0) // padding
	}
	for _, r := range ranges {
		b = dwarf.AppendUint(b, order, a, r.Start)       // address
		b = dwarf.AppendUint(b, order, a, r.End-r.Start) // length
	}
	b = dwarf.AppendUint(b, order, a, 0)
	b = dwarf.AppendUint(b, order, a, 0)
	n := uint64(len(b) - start)
	if osz == 4 && n >= 0xfffffff0 {
		return nil, fmt.Errorf("%w: set of %d bytes too large for 32-bit DWARF", ErrInvalidList, n)
	}
	dwarf.AppendUint(b[:lenAt], order, osz, n)
	return b, nil
}

// ReadAranges decodes every set of a .debug_aranges section. order is the
// byte order (nil means little-endian). Versions 2 to 5 of the header are
// accepted (all producers write 2), address sizes 1, 2, 4 and 8, and
// segment_selector_size 0 only. A set's tuples end at its (0, 0)
// terminator or its end. Errors are *formaterr.Error naming the set's
// field and offset; a tuple whose range wraps around the address space is
// an error. Cost: linear in the section; the result holds at most one
// Range per tuple in data.
func ReadAranges(data []byte, order binary.ByteOrder) ([]ArangeSet, error) {
	if order == nil {
		order = binary.LittleEndian
	}
	var sets []ArangeSet
	b := dwarf.MakeBuf(SecAranges, order, data)
	for b.Len() > 0 {
		var s ArangeSet
		s.Offset = b.Off()
		length, format := b.UnitLength("unit_length")
		b.Limit(length, "unit_length")
		end := b.End()
		at := b.Off()
		s.Enc = dwarf.Encoding{Format: format, ByteOrder: order}
		s.Enc.Version = b.U16("version")
		if b.Err() == nil && (s.Enc.Version < 2 || s.Enc.Version > 5) {
			b.FailAt(at, "version", fmt.Sprintf("unsupported version %d", s.Enc.Version))
		}
		s.CUOffset = b.Offset(format, "debug_info_offset")
		at = b.Off()
		s.Enc.AddrSize = b.U8("address_size")
		switch s.Enc.AddrSize {
		case 1, 2, 4, 8:
		default:
			b.FailAt(at, "address_size", fmt.Sprintf("unsupported address size %d", s.Enc.AddrSize))
		}
		at = b.Off()
		if seg := b.U8("segment_selector_size"); seg != 0 {
			b.FailAt(at, "segment_selector_size", fmt.Sprintf("segment selectors (size %d) not supported", seg))
		}
		if err := b.Err(); err != nil {
			return nil, err
		}
		a := int(s.Enc.AddrSize)
		tuple := uint64(2 * a)
		if rem := (b.Off() - s.Offset) % tuple; rem != 0 {
			b.Skip(tuple-rem, "padding")
		}
		for b.Len() > 0 {
			at := b.Off()
			addr := b.Uint(a, "address")
			n := b.Uint(a, "length")
			if b.Err() != nil {
				break
			}
			if addr == 0 && n == 0 {
				break
			}
			if !fitsRange(addr, n, s.Enc.AddrSize) {
				b.FailAt(at, "length", fmt.Sprintf("range %#x + %#x wraps around the address space", addr, n))
				break
			}
			s.Ranges = append(s.Ranges, Range{Start: addr, End: addr + n})
		}
		if err := b.Err(); err != nil {
			return nil, err
		}
		sets = append(sets, s)
		b.SetEnd(len(data))
		b.Seek(end, "unit_length")
	}
	return sets, b.Err()
}

// fitsRange reports whether [addr, addr+n) stays within the address space
// of size-byte addresses (its end may be the first address past it).
func fitsRange(addr, n uint64, size uint8) bool {
	if size >= 8 {
		return addr+n >= addr
	}
	limit := maxAddr(size) + 1
	return addr < limit && n <= limit-addr
}
