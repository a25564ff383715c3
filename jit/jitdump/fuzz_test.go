package jitdump

import (
	"encoding/binary"
	"errors"
	"os"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/frame"
)

// FuzzRead: any input decodes without panicking or unbounded allocation,
// errors are *dwarf.FormatError, the records tile the file, and the
// unwinding data of every load can be searched with dwarf/frame.
func FuzzRead(f *testing.F) {
	w, err := Open(f.TempDir(), &Options{Arch: arch.X86_64, Clock: fakeClock()})
	if err != nil {
		f.Fatal(err)
	}
	w.Load(fibFunc(0x7f0000001000))
	w.Load(&Function{Name: "leaf", Addr: 0x7f0000002000, Code: []byte{0xc3}, CFI: []frame.Insn{}})
	w.Move(0x7f0000002000, 0x7f0000003000, 1, 1)
	w.Close()
	seed, err := os.ReadFile(w.Path())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	a := &asm{order: binary.BigEndian}
	a.header(1, 48, 1).u64(0)
	a.u32(2).u32(32 + 16 + 5 + 16 + 2).u64(9).u64(0x4000).u64(2)
	a.u64(0x4000).u32(10).u32(0).raw("a.js\x00")
	a.u64(0x4008).u32(11).u32(0).raw("\xff\x00")
	a.u32(99).u32(19).u64(10).raw("xyz")
	f.Add(a.b)
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse(data)
		if err != nil {
			var fe *dwarf.FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a FormatError", err)
			}
			if fe.Offset > uint64(len(data)) {
				t.Fatalf("error offset %#x past the data", fe.Offset)
			}
		}
		if d == nil {
			return
		}
		next := uint64(d.Header.TotalSize)
		for _, r := range d.Records {
			p := r.RecordPrefix()
			if p.Offset != next || p.TotalSize < PrefixSize {
				t.Fatalf("record at %#x, expected %#x", p.Offset, next)
			}
			next += uint64(p.TotalSize)
			if l, ok := r.(*CodeLoad); ok && uint64(len(l.Code)) != l.CodeSize {
				t.Fatalf("code of %d bytes, code_size %d", len(l.Code), l.CodeSize)
			}
		}
		if next > uint64(len(data)) {
			t.Fatalf("records end at %#x past %#x", next, len(data))
		}
		for _, c := range d.Code() {
			c.Span()
			fi, err := c.Finder(d)
			if err != nil {
				continue
			}
			var fde frame.ParsedFDE
			if fi.FindFDE(c.CodeAddr, &fde) == nil {
				var e frame.Exec
				var row frame.Row
				e.RowAt(&fde, c.CodeAddr, &row)
			}
		}
	})
}
