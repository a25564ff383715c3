package elfimage_test

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// relocModule is an AArch64 module whose procedure caller uses every
// AArch64 instruction relocation:
//
//	0:  bl callee                    RelocAArch64Call26
//	4:  b callee                     RelocAArch64Jump26
//	8:  adrp x0, msg                 RelocAArch64AdrPage21
//	12: add x0, x0, :lo12:msg        RelocAArch64AddLo12
//	16: adr x1, msg                  RelocAArch64Adr21
//	20: ret
func relocModule() *elfimage.Module {
	return &elfimage.Module{
		Arch: arch.AArch64,
		File: "/src/reloc.scm",
		Procs: []*elfimage.Proc{
			{Name: "callee", Code: a64Words(0xd65f03c0)},
			{Name: "caller", Code: a64Words(0x94000000, 0x14000000, 0x90000000, 0x91000000, 0x10000001, 0xd65f03c0),
				Relocs: []elfimage.Reloc{
					{Offset: 0, Type: elfimage.RelocAArch64Call26, Symbol: "callee"},
					{Offset: 4, Type: elfimage.RelocAArch64Jump26, Symbol: "callee"},
					{Offset: 8, Type: elfimage.RelocAArch64AdrPage21, Symbol: "msg"},
					{Offset: 12, Type: elfimage.RelocAArch64AddLo12, Symbol: "msg", Addend: 8},
					{Offset: 16, Type: elfimage.RelocAArch64Adr21, Symbol: "msg", Addend: 8},
				}},
		},
		Data: []*elfimage.Datum{{Name: "pad", Bytes: make([]byte, 40)}, {Name: "msg", Bytes: []byte("0123456789abcdef")}},
	}
}

// TestLinkAArch64Relocations links relocModule and checks the patched
// instructions two ways: decoded here from the ARM ARM's field layouts,
// and as aarch64-linux-gnu-objdump -d shows them (targets named by the
// symbol table).
func TestLinkAArch64Relocations(t *testing.T) {
	b, err := elfimage.Link(relocModule(), elfimage.LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	syms, _ := f.Symbols()
	at := map[string]uint64{}
	for _, s := range syms {
		at[s.Name] = s.Value
	}
	text := f.Section(".text")
	code, _ := text.Data()
	caller := at["caller"]
	w := func(off uint64) uint32 { return binary.LittleEndian.Uint32(code[caller-text.Addr+off:]) }
	sext := func(v uint32, bits uint) int64 { return int64(int32(v<<(32-bits)) >> (32 - bits)) }
	adrImm := func(w uint32) int64 { return sext((w>>5&0x7ffff)<<2|w>>29&3, 21) }
	if got := caller + uint64(4*sext(w(0)&0x3ffffff, 26)); w(0)>>26 != 0x25 || got != at["callee"] {
		t.Errorf("bl %#x: target %#x, want callee %#x", w(0), got, at["callee"])
	}
	if got := caller + 4 + uint64(4*sext(w(4)&0x3ffffff, 26)); w(4)>>26 != 0x05 || got != at["callee"] {
		t.Errorf("b %#x: target %#x, want callee %#x", w(4), got, at["callee"])
	}
	msg := at["msg"] + 8
	page := (caller+8)&^0xfff + uint64(adrImm(w(8))<<12)
	if lo := uint64(w(12) >> 10 & 0xfff); w(8)&0x9f00001f != 0x90000000 || page+lo != msg {
		t.Errorf("adrp %#x + add %#x: %#x, want msg+8 %#x", w(8), w(12), page+lo, msg)
	}
	if got := caller + 16 + uint64(adrImm(w(16))); w(16)&0x9f00001f != 0x10000001 || got != msg {
		t.Errorf("adr %#x: %#x, want msg+8 %#x", w(16), got, msg)
	}

	objdump := tooltest.Require(t, "aarch64-linux-gnu-objdump")
	path := filepath.Join(t.TempDir(), "reloc.elf")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(objdump, "-d", path).CombinedOutput()
	if err != nil {
		t.Fatalf("objdump: %v\n%s", err, out)
	}
	hex := func(v uint64) string { return strconv.FormatUint(v, 16) }
	for _, want := range []string{"bl\t" + hex(at["callee"]) + " <callee>", "b\t" + hex(at["callee"]) + " <callee>",
		"adrp\tx0, " + hex(msg&^0xfff), "add\tx0, x0, #0x" + hex(msg&0xfff), "adr\tx1, " + hex(msg) + " <msg+0x8>"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("objdump -d has no %q:\n%s", want, out)
		}
	}
}

// TestLinkAArch64RelocationErrors checks that relocations that cannot be
// resolved are *LinkError values naming the procedure (or datum), the
// offset and the AAELF64 relocation: out of range, misaligned, outside
// the code, in data, in a module of another architecture.
func TestLinkAArch64RelocationErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(m *elfimage.Module)
		want string
	}{
		{"adr out of range", func(m *elfimage.Module) {
			// 2 MiB of read-only data between the code and far
			// (.rodata follows .text): ADR reaches ±1 MiB.
			m.ROData = []*elfimage.Datum{{Name: "big", Bytes: make([]byte, 2<<20)}, {Name: "far", Bytes: []byte{1}}}
			m.Procs[1].Relocs[4].Symbol = "far"
		}, `link proc caller: R_AARCH64_ADR_PREL_LO21 relocation at 0x10 to "far": distance`},
		{"misaligned", func(m *elfimage.Module) { m.Procs[1].Relocs[0].Offset = 2 },
			"link proc caller: R_AARCH64_CALL26 relocation at 0x2 to \"callee\": offset is not 4-byte aligned"},
		{"past the end", func(m *elfimage.Module) { m.Procs[1].Relocs[1].Offset = 24 },
			"link proc caller: R_AARCH64_JUMP26 relocation at 0x18 to \"callee\": runs past the end (0x18 bytes)"},
		{"in data", func(m *elfimage.Module) {
			m.Data[0].Relocs = []elfimage.Reloc{{Offset: 0, Type: elfimage.RelocAArch64AddLo12, Symbol: "msg"}}
		}, "link datum pad: R_AARCH64_ADD_ABS_LO12_NC relocation at 0x0 to \"msg\": instruction relocations are only allowed in Proc.Relocs"},
		{"x86-64 module", func(m *elfimage.Module) { m.Arch = arch.X86_64 },
			"link proc caller: R_AARCH64_CALL26 relocation at 0x0 to \"callee\": an AArch64 relocation in a EM_X86_64 module"},
	} {
		m := relocModule()
		tc.edit(m)
		_, err := elfimage.Link(m, elfimage.LinkOptions{})
		var le *elfimage.LinkError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Link = %v, want a *LinkError with %q", tc.name, err, tc.want)
		}
	}
}
