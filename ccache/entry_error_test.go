package ccache

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/elfimage/elfimage/formaterr"
)

// TestEntryErrors: a damaged trailer gives ErrCorrupt or ErrStale
// together with the one decoder error, naming the field and its file
// offset.
func TestEntryErrors(t *testing.T) {
	k := Key{Source: "/src/p.scm", Compiler: "c", Link: "l"}
	good := appendEntry([]byte("\x7fELF image bytes"), &k)
	n := len(good)
	for _, c := range []struct {
		name  string
		data  func() []byte
		kind  error
		off   int
		field string
	}{
		{"truncated", func() []byte { return good[:10] }, ErrCorrupt, 10, "trailer"},
		{"no magic", func() []byte { b := append([]byte(nil), good...); b[n-footerSize] ^= 1; return b }, ErrCorrupt, n - footerSize, "trailer magic"},
		{"version", func() []byte {
			b := append([]byte(nil), good...)
			binary.LittleEndian.PutUint32(b[n-4:], FormatVersion+1)
			return b
		}, ErrStale, n - 4, "format version"},
		{"checksum", func() []byte { b := append([]byte(nil), good...); b[0] ^= 1; return b }, ErrCorrupt, n - trailerFixed, "SHA-256"},
	} {
		_, _, err := decodeEntry(c.data())
		var fe *formaterr.Error
		if !errors.Is(err, c.kind) || !errors.As(err, &fe) || fe.Source != entrySource || fe.Offset != uint64(c.off) || fe.Field != c.field {
			t.Errorf("%s: %v; want %v and a formaterr.Error on %s at %#x", c.name, err, c.kind, c.field, c.off)
		}
	}
	if m, got, err := decodeEntry(good); err != nil || got != k || m != len("\x7fELF image bytes") {
		t.Errorf("intact entry: %d, %+v, %v", m, got, err)
	}
}
