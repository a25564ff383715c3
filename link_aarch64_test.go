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

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// a64Words encodes AArch64 instruction words little-endian.
func a64Words(words ...uint32) []byte {
	b := make([]byte, 0, 4*len(words))
	for _, w := range words {
		b = binary.LittleEndian.AppendUint32(b, w)
	}
	return b
}

// aarch64Module is a module of hand-written AArch64 code (assembled with
// aarch64-linux-gnu-as, checked with aarch64-linux-gnu-objdump -d):
//
//	a64_add(a, b):   0: add x0, x0, x1       4: ret
//	a64_twice(a, b): 0: stp x29, x30, [sp, #-16]!   4: mov x29, sp
//	                 8: add x0, x0, x1      12: add x0, x0, x0
//	                16: ldp x29, x30, [sp], #16     20: ret
//
// with line rows, CFI (a64_twice saves its frame record: CFA = sp+16, x29
// at CFA-16, x30 at CFA-8 from offset 4 until the ldp), and a data word
// holding the address of a64_add (an R_AARCH64_RELATIVE relocation at load
// time).
func aarch64Module(a *arch.Arch) *elfimage.Module {
	return &elfimage.Module{
		Arch: a,
		File: "/src/a64.scm",
		Procs: []*elfimage.Proc{
			{Name: "a64_add", Line: 1, Code: a64Words(0x8b010000, 0xd65f03c0),
				Params: []elfimage.Var{{Name: "a"}, {Name: "b"}},
				Lines:  []elfimage.LineRow{{Offset: 0, Line: 2, IsStmt: true}, {Offset: 4, Line: 3, IsStmt: true}},
				CFI:    []frame.Insn{}},
			{Name: "a64_twice", Line: 10, Code: a64Words(0xa9bf7bfd, 0x910003fd, 0x8b010000, 0x8b000000, 0xa8c17bfd, 0xd65f03c0),
				Params: []elfimage.Var{{Name: "a"}, {Name: "b"}},
				Lines: []elfimage.LineRow{{Offset: 0, Line: 10, IsStmt: true}, {Offset: 8, Line: 11, IsStmt: true, PrologueEnd: true},
					{Offset: 12, Line: 12, IsStmt: true}, {Offset: 16, Line: 13, IsStmt: true}},
				CFI: []frame.Insn{
					{PC: 4, Op: frame.OpDefCFAOffset, Offset: 16},
					{PC: 4, Op: frame.OpOffset, Reg: arch.AArch64_FP, Offset: -16},
					{PC: 4, Op: frame.OpOffset, Reg: arch.AArch64_LR, Offset: -8},
					{PC: 20, Op: frame.OpDefCFAOffset, Offset: 0},
					{PC: 20, Op: frame.OpRestore, Reg: arch.AArch64_FP},
					{PC: 20, Op: frame.OpRestore, Reg: arch.AArch64_LR},
				}},
		},
		Data: []*elfimage.Datum{{Name: "a64_table", Bytes: make([]byte, 8),
			Relocs: []elfimage.Reloc{{Offset: 0, Type: elfimage.RelocAbs64, Symbol: "a64_add"}}}},
	}
}

// linkAArch64 links aarch64Module and writes the image into a test
// directory.
func linkAArch64(t *testing.T, opts elfimage.LinkOptions) (string, []byte) {
	t.Helper()
	b, err := elfimage.Link(aarch64Module(arch.AArch64), opts)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "a64.elf")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, b
}

// TestLinkAArch64 links hand-written AArch64 code and checks what the
// host's tools (which read AArch64 ELF on any host) see: EM_AARCH64 with
// 4 KiB-aligned segments, .eh_frame as SHT_PROGBITS, one
// R_AARCH64_RELATIVE relocation, readelf -wF's rows with x30 as the
// return-address column, llvm-dwarfdump --verify clean for every
// encoding, and addr2line's lines.
func TestLinkAArch64(t *testing.T) {
	path, b := linkAArch64(t, elfimage.LinkOptions{})
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if f.Machine != elf.EM_AARCH64 || f.Type != elf.ET_DYN {
		t.Errorf("header %v %v, want ET_DYN EM_AARCH64", f.Type, f.Machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && (p.Align != 4096 || p.Off%4096 != 0 || p.Vaddr != p.Off) {
			t.Errorf("PT_LOAD %+v: want 4 KiB aligned, offset = address", p.ProgHeader)
		}
	}
	if eh := f.Section(".eh_frame"); eh == nil || eh.Type != elf.SHT_PROGBITS {
		t.Errorf(".eh_frame %+v, want SHT_PROGBITS (AArch64 has no unwind section type)", eh)
	}
	rela := f.Section(".rela.dyn")
	if rela == nil {
		t.Fatal("no .rela.dyn")
	}
	rb, err := rela.Data()
	if err != nil {
		t.Fatal(err)
	}
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	addr := map[string]uint64{}
	for _, s := range syms {
		addr[s.Name] = s.Value
	}
	if len(rb) != 24 || elf.R_AARCH64(elf.R_TYPE64(binary.LittleEndian.Uint64(rb[8:]))) != elf.R_AARCH64_RELATIVE ||
		binary.LittleEndian.Uint64(rb) != addr["a64_table"] || binary.LittleEndian.Uint64(rb[16:]) != addr["a64_add"] {
		t.Errorf(".rela.dyn % x: want one R_AARCH64_RELATIVE at a64_table (%#x), addend a64_add (%#x)", rb, addr["a64_table"], addr["a64_add"])
	}

	text := f.Section(".text")
	code, err := text.Data()
	if err != nil {
		t.Fatal(err)
	}
	if gap := code[addr["a64_add"]+8-text.Addr : addr["a64_twice"]-text.Addr]; len(gap) != 8 || !bytes.Equal(gap, make([]byte, 8)) {
		t.Errorf("gap between a64_add and a64_twice % x, want two UDF #0 words", gap)
	}

	re := tooltest.Require(t, "readelf")
	out, err := exec.Command(re, "-W", "-wF", "-r", path).CombinedOutput()
	if err != nil {
		t.Fatalf("readelf: %v\n%s", err, out)
	}
	twice := addr["a64_twice"]
	hex := func(v uint64) string { return fmt.Sprintf("%016x", v) }
	for _, want := range []string{
		"R_AARCH64_RELATIVE",
		`CIE "zR" cf=4 df=-8 ra=30`,
		hex(twice) + " sp+0     u     u",
		hex(twice+4) + " sp+16    c-16  c-8",
		hex(twice+20) + " sp+0     u     u",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("readelf -wF -r lacks %q:\n%s", want, out)
		}
	}
	if bytes.Contains(out, []byte("Warning")) {
		t.Errorf("readelf warns:\n%s", out)
	}

	dd := tooltest.Require(t, "llvm-dwarfdump", "llvm-dwarfdump-14")
	for _, e := range encodings {
		p, _ := linkAArch64(t, e.opts)
		out, err := exec.Command(dd, "--verify", p).CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("No errors.")) {
			t.Errorf("%s: llvm-dwarfdump --verify: %v\n%s", e.name, err, out)
		}
	}

	a2l := tooltest.Require(t, "addr2line")
	out, err = exec.Command(a2l, "-f", "-e", path, fmt.Sprintf("%#x", twice+12), fmt.Sprintf("%#x", addr["a64_add"]+4)).CombinedOutput()
	if err != nil {
		t.Fatalf("addr2line: %v\n%s", err, out)
	}
	if want := "a64_twice\n/src/a64.scm:12\na64_add\n/src/a64.scm:3\n"; string(out) != want {
		t.Errorf("addr2line: %q, want %q", out, want)
	}
}

// TestRebaseAArch64: Rebase moves the offset and the addend of the
// R_AARCH64_RELATIVE relocation with the rest of the image, and
// addr2line reads the rebased file at the new addresses.
func TestRebaseAArch64(t *testing.T) {
	_, b := linkAArch64(t, elfimage.LinkOptions{})
	const base = 0x7f1234560000
	orig, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	text := orig.Section(".text").Addr // a64_add is the first procedure
	r, err := elfimage.Rebase(b, base)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(r))
	if err != nil {
		t.Fatal(err)
	}
	rb, err := f.Section(".rela.dyn").Data()
	if err != nil {
		t.Fatal(err)
	}
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	addr := map[string]uint64{}
	for _, s := range syms {
		addr[s.Name] = s.Value
	}
	if addr["a64_add"] != base+text {
		t.Errorf("a64_add at %#x after Rebase, want %#x", addr["a64_add"], base+text)
	}
	if off, addend := binary.LittleEndian.Uint64(rb), binary.LittleEndian.Uint64(rb[16:]); off != addr["a64_table"] || addend != addr["a64_add"] {
		t.Errorf("rebased R_AARCH64_RELATIVE: offset %#x addend %#x, want %#x %#x", off, addend, addr["a64_table"], addr["a64_add"])
	}
	path := filepath.Join(t.TempDir(), "rebased.elf")
	if err := os.WriteFile(path, r, 0o644); err != nil {
		t.Fatal(err)
	}
	a2l := tooltest.Require(t, "addr2line")
	out, err := exec.Command(a2l, "-f", "-e", path, fmt.Sprintf("%#x", addr["a64_twice"]+16)).CombinedOutput()
	if err != nil || string(out) != "a64_twice\n/src/a64.scm:13\n" {
		t.Errorf("addr2line on the rebased image: %v %q", err, out)
	}
}
