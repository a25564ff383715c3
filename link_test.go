package elfimage_test

import (
	"bufio"
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	edwarf "github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/internal/readelf"
	"github.com/elfimage/elfimage/internal/tooltest"
	"github.com/elfimage/elfimage/lang/scheme"
)

// encodings are the DWARF encodings every tool check runs with.
var encodings = []struct {
	name string
	opts elfimage.LinkOptions
}{
	{"dwarf5", elfimage.LinkOptions{}},
	{"dwarf4", elfimage.LinkOptions{DWARF: edwarf.Encoding{Version: 4, Format: edwarf.Format32}}},
	{"dwarf3", elfimage.LinkOptions{DWARF: edwarf.Encoding{Version: 3, Format: edwarf.Format32}, DebugFrame: true}},
	{"dwarf5-64", elfimage.LinkOptions{DWARF: edwarf.Encoding{Version: 5, Format: edwarf.Format64}}},
	{"dwarf4-64", elfimage.LinkOptions{DWARF: edwarf.Encoding{Version: 4, Format: edwarf.Format64}, DebugFrame: true}},
}

// demoArch is the architecture scheme.Compile compiles the demo for: the
// running one's (arch.ForGOARCH(runtime.GOARCH)), x86-64 on a GOARCH
// package arch does not know.
var demoArch = func() *arch.Arch {
	if a := arch.ForGOARCH(runtime.GOARCH); a != nil {
		return a
	}
	return arch.X86_64
}()

// relocName is the name of relocation type typ of the machine of a, as
// debug/elf (and readelf) spell it: R_X86_64_RELATIVE, R_AARCH64_RELATIVE.
func relocName(a *arch.Arch, typ uint32) string {
	if a.Machine == elf.EM_AARCH64 {
		return elf.R_AARCH64(typ).String()
	}
	return elf.R_X86_64(typ).String()
}

// readelfRegName returns readelf's name for a DWARF register of a:
// readelf.X86_64RegName on x86-64, the AArch64 DWARF ABI's names (x0-x30,
// sp, as arch.AArch64.RegName spells them) on AArch64.
func readelfRegName(a *arch.Arch) func(arch.Reg) string {
	if a.Machine == elf.EM_X86_64 {
		return func(r arch.Reg) string { return readelf.X86_64RegName(int(r)) }
	}
	return a.RegName
}

// writeDemo compiles the demo program and writes its image into a test
// directory, returning the image path.
func writeDemo(t *testing.T, opts elfimage.LinkOptions) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, scheme.DemoFile)
	if err := os.WriteFile(src, scheme.DemoSource, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := scheme.Compile(src, scheme.DemoSource)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "demo.elf")
	if err := elfimage.WriteFile(path, m, opts); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLayout checks the layout rules of the image format field by field
// with Go's debug/elf as the independent reader.
func TestLayout(t *testing.T) {
	path := writeDemo(t, elfimage.LinkOptions{})
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	if f.Class != elf.ELFCLASS64 || f.Data != elf.ELFDATA2LSB || f.Type != elf.ET_DYN || f.Machine != demoArch.Machine {
		t.Errorf("header: class %v data %v type %v machine %v", f.Class, f.Data, f.Type, f.Machine)
	}
	var loads []*elf.Prog
	byType := map[elf.ProgType]*elf.Prog{}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			loads = append(loads, p)
		} else {
			byType[p.Type] = p
		}
	}
	wantFlags := []elf.ProgFlag{elf.PF_R, elf.PF_R | elf.PF_W, elf.PF_R | elf.PF_X, elf.PF_R}
	if len(loads) != len(wantFlags) {
		t.Fatalf("%d PT_LOAD segments, want %d (R, RW, RX, R)", len(loads), len(wantFlags))
	}
	var prevEnd uint64
	for i, p := range loads {
		if p.Flags != wantFlags[i] {
			t.Errorf("segment %d: flags %v, want %v", i, p.Flags, wantFlags[i])
		}
		if p.Off != p.Vaddr || p.Vaddr != p.Paddr {
			t.Errorf("segment %d: p_offset %#x, p_vaddr %#x, p_paddr %#x: want equal", i, p.Off, p.Vaddr, p.Paddr)
		}
		if p.Filesz != p.Memsz {
			t.Errorf("segment %d: p_filesz %#x != p_memsz %#x", i, p.Filesz, p.Memsz)
		}
		if p.Off%page != 0 || p.Align != page {
			t.Errorf("segment %d: p_offset %#x, p_align %#x: want page-aligned", i, p.Off, p.Align)
		}
		if p.Off < prevEnd {
			t.Errorf("segment %d at %#x overlaps the previous one ending at %#x", i, p.Off, prevEnd)
		}
		// Contiguous: the next segment starts on the first page boundary
		// after the previous one ends.
		if i > 0 && p.Off != (prevEnd+page-1)&^(page-1) {
			t.Errorf("segment %d at %#x: want the page after %#x", i, p.Off, prevEnd)
		}
		prevEnd = p.Off + p.Filesz
	}
	if loads[0].Off != 0 || loads[0].Filesz < 64+uint64(len(f.Progs))*56 {
		t.Errorf("first segment [%#x, +%#x) does not hold the ELF and program headers", loads[0].Off, loads[0].Filesz)
	}
	// The tail follows the last segment, which is read-only: no tail
	// byte shares a page with a writable or executable one.
	tailStart := prevEnd
	in := func(s *elf.Section, p *elf.Prog) bool {
		return s.Offset >= p.Off && s.Offset+s.Size <= p.Off+p.Filesz && s.Addr == s.Offset
	}
	wantIn := map[string]int{".rela.dyn": 0, ".dynamic": 0, ".note.gnu.build-id": 0, ".data": 1, ".text": 2,
		".rodata": 3, ".eh_frame_hdr": 3, ".eh_frame": 3}
	for name, seg := range wantIn {
		s := f.Section(name)
		if s == nil {
			t.Errorf("no section %s", name)
			continue
		}
		if !in(s, loads[seg]) || s.Flags&elf.SHF_ALLOC == 0 {
			t.Errorf("section %s [%#x, +%#x) flags %v is not in segment %d", name, s.Offset, s.Size, s.Flags, seg)
		}
	}
	for _, s := range f.Sections[1:] {
		if s.Addralign > 1 && (s.Addr%s.Addralign != 0 || s.Offset%s.Addralign != 0) {
			t.Errorf("section %s at address %#x, offset %#x is not aligned to its sh_addralign %d", s.Name, s.Addr, s.Offset, s.Addralign)
		}
	}
	var lastTail uint64
	for _, s := range f.Sections[1:] {
		if _, ok := wantIn[s.Name]; ok || s.Name == ".dynstr" {
			continue
		}
		if s.Flags&elf.SHF_ALLOC != 0 || s.Addr != 0 {
			t.Errorf("tail section %s is allocated (flags %v, addr %#x)", s.Name, s.Flags, s.Addr)
		}
		if s.Offset < tailStart {
			t.Errorf("tail section %s at %#x is before the end of the loaded segments (%#x)", s.Name, s.Offset, tailStart)
		}
		lastTail = max(lastTail, s.Offset+s.Size)
	}
	for _, name := range []string{".symtab", ".strtab", ".debug_info", ".debug_abbrev", ".debug_line", ".debug_str", ".debug_line_str", ".shstrtab"} {
		if f.Section(name) == nil {
			t.Errorf("no section %s", name)
		}
	}
	shoff := binary.LittleEndian.Uint64(raw[40:])
	if shoff < lastTail || shoff+uint64(len(f.Sections))*64 != uint64(len(raw)) {
		t.Errorf("section header table at %#x (file %#x bytes): want it last, after the tail ending at %#x", shoff, len(raw), lastTail)
	}
	for typ, name := range map[elf.ProgType]string{elf.PT_GNU_EH_FRAME: ".eh_frame_hdr", elf.PT_NOTE: ".note.gnu.build-id", elf.PT_DYNAMIC: ".dynamic"} {
		p, s := byType[typ], f.Section(name)
		if p == nil || s == nil {
			t.Errorf("%v or %s missing", typ, name)
			continue
		}
		if p.Off != s.Offset || p.Filesz != s.Size || p.Vaddr != s.Addr {
			t.Errorf("%v [%#x, +%#x) does not point at %s [%#x, +%#x)", typ, p.Off, p.Filesz, name, s.Offset, s.Size)
		}
	}
	text := f.Section(".text")
	if f.Entry < text.Addr || f.Entry >= text.Addr+text.Size {
		t.Errorf("e_entry %#x outside .text", f.Entry)
	}
	// The relocations point into .data and hold addresses inside the image.
	rela, _ := f.Section(".rela.dyn").Data()
	data := f.Section(".data")
	for i := 0; i+24 <= len(rela); i += 24 {
		off := binary.LittleEndian.Uint64(rela[i:])
		typ := uint32(binary.LittleEndian.Uint64(rela[i+8:]))
		add := binary.LittleEndian.Uint64(rela[i+16:])
		if typ != demoArch.RelocRelative || off < data.Addr || off+8 > data.Addr+data.Size || add >= uint64(len(raw)) {
			t.Errorf("relocation %d: offset %#x type %s addend %#x", i/24, off, relocName(demoArch, typ), add)
		}
	}
	// The build ID note is a 20-byte SHA-1.
	notes, _ := f.Section(".note.gnu.build-id").Data()
	if len(notes) != 36 || string(notes[12:16]) != "GNU\x00" || binary.LittleEndian.Uint32(notes[8:]) != 3 {
		t.Errorf("build-id note %x", notes)
	}
	// No temporary file is left behind by the atomic write.
	ents, _ := os.ReadDir(filepath.Dir(path))
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

// TestLayoutDataFirst: however large the code and read-only data, the
// writable segment is the page after the headers' (the relocations and
// .dynamic are in the first page), so that Open's copy-on-write store lands
// within the 2 MiB that the loader's anchor keeps page tables for.
func TestLayoutDataFirst(t *testing.T) {
	const page = 4096
	ret := []byte{0xc3} // ret
	if demoArch.Machine == elf.EM_AARCH64 {
		ret = []byte{0xc0, 0x03, 0x5f, 0xd6}
	}
	m := &elfimage.Module{
		File: "big.scm",
		Arch: demoArch,
		Procs: []*elfimage.Proc{
			{Name: "a", Code: append(make([]byte, 3<<20), ret...)},
			{Name: "b", Code: ret},
		},
		ROData: []*elfimage.Datum{{Name: "table", Bytes: make([]byte, 3<<20)}},
		Data: []*elfimage.Datum{{Name: "ptrs", Bytes: make([]byte, 16), Relocs: []elfimage.Reloc{
			{Offset: 0, Type: elfimage.RelocAbs64, Symbol: "b"},
			{Offset: 8, Type: elfimage.RelocAbs64, Symbol: "table"},
		}}},
	}
	b, err := elfimage.Link(m, elfimage.LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var flags []elf.ProgFlag
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD {
			continue
		}
		flags = append(flags, p.Flags)
		if p.Flags&elf.PF_W != 0 && p.Off != page {
			t.Errorf("writable segment at %#x, want %#x (the page after the headers)", p.Off, page)
		}
	}
	if want := []elf.ProgFlag{elf.PF_R, elf.PF_R | elf.PF_W, elf.PF_R | elf.PF_X, elf.PF_R}; !slices.Equal(flags, want) {
		t.Errorf("PT_LOAD flags %v, want %v", flags, want)
	}
	if text, ro := f.Section(".text"), f.Section(".rodata"); text.Offset != 2*page || ro.Offset < text.Offset+text.Size {
		t.Errorf(".text at %#x, .rodata at %#x: want .text at %#x, .rodata after it", text.Offset, ro.Offset, 2*page)
	}
}

// TestDebugDWARF reads the image's DWARF with Go's debug/dwarf: one
// compile unit, a subprogram per procedure with its parameters.
func TestDebugDWARF(t *testing.T) {
	for _, e := range encodings {
		t.Run(e.name, func(t *testing.T) {
			f, err := elf.Open(writeDemo(t, e.opts))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			d, err := f.DWARF()
			if err != nil {
				t.Fatal(err)
			}
			r := d.Reader()
			params := map[string][]string{}
			var cur string
			for {
				ent, err := r.Next()
				if err != nil {
					t.Fatal(err)
				}
				if ent == nil {
					break
				}
				switch ent.Tag {
				case dwarf.TagSubprogram:
					cur, _ = ent.Val(dwarf.AttrName).(string)
					params[cur] = []string{}
				case dwarf.TagFormalParameter:
					n, _ := ent.Val(dwarf.AttrName).(string)
					params[cur] = append(params[cur], n)
				}
			}
			for name, want := range map[string]string{"fib": "n", "tak": "x y z", "inner": "a b", "middle": "x y", "main": ""} {
				if got := strings.Join(params[name], " "); got != want {
					t.Errorf("%s: parameters %q, want %q", name, got, want)
				}
			}
		})
	}
}

// TestReadelfNoWarnings: readelf -W -a accepts the image silently.
func TestReadelfNoWarnings(t *testing.T) {
	re := tooltest.Require(t, "readelf")
	for _, e := range encodings {
		t.Run(e.name, func(t *testing.T) {
			path := writeDemo(t, e.opts)
			cmd := exec.Command(re, "-W", "-a", "--debug-dump=info,line,frames", path)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil || stderr.Len() > 0 || bytes.Contains(out, []byte("readelf: Warning")) {
				t.Errorf("readelf: %v\nstderr: %s", err, stderr.String())
			}
			rel := relocName(demoArch, demoArch.RelocRelative)
			if !bytes.Contains(out, []byte("DW_TAG_subprogram")) || !bytes.Contains(out, []byte(rel)) {
				t.Errorf("readelf output lacks subprograms or %s relocations", rel)
			}
		})
	}
}

// TestDwarfdumpVerify: llvm-dwarfdump --verify finds no errors in the
// images of the example programs, in every selectable DWARF encoding.
func TestDwarfdumpVerify(t *testing.T) {
	dd := tooltest.Require(t, "llvm-dwarfdump", "llvm-dwarfdump-14")
	for _, e := range encodings {
		for _, file := range []string{"demo.scm", "scopes.scm", "kernels.scm"} {
			t.Run(e.name+"/"+file, func(t *testing.T) {
				_, path, _ := linkExample(t, file, e.opts)
				out, err := exec.Command(dd, "--verify", path).CombinedOutput()
				if err != nil || !bytes.Contains(out, []byte("No errors.")) {
					t.Errorf("llvm-dwarfdump --verify: %v\n%s", err, out)
				}
			})
		}
	}
}

// TestAddr2lineAgrees: for every line-table row, addr2line -f and the
// image's own queries give the same procedure and file:line.
func TestAddr2lineAgrees(t *testing.T) {
	a2l := tooltest.Require(t, "addr2line")
	for _, e := range encodings {
		t.Run(e.name, func(t *testing.T) {
			path := writeDemo(t, e.opts)
			img, err := elfimage.Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer img.Close()
			tab, err := img.LineTable()
			if err != nil {
				t.Fatal(err)
			}
			var addrs []string
			var want []string
			for _, s := range tab.Sequences {
				for _, r := range s.Rows {
					addrs = append(addrs, fmt.Sprintf("%#x", r.Address))
					p, err := img.ProcedureAt(r.Address)
					if err != nil {
						t.Fatal(err)
					}
					pos, err := img.PositionAt(r.Address)
					if err != nil {
						t.Fatal(err)
					}
					if pos.Line != int(r.Line) || pos.Column != int(r.Column) {
						t.Errorf("%#x: position %v, row %d:%d", r.Address, pos, r.Line, r.Column)
					}
					want = append(want, p.Name, fmt.Sprintf("%s:%d", pos.File, pos.Line))
				}
			}
			if len(addrs) < 50 {
				t.Fatalf("only %d rows", len(addrs))
			}
			// Our own DIE reader finds the parameters and their locations
			// in every encoding.
			procs, _ := img.Procedures()
			for _, p := range procs {
				if p.Name != "tak" {
					continue
				}
				sub, err := img.SubprogramAt(p.Start + 1)
				if err != nil || sub.Name != "tak" || len(sub.Params) != 3 || len(sub.FrameBase) == 0 {
					t.Fatalf("SubprogramAt(tak) = %+v, %v", sub, err)
				}
				for i, want := range []string{"x", "y", "z"} {
					if sub.Params[i].Name != want || len(sub.Params[i].Location) == 0 {
						t.Errorf("tak parameter %d: %+v", i, sub.Params[i])
					}
				}
			}
			out, err := exec.Command(a2l, append([]string{"-f", "-e", path}, addrs...)...).Output()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				// addr2line appends " (discriminator N)" to some lines.
				got = append(got, strings.SplitN(sc.Text(), " (", 2)[0])
			}
			if len(got) != len(want) {
				t.Fatalf("addr2line printed %d lines, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("address %s: addr2line says %q, we say %q", addrs[i/2], got[i], want[i])
				}
			}
		})
	}
}

// TestFramesInterpAgrees: readelf --debug-dump=frames-interp and our CFI
// reader give the same CFA rule and the rules of the return address and of
// every saved register for every row of every FDE, in .eh_frame and
// .debug_frame, for the demo of the running architecture.
func TestFramesInterpAgrees(t *testing.T) {
	tooltest.Require(t, "readelf")
	for _, e := range encodings {
		if e.opts.DebugFrame {
			t.Run(e.name, func(t *testing.T) { framesInterpAgree(t, e.opts) })
		}
	}
	opts := elfimage.LinkOptions{DebugFrame: true}
	framesInterpAgree(t, opts)
}

func framesInterpAgree(t *testing.T, opts elfimage.LinkOptions) {
	path := writeDemo(t, opts)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := readelf.Run(t, raw, "--debug-dump=frames-interp")
	entries, err := readelf.ParseFramesInterp(out)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]*frame.Section{}
	eh := f.Section(".eh_frame")
	ehData, _ := eh.Data()
	sections[".eh_frame"] = frame.NewEHFrame(ehData, eh.Addr, binary.LittleEndian, 8)
	df, _ := f.Section(".debug_frame").Data()
	sections[".debug_frame"] = frame.NewDebugFrame(df, binary.LittleEndian, 8)
	// The demo is the running architecture's: readelf names its registers
	// (x86-64: rbp, rsp, rip, ...; AArch64: x29, sp, ...) and calls the
	// return-address column (x86-64 16, AArch64 x30) "ra".
	regName := readelfRegName(demoArch)
	rows, cols := 0, 0
	for _, ent := range entries {
		if ent.IsCIE {
			continue
		}
		sec := sections[ent.Section]
		if sec == nil {
			t.Fatalf("unexpected section %q", ent.Section)
		}
		fde, err := sec.FDEAt(ent.Offset)
		if err != nil {
			t.Fatalf("%s FDE at %#x: %v", ent.Section, ent.Offset, err)
		}
		ours, err := frame.Table(&fde)
		if err != nil {
			t.Fatal(err)
		}
		var nonEmpty []frame.Row
		for _, r := range ours {
			if r.Loc != r.End {
				nonEmpty = append(nonEmpty, r)
			}
		}
		if len(nonEmpty) != len(ent.Rows) {
			t.Errorf("%s FDE at %#x: readelf shows %d rows, we decode %d", ent.Section, ent.Offset, len(ent.Rows), len(nonEmpty))
			continue
		}
		for i, r := range nonEmpty {
			theirs := ent.Rows[i]
			if theirs.Loc != r.Loc {
				t.Errorf("%s FDE %#x row %d: readelf at %#x, ours at %#x", ent.Section, ent.Offset, i, theirs.Loc, r.Loc)
			}
			if got, want := r.CFA.Format(regName), theirs.Cols["CFA"]; got != want {
				t.Errorf("%s FDE %#x row %#x: CFA %q, readelf %q", ent.Section, ent.Offset, r.Loc, got, want)
			}
			// Every register column readelf shows.
			for name, want := range theirs.Cols {
				if name == "CFA" {
					continue
				}
				reg := -1
				if name == "ra" { // readelf's name for the return-address column
					reg = int(demoArch.RA)
				}
				for i := 0; i < int(demoArch.RA); i++ {
					if regName(arch.Reg(i)) == name {
						reg = i
					}
				}
				if reg < 0 {
					t.Errorf("%s FDE %#x: unknown readelf column %q", ent.Section, ent.Offset, name)
					continue
				}
				if got := r.Rule(arch.Reg(reg)).Format(regName); got != want {
					t.Errorf("%s FDE %#x row %#x: %s %q, readelf %q", ent.Section, ent.Offset, r.Loc, name, got, want)
				}
				cols++
			}
			rows++
		}
	}
	if rows < 40 || cols < 2*rows {
		t.Errorf("compared only %d rows and %d register columns", rows, cols)
	}
}

// TestGDBReadsImage: gdb reads the image's symbols, line table and
// parameter DIEs as a symbol file.
func TestGDBReadsImage(t *testing.T) {
	gdb := tooltest.Require(t, "gdb")
	path := writeDemo(t, elfimage.LinkOptions{})
	out, err := tooltest.RunTool(t, exec.Command(gdb, "-q", "-nx", "-batch",
		"-ex", "info line fib", "-ex", "info scope tak", "-ex", "info address ack", "-ex", "list inner",
		path), 3*time.Minute)
	if err != nil {
		t.Fatalf("gdb: %v\n%s", err, out)
	}
	fibLine := 1 + bytes.Count(scheme.DemoSource[:bytes.Index(scheme.DemoSource, []byte("(define (fib"))], []byte("\n"))
	for _, want := range []string{
		fmt.Sprintf(`Line %d of "%s" starts at address`, fibLine, filepath.Join(filepath.Dir(path), "demo.scm")),
		"Symbol x is", "Symbol y is", "Symbol z is", "DW_OP_fbreg -24", "DW_OP_fbreg -40",
		`Symbol "ack" is a function at address`,
		"(define (inner a b)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("gdb output lacks %q:\n%s", want, out)
		}
	}
}

// TestLinkAlignment: procedure and datum alignments up to the page are
// honoured at link time and, since the loader maps at a page boundary, at
// run time; larger ones are refused.
func TestLinkAlignment(t *testing.T) {
	ret := []byte{0xc3}
	m := &elfimage.Module{
		File: "align.s",
		Procs: []*elfimage.Proc{
			{Name: "a", Code: []byte{0x90, 0xc3}},
			{Name: "b", Code: ret, Align: 64},
			{Name: "c", Code: ret, Align: 4096},
		},
		ROData: []*elfimage.Datum{{Name: "x", Bytes: []byte{1}, Align: 1}, {Name: "y", Bytes: []byte{2}, Align: 32}},
		Data:   []*elfimage.Datum{{Name: "p", Bytes: make([]byte, 8), Align: 16, Relocs: []elfimage.Reloc{{Type: elfimage.RelocAbs64, Symbol: "c"}}}},
	}
	b, err := elfimage.Link(m, elfimage.LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	im, err := elfimage.Load("align.elf", b, &elfimage.LoadOptions{Arch: arch.X86_64}) // an x86-64 module, never run
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	procs, _ := im.Procedures()
	for _, p := range procs {
		al := map[string]uint64{"a": 16, "b": 64, "c": 4096}[p.Name]
		if (uint64(im.Base())+p.Start)%al != 0 {
			t.Errorf("%s at run-time %#x, want %d-aligned", p.Name, uint64(im.Base())+p.Start, al)
		}
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	text, _ := f.Section(".text").Data()
	// The gaps between procedures are int3, so a stray jump traps.
	for i := 2; i < 64; i++ {
		if text[i] != 0xcc {
			t.Fatalf(".text[%d] = %#x, want int3 padding", i, text[i])
		}
	}
	for _, s := range f.Sections[1:] {
		if s.Addralign > 1 && s.Addr%s.Addralign != 0 {
			t.Errorf("section %s at %#x not aligned to %d", s.Name, s.Addr, s.Addralign)
		}
	}
	m.Procs[1].Align = 8192
	if _, err := elfimage.Link(m, elfimage.LinkOptions{}); err == nil {
		t.Errorf("alignment 8192 (above the page size) accepted")
	}
}

// TestLinkRefusesInvalidModels: the linker returns an error, never a
// broken image, for a model that cannot be laid out as given.
func TestLinkRefusesInvalidModels(t *testing.T) {
	valid := func() *elfimage.Module {
		return &elfimage.Module{
			File:  "m.s",
			Entry: "f",
			Procs: []*elfimage.Proc{{Name: "f", Code: []byte{0xe8, 0, 0, 0, 0, 0xc3},
				Relocs: []elfimage.Reloc{{Offset: 1, Type: elfimage.RelocPC32, Symbol: "g", Addend: -4}},
				Lines:  []elfimage.LineRow{{Offset: 0, Line: 1, Column: 1}, {Offset: 5, Line: 2, Column: 1}}},
				{Name: "g", Code: []byte{0xc3}}},
			Data: []*elfimage.Datum{{Name: "tab", Bytes: make([]byte, 8), Relocs: []elfimage.Reloc{{Type: elfimage.RelocAbs64, Symbol: "g"}}}},
		}
	}
	if _, err := elfimage.Link(valid(), elfimage.LinkOptions{}); err != nil {
		t.Fatalf("valid model refused: %v", err)
	}
	for name, breakIt := range map[string]func(m *elfimage.Module){
		"no procedures":         func(m *elfimage.Module) { m.Procs = nil },
		"duplicate symbol":      func(m *elfimage.Module) { m.Procs[1].Name = "f" },
		"datum named like proc": func(m *elfimage.Module) { m.Data[0].Name = "g" },
		"empty code":            func(m *elfimage.Module) { m.Procs[1].Code = nil },
		"unknown symbol":        func(m *elfimage.Module) { m.Procs[0].Relocs[0].Symbol = "nope" },
		"PC32 past the end":     func(m *elfimage.Module) { m.Procs[0].Relocs[0].Offset = 3 },
		"Abs64 in code":         func(m *elfimage.Module) { m.Procs[0].Relocs[0].Type = elfimage.RelocAbs64 },
		"Abs64 past the end":    func(m *elfimage.Module) { m.Data[0].Relocs[0].Offset = 4 },
		"unknown reloc type":    func(m *elfimage.Module) { m.Data[0].Relocs[0].Type = 99 },
		"line row backwards":    func(m *elfimage.Module) { m.Procs[0].Lines[1].Offset = 0; m.Procs[0].Lines[0].Offset = 3 },
		"line row past the end": func(m *elfimage.Module) { m.Procs[0].Lines[1].Offset = 6 },
		"alignment not pow2":    func(m *elfimage.Module) { m.Procs[0].Align = 24 },
		"entry not a procedure": func(m *elfimage.Module) { m.Entry = "tab" },
		"CFI past the end":      func(m *elfimage.Module) { m.Procs[1].CFI = []frame.Insn{{PC: 5, Op: frame.OpDefCFAOffset, Offset: 16}} },
		"CFI unsorted": func(m *elfimage.Module) {
			m.Procs[0].CFI = []frame.Insn{{PC: 3, Op: frame.OpNop}, {PC: 1, Op: frame.OpNop}}
		},
		"PC32 does not fit": func(m *elfimage.Module) { m.Procs[0].Relocs[0].Addend = 1 << 40 },
	} {
		m := valid()
		breakIt(m)
		if _, err := elfimage.Link(m, elfimage.LinkOptions{}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := elfimage.Link(valid(), elfimage.LinkOptions{DWARF: edwarf.Encoding{Version: 2}}); err == nil {
		t.Errorf("DWARF 2 accepted")
	}
}

// expectedLocals computes, from the compiler's model, what must be live
// at code offset off of p: parameters and the variables of every scope
// containing off, where their live ranges contain off.
func expectedLocals(p *elfimage.Proc, off uint32) []elfimage.Local {
	var out []elfimage.Local
	where := func(v elfimage.Var) []byte {
		if len(v.Live) == 0 {
			return v.Location
		}
		for _, r := range v.Live {
			if off >= r.Start && off < r.End {
				return r.Location
			}
		}
		return nil
	}
	for _, v := range p.Params {
		if l := where(v); l != nil {
			out = append(out, elfimage.Local{Name: v.Name, Param: true, Line: v.Line, Column: v.Column, Location: l})
		}
	}
	var walk func(scopes []*elfimage.Scope, depth int)
	walk = func(scopes []*elfimage.Scope, depth int) {
		for _, sc := range scopes {
			in := false
			for _, r := range sc.Ranges {
				in = in || (off >= r.Start && off < r.End)
			}
			if !in {
				continue
			}
			for _, v := range sc.Vars {
				if l := where(v); l != nil {
					out = append(out, elfimage.Local{Name: v.Name, Depth: depth, Line: v.Line, Column: v.Column, Location: l})
				}
			}
			walk(sc.Scopes, depth+1)
		}
	}
	walk(p.Scopes, 1)
	return out
}

// TestLocalsMatchModel: for every byte of every procedure of the example
// programs, in every DWARF encoding, the runtime's Locals (read back from
// the image's DIEs, lexical blocks and location lists) equal what the
// compiler said, and Procedure (read from the procedure table) gives the
// arity, names, defaults, docstring and properties it was given.
func TestLocalsMatchModel(t *testing.T) {
	for _, file := range []string{"demo.scm", "scopes.scm"} {
		src, err := os.ReadFile(filepath.Join("lang", "scheme", "testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range encodings {
			t.Run(file+"/"+e.name, func(t *testing.T) {
				m, err := scheme.Compile(file, src)
				if err != nil {
					t.Fatal(err)
				}
				b, err := elfimage.Link(m, e.opts)
				if err != nil {
					t.Fatal(err)
				}
				im, err := elfimage.Load(file, b, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer im.Close()
				procs, _ := im.Procedures()
				start := map[string]uint64{}
				for _, p := range procs {
					start[p.Name] = p.Start
				}
				checked := 0
				for _, p := range m.Procs {
					base := start[p.Name]
					got, err := im.Procedure(base)
					if err != nil {
						t.Fatal(err)
					}
					if got.Name != p.Name || got.Size != uint64(len(p.Code)) || got.Doc != p.Doc || len(got.Args) != len(p.Params) || len(got.Properties) != len(p.Properties) {
						t.Errorf("Procedure(%s) = %+v", p.Name, got)
					}
					for i, v := range p.Params {
						if i < len(got.Args) && got.Args[i] != v.Name {
							t.Errorf("%s: argument %d is %q, want %q", p.Name, i, got.Args[i], v.Name)
						}
						if v.Optional && (i < got.Required || got.Defaults[i-got.Required] != v.Default) {
							t.Errorf("%s: optional %s: Procedure says required %d, defaults %q; want default %q", p.Name, v.Name, got.Required, got.Defaults, v.Default)
						}
					}
					for i, pr := range p.Properties {
						if i < len(got.Properties) && got.Properties[i] != pr {
							t.Errorf("%s: property %d %+v, want %+v", p.Name, i, got.Properties[i], pr)
						}
					}
					if p.Internal {
						continue
					}
					for off := uint32(0); off < uint32(len(p.Code)); off++ {
						want := expectedLocals(p, off)
						have, err := im.Locals(base + uint64(off))
						if err != nil {
							t.Fatalf("%s+%#x: %v", p.Name, off, err)
						}
						if fmt.Sprint(have) != fmt.Sprint(want) {
							t.Fatalf("%s+%#x: Locals\n  %+v\nwant\n  %+v", p.Name, off, have, want)
						}
						checked += len(want)
					}
				}
				if checked < 1000 {
					t.Errorf("only %d live variables checked", checked)
				}
			})
		}
	}
}

// TestDwarfdumpStatistics: llvm-dwarfdump --statistics counts a location
// for every variable and parameter, in every DWARF encoding.
func TestDwarfdumpStatistics(t *testing.T) {
	dd := tooltest.Require(t, "llvm-dwarfdump", "llvm-dwarfdump-14")
	for _, e := range encodings {
		t.Run(e.name, func(t *testing.T) {
			out, err := exec.Command(dd, "--statistics", writeDemo(t, e.opts)).Output()
			if err != nil {
				t.Fatal(err)
			}
			var stats map[string]any
			if err := json.Unmarshal(out, &stats); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			num := func(k string) float64 { v, _ := stats[k].(float64); return v }
			if num("#source variables") < 5 || num("#source variables with location") != num("#source variables") {
				t.Errorf("variables: %v with location of %v", num("#source variables with location"), num("#source variables"))
			}
			if num("#params") < 10 || num("#params with binary location") != num("#params") {
				t.Errorf("params: %v with location of %v", num("#params with binary location"), num("#params"))
			}
		})
	}
}

// TestSplitScope: a scope in two pieces gets DW_AT_ranges; Locals sees
// its variable in both pieces and not in the gap; llvm-dwarfdump accepts
// it; a nested scope outside its parent is refused.
func TestSplitScope(t *testing.T) {
	code := make([]byte, 40)
	for i := range code {
		code[i] = 0x90
	}
	code[39] = 0xc3
	slot := []byte{byte(edwarf.DW_OP_fbreg), 0x68} // fbreg(-24)
	m := &elfimage.Module{File: "split.s", Procs: []*elfimage.Proc{{
		Name: "f", Code: code, Lines: []elfimage.LineRow{{Line: 1, Column: 1}},
		Scopes: []*elfimage.Scope{{
			Ranges: []elfimage.CodeRange{{Start: 4, End: 10}, {Start: 20, End: 30}},
			Vars: []elfimage.Var{{Name: "v", Line: 2, Column: 3, Live: []elfimage.LiveRange{
				{Start: 5, End: 10, Location: slot}, {Start: 20, End: 25, Location: []byte{byte(edwarf.DW_OP_reg0) + 3}}}}},
		}},
	}}}
	for _, e := range encodings {
		b, err := elfimage.Link(m, e.opts)
		if err != nil {
			t.Fatalf("%s: %v", e.name, err)
		}
		im, err := elfimage.Load("split.elf", b, &elfimage.LoadOptions{Arch: arch.X86_64}) // an x86-64 module, never run
		if err != nil {
			t.Fatal(err)
		}
		base := uint64(0x1000)
		for off, want := range map[uint64]string{4: "", 5: "v fbreg", 9: "v fbreg", 10: "", 15: "", 20: "v reg3", 24: "v reg3", 25: "", 30: ""} {
			ls, err := im.Locals(base + off)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if len(ls) == 1 {
				got = ls[0].Name + " fbreg"
				if ls[0].Location[0] != byte(edwarf.DW_OP_fbreg) {
					got = ls[0].Name + " reg3"
				}
			}
			if got != want || len(ls) > 1 {
				t.Errorf("%s: Locals(f+%d) = %+v, want %q", e.name, off, ls, want)
			}
		}
		im.Close()
		if dd := tooltest.Optional(t, "llvm-dwarfdump"); dd != "" {
			path := filepath.Join(t.TempDir(), "split.elf")
			os.WriteFile(path, b, 0o644)
			if out, err := exec.Command(dd, "--verify", path).CombinedOutput(); err != nil || !bytes.Contains(out, []byte("No errors.")) {
				t.Errorf("%s: llvm-dwarfdump --verify: %v\n%s", e.name, err, out)
			}
		}
	}
	m.Procs[0].Scopes[0].Scopes = []*elfimage.Scope{{Ranges: []elfimage.CodeRange{{Start: 8, End: 22}}}}
	if _, err := elfimage.Link(m, elfimage.LinkOptions{}); err == nil {
		t.Errorf("a nested scope spanning its parent's gap was accepted")
	}
}
