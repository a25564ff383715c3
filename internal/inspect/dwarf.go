package inspect

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/expr"
	"github.com/elfimage/elfimage/dwarf/info"
	"github.com/elfimage/elfimage/dwarf/line"
	"github.com/elfimage/elfimage/dwarf/loc"
	"github.com/elfimage/elfimage/elfobj"
)

// DebugSections are the DWARF sections of one file, decompressed and (in
// an ET_REL file) relocated, as the readers take them.
type DebugSections struct {
	Info  info.Sections
	Line  line.Sections
	Lists loc.Sections // AddrBase is set per unit
}

// ReadDebugSections reads f's DWARF sections with
// [elfobj.File.DebugSection]; absent sections are nil.
func ReadDebugSections(f *elfobj.File) (*DebugSections, error) {
	var errs []error
	get := func(name string) []byte {
		b, err := f.DebugSection(name)
		if err != nil {
			errs = append(errs, err)
		}
		return b
	}
	var bo binary.ByteOrder = binary.LittleEndian
	if f.ByteOrder != nil {
		bo = f.ByteOrder
	}
	d := &DebugSections{}
	d.Info = info.Sections{Info: get(".debug_info"), Abbrev: get(".debug_abbrev"), Str: get(".debug_str"),
		LineStr: get(".debug_line_str"), StrOffsets: get(".debug_str_offsets"), Addr: get(".debug_addr"),
		RngLists: get(".debug_rnglists"), LocLists: get(".debug_loclists"), Order: bo}
	d.Line = line.Sections{Line: get(".debug_line"), Str: d.Info.Str, LineStr: d.Info.LineStr, Order: bo}
	d.Lists = loc.Sections{Loc: get(".debug_loc"), LocLists: d.Info.LocLists, Ranges: get(".debug_ranges"),
		RngLists: d.Info.RngLists, Addr: d.Info.Addr}
	return d, errors.Join(errs...)
}

// Unit is one unit of .debug_info with its DIEs in section order.
type Unit struct {
	Offset   uint64
	Version  uint16
	Format   string // "DWARF32" or "DWARF64"
	UnitType string // DW_UT_ name
	AddrSize uint8
	Abbrev   uint64 // debug_abbrev_offset
	DIEs     []DIE
}

// DIE is one debugging information entry; Depth is 0 for the unit's root.
// A null entry (the end of a list of siblings) is not listed.
type DIE struct {
	Offset uint64
	Depth  int
	Tag    string
	Attrs  []Attr
}

// Attr is one attribute: its name, form and value as text (strings
// quoted, references as <0x...>, expressions operation by operation), and
// for a location list or range list its entries.
type Attr struct {
	Name  string
	Form  string
	Value string
	List  []ListEntry `json:",omitempty"`
}

// ListEntry is one entry of a location list or range list: the
// addresses [Start, End) and, for a location list, the expression.
type ListEntry struct {
	Start, End uint64
	Default    bool   `json:",omitempty"` // DW_LLE_default_location
	Expr       string `json:",omitempty"`
}

// DebugInfo decodes every unit of d and its DIEs, calling each for every
// unit (so that a caller may print as it goes and keep nothing). DIEs of a
// unit are bounded by its size; a malformed DIE ends the walk with its
// error after the units before it.
func DebugInfo(d *info.Data, sec *DebugSections, each func(Unit) error) error {
	r := d.Reader()
	var u *Unit
	var hdr *info.UnitHeader
	var base uint64
	depth := 0
	flush := func() error {
		if u == nil {
			return nil
		}
		err := each(*u)
		u = nil
		return err
	}
	for {
		e, err := r.Next()
		if err != nil {
			flush()
			return err
		}
		if e == nil {
			return flush()
		}
		if h := r.Unit(); h != nil && e.Offset == h.DataOffset {
			if err := flush(); err != nil {
				return err
			}
			hdr = h
			u = &Unit{Offset: h.Offset, Version: h.Enc.Version, Format: h.Enc.Format.String(), UnitType: h.Type.String(),
				AddrSize: h.Enc.AddrSize, Abbrev: h.AbbrevOffset}
			depth = 0
			base, _ = e.Uint(dwarf.DW_AT_low_pc)
			if f, ok := e.Val(dwarf.DW_AT_low_pc); !ok || f.Class != info.ClassAddress {
				base = 0
			}
		}
		if e.Tag == 0 {
			if depth > 0 { // malformed input may end more lists than it opened
				depth--
			}
			continue
		}
		if u == nil {
			continue
		}
		die := DIE{Offset: e.Offset, Depth: depth, Tag: TagName(e.Tag), Attrs: make([]Attr, 0, len(e.Fields))}
		for _, f := range e.Fields {
			a := Attr{Name: AttrName(f.Attr), Form: f.Form.String(), Value: FieldString(f, hdr.Enc)}
			if sec != nil && f.Class == info.ClassSecOffset {
				a.List = lists(sec, hdr, base, f)
			}
			die.Attrs = append(die.Attrs, a)
		}
		u.DIEs = append(u.DIEs, die)
		if e.Children {
			depth++
		}
	}
}

// isLocAttr reports whether a section offset of attribute a is a location
// list (DWARF 5 section 7.5.5, class loclist).
func isLocAttr(a dwarf.Attr) bool {
	switch a {
	case dwarf.DW_AT_location, dwarf.DW_AT_frame_base, dwarf.DW_AT_data_member_location,
		0x19, 0x2a, 0x46, 0x48, 0x4a, 0x4d: // string_length, return_addr, segment, static_link, use_location, vtable_elem_location
		return true
	}
	return false
}

// atStartScope is DW_AT_start_scope (DWARF 5 section 7.5.4), of class rnglist.
const atStartScope dwarf.Attr = 0x2c

func lists(sec *DebugSections, h *info.UnitHeader, base uint64, f info.Field) []ListEntry {
	ls := sec.Lists
	ls.AddrBase = h.AddrBase
	var r loc.ListReader
	switch {
	case isLocAttr(f.Attr):
		r = loc.NewLocListReader(ls, h.Enc, f.Val, base)
	case f.Attr == dwarf.DW_AT_ranges || f.Attr == atStartScope:
		r = loc.NewRangeListReader(ls, h.Enc, f.Val, base)
	default:
		return nil
	}
	var out []ListEntry
	var e loc.Entry
	for r.Next(&e) {
		le := ListEntry{Start: e.Start, End: e.End, Default: e.Default}
		if isLocAttr(f.Attr) {
			le.Expr = ExprString(e.Expr, h.Enc)
		}
		out = append(out, le)
	}
	if err := r.Err(); err != nil {
		out = append(out, ListEntry{Expr: "<error: " + err.Error() + ">"})
	}
	return out
}

// FieldString formats an attribute's value by its class: strings quoted,
// addresses in hexadecimal, references as <0x...>, flags as true/false,
// section offsets as "section offset 0x...", expressions operation by
// operation, DW_AT_encoding and DW_AT_language by name.
func FieldString(f info.Field, enc dwarf.Encoding) string {
	switch f.Class {
	case info.ClassString:
		return fmt.Sprintf("%q", f.Str)
	case info.ClassAddress:
		return fmt.Sprintf("%#x", f.Val)
	case info.ClassReference:
		return fmt.Sprintf("<%#x>", f.Val)
	case info.ClassFlag:
		return fmt.Sprint(f.Val != 0)
	case info.ClassSecOffset:
		return fmt.Sprintf("section offset %#x", f.Val)
	case info.ClassExprloc:
		return ExprString(f.Block, enc)
	case info.ClassBlock:
		if f.Attr == dwarf.DW_AT_location || f.Attr == dwarf.DW_AT_frame_base || f.Attr == dwarf.DW_AT_data_member_location {
			return ExprString(f.Block, enc)
		}
		return fmt.Sprintf("<% x>", f.Block)
	case info.ClassConstant:
		switch f.Attr {
		case dwarf.DW_AT_encoding:
			return dwarf.ATE(f.Val).String()
		case dwarf.DW_AT_language:
			return dwarf.Lang(f.Val).String()
		}
		if f.Form == dwarf.DW_FORM_data16 {
			return fmt.Sprintf("<% x>", f.Block)
		}
		if f.Form == dwarf.DW_FORM_sdata || f.Form == dwarf.DW_FORM_implicit_const {
			return fmt.Sprint(int64(f.Val))
		}
		return fmt.Sprint(f.Val)
	}
	return fmt.Sprintf("%v %#x", f.Form, f.Val)
}

// ExprString prints a DWARF expression operation by operation (package
// dwarf/expr decodes it), register and frame base offsets as
// DW_OP_breg5(8), the expression of a DW_OP_entry_value inside its
// parentheses; a malformed expression as its bytes.
func ExprString(b []byte, enc dwarf.Encoding) string { return exprString(b, enc, 0) }

// exprString is ExprString inside depth entry-value operands.
func exprString(b []byte, enc dwarf.Encoding, depth int) string {
	as := enc.AddrSize
	if as == 0 {
		as = 8
	}
	ops, err := expr.Decode(b, expr.Params{AddrSize: as, Order: enc.ByteOrder, Format: enc.Format})
	if err != nil {
		return fmt.Sprintf("<malformed: % x>", b)
	}
	parts := make([]string, len(ops))
	for i, o := range ops {
		switch {
		case o.Op == dwarf.DW_OP_fbreg:
			parts[i] = fmt.Sprintf("%v(%d)", o.Op, int64(o.Args[0]))
		case o.Op >= dwarf.DW_OP_breg0 && o.Op <= dwarf.DW_OP_breg31:
			parts[i] = fmt.Sprintf("DW_OP_breg%d(%d)", o.Op-dwarf.DW_OP_breg0, int64(o.Args[0]))
		case (o.Op == dwarf.DW_OP_entry_value || o.Op == dwarf.DW_OP_GNU_entry_value) && depth < 4:
			// The operand is an expression (DWARF 5 section 2.5.1.7).
			parts[i] = fmt.Sprintf("%v(%s)", o.Op, exprString(o.Block, enc, depth+1))
		default:
			parts[i] = o.String()
		}
	}
	return strings.Join(parts, " ")
}

// WriteUnit prints one unit's DIEs, one per line indented by depth, every
// attribute on its own line, list entries below it.
func WriteUnit(w io.Writer, u Unit) {
	fmt.Fprintf(w, "  unit at %#x: DWARF %d, %s, %s, address size %d, abbrev offset %#x\n", u.Offset, u.Version, u.Format, u.UnitType, u.AddrSize, u.Abbrev)
	for _, d := range u.DIEs {
		ind := strings.Repeat("  ", d.Depth+1)
		fmt.Fprintf(w, "%s<%#x> %s\n", ind, d.Offset, d.Tag)
		for _, a := range d.Attrs {
			fmt.Fprintf(w, "%s    %-28s %s\n", ind, a.Name, a.Value)
			for _, e := range a.List {
				switch {
				case e.Default:
					fmt.Fprintf(w, "%s        <default>: %s\n", ind, e.Expr)
				case e.Expr != "" || isLocName(a.Name):
					fmt.Fprintf(w, "%s        [%#x, %#x): %s\n", ind, e.Start, e.End, e.Expr)
				default:
					fmt.Fprintf(w, "%s        [%#x, %#x)\n", ind, e.Start, e.End)
				}
			}
		}
	}
}

func isLocName(s string) bool {
	return s != dwarf.DW_AT_ranges.String() && s != atStartScope.String()
}

// LineProgram is one line program of .debug_line: its header, its file
// table and its rows (end_sequence rows included).
type LineProgram struct {
	Offset        uint64
	Version       uint16
	Format        string
	AddrSize      uint8 `json:",omitempty"`
	MinInstLength uint8
	MaxOpsPerInst uint8
	DefaultIsStmt bool
	LineBase      int8
	LineRange     uint8
	OpcodeBase    uint8
	Dirs          []string
	Files         []LineFile
	Rows          []LineRow
}

// LineFile is one file entry; Index is the value rows name it by.
type LineFile struct {
	Index int
	Name  string
	Dir   uint64
	Path  string
	MD5   string `json:",omitempty"`
}

// LineRow is one row of the line number matrix (DWARF 5 section 6.2.2).
type LineRow struct {
	Address       uint64
	Line          uint32
	Column        uint32
	File          uint64
	ISA           uint64 `json:",omitempty"`
	Discriminator uint64 `json:",omitempty"`
	OpIndex       uint64 `json:",omitempty"`
	Flags         string // llvm-dwarfdump's: is_stmt basic_block end_sequence prologue_end epilogue_begin
}

// DebugLine decodes every line program of sec.Line in section order,
// calling each for each. compDirs gives the compilation directory of the
// programs the units name by DW_AT_stmt_list (directory 0 before DWARF 5).
// Programs are bounded by their unit_length; a malformed one ends the walk
// with its error.
func DebugLine(sec line.Sections, compDirs map[uint64]string, each func(LineProgram) error) error {
	var off uint64
	for n := 0; off < uint64(len(sec.Line)) && n < len(sec.Line); n++ {
		r, err := line.NewReader(sec, off, compDirs[off])
		if err != nil {
			return err
		}
		h := r.Header()
		p := LineProgram{Offset: off, Version: h.Version, Format: h.Format.String(), AddrSize: h.AddrSize,
			MinInstLength: h.MinInstLength, MaxOpsPerInst: h.MaxOpsPerInst, DefaultIsStmt: h.DefaultIsStmt,
			LineBase: h.LineBase, LineRange: h.LineRange, OpcodeBase: h.OpcodeBase, Dirs: h.Dirs}
		for i, f := range r.Files() {
			if h.Version < 5 && i == 0 {
				continue
			}
			lf := LineFile{Index: i, Name: f.Name, Dir: f.Dir, Path: f.Path}
			if f.HasMD5 {
				lf.MD5 = fmt.Sprintf("%x", f.MD5)
			}
			p.Files = append(p.Files, lf)
		}
		var row line.Row
		for {
			err := r.Next(&row)
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			p.Rows = append(p.Rows, LineRow{Address: row.Address, Line: row.Line, Column: row.Column, File: row.File,
				ISA: row.ISA, Discriminator: row.Discriminator, OpIndex: row.OpIndex, Flags: rowFlags(row)})
		}
		if err := each(p); err != nil {
			return err
		}
		if h.End <= off {
			break
		}
		off = h.End
	}
	return nil
}

func rowFlags(r line.Row) string {
	var f []string
	for _, x := range []struct {
		on   bool
		name string
	}{{r.IsStmt, "is_stmt"}, {r.BasicBlock, "basic_block"}, {r.EndSequence, "end_sequence"},
		{r.PrologueEnd, "prologue_end"}, {r.EpilogueBegin, "epilogue_begin"}} {
		if x.on {
			f = append(f, x.name)
		}
	}
	return strings.Join(f, " ")
}

// CompDirs returns the DW_AT_comp_dir of every unit with a DW_AT_stmt_list,
// by that offset, for [DebugLine].
func CompDirs(d *info.Data) map[uint64]string {
	out := map[uint64]string{}
	r := d.Reader()
	units := d.Units()
	offs := make([]uint64, len(units))
	for i, u := range units {
		offs[i] = u.DataOffset
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	for _, off := range offs {
		r.Seek(off)
		e, err := r.Next()
		if err != nil || e == nil {
			continue
		}
		if sl, ok := e.Val(dwarf.DW_AT_stmt_list); ok {
			dir, _ := e.String(dwarf.DW_AT_comp_dir)
			out[sl.Val] = dir
		}
	}
	return out
}

// WriteLineProgram prints one line program as llvm-dwarfdump
// --debug-line does: the header's fields, the directory and file tables,
// and the rows.
func WriteLineProgram(w io.Writer, p LineProgram) {
	fmt.Fprintf(w, "debug_line[0x%08x]\nLine table prologue:\n", p.Offset)
	fmt.Fprintf(w, "            format: %s\n           version: %d\n", p.Format, p.Version)
	if p.Version >= 5 {
		fmt.Fprintf(w, "      address_size: %d\n", p.AddrSize)
	}
	fmt.Fprintf(w, " min_inst_length: %d\nmax_ops_per_inst: %d\n default_is_stmt: %d\n       line_base: %d\n      line_range: %d\n     opcode_base: %d\n",
		p.MinInstLength, p.MaxOpsPerInst, b2i(p.DefaultIsStmt), p.LineBase, p.LineRange, p.OpcodeBase)
	for i, d := range p.Dirs {
		fmt.Fprintf(w, "include_directories[%3d] = %q\n", i, d)
	}
	for _, f := range p.Files {
		fmt.Fprintf(w, "file_names[%3d]:\n           name: %q\n      dir_index: %d\n", f.Index, f.Name, f.Dir)
		if f.MD5 != "" {
			fmt.Fprintf(w, "   md5_checksum: %s\n", f.MD5)
		}
	}
	fmt.Fprintf(w, "\nAddress            Line   Column File   ISA Discriminator OpIndex Flags\n")
	fmt.Fprintf(w, "------------------ ------ ------ ------ --- ------------- ------- -------------\n")
	for _, r := range p.Rows {
		fmt.Fprintf(w, "0x%016x %6d %6d %6d %3d %13d %7d  %s\n", r.Address, r.Line, r.Column, r.File, r.ISA, r.Discriminator, r.OpIndex, r.Flags)
	}
	fmt.Fprintln(w)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// vendorAttrs names the GNU, LLVM and Go vendor attributes producers emit
// that package dwarf's table leaves unnamed (GCC's "DWARF extensions",
// LLVM's include/llvm/BinaryFormat/Dwarf.def), as llvm-dwarfdump names
// them.
var vendorAttrs = map[dwarf.Attr]string{
	0x2101: "DW_AT_sf_names", 0x2102: "DW_AT_src_info", 0x2103: "DW_AT_mac_info", 0x2104: "DW_AT_src_coords",
	0x2105: "DW_AT_body_begin", 0x2106: "DW_AT_body_end", 0x2107: "DW_AT_GNU_vector", 0x2110: "DW_AT_GNU_template_name",
	0x2111: "DW_AT_GNU_call_site_value", 0x2112: "DW_AT_GNU_call_site_data_value", 0x2113: "DW_AT_GNU_call_site_target",
	0x2114: "DW_AT_GNU_call_site_target_clobbered", 0x2115: "DW_AT_GNU_tail_call", 0x2116: "DW_AT_GNU_all_tail_call_sites",
	0x2118: "DW_AT_GNU_all_source_call_sites", 0x2119: "DW_AT_GNU_macros", 0x211a: "DW_AT_GNU_deleted",
	0x2130: "DW_AT_GNU_dwo_name", 0x2131: "DW_AT_GNU_dwo_id", 0x2132: "DW_AT_GNU_ranges_base", 0x2133: "DW_AT_GNU_addr_base",
	0x2134: "DW_AT_GNU_pubnames", 0x2135: "DW_AT_GNU_pubtypes", 0x2136: "DW_AT_GNU_discriminator",
	0x2137: "DW_AT_GNU_locviews", 0x2138: "DW_AT_GNU_entry_view",
	0x3e00: "DW_AT_LLVM_include_path", 0x3e01: "DW_AT_LLVM_config_macros", 0x3e02: "DW_AT_LLVM_sysroot",
	0x3e03: "DW_AT_LLVM_tag_offset", 0x3e07: "DW_AT_LLVM_apinotes", 0x3fef: "DW_AT_APPLE_sdk",
	// The Go toolchain's (cmd/internal/dwarf); llvm-dwarfdump calls
	// them DW_AT_unknown_29xx.
	0x2900: "DW_AT_go_kind", 0x2901: "DW_AT_go_key", 0x2902: "DW_AT_go_elem", 0x2903: "DW_AT_go_embedded_field",
	0x2904: "DW_AT_go_runtime_type", 0x2905: "DW_AT_go_package_name", 0x2906: "DW_AT_go_dict_index",
	0x2907: "DW_AT_go_closure_offset",
}

// vendorTags names the GNU vendor tags package dwarf leaves unnamed.
var vendorTags = map[dwarf.Tag]string{
	0x4101: "DW_TAG_format_label", 0x4102: "DW_TAG_function_template", 0x4103: "DW_TAG_class_template",
	0x4106: "DW_TAG_GNU_template_template_param", 0x4107: "DW_TAG_GNU_template_parameter_pack",
	0x4108: "DW_TAG_GNU_formal_parameter_pack", 0x410a: "DW_TAG_GNU_call_site_parameter",
}

// AttrName names an attribute: package dwarf's name, else the
// standard's or a vendor's.
func AttrName(a dwarf.Attr) string {
	s := a.String()
	if !strings.HasPrefix(s, "DW_AT_0x") {
		return s
	}
	if n, ok := stdAttrs[a]; ok {
		return n
	}
	if n, ok := vendorAttrs[a]; ok {
		return n
	}
	return s
}

// TagName names a tag: package dwarf's name, else the standard's or a
// vendor's.
func TagName(t dwarf.Tag) string {
	s := t.String()
	if !strings.HasPrefix(s, "DW_TAG_0x") {
		return s
	}
	if n, ok := stdTags[t]; ok {
		return n
	}
	if n, ok := vendorTags[t]; ok {
		return n
	}
	return s
}

// stdAttrs and stdTags name every attribute and tag of DWARF 5 (section
// 7.5.4, Table 7.5; section 7.5.3, Table 7.3), with DW_AT_bit_offset of
// DWARF 2 and 3, for the codes package dwarf's table (which holds what
// elfimage writes and reads) leaves unnamed: dump prints what any
// producer wrote in the standard's spelling, as llvm-dwarfdump does.
var stdAttrs = map[dwarf.Attr]string{
	0x01: "DW_AT_sibling", 0x02: "DW_AT_location", 0x03: "DW_AT_name", 0x09: "DW_AT_ordering",
	0x0b: "DW_AT_byte_size", 0x0c: "DW_AT_bit_offset", 0x0d: "DW_AT_bit_size", 0x10: "DW_AT_stmt_list",
	0x11: "DW_AT_low_pc", 0x12: "DW_AT_high_pc", 0x13: "DW_AT_language", 0x15: "DW_AT_discr",
	0x16: "DW_AT_discr_value", 0x17: "DW_AT_visibility", 0x18: "DW_AT_import", 0x19: "DW_AT_string_length",
	0x1a: "DW_AT_common_reference", 0x1b: "DW_AT_comp_dir", 0x1c: "DW_AT_const_value",
	0x1d: "DW_AT_containing_type", 0x1e: "DW_AT_default_value", 0x20: "DW_AT_inline", 0x21: "DW_AT_is_optional",
	0x22: "DW_AT_lower_bound", 0x25: "DW_AT_producer", 0x27: "DW_AT_prototyped", 0x2a: "DW_AT_return_addr",
	0x2c: "DW_AT_start_scope", 0x2e: "DW_AT_bit_stride", 0x2f: "DW_AT_upper_bound",
	0x31: "DW_AT_abstract_origin", 0x32: "DW_AT_accessibility", 0x33: "DW_AT_address_class",
	0x34: "DW_AT_artificial", 0x35: "DW_AT_base_types", 0x36: "DW_AT_calling_convention", 0x37: "DW_AT_count",
	0x38: "DW_AT_data_member_location", 0x39: "DW_AT_decl_column", 0x3a: "DW_AT_decl_file",
	0x3b: "DW_AT_decl_line", 0x3c: "DW_AT_declaration", 0x3d: "DW_AT_discr_list", 0x3e: "DW_AT_encoding",
	0x3f: "DW_AT_external", 0x40: "DW_AT_frame_base", 0x41: "DW_AT_friend", 0x42: "DW_AT_identifier_case",
	0x43: "DW_AT_macro_info", 0x44: "DW_AT_namelist_item", 0x45: "DW_AT_priority", 0x46: "DW_AT_segment",
	0x47: "DW_AT_specification", 0x48: "DW_AT_static_link", 0x49: "DW_AT_type", 0x4a: "DW_AT_use_location",
	0x4b: "DW_AT_variable_parameter", 0x4c: "DW_AT_virtuality", 0x4d: "DW_AT_vtable_elem_location",
	0x4e: "DW_AT_allocated", 0x4f: "DW_AT_associated", 0x50: "DW_AT_data_location", 0x51: "DW_AT_byte_stride",
	0x52: "DW_AT_entry_pc", 0x53: "DW_AT_use_UTF8", 0x54: "DW_AT_extension", 0x55: "DW_AT_ranges",
	0x56: "DW_AT_trampoline", 0x57: "DW_AT_call_column", 0x58: "DW_AT_call_file", 0x59: "DW_AT_call_line",
	0x5a: "DW_AT_description", 0x5b: "DW_AT_binary_scale", 0x5c: "DW_AT_decimal_scale", 0x5d: "DW_AT_small",
	0x5e: "DW_AT_decimal_sign", 0x5f: "DW_AT_digit_count", 0x60: "DW_AT_picture_string", 0x61: "DW_AT_mutable",
	0x62: "DW_AT_threads_scaled", 0x63: "DW_AT_explicit", 0x64: "DW_AT_object_pointer", 0x65: "DW_AT_endianity",
	0x66: "DW_AT_elemental", 0x67: "DW_AT_pure", 0x68: "DW_AT_recursive", 0x69: "DW_AT_signature",
	0x6a: "DW_AT_main_subprogram", 0x6b: "DW_AT_data_bit_offset", 0x6c: "DW_AT_const_expr",
	0x6d: "DW_AT_enum_class", 0x6e: "DW_AT_linkage_name", 0x6f: "DW_AT_string_length_bit_size",
	0x70: "DW_AT_string_length_byte_size", 0x71: "DW_AT_rank", 0x72: "DW_AT_str_offsets_base",
	0x73: "DW_AT_addr_base", 0x74: "DW_AT_rnglists_base", 0x76: "DW_AT_dwo_name", 0x77: "DW_AT_reference",
	0x78: "DW_AT_rvalue_reference", 0x79: "DW_AT_macros", 0x7a: "DW_AT_call_all_calls",
	0x7b: "DW_AT_call_all_source_calls", 0x7c: "DW_AT_call_all_tail_calls", 0x7d: "DW_AT_call_return_pc",
	0x7e: "DW_AT_call_value", 0x7f: "DW_AT_call_origin", 0x80: "DW_AT_call_parameter", 0x81: "DW_AT_call_pc",
	0x82: "DW_AT_call_tail_call", 0x83: "DW_AT_call_target", 0x84: "DW_AT_call_target_clobbered",
	0x85: "DW_AT_call_data_location", 0x86: "DW_AT_call_data_value", 0x87: "DW_AT_noreturn",
	0x88: "DW_AT_alignment", 0x89: "DW_AT_export_symbols", 0x8a: "DW_AT_deleted", 0x8b: "DW_AT_defaulted",
	0x8c: "DW_AT_loclists_base",
}

var stdTags = map[dwarf.Tag]string{
	0x01: "DW_TAG_array_type", 0x02: "DW_TAG_class_type", 0x03: "DW_TAG_entry_point",
	0x04: "DW_TAG_enumeration_type", 0x05: "DW_TAG_formal_parameter", 0x08: "DW_TAG_imported_declaration",
	0x0a: "DW_TAG_label", 0x0b: "DW_TAG_lexical_block", 0x0d: "DW_TAG_member", 0x0f: "DW_TAG_pointer_type",
	0x10: "DW_TAG_reference_type", 0x11: "DW_TAG_compile_unit", 0x12: "DW_TAG_string_type",
	0x13: "DW_TAG_structure_type", 0x15: "DW_TAG_subroutine_type", 0x16: "DW_TAG_typedef",
	0x17: "DW_TAG_union_type", 0x18: "DW_TAG_unspecified_parameters", 0x19: "DW_TAG_variant",
	0x1a: "DW_TAG_common_block", 0x1b: "DW_TAG_common_inclusion", 0x1c: "DW_TAG_inheritance",
	0x1d: "DW_TAG_inlined_subroutine", 0x1e: "DW_TAG_module", 0x1f: "DW_TAG_ptr_to_member_type",
	0x20: "DW_TAG_set_type", 0x21: "DW_TAG_subrange_type", 0x22: "DW_TAG_with_stmt",
	0x23: "DW_TAG_access_declaration", 0x24: "DW_TAG_base_type", 0x25: "DW_TAG_catch_block",
	0x26: "DW_TAG_const_type", 0x27: "DW_TAG_constant", 0x28: "DW_TAG_enumerator", 0x29: "DW_TAG_file_type",
	0x2a: "DW_TAG_friend", 0x2b: "DW_TAG_namelist", 0x2c: "DW_TAG_namelist_item", 0x2d: "DW_TAG_packed_type",
	0x2e: "DW_TAG_subprogram", 0x2f: "DW_TAG_template_type_parameter", 0x30: "DW_TAG_template_value_parameter",
	0x31: "DW_TAG_thrown_type", 0x32: "DW_TAG_try_block", 0x33: "DW_TAG_variant_part", 0x34: "DW_TAG_variable",
	0x35: "DW_TAG_volatile_type", 0x36: "DW_TAG_dwarf_procedure", 0x37: "DW_TAG_restrict_type",
	0x38: "DW_TAG_interface_type", 0x39: "DW_TAG_namespace", 0x3a: "DW_TAG_imported_module",
	0x3b: "DW_TAG_unspecified_type", 0x3c: "DW_TAG_partial_unit", 0x3d: "DW_TAG_imported_unit",
	0x3f: "DW_TAG_condition", 0x40: "DW_TAG_shared_type", 0x41: "DW_TAG_type_unit",
	0x42: "DW_TAG_rvalue_reference_type", 0x43: "DW_TAG_template_alias", 0x44: "DW_TAG_coarray_type",
	0x45: "DW_TAG_generic_subrange", 0x46: "DW_TAG_dynamic_type", 0x47: "DW_TAG_atomic_type",
	0x48: "DW_TAG_call_site", 0x49: "DW_TAG_call_site_parameter", 0x4a: "DW_TAG_skeleton_unit",
	0x4b: "DW_TAG_immutable_type",
}
