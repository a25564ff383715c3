//go:build linux

package elfimage_test

import (
	"encoding/binary"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/native"
)

// TestOpenAArch64 opens an image of hand-written AArch64 code with the
// default options (the running program's ABI), calls its procedures
// through native.Call, reads the data word the loader relocated
// (R_AARCH64_RELATIVE) and queries procedures and positions. Run with
// GOARCH=arm64 go test -exec qemu-aarch64.
func TestOpenAArch64(t *testing.T) {
	path, _ := linkAArch64(t, elfimage.LinkOptions{})
	for _, opts := range []*elfimage.LoadOptions{nil, {ForceRead: true}} {
		im, err := elfimage.Open(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer im.Close()
		if ent, err := elfimage.EntryImage(); err != nil || native.Entry() == 0 || native.Entry() != ent.Entry() {
			t.Errorf("entry routine %#x, entry image %v (%v): want Open to install the AArch64 entry image", native.Entry(), ent, err)
		}
		if im.Arch().Name != "aarch64" {
			t.Errorf("Arch %s", im.Arch().Name)
		}
		s, err := native.NewStack(64 << 10)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		addr := map[string]uint64{}
		for _, name := range []string{"a64_add", "a64_twice"} {
			p, err := im.ProcedureByName(name)
			if err != nil {
				t.Fatal(err)
			}
			addr[name] = p.Start
		}
		pc := func(name string) uintptr { return im.Base() + uintptr(addr[name]) }
		if got := native.Call(pc("a64_add"), s, 40, 2); got != 42 {
			t.Errorf("a64_add(40, 2) = %d", got)
		}
		if got := native.Call(pc("a64_twice"), s, 20, 1); got != 42 {
			t.Errorf("a64_twice(20, 1) = %d", got)
		}
		data, err := im.Section(".data")
		if err != nil {
			t.Fatal(err)
		}
		if got := uintptr(binary.LittleEndian.Uint64(data)); got != pc("a64_add") {
			t.Errorf("relocated data word %#x, want a64_add's run-time address %#x", got, pc("a64_add"))
		}
		for _, c := range []struct {
			off  uint64
			proc string
			line int
		}{{0, "a64_twice", 10}, {8, "a64_twice", 11}, {12, "a64_twice", 12}, {20, "a64_twice", 13}, {4, "a64_add", 3}} {
			a := addr[c.proc] + c.off
			p, err := im.ProcedureAt(a)
			if err != nil || p.Name != c.proc {
				t.Errorf("ProcedureAt(%#x) = %q, %v; want %s", a, p.Name, err, c.proc)
			}
			pos, err := im.PositionAt(a)
			if err != nil || pos.Line != c.line || pos.File != "/src/a64.scm" {
				t.Errorf("PositionAt(%#x) = %+v, %v; want /src/a64.scm:%d", a, pos, err, c.line)
			}
		}
		if _, err := im.ProcedureAt(addr["a64_add"] + 8); err == nil {
			t.Errorf("ProcedureAt in the gap after a64_add succeeded")
		}
	}
}
