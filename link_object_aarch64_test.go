package elfimage_test

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"strings"
	"testing"

	"golang.org/x/arch/arm64/arm64asm"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
)

// TestLinkObjectAArch64DWARF is TestLinkObjectDWARF for AArch64 objects
// (checkObjectDWARF): Go's debug/elf applies their R_AARCH64_ABS32/ABS64
// relocations to the debug sections before decoding; .eh_frame is
// SHT_PROGBITS, every low_pc 4-byte aligned, and the relocation sections
// use only AAELF64 types.
func TestLinkObjectAArch64DWARF(t *testing.T) {
	checkObjectDWARF(t, objectAArch64)
}

// TestLinkObjectAArch64Relocs checks the object's .rela.text against the
// model it was written from: each of the model's instruction relocations
// becomes one ELF relocation at the procedure's offset plus its own, of
// the AAELF64 type of its kind, whose symbol plus addend is the target's
// place (a global procedure's symbol, or the target section's STT_SECTION
// symbol with the target's offset), and the instruction there, decoded
// with arm64asm, is of that kind (BL, B, ADRP, ADD) with its field 0;
// the words between relocations are the model's code.
func TestLinkObjectAArch64Relocs(t *testing.T) {
	m := demoObjectFor(t, arch.AArch64)
	b, err := elfimage.LinkObject(m, elfimage.LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	// place of each model name: section name and offset.
	type place struct {
		sec string
		off uint64
	}
	at := map[string]place{}
	for _, s := range syms {
		if s.Section < elf.SHN_LORESERVE && s.Section != elf.SHN_UNDEF && elf.ST_TYPE(s.Info) != elf.STT_SECTION && !strings.HasPrefix(s.Name, "$") {
			at[s.Name] = place{f.Sections[s.Section].Name, s.Value}
		}
	}
	text, err := f.Section(".text").Data()
	if err != nil {
		t.Fatal(err)
	}
	rels := map[uint64]elf.Rela64{}
	for _, r := range objectRela(t, f, ".rela.text") {
		if _, dup := rels[r.Off]; dup {
			t.Errorf(".rela.text: two relocations at %#x", r.Off)
		}
		rels[r.Off] = r
	}
	kinds := map[elfimage.RelocType]struct {
		typ   elf.R_AARCH64
		op    arm64asm.Op
		field uint32
	}{
		elfimage.RelocAArch64Call26:    {elf.R_AARCH64_CALL26, arm64asm.BL, 0x03ffffff},
		elfimage.RelocAArch64Jump26:    {elf.R_AARCH64_JUMP26, arm64asm.B, 0x03ffffff},
		elfimage.RelocAArch64AdrPage21: {elf.R_AARCH64_ADR_PREL_PG_HI21, arm64asm.ADRP, 3<<29 | 0x7ffff<<5},
		elfimage.RelocAArch64AddLo12:   {elf.R_AARCH64_ADD_ABS_LO12_NC, arm64asm.ADD, 0xfff << 10},
	}
	seen := map[elf.R_AARCH64]int{}
	n := 0
	for _, p := range m.Procs {
		sym := p.LinkName
		if sym == "" {
			sym = p.Name
		}
		pp, ok := at[sym]
		if !ok || pp.sec != ".text" {
			t.Fatalf("%s: no symbol in .text", p.Name)
		}
		code := text[pp.off : pp.off+uint64(len(p.Code))]
		relocated := map[uint32]bool{}
		for _, r := range p.Relocs {
			relocated[r.Offset] = true
			k, ok := kinds[r.Type]
			if !ok {
				t.Errorf("%s+%#x: model relocation type %d", p.Name, r.Offset, r.Type)
				continue
			}
			off := pp.off + uint64(r.Offset)
			er, ok := rels[off]
			if !ok {
				t.Errorf("%s+%#x: no ELF relocation for the model's %v to %s", p.Name, r.Offset, k.typ, r.Symbol)
				continue
			}
			n++
			seen[k.typ]++
			if got := elf.R_AARCH64(elf.R_TYPE64(er.Info)); got != k.typ {
				t.Errorf("%s+%#x: %v, want %v", p.Name, r.Offset, got, k.typ)
			}
			s := syms[elf.R_SYM64(er.Info)-1]
			var target place
			switch {
			case elf.ST_TYPE(s.Info) == elf.STT_SECTION:
				target = place{f.Sections[s.Section].Name, uint64(er.Addend)}
			case s.Section == elf.SHN_UNDEF:
				target = place{"extern " + s.Name, uint64(er.Addend)}
			default:
				target = place{f.Sections[s.Section].Name, s.Value + uint64(er.Addend)}
			}
			want, ok := at[r.Symbol]
			if !ok {
				for _, q := range m.Procs {
					if q.Name == r.Symbol && q.LinkName != "" {
						want, ok = at[q.LinkName]
					}
				}
			}
			if !ok {
				want = place{"extern " + r.Symbol, 0}
			}
			want.off += uint64(r.Addend)
			if target != want {
				t.Errorf("%s+%#x: %v against %q%+d is %v, want %s at %v", p.Name, r.Offset, k.typ, s.Name, er.Addend, target, r.Symbol, want)
			}
			w := binary.LittleEndian.Uint32(code[r.Offset:])
			in, err := arm64asm.Decode(code[r.Offset : r.Offset+4])
			if err != nil || in.Op != k.op || w&k.field != 0 {
				t.Errorf("%s+%#x: %08x (%v, %v) under %v; want %v with the field 0", p.Name, r.Offset, w, in, err, k.typ, k.op)
			}
		}
		for o := uint32(0); o+4 <= uint32(len(code)); o += 4 {
			if !relocated[o] && !bytes.Equal(code[o:o+4], p.Code[o:o+4]) {
				t.Errorf("%s+%#x: %x in the object, %x in the model", p.Name, o, code[o:o+4], p.Code[o:o+4])
			}
		}
	}
	if n != len(rels) {
		t.Errorf(".rela.text has %d relocations, the model %d", len(rels), n)
	}
	for _, k := range kinds {
		if seen[k.typ] == 0 {
			t.Errorf("the demo object has no %v", k.typ)
		}
	}
}

// TestLinkObjectAArch64Refuses: what an AArch64 object cannot hold is a
// *LinkError naming the procedure or datum and the offset.
func TestLinkObjectAArch64Refuses(t *testing.T) {
	bl := []byte{0x00, 0x00, 0x00, 0x94, 0xc0, 0x03, 0x5f, 0xd6} // bl; ret
	proc := func(name string, relocs ...elfimage.Reloc) *elfimage.Proc {
		return &elfimage.Proc{Name: name, Code: bl, Relocs: relocs}
	}
	call := func(off uint32, sym string, addend int64) elfimage.Reloc {
		return elfimage.Reloc{Offset: off, Type: elfimage.RelocAArch64Call26, Symbol: sym, Addend: addend}
	}
	mod := func(procs ...*elfimage.Proc) *elfimage.Module {
		return &elfimage.Module{Arch: arch.AArch64, Procs: procs, Externs: []string{"ext"}}
	}
	riscv := &arch.Arch{Name: "riscv64", Machine: elf.EM_RISCV, PtrSize: 8, PageSize: 4096, SP: 2, FP: 8, RA: 1, NumRegs: 33, CodeAlign: 1, DataAlign: -8}
	checkLinkErrors(t, []linkErrorCase{
		{"misaligned", mod(proc("f", call(2, "f", 0))), elfimage.LinkOptions{}, false, "R_AARCH64_CALL26 relocation at 0x2", "proc f"},
		{"past the end", mod(proc("f", call(8, "f", 0))), elfimage.LinkOptions{}, false, "runs past the end", "proc f"},
		{"in data", &elfimage.Module{Arch: arch.AArch64, Procs: []*elfimage.Proc{proc("f")},
			Data: []*elfimage.Datum{{Name: "d", Bytes: make([]byte, 8), Relocs: []elfimage.Reloc{call(0, "f", 0)}}}}, elfimage.LinkOptions{}, false, "only allowed in Proc.Relocs", "datum d"},
		{"x86-64 module", &elfimage.Module{Procs: []*elfimage.Proc{proc("f", call(0, "f", 0))}}, elfimage.LinkOptions{}, false, "an AArch64 relocation in a EM_X86_64 module", "proc f"},
		{"branch into an instruction", mod(proc("f", call(0, "g", 2)), proc("g")), elfimage.LinkOptions{}, false, "R_AARCH64_CALL26 relocation at 0x0 to \"g\": distance 0x12 is not a multiple of 4", "proc f"},
		{"extern addend", mod(proc("f", call(0, "ext", 1))), elfimage.LinkOptions{}, false, "distance 0x1 is not a multiple of 4", "proc f"},
		{"unknown symbol", mod(proc("f", call(0, "nowhere", 0))), elfimage.LinkOptions{}, false, `unknown symbol "nowhere"`, "proc f"},
		{"other architecture", &elfimage.Module{Arch: riscv, Procs: []*elfimage.Proc{{Name: "f", Code: []byte{0x67, 0x80, 0, 0}}}}, elfimage.LinkOptions{}, false, "riscv64", "module"},
	})
	// A branch out of range for BL is the system linker's (a veneer or
	// an error): the object holds it.
	far := &elfimage.Proc{Name: "far", Code: bl}
	m := mod(proc("f", call(0, "far", 1<<28)), far)
	if _, err := elfimage.LinkObject(m, elfimage.LinkOptions{}); err != nil {
		t.Errorf("a CALL26 beyond ±128 MiB: %v, want the object", err)
	}
}
