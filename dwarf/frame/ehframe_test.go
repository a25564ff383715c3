package frame

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/arch"
)

// TestDeferredEHFrame: an .eh_frame encoded before its addresses and put
// at them is byte for byte what EncodeEHFrame writes at those addresses,
// for every encoding and placement, and so are its FDE offsets.
func TestDeferredEHFrame(t *testing.T) {
	cie := StandardCIE(arch.X86_64)
	signal := cie
	signal.Signal = true
	for _, enc := range encodings() {
		for _, place := range []struct{ section, code uint64 }{
			{0x200, 0x1000},                  // .eh_frame before the code
			{0x7f0000100000, 0x7f0000000000}, // after it, as Link lays it out
			{0x10000, 0x10000},               // where the code will be
		} {
			t.Run(fmt.Sprintf("%v-addr%d-%v-%#x", enc.Format, enc.AddrSize, enc.ByteOrder, place.section), func(t *testing.T) {
				fdes := testFDEs(0)
				fdes[1].CIE = &signal
				d, err := EncodeEHFrameDeferred(cie, fdes, enc)
				if err != nil {
					t.Fatal(err)
				}
				code, section := place.code, place.section
				if enc.AddrSize == 4 {
					code, section = code&0xffffff, section&0xffffff
				}
				for i := range fdes {
					fdes[i].Start += code
				}
				want, offs, err := EncodeEHFrame(cie, fdes, section, enc)
				if err != nil {
					t.Fatal(err)
				}
				got := make([]byte, d.Size())
				if err := d.Put(got, section, fdes); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("Put:\n% x\nEncodeEHFrame:\n% x", got, want)
				}
				if fmt.Sprint(d.FDEOffsets()) != fmt.Sprint(offs) {
					t.Errorf("FDE offsets %v, want %v", d.FDEOffsets(), offs)
				}
			})
		}
	}
}

// TestDeferredEHFrameErrors: Put refuses what EncodeEHFrame would refuse
// once the addresses are known, and a call that does not match the
// encoding.
func TestDeferredEHFrameErrors(t *testing.T) {
	enc := encodings()[0]
	fdes := testFDEs(0)
	d, err := EncodeEHFrameDeferred(StandardCIE(arch.X86_64), fdes, enc)
	if err != nil {
		t.Fatal(err)
	}
	at := testFDEs
	resized := at(0x1000)
	resized[2].Size++
	for _, c := range []struct {
		name string
		dst  int
		addr uint64
		fdes []FDE
		msg  string
	}{
		{"far", d.Size(), 0, at(1 << 40), "pc_begin 0x10000000000 is too far from its field"},
		{"short dst", d.Size() - 1, 0, at(0x1000), "put into"},
		{"fewer FDEs", d.Size(), 0, at(0x1000)[:2], "2 FDEs put, 3 encoded"},
		{"resized", d.Size(), 0, resized, "FDE 2: size 0x30001, encoded 0x30000"},
		{"wraps", d.Size(), 0xfffffffffff00000, at(0xfffffffffffff000), "range overflows"},
	} {
		err := d.Put(make([]byte, c.dst), c.addr, c.fdes)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: err = %v, want ErrInvalid containing %q", c.name, err, c.msg)
		}
	}
}
