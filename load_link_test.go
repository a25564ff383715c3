package elfimage_test

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"github.com/elfimage/elfimage/arch"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/internal/tooltest"
	"github.com/elfimage/elfimage/native"
)

// linkAnswer links a module for the running architecture with one
// procedure `answer` (answerCode: return 42),
// a read-only constant and a data table holding the address of answer.
func linkAnswer(t testing.TB) []byte {
	t.Helper()
	m := &elfimage.Module{
		File:     "answer.scm",
		CompDir:  "/tmp",
		Producer: "elfimage loader test",
		Entry:    "answer",
		Arch:     arch.ForGOARCH(runtime.GOARCH),
		Procs: []*elfimage.Proc{{
			Name:  "answer",
			Code:  answerCode(),
			Lines: []elfimage.LineRow{{Offset: 0, Line: 1, Column: 1, IsStmt: true}},
		}},
		ROData: []*elfimage.Datum{{Name: "greeting", Bytes: []byte("hello\x00")}},
		Data: []*elfimage.Datum{{
			Name:   "table",
			Bytes:  make([]byte, 16),
			Relocs: []elfimage.Reloc{{Offset: 8, Type: elfimage.RelocAbs64, Symbol: "answer"}},
		}},
	}
	b, err := elfimage.Link(m, elfimage.LinkOptions{})
	if err != nil {
		t.Fatalf("Link: %v", err)
	}
	return b
}

// TestLoadLinkedImage loads what Link writes by every path and checks the
// result against debug/elf's view of the file, then calls the code.
func TestLoadLinkedImage(t *testing.T) {
	file := linkAnswer(t)
	ef, err := elf.NewFile(bytes.NewReader(file))
	if err != nil {
		t.Fatalf("debug/elf: %v", err)
	}
	syms, err := ef.Symbols()
	if err != nil {
		t.Fatalf("symbols: %v", err)
	}
	addr := map[string]uint64{}
	for _, s := range syms {
		addr[s.Name] = s.Value
	}
	path := filepath.Join(t.TempDir(), "answer.elf")
	if err := writeFile(path, file); err != nil {
		t.Fatal(err)
	}
	stack, err := native.NewStack(64 << 10)
	if err != nil {
		t.Fatalf("native stacks unavailable: %v", err)
	}
	defer stack.Close()
	for _, how := range []string{"mmap", "read", "bytes"} {
		var im *elfimage.Image
		switch how {
		case "mmap":
			im, err = elfimage.Open(path, nil)
		case "read":
			im, err = elfimage.Open(path, &elfimage.LoadOptions{ForceRead: true})
		case "bytes":
			im, err = elfimage.Load("answer", file, nil)
		}
		if err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		if im.Entry() != im.Base()+uintptr(ef.Entry) {
			t.Errorf("%s: Entry = Base+%#x, want e_entry %#x", how, im.Entry()-im.Base(), ef.Entry)
		}
		if got, err := native.CallErr(im.Entry(), stack); err != nil || got != 42 {
			t.Errorf("%s: call entry = %d, %v", how, got, err)
		}
		// The Abs64 relocation became base + address of answer.
		table := addr["table"]
		ptr := binary.LittleEndian.Uint64(im.Bytes()[table+8:])
		if ptr != uint64(im.Base())+addr["answer"] {
			t.Errorf("%s: table[1] = %#x, want Base+%#x", how, ptr, addr["answer"])
		} else if got, err := native.CallErr(uintptr(ptr), stack); err != nil || got != 42 {
			t.Errorf("%s: call through table = %d, %v", how, got, err)
		}
		var loads []elfimage.Segment
		for _, p := range ef.Progs {
			if p.Type == elf.PT_LOAD {
				loads = append(loads, elfimage.Segment{Addr: p.Vaddr, Size: p.Memsz, Flags: p.Flags})
			}
		}
		if got := im.Segments(); len(got) != len(loads) {
			t.Errorf("%s: Segments = %v, debug/elf %v", how, got, loads)
		} else {
			for i := range got {
				if got[i] != loads[i] {
					t.Errorf("%s: Segments = %v, debug/elf %v", how, got, loads)
				}
			}
		}
		if len(im.BuildID()) == 0 {
			t.Errorf("%s: no build ID", how)
		}
		if len(im.EHFrameHdr()) == 0 {
			t.Errorf("%s: no .eh_frame_hdr", how)
		}
		for _, s := range ef.Sections {
			if s.Type == elf.SHT_NOBITS || s.Type == elf.SHT_NULL || s.Flags&elf.SHF_WRITE != 0 {
				continue
			}
			want, _ := s.Data()
			if got, err := im.Section(s.Name); err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s: Section(%q) = %d bytes, %v; want %d bytes", how, s.Name, len(got), err, len(want))
			}
		}
		if got, err := elfimage.Lookup(im.Entry()); err != nil || got != im {
			t.Errorf("%s: Lookup(entry) = %v, %v", how, got, err)
		}
		if err := im.Close(); err != nil {
			t.Errorf("%s: Close: %v", how, err)
		}
	}
	// An independent check that the build ID the loader found is the
	// one readelf reports.
	if readelf := tooltest.Require(t, "readelf"); readelf != "" {
		out, err := exec.Command(readelf, "-n", path).CombinedOutput()
		if err != nil {
			t.Fatalf("readelf -n: %v\n%s", err, out)
		}
		im, err := elfimage.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer im.Close()
		if want := "Build ID: " + hex(im.BuildID()); !strings.Contains(string(out), want) {
			t.Errorf("readelf -n lacks %q:\n%s", want, out)
		}
	}
}

// answerCode returns 42 in the running architecture's code (the test calls
// it): `movz w0, #42; ret` on arm64, `mov eax, 42; ret` elsewhere.
func answerCode() []byte {
	if runtime.GOARCH == "arm64" {
		return []byte{0x40, 0x05, 0x80, 0x52, 0xc0, 0x03, 0x5f, 0xd6}
	}
	return []byte{0xb8, 0x2a, 0x00, 0x00, 0x00, 0xc3}
}
