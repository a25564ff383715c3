//go:build linux

package elfimage_test

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/internal/qemutest"
	"github.com/elfimage/elfimage/internal/tooltest"
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

// TestLoadPageSizeAArch64 checks what arch.AArch64's documentation says
// of 16 KiB and 64 KiB kernels. Where the kernel's pages
// (os.Getpagesize) are larger than 4 KiB, an image linked with
// arch.AArch64 (4 KiB alignment) is refused by Open and Load with an error
// naming p_offset and the page size, and one linked with a copy of
// arch.AArch64 whose PageSize is 65536 has 64 KiB-aligned segments,
// loads (with the library's entry image, linked with the kernel's page
// size), runs and has its data relocated. With 4 KiB pages the 64 KiB
// image loads and runs too (65536 serves every granule); under qemu-user
// the test then runs itself again under qemu-aarch64 -p 16384 and -p
// 65536, whose guests see that page size (AT_PAGESZ, which
// os.Getpagesize returns): qemu stands for the larger kernels. On arm64
// hardware with 4 KiB pages the refusal is not checked, which the test
// logs.
func TestLoadPageSizeAArch64(t *testing.T) {
	ps := os.Getpagesize()
	t.Logf("page size %d", ps)
	a64k := *arch.AArch64
	a64k.PageSize = 65536
	b, err := elfimage.Link(aarch64Module(&a64k), elfimage.LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	loads := 0
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			loads++
			if p.Align != 65536 || p.Off%65536 != 0 || p.Vaddr != p.Off {
				t.Errorf("PageSize 65536: PT_LOAD %+v, want 64 KiB aligned, offset = address", p.ProgHeader)
			}
		}
	}
	if loads < 2 {
		t.Errorf("PageSize 65536: %d PT_LOAD segments, want code and data apart", loads)
	}
	path := filepath.Join(t.TempDir(), "a64-64k.elf")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := native.NewStack(64 << 10)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, opts := range []*elfimage.LoadOptions{nil, {ForceRead: true}} {
		im, err := elfimage.Open(path, opts)
		if err != nil {
			t.Fatalf("page size %d: Open of the 64 KiB image (%+v): %v", ps, opts, err)
		}
		p, err := im.ProcedureByName("a64_twice")
		if err != nil {
			t.Fatal(err)
		}
		if got := native.Call(im.Base()+uintptr(p.Start), s, 20, 1); got != 42 {
			t.Errorf("page size %d: a64_twice(20, 1) = %d in the 64 KiB image", ps, got)
		}
		add, err := im.ProcedureByName("a64_add")
		if err != nil {
			t.Fatal(err)
		}
		if data, err := im.Section(".data"); err != nil || uintptr(binary.LittleEndian.Uint64(data)) != im.Base()+uintptr(add.Start) {
			t.Errorf("page size %d: relocated data word of the 64 KiB image % x (%v), want a64_add's address", ps, data, err)
		}
		im.Close()
	}
	// Open and Load install the library's entry image first: until it
	// was linked with the kernel's page size, they failed on 16 and
	// 64 KiB kernels whatever the image.
	if ent, err := elfimage.EntryImage(); err != nil || native.Entry() != ent.Entry() {
		t.Errorf("page size %d: entry image %v (%v) not installed", ps, ent, err)
	}
	if ps > 4096 {
		path4k, b4k := linkAArch64(t, elfimage.LinkOptions{})
		want := fmt.Sprintf("not a multiple of the page size %#x", ps)
		if im, err := elfimage.Open(path4k, nil); err == nil || !strings.Contains(err.Error(), "p_offset") || !strings.Contains(err.Error(), want) {
			t.Errorf("page size %d: Open of a 4 KiB image: %v, want an error naming p_offset, %q", ps, err, want)
			if err == nil {
				im.Close()
			}
		} else {
			t.Logf("Open: %v", err)
		}
		if im, err := elfimage.Load("a64.elf", b4k, nil); err == nil || !strings.Contains(err.Error(), "p_offset") || !strings.Contains(err.Error(), want) {
			t.Errorf("page size %d: Load of a 4 KiB image: %v, want an error naming p_offset, %q", ps, err, want)
			if err == nil {
				im.Close()
			}
		}
		return
	}
	if qemutest.Emulated() == "" {
		t.Logf("the kernel's pages are 4 KiB: the refusal of 4 KiB images by 16 and 64 KiB kernels is not checked here")
		return
	}
	qemu := tooltest.Require(t, "qemu-aarch64")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, big := range []int{16384, 65536} {
		out, err := tooltest.RunTool(t, exec.Command(qemu, "-p", fmt.Sprint(big), self, "-test.run=^TestLoadPageSizeAArch64$", "-test.v", "-test.count=1"), 5*time.Minute)
		if err != nil || !strings.Contains(string(out), fmt.Sprintf("page size %d\n", big)) || !strings.Contains(string(out), "--- PASS: TestLoadPageSizeAArch64") {
			t.Errorf("qemu-aarch64 -p %d: %v\n%s", big, err, out)
			continue
		}
		t.Logf("qemu-aarch64 -p %d:\n%s", big, out)
	}
}
