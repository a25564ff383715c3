package scheme

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/native"
	"golang.org/x/sys/unix"
)

// flatImage is a test-only loader that lays a Module out in one anonymous
// mapping (text, then rodata and data on their own pages), resolves its
// relocations itself and applies W^X protections. It lets the runtime be
// tested independently of the library's linker and loader.
type flatImage struct {
	mem  []byte
	syms map[string]uintptr
}

func (f *flatImage) base() uintptr { return uintptr(unsafe.Pointer(&f.mem[0])) }

func (f *flatImage) inImage(addr, n uint64) bool {
	b := uint64(f.base())
	return addr >= b && n <= uint64(len(f.mem)) && addr-b <= uint64(len(f.mem))-n
}

func loadFlat(t testing.TB, m *elfimage.Module) *flatImage {
	t.Helper()
	const page = 4096
	alignUp := func(v, a int) int { return (v + a - 1) &^ (a - 1) }
	offs := map[string]int{}
	n := 0
	for _, p := range m.Procs {
		n = alignUp(n, 16)
		offs[p.Name] = n
		n += len(p.Code)
	}
	textEnd := alignUp(n, page)
	n = textEnd
	for _, d := range m.ROData {
		n = alignUp(n, max(d.Align, 1))
		offs[d.Name] = n
		n += len(d.Bytes)
	}
	n = alignUp(n, page)
	dataStart := n
	for _, d := range m.Data {
		n = alignUp(n, 8)
		offs[d.Name] = n
		n += len(d.Bytes)
	}
	size := alignUp(max(n, dataStart+1), page)
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	f := &flatImage{mem: mem, syms: map[string]uintptr{}}
	for name, o := range offs {
		f.syms[name] = f.base() + uintptr(o)
	}
	apply := func(at int, relocs []elfimage.Reloc) {
		for _, r := range relocs {
			s, ok := f.syms[r.Symbol]
			if !ok {
				t.Fatalf("undefined symbol %s", r.Symbol)
			}
			p := f.base() + uintptr(at) + uintptr(r.Offset)
			switch r.Type {
			case elfimage.RelocPC32:
				v := int64(s) + r.Addend - int64(p)
				if v != int64(int32(v)) {
					t.Fatalf("PC32 to %s out of range", r.Symbol)
				}
				binary.LittleEndian.PutUint32(mem[at+int(r.Offset):], uint32(int32(v)))
			case elfimage.RelocAbs64:
				binary.LittleEndian.PutUint64(mem[at+int(r.Offset):], uint64(int64(s)+r.Addend))
			case elfimage.RelocAArch64Call26, elfimage.RelocAArch64Jump26, elfimage.RelocAArch64AdrPage21, elfimage.RelocAArch64AddLo12:
				w := binary.LittleEndian.Uint32(mem[at+int(r.Offset):])
				binary.LittleEndian.PutUint32(mem[at+int(r.Offset):], flatA64(t, w, r.Type, int64(s)+r.Addend, int64(p)))
			default:
				t.Fatalf("reloc type %d", r.Type)
			}
		}
	}
	for _, p := range m.Procs {
		copy(mem[offs[p.Name]:], p.Code)
		apply(offs[p.Name], p.Relocs)
	}
	for _, d := range append(append([]*elfimage.Datum{}, m.ROData...), m.Data...) {
		copy(mem[offs[d.Name]:], d.Bytes)
		apply(offs[d.Name], d.Relocs)
	}
	// The code was written as data: make instruction fetches see it
	// (AArch64 hardware; a no-op on x86-64).
	native.SyncInstructionCache(f.base(), textEnd)
	if err := unix.Mprotect(mem[:textEnd], unix.PROT_READ|unix.PROT_EXEC); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mprotect(mem[textEnd:dataStart], unix.PROT_READ); err != nil {
		t.Fatal(err)
	}
	return f
}

// runFlat compiles src, loads it with loadFlat and runs it.
func runFlat(t testing.TB, src string, opts RunOptions) (*Result, *flatImage, error) {
	t.Helper()
	m, err := Compile("prog.scm", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	f := loadFlat(t, m)
	res, err := runEntry(f.syms[symStart], opts, f.inImage)
	return res, f, err
}

// flatA64 returns the AArch64 instruction w with the field of relocation
// type typ set for target v at address p (AAELF64 §5.7; written apart
// from the linker's, as an independent check of it).
func flatA64(t testing.TB, w uint32, typ elfimage.RelocType, v, p int64) uint32 {
	switch typ {
	case elfimage.RelocAArch64Call26, elfimage.RelocAArch64Jump26:
		d := (v - p) / 4
		if d < -(1<<25) || d >= 1<<25 {
			t.Fatalf("branch out of range")
		}
		return w | uint32(d)&(1<<26-1)
	case elfimage.RelocAArch64AdrPage21:
		pages := v>>12 - p>>12
		return w | uint32(pages&3)<<29 | uint32(pages>>2&(1<<19-1))<<5
	default: // RelocAArch64AddLo12
		return w | uint32(v&0xfff)<<10
	}
}
