// Package line writes and reads DWARF line number programs (.debug_line),
// DWARF 5 sections 6.2 and 7.22, versions 2 to 5, 32- and 64-bit formats.
//
// The writer side is semantic: a [Program] lists file entries and
// sequences of rows (address → file, line, column, flags), and
// [Program.Encode] chooses the opcodes (special opcodes where they fit,
// DW_LNS_advance_pc, DW_LNS_const_add_pc or DW_LNS_fixed_advance_pc
// otherwise) and the header layout for the requested version.
//
// The reader side decodes one line program at an offset of .debug_line:
// [Decode] returns a [Table] with the header, the file entries resolved to
// full paths and every sequence of rows, and [Table.Lookup] maps an address
// to its row by bisection without allocating. [NewReader] gives the rows
// one at a time, as the state machine of section 6.2.2 produces them, for
// dumps.
//
// Decoding treats its input as hostile: it never panics, every loop is
// bounded by the input size (each opcode consumes at least one byte, each
// file entry at least one byte), allocations are bounded by a small
// multiple of the input size, and malformed input yields a
// *formaterr.Error naming the section, offset and field.
package line
