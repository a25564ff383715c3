package elfimage

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/info"
	"github.com/elfimage/elfimage/dwarf/line"
)

// tailSection is one section of an image built by elfWithSections.
type tailSection struct {
	name string
	typ  elf.SectionType
	data []byte
}

// elfWithSections builds an ELF64 file with the given sections after the
// ELF header and a section header table, for the lazy tail readers (which
// need nothing else). It is not loadable: tests wrap it in an Image
// directly.
func elfWithSections(secs []tailSection) []byte {
	le := binary.LittleEndian
	b := make([]byte, ehdrSize)
	copy(b, elf.ELFMAG)
	b[elf.EI_CLASS], b[elf.EI_DATA], b[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	le.PutUint16(b[offType:], uint16(elf.ET_DYN))
	le.PutUint16(b[offMachine:], uint16(elf.EM_X86_64))
	le.PutUint32(b[offVersion:], 1)
	le.PutUint16(b[offEhsize:], ehdrSize)
	le.PutUint16(b[offPhentsize:], phdrSize)
	le.PutUint16(b[offShentsize:], shdrSize)
	secs = append([]tailSection{{}}, secs...)
	secs = append(secs, tailSection{name: ".shstrtab", typ: elf.SHT_STRTAB})
	var names []byte
	nameOff := make([]uint32, len(secs))
	for i, s := range secs {
		nameOff[i] = uint32(len(names))
		names = append(names, s.name...)
		names = append(names, 0)
	}
	secs[len(secs)-1].data = names
	offs := make([]uint64, len(secs))
	for i, s := range secs {
		for len(b)%8 != 0 {
			b = append(b, 0)
		}
		offs[i] = uint64(len(b))
		b = append(b, s.data...)
	}
	for len(b)%8 != 0 {
		b = append(b, 0)
	}
	le.PutUint64(b[offShoff:], uint64(len(b)))
	le.PutUint16(b[offShnum:], uint16(len(secs)))
	le.PutUint16(b[offShstrndx:], uint16(len(secs)-1))
	for i, s := range secs {
		sh := make([]byte, shdrSize)
		le.PutUint32(sh[0:], nameOff[i])
		le.PutUint32(sh[4:], uint32(s.typ))
		le.PutUint64(sh[24:], offs[i])
		le.PutUint64(sh[32:], uint64(len(s.data)))
		le.PutUint64(sh[48:], 1)
		b = append(b, sh...)
	}
	return b
}

// deepInfo returns .debug_abbrev and a DWARF 4 .debug_info whose one unit
// holds subprogram "deep" [0x1000, 0x1100) with depth nested
// DW_TAG_lexical_block children, each covering [0x1000, 0x1100), and one
// variable "v" (location DW_OP_fbreg 0) in the innermost block.
func deepInfo(depth int) (abbrev, info []byte) {
	abbrev = []byte{
		1, byte(dwarf.DW_TAG_compile_unit), 1, 0, 0,
		2, byte(dwarf.DW_TAG_subprogram), 1,
		byte(dwarf.DW_AT_name), byte(dwarf.DW_FORM_string),
		byte(dwarf.DW_AT_low_pc), byte(dwarf.DW_FORM_addr),
		byte(dwarf.DW_AT_high_pc), byte(dwarf.DW_FORM_data4), 0, 0,
		3, byte(dwarf.DW_TAG_lexical_block), 1,
		byte(dwarf.DW_AT_low_pc), byte(dwarf.DW_FORM_addr),
		byte(dwarf.DW_AT_high_pc), byte(dwarf.DW_FORM_data4), 0, 0,
		4, byte(dwarf.DW_TAG_variable), 0,
		byte(dwarf.DW_AT_name), byte(dwarf.DW_FORM_string),
		byte(dwarf.DW_AT_location), byte(dwarf.DW_FORM_exprloc), 0, 0,
		0,
	}
	le := binary.LittleEndian
	info = make([]byte, 11, 11+20+depth*14+10)
	le.PutUint16(info[4:], 4) // version; abbrev offset 0
	info[10] = 8              // address size
	info = append(info, 1)    // compile unit
	info = append(info, 2, 'd', 'e', 'e', 'p', 0)
	info = le.AppendUint64(info, 0x1000)
	info = le.AppendUint32(info, 0x100)
	for range depth {
		info = append(info, 3)
		info = le.AppendUint64(info, 0x1000)
		info = le.AppendUint32(info, 0x100)
	}
	info = append(info, 4, 'v', 0, 2, byte(dwarf.DW_OP_fbreg), 0)
	for range depth + 2 { // blocks, subprogram, unit
		info = append(info, 0)
	}
	le.PutUint32(info, uint32(len(info)-4))
	return abbrev, info
}

// TestDeepDIENesting: nesting up to info.MaxDepth works through the
// subprogram index and Locals; a million nested lexical blocks give a
// FormatError at the first level too deep, without overflowing the Go
// stack or running away (issue 6, point 3).
func TestDeepDIENesting(t *testing.T) {
	deepImage := func(depth int, terminated bool) *Image {
		abbrev, data := deepInfo(depth)
		if !terminated {
			data = data[:len(data)-(depth+2)]
			binary.LittleEndian.PutUint32(data, uint32(len(data)-4))
		}
		return &Image{path: "deep", data: elfWithSections([]tailSection{
			{".debug_abbrev", elf.SHT_PROGBITS, abbrev},
			{".debug_info", elf.SHT_PROGBITS, data},
		})}
	}
	const ok = info.MaxDepth - 2 // below the unit and the subprogram
	for _, terminated := range []bool{true, false} {
		im := deepImage(ok, terminated)
		sub, err := im.SubprogramAt(0x1010)
		if err != nil || sub.Name != "deep" || sub.Low != 0x1000 || sub.High != 0x1100 {
			t.Fatalf("SubprogramAt = %+v, %v", sub, err)
		}
		locals, err := im.Locals(0x1010)
		if err != nil {
			t.Fatal(err)
		}
		if len(locals) != 1 || locals[0].Name != "v" || locals[0].Depth != ok {
			t.Fatalf("Locals = %+v, want v at depth %d", locals, ok)
		}
		if _, err := im.Locals(0x1100); !errors.Is(err, ErrUnknownPC) {
			t.Errorf("Locals past the end: %v, want ErrUnknownPC", err)
		}
	}
	for _, depth := range []int{ok + 1, 1_000_000} {
		im := deepImage(depth, true)
		for name, q := range map[string]func() error{
			"SubprogramAt": func() error { _, err := im.SubprogramAt(0x1010); return err },
			"Locals":       func() error { _, err := im.Locals(0x1010); return err },
		} {
			var fe *dwarf.FormatError
			if err := q(); !errors.As(err, &fe) || fe.Field != "DIE nesting" {
				t.Errorf("depth %d: %s err = %v, want FormatError on DIE nesting", depth, name, err)
			}
		}
	}
}

// symtabImage builds an image whose .symtab holds n Elf64_Sym entries
// (entry 0 null) produced by sym, with .strtab strtab.
func symtabImage(n int, strtab []byte, sym func(i int, b []byte)) *Image {
	symtab := make([]byte, n*symSize)
	for i := 1; i < n; i++ {
		sym(i, symtab[i*symSize:(i+1)*symSize])
	}
	return &Image{path: "syms", data: elfWithSections([]tailSection{
		{".symtab", elf.SHT_SYMTAB, symtab},
		{".strtab", elf.SHT_STRTAB, strtab},
	})}
}

// TestSymbolTableHostile: the .symtab reader reports malformed symbols
// with FormatErrors, and drops overlapping ones so that bisection stays
// exact.
func TestSymbolTableHostile(t *testing.T) {
	le := binary.LittleEndian
	fn := func(name uint32, start, size uint64) func(int, []byte) {
		return func(_ int, b []byte) {
			le.PutUint32(b[0:], name)
			b[4] = byte(elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC))
			le.PutUint64(b[8:], start)
			le.PutUint64(b[16:], size)
		}
	}
	strtab := []byte("\x00f\x00")
	for _, c := range []struct {
		name  string
		im    *Image
		field string
	}{
		{"st_name past .strtab", symtabImage(2, strtab, fn(100, 0x1000, 4)), "st_name of symbol 1"},
		{"st_name max", symtabImage(2, strtab, fn(0xffffffff, 0x1000, 4)), "st_name of symbol 1"},
		{"name not terminated", symtabImage(2, []byte("\x00fff"), fn(1, 0x1000, 4)), "st_name of symbol 1"},
		{"range overflows", symtabImage(2, strtab, fn(1, 0xffffffffffff0000, 0x10000)), "st_size of symbol 1"},
		{"size not a multiple", &Image{path: "syms", data: elfWithSections([]tailSection{
			{".symtab", elf.SHT_SYMTAB, make([]byte, symSize+5)}, {".strtab", elf.SHT_STRTAB, strtab}})}, ".symtab sh_size"},
	} {
		_, err := c.im.ProcedureAt(0x1000)
		var fe *FormatError
		var de *dwarf.FormatError
		switch {
		case errors.As(err, &fe):
			if fe.Field != c.field {
				t.Errorf("%s: %v, want field %q", c.name, err, c.field)
			}
		case errors.As(err, &de):
			if de.Field != c.field {
				t.Errorf("%s: %v, want field %q", c.name, err, c.field)
			}
		default:
			t.Errorf("%s: err = %v, want a FormatError", c.name, err)
		}
	}
	// Overlapping symbols: the first in address order wins; a symbol
	// covering everything after it does not shadow later ones it overlaps.
	im := symtabImage(4, []byte("\x00a\x00b\x00c\x00"), func(i int, b []byte) {
		starts := []uint64{0, 0x1000, 0x1008, 0x1010}
		fn(uint32(2*i-1), starts[i], 0x10)(i, b)
	})
	procs, err := im.Procedures()
	if err != nil || len(procs) != 2 || procs[0].Name != "a" || procs[1].Name != "c" {
		t.Errorf("Procedures = %+v, %v; want a and c", procs, err)
	}
	if p, err := im.ProcedureAt(0x100c); err != nil || p.Name != "a" {
		t.Errorf("ProcedureAt(0x100c) = %+v, %v; want a", p, err)
	}
}

// TestSymbolCountBounded: a .symtab of a million entries that are not
// functions costs no allocation proportional to its size.
func TestSymbolCountBounded(t *testing.T) {
	im := symtabImage(1_000_000, []byte{0}, func(i int, b []byte) { b[4] = byte(elf.STT_OBJECT) })
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	procs, err := im.Procedures()
	runtime.ReadMemStats(&after)
	if err != nil || len(procs) != 0 {
		t.Fatalf("Procedures = %d, %v", len(procs), err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
		t.Errorf("reading a non-function .symtab allocated %d bytes", n)
	}
}

// FuzzSymbols feeds arbitrary bytes, as a whole file, to the section
// header table and .symtab/.strtab readers behind Procedures and
// ProcedureAt: no panic, errors are FormatErrors, and every procedure
// found is where ProcedureAt finds it.
func FuzzSymbols(f *testing.F) {
	le := binary.LittleEndian
	f.Add(buildTestImage())
	f.Add(symtabImage(3, []byte("\x00f\x00g\x00"), func(i int, b []byte) {
		le.PutUint32(b[0:], uint32(2*i-1))
		b[4] = byte(elf.ST_INFO(elf.STB_LOCAL, elf.STT_FUNC))
		le.PutUint64(b[8:], uint64(0x1000*i))
		le.PutUint64(b[16:], 0x20)
	}).data)
	m := &Module{File: "f.scm", Procs: []*Proc{{Name: "f", Code: []byte{0xc3}}, {Name: "g", Code: []byte{0x90, 0xc3}}}}
	if b, err := Link(m, LinkOptions{}); err == nil {
		f.Add(b)
	} else {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		im := &Image{path: "fuzz", data: data}
		procs, err := im.Procedures()
		if errors.Is(err, ErrNoSection) {
			return
		}
		if err != nil {
			var fe *FormatError
			var de *dwarf.FormatError
			if !errors.As(err, &fe) && !errors.As(err, &de) {
				t.Fatalf("error %v is %T, not a FormatError", err, err)
			}
			return
		}
		for _, p := range procs {
			got, err := im.ProcedureAt(p.Start)
			if err != nil || got.Name != p.Name || got.Start != p.Start || got.Size != p.Size {
				t.Fatalf("ProcedureAt(%#x) = %+v, %v; want %+v", p.Start, got, err, p)
			}
		}
	})
}

// FuzzNotes feeds arbitrary bytes to the PT_NOTE reader (the build-ID
// lookup the loader runs): no panic, errors are FormatErrors inside the
// segment, and the build ID (or its absence) and the error are those of
// an independent walk of the notes (refBuildID).
func FuzzNotes(f *testing.F) {
	b := buildTestImage()
	f.Add(uint64(4), b[tNoteOff:tNoteOff+tNoteSize])
	f.Add(uint64(8), b[tNoteOff:tNoteOff+tNoteSize])
	f.Add(uint64(4), append(append([]byte(nil), b[tNoteOff:tNoteOff+tNoteSize]...), b[tNoteOff:tNoteOff+tNoteSize]...))
	// Two build-ID notes, another note between them: the first counts.
	note := func(name string, typ uint32, desc string) []byte {
		n := binary.LittleEndian.AppendUint32(nil, uint32(len(name)+1))
		n = binary.LittleEndian.AppendUint32(n, uint32(len(desc)))
		n = binary.LittleEndian.AppendUint32(n, typ)
		n = append(n, name...)
		n = append(n, make([]byte, 4-len(name)%4)...)
		n = append(n, desc...)
		return append(n, make([]byte, (4-len(desc)%4)%4)...)
	}
	f.Add(uint64(4), bytes.Join([][]byte{note("GNU", 1, "abi."), note("GNU", 3, "first id"), note("Go", 3, "go-id"), note("GNU", 3, "second")}, nil))
	f.Fuzz(func(t *testing.T, align uint64, body []byte) {
		p := &plan{}
		d := &decoder{path: "fuzz", data: body}
		err := p.parseNotes(d, 0x1000, align, body, body)
		if _, _, ok := refBuildID(body, align); ok != (err == nil) {
			t.Fatalf("parseNotes: %v; the reference walk finds the notes well-formed: %v", err, ok)
		}
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) || fe.Offset < 0x1000 || fe.Offset >= 0x1000+uint64(len(body)) {
				t.Fatalf("error %v (%T) not a FormatError inside the segment", err, err)
			}
			return
		}
		if len(p.buildID) > len(body) {
			t.Fatalf("build ID of %d bytes from %d", len(p.buildID), len(body))
		}
		want, found, ok := refBuildID(body, align)
		if !ok || found != (p.buildID != nil) || !bytes.Equal(p.buildID, want) {
			t.Fatalf("build ID %x (found %v); the reference walk gives %x (found %v, well-formed %v)", p.buildID, p.buildID != nil, want, found, ok)
		}
	})
}

// refBuildID walks the notes of a PT_NOTE segment by the rules the
// toolchains follow (gABI "Note Section": n_namesz, n_descsz, n_type, then
// the name and the descriptor; with p_align 8, else 4, the descriptor
// and the next note start at the next multiple of the alignment counted
// from the start of the segment, so an 8-aligned "GNU" note has its
// descriptor at 16; the last padding may be missing) and returns the
// descriptor of the first NT_GNU_BUILD_ID note named "GNU" (NULs
// trimmed). ok is false when a note runs past the end.
func refBuildID(b []byte, align uint64) (id []byte, found, ok bool) {
	a := 4
	if align == 8 {
		a = 8
	}
	pad := func(n int) int { return (n + a - 1) / a * a }
	for i := 0; i < len(b); {
		if len(b)-i < 12 {
			return id, found, false
		}
		namesz := int(binary.LittleEndian.Uint32(b[i:]))
		descsz := int(binary.LittleEndian.Uint32(b[i+4:]))
		typ := binary.LittleEndian.Uint32(b[i+8:])
		name0 := i + 12
		if namesz < 0 || namesz > len(b)-name0 {
			return id, found, false
		}
		name := strings.TrimRight(string(b[name0:name0+namesz]), "\x00")
		desc0 := pad(name0 + namesz)
		if desc0 > len(b) || descsz < 0 || descsz > len(b)-desc0 {
			return id, found, false
		}
		if typ == 3 /* NT_GNU_BUILD_ID */ && name == "GNU" && !found {
			id, found = b[desc0:desc0+descsz], true
		}
		i = pad(desc0 + descsz)
	}
	return id, found, true
}

// TestTrapCUWithoutRanges (REFERENCE.md, DWARF): a unit without
// low_pc/high_pc/ranges (here: a root DIE with only a name and a comp_dir)
// but with a valid line program is still covered: PositionAt falls back
// to the line program's sequences.
func TestTrapCUWithoutRanges(t *testing.T) {
	p := &line.Program{Enc: dwarf.Encoding{Version: 4, Format: dwarf.Format32, AddrSize: 8, ByteOrder: binary.LittleEndian},
		Files:     []line.File{{Name: "x.scm"}, {Name: "x.scm"}},
		Sequences: []line.Sequence{{Start: 0x1000, End: 0x1010, Rows: []line.Row{{Address: 0x1000, File: 1, Line: 7, Column: 3}}}}}
	debugLine, err := p.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	abbrev := []byte{1, byte(dwarf.DW_TAG_compile_unit), 0,
		byte(dwarf.DW_AT_name), byte(dwarf.DW_FORM_string), byte(dwarf.DW_AT_comp_dir), byte(dwarf.DW_FORM_string),
		byte(dwarf.DW_AT_stmt_list), byte(dwarf.DW_FORM_sec_offset), 0, 0, 0}
	info := []byte{0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 8, 1}
	info = append(info, "x.scm\x00/src\x00"...)
	info = append(info, 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(info, uint32(len(info)-4))
	im := &Image{path: "noranges", data: elfWithSections([]tailSection{
		{".debug_abbrev", elf.SHT_PROGBITS, abbrev},
		{".debug_info", elf.SHT_PROGBITS, info},
		{".debug_line", elf.SHT_PROGBITS, debugLine},
	})}
	pos, err := im.PositionAt(0x1008)
	if err != nil || pos.File != "/src/x.scm" || pos.Line != 7 || pos.Column != 3 {
		t.Errorf("PositionAt = %+v, %v; want /src/x.scm:7:3", pos, err)
	}
	if _, err := im.PositionAt(0x1010); !errors.Is(err, ErrUnknownPC) {
		t.Errorf("PositionAt past the sequence: %v, want ErrUnknownPC", err)
	}
}

// TestProceduresSymbolDisagreesWithTable: a .symtab whose size for a
// procedure differs from the procedure table's (a hostile or edited
// file, found by FuzzSymbols) gives the symbol's range in Procedures, as
// ProcedureAt does, rather than the table's description of another range.
func TestProceduresSymbolDisagreesWithTable(t *testing.T) {
	m := &Module{File: "f.scm", Procs: []*Proc{{Name: "f", Code: []byte{0xc3}}, {Name: "g", Code: []byte{0x90, 0xc3}}}}
	b, err := Link(m, LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	sec := f.Section(".symtab")
	syms, err := f.Symbols()
	if err != nil || sec == nil {
		t.Fatal(sec, err)
	}
	const huge = 1 << 56
	var g elf.Symbol
	for i, s := range syms {
		if s.Name == "g" {
			g = s
			binary.LittleEndian.PutUint64(b[sec.Offset+uint64(i+1)*symSize+16:], huge)
		}
	}
	if g.Name == "" {
		t.Fatal("no symbol g")
	}
	im := &Image{path: "edited", data: b}
	procs, err := im.Procedures()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if p.Name != "g" {
			continue
		}
		at, err := im.ProcedureAt(p.Start)
		if err != nil || at.Size != huge || p.Size != huge {
			t.Errorf("Procedures gives g %#x+%#x, ProcedureAt %#x+%#x (%v); want both of size %#x", p.Start, p.Size, at.Start, at.Size, err, uint64(huge))
		}
		return
	}
	t.Errorf("Procedures = %+v, no g", procs)
}
