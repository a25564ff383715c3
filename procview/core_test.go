package procview_test

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/procview"
	"github.com/elfimage/elfimage/unwind"
)

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

func sampleRegs(base uint64) procview.UserRegs {
	var r procview.UserRegs
	v := reflect.ValueOf(&r).Elem()
	for i := 0; i < v.NumField(); i++ {
		v.Field(i).SetUint(base + uint64(i))
	}
	return r
}

// sampleCore has two threads, three file mappings, a segment dumped in
// part (p_filesz < p_memsz), two adjacent segments, a stack, an auxiliary
// vector, a siginfo and a note of another owner with NT_PRSTATUS's number.
func sampleCore() *testCore {
	return &testCore{
		PID: 4242, UID: 1234, Command: "prog", Args: "./prog -x",
		Threads: []procview.CoreThread{
			{TID: 4242, Signal: 11, Regs: sampleRegs(0x1000)},
			{TID: 4243, Regs: sampleRegs(0x2000)},
		},
		Files: []procview.CoreFile{
			{Start: 0x400000, End: 0x401000, Offset: 0, Path: "/usr/bin/prog"},
			{Start: 0x401000, End: 0x403000, Offset: 0x1000, Path: "/usr/bin/prog"},
			{Start: 0x7f0000000000, End: 0x7f0000002000, Offset: 0x2000, Path: "/lib/x86_64-linux-gnu/libc.so.6 (deleted)"},
		},
		PageSize: 4096,
		Auxv:     []procview.AuxEntry{{Type: 9, Value: 0x401020}, {Type: 33, Value: 0x7fff0000}, {Type: 6, Value: 4096}},
		Siginfo:  &procview.CoreSiginfo{Signo: 11, Code: 1, Addr: 0xdead},
		Segs: []testSeg{
			{Addr: 0x600000, Data: pattern(0x100, 1), Flags: elf.PF_R | elf.PF_W},
			{Addr: 0x400000, Size: 0x1000, Data: pattern(64, 2), Flags: elf.PF_R | elf.PF_X},
			{Addr: 0x600100, Data: pattern(0x100, 3), Flags: elf.PF_R | elf.PF_W},
			{Addr: 0x7ffe0000, Data: pattern(0x2000, 4), Flags: elf.PF_R | elf.PF_W},
		},
		Extra: []testNote{{"GNU", 1, make([]byte, 336)}},
	}
}

func wantSegments(tc *testCore, c *procview.Core) []procview.CoreSegment {
	// Offsets as writeCore lays the data out, in program header order.
	off := uint64(64+56*(1+len(tc.Segs))) + uint64(len(encodeNotes(tc.notes())))
	var out []procview.CoreSegment
	for _, s := range tc.Segs {
		size := s.Size
		if size == 0 {
			size = uint64(len(s.Data))
		}
		n := uint64(len(s.Data))
		out = append(out, procview.CoreSegment{Addr: s.Addr, Size: size, Offset: off, FileSize: n, Present: n, Flags: s.Flags})
		off += n
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	return out
}

func TestCoreDecode(t *testing.T) {
	tc := sampleCore()
	b := writeCore(tc)
	c, err := procview.NewCore(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if c.PID != 4242 || c.UID != 1234 || c.Command != "prog" || c.Args != "./prog -x" || c.PageSize != 4096 {
		t.Errorf("pid %d uid %d command %q args %q page size %d", c.PID, c.UID, c.Command, c.Args, c.PageSize)
	}
	if !reflect.DeepEqual(c.Threads, tc.Threads) {
		t.Errorf("threads\n got %+v\nwant %+v", c.Threads, tc.Threads)
	}
	if !reflect.DeepEqual(c.Files, tc.Files) {
		t.Errorf("files\n got %+v\nwant %+v", c.Files, tc.Files)
	}
	if !reflect.DeepEqual(c.Auxv, tc.Auxv) {
		t.Errorf("auxv %+v", c.Auxv)
	}
	if v, ok := c.Aux(33); !ok || v != 0x7fff0000 {
		t.Errorf("AT_SYSINFO_EHDR %#x %v", v, ok)
	}
	if !reflect.DeepEqual(c.Siginfo, tc.Siginfo) {
		t.Errorf("siginfo %+v", c.Siginfo)
	}
	if want := wantSegments(tc, c); !reflect.DeepEqual(c.Segments, want) {
		t.Errorf("segments\n got %+v\nwant %+v", c.Segments, want)
	}
	if len(c.Warnings()) != 0 {
		t.Errorf("warnings %v", c.Warnings())
	}
	compareWithDebugELF(t, b, c)

	// The registers in DWARF numbering.
	f := c.Threads[1].Frame()
	r := c.Threads[1].Regs
	if f.PC != r.Rip || f.SP != r.Rsp || !f.First {
		t.Errorf("frame pc %#x sp %#x first %v", f.PC, f.SP, f.First)
	}
	for reg, want := range map[arch.Reg]uint64{arch.X86_64_RAX: r.Rax, arch.X86_64_RDX: r.Rdx, arch.X86_64_RBP: r.Rbp, arch.X86_64_R15: r.R15, arch.X86_64_RA: r.Rip, arch.X86_64_RSI: r.Rsi} {
		if got, ok := f.Regs.Get(reg); !ok || got != want {
			t.Errorf("register %d: %#x %v, want %#x", reg, got, ok, want)
		}
	}
}

// compareWithDebugELF checks NewCore's segments against debug/elf's
// program headers of the same file and its memory against debug/elf's
// segment readers.
func compareWithDebugELF(t *testing.T, b []byte, c *procview.Core) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return // debug/elf is stricter in places (section headers)
	}
	var want []procview.CoreSegment
	var progs []*elf.Prog
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Memsz > 0 {
			want = append(want, procview.CoreSegment{Addr: p.Vaddr, Size: p.Memsz, Offset: p.Off, FileSize: p.Filesz, Flags: p.Flags})
			progs = append(progs, p)
		}
	}
	sort.SliceStable(progs, func(i, j int) bool { return progs[i].Vaddr < progs[j].Vaddr })
	sort.SliceStable(want, func(i, j int) bool { return want[i].Addr < want[j].Addr })
	got := append([]procview.CoreSegment(nil), c.Segments...)
	for i := range got {
		got[i].Present = 0
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("segments\n ours      %+v\n debug/elf %+v", got, want)
	}
	for i, p := range progs {
		s := c.Segments[i]
		for _, at := range []uint64{0, s.Present / 2, s.Present - min(s.Present, 16)} {
			n := min(16, s.Present-at)
			if n == 0 {
				continue
			}
			w := make([]byte, n)
			if k, _ := p.ReadAt(w, int64(at)); uint64(k) != n {
				continue
			}
			if addr := s.Addr + at; addr >= 1<<63 {
				// Beyond ReadAt's int64 offsets: ReadSized reads there.
				k := min(n, 8)
				var le [8]byte
				copy(le[:], w[:k])
				if v, err := c.ReadSized(addr, int(k)); err != nil || v != binary.LittleEndian.Uint64(le[:]) {
					t.Fatalf("memory at %#x: %#x %v, debug/elf %x", addr, v, err, w[:k])
				}
				continue
			}
			g := make([]byte, n)
			if _, err := c.ReadAt(g, int64(s.Addr+at)); err != nil || !bytes.Equal(g, w) {
				t.Fatalf("memory at %#x: %x %v, debug/elf %x", s.Addr+at, g, err, w)
			}
		}
	}
}

// TestCoreMappings: the address space of sampleCore is its segments, in
// address order, with /proc/PID/maps permissions from p_flags and the
// file and offset of the NT_FILE entry that covers each.
func TestCoreMappings(t *testing.T) {
	b := writeCore(sampleCore())
	c, err := procview.NewCore(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	want := []procview.Mapping{
		{Start: 0x400000, End: 0x401000, Perms: "r-xp", Path: "/usr/bin/prog"},
		{Start: 0x600000, End: 0x600100, Perms: "rw-p"},
		{Start: 0x600100, End: 0x600200, Perms: "rw-p"},
		{Start: 0x7ffe0000, End: 0x7ffe2000, Perms: "rw-p"},
	}
	if got := c.Mappings(); !reflect.DeepEqual(got, want) {
		t.Errorf("mappings\n got %+v\nwant %+v", got, want)
	}
	tc := sampleCore()
	tc.Files[0] = procview.CoreFile{Start: 0x3ff000, End: 0x401000, Offset: 0x3000, Path: "/usr/bin/prog"}
	tc.Auxv[1].Value = 0x400000 // the segment at 0x400000 is the vDSO
	b = writeCore(tc)
	if c, err = procview.NewCore(bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
	if m := c.Mappings()[0]; m.Path != "/usr/bin/prog" || m.Offset != 0x4000 {
		t.Errorf("a segment inside a file mapping: %+v, want offset 0x4000", m)
	}
	tc.Files = nil
	b = writeCore(tc)
	if c, err = procview.NewCore(bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
	if m := c.Mappings()[0]; m.Path != "[vdso]" {
		t.Errorf("the vDSO's segment: %+v", m)
	}
}

func TestCoreMemory(t *testing.T) {
	tc := sampleCore()
	b := writeCore(tc)
	c, err := procview.NewCore(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	// Across two adjacent segments.
	p := make([]byte, 0x20)
	if n, err := c.ReadAt(p, 0x6000f0); n != 0x20 || err != nil || !bytes.Equal(p[:0x10], tc.Segs[0].Data[0xf0:]) || !bytes.Equal(p[0x10:], tc.Segs[2].Data[:0x10]) {
		t.Errorf("read across segments: %d %v %x", n, err, p)
	}
	if v, err := c.ReadUint64(0x7ffe0008); err != nil || v != binary.LittleEndian.Uint64(tc.Segs[3].Data[8:]) {
		t.Errorf("ReadUint64: %#x %v", v, err)
	}
	if v, err := c.ReadSized(0x7ffe0009, 2); err != nil || v != uint64(binary.LittleEndian.Uint16(tc.Segs[3].Data[9:])) {
		t.Errorf("ReadSized: %#x %v", v, err)
	}
	// Beyond p_filesz: the bytes before, then an error naming the segment.
	p = make([]byte, 64)
	n, err := c.ReadAt(p, 0x400020)
	if n != 32 || !errors.Is(err, unwind.ErrMemory) || !errors.Is(err, procview.ErrNotDumped) || !strings.Contains(err.Error(), "[0x400000, 0x401000)") {
		t.Errorf("read past p_filesz: %d, %v", n, err)
	}
	// Outside every segment.
	if _, err := c.ReadUint64(0x500000); !errors.Is(err, unwind.ErrMemory) || errors.Is(err, procview.ErrNotDumped) {
		t.Errorf("unmapped read: %v", err)
	}
	if _, err := c.ReadUint64(0xffffffffffffffff); !errors.Is(err, unwind.ErrMemory) {
		t.Errorf("read at the top: %v", err)
	}
	if _, err := c.ReadAt(p, -1); !errors.Is(err, unwind.ErrMemory) {
		t.Errorf("negative offset: %v", err)
	}
}

// TestCoreTruncated: a core cut inside its last segment decodes, with a
// warning; the lost bytes fail to read with ErrNotDumped and the bytes
// before them read. Cut inside the notes, it fails naming the
// truncation.
func TestCoreTruncated(t *testing.T) {
	tc := sampleCore()
	b := writeCore(tc)
	cut := len(b) - 0x1000
	c, err := procview.NewCore(bytes.NewReader(b[:cut]), int64(cut))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings()) != 1 || !strings.Contains(c.Warnings()[0].Error(), "truncated") {
		t.Errorf("warnings %v", c.Warnings())
	}
	s := c.Segment(0x7ffe0000)
	if s == nil || s.Present != 0x1000 || s.FileSize != 0x2000 {
		t.Fatalf("stack segment %+v", s)
	}
	if _, err := c.ReadUint64(0x7ffe0ff8); err != nil {
		t.Errorf("before the cut: %v", err)
	}
	if _, err := c.ReadUint64(0x7ffe1000); !errors.Is(err, procview.ErrNotDumped) || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("after the cut: %v", err)
	}
	notesEnd := 64 + 56*(1+len(tc.Segs)) + len(encodeNotes(tc.notes()))
	for _, n := range []int{0, 10, 64, 100, 64 + 56*(1+len(tc.Segs)) + 50, notesEnd - 1} {
		_, err := procview.NewCore(bytes.NewReader(b[:n]), int64(n))
		var fe *dwarf.FormatError
		if !errors.As(err, &fe) {
			t.Errorf("cut at %d: %v, want a FormatError", n, err)
		} else if n > 64 && !strings.Contains(err.Error(), "truncated") {
			t.Errorf("cut at %d: %v, want it to say truncated", n, err)
		}
	}
}

// TestCoreMalformed: each defect gives a *dwarf.FormatError naming the
// field, with a message that says what is wrong.
func TestCoreMalformed(t *testing.T) {
	le := binary.LittleEndian
	good := writeCore(sampleCore())
	patch := func(off int, v ...byte) []byte {
		b := append([]byte(nil), good...)
		copy(b[off:], v)
		return b
	}
	u16 := func(v uint16) []byte { return le.AppendUint16(nil, v) }
	u64 := func(v uint64) []byte { return le.AppendUint64(nil, v) }
	with := func(f func(*testCore)) []byte {
		tc := sampleCore()
		f(tc)
		return writeCore(tc)
	}
	fileNote := func(count, page uint64, rest ...byte) testNote {
		d := append(le.AppendUint64(le.AppendUint64(nil, count), page), rest...)
		return testNote{"CORE", 0x46494c45, d}
	}
	triple := append(append(u64(0x1000), u64(0x2000)...), u64(0)...)
	cases := []struct {
		name, field, msg string
		b                []byte
	}{
		{"not ELF", "e_ident", "not an ELF file", patch(0, 'x')},
		{"ELF32", "e_ident", "ELF64", patch(4, 1)},
		{"big-endian", "e_ident", "little-endian", patch(5, 2)},
		{"executable", "e_type", "not a core file", patch(16, u16(uint16(elf.ET_EXEC))...)},
		{"risc-v", "e_machine", "only x86-64 and AArch64", patch(18, u16(uint16(elf.EM_RISCV))...)},
		{"x86-64 prstatus in an aarch64 core", "n_descsz", "want 392", patch(18, u16(uint16(elf.EM_AARCH64))...)},
		{"phentsize", "e_phentsize", "want 56", patch(54, u16(32)...)},
		{"phnum", "e_phoff", "truncated", patch(56, u16(5000)...)},
		{"phoff", "e_phoff", "do not fit", patch(32, u64(1<<40)...)},
		{"PN_XNUM, no section header", "e_shoff", "beyond the end", func() []byte { b := patch(40, u64(1<<40)...); copy(b[56:], u16(0xffff)); return b }()},
		{"PT_NOTE beyond the file", "p_offset", "truncated", patch(64+8, u64(1<<40)...)},
		{"filesz > memsz", "p_filesz", "more than p_memsz", with(func(c *testCore) { c.Segs[0].Size = 0x10 })},
		{"overlap", "p_vaddr", "overlap", with(func(c *testCore) { c.Segs[2].Addr = 0x6000f0 })},
		{"wraps", "p_memsz", "wraps", with(func(c *testCore) { c.Segs[0].Addr, c.Segs[0].Size = 1<<64-0x10, 0x100 })},
		{"note past its segment", "n_descsz", "past the end", patch(64+32, u64(100)...)},
		{"prstatus size", "n_descsz", "elf_prstatus", with(func(c *testCore) { c.Extra = []testNote{{"CORE", 1, make([]byte, 144)}} })},
		{"prstatus pid", "pr_pid", "thread id", with(func(c *testCore) { c.Threads[1].TID = -1 })},
		{"prpsinfo size", "n_descsz", "elf_prpsinfo", with(func(c *testCore) { c.NoPSInfo = true; c.Extra = []testNote{{"CORE", 3, make([]byte, 100)}} })},
		{"auxv size", "n_descsz", "16-byte", with(func(c *testCore) { c.Auxv = nil; c.Extra = []testNote{{"CORE", 6, make([]byte, 20)}} })},
		{"NT_FILE short", "count", "too short", with(func(c *testCore) { c.Files = nil; c.Extra = []testNote{{"CORE", 0x46494c45, make([]byte, 8)}} })},
		{"NT_FILE count", "count", "has room for", with(func(c *testCore) { c.Files = nil; c.Extra = []testNote{fileNote(1<<40, 4096, triple...)} })},
		{"NT_FILE page size", "page_size", "power of two", with(func(c *testCore) { c.Files = nil; c.Extra = []testNote{fileNote(1, 3000, append(triple, 'a', 0)...)} })},
		{"NT_FILE name", "filename", "NUL-terminated", with(func(c *testCore) { c.Files = nil; c.Extra = []testNote{fileNote(1, 4096, append(triple, 'a', 'b')...)} })},
		{"NT_FILE range", "end", "before start", with(func(c *testCore) { c.Files[1].End = 0x1000 })},
		{"no threads", "NT_PRSTATUS", "no threads", with(func(c *testCore) { c.Threads = nil })},
	}
	for _, c := range cases {
		_, err := procview.NewCore(bytes.NewReader(c.b), int64(len(c.b)))
		var fe *dwarf.FormatError
		if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v; want a FormatError on %s saying %q", c.name, err, c.field, c.msg)
		}
	}
}

// TestCorePNXNUM: with e_phnum PN_XNUM the count comes from section
// header 0's sh_info (gABI "Extended Program Header Numbering").
func TestCorePNXNUM(t *testing.T) {
	le := binary.LittleEndian
	tc := sampleCore()
	b := writeCore(tc)
	phnum := le.Uint16(b[56:])
	sh := make([]byte, 64)
	le.PutUint32(sh[44:], uint32(phnum))
	le.PutUint64(b[40:], uint64(len(b)))
	le.PutUint16(b[56:], 0xffff)
	b = append(b, sh...)
	c, err := procview.NewCore(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if want := wantSegments(tc, c); !reflect.DeepEqual(c.Segments, want) || len(c.Threads) != 2 {
		t.Errorf("segments %+v, %d threads", c.Segments, len(c.Threads))
	}
}

// TestCoreViewSynthetic: a View from a core whose files do not exist has
// no file modules and says why; a core without NT_FILE refuses --exe.
func TestCoreViewSynthetic(t *testing.T) {
	tc := sampleCore()
	b := writeCore(tc)
	c, err := procview.NewCore(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	threads, v, err := procview.CoreStacks(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if len(v.Modules()) != 0 || len(v.Warnings()) == 0 {
		t.Errorf("modules %+v, warnings %v", v.Modules(), v.Warnings())
	}
	// The registers point nowhere: one frame each, outside every module.
	if len(threads) != 2 || threads[0].TID != 4242 || threads[0].Name != "prog" || threads[1].Name != "" || len(threads[0].Frames) != 1 || threads[0].Frames[0].PC != tc.Threads[0].Regs.Rip {
		t.Errorf("threads %+v", threads)
	}
	// A hostile core may name a FIFO or a device: never opened.
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	tc.Files = []procview.CoreFile{{Start: 0x400000, End: 0x401000, Path: fifo}, {Start: 0x401000, End: 0x402000, Path: "/dev/zero"}}
	b = writeCore(tc)
	if c, err = procview.NewCore(bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
	v2, err := procview.NewCoreView(c, "")
	if err != nil {
		t.Fatal(err)
	}
	if ws := fmt.Sprint(v2.Warnings()); len(v2.Modules()) != 0 || strings.Count(ws, "not a regular file") != 2 {
		t.Errorf("modules %+v, warnings %s", v2.Modules(), ws)
	}
	v2.Close()

	tc.Files = nil
	b = writeCore(tc)
	if c, err = procview.NewCore(bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
	// Without NT_FILE (qemu-user's cores) the executable is placed at the
	// bias AT_ENTRY gives (this core has no AT_PHDR), and the dynamic
	// linker's list, not in this core, is a warning.
	v3, err := procview.NewCoreView(c, "/bin/true")
	if err != nil {
		t.Fatalf("--exe without NT_FILE: %v", err)
	}
	ef, err := elf.Open("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	wantBias := tc.Auxv[0].Value - ef.Entry
	ef.Close()
	found := false
	for _, m := range v3.Modules() {
		found = found || m.Name == "/bin/true" && m.Bias == wantBias && m.Kind == procview.ModuleFile
	}
	if ws := fmt.Sprint(v3.Warnings()); !found || !strings.Contains(ws, "dynamic linker's list") {
		t.Errorf("--exe without NT_FILE: modules %+v (want /bin/true at bias %#x), warnings %s", v3.Modules(), wantBias, ws)
	}
	v3.Close()
	if _, err := procview.NewCoreView(c, "/nonexistent/exe"); err == nil || !strings.Contains(err.Error(), "NT_FILE") {
		t.Errorf("--exe without NT_FILE, no such file: %v", err)
	}
}
