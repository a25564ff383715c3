// Package readelf is a test helper: it writes minimal ELF files around
// section bytes, runs binutils' readelf on them and parses the text readelf
// prints (--debug-dump=frames-interp), so tests can compare what elfimage's
// writers and readers produce with an independent implementation.
package readelf

import (
	"bufio"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/elfobj"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// Section is one section of a file written by [WriteELF].
type Section struct {
	Name  string
	Type  elf.SectionType // 0 means SHT_PROGBITS
	Flags elf.SectionFlag // SHF_ALLOC sections are placed at file offset == Addr
	Addr  uint64
	Data  []byte
	Align uint64 // 0 means 1
}

// WriteELF returns a little-endian ELF64 ET_DYN file for machine with the
// given sections and one PT_LOAD mapping file offset 0 at address 0 over
// every SHF_ALLOC section (each placed at file offset == its Addr, so
// addresses must be increasing and above the headers at 0x1000 or more),
// plus a PT_GNU_EH_FRAME for a section named .eh_frame_hdr. Non-allocated
// sections follow, then .shstrtab and the section headers. It is written
// with package elfobj and panics on overlapping allocated sections (a
// test bug).
func WriteELF(machine elf.Machine, secs []Section) []byte {
	w := elfobj.NewWriter(elf.ELFCLASS64, elf.ELFDATA2LSB)
	out := make([]*elfobj.Section, len(secs))
	var hdr *elfobj.Section
	for i, s := range secs {
		h := elf.SectionHeader{Name: s.Name, Type: s.Type, Flags: s.Flags, Addralign: max(s.Align, 1)}
		if h.Type == 0 {
			h.Type = elf.SHT_PROGBITS
		}
		if s.Flags&elf.SHF_ALLOC != 0 {
			h.Addr = s.Addr
		}
		out[i] = w.AddSection(h)
		if s.Name == ".eh_frame_hdr" {
			hdr = out[i]
		}
	}
	progs := []elf.ProgHeader{{Type: elf.PT_LOAD, Flags: elf.PF_R | elf.PF_X, Align: 0x1000}}
	if hdr != nil {
		progs = append(progs, elf.ProgHeader{Type: elf.PT_GNU_EH_FRAME, Flags: elf.PF_R, Align: 4})
	}
	w.ReserveFileHeader()
	w.ReserveProgramHeaders(len(progs))
	w.ReserveUntil(0x1000)
	var loadEnd uint64
	for i, s := range secs {
		if s.Flags&elf.SHF_ALLOC == 0 {
			continue
		}
		if s.Addr < w.ReservedSize() || s.Addr%max(s.Align, 1) != 0 {
			panic(fmt.Sprintf("readelf.WriteELF: section %s at %#x overlaps what precedes it (%#x) or is not aligned to %d", s.Name, s.Addr, w.ReservedSize(), s.Align))
		}
		w.ReserveUntil(s.Addr)
		w.ReserveSectionData(out[i], uint64(len(s.Data)))
		loadEnd = w.ReservedSize()
	}
	for i, s := range secs {
		if s.Flags&elf.SHF_ALLOC == 0 {
			w.ReserveSectionData(out[i], uint64(len(s.Data)))
		}
	}
	shstrtab := w.ReserveShstrtab()
	w.ReserveSectionHeaders()

	w.WriteFileHeader(elfobj.FileHeader{Type: elf.ET_DYN, Machine: machine})
	progs[0].Filesz, progs[0].Memsz = loadEnd, loadEnd
	if hdr != nil {
		progs[1].Off, progs[1].Vaddr, progs[1].Paddr = hdr.Offset, hdr.Addr, hdr.Addr
		progs[1].Filesz, progs[1].Memsz = hdr.Size, hdr.Size
	}
	for _, p := range progs {
		w.WriteProgramHeader(p)
	}
	for i, s := range secs {
		if s.Flags&elf.SHF_ALLOC != 0 {
			w.WriteSection(out[i], s.Data)
		}
	}
	for i, s := range secs {
		if s.Flags&elf.SHF_ALLOC == 0 {
			w.WriteSection(out[i], s.Data)
		}
	}
	w.WriteStringTable(shstrtab)
	w.WriteSectionHeaders()
	b, err := w.Finish()
	if err != nil {
		panic("readelf.WriteELF: " + err.Error())
	}
	return b
}

// Run writes file (if not nil) to a temporary file, runs readelf with args
// and that file's name (or, with file nil, args alone), and returns
// stdout and stderr. It skips t when readelf is missing (see tooltest).
func Run(t testing.TB, file []byte, args ...string) (stdout, stderr string) {
	t.Helper()
	path := tooltest.Require(t, "readelf")
	if file != nil {
		name := filepath.Join(t.TempDir(), "test.elf")
		if err := os.WriteFile(name, file, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, name)
	}
	cmd := exec.Command(path, args...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("readelf %v: %v\n%s", args, err, e.String())
	}
	return o.String(), e.String()
}

// InterpEntry is one CIE or FDE as printed by
// readelf --debug-dump=frames-interp.
type InterpEntry struct {
	Section        string // ".eh_frame", ".debug_frame"
	Offset         uint64 // section offset of the entry
	IsCIE          bool
	CIEOffset      uint64 // FDE: cie=
	PCBegin, PCEnd uint64 // FDE: pc=begin..end
	Columns        []string
	Rows           []InterpRow
}

// InterpRow is one row: its location and the text of each column, keyed by
// the column header ("CFA", "rbx", "ra", ...).
type InterpRow struct {
	Loc  uint64
	Cols map[string]string
}

var regRule = regexp.MustCompile(`\br\d+ \(([^)]+)\)`)

// ParseFramesInterp parses the output of readelf --debug-dump=frames-interp
// (binutils 2.40 layout). Lines it does not understand are ignored. A
// register rule readelf prints as "r9 (r9)" is returned as its name ("r9").
func ParseFramesInterp(text string) ([]InterpEntry, error) {
	var out []InterpEntry
	var cur *InterpEntry
	section := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "Contents of the ") {
			section = strings.TrimSuffix(strings.TrimPrefix(line, "Contents of the "), " section:")
			cur = nil
			continue
		}
		// Register rules print as "r9 (r9)": keep the name only.
		line = regRule.ReplaceAllString(line, "$1")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) >= 4 && (f[3] == "CIE" || f[3] == "FDE") {
			off, err := strconv.ParseUint(f[0], 16, 64)
			if err != nil {
				return nil, fmt.Errorf("readelf: bad entry line %q", line)
			}
			out = append(out, InterpEntry{Section: section, Offset: off, IsCIE: f[3] == "CIE"})
			cur = &out[len(out)-1]
			if !cur.IsCIE {
				for _, x := range f[4:] {
					if v, ok := strings.CutPrefix(x, "cie="); ok {
						cur.CIEOffset, _ = strconv.ParseUint(v, 16, 64)
					}
					if v, ok := strings.CutPrefix(x, "pc="); ok {
						a, b, _ := strings.Cut(v, "..")
						cur.PCBegin, _ = strconv.ParseUint(a, 16, 64)
						cur.PCEnd, _ = strconv.ParseUint(b, 16, 64)
					}
				}
			}
			continue
		}
		if len(f) == 3 && f[1] == "ZERO" && f[2] == "terminator" {
			cur = nil // the end of .eh_frame, not a row
			continue
		}
		if cur == nil {
			continue
		}
		if f[0] == "LOC" {
			cur.Columns = f[1:]
			continue
		}
		if cur.Columns == nil || len(f) != len(cur.Columns)+1 {
			continue
		}
		loc, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil {
			continue
		}
		r := InterpRow{Loc: loc, Cols: map[string]string{}}
		for i, c := range cur.Columns {
			r.Cols[c] = f[i+1]
		}
		cur.Rows = append(cur.Rows, r)
	}
	return out, sc.Err()
}

// X86_64RegName returns readelf's name for an x86-64 DWARF register.
func X86_64RegName(r int) string {
	names := []string{"rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rip"}
	switch {
	case r < len(names):
		return names[r]
	case r >= 17 && r <= 32:
		return fmt.Sprintf("xmm%d", r-17)
	case r >= 33 && r <= 40:
		return fmt.Sprintf("st%d", r-33)
	case r >= 41 && r <= 48:
		return fmt.Sprintf("mm%d", r-41)
	case r >= 50 && r <= 55:
		return []string{"es", "cs", "ss", "ds", "fs", "gs"}[r-50]
	case r >= 67 && r <= 82:
		return fmt.Sprintf("xmm%d", r-67+16)
	case r >= 118 && r <= 125:
		return fmt.Sprintf("k%d", r-118)
	}
	switch r {
	case 49:
		return "rflags"
	case 58:
		return "fs.base"
	case 59:
		return "gs.base"
	case 62:
		return "tr"
	case 63:
		return "ldtr"
	case 64:
		return "mxcsr"
	case 65:
		return "fcw"
	case 66:
		return "fsw"
	}
	return fmt.Sprintf("r%d", r)
}
