package procview_test

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/procview"
)

// FuzzCore decodes arbitrary bytes as a core file. Oracles: an error is a
// *dwarf.FormatError; a decoded core's segments are sorted, disjoint and
// consistent, agree with debug/elf's program headers and segment readers
// of the same bytes, and their memory reads return the file's bytes at
// p_offset; and a core re-encoded by the tests' independent writer
// (writeCore) from what was decoded decodes to the same threads, files,
// auxiliary vector, process information, segments and memory.
func FuzzCore(f *testing.F) {
	f.Add(writeCore(sampleCore()))
	f.Add(writeCore(&testCore{PID: 1, Threads: []procview.CoreThread{{TID: 1}}}))
	f.Add(writeCore(sampleCoreAArch64()))
	f.Add(writeCore(linkMapCore(false)))
	trunc := writeCore(sampleCore())
	f.Add(trunc[:len(trunc)-100])
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := procview.NewCore(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			var fe *dwarf.FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a FormatError", err)
			}
			return
		}
		if len(c.Threads) == 0 || len(c.Threads) > procview.MaxThreads || c.PID <= 0 {
			t.Fatalf("%d threads, pid %d", len(c.Threads), c.PID)
		}
		if c.Arch.Machine != elf.Machine(binary.LittleEndian.Uint16(b[18:])) {
			t.Fatalf("Arch %s for e_machine %d", c.Arch.Name, binary.LittleEndian.Uint16(b[18:]))
		}
		for _, th := range c.Threads {
			// The registers are the ones of the core's machine only, and
			// the frame's pc and sp are pr_reg's.
			f := th.Frame()
			if c.Arch == arch.AArch64 && (th.Regs != procview.UserRegs{} || f.PC != th.AArch64Regs.Pc || f.SP != th.AArch64Regs.Sp) ||
				c.Arch == arch.X86_64 && (th.AArch64Regs != procview.UserPtRegs{} || f.PC != th.Regs.Rip || f.SP != th.Regs.Rsp) {
				t.Fatalf("thread %d of a %s core: %+v, frame pc %#x sp %#x", th.TID, c.Arch.Name, th, f.PC, f.SP)
			}
		}
		for i, s := range c.Segments {
			if s.Size == 0 || s.FileSize > s.Size || s.Present > s.FileSize || s.End() < s.Addr || i > 0 && s.Addr < c.Segments[i-1].End() {
				t.Fatalf("segment %d: %+v", i, s)
			}
			if s.Present > 0 {
				n := min(s.Present, 16)
				got := make([]byte, n)
				if _, err := c.ReadAt(got, int64(s.Addr)); s.Addr < 1<<63 && (err != nil || !bytes.Equal(got, b[s.Offset:s.Offset+n])) {
					t.Fatalf("segment %d: read %x, %v; file %x", i, got, err, b[s.Offset:s.Offset+n])
				}
			}
			if s.Present < s.Size && s.Addr < 1<<63 {
				if _, err := c.ReadSized(s.Addr+s.Present, 1); !errors.Is(err, procview.ErrNotDumped) {
					t.Fatalf("segment %d: read past the dumped bytes: %v", i, err)
				}
			}
		}
		for _, m := range c.Files {
			if m.End < m.Start {
				t.Fatalf("file %+v", m)
			}
		}
		// The dynamic linker's list, read from any segment taken as a
		// dynamic section: bounded, names without NUL of at most 4096
		// bytes.
		for _, s := range c.Segments {
			if s.Present >= 16 {
				l, _ := c.LinkMap(s.Addr, s.Present)
				if len(l) > procview.MaxLinkMapEntries {
					t.Fatalf("%d link_map entries", len(l))
				}
				for _, e := range l {
					if len(e.Path) > 4096 || strings.IndexByte(e.Path, 0) >= 0 {
						t.Fatalf("link_map name %q", e.Path)
					}
				}
				break
			}
		}
		compareWithDebugELF(t, b, c)
		if len(c.Warnings()) == 0 && len(c.Segments) < 1000 {
			roundTrip(t, c)
		}
	})
}

// roundTrip re-encodes c with writeCore and checks that it decodes to the
// same core (segments' file offsets aside: the writer lays them out anew).
func roundTrip(t *testing.T, c *procview.Core) {
	t.Helper()
	tc := &testCore{Machine: c.Arch.Machine, PID: c.PID, Command: c.Command, Args: c.Args, Threads: c.Threads, Files: c.Files, PageSize: c.PageSize, Auxv: c.Auxv, Siginfo: c.Siginfo}
	for _, s := range c.Segments {
		data := make([]byte, s.FileSize)
		if s.FileSize > 0 {
			if s.Addr >= 1<<63 {
				return // ReadAt takes int64 offsets
			}
			if _, err := c.ReadAt(data, int64(s.Addr)); err != nil {
				t.Fatalf("segment %+v: %v", s, err)
			}
		}
		tc.Segs = append(tc.Segs, testSeg{Addr: s.Addr, Size: s.Size, Data: data, Flags: s.Flags})
	}
	b2 := writeCore(tc)
	c2, err := procview.NewCore(bytes.NewReader(b2), int64(len(b2)))
	if err != nil {
		t.Fatalf("re-encoded core: %v", err)
	}
	if c2.PID != c.PID || c2.Command != c.Command || c2.Args != c.Args || c2.PageSize != c.PageSize {
		t.Fatalf("process: %d %q %q %d, was %d %q %q %d", c2.PID, c2.Command, c2.Args, c2.PageSize, c.PID, c.Command, c.Args, c.PageSize)
	}
	for _, p := range []struct {
		name     string
		got, was any
	}{{"threads", c2.Threads, c.Threads}, {"files", c2.Files, c.Files}, {"auxv", c2.Auxv, c.Auxv}, {"siginfo", c2.Siginfo, c.Siginfo}} {
		if !reflect.DeepEqual(p.got, p.was) {
			t.Fatalf("%s: %+v, was %+v", p.name, p.got, p.was)
		}
	}
	if len(c2.Segments) != len(c.Segments) {
		t.Fatalf("%d segments, was %d", len(c2.Segments), len(c.Segments))
	}
	for i, s := range c2.Segments {
		w := c.Segments[i]
		if s.Addr != w.Addr || s.Size != w.Size || s.FileSize != w.FileSize || s.Present != w.Present || s.Flags != w.Flags {
			t.Fatalf("segment %d: %+v, was %+v", i, s, w)
		}
		if n := min(s.FileSize, 64); n > 0 && s.Addr < 1<<63 {
			a, b := make([]byte, n), make([]byte, n)
			c.ReadAt(a, int64(s.Addr+s.FileSize-n))
			c2.ReadAt(b, int64(s.Addr+s.FileSize-n))
			if !bytes.Equal(a, b) {
				t.Fatalf("segment %d memory: %x, was %x", i, b, a)
			}
		}
	}
}
