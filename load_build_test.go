package elfimage

import (
	"debug/elf"
	"encoding/binary"
)

// Layout of the hand-built test image (see buildTestImage). Offsets are file
// offsets, which equal link-time addresses in the loaded segments.
const (
	tPhoff    = 64
	tPhnum    = 7
	tRelaOff  = tPhoff + tPhnum*phdrSize // 0x1c8: two Elf64_Rela
	tRelaN    = 2
	tDynOff   = tRelaOff + tRelaN*relaSize // 0x1f8: five Elf64_Dyn
	tDynN     = 5
	tEHOff    = tDynOff + tDynN*dynSize // 0x248: 12 bytes of .eh_frame_hdr
	tEHSize   = 12
	tNoteOff  = tEHOff + tEHSize // 0x254: NT_GNU_BUILD_ID note
	tNoteSize = 12 + 4 + 20
	tRSize    = tNoteOff + tNoteSize // 0x278: end of the R segment
	tTextOff  = 0x1000
	tDataOff  = 0x2000
	tDataSize = 16
	tTailOff  = tDataOff + tDataSize // 0x2010: start of the non-loaded tail

	// program header indexes
	phR, phRX, phRW, phDyn, phEH, phNote, phStack = 0, 1, 2, 3, 4, 5, 6
)

// tCode returns 42 in the running architecture's code: `mov eax, 42; ret`
// on x86-64, `movz w0, #42; ret` on AArch64 (TestCallLoadedCode runs it).
var tCode = func() []byte {
	if hostArch.Machine == elf.EM_AARCH64 {
		return []byte{0x40, 0x05, 0x80, 0x52, 0xc0, 0x03, 0x5f, 0xd6}
	}
	return []byte{0xb8, 0x2a, 0x00, 0x00, 0x00, 0xc3}
}()

// tRelocs are the load-time relocations of the test image: the pointer at
// .data+0 points to the code, the one at .data+8 to itself.
var tRelocs = []struct{ off, addend uint64 }{{tDataOff, tTextOff}, {tDataOff + 8, tDataOff + 8}}

var tBuildID = []byte("0123456789abcdefghij")

// buildTestImage writes a minimal valid image in a layout the loader
// accepts (the linker's before its data-first order; Link's own output is
// tested through Link): R segment (ELF header, program headers, .rela.dyn, .dynamic,
// .eh_frame_hdr, .note.gnu.build-id), R+X .text at 0x1000, R+W .data at
// 0x2000 with two RELATIVE pointers (link-time values stored in place),
// then the tail .shstrtab and the section header table. e_machine and the
// relocation type are the running architecture's (hostArch: EM_X86_64 and
// R_X86_64_RELATIVE on amd64, EM_AARCH64 and R_AARCH64_RELATIVE on arm64),
// the default of LoadOptions.Arch; tCode is that architecture's code.
func buildTestImage() []byte {
	le := binary.LittleEndian
	b := make([]byte, tTailOff)
	// ELF header
	copy(b, elf.ELFMAG)
	b[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	b[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	b[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	le.PutUint16(b[16:], uint16(elf.ET_DYN))
	le.PutUint16(b[18:], uint16(hostArch.Machine))
	le.PutUint32(b[20:], uint32(elf.EV_CURRENT))
	le.PutUint64(b[24:], tTextOff) // e_entry
	le.PutUint64(b[32:], tPhoff)
	le.PutUint16(b[52:], ehdrSize)
	le.PutUint16(b[54:], phdrSize)
	le.PutUint16(b[56:], tPhnum)
	le.PutUint16(b[58:], shdrSize)
	ph := func(i int, t elf.ProgType, f elf.ProgFlag, off, size, align uint64) {
		p := b[tPhoff+i*phdrSize:]
		le.PutUint32(p[0:], uint32(t))
		le.PutUint32(p[4:], uint32(f))
		le.PutUint64(p[8:], off)
		le.PutUint64(p[16:], off)
		le.PutUint64(p[24:], off)
		le.PutUint64(p[32:], size)
		le.PutUint64(p[40:], size)
		le.PutUint64(p[48:], align)
	}
	ph(phR, elf.PT_LOAD, elf.PF_R, 0, tRSize, 0x1000)
	ph(phRX, elf.PT_LOAD, elf.PF_R|elf.PF_X, tTextOff, uint64(len(tCode)), 0x1000)
	ph(phRW, elf.PT_LOAD, elf.PF_R|elf.PF_W, tDataOff, tDataSize, 0x1000)
	ph(phDyn, elf.PT_DYNAMIC, elf.PF_R, tDynOff, tDynN*dynSize, 8)
	ph(phEH, elf.PT_GNU_EH_FRAME, elf.PF_R, tEHOff, tEHSize, 4)
	ph(phNote, elf.PT_NOTE, elf.PF_R, tNoteOff, tNoteSize, 4)
	ph(phStack, elf.PT_GNU_STACK, elf.PF_R|elf.PF_W, 0, 0, 16)
	for i, r := range tRelocs {
		p := b[tRelaOff+i*relaSize:]
		le.PutUint64(p[0:], r.off)
		le.PutUint64(p[8:], uint64(hostArch.RelocRelative))
		le.PutUint64(p[16:], r.addend)
		le.PutUint64(b[r.off:], r.addend) // link-time value, as the linker writes it
	}
	for i, d := range []struct {
		tag elf.DynTag
		val uint64
	}{{elf.DT_RELA, tRelaOff}, {elf.DT_RELASZ, tRelaN * relaSize}, {elf.DT_RELAENT, relaSize}, {elf.DT_RELACOUNT, tRelaN}, {elf.DT_NULL, 0}} {
		le.PutUint64(b[tDynOff+i*dynSize:], uint64(d.tag))
		le.PutUint64(b[tDynOff+i*dynSize+8:], d.val)
	}
	copy(b[tEHOff:], []byte{1, 0xff, 0xff, 0xff}) // version 1, everything omitted
	n := b[tNoteOff:]
	le.PutUint32(n[0:], 4)
	le.PutUint32(n[4:], uint32(len(tBuildID)))
	le.PutUint32(n[8:], ntGNUBuildID)
	copy(n[12:], "GNU\x00")
	copy(n[16:], tBuildID)
	copy(b[tTextOff:], tCode)

	// Tail: .shstrtab, then the section headers.
	type sec struct {
		name             string
		typ              elf.SectionType
		flags            elf.SectionFlag
		off, size, align uint64
		link             uint32
		entsize          uint64
	}
	secs := []sec{
		{},
		{".rela.dyn", elf.SHT_RELA, elf.SHF_ALLOC, tRelaOff, tRelaN * relaSize, 8, 0, relaSize},
		{".dynamic", elf.SHT_DYNAMIC, elf.SHF_ALLOC | elf.SHF_WRITE, tDynOff, tDynN * dynSize, 8, 7, dynSize}, // sh_link: a string table (readelf insists)
		{".eh_frame_hdr", elf.SHT_PROGBITS, elf.SHF_ALLOC, tEHOff, tEHSize, 4, 0, 0},
		{".note.gnu.build-id", elf.SHT_NOTE, elf.SHF_ALLOC, tNoteOff, tNoteSize, 4, 0, 0},
		{".text", elf.SHT_PROGBITS, elf.SHF_ALLOC | elf.SHF_EXECINSTR, tTextOff, uint64(len(tCode)), 16, 0, 0},
		{".data", elf.SHT_PROGBITS, elf.SHF_ALLOC | elf.SHF_WRITE, tDataOff, tDataSize, 8, 0, 0},
		{".shstrtab", elf.SHT_STRTAB, 0, 0, 0, 1, 0, 0},
	}
	strtab := []byte{0}
	names := make([]uint32, len(secs))
	for i, s := range secs[1:] {
		names[i+1] = uint32(len(strtab))
		strtab = append(strtab, s.name...)
		strtab = append(strtab, 0)
	}
	secs[len(secs)-1].off, secs[len(secs)-1].size = uint64(len(b)), uint64(len(strtab))
	b = append(b, strtab...)
	for len(b)%8 != 0 {
		b = append(b, 0)
	}
	shoff := len(b)
	le.PutUint64(b[40:], uint64(shoff))
	le.PutUint16(b[60:], uint16(len(secs)))
	le.PutUint16(b[62:], uint16(len(secs)-1))
	for i, s := range secs {
		sh := make([]byte, shdrSize)
		le.PutUint32(sh[0:], names[i])
		le.PutUint32(sh[4:], uint32(s.typ))
		le.PutUint64(sh[8:], uint64(s.flags))
		if s.flags&elf.SHF_ALLOC != 0 {
			le.PutUint64(sh[16:], s.off)
		}
		le.PutUint64(sh[24:], s.off)
		le.PutUint64(sh[32:], s.size)
		le.PutUint32(sh[40:], s.link)
		le.PutUint64(sh[48:], s.align)
		le.PutUint64(sh[56:], s.entsize)
		b = append(b, sh...)
	}
	return b
}

// Patch helpers for the corruption tests.

func putPh32(b []byte, i int, field int, v uint32) {
	binary.LittleEndian.PutUint32(b[tPhoff+i*phdrSize+field:], v)
}

func putPh64(b []byte, i int, field int, v uint64) {
	binary.LittleEndian.PutUint64(b[tPhoff+i*phdrSize+field:], v)
}

// putPhAt sets p_offset, p_vaddr and p_paddr of program header i to off.
func putPhAt(b []byte, i int, off uint64) {
	putPh64(b, i, offPOffset, off)
	putPh64(b, i, offPVaddr, off)
	putPh64(b, i, 24, off)
}

// putPhSize sets p_filesz and p_memsz of program header i to n.
func putPhSize(b []byte, i int, n uint64) {
	putPh64(b, i, offPFilesz, n)
	putPh64(b, i, offPMemsz, n)
}

func putDyn(b []byte, i int, tag elf.DynTag, val uint64) {
	binary.LittleEndian.PutUint64(b[tDynOff+i*dynSize:], uint64(tag))
	binary.LittleEndian.PutUint64(b[tDynOff+i*dynSize+8:], val)
}

func putRela(b []byte, i int, field int, v uint64) {
	binary.LittleEndian.PutUint64(b[tRelaOff+i*relaSize+field:], v)
}

// shoffOf returns e_shoff of b.
func shoffOf(b []byte) uint64 { return binary.LittleEndian.Uint64(b[40:]) }

func putSh(b []byte, i int, field int, v uint64, size int) {
	p := b[shoffOf(b)+uint64(i)*shdrSize+uint64(field):]
	switch size {
	case 2:
		binary.LittleEndian.PutUint16(p, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(p, uint32(v))
	default:
		binary.LittleEndian.PutUint64(p, v)
	}
}
