package dwarf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
)

// Buf is a decoding cursor over one section's bytes. Every read is bounds
// checked; the first failure is kept as a *FormatError naming the section,
// the offset where the failing field starts and the field, after which the
// cursor is empty and every read returns zero. A parser therefore reads
// straight through and checks [Buf.Err] once.
//
// Buf never allocates except for the error and never panics on any input.
type Buf struct {
	Section string           // section name used in errors
	Order   binary.ByteOrder // byte order of fixed-width fields
	data    []byte           // the whole section
	off     int              // offset of the next byte in data
	end     int              // reads stop at end (a unit's end, or len(data))
	err     error
}

// NewBuf returns a cursor over data (all of section) starting at offset 0.
func NewBuf(section string, order binary.ByteOrder, data []byte) *Buf {
	return &Buf{Section: section, Order: order, data: data, end: len(data)}
}

// MakeBuf is NewBuf returning a value, for callers that keep the cursor on
// their own stack (no allocation).
func MakeBuf(section string, order binary.ByteOrder, data []byte) Buf {
	return Buf{Section: section, Order: order, data: data, end: len(data)}
}

// Err returns the first error, or nil.
func (b *Buf) Err() error { return b.err }

// Off returns the section offset of the next byte.
func (b *Buf) Off() uint64 { return uint64(b.off) }

// Len returns the number of bytes left before the cursor's end.
func (b *Buf) Len() int {
	if b.err != nil {
		return 0
	}
	return b.end - b.off
}

// Data returns the whole section the cursor reads.
func (b *Buf) Data() []byte { return b.data }

// Seek moves the cursor to section offset off, keeping the current end. An
// offset past the end fails with field as the field named in the error.
func (b *Buf) Seek(off uint64, field string) {
	if b.err != nil {
		return
	}
	if off > uint64(b.end) {
		b.Fail(field, fmt.Sprintf("offset %#x past end %#x", off, b.end))
		return
	}
	b.off = int(off)
}

// Limit sets the end of reads to the current offset plus n bytes (for
// example a unit's length), and returns the previous end so the caller can
// restore it with [Buf.SetEnd]. A length past the current end fails.
func (b *Buf) Limit(n uint64, field string) (oldEnd int) {
	oldEnd = b.end
	if b.err != nil {
		return oldEnd
	}
	if n > uint64(b.end-b.off) {
		b.Fail(field, fmt.Sprintf("length %#x runs past end (%#x bytes left)", n, b.end-b.off))
		return oldEnd
	}
	b.end = b.off + int(n)
	return oldEnd
}

// End returns the offset at which reads currently stop.
func (b *Buf) End() uint64 { return uint64(b.end) }

// SetEnd sets the offset at which reads stop. An end beyond the section or
// before the cursor fails.
func (b *Buf) SetEnd(end int) {
	if b.err != nil {
		return
	}
	if end < b.off || end > len(b.data) {
		b.Fail("end", fmt.Sprintf("bad end %#x", end))
		return
	}
	b.end = end
}

// Fail records a *FormatError at the current offset unless an error is
// already recorded, and empties the cursor.
func (b *Buf) Fail(field, msg string) {
	b.FailAt(uint64(b.off), field, msg)
}

// FailAt is Fail at an explicit section offset.
func (b *Buf) FailAt(off uint64, field, msg string) {
	if b.err == nil {
		b.err = &FormatError{Source: b.Section, Offset: off, Field: field, Msg: msg}
	}
	b.off, b.end = len(b.data), len(b.data)
}

func (b *Buf) need(n int, field string) bool {
	if b.err != nil {
		return false
	}
	if n < 0 || b.end-b.off < n {
		b.Fail(field, fmt.Sprintf("need %d bytes, %d left", n, b.end-b.off))
		return false
	}
	return true
}

// U8 reads one byte.
func (b *Buf) U8(field string) uint8 {
	if !b.need(1, field) {
		return 0
	}
	v := b.data[b.off]
	b.off++
	return v
}

// U16 reads a 2-byte unsigned integer.
func (b *Buf) U16(field string) uint16 {
	if !b.need(2, field) {
		return 0
	}
	v := b.Order.Uint16(b.data[b.off:])
	b.off += 2
	return v
}

// U32 reads a 4-byte unsigned integer.
func (b *Buf) U32(field string) uint32 {
	if !b.need(4, field) {
		return 0
	}
	v := b.Order.Uint32(b.data[b.off:])
	b.off += 4
	return v
}

// U64 reads an 8-byte unsigned integer.
func (b *Buf) U64(field string) uint64 {
	if !b.need(8, field) {
		return 0
	}
	v := b.Order.Uint64(b.data[b.off:])
	b.off += 8
	return v
}

// Uint reads an unsigned integer of size 1, 2, 4 or 8 bytes.
func (b *Buf) Uint(size int, field string) uint64 {
	switch size {
	case 1:
		return uint64(b.U8(field))
	case 2:
		return uint64(b.U16(field))
	case 4:
		return uint64(b.U32(field))
	case 8:
		return b.U64(field)
	}
	b.Fail(field, fmt.Sprintf("unsupported size %d", size))
	return 0
}

// Addr reads an address of addrSize bytes (4 or 8).
func (b *Buf) Addr(addrSize uint8, field string) uint64 {
	return b.Uint(int(addrSize), field)
}

// Offset reads a section offset of the given format's size.
func (b *Buf) Offset(f Format, field string) uint64 {
	return b.Uint(f.OffsetSize(), field)
}

// UnitLength reads an initial length field (DWARF 5 section 7.4): a 4-byte
// length, or 0xffffffff followed by an 8-byte length for 64-bit DWARF.
// Values 0xfffffff0 to 0xfffffffe are reserved and fail.
func (b *Buf) UnitLength(field string) (length uint64, f Format) {
	start := b.off
	l := b.U32(field)
	switch {
	case l == 0xffffffff:
		return b.U64(field), Format64
	case l >= 0xfffffff0:
		b.FailAt(uint64(start), field, fmt.Sprintf("reserved initial length %#x", l))
		return 0, Format32
	}
	return uint64(l), Format32
}

// Uleb reads an unsigned LEB128 number.
func (b *Buf) Uleb(field string) uint64 {
	if b.err != nil {
		return 0
	}
	v, n := Uleb128(b.data[b.off:b.end])
	if n == 0 {
		b.Fail(field, "truncated ULEB128")
		return 0
	}
	b.off += n
	return v
}

// Sleb reads a signed LEB128 number.
func (b *Buf) Sleb(field string) int64 {
	if b.err != nil {
		return 0
	}
	v, n := Sleb128(b.data[b.off:b.end])
	if n == 0 {
		b.Fail(field, "truncated SLEB128")
		return 0
	}
	b.off += n
	return v
}

// Bytes returns the next n bytes (a subslice, not a copy).
func (b *Buf) Bytes(n uint64, field string) []byte {
	if n > math.MaxInt32 || !b.need(int(n), field) {
		if b.err == nil {
			b.Fail(field, fmt.Sprintf("length %#x too large", n))
		}
		return nil
	}
	v := b.data[b.off : b.off+int(n)]
	b.off += int(n)
	return v
}

// CString reads a NUL-terminated string and returns it without the NUL as a
// subslice of the section.
func (b *Buf) CString(field string) []byte {
	if b.err != nil {
		return nil
	}
	i := bytes.IndexByte(b.data[b.off:b.end], 0)
	if i < 0 {
		b.Fail(field, "unterminated string")
		return nil
	}
	v := b.data[b.off : b.off+i]
	b.off += i + 1
	return v
}

// Skip advances n bytes.
func (b *Buf) Skip(n uint64, field string) {
	if b.err == nil && n <= uint64(b.end-b.off) {
		b.off += int(n)
		return
	}
	b.Bytes(n, field)
}

// CStringAt returns the NUL-terminated string at offset off of data, for
// string sections (.debug_str, .strtab). It fails with a *FormatError
// naming section and field when off is out of range or the string is not
// terminated.
func CStringAt(section string, data []byte, off uint64, field string) (string, error) {
	s, err := CStringBytesAt(section, data, off, field)
	return string(s), err
}

// CStringBytesAt is [CStringAt] without the copy: the string's bytes, a
// subslice of data without its NUL (nil on error), with the same errors.
// Cost: a scan for the NUL, no allocation but the error's.
func CStringBytesAt(section string, data []byte, off uint64, field string) ([]byte, error) {
	if off >= uint64(len(data)) {
		return nil, &FormatError{Source: section, Offset: off, Field: field, Msg: fmt.Sprintf("string offset %#x outside section of %#x bytes", off, len(data))}
	}
	i := bytes.IndexByte(data[off:], 0)
	if i < 0 {
		return nil, &FormatError{Source: section, Offset: off, Field: field, Msg: "unterminated string"}
	}
	return data[off : off+uint64(i) : off+uint64(i)], nil
}
