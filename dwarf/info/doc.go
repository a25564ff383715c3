// Package info writes and reads DWARF debugging information entries: unit
// headers, abbreviation tables and attribute forms of .debug_info and
// .debug_abbrev (DWARF 5 sections 7.5.1 to 7.5.6, versions 2 to 5, 32-
// and 64-bit formats).
//
// The writer is semantic: a [Unit] holds a tree of [DIE] values whose
// attribute [Value]s say only their class ([String], [Addr], [Udata],
// [Sdata], [Flag], [Exprloc], [Block], [Ref], [SecOffset]); [Encode]
// chooses the forms (the shortest that keeps the class unambiguous for the
// unit's version), deduplicates abbreviations, resolves references and
// writes the unit headers.
//
// The reader ([New], [Data.Reader]) decodes what gcc, clang and this
// package write, including the DWARF 5 indexed forms (strx*, addrx*,
// rnglistx, loclistx) resolved through the unit's DW_AT_str_offsets_base,
// DW_AT_addr_base, DW_AT_rnglists_base and DW_AT_loclists_base,
// implicit_const, data16, indirect and the GNU extensions. Abbreviation
// tables are parsed on first use and cached. The reader treats its input as
// hostile: it never panics, every loop is bounded by the input size, DIE
// nesting is limited to [MaxDepth] (the reader is not recursive), and
// errors are *formaterr.Error values naming section, offset and field.
package info
