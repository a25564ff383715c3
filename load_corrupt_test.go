package elfimage

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/arch"
)

type corruption struct {
	name  string
	patch func(b []byte) []byte
	field string // expected FormatError.Field
}

func truncateAt(n int) func([]byte) []byte { return func(b []byte) []byte { return b[:n] } }

func corruptions() []corruption {
	le := binary.LittleEndian
	set16 := func(off int, v uint16) func([]byte) []byte {
		return func(b []byte) []byte { le.PutUint16(b[off:], v); return b }
	}
	set64 := func(off int, v uint64) func([]byte) []byte {
		return func(b []byte) []byte { le.PutUint64(b[off:], v); return b }
	}
	setByte := func(off int, v byte) func([]byte) []byte {
		return func(b []byte) []byte { b[off] = v; return b }
	}
	do := func(f func(b []byte)) func([]byte) []byte { return func(b []byte) []byte { f(b); return b } }
	cs := []corruption{
		// Truncation at every structure boundary of the loaded part.
		{"empty file", truncateAt(0), "ELF header"},
		{"truncated ident", truncateAt(16), "ELF header"},
		{"truncated ELF header", truncateAt(63), "ELF header"},
		{"only ELF header", truncateAt(64), "e_phoff"},
		{"half program headers", truncateAt(tPhoff + 3*phdrSize), "e_phoff"},
		{"program headers cut", truncateAt(tRelaOff - 1), "e_phoff"},
		{"before .rela.dyn", truncateAt(tRelaOff), "p_filesz of program header 0"},
		{"before .dynamic", truncateAt(tDynOff), "p_filesz of program header 0"},
		{"before .eh_frame_hdr", truncateAt(tEHOff), "p_filesz of program header 0"},
		{"before note", truncateAt(tNoteOff), "p_filesz of program header 0"},
		{"end of R", truncateAt(tRSize), "p_offset of program header 1"},
		{"start of text", truncateAt(tTextOff), "p_filesz of program header 1"},
		{"inside text", truncateAt(tTextOff + 3), "p_filesz of program header 1"},
		{"end of text", truncateAt(tTextOff + len(tCode)), "p_offset of program header 2"},
		{"start of data", truncateAt(tDataOff), "p_filesz of program header 2"},
		{"inside data", truncateAt(tDataOff + 8), "p_filesz of program header 2"},

		// ELF header.
		{"bad magic", setByte(1, 'X'), "e_ident[EI_MAG]"},
		{"ELFCLASS32", setByte(int(elf.EI_CLASS), byte(elf.ELFCLASS32)), "e_ident[EI_CLASS]"},
		{"big endian", setByte(int(elf.EI_DATA), byte(elf.ELFDATA2MSB)), "e_ident[EI_DATA]"},
		{"ident version", setByte(int(elf.EI_VERSION), 0), "e_ident[EI_VERSION]"},
		{"OS ABI", setByte(int(elf.EI_OSABI), byte(elf.ELFOSABI_FREEBSD)), "e_ident[EI_OSABI]"},
		{"ET_EXEC", set16(offType, uint16(elf.ET_EXEC)), "e_type"},
		{"ET_REL", set16(offType, uint16(elf.ET_REL)), "e_type"},
		{"other machine", set16(offMachine, uint16(otherMachine())), "e_machine"},
		{"e_version", set64(offVersion, 2), "e_version"},
		{"e_ehsize", set16(offEhsize, 52), "e_ehsize"},
		{"e_phentsize", set16(offPhentsize, 32), "e_phentsize"},
		{"e_phnum 0", set16(offPhnum, 0), "e_phnum"},
		{"PN_XNUM", set16(offPhnum, 0xffff), "e_phnum"},
		{"e_phoff past end", set64(offPhoff, 1<<40), "e_phoff"},
		{"e_phoff overflow", set64(offPhoff, ^uint64(0)-8), "e_phoff"},
		{"program headers in tail", func(b []byte) []byte {
			off := len(b)
			b = append(b, b[tPhoff:tRelaOff]...)
			le.PutUint64(b[offPhoff:], uint64(off))
			return b
		}, "e_phoff"},
		{"e_entry in R", set64(offEntry, 0x100), "e_entry"},
		{"e_entry at end of text", set64(offEntry, tTextOff+uint64(len(tCode))), "e_entry"},
		{"e_entry in data", set64(offEntry, tDataOff), "e_entry"},
		{"e_entry in tail", set64(offEntry, tTailOff+1), "e_entry"},

		// PT_LOAD rules.
		{"p_vaddr != p_offset", do(func(b []byte) { putPh64(b, phRX, offPVaddr, tTextOff+0x10) }), "p_vaddr of program header 1"},
		{"p_filesz != p_memsz", do(func(b []byte) { putPh64(b, phRW, offPMemsz, 0x20) }), "p_memsz of program header 2"},
		{"unaligned p_offset", do(func(b []byte) { putPhAt(b, phRX, tTextOff+1) }), "p_offset of program header 1"},
		{"p_align not power of two", do(func(b []byte) { putPh64(b, phRX, offPAlign, 0x1800) }), "p_align of program header 1"},
		{"overlapping segments", do(func(b []byte) { putPhAt(b, phRW, tTextOff) }), "p_offset of program header 2"},
		{"segments out of order", do(func(b []byte) {
			rx := append([]byte(nil), b[tPhoff+phRX*phdrSize:][:phdrSize]...)
			copy(b[tPhoff+phRX*phdrSize:], b[tPhoff+phRW*phdrSize:][:phdrSize])
			copy(b[tPhoff+phRW*phdrSize:], rx)
		}), "p_offset of program header 2"},
		{"R segment shares page with text", do(func(b []byte) { putPhSize(b, phR, tTextOff+1) }), "p_offset of program header 1"},
		{"segment past end", do(func(b []byte) { putPhSize(b, phRW, 1<<20) }), "p_filesz of program header 2"},
		{"segment size overflow", do(func(b []byte) { putPhSize(b, phRW, ^uint64(0)) }), "p_filesz of program header 2"},
		{"segment offset past end", do(func(b []byte) { putPhAt(b, phRW, 1<<62) }), "p_offset of program header 2"},
		{"W+X segment", do(func(b []byte) { putPh32(b, phRX, offPFlags, uint32(elf.PF_R|elf.PF_W|elf.PF_X)) }), "p_flags of program header 1"},
		{"unreadable segment", do(func(b []byte) { putPh32(b, phRX, offPFlags, uint32(elf.PF_X)) }), "p_flags of program header 1"},
		{"unknown flag bits", do(func(b []byte) { putPh32(b, phRX, offPFlags, uint32(elf.PF_R|elf.PF_X|0x100)) }), "p_flags of program header 1"},
		{"first segment writable", do(func(b []byte) { putPh32(b, phR, offPFlags, uint32(elf.PF_R|elf.PF_W)) }), "p_flags of program header 0"},
		{"first segment not at 0", do(func(b []byte) {
			putPh32(b, phR, 0, uint32(elf.PT_NULL))
		}), "p_offset of program header 1"},
		{"first segment too small for headers", do(func(b []byte) { putPhSize(b, phR, 0x100) }), "e_phoff"},
		{"first segment smaller than ELF header", do(func(b []byte) { putPhSize(b, phR, 0x20) }), "p_filesz of first PT_LOAD"},
		{"no PT_LOAD", do(func(b []byte) {
			for _, i := range []int{phR, phRX, phRW} {
				putPh32(b, i, 0, uint32(elf.PT_NULL))
			}
		}), "program header table"},
		{"PT_INTERP", do(func(b []byte) { putPh32(b, phStack, 0, uint32(elf.PT_INTERP)) }), "p_type of program header 6"},
		{"PT_TLS", do(func(b []byte) { putPh32(b, phStack, 0, uint32(elf.PT_TLS)) }), "p_type of program header 6"},
		{"two PT_DYNAMIC", do(func(b []byte) { putPh32(b, phEH, 0, uint32(elf.PT_DYNAMIC)) }), "p_type of program header 4"},

		// PT_DYNAMIC, PT_NOTE, PT_GNU_EH_FRAME.
		{"PT_DYNAMIC in tail", do(func(b []byte) { putPhAt(b, phDyn, tTailOff) }), "p_offset of program header 3"},
		{"PT_DYNAMIC between segments", do(func(b []byte) { putPhAt(b, phDyn, tRSize+8) }), "p_offset of program header 3"},
		{"PT_DYNAMIC p_vaddr", do(func(b []byte) { putPh64(b, phDyn, offPVaddr, tDynOff+16) }), "p_vaddr of program header 3"},
		{"PT_DYNAMIC runs past R", do(func(b []byte) { putPhSize(b, phDyn, 0x1000) }), "p_offset of program header 3"},
		{"PT_NOTE in tail", do(func(b []byte) { putPhAt(b, phNote, tTailOff) }), "p_offset of program header 5"},
		{"PT_GNU_EH_FRAME past end", do(func(b []byte) { putPhAt(b, phEH, 1<<63) }), "p_offset of program header 4"},
		{"no DT_NULL", do(func(b []byte) { putPhSize(b, phDyn, 4*dynSize) }), "PT_DYNAMIC"},
		{"DT_RELAENT 16", do(func(b []byte) { putDyn(b, 2, elf.DT_RELAENT, 16) }), "DT_RELAENT"},
		{"DT_RELAENT missing", do(func(b []byte) { putDyn(b, 2, elf.DT_DEBUG, 0) }), "DT_RELAENT"},
		{"DT_RELASZ not multiple", do(func(b []byte) { putDyn(b, 1, elf.DT_RELASZ, 47) }), "DT_RELASZ"},
		{"DT_RELASZ huge", do(func(b []byte) { putDyn(b, 1, elf.DT_RELASZ, 24<<50) }), "DT_RELA"},
		{"DT_RELA missing", do(func(b []byte) { putDyn(b, 0, elf.DT_DEBUG, 0) }), "DT_RELASZ"},
		{"DT_RELA in tail", do(func(b []byte) { putDyn(b, 0, elf.DT_RELA, tTailOff) }), "DT_RELA"},
		{"DT_RELA overflow", do(func(b []byte) { putDyn(b, 0, elf.DT_RELA, ^uint64(0)-8) }), "DT_RELA"},
		{"DT_RELA in writable segment", do(func(b []byte) {
			putDyn(b, 0, elf.DT_RELA, tDataOff)
			putDyn(b, 1, elf.DT_RELASZ, 0)
			putDyn(b, 3, elf.DT_RELACOUNT, 0)
		}), "DT_RELA"},
		{"DT_RELACOUNT too big", do(func(b []byte) { putDyn(b, 3, elf.DT_RELACOUNT, 3) }), "DT_RELACOUNT"},
		{"duplicate DT_RELA", do(func(b []byte) { putDyn(b, 3, elf.DT_RELA, tRelaOff) }), "d_tag of dynamic entry 3"},
		{"DT_NEEDED", do(func(b []byte) { putDyn(b, 3, elf.DT_NEEDED, 1) }), "d_tag of dynamic entry 3"},
		{"DT_TEXTREL", do(func(b []byte) { putDyn(b, 3, elf.DT_TEXTREL, 0) }), "d_tag of dynamic entry 3"},
		{"DT_JMPREL", do(func(b []byte) { putDyn(b, 3, elf.DT_JMPREL, tRelaOff) }), "d_tag of dynamic entry 3"},
		{"DF_TEXTREL", do(func(b []byte) { putDyn(b, 3, elf.DT_FLAGS, uint64(elf.DF_TEXTREL)) }), "d_val of dynamic entry 3"},
		{"note name too long", do(func(b []byte) { le.PutUint32(b[tNoteOff:], 0x1000) }), "n_namesz"},
		{"note desc too long", do(func(b []byte) { le.PutUint32(b[tNoteOff+4:], 0xffffffff) }), "n_descsz"},
		{"note header truncated", do(func(b []byte) { putPhSize(b, phNote, tNoteSize+5); putPhSize(b, phR, tRSize+5) }), "note header"},

		// Relocations.
		{"r_offset in text", do(func(b []byte) { putRela(b, 1, 0, tTextOff) }), "r_offset of relocation 1"},
		{"r_offset in R", do(func(b []byte) { putRela(b, 1, 0, 0x100) }), "r_offset of relocation 1"},
		{"r_offset straddles data end", do(func(b []byte) { putRela(b, 1, 0, tDataOff+tDataSize-4) }), "r_offset of relocation 1"},
		{"r_offset in tail", do(func(b []byte) { putRela(b, 1, 0, tTailOff) }), "r_offset of relocation 1"},
		{"r_offset overflow", do(func(b []byte) { putRela(b, 1, 0, ^uint64(0)-3) }), "r_offset of relocation 1"},
		{"R_X86_64_64", do(func(b []byte) { putRela(b, 0, 8, uint64(elf.R_X86_64_64)) }), "r_info of relocation 0"},
		{"R_X86_64_NONE", do(func(b []byte) { putRela(b, 1, 8, uint64(elf.R_X86_64_NONE)) }), "r_info of relocation 1"},
		{"relative with symbol", do(func(b []byte) { putRela(b, 0, 8, 1<<32|uint64(hostArch.RelocRelative)) }), "r_info of relocation 0"},
	}
	return append(cs, hostileCorruptions()...)
}

// TestCorruptImages loads every corruption by every path and checks the
// error names the expected field, nothing panics and nothing stays mapped.
func TestCorruptImages(t *testing.T) {
	mapEntry(t)
	before := liveMappings.Load()
	for _, c := range corruptions() {
		t.Run(c.name, func(t *testing.T) {
			b := c.patch(buildTestImage())
			if _, err := parseImage("x", b, nil2arch(), 4096); err == nil {
				t.Fatalf("parseImage accepted the image")
			}
			p := writeTemp(t, b)
			for _, how := range []string{"mmap", "read", "bytes"} {
				var im *Image
				var err error
				switch how {
				case "mmap":
					im, err = Open(p, nil)
				case "read":
					im, err = Open(p, &LoadOptions{ForceRead: true})
				case "bytes":
					im, err = Load(p, b, nil)
				}
				if err == nil {
					im.Close()
					t.Errorf("%s: loaded a corrupt image", how)
					continue
				}
				var fe *FormatError
				if !errors.As(err, &fe) {
					t.Errorf("%s: err = %v (%T), want *FormatError", how, err, err)
					continue
				}
				if fe.Field != c.field || fe.Source != p {
					t.Errorf("%s: err = %v; want field %q", how, err, c.field)
				}
				if fe.Offset > uint64(len(b))+1<<20 && !strings.Contains(c.name, "overflow") && !strings.Contains(c.name, "past end") {
					t.Errorf("%s: implausible offset in %v", how, err)
				}
			}
			if n := liveMappings.Load(); n != before {
				t.Errorf("%d mappings left behind", n-before)
			}
			for _, m := range readMaps(t) {
				if m.path == p {
					t.Errorf("file still mapped: %+v", m)
				}
			}
		})
	}
	if n := liveMappings.Load(); n != before {
		t.Errorf("%d mappings left behind", n-before)
	}
}

func nil2arch() *arch.Arch { a, _ := options(nil); return a }

// otherMachine is an e_machine elfimage knows but the running program is
// not: EM_AARCH64 on amd64, EM_X86_64 on arm64.
func otherMachine() elf.Machine {
	if hostArch.Machine == elf.EM_AARCH64 {
		return elf.EM_X86_64
	}
	return elf.EM_AARCH64
}

// mapEntry installs the entry image (EntryImage) before a test counts
// liveMappings: the first Open maps it (on amd64 and arm64) and it stays
// mapped for the life of the process, so counting before it would see it
// as a mapping left behind.
func mapEntry(t *testing.T) {
	t.Helper()
	if err := installEntry(); err != nil {
		t.Fatalf("installEntry: %v", err)
	}
}

func TestOpenDirectoryAndMissing(t *testing.T) {
	var fe *FormatError
	if _, err := Open(t.TempDir(), nil); !errors.As(err, &fe) || fe.Field != "file" {
		t.Errorf("Open(directory) err = %v, want FormatError on file", err)
	}
	if _, err := Open(t.TempDir()+"/missing", nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open(missing) err = %v, want ErrNotExist", err)
	}
}

// TestCorruptSectionTable: the loader ignores the tail, Sections reports.
func TestCorruptSectionTable(t *testing.T) {
	for _, c := range sectionCorruptions() {
		t.Run(c.name, func(t *testing.T) {
			b := c.patch(buildTestImage())
			im, err := Load("x", b, nil)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			defer im.Close()
			var fe *FormatError
			_, err = im.Section(".text")
			if !errors.As(err, &fe) || fe.Field != c.field {
				t.Errorf("Section err = %v, want FormatError on %q", err, c.field)
			}
			if _, err2 := im.Sections(); err2 != err {
				t.Errorf("Sections err %v differs from cached %v", err2, err)
			}
		})
	}
}

// unterminateShstrtab overwrites the final NUL of .shstrtab (section 7),
// which ends the name of the last section, .shstrtab itself.
func unterminateShstrtab(b []byte) []byte {
	le := binary.LittleEndian
	sh := shoffOf(b) + 7*shdrSize
	off, size := le.Uint64(b[sh+24:]), le.Uint64(b[sh+32:])
	b[off+size-1] = 'x'
	return b
}

// TestOtherMachineHint: an image of ours for the other architecture is
// refused with a message that says how it would run; an e_machine that no
// architecture of ours has gets the plain message.
func TestOtherMachineHint(t *testing.T) {
	for _, c := range []struct {
		m    elf.Machine
		hint bool
	}{{otherMachine(), true}, {elf.EM_RISCV, false}} {
		b := buildTestImage()
		binary.LittleEndian.PutUint16(b[offMachine:], uint16(c.m))
		_, err := Load("x.elf", b, nil)
		if err == nil {
			t.Fatalf("%v: loaded", c.m)
		}
		if got := strings.Contains(err.Error(), "another architecture"); got != c.hint || !strings.Contains(err.Error(), c.m.String()) {
			t.Errorf("%v: err = %v; want the machine named, hint %v", c.m, err, c.hint)
		}
	}
}
