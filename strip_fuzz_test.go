package elfimage

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/debugfile"
)

// FuzzStrip feeds Strip arbitrary bytes. Whatever it accepts must give a
// stripped image the loader accepts, with the input's build ID and loaded
// bytes past the program headers, a .gnu_debuglink naming the debug file
// with its CRC-32, no .debug_info; and a debug file whose section table
// parses and that has the same build ID and the input's .debug_info
// bytes.
func FuzzStrip(f *testing.F) {
	f.Add(buildTestImage())
	m := &Module{File: "f.scm", Procs: []*Proc{{Name: "f", Code: []byte{0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3},
		Lines: []LineRow{{Offset: 0, Line: 1, Column: 1}, {Offset: 4, Line: 2, Column: 3}}}}}
	b, err := Link(m, LinkOptions{})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, in []byte) {
		s, d, err := Strip(in, StripOptions{DebugLink: "f.debug"})
		if err != nil {
			return
		}
		pin, err := parseImage("in", in, arch.X86_64, 4096)
		if err != nil {
			t.Fatalf("Strip accepted an image the loader refuses: %v", err)
		}
		ps, err := parseImage("stripped", s, arch.X86_64, 4096)
		if err != nil {
			t.Fatalf("the stripped image does not load: %v", err)
		}
		if !bytes.Equal(ps.buildID, pin.buildID) {
			t.Fatalf("build ID %x, input's %x", ps.buildID, pin.buildID)
		}
		phEnd := uint64(ehdrSize + phdrSize*int(le.Uint16(in[offPhnum:])))
		if !bytes.Equal(s[phEnd:pin.size], in[phEnd:pin.size]) {
			t.Fatalf("loaded bytes differ")
		}
		_, secsS, err := parseSectionTable("stripped", s)
		if err != nil {
			t.Fatal(err)
		}
		_, secsIn, _ := parseSectionTable("in", in)
		fd, secsD, err := parseSectionTable("debug", d)
		if err != nil {
			t.Fatalf("debug file: %v", err)
		}
		if id, err := fd.BuildID(); err != nil || !bytes.Equal(id, pin.buildID) {
			t.Fatalf("debug file build ID %x, %v; want %x", id, err, pin.buildID)
		}
		sec := func(secs []SectionHeader, data []byte, name string) []byte {
			for _, x := range secs {
				if x.Name == name {
					return data[x.Offset : x.Offset+x.Size]
				}
			}
			return nil
		}
		if sec(secsS, s, ".debug_info") != nil {
			t.Fatal("the stripped image has .debug_info")
		}
		if a, b := sec(secsD, d, ".debug_info"), sec(secsIn, in, ".debug_info"); a == nil || !bytes.Equal(a, b) {
			t.Fatal("the debug file's .debug_info is not the input's")
		}
		l, err := debugfile.ParseDebuglink(sec(secsS, s, debugfile.SectionDebugLink), le)
		if err != nil || l.Name != "f.debug" || l.CRC != debugfile.CRC32(d) {
			t.Fatalf(".gnu_debuglink %+v %v", l, err)
		}
	})
}

// TestStripAlignment: a section's sh_addralign decides where the writers
// put it, so Strip refuses the alignments that would make the output
// unbounded (FuzzStrip: a .strtab aligned to 2^49 had the debug file's
// writer allocate 2^49 bytes) with a FormatError at the field.
func TestStripAlignment(t *testing.T) {
	m := &Module{File: "f.scm", Procs: []*Proc{{Name: "f", Code: []byte{0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3},
		Lines: []LineRow{{Offset: 0, Line: 1, Column: 1}, {Offset: 4, Line: 2, Column: 3}}}}}
	in, err := Link(m, LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, secs, err := parseSectionTable("in", in)
	if err != nil {
		t.Fatal(err)
	}
	find := func(name string) int {
		for i, s := range secs {
			if s.Name == name {
				return i
			}
		}
		t.Fatalf("no %s", name)
		return 0
	}
	for _, c := range []struct {
		sec   string
		align uint64
	}{{".strtab", 1 << 49}, {".debug_info", 1 << 13}, {".debug_info", 3}, {".text", 1 << 40}} {
		i := find(c.sec)
		b := bytes.Clone(in)
		off := f.SectionHeaderOffset(i) + 48
		le.PutUint64(b[off:], c.align)
		_, _, err := Strip(b, StripOptions{})
		var fe *FormatError
		if !errors.As(err, &fe) || fe.Offset != off || fe.Field != fmt.Sprintf("sh_addralign of section %d", i) {
			t.Errorf("%s aligned to %#x: %v; want a FormatError at %#x, sh_addralign of section %d", c.sec, c.align, err, off, i)
		}
	}
	if _, _, err := Strip(in, StripOptions{}); err != nil {
		t.Fatalf("the image itself: %v", err)
	}
}

// TestStripBuildIDViews: an image whose PT_NOTE is gone but whose
// .note.gnu.build-id section stays (FuzzStrip: p_type 0xfff) has no build
// ID for the loader and one for gdb and debuginfod; Strip refuses it
// rather than write a pair the two sides match differently.
func TestStripBuildIDViews(t *testing.T) {
	m := &Module{File: "f.scm", Procs: []*Proc{{Name: "f", Code: []byte{0xc3}}}}
	in, err := Link(m, LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, _, err := parseSectionTable("in", in)
	if err != nil {
		t.Fatal(err)
	}
	b := bytes.Clone(in)
	n := 0
	for i, p := range f.Progs {
		if p.Type == elf.PT_NOTE {
			le.PutUint32(b[f.ProgHeaderOffset(i):], 0xfff)
			n++
		}
	}
	if n == 0 {
		t.Fatal("no PT_NOTE")
	}
	_, _, err = Strip(b, StripOptions{})
	var fe *FormatError
	if !errors.As(err, &fe) || !strings.Contains(fe.Msg, "build ID") || !strings.HasPrefix(fe.Field, "section ") {
		t.Fatalf("Strip of an image without PT_NOTE: %v; want a FormatError naming the note section and both build IDs", err)
	}
	t.Log(err)
}
