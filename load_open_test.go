package elfimage

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/elfimage/elfimage/internal/qemutest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/elfimage/elfimage/addrmap"
	"github.com/elfimage/elfimage/internal/tooltest"
)

func writeTemp(t testing.TB, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "image.elf")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// loadAll loads b by every path: mmap, read fallback, and Load.
func loadAll(t *testing.T, b []byte) map[string]*Image {
	t.Helper()
	p := writeTemp(t, b)
	out := map[string]*Image{}
	for name, f := range map[string]func() (*Image, error){
		"mmap":  func() (*Image, error) { return Open(p, nil) },
		"read":  func() (*Image, error) { return Open(p, &LoadOptions{ForceRead: true}) },
		"bytes": func() (*Image, error) { return Load("test image", b, nil) },
	} {
		im, err := f()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Cleanup(func() { im.Close() })
		out[name] = im
	}
	if !out["mmap"].Mapped() || out["read"].Mapped() || out["bytes"].Mapped() {
		t.Errorf("Mapped() = %v/%v/%v, want true/false/false", out["mmap"].Mapped(), out["read"].Mapped(), out["bytes"].Mapped())
	}
	return out
}

// unrelocate returns a copy of im.Bytes() with base subtracted at each
// relocated field, which must then equal the file.
func unrelocate(im *Image, relocs []uint64) []byte {
	c := bytes.Clone(im.Bytes())
	for _, off := range relocs {
		v := binary.LittleEndian.Uint64(c[off:])
		binary.LittleEndian.PutUint64(c[off:], v-uint64(im.Base()))
	}
	return c
}

func TestOpenPathsAgree(t *testing.T) {
	file := buildTestImage()
	ims := loadAll(t, file)
	for name, im := range ims {
		t.Run(name, func(t *testing.T) {
			if im.Base()%4096 != 0 {
				t.Errorf("Base %#x not page aligned", im.Base())
			}
			if im.Size() != tTailOff {
				t.Errorf("Size = %#x, want %#x", im.Size(), tTailOff)
			}
			if im.Entry() != im.Base()+tTextOff {
				t.Errorf("Entry = %#x, want Base+%#x", im.Entry(), tTextOff)
			}
			if len(im.Bytes()) != len(file) {
				t.Errorf("len(Bytes) = %d, want file size %d", len(im.Bytes()), len(file))
			}
			for _, r := range tRelocs {
				got := binary.LittleEndian.Uint64(im.Bytes()[r.off:])
				if got != uint64(im.Base())+r.addend {
					t.Errorf("relocated pointer at %#x = %#x, want base %#x + %#x", r.off, got, im.Base(), r.addend)
				}
			}
			// The pointer at .data+0 must really point at the loaded code.
			p := binary.LittleEndian.Uint64(im.Bytes()[tDataOff:])
			if !bytes.Equal(im.Bytes()[p-uint64(im.Base()):][:len(tCode)], tCode) {
				t.Errorf("relocated pointer does not point at the code")
			}
			if got := unrelocate(im, []uint64{tRelocs[0].off, tRelocs[1].off}); !bytes.Equal(got, file) {
				t.Errorf("loaded bytes (relocations undone) differ from the file")
			}
			want := []Segment{{0, tRSize, elf.PF_R}, {tTextOff, uint64(len(tCode)), elf.PF_R | elf.PF_X}, {tDataOff, tDataSize, elf.PF_R | elf.PF_W}}
			if got := im.Segments(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("Segments = %v, want %v", got, want)
			}
			if !bytes.Equal(im.BuildID(), tBuildID) {
				t.Errorf("BuildID = %q, want %q", im.BuildID(), tBuildID)
			}
			if !bytes.Equal(im.EHFrameHdr(), file[tEHOff:tEHOff+tEHSize]) || im.EHFrameHdrAddr() != tEHOff {
				t.Errorf("EHFrameHdr = %x at %#x", im.EHFrameHdr(), im.EHFrameHdrAddr())
			}
			// Registry.
			for _, pc := range []uintptr{im.Base(), im.Base() + tTextOff + 3, im.Base() + tTailOff - 1} {
				if got, err := Lookup(pc); err != nil || got != im {
					t.Errorf("Lookup(Base+%#x) = %v, %v", pc-im.Base(), got, err)
				}
			}
			if got, err := Lookup(im.Base() + tTailOff); !errors.Is(err, addrmap.ErrNotFound) {
				t.Errorf("Lookup(Base+Size) = %v, %v; want ErrNotFound", got, err)
			}
		})
	}
}

func TestLookupAfterClose(t *testing.T) {
	im, err := Load("x", buildTestImage(), nil)
	if err != nil {
		t.Fatal(err)
	}
	pc := im.Entry()
	found := false
	for _, x := range Images() {
		found = found || x == im
	}
	if !found {
		t.Error("Images() does not list the open image")
	}
	if allocs := testing.AllocsPerRun(100, func() { Lookup(pc) }); allocs != 0 {
		t.Errorf("Lookup allocates %v times", allocs)
	}
	if err := im.Close(); err != nil {
		t.Fatal(err)
	}
	if err := im.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if got, err := Lookup(pc); !errors.Is(err, addrmap.ErrNotFound) {
		t.Errorf("Lookup after Close = %v, %v", got, err)
	}
}

// mapping is one line of /proc/self/maps.
type mapping struct {
	start, end uintptr
	perms      string
	path       string
}

func readMaps(t testing.TB) []mapping {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		tooltest.Skip(t, "no /proc/self/maps: %v", err)
	}
	defer f.Close()
	var out []mapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 5 {
			continue
		}
		se := strings.SplitN(fs[0], "-", 2)
		s, _ := strconv.ParseUint(se[0], 16, 64)
		e, _ := strconv.ParseUint(se[1], 16, 64)
		m := mapping{start: uintptr(s), end: uintptr(e), perms: fs[1]}
		if len(fs) >= 6 {
			m.path = fs[5]
		}
		out = append(out, m)
	}
	return out
}

// TestWXorX checks the protections the kernel reports: text r-x, data rw-,
// everything else of the image r--, and nothing both writable and
// executable.
func TestWXorX(t *testing.T) {
	if qemutest.Emulated() != "" {
		t.Skip("under qemu-user: /proc/self/maps shows the emulator's host protections of guest pages, not the guest's (" + qemutest.Emulated() + ")")
	}
	for name, im := range loadAll(t, buildTestImage()) {
		t.Run(name, func(t *testing.T) {
			base := im.Base()
			end := base + uintptr(len(im.Bytes()))
			want := func(a uintptr) string {
				switch off := a - base; {
				case off >= tTextOff && off < tTextOff+4096:
					return "r-x"
				case off >= tDataOff && off < tDataOff+4096:
					return "rw-"
				}
				return "r--"
			}
			covered := uintptr(0)
			for _, m := range readMaps(t) {
				if m.end <= base || m.start >= end {
					continue
				}
				if strings.Contains(m.perms, "w") && strings.Contains(m.perms, "x") {
					t.Errorf("mapping %#x-%#x is %s: writable and executable", m.start, m.end, m.perms)
				}
				for a := max(m.start, base); a < min(m.end, end); a += 4096 {
					covered += 4096
					if got := m.perms[:3]; got != want(a) {
						t.Errorf("page Base+%#x is %s, want %s", a-base, got, want(a))
					}
				}
			}
			if covered < uintptr(len(im.Bytes())) {
				t.Errorf("maps cover %#x bytes of the %#x-byte image", covered, len(im.Bytes()))
			}
		})
	}
}

func TestSections(t *testing.T) {
	file := buildTestImage()
	ef, err := elf.NewFile(bytes.NewReader(file))
	if err != nil {
		t.Fatalf("debug/elf rejects the test image: %v", err)
	}
	im, err := Load("x", file, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	secs, err := im.Sections()
	if err != nil {
		t.Fatal(err)
	}
	if len(secs) != len(ef.Sections) {
		t.Fatalf("%d sections, debug/elf sees %d", len(secs), len(ef.Sections))
	}
	for i, s := range secs {
		e := ef.Sections[i]
		if s.Name != e.Name || s.Type != e.Type || s.Flags != e.Flags || s.Offset != e.Offset || s.Size != e.Size || s.Addr != e.Addr {
			t.Errorf("section %d = %+v, debug/elf %+v", i, s, e.SectionHeader)
		}
		if e.Type == elf.SHT_NULL {
			continue
		}
		want, _ := e.Data()
		got, err := im.Section(e.Name)
		if err != nil || (!bytes.Equal(got, want) && e.Name != ".data") {
			t.Errorf("Section(%q) = %x, %v; want %x", e.Name, got, err, want)
		}
	}
	if text, _ := im.Section(".text"); &text[0] != &im.Bytes()[tTextOff] {
		t.Error("Section(.text) does not alias the loaded image")
	}
	if _, err := im.Section(".debug_info"); !errors.Is(err, ErrNoSection) {
		t.Errorf("Section(.debug_info) err = %v, want ErrNoSection", err)
	}
	// Loaded program headers agree with debug/elf.
	var loads []Segment
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD {
			loads = append(loads, Segment{p.Vaddr, p.Memsz, p.Flags})
		}
	}
	if fmt.Sprint(loads) != fmt.Sprint(im.Segments()) {
		t.Errorf("Segments = %v, debug/elf %v", im.Segments(), loads)
	}
}

// TestReadelfAcceptsTestImage checks the hand-built image with an
// independent reader, so that the loader tests test against a valid image.
func TestReadelfAcceptsTestImage(t *testing.T) {
	readelf := tooltest.Require(t, "readelf")
	p := writeTemp(t, buildTestImage())
	out, err := exec.Command(readelf, "-W", "-h", "-l", "-S", "-d", "-r", "-n", p).CombinedOutput()
	if err != nil {
		t.Fatalf("readelf: %v\n%s", err, out)
	}
	s := string(out)
	for _, bad := range []string{"Warning", "Error", "rror:"} {
		if strings.Contains(s, bad) {
			t.Errorf("readelf complains:\n%s", s)
			break
		}
	}
	machine, relative := "X86-64", "R_X86_64_RELATIVE"
	if hostArch.Machine == elf.EM_AARCH64 {
		machine, relative = "AArch64", "R_AARCH64_RELATIVE"
	}
	for _, want := range []string{"DYN (", machine, relative, "RELACOUNT", "Build ID: " + fmt.Sprintf("%x", tBuildID), "GNU_EH_FRAME"} {
		if !strings.Contains(s, want) {
			t.Errorf("readelf output lacks %q:\n%s", want, s)
		}
	}
}

func TestOpenNoDynamic(t *testing.T) {
	b := buildTestImage()
	putPh32(b, phDyn, 0, uint32(elf.PT_NULL))
	putPh32(b, phNote, 0, uint32(elf.PT_NULL))
	putPh32(b, phEH, 0, uint32(elf.PT_NULL))
	binary.LittleEndian.PutUint64(b[offEntry:], 0)
	im, err := Load("x", b, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	if got := binary.LittleEndian.Uint64(im.Bytes()[tDataOff:]); got != tTextOff {
		t.Errorf("unrelocated pointer = %#x, want link-time %#x", got, tTextOff)
	}
	if im.BuildID() != nil || im.EHFrameHdr() != nil || im.Entry() != 0 {
		t.Errorf("BuildID %x, EHFrameHdr %x, Entry %#x; want none", im.BuildID(), im.EHFrameHdr(), im.Entry())
	}
}

// TestTailNotRead truncates the file inside the tail: loading must still
// work (the loader does not read past the last PT_LOAD), and the section
// table reader must then report the damage.
func TestTailNotRead(t *testing.T) {
	b := buildTestImage()[:tTailOff+3]
	for _, ro := range []bool{false, true} {
		im, err := Open(writeTemp(t, b), &LoadOptions{ForceRead: ro})
		if err != nil {
			t.Fatalf("ForceRead=%v: %v", ro, err)
		}
		var fe *FormatError
		if _, err := im.Section(".text"); !errors.As(err, &fe) || fe.Field != "e_shoff" {
			t.Errorf("Section on truncated tail: err = %v, want FormatError on e_shoff", err)
		}
		im.Close()
	}
}

func BenchmarkOpen(b *testing.B) {
	p := writeTemp(b, buildTestImage())
	for _, ro := range []bool{false, true} {
		name := "mmap"
		if ro {
			name = "read"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			opts := &LoadOptions{ForceRead: ro}
			for b.Loop() {
				im, err := Open(p, opts)
				if err != nil {
					b.Fatal(err)
				}
				im.Close()
			}
		})
	}
}

func BenchmarkLookup(b *testing.B) {
	im, err := Load("x", buildTestImage(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer im.Close()
	pc := im.Entry()
	b.ReportAllocs()
	for b.Loop() {
		Lookup(pc)
	}
}

// TestConcurrentLoadLookup loads and closes images while other goroutines
// look PCs up (run with -race). Readers only use the Image value, not its
// memory: safe unload is not implemented.
func TestConcurrentLoadLookup(t *testing.T) {
	file := buildTestImage()
	done := make(chan struct{})
	pcs := make(chan uintptr, 64)
	var readers sync.WaitGroup
	for range 4 {
		readers.Go(func() {
			var pc uintptr
			for {
				select {
				case <-done:
					return
				case pc = <-pcs:
				default:
				}
				if im, err := Lookup(pc); err == nil && (pc < im.Base() || uint64(pc-im.Base()) >= im.Size()) {
					t.Errorf("Lookup(%#x) returned image at [%#x, +%#x)", pc, im.Base(), im.Size())
					return
				}
			}
		})
	}
	var writers sync.WaitGroup
	for range 2 {
		writers.Go(func() {
			for range 50 {
				im, err := Load("x", file, nil)
				if err != nil {
					t.Error(err)
					return
				}
				select {
				case pcs <- im.Entry():
				default:
				}
				im.Close()
			}
		})
	}
	writers.Wait()
	close(done)
	readers.Wait()
}

// TestOpenAllocations: a load and its Close allocate the Image and
// nothing else (no file object, no path copy, no plan, no closure, no
// registry entry: the image holds its own Ref; no copy of the registry:
// its rebuild, one allocation once every sixteen inserts with the entry
// image and this one registered, averages under one per load, and
// testing.AllocsPerRun rounds down).
func TestOpenAllocations(t *testing.T) {
	p := writeTemp(t, buildTestImage())
	first, err := Open(p, nil) // installs the entry image
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	loads := testing.AllocsPerRun(200, func() {
		im, err := Open(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		im.Close()
	})
	if loads > 1 {
		t.Errorf("Open+Close allocates %.1f times: want at most 1 (the Image)", loads)
	}
	t.Logf("Open+Close: %.1f allocations", loads)
}

// BenchmarkParseImage measures the loader's validation alone (parseFrom:
// the ELF and program headers, the dynamic table, the note and the
// relocations) of the test image in memory, warm: the user work of Open
// that the system calls do not include.
func BenchmarkParseImage(b *testing.B) {
	data := buildTestImage()
	a, pageSize := options(nil)
	var p plan
	b.ReportAllocs()
	for b.Loop() {
		src := memSource("x", data)
		if err := parseFrom(&src, a, pageSize, &p); err != nil {
			b.Fatal(err)
		}
	}
}

// tFarRelaOff is where headLayouts's second image has its relocation table:
// past the first KiB of the head, within its 4 KiB.
const tFarRelaOff = 0xc00

// headLayouts writes the test image (its tables within the first KiB)
// and a copy whose .rela.dyn lies at tFarRelaOff, and returns their paths.
func headLayouts(t *testing.T) (small, big string) {
	t.Helper()
	s := buildTestImage()
	b := bytes.Clone(s)
	copy(b[tFarRelaOff:], s[tRelaOff:tRelaOff+tRelaN*relaSize])
	putDyn(b, 0, elf.DT_RELA, tFarRelaOff)
	putPhSize(b, phR, tFarRelaOff+tRelaN*relaSize)
	return writeTemp(t, s), writeTemp(t, b)
}

// checkRelocated says whether the test image im, opened from path, has
// its relocations applied: each data word the base plus its addend.
func checkRelocated(im *Image, path string) error {
	for i, r := range tRelocs {
		if got, want := binary.LittleEndian.Uint64(im.mem[tDataOff+8*i:]), uint64(im.Base())+r.addend; got != want {
			return fmt.Errorf("%s: relocated word %d is %#x, want %#x", path, i, got, want)
		}
	}
	return nil
}

// TestOpenConcurrentLayouts: goroutines opening and closing images of two
// layouts at once (tables within the first KiB; .rela.dyn at 0xc00) share
// the pooled buffers and the learned first read: every load gets its own
// relocations applied (run with -race).
func TestOpenConcurrentLayouts(t *testing.T) {
	ps, pb := headLayouts(t)
	paths := []string{ps, pb}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				p := paths[(g+i/3)%2]
				im, err := Open(p, nil)
				if err != nil {
					errs <- err
					return
				}
				if err := checkRelocated(im, p); err != nil {
					errs <- err
				}
				im.Close()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestOpenHeadReads: an image whose relocation table lies past the first
// read of the head (here at 0xc00, past 1 KiB) loads as one whose tables
// fit (its relocations applied: the data words hold the base plus their
// addends), whether or not the previous loads needed as much of the head;
// and headFirst grows at once to what a load used and shrinks a step after
// headShrink loads in a row that used less (a load using all of it
// between them starts the count again).
func TestOpenHeadReads(t *testing.T) {
	ps, pb := headLayouts(t)
	saved := headFirst.n.Load()
	t.Cleanup(func() { headFirst.n.Store(saved); headFirst.below.Store(0) })
	headFirst.n.Store(headStep)
	headFirst.below.Store(0)
	open := func(p string) {
		t.Helper()
		im, err := Open(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer im.Close()
		if err := checkRelocated(im, p); err != nil {
			t.Fatal(err)
		}
	}
	open(ps)
	if n := firstRead(); n != headStep {
		t.Fatalf("after the small image, first read %d, want %d", n, headStep)
	}
	open(pb) // the table past the first read: a second read
	if n, want := firstRead(), int(alignUp(tFarRelaOff+tRelaN*relaSize, headStep)); n != want {
		t.Fatalf("after the large image, first read %d, want %d", n, want)
	}
	grown := int(alignUp(tFarRelaOff+tRelaN*relaSize, headStep))
	// A load that uses all of the first read ends a run of smaller ones:
	// the count of loads in a row starts again.
	for _, again := range []bool{true, false} {
		for range headShrink - 1 {
			open(ps)
		}
		if n := firstRead(); n != grown {
			t.Fatalf("after %d small images, first read %d, want %d still", headShrink-1, n, grown)
		}
		if again {
			open(pb)
		}
	}
	open(ps)
	if n, want := firstRead(), grown-headStep; n != want {
		t.Fatalf("after %d small images, first read %d, want %d", headShrink, n, want)
	}
}
