package dwarf

import "encoding/binary"

// AppendUleb128 appends v in unsigned LEB128 (DWARF 5 section 7.6) and returns
// the extended slice.
func AppendUleb128(b []byte, v uint64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			c |= 0x80
		}
		b = append(b, c)
		if c&0x80 == 0 {
			return b
		}
	}
}

// AppendSleb128 appends v in signed LEB128 (DWARF 5 section 7.6) and returns
// the extended slice.
func AppendSleb128(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		s := byte(v & 0x40)
		v >>= 7
		if (v != -1 || s == 0) && (v != 0 || s != 0) {
			c |= 0x80
		}
		b = append(b, c)
		if c&0x80 == 0 {
			return b
		}
	}
}

// Uleb128Size returns the number of bytes AppendUleb128 writes for v.
func Uleb128Size(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// Sleb128Size returns the number of bytes AppendSleb128 writes for v.
func Sleb128Size(v int64) int {
	n := 1
	for (v >= 0x40) || (v < -0x40) {
		v >>= 7
		n++
	}
	return n
}

// Uleb128 decodes an unsigned LEB128 value from the start of b. It returns
// the value and the number of bytes read; n is 0 when b ends before the last
// byte of the number. Bits beyond 64 are dropped; at most 10 bytes of
// continuation are read plus any further continuation bytes, which are
// consumed but ignored (the length stays bounded by len(b)).
func Uleb128(b []byte) (v uint64, n int) {
	var shift uint
	for i, c := range b {
		if shift < 64 {
			v |= uint64(c&0x7f) << shift
		}
		shift += 7
		if c&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, 0
}

// Sleb128 decodes a signed LEB128 value from the start of b, with the same
// conventions as Uleb128.
func Sleb128(b []byte) (v int64, n int) {
	var shift uint
	for i, c := range b {
		if shift < 64 {
			v |= int64(c&0x7f) << shift
		}
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v, i + 1
		}
	}
	return 0, 0
}

// PutUint stores v in the first size bytes of b (size 1, 2, 4 or 8) in the
// given byte order, for fixed-width fields such as unit lengths, offsets
// and addresses. Other sizes store nothing. b must hold size bytes.
func PutUint(b []byte, order binary.ByteOrder, size int, v uint64) {
	switch size {
	case 1:
		b[0] = byte(v)
	case 2:
		order.PutUint16(b, uint16(v))
	case 4:
		order.PutUint32(b, uint32(v))
	case 8:
		order.PutUint64(b, v)
	}
}

// AppendUint appends v as a size-byte field (1, 2, 4 or 8) in the given
// byte order and returns the extended slice.
// Cost: no allocation beyond growing b (little- and big-endian orders, and
// any binary.AppendByteOrder, append in place; other orders go through
// PutUint on a scratch array).
func AppendUint(b []byte, order binary.ByteOrder, size int, v uint64) []byte {
	switch size {
	case 1:
		return append(b, byte(v))
	case 2, 4, 8:
	default: // as PutUint: nothing written, size zero bytes appended
		var t [8]byte
		return append(b, t[:size]...)
	}
	if order == binary.LittleEndian { // the common case, without the interface calls
		switch size {
		case 2:
			return binary.LittleEndian.AppendUint16(b, uint16(v))
		case 4:
			return binary.LittleEndian.AppendUint32(b, uint32(v))
		}
		return binary.LittleEndian.AppendUint64(b, v)
	}
	var ao binary.AppendByteOrder
	switch o := order.(type) {
	case binary.AppendByteOrder: // binary.LittleEndian, binary.BigEndian, ...
		ao = o
	default:
		// PutUint passes its slice to an interface method, so the
		// scratch array is on the heap: one allocation.
		t := make([]byte, 8)
		PutUint(t, order, size, v)
		return append(b, t[:size]...)
	}
	switch size {
	case 2:
		return ao.AppendUint16(b, uint16(v))
	case 4:
		return ao.AppendUint32(b, uint32(v))
	}
	return ao.AppendUint64(b, v)
}
