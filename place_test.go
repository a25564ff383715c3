package elfimage

import (
	"bytes"
	"debug/elf"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/elfimage/elfimage/internal/qemutest"
)

// readsAsFile reports whether im holds file's bytes outside its writable
// segments (which carry the relocations).
func readsAsFile(im *Image, file []byte) bool {
	b := im.Bytes()
	if len(b) != len(file) {
		return false
	}
	at := uint64(0)
	for _, s := range im.Segments() {
		if s.Flags&elf.PF_W != 0 {
			if !bytes.Equal(b[at:s.Addr], file[at:s.Addr]) {
				return false
			}
			at = s.Addr + s.Size
		}
	}
	return bytes.Equal(b[at:], file[at:])
}

// anchored reports whether im was mapped above a page-table anchor.
func anchored(im *Image) bool { return im.anchor != nil }

// requireAnchored fails the test when im is not anchored on a kernel that
// honours MAP_FIXED_NOREPLACE (every kernel since 4.17, with anchors to
// spare: the tests hold fewer than maxAnchors images), and skips it under
// qemu-user, which takes the flag for a hint and may place the mapping
// elsewhere.
func requireAnchored(t *testing.T, im *Image) {
	t.Helper()
	if anchored(im) {
		return
	}
	im.Close()
	if why := qemutest.Emulated(); why != "" {
		t.Skip("no anchor under qemu-user, which may not honour MAP_FIXED_NOREPLACE: " + why)
	}
	t.Fatalf("image at %#x is not above a page-table anchor", im.Base())
}

// TestAnchorReuse: an image opened after another was closed is mapped
// above the same anchor, at the same address, and both read as the file;
// two images open at once get two anchors. The anchor is one PROT_NONE
// page right below the image, in the same pmdSpan-aligned span.
func TestAnchorReuse(t *testing.T) {
	mapEntry(t)
	file := buildTestImage()
	p := writeTemp(t, file)
	open := func() *Image {
		t.Helper()
		im, err := Open(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !readsAsFile(im, file) {
			t.Fatalf("image at %#x does not read as the file", im.Base())
		}
		return im
	}
	a := open()
	requireAnchored(t, a)
	page := uintptr(os.Getpagesize())
	if a.Base()%pmdSpan != page {
		t.Errorf("image at %#x: want one page above a %#x boundary", a.Base(), pmdSpan)
	}
	if qemutest.Emulated() == "" {
		found := false
		for _, m := range readMaps(t) {
			if m.start <= a.Base()-page && a.Base() <= m.end {
				found = m.perms == "---p" && m.path == ""
				t.Logf("below the image: %#x-%#x %s %q", m.start, m.end, m.perms, m.path)
			}
		}
		if !found {
			t.Errorf("no PROT_NONE anonymous page right below the image at %#x", a.Base())
		}
	}
	base := a.Base()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := open()
	if b.Base() != base {
		t.Errorf("reopened at %#x, want the free anchor's %#x", b.Base(), base)
	}
	c := open()
	if c.Base() == b.Base() || !anchored(c) {
		t.Errorf("second open image at %#x (anchored %v), first at %#x", c.Base(), anchored(c), b.Base())
	}
	c.Close()
	b.Close()
}

// TestAnchorTaken: when something else was mapped above a free anchor,
// Open maps the image elsewhere (above a new anchor) and the image is
// whole; the occupied anchor is given up.
func TestAnchorTaken(t *testing.T) {
	mapEntry(t)
	file := buildTestImage()
	p := writeTemp(t, file)
	im, err := Open(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	requireAnchored(t, im)
	base := im.Base()
	im.Close()
	// Occupy the first page above the (now free) anchor.
	pg := uintptr(os.Getpagesize())
	q, _, e := unix.Syscall6(unix.SYS_MMAP, base, pg, unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_FIXED_NOREPLACE, ^uintptr(0), 0)
	if e != 0 || q != base {
		if e == 0 {
			unix.Syscall(unix.SYS_MUNMAP, q, pg, 0)
		}
		t.Skipf("could not map a page at %#x: %v", base, e)
	}
	defer unix.Syscall(unix.SYS_MUNMAP, q, pg, 0)
	before := liveMappings.Load()
	im, err = Open(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if im.Base() == base {
		t.Fatalf("image mapped over another mapping at %#x", base)
	}
	if !readsAsFile(im, file) {
		t.Errorf("image at %#x does not read as the file", im.Base())
	}
	if err := im.Close(); err != nil {
		t.Fatal(err)
	}
	if n := liveMappings.Load(); n != before {
		t.Errorf("live mappings %d, want %d", n, before)
	}
	anchors.mu.Lock()
	defer anchors.mu.Unlock()
	for _, a := range anchors.free {
		if uintptr(a) == base-uintptr(os.Getpagesize()) {
			t.Errorf("the occupied anchor at %#x is still free for use", uintptr(a))
		}
	}
}

// TestAnchorBound: more images open at once than there may be anchors all
// load and read as the file; at most maxAnchors anchors exist.
func TestAnchorBound(t *testing.T) {
	mapEntry(t)
	file := buildTestImage()
	p := writeTemp(t, file)
	anchors.mu.Lock()
	inUse := anchors.total - len(anchors.free) // by images other tests hold
	anchors.mu.Unlock()
	var ims []*Image
	for range maxAnchors + 4 {
		im, err := Open(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		ims = append(ims, im)
	}
	n := 0
	for _, im := range ims {
		if anchored(im) {
			n++
		}
		if !readsAsFile(im, file) {
			t.Errorf("image at %#x does not read as the file", im.Base())
		}
		im.Close()
	}
	anchors.mu.Lock()
	total, free := anchors.total, len(anchors.free)
	anchors.mu.Unlock()
	if n > maxAnchors || total > maxAnchors || free > total {
		t.Errorf("%d images anchored, %d anchors (%d free): want at most %d", n, total, free, maxAnchors)
	}
	if qemutest.Emulated() == "" && n != maxAnchors-inUse {
		t.Errorf("%d of %d images anchored, want %d (%d anchors held elsewhere)", n, len(ims), maxAnchors-inUse, inUse)
	}
}
