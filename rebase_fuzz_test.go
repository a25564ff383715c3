package elfimage

import (
	"bytes"
	"debug/elf"
	"errors"
	"testing"
)

// FuzzRebase feeds Rebase arbitrary bytes and bases and checks the result
// against oracles that do not use Rebase's own parser:
//   - errors are *FormatError;
//   - the output has the input's size, rebasing by 0 changes nothing, and
//     rebasing by d then by -d gives the input back byte for byte;
//   - rebasing by d1 then d2 equals rebasing by d1+d2;
//   - where Go's debug/elf reads both images, e_entry (when not 0), the
//     addresses of the moved program headers, SHF_ALLOC sections' sh_addr
//     and the values of symbols defined in SHF_ALLOC sections are the
//     input's plus d, and every other program header and section address
//     is unchanged.
func FuzzRebase(f *testing.F) {
	f.Add(buildTestImage(), uint64(0x7f0000000000), uint64(0x1000))
	m := &Module{File: "f.scm", Procs: []*Proc{{Name: "f", Code: []byte{0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3},
		Lines: []LineRow{{Offset: 0, Line: 1, Column: 1}, {Offset: 4, Line: 2, Column: 3}}}}}
	if b, err := Link(m, LinkOptions{}); err == nil {
		f.Add(b, uint64(0x7f0000000000), ^uint64(0))
		f.Add(b, uint64(1), uint64(0x123456789))
	} else {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte, d, d2 uint64) {
		out, err := Rebase(b, d)
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("Rebase error %v (%T) is not a *FormatError", err, err)
			}
			return
		}
		if len(out) != len(b) {
			t.Fatalf("rebased image is %d bytes, input %d", len(out), len(b))
		}
		if same, err := Rebase(b, 0); err != nil || !bytes.Equal(same, b) {
			t.Fatalf("Rebase by 0 changed the image (%v)", err)
		}
		back, err := Rebase(out, -d)
		if err != nil || !bytes.Equal(back, b) {
			t.Fatalf("Rebase by %#x then by -%#x is not the input (%v)", d, d, err)
		}
		twice, err := Rebase(out, d2)
		once, err2 := Rebase(b, d+d2)
		if err != nil || err2 != nil || !bytes.Equal(twice, once) {
			t.Fatalf("Rebase by %#x then %#x differs from Rebase by %#x (%v, %v)", d, d2, d+d2, err, err2)
		}
		checkMoved(t, b, out, d)
	})
}

// checkMoved compares, with debug/elf, the addresses of a and of b, which
// must be a moved by d; it checks nothing when debug/elf cannot read a.
func checkMoved(t *testing.T, a, b []byte, d uint64) {
	t.Helper()
	fa, err := elf.NewFile(bytes.NewReader(a))
	if err != nil {
		return
	}
	fb, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("debug/elf reads the input but not the rebased image: %v", err)
	}
	if len(fa.Progs) != len(fb.Progs) || len(fa.Sections) != len(fb.Sections) {
		t.Fatalf("%d/%d program headers, %d/%d sections", len(fa.Progs), len(fb.Progs), len(fa.Sections), len(fb.Sections))
	}
	want := fa.Entry
	if want != 0 {
		want += d
	}
	if fb.Entry != want {
		t.Fatalf("e_entry %#x, want %#x", fb.Entry, want)
	}
	for i, p := range fa.Progs {
		q, want := fb.Progs[i], p.Vaddr
		wantP := p.Paddr
		switch p.Type {
		case elf.PT_LOAD, elf.PT_DYNAMIC, elf.PT_GNU_EH_FRAME, elf.PT_NOTE:
			want += d
			wantP += d
		}
		if q.Vaddr != want || q.Paddr != wantP || q.Off != p.Off || q.Filesz != p.Filesz || q.Memsz != p.Memsz {
			t.Fatalf("program header %d (%v): vaddr %#x paddr %#x, want %#x %#x", i, p.Type, q.Vaddr, q.Paddr, want, wantP)
		}
	}
	for i, s := range fa.Sections {
		want := s.Addr
		if s.Flags&elf.SHF_ALLOC != 0 {
			want += d
		}
		if got := fb.Sections[i].Addr; got != want || fb.Sections[i].Offset != s.Offset || fb.Sections[i].Size != s.Size {
			t.Fatalf("section %d %s: sh_addr %#x, want %#x", i, s.Name, got, want)
		}
	}
	sa, err := fa.Symbols()
	if err != nil {
		return
	}
	sb, err := fb.Symbols()
	if err != nil || len(sb) != len(sa) {
		t.Fatalf("rebased symbols: %d, %v; input has %d", len(sb), err, len(sa))
	}
	for i, s := range sa {
		want := s.Value
		if s.Section != elf.SHN_UNDEF && s.Section < elf.SHN_LORESERVE && int(s.Section) < len(fa.Sections) && fa.Sections[s.Section].Flags&elf.SHF_ALLOC != 0 {
			want += d
		}
		if sb[i].Value != want {
			t.Fatalf("symbol %d %s: %#x, want %#x", i, s.Name, sb[i].Value, want)
		}
	}
}
