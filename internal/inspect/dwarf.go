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

// AttrName names an attribute, vendor extensions included.
func AttrName(a dwarf.Attr) string {
	if s, ok := vendorAttrs[a]; ok {
		return s
	}
	return a.String()
}

// TagName names a tag, vendor extensions included.
func TagName(t dwarf.Tag) string {
	if s, ok := vendorTags[t]; ok {
		return s
	}
	return t.String()
}
