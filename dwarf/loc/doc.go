// Package loc writes and reads DWARF location lists, range lists and
// address range tables:
//
//   - .debug_loclists and .debug_rnglists (DWARF 5 sections 2.6.2, 2.17.3,
//     7.7.3, 7.25, 7.29): one contribution with its header, lists of
//     DW_LLE_* / DW_RLE_* entries;
//   - .debug_loc and .debug_ranges (DWARF 2 to 4, section 2.6.2 and
//     2.17.3 of DWARF 4): pairs of addresses relative to the compilation
//     unit's base address, base address selection entries, (0, 0) end of
//     list;
//   - .debug_aranges (DWARF 5 section 6.1.2, 7.21): one set per unit.
//
// The writers ([LocLists], [RangeLists], [EncodeAranges]) take semantic
// input — [Entry] and [Range] values with half-open address ranges
// [Start, End) — pick the encoding by the unit's [dwarf.Encoding] and
// refuse what the format cannot express. The offsets [LocLists.AddList]
// and [RangeLists.AddList] return are what DW_AT_location and DW_AT_ranges
// hold as DW_FORM_sec_offset (DW_FORM_data4/8 before version 4).
//
// The readers ([ReadLocList], [ReadRangeList], [LocationAt], [RangeContains],
// [ListReader], [ReadAranges]) decode every entry kind of every version,
// including the DWARF 5 indexed kinds (DW_LLE_startx_length, ...) resolved
// through .debug_addr. They treat their input as hostile: they never panic,
// every loop consumes input, and errors are *formaterr.Error values
// naming the section, the offset and the field. [LocationAt],
// [RangeContains] and [ListReader] allocate nothing, for use at run time
// (symbolizing a PC, printing a variable in a signal handler).
package loc
