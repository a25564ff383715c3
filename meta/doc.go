// Package meta writes and reads the procedure metadata table of an
// elfimage image: for every procedure its address range, name, arity
// (required and optional parameters with their names and default
// expressions), docstring, properties and the .debug_line offset of its
// line-program sequence, in a form a runtime can query for a pc without
// parsing DWARF and without building anything at load.
//
// The table lives in a non-loaded section of the image tail, named
// .elfimage.procs by convention. Its strings are either in the table
// itself ([Encode], header flag [FlagInlineStrings]: each procedure's new
// strings are stored just before its info entry, so a query touches one
// page for the entry and its name) or in a separate string section
// ([EncodeWith] with a [dwarf.StrTab], for example .debug_str, where
// procedure and parameter names already are, so they cost nothing extra).
//
// # Reading
//
// [NewTable] checks only the 24-byte header (O(1), one allocation for the
// *Table; [Table.Init] checks it into a Table the caller holds). [Table.Lookup] bisects the fixed-width records in place and
// decodes four or five LEB128 numbers of the one procedure found: no
// allocation, O(log n). A table of more than [IndexStride] procedures
// has a start index ([FlagStartIndex]): Lookup bisects it (beside the
// header) and then the IndexStride records of one chunk, so that its
// probes read two or three pages rather than one per probe.
// [Table.Describe] decodes the rest of that one procedure's info entry
// (allocating its strings). The first query on a freshly mapped image
// therefore touches the header and the index, one chunk of records, one
// info entry and its strings: a few pages.
//
// A procedure's source positions come from its position block when the
// table has them ([FlagPositions], [Entry.HasPositions]): [Table.Position]
// scans its rows (code offset, line, column) up to the address and
// returns its file's bytes, reading nothing outside the table, like Go's
// pclntab. Otherwise (a table written before the flag, or a procedure
// without rows) they come from its one line-program sequence:
// [Entry.LineUnit] is the .debug_line offset of the unit (whose header
// gives the file table) and [Entry.LineSeq] the offset of the sequence's
// first opcode, which [line.Reader.SequenceRow] runs alone.
//
// # Format, version 1
//
// All integers are little-endian. ULEB means unsigned LEB128 (DWARF 5
// section 7.6). "String" means an ULEB offset where a NUL-terminated
// string starts: into the info area when flag FlagInlineStrings is set,
// else into the separate string section.
//
// The section is a header, N records, then the info area:
//
//	offset  size  field
//	0       4     magic "EIP1"
//	4       1     version, 1
//	5       1     S: bytes of a record's start field, 1 to 4
//	6       1     I: bytes of a record's info field, 1 to 4
//	7       1     flags: bit 0 FlagInlineStrings, bit 1 FlagPositions,
//	              bit 2 FlagStartIndex; other bits 0
//	8       4     N: number of procedures (u32)
//	12      4     L: bytes of the info area (u32)
//	16      8     base: link-time address the start fields are relative to (u64)
//	24      K*S   start index, K = ⌊(N-1)/64⌋ entries with FlagStartIndex
//	              (0 when N = 0), else K = 0
//	24+K*S  N*R   records, R = S+I bytes each
//	...     L     info area; the section is exactly 24+K*S+N*R+L bytes
//
// Start index entry j (FlagStartIndex; the writer sets the flag when N
// > 64, IndexStride): a copy of record 64(j+1)'s start field, S bytes.
// Chunk c holds records [64c, min(64c+64, N)); the record covering an
// address is in the chunk c that is the number of entries at or below
// it. A reader finding a record that disagrees with the entry that chose
// its chunk (the chunk's first record starting past the address, or the
// next chunk's at or before it) reports a FormatError at the entry,
// field "start index".
//
// Record i (sorted by start, strictly increasing, ranges disjoint):
//
//	0  S bytes  start - base: the procedure's first byte
//	S  I bytes  offset of the procedure's info entry in the info area
//
// Info entry (fields in this order, optional ones per the shape bits):
//
//	size       ULEB    code bytes: the procedure is [start, start+size)
//	name       String
//	shape      ULEB    bit 0 LINE: line fields present
//	                   bit 1 DOC: docstring present
//	                   bit 2 PROPS: properties present
//	                   bit 3 OPT: optional count present
//	                   bits 4 and up: required parameter count
//	lineUnit   ULEB    if LINE: .debug_line offset of the line program unit
//	lineSeq    ULEB    if LINE: sequence offset minus lineUnit
//	posLen     ULEB    if LINE and FlagPositions: bytes of the position
//	                   block, which ends where the entry starts (0: none,
//	                   the line sequence gives the positions)
//	optional   ULEB    if OPT: optional parameter count (OPT clear: 0)
//	required × String  names of the required parameters
//	optional × (String name, String default)  default is the source text of
//	                   the default value expression, "" when none
//	doc        String  if DOC
//	nprops     ULEB    if PROPS, then nprops × (String name, String value)
//
// Position block (just before its entry, so that a procedure query, which
// reads the entry and its strings, never reads it; the procedure's rows,
// sorted by offset; a row holds from
// its offset up to the next row's, or the procedure's end; an address
// before the first row has no position):
//
//	file       String  the path of the rows' source file, as the line
//	                   program's header resolves it (directory joined)
//	rows until the block's end, each:
//	  offset   ULEB    code offset minus the previous row's (the first:
//	                   from start); the offset is below size
//	  line     SLEB    line minus the previous row's (the first: from 0),
//	                   in [0, 2^32)
//	  column   ULEB    column, 0 when unknown, below 2^32
//
// Two rows at one offset: the later holds (the writer drops the earlier).
//
// With FlagInlineStrings the info area also holds the strings: before
// each procedure's info entry, the strings of that procedure not stored
// earlier (NUL-terminated, in the order file, name, parameter names and
// defaults, doc, property names and values). A position block's file is
// stored again when its last copy is more than 4 KiB before, so that a
// query finds it on the entry's page or the one before (one copy per 4
// KiB of info area: 1% of a 10,000-procedure table, where the file's one
// copy cost a fault on about a third of first queries). Records point at
// entries, never at strings.
//
// The writer picks the narrowest S and I that hold the largest start
// offset and info offset, base is the first procedure's start, and strings
// are deduplicated.
//
// # Cost
//
// Per procedure: R bytes of record (6 for an image of up to 16 MiB of code
// and 16 MiB of info, 8 at most), S/64 bytes of start index (under 0.07),
// plus the info entry: size (1 to 3 bytes),
// name (1 to 3), shape (1 while required ≤ 7), line fields (1 + 1 to 3),
// one string offset (1 to 3) per parameter, two per optional parameter and
// per property, one for a docstring. On the 10,000-procedure benchmark
// table (names of about 20 bytes, 2 required parameters, a third of the
// procedures with an optional one, a docstring and a property;
// TestSizePerProcedure prints the figures) that is 21.0 bytes per
// procedure excluding strings (0.05 of them start index), against
// Guile's fixed 28-byte records before any string. Strings shared with .debug_str add 8.6 bytes per
// procedure (only docstrings, defaults and properties are new), 29.6
// bytes in all; the self-contained form is 52.0 bytes per procedure
// including every string (30.5 of them string bytes). The position block
// adds its posLen byte, a string offset, and one to three bytes per row
// field: about 40 to 43 bytes per procedure of the example Scheme
// compiler, which writes about 13 rows per procedure (5 to 6.5% of its
// images: TestPositionIndexSize).
//
// # Hostile input
//
// Readers never panic and never loop or allocate beyond what the input
// bounds: NewTable checks that the section is exactly as long as its
// header says, Lookup, Describe and Position check every offset against its area,
// every count against the bytes left (each item takes at least one byte),
// and every string against the string section. Malformed input yields a
// *formaterr.Error with Source ".elfimage.procs", the offset of the
// offending field and its name from the table above.
package meta
