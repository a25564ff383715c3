package meta

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/formaterr"
)

// ErrNotFound is returned by [Table.Lookup] when no procedure covers the
// address. It is returned unwrapped so that a miss allocates nothing;
// match it with errors.Is.
var ErrNotFound = errors.New("meta: no procedure covers the address")

// Table reads a procedure metadata table in place: the section bytes are
// neither copied nor parsed ahead of a query. A Table is immutable and safe
// for concurrent use.
type Table struct {
	sec, strs []byte
	n         int    // number of records
	ss, rec   int    // start field size, record size
	base      uint64 // address the start fields are relative to
	k         int    // start index entries (FlagStartIndex), at HeaderSize
	recOff    int    // section offset of the records
	infoOff   int    // section offset of the info area
	positions bool   // FlagPositions: entries with line fields carry a position block
}

// Entry is what [Table.Lookup] finds for an address: the procedure's
// range, name, and line sequence, decoded without allocating.
type Entry struct {
	// Index is the procedure's position in the table, in [0, Len()).
	Index int
	// Start and Size give the procedure's code as the link-time address
	// range [Start, Start+Size).
	Start, Size uint64
	// NameBytes is the procedure's name: a subslice of the string section
	// the table was made with, not a copy (see [Entry.Name]).
	NameBytes []byte
	// LineUnit and LineSeq are the .debug_line offsets of the line program
	// unit and of the procedure's sequence (see [Proc]); meaningful only
	// when HasLineSeq is set.
	LineUnit, LineSeq uint64
	HasLineSeq        bool
	// HasPositions is set when the entry carries a position block
	// ([FlagPositions]), which [Table.Position] reads; else the
	// procedure's positions are those of its line sequence.
	HasPositions bool
	// posOff and posEnd delimit the position block in the section.
	posOff, posEnd int
}

// Name returns the procedure's name as a string (a copy: one allocation).
func (e Entry) Name() string { return string(e.NameBytes) }

func fail(off uint64, field, msg string) error {
	return &formaterr.Error{Source: SectionProcs, Offset: off, Field: field, Msg: msg}
}

// ExternalStrings reports whether the table section sec keeps its strings
// in a string section of its own ([SectionStrs], made by [EncodeWith]),
// which [NewTable] must then be given: header flag [FlagInlineStrings]
// clear. It is false for a section too short for a header, which NewTable
// refuses anyway. Cost: O(1).
func ExternalStrings(sec []byte) bool {
	return len(sec) >= HeaderSize && sec[7]&FlagInlineStrings == 0
}

// NewTable returns a reader for the table section sec whose strings are in
// strs, the string section it was encoded with by [EncodeWith]; strs is
// ignored (pass nil) for a table made by [Encode], which holds its own
// strings. It checks only the header: magic, version, flags, field widths, and that
// sec is exactly as long as the header's counts say; records and info
// entries are checked when a query reads them. Errors are
// *formaterr.Error. Cost: O(1), one allocation (the *Table).
func NewTable(sec, strs []byte) (*Table, error) {
	t := new(Table)
	if err := t.Init(sec, strs); err != nil {
		return nil, err
	}
	return t, nil
}

// Init sets *t to the reader [NewTable] would return for sec and strs,
// with the same errors (t is then unusable), without allocating: for a
// Table kept inside a longer-lived value. Cost: O(1).
func (t *Table) Init(sec, strs []byte) error {
	if len(sec) < HeaderSize {
		return fail(0, "header", fmt.Sprintf("section of %d bytes is shorter than the %d-byte header", len(sec), HeaderSize))
	}
	if !bytes.Equal(sec[:4], magic[:]) {
		return fail(0, "magic", fmt.Sprintf("%q is not %q", sec[:4], magic[:]))
	}
	if sec[4] != Version {
		return fail(4, "version", fmt.Sprintf("unsupported version %d", sec[4]))
	}
	ss, is := int(sec[5]), int(sec[6])
	if ss < 1 || ss > 4 {
		return fail(5, "start size", fmt.Sprintf("%d not in [1, 4]", ss))
	}
	if is < 1 || is > 4 {
		return fail(6, "info size", fmt.Sprintf("%d not in [1, 4]", is))
	}
	if sec[7]&^(FlagInlineStrings|FlagPositions|FlagStartIndex) != 0 {
		return fail(7, "flags", fmt.Sprintf("unknown flags %#x", sec[7]))
	}
	le := binary.LittleEndian
	n := uint64(le.Uint32(sec[8:]))
	l := uint64(le.Uint32(sec[12:]))
	rec := uint64(ss + is)
	k := uint64(indexLen(int(n), sec[7]&FlagStartIndex != 0))
	if want := HeaderSize + k*uint64(ss) + n*rec + l; want != uint64(len(sec)) {
		return fail(8, "count", fmt.Sprintf("%d records of %d bytes, %d start index entries and %d bytes of info need a %d-byte section, have %d", n, rec, k, l, want, len(sec)))
	}
	recOff := HeaderSize + int(k)*ss
	*t = Table{
		sec: sec, strs: strs,
		n: int(n), ss: ss, rec: int(rec),
		base:      le.Uint64(sec[16:]),
		k:         int(k),
		recOff:    recOff,
		infoOff:   recOff + int(n*rec),
		positions: sec[7]&FlagPositions != 0,
	}
	if sec[7]&FlagInlineStrings != 0 {
		t.strs = sec[t.infoOff:]
	}
	return nil
}

// Len returns the number of procedures in the table.
func (t *Table) Len() int { return t.n }

// IndexLen returns the number of entries of the table's start index
// ([FlagStartIndex]): ⌊(Len()-1)/[IndexStride]⌋ when the header sets the
// flag and the table is not empty, else 0. Cost: O(1).
func (t *Table) IndexLen() int { return t.k }

// le reads an n-byte little-endian number at b[0:n], 1 ≤ n ≤ 4.
func le(b []byte, n int) uint64 {
	var v uint64
	for i := n - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// startAt returns the start address of record i.
func (t *Table) startAt(i int) uint64 {
	off := t.recOff + i*t.rec
	return t.base + le(t.sec[off:off+t.ss], t.ss)
}

// Lookup returns the procedure whose range [Start, Start+Size) contains
// the link-time address addr. It returns [ErrNotFound] when none does
// (addr before the first procedure, in a gap, or past the last), and a
// *formaterr.Error when the entry it reads is malformed, or when the
// start index ([FlagStartIndex]) disagrees with the records it bisects.
// Cost: a bisection of the records (O(log n) reads; with the start
// index, of the index and then of one chunk of [IndexStride] records)
// and the decoding of four to five LEB128 numbers and one name; no
// allocation.
func (t *Table) Lookup(addr uint64) (Entry, error) {
	return t.lookup(addr, true)
}

// LookupHead is [Table.Lookup] without the name: the Entry's NameBytes
// is nil and the name's string is neither read nor checked, for a query
// that does not need it (a source position: [Table.Position]). Errors
// and cost are Lookup's, less the name's bytes.
func (t *Table) LookupHead(addr uint64) (Entry, error) {
	return t.lookup(addr, false)
}

func (t *Table) lookup(addr uint64, name bool) (Entry, error) {
	i, err := t.find(addr, nil)
	if err != nil {
		return Entry{}, err
	}
	var e Entry
	if c, _, _ := t.entry(i, &e, name); c.err != nil {
		return Entry{}, c.err
	}
	if addr-e.Start >= e.Size {
		return Entry{}, ErrNotFound
	}
	return e, nil
}

// Probes returns the section offsets of the start fields [Table.Lookup]
// reads for addr, in the order it reads them (the start index's entries,
// then the records'), followed by the offset of the found record's info
// field (none when Lookup finds no record): for benchmarks and tools
// that show what a query touches. Cost: as Lookup's bisection;
// allocates the result.
func (t *Table) Probes(addr uint64) []int {
	var offs []int
	if i, err := t.find(addr, &offs); err == nil {
		offs = append(offs, t.recOff+i*t.rec+t.ss)
	}
	return offs
}

// find returns the index of the last record whose start is at most addr
// (by bisection; with the start index, of the index and then of one
// chunk), [ErrNotFound] when there is none, or a *formaterr.Error when
// the index disagrees with the records of its chunk. With trace, the
// section offset of every start field read is appended to *trace.
func (t *Table) find(addr uint64, trace *[]int) (int, error) {
	lo, hi := 0, t.n
	chunk := -1 // the start index's answer: records [lo, hi)
	if t.k > 0 {
		a, b := 0, t.k
		for a < b {
			m := int(uint(a+b) >> 1)
			off := HeaderSize + m*t.ss
			if trace != nil {
				*trace = append(*trace, off)
			}
			if t.base+le(t.sec[off:off+t.ss], t.ss) <= addr {
				a = m + 1
			} else {
				b = m
			}
		}
		// Entries [0, a) are at most addr: the record is in chunk a.
		chunk = a
		lo, hi = a*IndexStride, min((a+1)*IndexStride, t.n)
	}
	l, h := lo, hi
	for l < h {
		m := int(uint(l+h) >> 1)
		if trace != nil {
			*trace = append(*trace, t.recOff+m*t.rec)
		}
		if t.startAt(m) <= addr {
			l = m + 1
		} else {
			h = m
		}
	}
	if l == lo && lo > 0 {
		// Index entry chunk-1 said record lo starts at most at addr; the
		// record starts past it.
		return 0, t.indexDisagrees(chunk - 1)
	}
	if l == hi && hi < t.n {
		// Index entry chunk said record hi starts past addr: check it
		// (the chunk's last record is the answer only if so).
		if trace != nil {
			*trace = append(*trace, t.recOff+hi*t.rec)
		}
		if t.startAt(hi) <= addr {
			return 0, t.indexDisagrees(chunk)
		}
	}
	if l == 0 {
		return 0, ErrNotFound
	}
	return l - 1, nil
}

// indexDisagrees is the error of start index entry j, which differs from
// the start field of the record it copies.
func (t *Table) indexDisagrees(j int) error {
	off := HeaderSize + j*t.ss
	r := (j + 1) * IndexStride
	return fail(uint64(off), "start index", fmt.Sprintf("entry %d (start %#x) is not record %d's start %#x",
		j, t.base+le(t.sec[off:off+t.ss], t.ss), r, t.startAt(r)))
}

// At returns the procedure at index i in [0, Len()), in address order, as
// [Table.Lookup] would. It fails with a *formaterr.Error when the entry
// is malformed, or an error wrapping [ErrNotFound] when i is out of range.
// Cost: as Lookup without the bisection.
func (t *Table) At(i int) (Entry, error) {
	if i < 0 || i >= t.n {
		return Entry{}, fmt.Errorf("%w: index %d out of range [0, %d)", ErrNotFound, i, t.n)
	}
	var e Entry
	if c, _, _ := t.entry(i, &e, true); c.err != nil {
		return Entry{}, c.err
	}
	return e, nil
}

// cursor reads the LEB128 and string fields of the info area, [off, end)
// of the section: the whole area for an entry, one block for a position
// block (Table.block).
type cursor struct {
	t   *Table
	off int // section offset of the next byte
	end int // section offset where the fields end
	// block: the fields are a position block's, so a number cut off at
	// end runs past the block rather than the section.
	block bool
	err   error
}

// pastEnd is the error text of a number cut off at c.end.
func (c *cursor) pastEnd() string {
	if c.block {
		return "LEB128 number runs past the end of the position block"
	}
	return "LEB128 number runs past the end of the section"
}

func (c *cursor) uleb(field string) uint64 {
	if c.err != nil {
		return 0
	}
	if c.off < c.end && c.t.sec[c.off] < 0x80 { // one byte: most fields
		v := uint64(c.t.sec[c.off])
		c.off++
		return v
	}
	v, n := dwarf.Uleb128(c.t.sec[c.off:c.end])
	if n <= 0 {
		c.err = fail(uint64(c.off), field, c.pastEnd())
		return 0
	}
	c.off += n
	return v
}

func (c *cursor) sleb(field string) int64 {
	if c.err != nil {
		return 0
	}
	if c.off < c.end && c.t.sec[c.off] < 0x80 { // one byte: -64 to 63
		v := int64(c.t.sec[c.off]) << 57 >> 57
		c.off++
		return v
	}
	v, n := dwarf.Sleb128(c.t.sec[c.off:c.end])
	if n <= 0 {
		c.err = fail(uint64(c.off), field, c.pastEnd())
		return 0
	}
	c.off += n
	return v
}

// str reads a string offset and returns the string's bytes in t.strs.
func (c *cursor) str(field string) []byte {
	_, s := c.strAt(field)
	return s
}

// strAt is str that also returns the string's offset in t.strs.
func (c *cursor) strAt(field string) (uint64, []byte) {
	at := c.off
	o := c.uleb(field)
	if c.err != nil {
		return 0, nil
	}
	if o >= uint64(len(c.t.strs)) {
		c.err = fail(uint64(at), field, fmt.Sprintf("string offset %#x outside the %d-byte string section", o, len(c.t.strs)))
		return 0, nil
	}
	s := c.t.strs[o:]
	end := bytes.IndexByte(s, 0)
	if end < 0 {
		c.err = fail(uint64(at), field, fmt.Sprintf("string at offset %#x is not NUL-terminated", o))
		return 0, nil
	}
	return o, s[:end:end]
}

// count reads a count of items each taking at least per bytes, bounded by
// the bytes left in the info area.
func (c *cursor) count(v uint64, at int, per int, field string) int {
	if c.err != nil {
		return 0
	}
	if left := uint64(len(c.t.sec) - c.off); v > left/uint64(per) {
		c.err = fail(uint64(at), field, fmt.Sprintf("%d items do not fit in the %d bytes left", v, left))
		return 0
	}
	return int(v)
}

// entry decodes record i and the head of its info entry into *e (the
// name's bytes only with name), and returns a cursor positioned after
// the line fields, the shape and the shape's section offset.
func (t *Table) entry(i int, e *Entry, name bool) (c cursor, shape uint64, shapeAt int) {
	rOff := t.recOff + i*t.rec
	infoRel := le(t.sec[rOff+t.ss:rOff+t.rec], t.rec-t.ss)
	c = cursor{t: t, end: len(t.sec)}
	if infoRel >= uint64(len(t.sec)-t.infoOff) {
		c.err = fail(uint64(rOff+t.ss), "info offset", fmt.Sprintf("offset %#x outside the %d-byte info area", infoRel, len(t.sec)-t.infoOff))
		return c, 0, 0
	}
	c.off = t.infoOff + int(infoRel)
	entryOff := c.off
	e.Index = i
	e.Start = t.startAt(i)
	sizeAt := c.off
	e.Size = c.uleb("size")
	if c.err == nil && e.Start+e.Size < e.Start {
		c.err = fail(uint64(sizeAt), "size", fmt.Sprintf("range [%#x, +%#x) wraps around", e.Start, e.Size))
	}
	if name {
		e.NameBytes = c.str("name")
	} else {
		c.uleb("name")
	}
	shapeAt = c.off
	shape = c.uleb("shape")
	if shape&shapeLine != 0 {
		e.HasLineSeq = true
		e.LineUnit = c.uleb("lineUnit")
		at := c.off
		d := c.uleb("lineSeq")
		if c.err == nil && e.LineUnit+d < d {
			c.err = fail(uint64(at), "lineSeq", "offset overflows")
		}
		e.LineSeq = e.LineUnit + d
		if t.positions {
			at := c.off
			n := c.uleb("posLen")
			if before := uint64(entryOff - t.infoOff); c.err == nil && n > before {
				c.err = fail(uint64(at), "posLen", fmt.Sprintf("position block of %d bytes does not fit in the %d bytes of info area before the entry", n, before))
			}
			if c.err == nil && n > 0 {
				e.HasPositions = true
				e.posOff, e.posEnd = entryOff-int(n), entryOff
			}
		}
	}
	return c, shape, shapeAt
}

// Describe decodes everything the table records about the procedure e
// (an Entry from [Table.Lookup] or [Table.At] on this table), copying its
// strings. Errors are *formaterr.Error, or wrap [ErrNotFound] when
// e.Index is out of range. Cost: linear in the procedure's parameters and
// properties; allocates the strings and slices of the result.
func (t *Table) Describe(e Entry) (Proc, error) {
	if e.Index < 0 || e.Index >= t.n {
		return Proc{}, fmt.Errorf("%w: index %d out of range [0, %d)", ErrNotFound, e.Index, t.n)
	}
	var h Entry
	c, shape, shapeAt := t.entry(e.Index, &h, true)
	if c.err != nil {
		return Proc{}, c.err
	}
	p := Proc{Name: string(h.NameBytes), Start: h.Start, Size: h.Size,
		LineUnit: h.LineUnit, LineSeq: h.LineSeq, HasLineSeq: h.HasLineSeq}

	req := c.count(shape>>shapeBits, shapeAt, 1, "shape")
	opt := 0
	if shape&shapeOpt != 0 {
		at := c.off
		opt = c.count(c.uleb("optional"), at, 2, "optional")
	}
	if c.err == nil && req > (len(t.sec)-c.off)-2*opt {
		c.err = fail(uint64(shapeAt), "shape", fmt.Sprintf("%d required and %d optional parameters do not fit in the %d bytes left", req, opt, len(t.sec)-c.off))
	}
	if c.err != nil {
		return Proc{}, c.err
	}
	p.Required, p.Optional = req, opt
	// Strings are copied once per distinct offset, and the distinct
	// strings may not add up to more than the string section: a hostile
	// table pointing many fields at one long string, or at overlapping
	// suffixes of it, would otherwise cost time and memory quadratic in
	// its size.
	seen := map[uint64]string{}
	budget := len(t.strs)
	text := func(field string) string {
		at := c.off
		o := c.uleb(field)
		c.off = at
		if v, ok := seen[o]; ok && c.err == nil {
			c.uleb(field)
			return v
		}
		b := c.str(field)
		if c.err != nil {
			return ""
		}
		if budget -= len(b); budget < 0 {
			c.err = fail(uint64(at), field, "strings of one procedure add up to more than the string section (overlapping strings)")
			return ""
		}
		v := string(b)
		seen[o] = v
		return v
	}
	if req+opt > 0 {
		p.Args = make([]string, req+opt)
	}
	for j := 0; j < req; j++ {
		p.Args[j] = text("required")
	}
	if opt > 0 {
		p.Defaults = make([]string, opt)
	}
	for j := 0; j < opt; j++ {
		p.Args[req+j] = text("optional name")
		p.Defaults[j] = text("optional default")
	}
	if shape&shapeDoc != 0 {
		p.Doc = text("doc")
	}
	if shape&shapeProps != 0 {
		at := c.off
		n := c.count(c.uleb("nprops"), at, 2, "nprops")
		if c.err == nil && n > 0 {
			p.Props = make([]Prop, n)
			for j := range p.Props {
				p.Props[j].Name = text("property name")
				p.Props[j].Value = text("property value")
			}
		}
	}
	if c.err != nil {
		return Proc{}, c.err
	}
	return p, nil
}
