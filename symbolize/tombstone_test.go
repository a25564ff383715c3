package symbolize

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// TestClearTombstones: the -1 and -2 entries of each DWARF 5 .debug_addr
// contribution (8- and 4-byte addresses, 32- and 64-bit DWARF, either byte
// order) become 0 in a copy, other entries and the headers stay; a
// section that does not parse as contributions from some point on is left
// as it is from there; nothing changes when 0 could be code.
func TestClearTombstones(t *testing.T) {
	for _, order := range []interface {
		binary.ByteOrder
		binary.AppendByteOrder
	}{binary.LittleEndian, binary.BigEndian} {
		contrib := func(dwarf64 bool, size int, vals ...uint64) []byte {
			var body []byte
			for _, v := range vals {
				if size == 4 {
					body = order.AppendUint32(body, uint32(v))
				} else {
					body = order.AppendUint64(body, v)
				}
			}
			var b []byte
			if dwarf64 {
				b = order.AppendUint32(b, 0xffffffff)
				b = order.AppendUint64(b, uint64(4+len(body)))
			} else {
				b = order.AppendUint32(b, uint32(4+len(body)))
			}
			b = order.AppendUint16(b, 5)
			b = append(b, byte(size), 0)
			return append(b, body...)
		}
		in := append(contrib(false, 8, 0x1000, ^uint64(0), ^uint64(0)-1, 0x2000),
			append(contrib(true, 8, ^uint64(0), 0x3000), contrib(false, 4, 0xffffffff, 0xfffffffe, 0x4000)...)...)
		want := append(contrib(false, 8, 0x1000, 0, 0, 0x2000),
			append(contrib(true, 8, 0, 0x3000), contrib(false, 4, 0, 0, 0x4000)...)...)
		orig := bytes.Clone(in)
		l := live{low: 0x1000, tomb: ^uint64(0) - 1}
		if got := clearTombstones(in, order, l); !bytes.Equal(got, want) {
			t.Errorf("%v: got\n% x\nwant\n% x", order, got, want)
		}
		if !bytes.Equal(in, orig) {
			t.Errorf("%v: the section was modified", order)
		}
		if got := clearTombstones(in, order, live{low: 0, tomb: ^uint64(0) - 1}); !bytes.Equal(got, orig) {
			t.Errorf("%v: low 0: changed", order)
		}
		// A bad version, a length past the end, a truncated DWARF64
		// header: the walk stops there, what came before is cleared.
		first := contrib(false, 8, ^uint64(0))
		for _, tail := range [][]byte{
			contrib(false, 8, ^uint64(0))[:10],
			append(order.AppendUint32(nil, 0x1000), make([]byte, 12)...),
			order.AppendUint32(order.AppendUint32(nil, 0xffffffff), 7),
			func() []byte { b := contrib(false, 8, ^uint64(0)); order.PutUint16(b[4:], 4); return b }(),
		} {
			sec := append(bytes.Clone(first), tail...)
			got := clearTombstones(sec, order, l)
			wantHead := contrib(false, 8, 0)
			if !bytes.Equal(got[:len(wantHead)], wantHead) || !bytes.Equal(got[len(wantHead):], tail) {
				t.Errorf("%v: tail % x: got % x", order, tail, got)
			}
		}
	}
}
