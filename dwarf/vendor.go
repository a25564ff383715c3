package dwarf

// elfimage's vendor extensions, in the user range of attribute codes
// (DWARF 5 section 7.5.4: DW_AT_lo_user to DW_AT_hi_user), at codes that
// neither LLVM (0x3e00 on), GNU (0x2101 on), Apple (0x3fe1 on), Borland,
// HP, MIPS nor PGI use. Consumers that do not know them skip them, as the
// standard requires (llvm-dwarfdump prints them as DW_AT_unknown_3f70).
const (
	// DW_AT_elfimage_default_source, on a DW_TAG_formal_parameter that
	// also has DW_AT_default_value (flag, DWARF 5), or that is optional
	// in DWARF 3 and 4 (where DW_AT_default_value has no flag class), is
	// a string: the source text of the expression the callee evaluates
	// when the caller passes no value, for example "(* a 2)".
	DW_AT_elfimage_default_source Attr = 0x3f70
	// DW_AT_elfimage_properties, on a DW_TAG_subprogram, is a string
	// holding the procedure's properties in source order (an attribute
	// may appear only once per DIE): "name=value" pairs separated by
	// newlines, where a backslash, "=" and newline inside a name or value
	// are written \\, \= and \n.
	DW_AT_elfimage_properties Attr = 0x3f71
)

// addVendorAttrNames adds the names of the vendor attributes to m (the
// table Attr.String reads, built on first use).
func addVendorAttrNames(m map[Attr]string) {
	m[DW_AT_elfimage_default_source] = "DW_AT_elfimage_default_source"
	m[DW_AT_elfimage_properties] = "DW_AT_elfimage_properties"
}
