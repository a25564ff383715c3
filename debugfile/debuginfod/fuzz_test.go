package debuginfod_test

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/elfimage/elfimage/debugfile"
	"github.com/elfimage/elfimage/debugfile/debuginfod"
)

// fakeTransport answers every request with one canned response.
type fakeTransport struct {
	status int
	length string // the Content-Length header, "" for none
	body   []byte
}

func (f fakeTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	h := http.Header{}
	n := int64(-1)
	if f.length != "" {
		h.Set("Content-Length", f.length)
		if v, err := strconv.ParseInt(f.length, 10, 64); err == nil {
			n = v
		}
	}
	return &http.Response{StatusCode: f.status, Status: strconv.Itoa(f.status), Header: h, ContentLength: n,
		Body: io.NopCloser(bytes.NewReader(f.body)), Request: r}, nil
}

// oracleBuildID finds the first GNU build ID note with debug/elf and a
// note walk of its own: the independent reading of the answer. It reads
// a copy normalized by [oracleCopy].
func oracleBuildID(b []byte) ([]byte, bool) {
	b = oracleCopy(b)
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return nil, false
	}
	for _, s := range f.Sections {
		if s.Type != elf.SHT_NOTE {
			continue
		}
		d, err := s.Data()
		if err != nil {
			return nil, false
		}
		a := 4
		if s.Addralign == 8 {
			a = 8
		}
		up := func(n int) int { return (n + a - 1) / a * a }
		for p := 0; len(d)-p >= 12; {
			nn, dn, typ := int(f.ByteOrder.Uint32(d[p:])), int(f.ByteOrder.Uint32(d[p+4:])), f.ByteOrder.Uint32(d[p+8:])
			if nn > len(d)-p-12 {
				return nil, false
			}
			do := up(p + 12 + nn)
			if do > len(d) || dn > len(d)-do {
				return nil, false
			}
			if typ == 3 && string(bytes.TrimRight(d[p+12:p+12+nn], "\x00")) == "GNU" {
				return d[do : do+dn], true
			}
			p = up(do + dn)
		}
	}
	return nil, false
}

// oracleCopy returns a copy of b with two fields set the way debug/elf
// needs them, where readelf and our reader read the file without them:
//   - e_version set to EV_CURRENT: debug/elf refuses any other value, which
//     carries nothing else;
//   - SHF_COMPRESSED cleared on the section name string table: debug/elf
//     decompresses that table before reading names from it, readelf and our
//     reader read the names raw (nothing compresses .shstrtab).
//
// A b too short for the field, or an index out of bounds, leaves it as it is.
func oracleCopy(b []byte) []byte {
	if len(b) < 0x34 || string(b[:4]) != elf.ELFMAG {
		return b
	}
	b = append([]byte(nil), b...)
	var o binary.ByteOrder
	switch elf.Data(b[elf.EI_DATA]) {
	case elf.ELFDATA2LSB:
		o = binary.LittleEndian
	case elf.ELFDATA2MSB:
		o = binary.BigEndian
	default:
		return b
	}
	o.PutUint32(b[0x14:], uint32(elf.EV_CURRENT))
	// e_shoff, e_shentsize, e_shstrndx; where sh_flags' low 32 bits sit in
	// an entry.
	var shoff uint64
	var entsize, strndx uint16
	flags := uint64(8)
	switch elf.Class(b[elf.EI_CLASS]) {
	case elf.ELFCLASS64:
		if len(b) < 0x40 {
			return b
		}
		shoff, entsize, strndx = o.Uint64(b[0x28:]), o.Uint16(b[0x3a:]), o.Uint16(b[0x3e:])
		if o == binary.BigEndian {
			flags += 4
		}
	case elf.ELFCLASS32:
		shoff, entsize, strndx = uint64(o.Uint32(b[0x20:])), o.Uint16(b[0x2e:]), o.Uint16(b[0x32:])
	default:
		return b
	}
	n := uint64(len(b))
	i := uint64(strndx)
	if strndx == uint16(elf.SHN_XINDEX) { // the index is section 0's sh_link
		link := uint64(24) // sh_link's offset in an Elf32_Shdr
		if elf.Class(b[elf.EI_CLASS]) == elf.ELFCLASS64 {
			link = 40
		}
		if shoff > n || link+4 > n-shoff {
			return b
		}
		i = uint64(o.Uint32(b[shoff+link:]))
	}
	at := shoff + i*uint64(entsize)
	if entsize == 0 || i > n || shoff > n || at < shoff || at > n || flags+4 > n-at {
		return b
	}
	o.PutUint32(b[at+flags:], o.Uint32(b[at+flags:])&^uint32(elf.SHF_COMPRESSED))
	return b
}

// FuzzAnswer feeds arbitrary responses (status, Content-Length, body) to
// the client and checks, against debug/elf as the oracle: an answer is
// accepted only with status 200 as an ELF file whose build ID is the one
// asked; the accepted file in the cache is the body, byte for byte;
// anything refused leaves no file in the cache but the empty miss marker
// of a 404; and nothing is written outside the cache directory.
func FuzzAnswer(f *testing.F) {
	good := debugFile(testID, 64)
	f.Add(200, "", good)
	f.Add(200, strconv.Itoa(len(good)), good)
	f.Add(200, "10", good)
	f.Add(404, "", []byte("not found"))
	f.Add(200, "", debugFile([]byte{1, 2, 3}, 3))
	f.Add(200, "", good[:100])
	f.Add(302, "", []byte{})
	f.Fuzz(func(t *testing.T, status int, length string, body []byte) {
		if status < 100 || status > 999 {
			return
		}
		root := t.TempDir()
		cache := filepath.Join(root, "cache")
		c := &debuginfod.Client{URLs: []string{"http://127.0.0.1:1"}, CacheDir: cache, MaxSize: 1 << 20,
			HTTP: &http.Client{Transport: fakeTransport{status, length, body}}}
		p, err := c.Debuginfo(context.Background(), testID)
		id, ok := oracleBuildID(body)
		if err == nil {
			if status != 200 || !ok || !bytes.Equal(id, testID) {
				t.Fatalf("accepted status %d body %q (oracle build ID %x, %v)", status, body, id, ok)
			}
			if got, rerr := os.ReadFile(p); rerr != nil || !bytes.Equal(got, body) {
				t.Fatalf("cached %d bytes (%v), body %d", len(got), rerr, len(body))
			}
		} else if status == 200 && bytes.Equal(body, good) && (length == "" || length == strconv.Itoa(len(good))) {
			t.Fatalf("refused the debug file: %v", err)
		}
		filepath.Walk(root, func(q string, fi os.FileInfo, werr error) error {
			if werr != nil || fi.IsDir() {
				return nil
			}
			want := filepath.Join(cache, testHex, "debuginfo")
			switch {
			case q != want:
				t.Fatalf("file %s left in %s", q, root)
			case err != nil && !(status == 404 && fi.Size() == 0 && errors.Is(err, debugfile.ErrNotFound)):
				t.Fatalf("%s (%d bytes) left after %v", q, fi.Size(), err)
			}
			return nil
		})
	})
}
