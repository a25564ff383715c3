package debugfile_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/elfimage/elfimage/debugfile"
)

// FuzzParseDebuglink checks ParseDebuglink against an independent reading
// of the format (the name up to the first NUL, the CRC at the next
// multiple of 4 after it) and, for what it accepts, the round trip
// through AppendDebuglink: the bytes it re-encodes are the input's prefix
// up to the CRC's end.
func FuzzParseDebuglink(f *testing.F) {
	f.Add([]byte("a.debug\x00\x12\x34\x56\x78"))
	f.Add([]byte("abc\x00\x01\x02\x03\x04trailing"))
	f.Add([]byte("ac61ec5a8eb1396f9fbd350e3169a558528a40.debug\x00\x00\x00\x00\xde\xad\xbe\xef"))
	f.Add([]byte("x\x00\x00"))
	f.Add(debugfile.AppendDebuglink(nil, debugfile.Debuglink{Name: "prog.debug", CRC: 0x12345678}, binary.LittleEndian))
	f.Add([]byte("a\x00\x00\x00\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
			l, err := debugfile.ParseDebuglink(b, order)
			// The oracle.
			n := bytes.IndexByte(b, 0)
			ok := n > 0 && n <= debugfile.MaxLinkName && bytes.IndexByte(b[:max(n, 0)], '/') < 0
			crcAt := (n/4 + 1) * 4
			ok = ok && len(b) >= crcAt+4
			if ok != (err == nil) {
				t.Fatalf("ParseDebuglink(%q) error %v, oracle says valid=%v", b, err, ok)
			}
			if !ok {
				continue
			}
			if l.Name != string(b[:n]) || l.CRC != order.Uint32(b[crcAt:]) {
				t.Fatalf("ParseDebuglink(%q) = %+v", b, l)
			}
			// Padding bytes may be anything in the input; the encoding
			// writes zeros.
			enc := debugfile.AppendDebuglink(nil, l, order)
			if len(enc) != crcAt+4 || !bytes.Equal(enc[:n], b[:n]) || !bytes.Equal(enc[crcAt:], b[crcAt:crcAt+4]) {
				t.Fatalf("AppendDebuglink(%+v) = %x, input %x", l, enc, b)
			}
			if back, err := debugfile.ParseDebuglink(enc, order); err != nil || back != l {
				t.Fatalf("round trip: %+v, %v; want %+v", back, err, l)
			}
		}
	})
}
