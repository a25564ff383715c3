package meta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/elfimage/elfimage/dwarf"
)

// Section names the linker uses by convention.
const (
	// SectionProcs is the name of the table section.
	SectionProcs = ".elfimage.procs"
	// SectionStrs is the name of a string section of the table's own,
	// for a table made by EncodeWith with a fresh string table (Encode
	// needs none; EncodeWith may also share .debug_str).
	SectionStrs = ".elfimage.strs"
)

// FlagInlineStrings is the flag (header byte 7) saying that the table's
// strings are in its info area: string offsets are relative to the info
// area's start.
const FlagInlineStrings = 1

// FlagPositions is the flag (header byte 7) saying that every info entry
// with line fields also carries a position block: the procedure's source
// positions (file, and per row code offset, line and column), which
// [Table.Position] answers from without reading .debug_line. Readers
// before this flag refuse a table that sets it ("unknown flags").
const FlagPositions = 2

// FlagStartIndex is the flag (header byte 7) saying that a start index
// lies between the header and the records: the start field of every
// [IndexStride]-th record after the first (records IndexStride,
// 2×IndexStride, ...), so that [Table.Lookup] bisects that small block
// and then the IndexStride records of one chunk instead of all the
// records (on a freshly mapped image: two or three pages read instead of
// one per probe). The writer sets it when the table has more than
// IndexStride procedures. Readers before this flag refuse a table that
// sets it ("unknown flags").
const FlagStartIndex = 4

// IndexStride is the number of records per chunk of the start index
// ([FlagStartIndex]).
const IndexStride = 64

// Version is the format version the writer emits and the reader accepts.
const Version = 1

// HeaderSize is the size in bytes of the table header.
const HeaderSize = 24

var magic = [4]byte{'E', 'I', 'P', '1'}

// Shape bits of an info entry (see the package documentation).
const (
	shapeLine  = 1 << 0
	shapeDoc   = 1 << 1
	shapeProps = 1 << 2
	shapeOpt   = 1 << 3
	shapeBits  = 4
)

// ErrInvalid is wrapped by every error the writer returns for procedures
// it refuses. Match it with errors.Is.
var ErrInvalid = errors.New("meta: invalid procedure table")

// Proc is what the table records about one procedure. The writer reads
// every field; [Table.Describe] fills every field but File and Rows,
// which [Table.Positions] reads (a procedure query does not pay for
// them).
type Proc struct {
	// Name is the procedure's name.
	Name string
	// Start and Size give its code as the link-time address range
	// [Start, Start+Size), in bytes.
	Start, Size uint64
	// Required and Optional count the parameters: the required ones come
	// first, then the optional ones.
	Required, Optional int
	// Args are the parameter names, Required+Optional of them.
	Args []string
	// Defaults are the source texts of the optional parameters' default
	// value expressions ("" when none was written): nil or Optional of
	// them. Describe returns nil when Optional is 0, else Optional of
	// them.
	Defaults []string
	// Doc is the docstring, "" when none.
	Doc string
	// Props are the properties in source order.
	Props []Prop
	// LineUnit is the .debug_line offset of the line program unit that
	// holds the procedure's sequence, and LineSeq the .debug_line offset
	// of that sequence's first opcode (its DW_LNE_set_address), as
	// [line.Program.EncodeOffsets] reports plus the unit's offset. Both
	// are meaningful only when HasLineSeq is set.
	LineUnit, LineSeq uint64
	HasLineSeq        bool
	// File and Rows are the procedure's position block (see
	// [FlagPositions]): the source file of every row, as [Table.Position]
	// returns it, and the rows sorted by Offset (equal offsets allowed:
	// the last row at an offset holds for it), each Offset below Size.
	// Rows need HasLineSeq; a procedure without rows gets no block and
	// its positions come from its line sequence. The writer drops a row
	// followed by one at the same offset ([Table.Positions] returns the
	// rows stored).
	File string
	Rows []Row
}

// Row is one row of a procedure's position block: from code offset Offset
// (from the procedure's start) on, until the next row's offset or the
// procedure's end, the code is at Line and Column (0: unknown) of the
// procedure's File.
type Row struct {
	Offset       uint64
	Line, Column uint32
}

// Prop is one property: a name and a value as the source wrote them.
type Prop struct {
	Name, Value string
}

func invalid(i int, p *Proc, format string, args ...any) error {
	return fmt.Errorf("%w: procedure %d %q: %s", ErrInvalid, i, p.Name, fmt.Sprintf(format, args...))
}

// Encode returns a self-contained table section for procs: its strings
// are stored in the info area (header flag [FlagInlineStrings]), each
// procedure's new strings just before its info entry, so that a query
// touches few pages; read it with NewTable(sec, nil). Strings are
// deduplicated: a string already stored (a common parameter name) is
// referenced, not repeated. See [EncodeWith] for requirements, errors and
// cost.
func Encode(procs []Proc) ([]byte, error) {
	return encode(procs, nil)
}

// EncodeWith returns the table section for procs, adding its strings to
// strs, for example the linker's .debug_str table, where procedure and
// parameter names already are (take strs.Bytes() after the last Add). The
// table is only valid with that string section.
//
// procs must be sorted by Start with disjoint ranges (a procedure starts
// at or after the end of the previous one, and no two start at the same
// address); every Start must lie within 4 GiB - 1 of the first; len(Args)
// must be Required+Optional and len(Defaults) 0 or Optional; strings must
// not contain NUL; LineSeq must not be below LineUnit. Errors wrap
// [ErrInvalid] and name the procedure. Cost: linear in the number of
// procedures and parameters, one string-table lookup per string.
func EncodeWith(procs []Proc, strs *dwarf.StrTab) ([]byte, error) {
	if strs == nil {
		return nil, fmt.Errorf("%w: nil string table", ErrInvalid)
	}
	return encode(procs, strs)
}

// forStrings calls f for every string of p, in the order in which
// encode writes their references (encode relies on it).
func forStrings(p *Proc, f func(s string, file bool)) {
	if p.HasLineSeq && len(p.Rows) > 0 {
		f(p.File, true)
	}
	f(p.Name, false)
	for j, a := range p.Args {
		f(a, false)
		if j >= p.Required {
			d := ""
			if len(p.Defaults) > 0 {
				d = p.Defaults[j-p.Required]
			}
			f(d, false)
		}
	}
	if p.Doc != "" {
		f(p.Doc, false)
	}
	for _, pr := range p.Props {
		f(pr.Name, false)
		f(pr.Value, false)
	}
}

func encode(procs []Proc, strs *dwarf.StrTab) ([]byte, error) {
	if uint64(len(procs)) > 0xffffffff {
		return nil, fmt.Errorf("%w: %d procedures", ErrInvalid, len(procs))
	}
	var base uint64
	if len(procs) > 0 {
		base = procs[0].Start
	}
	// The record area at once: a record is a few LEB128 fields and a
	// string reference per name; inline strings add their bytes.
	est, strBytes := 0, 0
	for i := range procs {
		est += 8 + 2*len(procs[i].Args) + 2*len(procs[i].Props)
		strBytes += len(procs[i].Name) + len(procs[i].Doc) + 2
	}
	positions := false
	for i := range procs {
		if len(procs[i].Rows) > 0 {
			positions = true
			est += 3*len(procs[i].Rows) + 4
		}
	}
	var inline, files map[string]uint64
	if strs == nil {
		files = map[string]uint64{}
		inline = make(map[string]uint64, len(procs)+16)
		est += strBytes
	}
	info := make([]byte, 0, est)
	infoOffs := make([]uint64, len(procs))
	var maxStart uint64
	// With inline strings, the offsets of the procedure's strings, in the
	// order forStrings visits them, which is the order in which str is
	// called: found once, when the strings are placed.
	var offs []uint64
	next := 0
	str := func(s string) {
		var off uint64
		if inline != nil {
			if next < len(offs) {
				off = offs[next]
			} else {
				off = inline[s] // not reached: forStrings visits every string str writes
			}
			next++
		} else {
			off = strs.Add(s)
		}
		info = dwarf.AppendUleb128(info, off)
	}
	for i := range procs {
		p := &procs[i]
		if p.Start+p.Size < p.Start {
			return nil, invalid(i, p, "range [%#x, +%#x) wraps around", p.Start, p.Size)
		}
		if i > 0 {
			q := &procs[i-1]
			if p.Start <= q.Start || p.Start < q.Start+q.Size {
				return nil, invalid(i, p, "starts at %#x, not after procedure %d [%#x, %#x)", p.Start, i-1, q.Start, q.Start+q.Size)
			}
		}
		if p.Start-base > 0xffffffff {
			return nil, invalid(i, p, "start %#x more than 4 GiB after the first procedure's %#x", p.Start, base)
		}
		maxStart = p.Start - base
		if p.Required < 0 || p.Optional < 0 || len(p.Args) != p.Required+p.Optional {
			return nil, invalid(i, p, "%d argument names for %d required and %d optional parameters", len(p.Args), p.Required, p.Optional)
		}
		if len(p.Defaults) != 0 && len(p.Defaults) != p.Optional {
			return nil, invalid(i, p, "%d defaults for %d optional parameters", len(p.Defaults), p.Optional)
		}
		if p.HasLineSeq && p.LineSeq < p.LineUnit {
			return nil, invalid(i, p, "line sequence offset %#x before its unit's %#x", p.LineSeq, p.LineUnit)
		}
		if err := checkRows(i, p); err != nil {
			return nil, err
		}
		if err := checkStrings(i, p); err != nil {
			return nil, err
		}
		if inline != nil {
			offs, next = offs[:0], 0
			forStrings(p, func(s string, file bool) {
				if file {
					// A position block's file is stored again once
					// its last copy is fileReach bytes back, so that
					// the query reads it from the page of the entry
					// (or the one before), not from where the
					// file's first procedure is.
					off, ok := files[s]
					if !ok || uint64(len(info))-off > fileReach {
						off = uint64(len(info))
						files[s] = off
						info = append(info, s...)
						info = append(info, 0)
					}
					offs = append(offs, off)
					return
				}
				off, ok := inline[s]
				if !ok {
					off = uint64(len(info))
					inline[s] = off
					info = append(info, s...)
					info = append(info, 0)
				}
				offs = append(offs, off)
			})
		}
		// The position block, just before the entry: its head's posLen
		// finds it, and a procedure query (Describe) never reads it.
		var blockLen uint64
		if p.HasLineSeq && len(p.Rows) > 0 {
			at := len(info)
			str(p.File)
			info = appendRows(info, p.Rows)
			blockLen = uint64(len(info) - at)
		}
		infoOffs[i] = uint64(len(info))
		info = dwarf.AppendUleb128(info, p.Size)
		str(p.Name)
		shape := uint64(p.Required) << shapeBits
		if p.HasLineSeq {
			shape |= shapeLine
		}
		if p.Doc != "" {
			shape |= shapeDoc
		}
		if len(p.Props) > 0 {
			shape |= shapeProps
		}
		if p.Optional > 0 {
			shape |= shapeOpt
		}
		info = dwarf.AppendUleb128(info, shape)
		if p.HasLineSeq {
			info = dwarf.AppendUleb128(info, p.LineUnit)
			info = dwarf.AppendUleb128(info, p.LineSeq-p.LineUnit)
			if positions {
				info = dwarf.AppendUleb128(info, blockLen) // the block just before the entry
			}
		}
		if p.Optional > 0 {
			info = dwarf.AppendUleb128(info, uint64(p.Optional))
		}
		for j := 0; j < p.Required; j++ {
			str(p.Args[j])
		}
		for j := 0; j < p.Optional; j++ {
			str(p.Args[p.Required+j])
			d := ""
			if len(p.Defaults) > 0 {
				d = p.Defaults[j]
			}
			str(d)
		}
		if p.Doc != "" {
			str(p.Doc)
		}
		if len(p.Props) > 0 {
			info = dwarf.AppendUleb128(info, uint64(len(p.Props)))
			for _, pr := range p.Props {
				str(pr.Name)
				str(pr.Value)
			}
		}
	}
	if uint64(len(info)) > 0xffffffff {
		return nil, fmt.Errorf("%w: info area of %d bytes exceeds 4 GiB", ErrInvalid, len(info))
	}
	var lastInfo uint64
	if len(procs) > 0 {
		lastInfo = infoOffs[len(procs)-1]
	}
	ss, is := width(maxStart), width(lastInfo)
	rec := ss + is
	k := indexLen(len(procs), writeStartIndex && len(procs) > IndexStride)
	out := make([]byte, HeaderSize, HeaderSize+k*ss+len(procs)*rec+len(info))
	copy(out, magic[:])
	out[4] = Version
	out[5] = byte(ss)
	out[6] = byte(is)
	if inline != nil {
		out[7] = FlagInlineStrings
	}
	if positions {
		out[7] |= FlagPositions
	}
	if k > 0 {
		out[7] |= FlagStartIndex
	}
	le := binary.LittleEndian
	le.PutUint32(out[8:], uint32(len(procs)))
	le.PutUint32(out[12:], uint32(len(info)))
	le.PutUint64(out[16:], base)
	for j := 1; j <= k; j++ {
		out = putLE(out, procs[j*IndexStride].Start-base, ss)
	}
	for i := range procs {
		out = putLE(out, procs[i].Start-base, ss)
		out = putLE(out, infoOffs[i], is)
	}
	return append(out, info...), nil
}

func checkStrings(i int, p *Proc) error {
	bad := func(what, s string) error {
		if strings.IndexByte(s, 0) >= 0 {
			return invalid(i, p, "%s %q contains a NUL byte", what, s)
		}
		return nil
	}
	if err := bad("name", p.Name); err != nil {
		return err
	}
	if err := bad("file", p.File); err != nil {
		return err
	}
	if err := bad("docstring", p.Doc); err != nil {
		return err
	}
	for _, a := range p.Args {
		if err := bad("argument name", a); err != nil {
			return err
		}
	}
	for _, d := range p.Defaults {
		if err := bad("default", d); err != nil {
			return err
		}
	}
	for _, pr := range p.Props {
		if err := bad("property name", pr.Name); err != nil {
			return err
		}
		if err := bad("property value", pr.Value); err != nil {
			return err
		}
	}
	return nil
}

// checkRows checks p's position rows (see [Proc.Rows]).
// fileReach is how far back (in bytes of the info area) a position
// block's file may be stored with inline strings: a page.
const fileReach = 4096

func checkRows(i int, p *Proc) error {
	if len(p.Rows) == 0 {
		return nil
	}
	if !p.HasLineSeq {
		return invalid(i, p, "%d position rows without a line sequence", len(p.Rows))
	}
	for j, r := range p.Rows {
		if r.Offset >= p.Size {
			return invalid(i, p, "position row %d at offset %#x is past the end of the code (%#x bytes)", j, r.Offset, p.Size)
		}
		if j > 0 && r.Offset < p.Rows[j-1].Offset {
			return invalid(i, p, "position row %d at offset %#x goes backwards", j, r.Offset)
		}
	}
	return nil
}

// appendRows appends the rows of a position block: per row its offset
// from the previous row's (ULEB), its line's difference from the previous
// row's (SLEB; the first from 0) and its column (ULEB). A row followed by
// one at the same offset never holds and is dropped.
func appendRows(b []byte, rows []Row) []byte {
	var off uint64
	var line int64
	for j, r := range rows {
		if j+1 < len(rows) && rows[j+1].Offset == r.Offset {
			continue
		}
		b = dwarf.AppendUleb128(b, r.Offset-off)
		b = dwarf.AppendSleb128(b, int64(r.Line)-line)
		b = dwarf.AppendUleb128(b, uint64(r.Column))
		off, line = r.Offset, int64(r.Line)
	}
	return b
}

// writeStartIndex says whether encode writes the start index: tests
// clear it to write tables as before the index.
var writeStartIndex = true

// indexLen returns the number of start index entries of a table of n
// records: ⌊(n-1)/IndexStride⌋ with the index (on), 0 without or for
// an empty table.
func indexLen(n int, on bool) int {
	if !on || n == 0 {
		return 0
	}
	return (n - 1) / IndexStride
}

// width returns the number of bytes (1 to 4) that hold v ≤ 0xffffffff.
func width(v uint64) int {
	switch {
	case v <= 0xff:
		return 1
	case v <= 0xffff:
		return 2
	case v <= 0xffffff:
		return 3
	}
	return 4
}

func putLE(b []byte, v uint64, n int) []byte {
	for i := 0; i < n; i++ {
		b = append(b, byte(v>>(8*i)))
	}
	return b
}
