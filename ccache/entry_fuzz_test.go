package ccache

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzDecodeEntry feeds arbitrary bytes to the entry decoder. Oracle: the
// decoder never panics, every error wraps ErrCorrupt or ErrStale, and an
// accepted entry is exactly what appendEntry writes for the image and key
// it returns (a round trip), so nothing outside the format is accepted.
func FuzzDecodeEntry(f *testing.F) {
	k := Key{Source: "/src/prog.scm", Compiler: "c 1", Link: "{DWARF:{} DebugFrame:false}", Extra: "-O\n2"}
	k.SourceSHA256[3] = 7
	good := appendEntry([]byte("\x7fELF image bytes"), &k)
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add(appendEntry(nil, &Key{}))
	f.Add([]byte("ELFIMGCC\x00\x00\x00\x00\x01\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		n, k, err := decodeEntry(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrStale) {
				t.Fatalf("error %v wraps neither ErrCorrupt nor ErrStale", err)
			}
			return
		}
		if n < 0 || n > len(data) {
			t.Fatalf("image length %d of a %d-byte entry", n, len(data))
		}
		if again := appendEntry(data[:n], &k); !bytes.Equal(again, data) {
			t.Fatalf("accepted entry is not what appendEntry writes for its image and key %+v", k)
		}
	})
}

// FuzzParseRecord feeds arbitrary text to the key record parser. Oracle:
// an accepted record's key, written again and parsed again, is the same
// key (the writer and the parser agree).
func FuzzParseRecord(f *testing.F) {
	k := Key{Source: "/src/pr\"og.scm", Compiler: "c 1", Link: "{}", Extra: "é\x00"}
	f.Add(k.record())
	f.Add([]byte("elfimage-ccache 1\nsource \"\\x41\"\nsource-sha256 " + string(bytes.Repeat([]byte("ab"), 32)) + "\ncompiler ``\nlink \"\"\nextra \"\"\n"))
	f.Fuzz(func(t *testing.T, rec []byte) {
		k, err := parseRecord(rec)
		if err != nil {
			return
		}
		k2, err := parseRecord(k.record())
		if err != nil || k2 != k {
			t.Fatalf("record of %+v parses as %+v, %v", k, k2, err)
		}
	})
}
