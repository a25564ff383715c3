//go:build amd64

// The symbol files here hold x86-64 CFI: their machine is the running
// program's, so they run on amd64 only (symfile_arm64_test.go has the
// AArch64 counterpart).

package gdbjit

import (
	"bytes"
	"crypto/sha1"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/internal/readelf"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// signalCIE is the standard CIE with the signal-frame augmentation.
var signalCIE = func() *frame.CIE {
	c := frame.StandardCIE(arch.X86_64)
	c.Signal = true
	return &c
}()

// cfiProcs exercise every way a procedure can come with CFI: a frame
// built with push rbp; mov rbp, rsp, a leaf that keeps the CIE's row
// (empty non-nil CFI), none (nil CFI: no FDE), and a CIE of its own.
var cfiProcs = []Proc{
	{Name: "framed", Addr: 0x7f0000002000, Size: 0x20, File: "/src/a.scm", Line: 1, CFI: []frame.Insn{
		{PC: 1, Op: frame.OpDefCFAOffset, Offset: 16},                    // push rbp
		{PC: 1, Op: frame.OpOffset, Reg: arch.X86_64_RBP, Offset: -16},   //
		{PC: 4, Op: frame.OpDefCFARegister, Reg: arch.X86_64_RBP},        // mov rbp, rsp
		{PC: 0x1f, Op: frame.OpDefCFA, Reg: arch.X86_64_RSP, Offset: 8},  // pop rbp
		{PC: 0x1f, Op: frame.OpRestore, Reg: arch.X86_64_RBP, Offset: 0}, //
	}},
	{Name: "leaf", Addr: 0x7f0000002020, Size: 6, CFI: []frame.Insn{}},
	{Name: "nocfi", Addr: 0x7f0000002030, Size: 6},
	{Name: "trap", Addr: 0x7f0000002040, Size: 8, CFI: []frame.Insn{}, CIE: signalCIE},
}

// cfiProcsWithCFI are the names of the procedures of cfiProcs with an FDE.
var cfiProcsWithCFI = []string{"framed", "leaf", "trap"}

// checkBuildID checks that symbol file b has one .note.gnu.build-id
// section holding one NT_GNU_BUILD_ID note of owner "GNU" with a 20-byte
// descriptor equal to the SHA-1 of b with that descriptor zeroed
// (recomputed here from the ELF section table), and returns the ID in
// hex.
func checkBuildID(t *testing.T, b []byte) string {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var notes []*elf.Section
	for _, s := range f.Sections {
		if s.Type == elf.SHT_NOTE {
			notes = append(notes, s)
		}
	}
	if len(notes) != 1 || notes[0].Name != ".note.gnu.build-id" || notes[0].Flags&elf.SHF_ALLOC != 0 || notes[0].Addr != 0 {
		t.Fatalf("note sections %v, want one non-ALLOC .note.gnu.build-id at address 0", notes)
	}
	n, err := notes[0].Data()
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	if len(n) != 36 || le.Uint32(n[0:]) != 4 || le.Uint32(n[4:]) != 20 || le.Uint32(n[8:]) != 3 || string(n[12:16]) != "GNU\x00" {
		t.Fatalf("build-id note % x, want namesz 4, descsz 20, type NT_GNU_BUILD_ID (3), owner GNU", n)
	}
	zeroed := bytes.Clone(b)
	off := notes[0].Offset + 16
	clear(zeroed[off : off+20])
	if sum := sha1.Sum(zeroed); !bytes.Equal(sum[:], n[16:]) {
		t.Errorf("build ID %x, want the SHA-1 of the file with the ID zeroed, %x", n[16:], sum)
	}
	return hex.EncodeToString(n[16:])
}

// readelfFrames runs readelf --debug-dump=frames-interp (and frames, for
// its complaints) on the symbol file at path and returns the FDEs of
// .eh_frame it printed, by pc_begin. It fails the test on any warning.
func readelfFrames(t *testing.T, path string) map[uint64]readelf.InterpEntry {
	t.Helper()
	re := tooltest.Require(t, "readelf")
	var out [2]string
	for i, dump := range []string{"--debug-dump=frames", "--debug-dump=frames-interp"} {
		var stderr bytes.Buffer
		cmd := exec.Command(re, "-W", dump, path)
		cmd.Stderr = &stderr
		b, err := cmd.Output()
		if err != nil || stderr.Len() > 0 || strings.Contains(strings.ToLower(string(b)), "warning") {
			t.Fatalf("readelf %s: %v\n%s%s", dump, err, stderr.String(), b)
		}
		out[i] = string(b)
	}
	entries, err := readelf.ParseFramesInterp(out[1])
	if err != nil {
		t.Fatal(err)
	}
	fdes := map[uint64]readelf.InterpEntry{}
	for _, e := range entries {
		if e.Section == ".eh_frame" && !e.IsCIE {
			fdes[e.PCBegin] = e
		}
	}
	return fdes
}

// dwarfdumpVerify runs llvm-dwarfdump --verify and --eh-frame on the
// symbol file at path: both must accept it, the second printing nFDE
// FDEs.
func dwarfdumpVerify(t *testing.T, path string, nFDE int) {
	t.Helper()
	dd := tooltest.Require(t, "llvm-dwarfdump", "llvm-dwarfdump-14")
	out, err := exec.Command(dd, "--verify", path).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "No errors.") {
		t.Errorf("llvm-dwarfdump --verify: %v\n%s", err, out)
	}
	out, err = exec.Command(dd, "--eh-frame", path).CombinedOutput()
	lo := strings.ToLower(string(out))
	if err != nil || strings.Contains(lo, "error") || strings.Contains(lo, "warning") || strings.Count(string(out), " FDE ") != nFDE {
		t.Errorf("llvm-dwarfdump --eh-frame: %v, want %d FDEs:\n%s", err, nFDE, out)
	}
}

// TestSymfileCFI reads the .eh_frame of a symbol file back with package
// dwarf/frame: one FDE per procedure with CFI (none for nil CFI), over the
// procedure's range, under its CIE, with the rows its instructions
// describe; the section is not loaded, and reads the same whatever
// address it is said to be at (absolute pointers).
func TestSymfileCFI(t *testing.T) {
	b, err := Symfile(cfiProcs)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	s := f.Section(".eh_frame")
	if s == nil {
		t.Fatal("no .eh_frame")
	}
	if s.Type != shtX86_64Unwind || s.Flags&elf.SHF_ALLOC != 0 || s.Addr != 0 {
		t.Errorf(".eh_frame: %v %v at %#x, want SHT_X86_64_UNWIND, not ALLOC, at 0", s.Type, s.Flags, s.Addr)
	}
	data, err := s.Data()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Proc{}
	for _, p := range cfiProcs {
		byName[p.Name] = p
	}
	for _, at := range []uint64{0, 0x7fff00000000} {
		fdes, err := frame.NewEHFrame(data, at, binary.LittleEndian, 8).FDEs()
		if err != nil {
			t.Fatal(err)
		}
		if len(fdes) != len(cfiProcsWithCFI) {
			t.Fatalf("%d FDEs, want %d (%v)", len(fdes), len(cfiProcsWithCFI), cfiProcsWithCFI)
		}
		for i, name := range cfiProcsWithCFI {
			p, fd := byName[name], &fdes[i]
			if fd.Start != p.Addr || fd.Size != p.Size {
				t.Errorf("FDE %d: [%#x, +%#x), want %s [%#x, +%#x)", i, fd.Start, fd.Size, name, p.Addr, p.Size)
			}
			if fd.CIE.Signal != (p.CIE != nil) {
				t.Errorf("FDE of %s: signal frame %v", name, fd.CIE.Signal)
			}
		}
		rows, err := frame.Table(&fdes[0])
		if err != nil {
			t.Fatal(err)
		}
		// framed: CFA rsp+8, rsp+16 (rbp saved at CFA-16), rbp+16, rsp+8.
		type want struct {
			loc uint64
			cfa frame.Rule
			rbp frame.RuleKind
		}
		base := byName["framed"].Addr
		wants := []want{
			{base, frame.Rule{Kind: frame.RuleCFA, Reg: arch.X86_64_RSP, Offset: 8}, frame.RuleUnspecified},
			{base + 1, frame.Rule{Kind: frame.RuleCFA, Reg: arch.X86_64_RSP, Offset: 16}, frame.RuleOffset},
			{base + 4, frame.Rule{Kind: frame.RuleCFA, Reg: arch.X86_64_RBP, Offset: 16}, frame.RuleOffset},
			{base + 0x1f, frame.Rule{Kind: frame.RuleCFA, Reg: arch.X86_64_RSP, Offset: 8}, frame.RuleUnspecified},
		}
		if len(rows) != len(wants) {
			t.Fatalf("framed: %d rows, want %d", len(rows), len(wants))
		}
		for i, w := range wants {
			r := &rows[i]
			if r.Loc != w.loc || !reflect.DeepEqual(r.CFA, w.cfa) || r.Rule(arch.X86_64_RBP).Kind != w.rbp {
				t.Errorf("framed row %d: loc %#x CFA %+v rbp %v, want %#x %+v %v", i, r.Loc, r.CFA, r.Rule(arch.X86_64_RBP).Kind, w.loc, w.cfa, w.rbp)
			}
		}
	}

	// Without any CFI there is no .eh_frame.
	b, err = Symfile([]Proc{{Name: "f", Addr: 0x1000, Size: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if f, err = elf.NewFile(bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	if f.Section(".eh_frame") != nil {
		t.Error(".eh_frame in a symbol file without CFI")
	}
}

// TestSymfileCFITools: readelf prints the .eh_frame rows the CFI
// describes, llvm-dwarfdump verifies the file and parses its .eh_frame,
// and readelf -n shows the build ID that checkBuildID recomputed.
func TestSymfileCFITools(t *testing.T) {
	b, err := Symfile(cfiProcs)
	if err != nil {
		t.Fatal(err)
	}
	id := checkBuildID(t, b)
	path := filepath.Join(t.TempDir(), "sym.elf")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	fdes := readelfFrames(t, path)
	if len(fdes) != len(cfiProcsWithCFI) {
		t.Errorf("readelf printed %d FDEs, want %d", len(fdes), len(cfiProcsWithCFI))
	}
	for _, p := range cfiProcs {
		e, ok := fdes[p.Addr]
		if ok != (p.CFI != nil) {
			t.Errorf("%s: FDE printed %v, want %v", p.Name, ok, p.CFI != nil)
			continue
		}
		if ok && e.PCEnd != p.Addr+p.Size {
			t.Errorf("%s: readelf pc=%#x..%#x, want ..%#x", p.Name, e.PCBegin, e.PCEnd, p.Addr+p.Size)
		}
	}
	var got []string
	for _, r := range fdes[cfiProcs[0].Addr].Rows {
		got = append(got, fmt.Sprintf("%x %s %s %s", r.Loc, r.Cols["CFA"], r.Cols["rbp"], r.Cols["ra"]))
	}
	want := []string{"7f0000002000 rsp+8 u c-8", "7f0000002001 rsp+16 c-16 c-8", "7f0000002004 rbp+16 c-16 c-8", "7f000000201f rsp+8 u c-8"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("readelf rows of framed:\n got %q\nwant %q", got, want)
	}
	dwarfdumpVerify(t, path, len(cfiProcsWithCFI))
	out, err := exec.Command(tooltest.Require(t, "readelf"), "-n", path).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Build ID: "+id) {
		t.Errorf("readelf -n: %v, want Build ID: %s\n%s", err, id, out)
	}
}

// TestSymfileBuildID: the build ID is the SHA-1 of the file, the same for
// the same procedures and different when any of them differs (a name, an
// address, a line, CFI).
func TestSymfileBuildID(t *testing.T) {
	build := func(edit func(ps []Proc)) string {
		ps := slices.Clone(cfiProcs)
		if edit != nil {
			edit(ps)
		}
		b, err := Symfile(ps)
		if err != nil {
			t.Fatal(err)
		}
		return checkBuildID(t, b)
	}
	id := build(nil)
	if again := build(nil); again != id {
		t.Errorf("build ID %s then %s for the same procedures", id, again)
	}
	for name, edit := range map[string]func(ps []Proc){
		"name":    func(ps []Proc) { ps[1].Name = "leaf2" },
		"address": func(ps []Proc) { ps[3].Addr += 8 },
		"line":    func(ps []Proc) { ps[0].Line = 2 },
		"CFI":     func(ps []Proc) { ps[1].CFI = []frame.Insn{{PC: 1, Op: frame.OpDefCFAOffset, Offset: 16}} },
	} {
		if other := build(edit); other == id {
			t.Errorf("%s changed: build ID stays %s", name, id)
		}
	}
}

// TestSymfileRejectsCFI: CFI that cannot be encoded is refused by Symfile
// and by Publisher.Add (so that no flush fails on it), wrapping both
// ErrInvalidProc and frame.ErrInvalid.
func TestSymfileRejectsCFI(t *testing.T) {
	for name, cfi := range map[string][]frame.Insn{
		"unsorted":       {{PC: 4, Op: frame.OpDefCFAOffset, Offset: 16}, {PC: 2, Op: frame.OpDefCFAOffset, Offset: 8}},
		"past the end":   {{PC: 9, Op: frame.OpDefCFAOffset, Offset: 16}},
		"unfactored":     {{PC: 1, Op: frame.OpOffset, Reg: arch.X86_64_RBP, Offset: -12}},
		"restore in CIE": nil, // replaced below: a bad CIE
	} {
		p := Proc{Name: "f", Addr: 0x1000, Size: 8, CFI: cfi}
		if name == "restore in CIE" {
			p.CFI = []frame.Insn{}
			p.CIE = &frame.CIE{CodeAlign: 1, DataAlign: -8, RA: arch.X86_64_RA,
				Initial: []frame.Insn{{Op: frame.OpRestore, Reg: arch.X86_64_RBP}}}
		}
		if _, err := Symfile([]Proc{p}); !errors.Is(err, ErrInvalidProc) || !errors.Is(err, frame.ErrInvalid) {
			t.Errorf("%s: Symfile: %v, want ErrInvalidProc and frame.ErrInvalid", name, err)
		}
		pub := NewPublisher(PublisherOptions{})
		if err := pub.Add(p); !errors.Is(err, ErrInvalidProc) || !errors.Is(err, frame.ErrInvalid) {
			t.Errorf("%s: Publisher.Add: %v, want ErrInvalidProc and frame.ErrInvalid", name, err)
		}
		if st := pub.Stats(); st.Pending != 0 {
			t.Errorf("%s: %d procedures pending after a refused Add", name, st.Pending)
		}
		pub.Close()
	}
}
