// Package frame reads and writes call frame information: the CIEs and FDEs
// of .debug_frame (DWARF 5 section 6.4, encoded per section 7.24) and of
// .eh_frame (LSB 5.0 "Exception Frames", section 10.6), and the
// .eh_frame_hdr lookup table (LSB section 10.6.2). One engine serves both
// sections; a small internal interface (flavor) holds their differences:
// the CIE id, how an FDE points at its CIE, how addresses are encoded and
// how the section ends.
//
// Writing is semantic: a [CIE] and [FDE]s carry [Insn]s (define the CFA,
// register saved at an offset, ...) with byte offsets; [EncodeEHFrame],
// [EncodeEHFrameAbsolute] (absolute FDE pointers, for an .eh_frame that is
// not loaded) and [EncodeDebugFrame] choose the shortest encodings, factor
// offsets by the CIE's alignment factors, pad entries with DW_CFA_nop and
// deduplicate CIEs. [EncodeEHFrameHdr] writes the sorted binary-search table.
//
// Reading is in three separate steps:
//
//   - [Section] parses entries: [Section.CIEAt] and [Section.FDEAt] give a
//     [ParsedCIE] and a [ParsedFDE] (instruction bytes not yet decoded),
//     decoding augmentations z, R, P, L and S and every DW_EH_PE pointer
//     encoding.
//   - [DecodeInsns] turns instruction bytes into [Decoded] instructions,
//     exactly as read, for dumps.
//   - [Exec] runs them (the full DWARF 5 instruction set plus
//     DW_CFA_GNU_args_size, DW_CFA_GNU_negative_offset_extended,
//     DW_CFA_GNU_window_save / DW_CFA_AARCH64_negate_ra_state and
//     DW_CFA_MIPS_advance_loc8, with a bounded DW_CFA_remember_state
//     stack): [Exec.RowAt] gives the [Row] (CFA rule and register rules)
//     in effect at a pc without allocating, [Table] every row of an FDE,
//     [Exec.Rows] the same rows computed in place (no allocation: what a
//     dump of a whole library uses), [Exec.InitialRow] the row a CIE's
//     initial instructions define. Where DWARF leaves a CFA rule open
//     (DW_CFA_def_cfa_register before any CFA rule, as gcc writes MIPS and
//     RISC-V CIEs, or after DW_CFA_def_cfa_expression), the rows are
//     libgcc's and readelf's: the register with the last register rule's
//     offset, 0 if none.
//
// [Finder] finds the FDE covering a pc through .eh_frame_hdr ([Hdr]) by
// binary search, or by a linear scan of the section when there is no usable
// table, and checks that the FDE found covers the pc; a miss is [ErrNoFDE].
//
// Every decoder treats its input as hostile: no panics, bounded loops and
// allocations, and errors that are (or wrap) *formaterr.Error naming the
// section, offset and field.
package frame
