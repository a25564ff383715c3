package elfimage

import (
	"debug/elf"
	"fmt"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/info"
	"github.com/elfimage/elfimage/dwarf/line"
)

// buildDWARF builds the debug sections of the module: one compile unit
// with a subprogram per procedure and its formal parameters, a base type
// for the language's integers, and a line program with one sequence per
// procedure. It returns the sections in the order they are laid out.
func (l *linker) buildDWARF() ([]*section, error) {
	m := l.m
	str := dwarf.NewStrTab()
	lineStr := dwarf.NewStrTab()

	// .debug_line: file entries 0 and 1 both name the primary source
	// file, so DWARF 5 consumers (0-based) and older ones (1-based) agree.
	prog := &line.Program{Enc: l.enc, CompDir: m.CompDir}
	file := m.File
	if file == "" {
		file = "<unknown>"
	}
	prog.Files = []line.File{{Name: file}, {Name: file}}
	const fileIndex = 1
	for i, p := range m.Procs {
		start := l.procAddr[i]
		seq := line.Sequence{Start: start, End: start + uint64(len(p.Code))}
		for j, r := range p.Lines {
			if r.Offset >= uint32(len(p.Code)) {
				return nil, &LinkError{"proc " + p.Name, fmt.Sprintf("line row %d at offset %#x is past the end of the code (%#x bytes)", j, r.Offset, len(p.Code))}
			}
			if j > 0 && r.Offset < p.Lines[j-1].Offset {
				return nil, &LinkError{"proc " + p.Name, fmt.Sprintf("line row %d at offset %#x goes backwards", j, r.Offset)}
			}
			seq.Rows = append(seq.Rows, line.Row{Address: start + uint64(r.Offset), File: fileIndex,
				Line: r.Line, Column: r.Column, IsStmt: r.IsStmt, PrologueEnd: r.PrologueEnd})
		}
		if len(seq.Rows) > 0 { // a procedure without rows gets no (empty) sequence
			prog.Sequences = append(prog.Sequences, seq)
		}
	}
	debugLine, err := prog.Encode(lineStr)
	if err != nil {
		return nil, &LinkError{"module", fmt.Sprintf(".debug_line: %v", err)}
	}

	// .debug_info.
	lowHigh := func(lo, size uint64) []info.Attr {
		hi := info.Udata(size)
		if l.enc.Version < 4 {
			hi = info.Addr(lo + size)
		}
		return []info.Attr{{Name: dwarf.DW_AT_low_pc, Value: info.Addr(lo)}, {Name: dwarf.DW_AT_high_pc, Value: hi}}
	}
	cu := &info.DIE{Tag: dwarf.DW_TAG_compile_unit}
	if m.Producer != "" {
		cu.Attrs = append(cu.Attrs, info.Attr{Name: dwarf.DW_AT_producer, Value: info.String(m.Producer)})
	}
	if m.Language != 0 {
		cu.Attrs = append(cu.Attrs, info.Attr{Name: dwarf.DW_AT_language, Value: info.Udata(uint64(m.Language))})
	}
	cu.Attrs = append(cu.Attrs, info.Attr{Name: dwarf.DW_AT_name, Value: info.String(file)})
	if m.CompDir != "" {
		cu.Attrs = append(cu.Attrs, info.Attr{Name: dwarf.DW_AT_comp_dir, Value: info.String(m.CompDir)})
	}
	cu.Attrs = append(cu.Attrs, lowHigh(l.textStart, l.textEnd-l.textStart)...)
	cu.Attrs = append(cu.Attrs, info.Attr{Name: dwarf.DW_AT_stmt_list, Value: info.SecOffset(0)})

	// The language's integers: 64-bit signed, so debuggers print values.
	intType := &info.DIE{Tag: dwarf.DW_TAG_base_type, Attrs: []info.Attr{
		{Name: dwarf.DW_AT_name, Value: info.String("integer")},
		{Name: dwarf.DW_AT_encoding, Value: info.Udata(uint64(dwarf.DW_ATE_signed))},
		{Name: dwarf.DW_AT_byte_size, Value: info.Udata(8)},
	}}
	cu.Children = append(cu.Children, intType)
	frameBase := []byte{byte(dwarf.DW_OP_call_frame_cfa)}
	for i, p := range m.Procs {
		sp := &info.DIE{Tag: dwarf.DW_TAG_subprogram}
		sp.Attrs = append(sp.Attrs, info.Attr{Name: dwarf.DW_AT_name, Value: info.String(p.Name)})
		if p.Line > 0 {
			sp.Attrs = append(sp.Attrs,
				info.Attr{Name: dwarf.DW_AT_decl_file, Value: info.Udata(fileIndex)},
				info.Attr{Name: dwarf.DW_AT_decl_line, Value: info.Udata(uint64(p.Line))})
			if p.Column > 0 {
				sp.Attrs = append(sp.Attrs, info.Attr{Name: dwarf.DW_AT_decl_column, Value: info.Udata(uint64(p.Column))})
			}
		}
		if p.Internal {
			sp.Attrs = append(sp.Attrs, info.Attr{Name: dwarf.DW_AT_artificial, Value: info.Flag(true)})
		} else {
			// Procedures of the language return its integers.
			sp.Attrs = append(sp.Attrs,
				info.Attr{Name: dwarf.DW_AT_type, Value: info.Ref(intType)},
				info.Attr{Name: dwarf.DW_AT_external, Value: info.Flag(true)})
		}
		sp.Attrs = append(sp.Attrs, lowHigh(l.procAddr[i], uint64(len(p.Code)))...)
		sp.Attrs = append(sp.Attrs, info.Attr{Name: dwarf.DW_AT_frame_base, Value: info.Exprloc(frameBase)})
		for _, v := range p.Params {
			param := &info.DIE{Tag: dwarf.DW_TAG_formal_parameter, Attrs: []info.Attr{
				{Name: dwarf.DW_AT_name, Value: info.String(v.Name)},
				{Name: dwarf.DW_AT_type, Value: info.Ref(intType)},
			}}
			if len(v.Location) > 0 {
				param.Attrs = append(param.Attrs, info.Attr{Name: dwarf.DW_AT_location, Value: info.Exprloc(v.Location)})
			}
			sp.Children = append(sp.Children, param)
		}
		cu.Children = append(cu.Children, sp)
	}
	debugInfo, debugAbbrev, err := info.Encode([]*info.Unit{{Enc: l.enc, Root: cu}}, str)
	if err != nil {
		return nil, &LinkError{"module", fmt.Sprintf(".debug_info: %v", err)}
	}

	debug := func(name string, data []byte, strings bool) *section {
		s := &section{name: name, typ: elf.SHT_PROGBITS, align: 1, data: data}
		if strings {
			s.flags = elf.SHF_MERGE | elf.SHF_STRINGS
			s.entsize = 1
		}
		return s
	}
	secs := []*section{
		debug(".debug_abbrev", debugAbbrev, false),
		debug(".debug_info", debugInfo, false),
		debug(".debug_line", debugLine, false),
		debug(".debug_str", str.Bytes(), true),
	}
	if l.enc.Version >= 5 {
		secs = append(secs, debug(".debug_line_str", lineStr.Bytes(), true))
	}
	return secs, nil
}
