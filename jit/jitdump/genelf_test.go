package jitdump

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/elfimage/elfimage/internal/tooltest"
)

// perfELF builds the ELF that perf's genelf.c synthesizes from a load and
// its unwinding information, in the layout genelf.c gives it: .text at
// textOff (GEN_ELF_TEXT_OFFSET) with file offset equal to address,
// .eh_frame at ALIGN_8(textOff + code_size), .eh_frame_hdr right after,
// one PT_LOAD over the code. (Symbols, build id and debug info are left
// out: this checks the unwinding data in perf's layout.)
func perfELF(t *testing.T, c LoadedCode, textOff uint64) []byte {
	t.Helper()
	u := c.Unwinding
	eh, hdr := u.EHFrame(), u.EHFrameHdr()
	ehOff := align8(textOff + c.CodeSize)
	hdrOff := ehOff + uint64(len(eh))
	shstr := []byte("\x00.text\x00.eh_frame\x00.eh_frame_hdr\x00.shstrtab\x00")
	strOff := hdrOff + uint64(len(hdr))
	shOff := align8(strOff + uint64(len(shstr)))
	file := make([]byte, shOff)
	copy(file[textOff:], c.Code)
	copy(file[ehOff:], eh)
	copy(file[hdrOff:], hdr)
	copy(file[strOff:], shstr)
	var b bytes.Buffer
	ehdr := elf.Header64{
		Type: uint16(elf.ET_DYN), Machine: uint16(elf.EM_X86_64), Version: 1, Entry: textOff,
		Phoff: 64, Shoff: shOff, Ehsize: 64, Phentsize: 56, Phnum: 1, Shentsize: 64, Shnum: 5, Shstrndx: 4,
	}
	copy(ehdr.Ident[:], "\x7fELF\x02\x01\x01")
	if textOff < 64+56 {
		// Old perf: no program header, .text right after the ELF header.
		ehdr.Phoff, ehdr.Phnum = 0, 0
	}
	binary.Write(&b, binary.LittleEndian, ehdr)
	if ehdr.Phnum == 1 {
		binary.Write(&b, binary.LittleEndian, elf.Prog64{Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R | elf.PF_X), Off: textOff, Vaddr: textOff, Paddr: textOff, Filesz: c.CodeSize, Memsz: c.CodeSize, Align: 8})
	}
	copy(file, b.Bytes())
	b.Reset()
	b.Write(file)
	secs := []elf.Section64{
		{},
		{Name: 1, Type: uint32(elf.SHT_PROGBITS), Flags: uint64(elf.SHF_ALLOC | elf.SHF_EXECINSTR), Addr: textOff, Off: textOff, Size: c.CodeSize, Addralign: 16},
		{Name: 7, Type: uint32(elf.SHT_PROGBITS), Flags: uint64(elf.SHF_ALLOC), Addr: ehOff, Off: ehOff, Size: uint64(len(eh)), Addralign: 8},
		{Name: 17, Type: uint32(elf.SHT_PROGBITS), Flags: uint64(elf.SHF_ALLOC), Addr: hdrOff, Off: hdrOff, Size: uint64(len(hdr)), Addralign: 4},
		{Name: 31, Type: uint32(elf.SHT_STRTAB), Off: strOff, Size: uint64(len(shstr)), Addralign: 1},
	}
	binary.Write(&b, binary.LittleEndian, secs)
	return b.Bytes()
}

// TestReadelfPerfLayout: readelf, an independent reader, decodes our
// unwinding record inside the ELF perf synthesizes, for both values of
// GEN_ELF_TEXT_OFFSET perf has used, and sees the FDE cover the code at its
// .text address with the rows written.
func TestReadelfPerfLayout(t *testing.T) {
	readelf := tooltest.Require(t, "readelf")
	w := openTest(t, nil)
	if _, err := w.Load(fibFunc(0x7f0000001000)); err != nil {
		t.Fatal(err)
	}
	d, err := ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	c := d.Code()[0]
	for _, textOff := range []uint64{0x40, 0x80} {
		path := filepath.Join(t.TempDir(), "jitted.so")
		if err := os.WriteFile(path, perfELF(t, c, textOff), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := elf.Open(path); err != nil {
			t.Fatalf("debug/elf rejects the test ELF: %v", err)
		}
		out, err := exec.Command(readelf, "-W", "--debug-dump=frames-interp", path).CombinedOutput()
		if err != nil {
			t.Fatalf("readelf: %v\n%s", err, out)
		}
		s := string(out)
		lo, hi := textOff, textOff+c.CodeSize
		fdeRE := regexp.MustCompile(`FDE cie=\S+ pc=0*([0-9a-f]+)\.\.0*([0-9a-f]+)`)
		m := fdeRE.FindStringSubmatch(s)
		if m == nil || m[1] != hex(lo) || m[2] != hex(hi) {
			t.Fatalf("text at %#x: FDE %v, want pc=%x..%x\n%s", textOff, m, lo, hi, s)
		}
		// Rows: at +0 rsp+8, +1 rsp+16 with rbp at c-16, +4 rbp+16, +14 rsp+8.
		for _, row := range []struct {
			off uint64
			cfa string
			rbp string
		}{{0, "rsp+8", "u"}, {1, "rsp+16", "c-16"}, {4, "rbp+16", "c-16"}, {14, "rsp+8", "c-16"}} {
			re := regexp.MustCompile(`(?m)^0*` + hex(textOff+row.off) + `\s+` + regexp.QuoteMeta(row.cfa) + `\s+(\S+)\s+(\S+)`)
			mm := re.FindStringSubmatch(s)
			if mm == nil || mm[1] != row.rbp || mm[2] != "c-8" {
				t.Errorf("text at %#x: row +%d: %v, want %s rbp=%s ra=c-8\n%s", textOff, row.off, mm, row.cfa, row.rbp, s)
			}
		}
	}
}

func hex(v uint64) string { return strconv.FormatUint(v, 16) }
