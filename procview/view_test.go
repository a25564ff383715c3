package procview_test

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/procview"

	"github.com/elfimage/elfimage/internal/qemutest"
	"github.com/elfimage/elfimage/internal/tooltest"
)

const mapsSample = `00400000-0060a000 r-xp 00000000 08:01 1234                               /usr/bin/prog
0060a000-00821000 r--p 0020a000 08:01 1234                               /usr/bin/prog
7f0000000000-7f0000001000 rw-p 00000000 00:00 0 
7ffd1e9f3000-7ffd1e9f5000 r-xp 00000000 00:00 0                          [vdso]
7f1000000000-7f1000010000 r-xp 00002000 fd:02 99                         /tmp/a file (deleted)
`

func TestParseMaps(t *testing.T) {
	ms, err := procview.ParseMaps(strings.NewReader(mapsSample))
	if err != nil {
		t.Fatal(err)
	}
	want := []procview.Mapping{
		{Start: 0x400000, End: 0x60a000, Perms: "r-xp", Major: 8, Minor: 1, Inode: 1234, Path: "/usr/bin/prog"},
		{Start: 0x60a000, End: 0x821000, Perms: "r--p", Offset: 0x20a000, Major: 8, Minor: 1, Inode: 1234, Path: "/usr/bin/prog"},
		{Start: 0x7f0000000000, End: 0x7f0000001000, Perms: "rw-p"},
		{Start: 0x7ffd1e9f3000, End: 0x7ffd1e9f5000, Perms: "r-xp", Path: "[vdso]"},
		{Start: 0x7f1000000000, End: 0x7f1000010000, Perms: "r-xp", Offset: 0x2000, Major: 0xfd, Minor: 2, Inode: 99, Path: "/tmp/a file (deleted)"},
	}
	if !reflect.DeepEqual(ms, want) {
		t.Errorf("got  %+v\nwant %+v", ms, want)
	}
	for _, bad := range []string{"zz-1 r-xp 0 0:0 0\n", "1-2 r-xp 0 00 0\n", "2-1 r-xp 0 0:0 0\n", "1-2 r-xp 0 0:0 x\n"} {
		var fe *dwarf.FormatError
		if _, err := procview.ParseMaps(strings.NewReader(mapsSample + bad)); !errors.As(err, &fe) || fe.Offset != uint64(len(mapsSample)) {
			t.Errorf("%q: %v, want a FormatError at offset %d", bad, err, len(mapsSample))
		}
	}
	// The real file parses, and agrees with itself on the executable.
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		tooltest.Skip(t, "no /proc/self/maps: %v", err)
	}
	defer f.Close()
	ms, err = procview.ParseMaps(f)
	if err != nil || len(ms) == 0 {
		t.Fatalf("/proc/self/maps: %d mappings, %v", len(ms), err)
	}
}

// TestProgHeaders compares ProgHeaders with debug/elf on the test binary
// and checks LoadBias on its mappings: the run-time address of a function
// minus the bias is the address debug/elf's symbol table gives it.
func TestProgHeaders(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ph, err := procview.ProgHeaders(f)
	if err != nil {
		t.Fatal(err)
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(ph) != len(ef.Progs) {
		t.Fatalf("%d program headers, debug/elf %d", len(ph), len(ef.Progs))
	}
	for i, p := range ef.Progs {
		want := procview.ProgHeader{Type: uint32(p.Type), Flags: uint32(p.Flags), Offset: p.Off, Vaddr: p.Vaddr, Filesz: p.Filesz, Memsz: p.Memsz, Align: p.Align}
		if ph[i] != want {
			t.Errorf("phdr %d: %+v, want %+v", i, ph[i], want)
		}
	}
	// A PIE-like case by hand: a segment at p_vaddr 0x1234 (offset 0x234)
	// mapped at 0x7f0000001000 from file offset 0: bias 0x7f0000000000.
	hand := []procview.ProgHeader{{Type: 1, Flags: 5, Offset: 0x234, Vaddr: 0x1234, Filesz: 0x5000, Memsz: 0x5000}}
	if b, ok := procview.LoadBias(hand, 0x7f0000001000, 0); !ok || b != 0x7f0000000000 {
		t.Errorf("LoadBias = %#x, %v; want 0x7f0000000000", b, ok)
	}
	if _, ok := procview.LoadBias(hand, 0x7f0000001000, 0x9000); ok {
		t.Errorf("LoadBias outside every segment succeeded")
	}
}

// requireAmd64Stacks skips t on a machine other than amd64: thread
// stacks (Stacks, and the stacks of cores) are implemented for x86-64
// only, by design (see the package documentation).
func requireAmd64Stacks(t *testing.T) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skipf("procview: the thread stacks of a live process are read on amd64 only (ptrace of the thread's registers); this test binary is %s (under qemu-user there is no ptrace of emulated processes); the AArch64 core tests cover that architecture", runtime.GOARCH)
	}
}

func selfView(t testing.TB) *procview.View {
	t.Helper()
	v, err := procview.Open(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// TestOwnProcess: the view of the test process finds this function in the
// test binary and names it as the Go runtime does; the vDSO is a module
// whose symbols match what debug/elf reads from its memory image.
func TestOwnProcess(t *testing.T) {
	v := selfView(t)
	exe, _ := os.Executable()
	pc := uint64(reflect.ValueOf(TestOwnProcess).Pointer())
	m, err := v.Lookup(pc)
	if err != nil {
		t.Fatalf("Lookup(%#x): %v\nmodules %+v", pc, err, v.Modules())
	}
	if m.Name != exe || m.Kind != procview.ModuleFile || !m.Contains(pc) {
		t.Errorf("module %+v, want %s", m, exe)
	}
	// go test links without DWARF (-w) and, with -s, without .symtab.
	ef, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	hasSymtab, hasFrame := ef.Section(".symtab") != nil, ef.Section(".debug_frame") != nil
	ef.Close()
	fr, _, err := v.Symbolize(pc, nil)
	if hasSymtab && (err != nil || len(fr) == 0 || fr[len(fr)-1].Function != runtime.FuncForPC(uintptr(pc)).Name()) {
		t.Errorf("Symbolize(%#x) = %+v, %v; want %s", pc, fr, err, runtime.FuncForPC(uintptr(pc)).Name())
	}
	if _, err := v.Lookup(8); !errors.Is(err, procview.ErrNoModule) {
		t.Errorf("Lookup(8): %v, want ErrNoModule", err)
	}
	var fde frame.ParsedFDE
	if err := v.FindFDE(pc, &fde); hasFrame && (err != nil || !fde.Contains(pc)) {
		t.Errorf("FindFDE(%#x): %v, FDE [%#x, +%#x)", pc, err, fde.Start, fde.Size)
	}
	if err := v.FindFDE(8, &fde); !errors.Is(err, procview.ErrNoModule) || !errors.Is(err, frame.ErrNoFDE) {
		t.Errorf("FindFDE(8): %v, want ErrNoModule and ErrNoFDE", err)
	}
	if _, _, err := procview.Stacks(os.Getpid(), nil); !errors.Is(err, procview.ErrSelf) {
		t.Errorf("Stacks(self): %v, want ErrSelf", err)
	}

	// The vDSO.
	var vdso *procview.Module
	for _, m := range v.Modules() {
		if m.Kind == procview.ModuleVDSO {
			vdso = &m
		}
	}
	if vdso == nil {
		noVDSO(t)
	}
	img := make([]byte, 0x4000)
	n, _ := v.Mem.ReadAt(img, int64(vdso.Start&^0xfff))
	ef, err = elf.NewFile(bytes.NewReader(img[:n]))
	if err != nil {
		t.Fatalf("vDSO: %v", err)
	}
	syms, err := ef.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Value == 0 {
			continue
		}
		addr := s.Value + vdso.Bias
		fr, m, err := v.Symbolize(addr, nil)
		if err != nil || m.Kind != procview.ModuleVDSO || len(fr) == 0 || !strings.Contains(fr[len(fr)-1].Function, strings.TrimPrefix(s.Name, "__vdso_")) {
			t.Errorf("vDSO %s at %#x: %+v, %v", s.Name, addr, fr, err)
		}
		// The vDSO's .eh_frame covers its functions.
		if err := v.FindFDE(addr, &fde); err != nil || !fde.Contains(addr) {
			t.Errorf("vDSO %s at %#x: FindFDE: %v", s.Name, addr, err)
		}
		found++
	}
	if found == 0 {
		t.Errorf("no function in the vDSO")
	}
}

// TestFindFDEAllocs: module lookup and FDE lookup (the vDSO's .eh_frame)
// allocate nothing once the module is open.
func TestFindFDEAllocs(t *testing.T) {
	v := selfView(t)
	var pc uint64
	for _, m := range v.Modules() {
		if m.Kind == procview.ModuleVDSO {
			pc = m.Start + 0x100 // bisected to the FDE below, or a miss
		}
	}
	if pc == 0 {
		noVDSO(t)
	}
	var fde frame.ParsedFDE
	for end := pc + 0x1000; pc < end; pc++ {
		if v.FindFDE(pc, &fde) == nil {
			break
		}
	}
	if err := v.FindFDE(pc, &fde); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		v.Lookup(pc)
		v.FindFDE(pc, &fde)
	}); n != 0 {
		t.Errorf("%v allocations per lookup", n)
	}
}

// fakeMem is process memory at base for ReadJITList.
type fakeMem struct {
	base uint64
	data []byte
}

func (m fakeMem) ReadAt(p []byte, off int64) (int, error) {
	o := uint64(off) - m.base
	if uint64(off) < m.base || o >= uint64(len(m.data)) {
		return 0, fmt.Errorf("unmapped %#x", off)
	}
	n := copy(p, m.data[o:])
	if n < len(p) {
		return n, fmt.Errorf("short")
	}
	return n, nil
}

// jitMem lays out a descriptor at base and entries after it.
func jitMem(base uint64, version uint32, entries [][4]uint64) []byte {
	le := binary.LittleEndian
	b := le.AppendUint32(nil, version)
	b = le.AppendUint32(b, 0)
	b = le.AppendUint64(b, 0)
	first := uint64(0)
	if len(entries) > 0 {
		first = base + 24
	}
	b = le.AppendUint64(b, first)
	for _, e := range entries {
		for _, w := range e {
			b = le.AppendUint64(b, w)
		}
	}
	return b
}

func TestReadJITList(t *testing.T) {
	const base = 0x10000
	e0, e1 := uint64(base+24), uint64(base+56)
	good := jitMem(base, 1, [][4]uint64{{e1, 0, 0x7000, 100}, {0, e0, 0x8000, 200}})
	got, err := procview.ReadJITList(fakeMem{base, good}, base)
	want := []procview.JITEntry{{e0, 0x7000, 100}, {e1, 0x8000, 200}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, %v; want %+v", got, err, want)
	}
	for name, c := range map[string]struct {
		mem   []byte
		field string
		n     int
	}{
		"version": {jitMem(base, 2, nil), "version", 0},
		"cycle":   {jitMem(base, 1, [][4]uint64{{e1, 0, 1, 1}, {e0, e0, 2, 2}}), "next_entry", 2},
		"prev":    {jitMem(base, 1, [][4]uint64{{e1, 0, 1, 1}, {0, 5, 2, 2}}), "prev_entry", 1},
		"self":    {jitMem(base, 1, [][4]uint64{{e0, 0, 1, 1}}), "next_entry", 1},
	} {
		got, err := procview.ReadJITList(fakeMem{base, c.mem}, base)
		var fe *dwarf.FormatError
		if !errors.As(err, &fe) || fe.Field != c.field || len(got) != c.n {
			t.Errorf("%s: %d entries, %v; want %d and a FormatError on %s", name, len(got), err, c.n, c.field)
		}
	}
	if _, err := procview.ReadJITList(fakeMem{base, good[:30]}, base); err == nil {
		t.Errorf("truncated list: no error")
	}
}

// FuzzParseMaps parses arbitrary text as /proc/PID/maps: ranges are not
// reversed, errors are FormatErrors, and what parses, written back in the
// kernel's format, parses the same.
func FuzzParseMaps(f *testing.F) {
	f.Add([]byte(mapsSample))
	if b, err := os.ReadFile("/proc/self/maps"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := procview.ParseMaps(bytes.NewReader(b))
		for _, m := range ms {
			if m.End < m.Start {
				t.Fatalf("range %#x-%#x", m.Start, m.End)
			}
		}
		var fe *dwarf.FormatError
		if err != nil && !errors.As(err, &fe) {
			t.Fatalf("error %v is not a FormatError", err)
		}
		if err != nil {
			return
		}
		// Round trip: the mappings written as the kernel writes them
		// (proc(5)) parse to the same mappings.
		var text bytes.Buffer
		for _, m := range ms {
			fmt.Fprintf(&text, "%x-%x %s %08x %02x:%02x %d", m.Start, m.End, m.Perms, m.Offset, m.Major, m.Minor, m.Inode)
			if m.Path != "" {
				fmt.Fprintf(&text, "                          %s", m.Path)
			}
			text.WriteByte('\n')
		}
		again, err := procview.ParseMaps(&text)
		if err != nil || !reflect.DeepEqual(again, ms) {
			t.Fatalf("mappings %+v written out parse as %+v, %v", ms, again, err)
		}
	})
}

// FuzzProgHeaders reads arbitrary bytes as an ELF file's program
// headers and checks them against Go's debug/elf, an independent reader of
// the same format: wherever debug/elf reads a little-endian ELF64 x86-64
// file, ProgHeaders must succeed with the same headers (up to
// MaxProgramHeaders); its errors are *dwarf.FormatError; and LoadBias,
// when it answers, gives a bias that maps start back to the link-time
// address of offset off in a PT_LOAD segment holding off.
func FuzzProgHeaders(f *testing.F) {
	if exe, err := os.Executable(); err == nil {
		if b, err := os.ReadFile(exe); err == nil {
			f.Add(b[:min(len(b), 4096)])
			// The same headers without section headers, which debug/elf
			// then reads too.
			h := append([]byte(nil), b[:min(len(b), 4096)]...)
			if len(h) >= 64 {
				clear(h[0x28:0x30]) // e_shoff
				clear(h[0x3c:0x40]) // e_shnum, e_shstrndx
				f.Add(h)
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ph, err := procview.ProgHeaders(bytes.NewReader(b))
		var fe *dwarf.FormatError
		if err != nil && !errors.As(err, &fe) {
			t.Fatalf("error %v is not a FormatError", err)
		}
		if len(ph) > procview.MaxProgramHeaders {
			t.Fatalf("%d headers", len(ph))
		}
		if gf, gerr := elf.NewFile(bytes.NewReader(b)); gerr == nil && gf.Class == elf.ELFCLASS64 && gf.Data == elf.ELFDATA2LSB &&
			gf.Machine == elf.EM_X86_64 && len(gf.Progs) <= procview.MaxProgramHeaders {
			if err != nil {
				t.Fatalf("ProgHeaders: %v; debug/elf reads %d program headers", err, len(gf.Progs))
			}
			if len(ph) != len(gf.Progs) {
				t.Fatalf("%d program headers; debug/elf reads %d", len(ph), len(gf.Progs))
			}
			for i, g := range gf.Progs {
				want := procview.ProgHeader{Type: uint32(g.Type), Flags: uint32(g.Flags), Offset: g.Off, Vaddr: g.Vaddr,
					Filesz: g.Filesz, Memsz: g.Memsz, Align: g.Align}
				if ph[i] != want {
					t.Fatalf("program header %d: %+v; debug/elf %+v", i, ph[i], want)
				}
			}
		}
		for _, p := range ph {
			for _, off := range []uint64{p.Offset, p.Offset + p.Filesz/2} {
				bias, ok := procview.LoadBias(ph, 0x400000+off&^0xfff, off&^0xfff)
				if !ok {
					continue
				}
				held := false
				for _, q := range ph {
					lo := q.Offset &^ 0xfff
					if q.Type == uint32(elf.PT_LOAD) && off&^0xfff >= lo && off&^0xfff-lo < q.Filesz+(q.Offset-lo) &&
						bias == 0x400000+off&^0xfff-off&^0xfff-(q.Vaddr-q.Offset) {
						held = true
					}
				}
				if !held {
					t.Fatalf("LoadBias(%#x) = %#x: no PT_LOAD holds the offset with that bias", off&^0xfff, bias)
				}
			}
		}
	})
}

// FuzzReadJITList reads arbitrary memory as a GDB JIT descriptor and its
// list, and compares with refJITList, which walks the same bytes by the
// rules of the GDB manual ("JIT Declarations") directly: the same entries,
// an error exactly when the reference meets one, and a *dwarf.FormatError
// exactly for malformed data (not for unreadable memory).
func FuzzReadJITList(f *testing.F) {
	const base = 0x10000
	e0, e1 := uint64(base+24), uint64(base+56)
	f.Add(jitMem(base, 1, [][4]uint64{{e1, 0, 0x7000, 100}, {0, e0, 0x8000, 200}}))
	f.Add(jitMem(base, 1, [][4]uint64{{e1, 0, 1, 1}, {e0, e0, 2, 2}}))
	f.Add(jitMem(base, 1, [][4]uint64{{e0, 0, 1, 1}}))
	f.Add(jitMem(base, 2, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := procview.ReadJITList(fakeMem{base, b}, base)
		if len(got) > len(b) {
			t.Fatalf("%d entries from %d bytes", len(got), len(b))
		}
		want, malformed, werr := refJITList(b, base)
		if (err != nil) != werr || !reflect.DeepEqual(got, want) {
			t.Fatalf("ReadJITList = %+v, %v; the reference reads %+v (error %v)", got, err, want, werr)
		}
		var fe *dwarf.FormatError
		if err != nil && errors.As(err, &fe) != malformed {
			t.Fatalf("ReadJITList error %v: FormatError %v, want %v", err, !malformed, malformed)
		}
	})
}

// refJITList walks the descriptor at base of mem (the bytes at base) and
// its entries. It returns the entries read, whether it stopped at
// malformed data (version not 1, prev_entry not the previous entry, a
// cycle, more than MaxJITEntries) and whether it stopped at any error
// (also: an address outside mem).
func refJITList(mem []byte, base uint64) (out []procview.JITEntry, malformed, failed bool) {
	word := func(a uint64) (uint64, bool) {
		if a < base || a-base > uint64(len(mem)) || uint64(len(mem))-(a-base) < 8 {
			return 0, false
		}
		return binary.LittleEndian.Uint64(mem[a-base:]), true
	}
	if len(mem) < 24 {
		return nil, false, true
	}
	if binary.LittleEndian.Uint32(mem) != 1 {
		return nil, true, true
	}
	e, _ := word(base + 16)
	var prev uint64
	for e != 0 {
		for _, x := range out {
			if x.Addr == e {
				return out, true, true
			}
		}
		if len(out) == procview.MaxJITEntries {
			return out, true, true
		}
		next, ok1 := word(e)
		p, ok2 := word(e + 8)
		addr, ok3 := word(e + 16)
		size, ok4 := word(e + 24)
		if !ok1 || !ok2 || !ok3 || !ok4 || e+32 < e {
			return out, false, true
		}
		if p != prev {
			return out, true, true
		}
		out = append(out, procview.JITEntry{Addr: e, SymfileAddr: addr, SymfileSize: size})
		prev, e = e, next
	}
	return out, false, false
}

// noVDSO ends a test that needs the process's vDSO: qemu-user (7.2)
// maps none for its guests, which is the one place a Linux process here
// has none, so the test skips there and fails anywhere else when CI is set.
func noVDSO(t *testing.T) {
	t.Helper()
	if why := qemutest.Emulated(); why != "" {
		t.Skipf("no vDSO in this process: %s, and qemu-user maps none for its guests", why)
	}
	tooltest.Skip(t, "no vDSO in this process")
}
