package info

import (
	"encoding/binary"
	"fmt"
	"iter"
	"math"
	"sync"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/formaterr"
)

// DW_AT_GNU_addr_base, the pre-DWARF 5 split-DWARF spelling of
// DW_AT_addr_base.
const atGNUAddrBase dwarf.Attr = 0x2133

const (
	secInfo       = ".debug_info"
	secAbbrev     = ".debug_abbrev"
	secStrOffsets = ".debug_str_offsets"
	secAddr       = ".debug_addr"
)

// MaxAttrs is the most attribute specifications one abbreviation may
// declare; more is a *formaterr.Error. Forms like DW_FORM_flag_present
// and DW_FORM_implicit_const take no bytes in .debug_info, so without a
// limit a one-byte DIE could decode into any number of fields.
const MaxAttrs = 256

// MaxDepth is the deepest DIE nesting the reader accepts; deeper input is
// a *formaterr.Error. Real compilers stay far below it.
const MaxDepth = 1024

// Sections holds the sections DIEs refer to; all but Info and Abbrev may
// be nil when unused. Order is the byte order; nil means little-endian.
type Sections struct {
	Info, Abbrev []byte
	Str          []byte // .debug_str (DW_FORM_strp, strx*)
	LineStr      []byte // .debug_line_str (DW_FORM_line_strp)
	StrOffsets   []byte // .debug_str_offsets (strx*)
	Addr         []byte // .debug_addr (addrx*)
	RngLists     []byte // .debug_rnglists (rnglistx)
	LocLists     []byte // .debug_loclists (loclistx)
	Order        binary.ByteOrder
}

// UnitHeader is a decoded unit header (DWARF 5 section 7.5.1) with the bases its
// root DIE gives for indexed forms.
type UnitHeader struct {
	// Offset is the .debug_info offset of the unit header; the unit is
	// [Offset, End).
	Offset, End uint64
	// DataOffset is the offset of the root DIE.
	DataOffset uint64
	// Enc is the unit's version, offset format, address size and the
	// byte order of Sections.
	Enc dwarf.Encoding
	// Type is the unit type (DW_UT_compile for versions 2 to 4).
	Type dwarf.UT
	// AbbrevOffset is debug_abbrev_offset.
	AbbrevOffset uint64
	// Signature is the type signature (type units) or dwo_id (skeleton
	// and split units), TypeOffset the type DIE's unit-relative offset.
	Signature, TypeOffset uint64
	// StrOffsetsBase, AddrBase, RngListsBase and LocListsBase are the
	// root DIE's DW_AT_str_offsets_base, DW_AT_addr_base,
	// DW_AT_rnglists_base and DW_AT_loclists_base, or the offset just
	// past a section header at offset 0 (8 or 16 bytes for
	// .debug_str_offsets and .debug_addr, 12 or 20 for the lists) when
	// absent.
	StrOffsetsBase, AddrBase, RngListsBase, LocListsBase uint64
}

// Field is one decoded attribute. Which of Val, Int, Str and Block hold
// the value depends on Class:
//
//   - ClassAddress: Val (addrx* resolved through .debug_addr).
//   - ClassConstant: Val and Int (data1..8 and udata zero-extended into
//     Int; sdata and implicit_const sign-extended into Val); data16 in
//     Block.
//   - ClassString: Str (strp, line_strp, strx* resolved).
//   - ClassExprloc, ClassBlock: Block, a subslice of .debug_info.
//   - ClassReference: Val, an absolute .debug_info offset.
//   - ClassSecOffset: Val (rnglistx/loclistx resolved to an offset into
//     .debug_rnglists/.debug_loclists).
//   - ClassFlag: Val 0 or 1.
//   - ClassReferenceSig8, ClassReferenceAlt, ClassStringAlt: Val.
type Field struct {
	Attr  dwarf.Attr
	Form  dwarf.Form // the form as read (after DW_FORM_indirect)
	Class Class
	Val   uint64
	Int   int64
	Str   string
	Block []byte
}

// Entry is a decoded DIE. Tag 0 is the null entry that ends a list of
// siblings.
type Entry struct {
	// Offset is the .debug_info offset of the DIE.
	Offset   uint64
	Tag      dwarf.Tag
	Children bool
	Fields   []Field
}

// Val returns the field for attribute a, or false. Cost: a linear scan
// of the fields, no allocation.
func (e *Entry) Val(a dwarf.Attr) (Field, bool) {
	for i := range e.Fields {
		if e.Fields[i].Attr == a {
			return e.Fields[i], true
		}
	}
	return Field{}, false
}

// String returns attribute a if it is of class string.
func (e *Entry) String(a dwarf.Attr) (string, bool) {
	f, ok := e.Val(a)
	if !ok || f.Class != ClassString {
		return "", false
	}
	return f.Str, true
}

// Uint returns the Val of attribute a for any class but string, exprloc
// and block.
func (e *Entry) Uint(a dwarf.Attr) (uint64, bool) {
	f, ok := e.Val(a)
	if !ok || f.Class == ClassString || f.Class == ClassExprloc || f.Class == ClassBlock || f.Class == ClassUnknown {
		return 0, false
	}
	return f.Val, true
}

// PCRange returns the entry's [low, high) from DW_AT_low_pc and
// DW_AT_high_pc (an address, or a length when of class constant, DWARF 5
// section 2.17.2). It reports false when either is missing.
func (e *Entry) PCRange() (low, high uint64, ok bool) {
	lf, ok1 := e.Val(dwarf.DW_AT_low_pc)
	hf, ok2 := e.Val(dwarf.DW_AT_high_pc)
	if !ok1 || !ok2 || lf.Class != ClassAddress {
		return 0, 0, false
	}
	switch hf.Class {
	case ClassAddress:
		return lf.Val, hf.Val, true
	case ClassConstant:
		return lf.Val, lf.Val + hf.Val, true
	}
	return 0, 0, false
}

// AttrSpec is one attribute specification of an abbreviation declaration:
// the attribute, its form and, for DW_FORM_implicit_const, the value
// (DWARF 5 section 7.5.3).
type AttrSpec struct {
	Attr     dwarf.Attr
	Form     dwarf.Form
	Implicit int64
}

// Abbrev is one abbreviation declaration (DWARF 5 section 7.5.3).
type Abbrev struct {
	Tag      dwarf.Tag
	Children bool
	Specs    []AttrSpec
}

// AbbrevTable is one decoded abbreviation table: declarations by code.
type AbbrevTable struct {
	dense  []Abbrev // dense[code-1] for codes 1..len(dense)
	sparse map[uint64]*Abbrev
}

// Lookup returns the declaration of code, or nil. Cost: an index, or a map
// lookup for codes not numbered 1, 2, 3, ... from the table's start.
func (t *AbbrevTable) Lookup(code uint64) *Abbrev {
	if code-1 < uint64(len(t.dense)) {
		return &t.dense[code-1]
	}
	return t.sparse[code]
}

// All yields the declarations and their codes, in no particular order.
func (t *AbbrevTable) All() iter.Seq2[uint64, *Abbrev] {
	return func(yield func(uint64, *Abbrev) bool) {
		for i := range t.dense {
			if !yield(uint64(i)+1, &t.dense[i]) {
				return
			}
		}
		for code, a := range t.sparse {
			if !yield(code, a) {
				return
			}
		}
	}
}

// Data is decoded DWARF: the unit headers, read by [New], and abbreviation
// tables, read on first use and cached. It is safe for concurrent use by
// several [Reader]s.
type Data struct {
	sec   Sections
	units []UnitHeader

	mu      sync.Mutex
	abbrevs map[uint64]*AbbrevTable
	// abbrevWork is the number of .debug_abbrev bytes parsed so far, over
	// all tables. Units may point into the middle of one long table, so
	// without a budget K crafted units cost K times the section.
	abbrevWork uint64
}

// New reads every unit header of sec.Info and the attributes of each root
// DIE that give bases for indexed forms. Errors are *formaterr.Error.
// Cost: linear in the number of units plus their root DIEs.
func New(sec Sections) (*Data, error) {
	if sec.Order == nil {
		sec.Order = binary.LittleEndian
	}
	d := &Data{sec: sec, abbrevs: map[uint64]*AbbrevTable{}}
	b := dwarf.MakeBuf(secInfo, sec.Order, sec.Info)
	for b.Len() > 0 {
		var u UnitHeader
		u.Offset = b.Off()
		length, format := b.UnitLength("unit_length")
		b.Limit(length, "unit_length")
		u.End = b.End()
		u.Enc = dwarf.Encoding{Format: format, ByteOrder: sec.Order}
		at := b.Off()
		u.Enc.Version = b.U16("version")
		if b.Err() == nil && (u.Enc.Version < 2 || u.Enc.Version > 5) {
			b.FailAt(at, "version", fmt.Sprintf("unsupported version %d", u.Enc.Version))
		}
		u.Type = dwarf.DW_UT_compile
		if u.Enc.Version >= 5 {
			u.Type = dwarf.UT(b.U8("unit_type"))
			u.Enc.AddrSize = b.U8("address_size")
			u.AbbrevOffset = b.Offset(format, "debug_abbrev_offset")
			switch u.Type {
			case dwarf.DW_UT_compile, dwarf.DW_UT_partial:
			case dwarf.DW_UT_skeleton, dwarf.DW_UT_split_compile:
				u.Signature = b.U64("dwo_id")
			case dwarf.DW_UT_type, dwarf.DW_UT_split_type:
				u.Signature = b.U64("type_signature")
				u.TypeOffset = b.Offset(format, "type_offset")
			default:
				b.FailAt(at+2, "unit_type", fmt.Sprintf("unknown unit type %#x", uint8(u.Type)))
			}
		} else {
			u.AbbrevOffset = b.Offset(format, "debug_abbrev_offset")
			u.Enc.AddrSize = b.U8("address_size")
		}
		switch u.Enc.AddrSize {
		case 1, 2, 4, 8:
		default:
			b.FailAt(at, "address_size", fmt.Sprintf("unsupported address size %d", u.Enc.AddrSize))
		}
		u.DataOffset = b.Off()
		if b.Err() != nil {
			return nil, b.Err()
		}
		osz := uint64(format.OffsetSize())
		u.StrOffsetsBase, u.AddrBase = 2*osz, 2*osz
		u.RngListsBase, u.LocListsBase = 2*osz+4, 2*osz+4
		if err := d.bases(&u); err != nil {
			return nil, err
		}
		d.units = append(d.units, u)
		b.SetEnd(len(sec.Info))
		b.Seek(u.End, "unit_length")
	}
	return d, b.Err()
}

// bases reads the root DIE of u without resolving indexed forms and takes
// its base attributes.
func (d *Data) bases(u *UnitHeader) error {
	if u.DataOffset >= u.End {
		return nil // empty unit
	}
	r := Reader{d: d}
	r.b = dwarf.MakeBuf(secInfo, d.sec.Order, d.sec.Info)
	r.b.Seek(u.DataOffset, "unit")
	r.b.SetEnd(int(u.End))
	e, err := r.entry(u, false)
	if err != nil {
		return err
	}
	for _, f := range e.Fields {
		switch f.Attr {
		case dwarf.DW_AT_str_offsets_base:
			u.StrOffsetsBase = f.Val
		case dwarf.DW_AT_addr_base, atGNUAddrBase:
			u.AddrBase = f.Val
		case dwarf.DW_AT_rnglists_base:
			u.RngListsBase = f.Val
		case dwarf.DW_AT_loclists_base:
			u.LocListsBase = f.Val
		}
	}
	return nil
}

// Units returns the units in section order. The slice belongs to d; do
// not modify it.
func (d *Data) Units() []UnitHeader { return d.units }

// UnitAt returns the unit whose [Offset, End) contains the .debug_info
// offset off. Cost: a bisection.
func (d *Data) UnitAt(off uint64) (*UnitHeader, bool) {
	i := d.unitIndex(off)
	if i < 0 {
		return nil, false
	}
	return &d.units[i], true
}

func (d *Data) unitIndex(off uint64) int {
	lo, hi := 0, len(d.units)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if d.units[m].Offset <= off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 || off >= d.units[lo-1].End {
		return -1
	}
	return lo - 1
}

// AbbrevTable returns the abbreviation table at offset off of
// .debug_abbrev, parsing it the first time and keeping it: callers share
// it and must not modify it. Errors are those of [ParseAbbrevTable], and
// a *formaterr.Error when the tables parsed so far add up to more than
// four times the section (units that point into the middle of one long
// table). Cost: a map lookup under a lock once the table is parsed.
func (d *Data) AbbrevTable(off uint64) (*AbbrevTable, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if t, ok := d.abbrevs[off]; ok {
		return t, nil
	}
	t, n, err := ParseAbbrevTable(d.sec.Abbrev, d.sec.Order, off)
	if err != nil {
		return nil, err
	}
	d.abbrevWork += n
	if budget := 4*uint64(len(d.sec.Abbrev)) + 4096; d.abbrevWork > budget {
		return nil, &formaterr.Error{Source: secAbbrev, Offset: off, Field: "debug_abbrev_offset",
			Msg: fmt.Sprintf("abbreviation tables overlap: %d bytes parsed for a %d-byte section", d.abbrevWork, len(d.sec.Abbrev))}
	}
	d.abbrevs[off] = t
	return t, nil
}

// ParseAbbrevTable reads the abbreviation table at offset off of data, a
// .debug_abbrev section (DWARF 5 section 7.5.3). The table ends at a 0
// code or at the end of the section. Tags, attributes and forms above
// 0xffff, more than MaxAttrs specifications in a declaration, a
// DW_CHILDREN byte other than 0 or 1 and a repeated code are errors
// (*formaterr.Error). Every declaration takes at least three bytes and
// every attribute specification two, so the work and the allocation are
// bounded by the section size. It returns the table and the number of
// bytes it read (callers that read many tables bound their sum).
func ParseAbbrevTable(data []byte, order binary.ByteOrder, off uint64) (*AbbrevTable, uint64, error) {
	// Two passes: the first validates and counts, the second fills arrays
	// of exactly that size (the declarations' attribute specifications
	// share one backing array, each declaration's slice clipped), so a
	// table costs three allocations (five with codes out of order: a map
	// and its declarations' array) and touches no memory it does not
	// keep.
	var c abbrevCount
	n, err := scanAbbrevs(data, order, off, &c, nil)
	if err != nil {
		return nil, 0, err
	}
	t := &AbbrevTable{}
	f := abbrevFill{all: make([]AttrSpec, 0, c.specs)}
	if c.dense {
		t.dense = make([]Abbrev, 0, c.decls)
	} else {
		f.backing = make([]Abbrev, 0, c.decls)
		t.sparse = make(map[uint64]*Abbrev, c.decls)
	}
	if _, err := scanAbbrevs(data, order, off, nil, &abbrevSink{t, &f}); err != nil {
		return nil, 0, err
	}
	return t, n, nil
}

// abbrevCount is what the first pass of ParseAbbrevTable learns.
type abbrevCount struct {
	decls, specs int
	dense        bool // codes 1, 2, 3, ... in order
}

// abbrevFill is the second pass's backing arrays.
type abbrevFill struct {
	all     []AttrSpec
	backing []Abbrev // the sparse declarations
}

type abbrevSink struct {
	t *AbbrevTable
	f *abbrevFill
}

// scanAbbrevs reads the table at off: with count set it validates and
// counts; with sink set it stores the declarations (on input count has
// already validated, except for repeated codes of a sparse table).
func scanAbbrevs(data []byte, order binary.ByteOrder, off uint64, count *abbrevCount, sink *abbrevSink) (uint64, error) {
	b := dwarf.MakeBuf(secAbbrev, order, data)
	b.Seek(off, "debug_abbrev_offset")
	if count != nil {
		count.dense = true
	}
	for b.Err() == nil && b.Len() > 0 {
		at := b.Off()
		code := b.Uleb("abbrev code")
		if code == 0 {
			break
		}
		tagOff := b.Off()
		tag := b.Uleb("tag")
		if b.Err() == nil && tag > math.MaxUint16 {
			// Tag, Attr and Form are 16 bits: DW_TAG_hi_user is
			// 0xffff, DW_AT_hi_user 0x3fff (DWARF 5 section 7.5.4).
			b.FailAt(tagOff, "tag", fmt.Sprintf("tag %#x out of range", tag))
			break
		}
		a := Abbrev{Tag: dwarf.Tag(tag)}
		ch := b.U8("DW_CHILDREN")
		a.Children = ch == 1
		if b.Err() == nil && ch > 1 {
			b.FailAt(b.Off()-1, "DW_CHILDREN", fmt.Sprintf("invalid value %d", ch))
		}
		var start, nspecs int
		if sink != nil {
			start = len(sink.f.all)
		}
		for b.Err() == nil {
			specOff := b.Off()
			name := b.Uleb("attribute name")
			form := b.Uleb("attribute form")
			if name == 0 && form == 0 {
				break
			}
			if b.Err() == nil && (name > math.MaxUint16 || form > math.MaxUint16) {
				b.FailAt(specOff, "attribute specification", fmt.Sprintf("attribute %#x or form %#x out of range", name, form))
				break
			}
			if nspecs == MaxAttrs {
				b.FailAt(at, "attribute specification", fmt.Sprintf("more than %d attributes", MaxAttrs))
				break
			}
			nspecs++
			s := AttrSpec{Attr: dwarf.Attr(name), Form: dwarf.Form(form)}
			if s.Form == dwarf.DW_FORM_implicit_const {
				s.Implicit = b.Sleb("implicit_const value")
			}
			if sink != nil {
				sink.f.all = append(sink.f.all, s)
			}
		}
		if b.Err() != nil {
			break
		}
		if count != nil {
			count.decls++
			count.specs += nspecs
			if code != uint64(count.decls) {
				count.dense = false
			}
			continue
		}
		all := sink.f.all
		a.Specs = all[start:len(all):len(all)]
		t := sink.t
		if t.sparse == nil {
			t.dense = append(t.dense, a)
			continue
		}
		if _, dup := t.sparse[code]; dup {
			b.FailAt(at, "abbrev code", fmt.Sprintf("duplicate code %d", code))
			break
		}
		sink.f.backing = append(sink.f.backing, a)
		t.sparse[code] = &sink.f.backing[len(sink.f.backing)-1]
	}
	if b.Err() != nil {
		return 0, b.Err()
	}
	return b.Off() - off, nil
}

// Reader reads DIEs in section order, across units. Use [Data.Reader].
// A Reader is not safe for concurrent use.
type Reader struct {
	d        *Data
	ui       int // index of the current unit
	b        dwarf.Buf
	depth    int
	lastKids bool
	err      error
	scratch  []Field
}

// Reader returns a reader positioned at the first DIE of the first unit.
func (d *Data) Reader() *Reader {
	r := &Reader{d: d}
	r.b = dwarf.MakeBuf(secInfo, d.sec.Order, d.sec.Info)
	r.enter(0, 0, false)
	return r
}

// enter makes unit i current and positions the cursor at off (the unit's
// first DIE when useData is false).
func (r *Reader) enter(i int, off uint64, useOff bool) {
	r.ui, r.depth, r.lastKids = i, 0, false
	if i >= len(r.d.units) {
		return
	}
	u := &r.d.units[i]
	if !useOff {
		off = u.DataOffset
	}
	r.b = dwarf.MakeBuf(secInfo, r.d.sec.Order, r.d.sec.Info)
	r.b.Seek(off, "entry offset")
	r.b.SetEnd(int(u.End))
}

// Unit returns the header of the unit of the entry Next returns next (or
// returned last, at a unit's end), or nil past the last unit.
func (r *Reader) Unit() *UnitHeader {
	if r.ui >= len(r.d.units) {
		return nil
	}
	return &r.d.units[r.ui]
}

// Seek positions the reader so that Next returns the DIE at .debug_info
// offset off; the offset of a unit header means that unit's root DIE.
// An offset outside every unit makes the next Next fail. Nesting depth
// restarts at 0. Cost: a bisection over the units.
func (r *Reader) Seek(off uint64) {
	r.err = nil
	i := r.d.unitIndex(off)
	if i < 0 || (off > r.d.units[i].Offset && off < r.d.units[i].DataOffset) {
		r.err = &formaterr.Error{Source: secInfo, Offset: off, Field: "entry offset", Msg: "not the offset of a DIE in any unit"}
		return
	}
	if off == r.d.units[i].Offset {
		r.enter(i, 0, false)
		return
	}
	r.enter(i, off, true)
}

// Next returns the next DIE, including the null entries (Tag 0) that end
// lists of children, moving into the next unit at a unit's end. It
// returns nil, nil after the last unit, and a *formaterr.Error (sticky)
// for malformed input. Cost: one allocation for the entry and its fields
// plus one per resolved string.
func (r *Reader) Next() (*Entry, error) {
	for {
		if r.err != nil {
			return nil, r.err
		}
		if r.ui >= len(r.d.units) {
			return nil, nil
		}
		if r.b.Len() == 0 && r.b.Err() == nil {
			r.enter(r.ui+1, 0, false)
			continue
		}
		e, err := r.entry(&r.d.units[r.ui], true)
		if err != nil {
			r.err = err
			return nil, err
		}
		return e, nil
	}
}

// SkipChildren skips the children of the entry Next returned last, if it
// has any, so that the next Next returns its next sibling. Errors are
// reported by the following Next.
func (r *Reader) SkipChildren() {
	if r.err != nil || !r.lastKids {
		return
	}
	r.lastKids = false
	u := &r.d.units[r.ui]
	for level := 1; level > 0; {
		if r.b.Len() == 0 {
			return // unit ended without closing nulls
		}
		e, err := r.entryRaw(u, false)
		if err != nil {
			r.err = err
			return
		}
		if e.Tag == 0 {
			level--
		} else if e.Children {
			level++
		}
	}
	r.lastKids = false
}

// entry decodes the DIE at the cursor and returns it with its own copy of
// the fields.
func (r *Reader) entry(u *UnitHeader, resolve bool) (*Entry, error) {
	e, err := r.entryRaw(u, resolve)
	if err != nil {
		return nil, err
	}
	if len(e.Fields) > 0 {
		e.Fields = append([]Field(nil), e.Fields...)
	} else {
		e.Fields = nil
	}
	return &e, nil
}

// entryRaw decodes the DIE at the cursor into r.scratch.
func (r *Reader) entryRaw(u *UnitHeader, resolve bool) (Entry, error) {
	b := &r.b
	e := Entry{Offset: b.Off()}
	code := b.Uleb("abbrev code")
	if err := b.Err(); err != nil {
		return e, err
	}
	if code == 0 {
		if r.depth > 0 {
			r.depth--
		}
		r.lastKids = false
		return e, nil
	}
	t, err := r.d.AbbrevTable(u.AbbrevOffset)
	if err != nil {
		return e, err
	}
	a := t.Lookup(code)
	if a == nil {
		b.FailAt(e.Offset, "abbrev code", fmt.Sprintf("code %d not in the table at .debug_abbrev+%#x", code, u.AbbrevOffset))
		return e, b.Err()
	}
	e.Tag, e.Children = a.Tag, a.Children
	fs := r.scratch[:0]
	for i := range a.Specs {
		f := r.field(u, &a.Specs[i], resolve)
		if err := b.Err(); err != nil {
			return e, err
		}
		fs = append(fs, f)
	}
	r.scratch = fs
	e.Fields = fs
	r.lastKids = a.Children
	if a.Children {
		r.depth++
		if r.depth > MaxDepth {
			b.FailAt(e.Offset, "DIE nesting", fmt.Sprintf("deeper than %d levels", MaxDepth))
			return e, b.Err()
		}
	}
	return e, nil
}

// Attributes that, before version 4, take data4/data8 as a section offset
// (DWARF 3 section 7.5.4).
func isPtrAttr(a dwarf.Attr) bool {
	switch a {
	case dwarf.DW_AT_location, dwarf.DW_AT_stmt_list, dwarf.DW_AT_ranges, dwarf.DW_AT_frame_base,
		0x19 /* string_length */, 0x2a /* return_addr */, 0x2e /* segment */, 0x43, /* macro_info */
		0x48 /* static_link */, 0x4a /* use_location */, 0x4d /* vtable_elem_location */, dwarf.DW_AT_data_member_location:
		return true
	}
	return false
}

// classOf is the Class a Field of form spec s has: the form's attribute
// classes (DWARF 5 table 7.6) refined by what it refers to.
func classOf(s dwarf.FormSpec) Class {
	c := s.Classes
	switch {
	case c&dwarf.ClassAddress != 0:
		return ClassAddress
	case c&dwarf.ClassConstant != 0:
		return ClassConstant
	case c&dwarf.ClassString != 0:
		if s.Target == dwarf.TargetSupStr {
			return ClassStringAlt
		}
		return ClassString
	case c&dwarf.ClassExprloc != 0:
		return ClassExprloc
	case c&dwarf.ClassBlock != 0:
		return ClassBlock
	case c&dwarf.ClassFlag != 0:
		return ClassFlag
	case c&dwarf.ClassReference != 0:
		switch s.Target {
		case dwarf.TargetSignature:
			return ClassReferenceSig8
		case dwarf.TargetSupInfo:
			return ClassReferenceAlt
		}
		return ClassReference
	case c != 0: // lineptr, loclist, rnglist, ... pointers into other sections
		return ClassSecOffset
	}
	return ClassUnknown
}

// field reads one attribute value of spec's form at the cursor, as the
// form table (dwarf.Form.Spec) lays it out.
func (r *Reader) field(u *UnitHeader, spec *AttrSpec, resolve bool) Field {
	b := &r.b
	f := Field{Attr: spec.Attr, Form: spec.Form}
	at := b.Off()
	if f.Form == dwarf.DW_FORM_indirect {
		if f.Form = b.Indirect(f.Form); b.Err() != nil {
			return f
		}
	}
	fs, ok := f.Form.Spec()
	if !ok {
		b.FailAt(at, "attribute form", fmt.Sprintf("unknown form %v for %v", f.Form, f.Attr))
		return f
	}
	field := fs.Name
	v, p := b.FormValue(&fs, u.Enc, field)
	if b.Err() != nil {
		return f
	}
	f.Class = classOf(fs)
	switch f.Class {
	case ClassConstant:
		switch {
		case fs.Size == dwarf.SizeImplicit:
			f.Int, f.Val = spec.Implicit, uint64(spec.Implicit)
		case p != nil: // data16
			f.Block = p
		default: // sdata as its two's complement, the others zero-extended
			f.Int, f.Val = int64(v), v
			if (f.Form == dwarf.DW_FORM_data4 || f.Form == dwarf.DW_FORM_data8) && u.Enc.Version < 4 && isPtrAttr(f.Attr) {
				f.Class = ClassSecOffset
			}
		}
	case ClassString, ClassStringAlt:
		if fs.Size == dwarf.SizeString {
			f.Str = string(p)
		} else {
			f.Val = v
		}
	case ClassExprloc, ClassBlock:
		f.Block = p
	case ClassFlag:
		// flag_present takes no byte; DW_FORM_flag is true when not 0
		// (DWARF 5 section 7.5.5).
		if v != 0 || fs.FixedSize(u.Enc) == 0 {
			f.Val = 1
		}
	case ClassReference:
		f.Val = v
		if fs.Target == dwarf.TargetUnit {
			f.Val += u.Offset
		}
	default:
		f.Val = v
	}
	if !resolve {
		return f
	}
	// Resolve strings and indexes through the other sections.
	sec := &r.d.sec
	osz := u.Enc.Format.OffsetSize()
	var err error
	switch fs.Target {
	case dwarf.TargetStr:
		f.Str, err = dwarf.CStringAt(".debug_str", sec.Str, f.Val, field)
	case dwarf.TargetLineStr:
		f.Str, err = dwarf.CStringAt(".debug_line_str", sec.LineStr, f.Val, field)
	case dwarf.TargetStrOffsets:
		var off uint64
		off, err = index(secStrOffsets, sec.StrOffsets, u, u.StrOffsetsBase, f.Val, osz, field)
		if err == nil {
			f.Str, err = dwarf.CStringAt(".debug_str", sec.Str, off, field)
		}
	case dwarf.TargetAddr:
		f.Val, err = index(secAddr, sec.Addr, u, u.AddrBase, f.Val, int(u.Enc.AddrSize), field)
	case dwarf.TargetRngLists:
		var off uint64
		off, err = index(".debug_rnglists", sec.RngLists, u, u.RngListsBase, f.Val, osz, field)
		f.Val = u.RngListsBase + off
	case dwarf.TargetLocLists:
		var off uint64
		off, err = index(".debug_loclists", sec.LocLists, u, u.LocListsBase, f.Val, osz, field)
		f.Val = u.LocListsBase + off
	}
	if err != nil {
		b.FailAt(at, field, err.Error())
	}
	return f
}

// index reads entry i of size bytes from the array at base in section
// data (.debug_str_offsets, .debug_addr, a list section's offset array).
func index(section string, data []byte, u *UnitHeader, base, i uint64, size int, field string) (uint64, error) {
	const max = ^uint64(0)
	if i > (max-base)/uint64(size) {
		return 0, &formaterr.Error{Source: section, Offset: base, Field: field, Msg: fmt.Sprintf("index %d overflows", i)}
	}
	off := base + i*uint64(size)
	if off > uint64(len(data)) || uint64(len(data))-off < uint64(size) {
		return 0, &formaterr.Error{Source: section, Offset: off, Field: field, Msg: fmt.Sprintf("index %d (base %#x) past the section end %#x", i, base, len(data))}
	}
	b := dwarf.MakeBuf(section, u.Enc.ByteOrder, data)
	b.Seek(off, field)
	return b.Uint(size, field), b.Err()
}
