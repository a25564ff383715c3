package elfimage

import (
	"bytes"
	"debug/elf"
	"errors"
	"slices"
	"testing"

	"github.com/elfimage/elfimage/arch"
)

// FuzzParseImage feeds arbitrary bytes to the loader's validator and, when
// it accepts them, applies the relocations to a copy: nothing may panic,
// and an accepted image must satisfy the invariants the loader relies on.
func FuzzParseImage(f *testing.F) {
	f.Add(buildTestImage())
	for _, c := range corruptions() {
		f.Add(c.patch(buildTestImage()))
	}
	a := nil2arch()
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := parseImage("fuzz", data, a, 4096)
		checkPreadParse(t, data, a, p, err)
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is %T, not *FormatError", err, err)
			}
			return
		}
		if p.size > uint64(len(data)) || len(p.segs) == 0 || p.segs[0].Addr != 0 {
			t.Fatalf("accepted plan %+v for %d bytes", p, len(data))
		}
		var prevEnd uint64
		for i, s := range p.segs {
			if s.Addr%4096 != 0 || (i > 0 && s.Addr < alignUp(prevEnd, 4096)) || s.Addr+s.Size > uint64(len(data)) {
				t.Fatalf("bad segment %d %+v", i, s)
			}
			if s.Flags&elf.PF_W != 0 && s.Flags&elf.PF_X != 0 {
				t.Fatalf("W+X segment accepted")
			}
			prevEnd = s.Addr + s.Size
		}
		mem := bytes.Clone(data)
		if err := relocate("fuzz", mem, 0x7f0000000000, p, a, true); err != nil {
			t.Fatalf("relocate failed after validation: %v", err)
		}
		// Relocation writes only writable segments.
		for _, s := range p.segs {
			if s.Flags&elf.PF_W == 0 && !bytes.Equal(mem[s.Addr:s.Addr+s.Size], data[s.Addr:s.Addr+s.Size]) {
				t.Fatalf("relocation changed non-writable segment at %#x", s.Addr)
			}
		}
		if !bytes.Equal(mem[p.size:], data[p.size:]) {
			t.Fatalf("relocation changed the tail")
		}
	})
}

// checkPreadParse is the oracle of the pread path Open takes: parsing data
// through a source that reads a head and a scratch buffer from a file
// (here an io.ReaderAt, with small buffers so that the head, the scratch
// and the fall-through to the mapping all serve reads, and first reads of
// the head shorter than it, so that its second read serves some) must give the plan
// (or the error) that parsing the bytes in memory gave, and applying the
// relocations through it the same bytes.
func checkPreadParse(t *testing.T, data []byte, a *arch.Arch, want *plan, wantErr error) {
	// sz: head, scratch, and the first read of the head (0: all of it).
	for _, sz := range [][3]int{{64, 24, 0}, {64 + len(data)%300, 24 * (1 + len(data)%7), 0}, {headSize, scratchSize, 0},
		{headSize, scratchSize, headStep}, {256, 24, 64 + len(data)%128}, {headSize, scratchSize, 1 + len(data)%headSize}} {
		src := source{path: "fuzz", data: data, fd: -1, at: bytes.NewReader(data), head: make([]byte, sz[0]), scratch: make([]byte, sz[1]), first: sz[2]}
		var got plan
		err := parseFrom(&src, a, 4096, &got)
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Fatalf("head %d, scratch %d, first %d: parse through pread: %v; in memory: %v", sz[0], sz[1], sz[2], err, wantErr)
		}
		if err != nil {
			continue
		}
		same := func(x, y []byte) bool { // same bytes of the image, not copies
			return len(x) == len(y) && (len(x) == 0 || &x[0] == &y[0])
		}
		ok := got.size == want.size && got.entry == want.entry && slices.Equal(got.segs, want.segs) &&
			got.relaOff == want.relaOff && got.relaCount == want.relaCount && same(got.buildID, want.buildID) &&
			(got.buildID == nil) == (want.buildID == nil) && same(got.ehFrameHdr, want.ehFrameHdr) &&
			got.ehFrameHdrAddr == want.ehFrameHdrAddr && slices.Equal(got.notes, want.notes)
		for i := range got.tail {
			ok = ok && same(got.tail[i], want.tail[i]) && (got.tail[i] == nil) == (want.tail[i] == nil)
		}
		if !ok {
			t.Fatalf("head %d, scratch %d: plan through pread %+v; in memory %+v", sz[0], sz[1], got, *want)
		}
		m1, m2 := bytes.Clone(data), bytes.Clone(data)
		src.data = m1
		err1 := relocateFrom(&src, m1, 0x7f0000000000, &got, a, true)
		err2 := relocate("fuzz", m2, 0x7f0000000000, want, a, true)
		if err1 != nil || err2 != nil || !bytes.Equal(m1, m2) {
			t.Fatalf("head %d, scratch %d: relocating through pread: %v, in memory: %v, same bytes: %v", sz[0], sz[1], err1, err2, bytes.Equal(m1, m2))
		}
	}
}

// FuzzSections feeds arbitrary bytes to the section header table reader:
// errors are *FormatError, sections lie inside the data, and wherever Go's
// debug/elf (an independent reader) reads the file, every section header
// field is the same.
func FuzzSections(f *testing.F) {
	f.Add(buildTestImage())
	f.Add(unterminateShstrtab(buildTestImage()))
	f.Fuzz(func(t *testing.T, data []byte) {
		secs, err := parseSections("fuzz", data)
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is %T, not *FormatError", err, err)
			}
			return
		}
		for _, s := range secs {
			if s.Type != elf.SHT_NOBITS && (s.Offset > uint64(len(data)) || s.Size > uint64(len(data))-s.Offset) {
				t.Fatalf("accepted section %+v outside %d bytes", s, len(data))
			}
		}
		gf, err := elf.NewFile(bytes.NewReader(data))
		if err != nil {
			return
		}
		if len(gf.Sections) != len(secs) {
			t.Fatalf("%d sections; debug/elf reads %d", len(secs), len(gf.Sections))
		}
		for i, g := range gf.Sections {
			want := SectionHeader{Name: g.Name, Type: g.Type, Flags: g.Flags, Addr: g.Addr, Offset: g.Offset, Size: g.FileSize,
				Link: g.Link, Info: g.Info, Addralign: g.Addralign, Entsize: g.Entsize}
			if g.Type == elf.SHT_NOBITS {
				want.Size = g.Size
			}
			if secs[i] != want {
				t.Fatalf("section %d: %+v; debug/elf reads %+v", i, secs[i], want)
			}
		}
	})
}
