package dwarf

// elfimage's vendor extensions, in the user range of attribute codes
// (DWARF 5 section 7.5.4: DW_AT_lo_user to DW_AT_hi_user). Consumers that
// do not know them skip them, as the standard requires.
const (
	// DW_AT_elfimage_default_source, on a DW_TAG_formal_parameter that
	// also has DW_AT_default_value (flag), is a string: the source text
	// of the expression the callee evaluates when the caller passes no
	// value, for example "(* a 2)".
	DW_AT_elfimage_default_source Attr = 0x3e01
	// DW_AT_elfimage_properties, on a DW_TAG_subprogram, is a string
	// holding the procedure's properties as "name=value" pairs separated
	// by newlines, in source order (an attribute may appear only once
	// per DIE).
	DW_AT_elfimage_properties Attr = 0x3e02
)

func init() {
	namesAttr[DW_AT_elfimage_default_source] = "DW_AT_elfimage_default_source"
	namesAttr[DW_AT_elfimage_properties] = "DW_AT_elfimage_properties"
}
