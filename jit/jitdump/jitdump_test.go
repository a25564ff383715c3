package jitdump

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/frame"

	"github.com/elfimage/elfimage/internal/tooltest"
)

// fakeClock returns 1000, 1001, ...
func fakeClock() func() uint64 {
	var mu sync.Mutex
	t := uint64(999)
	return func() uint64 { mu.Lock(); defer mu.Unlock(); t++; return t }
}

// fib is a frame-pointer function: push rbp; mov rbp,rsp; ...; pop rbp; ret.
var fibCode = []byte{
	0x55,             // 0: push rbp
	0x48, 0x89, 0xe5, // 1: mov rbp, rsp
	0x48, 0x83, 0xec, 0x10, // 4: sub rsp, 16
	0x90, 0x90, 0x90, 0x90, 0x90, // 8: body
	0xc9, // 13: leave
	0xc3, // 14: ret
}

// fibCFI: after push rbp CFA = rsp+16, rbp at CFA-16; after mov, CFA =
// rbp+16; after leave CFA = rsp+8.
var fibCFI = []frame.Insn{
	{PC: 1, Op: frame.OpDefCFAOffset, Offset: 16},
	{PC: 1, Op: frame.OpOffset, Reg: arch.X86_64_RBP, Offset: -16},
	{PC: 4, Op: frame.OpDefCFARegister, Reg: arch.X86_64_RBP},
	{PC: 14, Op: frame.OpDefCFA, Reg: arch.X86_64_RSP, Offset: 8},
}

func fibFunc(addr uint64) *Function {
	return &Function{
		Name: "fib",
		Addr: addr,
		Code: fibCode,
		Lines: []Line{
			{Offset: 0, Line: 1, File: "/src/fib.scm"},
			{Offset: 4, Line: 2, File: "/src/fib.scm"},
			{Offset: 8, Line: 3, Discrim: 1, File: "/src/inc.scm"},
			{Offset: 13, Line: 2, File: "/src/fib.scm"},
		},
		CFI: fibCFI,
	}
}

func openTest(t *testing.T, o *Options) *Writer {
	t.Helper()
	if o == nil {
		o = &Options{}
	}
	if o.Clock == nil {
		o.Clock = fakeClock()
	}
	o.Arch = arch.X86_64
	w, err := Open(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func TestHeaderBytes(t *testing.T) {
	w := openTest(t, nil)
	got, err := os.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{
		0x44, 0x54, 0x69, 0x4a, // magic 0x4A695444: "DTiJ" on a little-endian disk
		1, 0, 0, 0, // version
		40, 0, 0, 0, // total_size
		62, 0, 0, 0, // elf_mach EM_X86_64
		0, 0, 0, 0, // pad1
	}
	pid := binary.LittleEndian.AppendUint32(nil, uint32(os.Getpid()))
	want = append(want, pid...)
	want = append(want, 0xe8, 0x03, 0, 0, 0, 0, 0, 0) // timestamp 1000
	want = append(want, 0, 0, 0, 0, 0, 0, 0, 0)       // flags
	if !bytes.Equal(got, want) {
		t.Fatalf("header\n% x\nwant\n% x", got, want)
	}
	if !strings.HasSuffix(w.Path(), fmt.Sprintf("/jit-%d.dump", os.Getpid())) {
		t.Errorf("path %q", w.Path())
	}
}

// TestMarkerMapping: perf finds the dump by an executable, private mapping
// of it, which must stay until Close.
func TestMarkerMapping(t *testing.T) {
	w := openTest(t, nil)
	maps := func() string {
		b, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			tooltest.Skip(t, "no /proc/self/maps: %v", err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasSuffix(l, " "+w.Path()) {
				return strings.Fields(l)[1]
			}
		}
		return ""
	}
	if p := maps(); p != "r-xp" {
		t.Fatalf("mapping of %s: %q, want r-xp", w.Path(), p)
	}
	if !w.mappedMarker() {
		t.Fatal("marker not kept")
	}
	w.Close()
	if p := maps(); p != "" {
		t.Fatalf("mapping still there after Close: %q", p)
	}
	if _, err := w.Load(fibFunc(0x1000)); !errors.Is(err, ErrClosed) {
		t.Errorf("Load after Close: %v", err)
	}
}

func TestAlreadyOpen(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, nil); !errors.Is(err, ErrAlreadyOpen) {
		t.Errorf("second Open: %v", err)
	}
	w.Close()
	w2, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	w2.Close()
}

// TestCodeLoadBytes checks one CODE_LOAD record byte for byte: padding
// goes between the name's NUL and the code, so that the code is the
// record's last code_size bytes (where perf takes it from).
func TestCodeLoadBytes(t *testing.T) {
	w := openTest(t, nil)
	code := []byte{0xb8, 1, 0, 0, 0, 0xc3} // mov eax,1; ret
	idx, err := w.Load(&Function{Name: "one", Addr: 0x7f0000001000, Code: code})
	if err != nil || idx != 0 {
		t.Fatal(idx, err)
	}
	data, _ := os.ReadFile(w.Path())
	rec := data[HeaderSize:]
	le := binary.LittleEndian
	// 56 fixed + "one\0" (4) + 6 code = 66 -> 72.
	if len(rec) != 72 {
		t.Fatalf("record of %d bytes, want 72: % x", len(rec), rec)
	}
	var want []byte
	want = le.AppendUint32(want, 0)    // id JIT_CODE_LOAD
	want = le.AppendUint32(want, 72)   // total_size
	want = le.AppendUint64(want, 1001) // timestamp
	want = le.AppendUint32(want, uint32(os.Getpid()))
	want = append(want, rec[20:24]...)           // tid: checked below
	want = le.AppendUint64(want, 0x7f0000001000) // vma
	want = le.AppendUint64(want, 0x7f0000001000) // code_addr
	want = le.AppendUint64(want, 6)              // code_size
	want = le.AppendUint64(want, 0)              // code_index
	want = append(want, "one\x00\x00\x00\x00\x00\x00\x00"...)
	want = append(want, code...)
	if !bytes.Equal(rec, want) {
		t.Fatalf("record\n% x\nwant\n% x", rec, want)
	}
	if tid := le.Uint32(rec[20:]); tid == 0 {
		t.Error("tid 0")
	}
	// perf's view: code = record + total_size - code_size; name = strlen
	// at offset 56.
	if !bytes.Equal(rec[72-6:], code) || string(rec[56:56+bytes.IndexByte(rec[56:], 0)]) != "one" {
		t.Error("perf would not find name and code")
	}
}

// TestRoundTrip writes functions with lines and CFI, a move and a close,
// and reads everything back in order.
func TestRoundTrip(t *testing.T) {
	w := openTest(t, nil)
	f1 := fibFunc(0x7f0000001000)
	fp1, err := w.Footprint(f1)
	if err != nil {
		t.Fatal(err)
	}
	f2 := &Function{Name: "leaf with spaces", Addr: f1.Addr + fp1, Code: []byte{0xc3}, CFI: []frame.Insn{}}
	f3 := &Function{Name: "nolines", Addr: 0x7f0000100000, Code: bytes.Repeat([]byte{0x90}, 17), Lines: []Line{{Offset: 16, Line: 9, File: "x.scm"}}}
	for i, f := range []*Function{f1, f2, f3} {
		idx, err := w.Load(f)
		if err != nil || idx != uint64(i) {
			t.Fatalf("Load %d: %v, %v", i, idx, err)
		}
	}
	if err := w.Move(f3.Addr, 0x7f0000200000, 17, 2); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	if d.Header.Machine != elf.EM_X86_64 || d.Header.Version != 1 || d.Header.PID != uint32(os.Getpid()) || d.Header.Flags != 0 || d.ByteOrder != binary.LittleEndian {
		t.Errorf("header %+v", d.Header)
	}
	var ids []RecordID
	for _, r := range d.Records {
		p := r.RecordPrefix()
		ids = append(ids, p.ID)
		if p.TotalSize%8 != 0 || p.Offset%8 != 0 {
			t.Errorf("%s at %#x: total_size %d not padded to 8", p.ID, p.Offset, p.TotalSize)
		}
	}
	want := []RecordID{JIT_CODE_DEBUG_INFO, JIT_CODE_UNWINDING_INFO, JIT_CODE_LOAD, JIT_CODE_UNWINDING_INFO, JIT_CODE_LOAD, JIT_CODE_DEBUG_INFO, JIT_CODE_LOAD, JIT_CODE_MOVE, JIT_CODE_CLOSE}
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("records %v\nwant    %v", ids, want)
	}
	// Timestamps: one per Load, increasing.
	if d.Records[0].RecordPrefix().Timestamp != d.Records[2].RecordPrefix().Timestamp || d.Records[3].RecordPrefix().Timestamp <= d.Records[2].RecordPrefix().Timestamp {
		t.Error("timestamps")
	}
	di := d.Records[0].(*DebugInfo)
	wantEntries := []DebugEntry{
		{Addr: f1.Addr, Line: 1, File: "/src/fib.scm"},
		{Addr: f1.Addr + 4, Line: 2, File: "/src/fib.scm"},
		{Addr: f1.Addr + 8, Line: 3, Discrim: 1, File: "/src/inc.scm"},
		{Addr: f1.Addr + 13, Line: 2, File: "/src/fib.scm"},
		{Addr: f1.Addr + 15, Line: 2, File: "/src/fib.scm"}, // the closing entry, at the end of the code
	}
	if di.CodeAddr != f1.Addr || fmt.Sprint(di.Entries) != fmt.Sprint(wantEntries) {
		t.Errorf("debug info %#x %+v", di.CodeAddr, di.Entries)
	}
	code := d.Code()
	if len(code) != 3 {
		t.Fatalf("%d loads", len(code))
	}
	c := code[0]
	if c.Name != "fib" || c.CodeAddr != f1.Addr || c.VMA != f1.Addr || !bytes.Equal(c.Code, fibCode) || c.CodeIndex != 0 || c.PID != uint32(os.Getpid()) || c.DebugInfo != di || c.Unwinding == nil {
		t.Errorf("load 0: %+v", c)
	}
	if u := c.Unwinding; u.MappedSize != u.UnwindingSize || u.UnwindingSize != uint64(len(u.Data)) || u.EHFrameHdrSize != uint64(frame.EHFrameHdrSize(1)) {
		t.Errorf("unwinding sizes %d %d %d", u.UnwindingSize, u.EHFrameHdrSize, u.MappedSize)
	}
	if s, e := c.Span(); s != f1.Addr || e-s != fp1 || fp1 != 16+c.Unwinding.UnwindingSize {
		t.Errorf("span [%#x, %#x), footprint %d", s, e, fp1)
	}
	if code[1].Name != "leaf with spaces" || code[1].DebugInfo != nil || code[1].Unwinding == nil {
		t.Errorf("load 1: %+v", code[1])
	}
	if code[2].Name != "nolines" || code[2].Unwinding != nil || code[2].DebugInfo == nil || code[2].DebugInfo.Entries[0].Addr != f3.Addr+16 {
		t.Errorf("load 2: %+v", code[2])
	}
	mv := d.Records[7].(*CodeMove)
	if mv.OldCodeAddr != f3.Addr || mv.NewCodeAddr != 0x7f0000200000 || mv.CodeSize != 17 || mv.CodeIndex != 2 {
		t.Errorf("move %+v", mv)
	}
}

// TestUnwindingAtPerfAddresses decodes the unwinding record with
// dwarf/frame at the addresses perf gives it, both at run time and in the
// ELF perf synthesizes (.text at 0x40 in old perf, 0x80 in current perf),
// and checks the rows against the CFI written.
func TestUnwindingAtPerfAddresses(t *testing.T) {
	w := openTest(t, nil)
	f := fibFunc(0x7f0000001000)
	if _, err := w.Load(f); err != nil {
		t.Fatal(err)
	}
	d, err := ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	c := d.Code()[0]
	type want struct {
		off    uint64
		cfaReg arch.Reg
		cfaOff int64
		rbp    bool // rbp saved at CFA-16
	}
	wants := []want{{0, arch.X86_64_RSP, 8, false}, {1, arch.X86_64_RSP, 16, true}, {3, arch.X86_64_RSP, 16, true}, {4, arch.X86_64_RBP, 16, true}, {13, arch.X86_64_RBP, 16, true}, {14, arch.X86_64_RSP, 8, true}}
	for _, base := range []uint64{c.CodeAddr, 0x40, 0x80} {
		u := c.Unwinding
		ehAddr := base + EHFrameOffset(c.CodeSize)
		fi, err := frame.NewFinder(u.EHFrame(), ehAddr, u.EHFrameHdr(), ehAddr+uint64(len(u.EHFrame())), binary.LittleEndian, 8)
		if err != nil {
			t.Fatal(err)
		}
		if !fi.Hdr.HasTable() || fi.Hdr.Count != 1 || fi.Hdr.EHFramePtr != ehAddr {
			t.Fatalf("base %#x: hdr %+v", base, fi.Hdr)
		}
		var fde frame.ParsedFDE
		for _, w := range wants {
			if err := fi.FindFDE(base+w.off, &fde); err != nil {
				t.Fatalf("base %#x: FindFDE(+%d): %v", base, w.off, err)
			}
			if fde.Start != base || fde.Size != c.CodeSize {
				t.Fatalf("base %#x: FDE [%#x, +%d)", base, fde.Start, fde.Size)
			}
			var e frame.Exec
			var row frame.Row
			if err := e.RowAt(&fde, base+w.off, &row); err != nil {
				t.Fatal(err)
			}
			if row.CFA.Kind != frame.RuleCFA || row.CFA.Reg != w.cfaReg || row.CFA.Offset != w.cfaOff {
				t.Errorf("base %#x +%d: CFA %+v, want %s+%d", base, w.off, row.CFA, arch.X86_64.RegName(w.cfaReg), w.cfaOff)
			}
			if ra := row.Rule(arch.X86_64_RA); ra.Kind != frame.RuleOffset || ra.Offset != -8 {
				t.Errorf("base %#x +%d: RA %+v", base, w.off, ra)
			}
			if rbp := row.Rule(arch.X86_64_RBP); (rbp.Kind == frame.RuleOffset && rbp.Offset == -16) != w.rbp {
				t.Errorf("base %#x +%d: rbp %+v", base, w.off, rbp)
			}
		}
		if err := fi.FindFDE(base+c.CodeSize, &fde); !errors.Is(err, frame.ErrNoFDE) {
			t.Errorf("base %#x: pc past the code: %v", base, err)
		}
	}
	// LoadedCode.Finder does the same at the run-time address.
	fi, err := c.Finder(d)
	if err != nil {
		t.Fatal(err)
	}
	var fde frame.ParsedFDE
	if err := fi.FindFDE(c.CodeAddr+5, &fde); err != nil || fde.Start != c.CodeAddr {
		t.Errorf("Finder: %v %#x", err, fde.Start)
	}
	// The .eh_frame is a multiple of 4 bytes, so libelf's 4-byte alignment
	// of .eh_frame_hdr in perf's ELF leaves no gap.
	if len(c.Unwinding.EHFrame())%4 != 0 {
		t.Errorf(".eh_frame of %d bytes", len(c.Unwinding.EHFrame()))
	}
}

func TestUnmappedAndSpacing(t *testing.T) {
	w := openTest(t, &Options{UnmappedUnwinding: true})
	f := fibFunc(0x1000)
	fp, err := w.Footprint(f)
	if err != nil || fp != uint64(len(fibCode)) {
		t.Fatalf("footprint %d, %v", fp, err)
	}
	w.Load(f)
	d, _ := ReadFile(w.Path())
	if c := d.Code()[0]; c.Unwinding.MappedSize != 0 {
		t.Errorf("mapped_size %d", c.Unwinding.MappedSize)
	}
	for _, c := range []struct{ code, mapped, want uint64 }{{15, 0, 15}, {15, 36, 16 + 36}, {16, 36, 52}, {1, 8, 16}} {
		if got := Spacing(c.code, c.mapped); got != c.want {
			t.Errorf("Spacing(%d, %d) = %d, want %d", c.code, c.mapped, got, c.want)
		}
	}
}

func TestLoadRejects(t *testing.T) {
	w := openTest(t, nil)
	ok := func() *Function { return fibFunc(0x1000) }
	cases := map[string]func(*Function){
		"empty code":  func(f *Function) { f.Code = nil },
		"NUL in name": func(f *Function) { f.Name = "a\x00b" },
		"line 0":      func(f *Function) { f.Lines[1].Line = 0 },
		"unsorted":    func(f *Function) { f.Lines[2].Offset = 1 },
		"outside":     func(f *Function) { f.Lines[3].Offset = 15 },
		"empty file":  func(f *Function) { f.Lines[0].File = "" },
		"marker file": func(f *Function) { f.Lines[0].File = "\xff" },
		"wraps":       func(f *Function) { f.Addr = ^uint64(0) - 3 },
		"huge line":   func(f *Function) { f.Lines[0].Line = 1 << 31 },
		"unsorted CFI": func(f *Function) {
			f.CFI = []frame.Insn{{PC: 4, Op: frame.OpDefCFAOffset, Offset: 16}, {PC: 1, Op: frame.OpDefCFAOffset, Offset: 8}}
		},
		"CFI past code": func(f *Function) { f.CFI = []frame.Insn{{PC: 99, Op: frame.OpDefCFAOffset, Offset: 16}} },
	}
	for name, mod := range cases {
		f := ok()
		f.Lines = append([]Line(nil), f.Lines...)
		mod(f)
		if _, err := w.Load(f); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	data, _ := os.ReadFile(w.Path())
	if len(data) != HeaderSize {
		t.Errorf("rejected loads wrote %d bytes", len(data)-HeaderSize)
	}
}

// TestConcurrentLoads: the records of one Load stay together (run with
// -race).
func TestConcurrentLoads(t *testing.T) {
	w := openTest(t, nil)
	const G, N = 8, 50
	var wg sync.WaitGroup
	for g := range G {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range N {
				f := fibFunc(uint64(g)<<32 | uint64(i)<<12)
				f.Name = fmt.Sprintf("f%d_%d", g, i)
				if _, err := w.Load(f); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	d, err := ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	code := d.Code()
	if len(code) != G*N {
		t.Fatalf("%d loads", len(code))
	}
	seen := map[uint64]bool{}
	for _, c := range code {
		if c.DebugInfo == nil || c.Unwinding == nil || c.DebugInfo.CodeAddr != c.CodeAddr || seen[c.CodeIndex] {
			t.Fatalf("load %q: records of another function attached, or index %d reused", c.Name, c.CodeIndex)
		}
		seen[c.CodeIndex] = true
	}
}

// asm assembles jitdump files by hand for reader tests.
type asm struct {
	b     []byte
	order binary.AppendByteOrder
}

func (a *asm) u32(v uint32) *asm { a.b = a.order.AppendUint32(a.b, v); return a }
func (a *asm) u64(v uint64) *asm { a.b = a.order.AppendUint64(a.b, v); return a }
func (a *asm) raw(s string) *asm { a.b = append(a.b, s...); return a }
func (a *asm) header(version uint32, size uint32, flags uint64) *asm {
	return a.u32(Magic).u32(version).u32(size).u32(uint32(elf.EM_AARCH64)).u32(0).u32(77).u64(5).u64(flags)
}

// TestParseOtherProducers: big-endian files, a longer header, unknown
// record types, the repeated-file marker, the timestamp flag.
func TestParseOtherProducers(t *testing.T) {
	a := &asm{order: binary.BigEndian}
	a.header(1, 48, uint64(JITDUMP_FLAGS_ARCH_TIMESTAMP)).u64(0xdeadbeef) // 8 extra header bytes
	// DEBUG_INFO with the "\xff\0" marker, unpadded (other producers do not pad).
	a.u32(2).u32(32 + 16 + 5 + 16 + 2).u64(9).u64(0x4000).u64(2)
	a.u64(0x4000).u32(10).u32(0).raw("a.js\x00")
	a.u64(0x4008).u32(11).u32(0).raw("\xff\x00")
	a.u32(99).u32(16 + 3).u64(10).raw("xyz") // unknown type, odd size
	// CODE_LOAD without padding.
	a.u32(0).u32(56 + 2 + 3).u64(11).u32(77).u32(78).u64(0x4000).u64(0x4000).u64(3).u64(7).raw("f\x00").raw("\x90\x90\xc3")
	a.u32(3).u32(16).u64(12)
	d, err := Parse(a.b)
	if err != nil {
		t.Fatal(err)
	}
	if d.ByteOrder != binary.BigEndian || d.Header.Machine != elf.EM_AARCH64 || d.Header.PID != 77 || d.Header.Flags != JITDUMP_FLAGS_ARCH_TIMESTAMP || d.Header.TotalSize != 48 {
		t.Errorf("header %+v", d.Header)
	}
	if len(d.Records) != 4 {
		t.Fatalf("records %v", d.Records)
	}
	di := d.Records[0].(*DebugInfo)
	if di.Entries[1].File != "a.js" || !di.Entries[1].Repeated || di.Entries[1].Line != 11 || di.Entries[0].File != "a.js" {
		t.Errorf("entries %+v", di.Entries)
	}
	if u := d.Records[1].(*Unknown); u.ID != 99 || string(u.Payload) != "xyz" || u.ID.String() != "JIT_CODE_99" {
		t.Errorf("unknown %+v", u)
	}
	if l := d.Records[2].(*CodeLoad); l.Name != "f" || string(l.Code) != "\x90\x90\xc3" || l.TID != 78 || l.CodeIndex != 7 || l.Offset != 48+71+19 {
		t.Errorf("load %+v", l)
	}
	if c := d.Code(); len(c) != 1 || c[0].DebugInfo != di {
		t.Errorf("code %+v", c)
	}
}

func TestParseRejects(t *testing.T) {
	good := func() *asm {
		a := &asm{order: binary.LittleEndian}
		return a.header(1, 40, 0)
	}
	type tc struct {
		name  string
		data  []byte
		field string
		trunc bool
		nrec  int
	}
	var cases []tc
	add := func(name string, a *asm, field string, trunc bool, nrec int) {
		cases = append(cases, tc{name, a.b, field, trunc, nrec})
	}
	add("version 2", (&asm{order: binary.LittleEndian}).header(2, 40, 0), "version", false, 0)
	add("unknown flag", (&asm{order: binary.LittleEndian}).header(1, 40, 2), "flags", false, 0)
	add("short header size", (&asm{order: binary.LittleEndian}).header(1, 39, 0), "total_size", false, 0)
	add("bad magic", (&asm{order: binary.LittleEndian}).u32(0x12345678).u64(0), "magic", false, 0)
	add("short file", (&asm{order: binary.LittleEndian}).u32(Magic).u32(1), "header", true, 0)
	add("record < prefix", good().u32(3).u32(8).u64(0), "total_size", false, 0)
	add("record past end", good().u32(3).u32(16).u64(0).u32(0).u32(100).u64(0), "total_size", true, 1)
	add("partial prefix", good().u32(3).u32(16).u64(0).u32(0), "prefix", true, 1)
	add("load too small", good().u32(0).u32(56).u64(0).u32(0).u32(0).u64(0).u64(0).u64(0).u64(0), "total_size", false, 0)
	add("code larger than record", good().u32(0).u32(64).u64(0).u32(0).u32(0).u64(0).u64(0).u64(8).u64(0).raw("abcdefgh"), "code_size", false, 0)
	add("name unterminated", good().u32(0).u32(64).u64(0).u32(0).u32(0).u64(0).u64(0).u64(4).u64(0).raw("abcdefgh"), "name", false, 0)
	add("nr_entry huge", good().u32(2).u32(40).u64(0).u64(0).u64(1<<62).u64(0), "nr_entry", false, 0)
	add("entry name unterminated", good().u32(2).u32(56).u64(0).u64(0).u64(1).u64(0).u32(1).u32(0).raw("abcdefgh"), "name", false, 0)
	add("unwinding_size too big", good().u32(4).u32(48).u64(0).u64(9).u64(0).u64(0).u64(0), "unwinding_size", false, 0)
	add("hdr bigger than data", good().u32(4).u32(48).u64(0).u64(8).u64(9).u64(0).u64(0), "eh_frame_hdr_size", false, 0)
	add("move too small", good().u32(1).u32(60).u64(0).raw(strings.Repeat("\x00", 44)), "total_size", false, 0)
	for _, c := range cases {
		d, err := Parse(c.data)
		var fe *dwarf.FormatError
		if !errors.As(err, &fe) {
			t.Errorf("%s: error %v is not a FormatError", c.name, err)
			continue
		}
		if fe.Field != c.field || fe.Source != Section {
			t.Errorf("%s: %v, want field %s", c.name, err, c.field)
		}
		if errors.Is(err, ErrTruncated) != c.trunc {
			t.Errorf("%s: truncated = %v", c.name, errors.Is(err, ErrTruncated))
		}
		if c.nrec > 0 && (d == nil || len(d.Records) != c.nrec) {
			t.Errorf("%s: partial dump %v", c.name, d)
		}
	}
}

// TestTruncatedLive: a file cut at every length gives the records before
// the cut (as a reader racing a running writer would see).
func TestTruncatedLive(t *testing.T) {
	w := openTest(t, nil)
	w.Load(fibFunc(0x1000))
	w.Load(fibFunc(0x2000))
	data, _ := os.ReadFile(w.Path())
	full, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	for n := HeaderSize; n < len(data); n++ {
		d, err := Parse(data[:n])
		if err == nil {
			// Only at record boundaries.
			if len(d.Records) == 0 && n != HeaderSize {
				t.Fatalf("cut at %d: no error and no records", n)
			}
			continue
		}
		if !errors.Is(err, ErrTruncated) {
			t.Fatalf("cut at %d: %v", n, err)
		}
		for i, r := range d.Records {
			if r.RecordPrefix().Offset != full.Records[i].RecordPrefix().Offset {
				t.Fatalf("cut at %d: record %d differs", n, i)
			}
		}
	}
}
