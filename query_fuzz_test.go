package elfimage_test

import (
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/lang/scheme"
)

// FuzzQueries corrupts the non-loaded tail of a real image (which the
// loader never reads, so any bytes get through it) and runs every debug
// query on it: no panic, no hang, only errors.
func FuzzQueries(f *testing.F) {
	m, err := scheme.Compile(scheme.DemoFile, scheme.DemoSource)
	if err != nil {
		f.Fatal(err)
	}
	img, err := elfimage.Link(m, elfimage.LinkOptions{})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint32(0), []byte{})
	f.Add(uint32(0x100), []byte{0xff, 0xff, 0xff, 0xff})
	f.Add(uint32(0x400), []byte{0x80, 0x80, 0x80, 0x80, 0x80})
	f.Fuzz(func(t *testing.T, at uint32, patch []byte) {
		b := append([]byte(nil), img...)
		tail := 0x3000 // the demo image's tail starts after three pages
		off := tail + int(at)%(len(b)-tail)
		copy(b[off:], patch)
		im, err := elfimage.Load("fuzz.elf", b, nil)
		if err != nil {
			return
		}
		defer im.Close()
		for addr := uint64(0x1000); addr < 0x1900; addr += 0x40 {
			im.ProcedureAt(addr)
			im.PositionAt(addr)
			im.SubprogramAt(addr)
			im.Procedure(addr)
			im.Locals(addr)
		}
		im.Procedures()
	})
}
