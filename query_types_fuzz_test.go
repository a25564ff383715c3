package elfimage_test

import (
	"bytes"
	"debug/elf"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/internal/typedemo"
	"github.com/elfimage/elfimage/unwind"
)

// FuzzTypes corrupts .debug_info of the typed image and reads every
// variable's type and value: no panic, no hang, and the oracle that an
// image whose bytes are unchanged reads back as the original does, with
// every value's text within FormatLocation's bound.
func FuzzTypes(f *testing.F) {
	img, err := elfimage.Link(typedemo.Module(), elfimage.LinkOptions{})
	if err != nil {
		f.Fatal(err)
	}
	ef, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		f.Fatal(err)
	}
	info := ef.Section(".debug_info")
	start, size := int(info.Offset), int(info.Size)
	const base = 0x7f0000100000
	mem := make([]byte, typedemo.FillSize+16)
	typedemo.Fill(mem, base)
	var regs unwind.Regs
	regs.Set(arch.X86_64_RDI, base)
	regs.Set(arch.X86_64_RSI, typedemo.N)
	regs.Set(arch.X86_64_RDX, typedemo.Fix)
	read := func(b []byte) []string {
		im, err := elfimage.Load("fuzz.elf", b, x86Opts)
		if err != nil {
			return nil
		}
		defer im.Close()
		im.Procedures()
		p, err := im.ProcedureByName(typedemo.Proc)
		if err != nil {
			return nil
		}
		var out []string
		for addr := p.Start; addr < p.Start+p.Size; addr += 4 {
			im.SubprogramAt(addr)
			locals, err := im.Locals(addr)
			if err != nil {
				continue
			}
			st := &elfimage.FrameState{Regs: regs, CFA: 0x7ffc0000, Mem: fakeMem{base, mem}, Vars: map[string]int64{"n": typedemo.N}}
			for _, l := range locals {
				_ = l.Type.String()
				v, err := elfimage.FormatLocation(l.Location, l.Type, st)
				if len(v) > 4096+3 {
					panic("value text past its bound")
				}
				out = append(out, l.Name+"="+v)
				_ = err
			}
		}
		return out
	}
	want := read(img)
	f.Add(uint32(0), []byte{})
	f.Add(uint32(0x40), []byte{0xff})
	f.Add(uint32(0x80), []byte{0x00, 0x00})
	f.Add(uint32(0x100), []byte{0x13, 0x01})
	f.Fuzz(func(t *testing.T, at uint32, patch []byte) {
		b := append([]byte(nil), img...)
		off := start + int(at)%size
		n := copy(b[off:start+size], patch)
		got := read(b)
		if bytes.Equal(b[off:off+n], img[off:off+n]) && len(got) != len(want) {
			t.Fatalf("unchanged image read back %d values, want %d", len(got), len(want))
		}
	})
}
