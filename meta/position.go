package meta

import "fmt"

// Pos is a source position read from a position block by
// [Table.Position].
type Pos struct {
	// File is the source file's path: a subslice of the table's string
	// section, not a copy. FileOff is its offset there: two positions
	// have the same File exactly when they have the same FileOff.
	File    []byte
	FileOff uint64
	// Line and Column are 1-based (0: unknown).
	Line, Column uint32
}

// PositionBlock returns the section offsets [off, end) of e's position
// block, where [Table.Position] reads (0, 0 when e has none): for tools
// that show the table's layout.
func (e Entry) PositionBlock() (off, end int) { return e.posOff, e.posEnd }

// block returns a cursor over e's position block, after its file field,
// and the file's offset and bytes.
func (t *Table) block(e Entry) (c cursor, fileOff uint64, file []byte) {
	c = cursor{t: t, off: e.posOff, end: e.posEnd, block: true}
	if !e.HasPositions || e.posOff < t.infoOff || e.posOff >= e.posEnd || e.posEnd > len(t.sec) {
		c.err = fmt.Errorf("%w: procedure %d has no position block", ErrNotFound, e.Index)
		return c, 0, nil
	}
	fileOff, file = c.strAt("position file")
	return c, fileOff, file
}

// row reads the next row after one at offset off and line line of a
// procedure of size bytes.
func (c *cursor) row(off uint64, line int64, size uint64) (uint64, int64, uint32) {
	at := c.off
	d := c.uleb("position row offset")
	if c.err == nil && (off+d < off || off+d >= size) {
		c.err = fail(uint64(at), "position row offset", fmt.Sprintf("offset %#x + %#x is past the end of the procedure's %#x bytes", off, d, size))
	}
	off += d
	at = c.off
	line += c.sleb("position row line")
	if c.err == nil && (line < 0 || line > 0xffffffff) {
		c.err = fail(uint64(at), "position row line", fmt.Sprintf("line %d out of range", line))
	}
	at = c.off
	col := c.uleb("position row column")
	if c.err == nil && col > 0xffffffff {
		c.err = fail(uint64(at), "position row column", fmt.Sprintf("column %d out of range", col))
	}
	return off, line, uint32(col)
}

// Position returns the source position of the link-time address addr in
// the procedure e (an Entry from [Table.Lookup] or [Table.At] on this
// table with HasPositions set) from its position block: the last row
// whose offset is at most addr - e.Start. It returns [ErrNotFound]
// (unwrapped) when addr is outside [e.Start, e.Start+e.Size) or before
// the first row, an error wrapping ErrNotFound when e has no position
// block, and a *formaterr.Error when a field it reads is malformed.
// Cost: a scan of the rows up to addr (one to three bytes each), no
// allocation.
func (t *Table) Position(e Entry, addr uint64) (Pos, error) {
	c, fileOff, file := t.block(e)
	if c.err != nil {
		return Pos{}, c.err
	}
	x := addr - e.Start
	if addr < e.Start || x >= e.Size {
		return Pos{}, ErrNotFound
	}
	var off uint64
	var line int64
	var col uint32
	have := false
	for c.off < c.end {
		o, l, cl := c.row(off, line, e.Size)
		if c.err != nil {
			return Pos{}, c.err
		}
		if o > x {
			break
		}
		off, line, col, have = o, l, cl, true
	}
	if !have {
		return Pos{}, ErrNotFound
	}
	return Pos{File: file, FileOff: fileOff, Line: uint32(line), Column: col}, nil
}

// Positions decodes the whole position block of the procedure e (an
// Entry from [Table.Lookup] or [Table.At] on this table): its file and
// its rows as stored, for tools and tests ([Table.Position] answers one
// address without this). Errors are those of Position. Cost: linear in
// the block; allocates the file string and the rows.
func (t *Table) Positions(e Entry) (file string, rows []Row, err error) {
	return t.positionRows(e)
}

// positionRows decodes e's whole position block.
func (t *Table) positionRows(e Entry) (string, []Row, error) {
	c, _, file := t.block(e)
	if c.err != nil {
		return "", nil, c.err
	}
	var rows []Row
	var off uint64
	var line int64
	for c.off < c.end {
		o, l, col := c.row(off, line, e.Size)
		if c.err != nil {
			return "", nil, c.err
		}
		if len(rows) > 0 && o == off {
			rows = rows[:len(rows)-1] // the writer never stores these; the reader takes the last
		}
		rows = append(rows, Row{Offset: o, Line: uint32(l), Column: col})
		off, line = o, l
	}
	return string(file), rows, nil
}
