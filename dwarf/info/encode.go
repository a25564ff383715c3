package info

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/elfimage/elfimage/dwarf"
)

// ErrInvalidUnit is wrapped by every error [Encode] returns for input it
// refuses (a reference to a DIE outside its unit, a DIE used twice, an
// address wider than the address size, a string with a NUL byte, a form
// the unit's version cannot express). Match it with errors.Is.
var ErrInvalidUnit = errors.New("info: invalid unit")

// DIE is a debugging information entry to encode: a tag, attributes in the
// order they are written, and children (DWARF 5 section 2.1). A DIE must
// appear once in its unit's tree.
type DIE struct {
	Tag      dwarf.Tag
	Attrs    []Attr
	Children []*DIE
}

// Attr is one attribute: a name and a value whose constructor fixed its
// class.
type Attr struct {
	Name  dwarf.Attr
	Value Value
}

// Class is an attribute class (DWARF 5 section 7.5.5, table 7.5.5),
// with a few refinements for what a reader must tell apart.
type Class uint8

// Classes.
const (
	ClassUnknown Class = iota
	// ClassAddress: an address (DW_FORM_addr, addrx*).
	ClassAddress
	// ClassConstant: an integer constant (data*, sdata, udata,
	// implicit_const); data16 keeps its 16 bytes in Block.
	ClassConstant
	// ClassString: a string, resolved through the string sections.
	ClassString
	// ClassExprloc: a DWARF expression (DW_FORM_exprloc).
	ClassExprloc
	// ClassBlock: an uninterpreted block (block, block1/2/4).
	ClassBlock
	// ClassReference: a DIE reference, as an absolute .debug_info offset.
	ClassReference
	// ClassSecOffset: an offset into another section (lineptr,
	// loclistsptr, rnglistsptr, ...; DW_FORM_sec_offset, and data4/data8
	// of pointer attributes before version 4), including the offsets
	// that rnglistx and loclistx indexes resolve to.
	ClassSecOffset
	// ClassFlag: a flag (DW_FORM_flag, flag_present).
	ClassFlag
	// ClassReferenceSig8: a type signature (DW_FORM_ref_sig8).
	ClassReferenceSig8
	// ClassReferenceAlt: an offset in a supplementary object file's
	// .debug_info (ref_sup4/8, GNU_ref_alt).
	ClassReferenceAlt
	// ClassStringAlt: an offset in a supplementary object file's
	// string section (strp_sup, GNU_strp_alt).
	ClassStringAlt
)

var classNames = [...]string{"unknown", "address", "constant", "string", "exprloc", "block", "reference", "sec_offset", "flag", "reference(sig8)", "reference(alt)", "string(alt)"}

// String returns the class name in the standard's words.
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// Value is an attribute value for the writer. Build it with a constructor;
// the zero Value is invalid.
type Value struct {
	class  Class
	signed bool
	u      uint64
	s      int64
	str    string
	b      []byte
	ref    *DIE
}

// String is a string: DW_FORM_strp into .debug_str (deduplicated), or
// DW_FORM_string inline when Encode is given no string table.
func String(s string) Value { return Value{class: ClassString, str: s} }

// Addr is an address: DW_FORM_addr.
func Addr(a uint64) Value { return Value{class: ClassAddress, u: a} }

// Udata is an unsigned constant: the shortest of data1/2/4/8 and
// DW_FORM_udata (data4/data8 not used before version 4, where they could
// be read as section offsets).
func Udata(v uint64) Value { return Value{class: ClassConstant, u: v} }

// Sdata is a signed constant: DW_FORM_sdata, or data1/2/4 when v is
// non-negative and small enough that reading it sign- or zero-extended
// gives the same number and no longer than sdata.
func Sdata(v int64) Value { return Value{class: ClassConstant, signed: true, s: v} }

// Flag is a flag: DW_FORM_flag_present for true (DW_FORM_flag 1 before
// version 4), DW_FORM_flag 0 for false.
func Flag(b bool) Value {
	v := Value{class: ClassFlag}
	if b {
		v.u = 1
	}
	return v
}

// Exprloc is a DWARF expression: DW_FORM_exprloc, or the shortest
// DW_FORM_block1/2/4 before version 4.
func Exprloc(b []byte) Value { return Value{class: ClassExprloc, b: b} }

// Block is an uninterpreted block: the shortest of DW_FORM_block1,
// block2 and block.
func Block(b []byte) Value { return Value{class: ClassBlock, b: b} }

// Ref is a reference to a DIE of the same unit: DW_FORM_ref4.
func Ref(d *DIE) Value { return Value{class: ClassReference, ref: d} }

// SecOffset is an offset into another debug section (DW_AT_stmt_list,
// DW_AT_ranges, ...): DW_FORM_sec_offset, or data4/data8 (by offset
// format) before version 4.
func SecOffset(v uint64) Value { return Value{class: ClassSecOffset, u: v} }

// Unit is a compile unit to encode: its encoding and its root DIE
// (normally DW_TAG_compile_unit).
type Unit struct {
	Enc  dwarf.Encoding
	Root *DIE
	// Offset is set by Encode to the unit's offset in .debug_info (its
	// unit_length field), for .debug_aranges and similar indexes.
	Offset uint64
}

type encoder struct {
	info, abbrev []byte
	codes        map[string]uint64
	str          *dwarf.StrTab
	// per unit
	enc         dwarf.Encoding
	order       binary.ByteOrder
	unitStart   int
	offs        map[*DIE]uint64
	local       map[*DIE]uint64 // UnitWriter: the DIEs added since the last Release with keep false
	transient   bool            // the DIEs being encoded go to local
	lenAt       int
	wantOffsets bool
	fixups      []fixup
	key         []byte
	recent      [8]recentAbbrev // by tag
	forms       []dwarf.Form
	addrs       []uint64 // offsets of DW_FORM_addr values in info
	offsets     []OffsetField
}

// OffsetField is a field of .debug_info holding an offset into another
// section (DW_FORM_strp, DW_FORM_sec_offset, a pre-version-4 section
// offset in DW_FORM_data4/8, or a unit header's debug_abbrev_offset): At
// is its offset in .debug_info, Size its size in bytes (4, or 8 in the
// 64-bit format) and Section the section it points into (".debug_str",
// ".debug_abbrev", ".debug_line", ".debug_loclists", ...). These are the
// fields an ET_REL object relocates against the target section's symbol
// (x86-64 psABI R_X86_64_32), so that a linker may move or merge the
// sections they point into.
type OffsetField struct {
	At      uint64
	Size    int
	Section string
}

// Fields is what [EncodeFields] reports besides the sections: Addrs the
// .debug_info offsets of the DW_FORM_addr values (as [EncodeAddrs]),
// Offsets every section offset, in increasing order of At.
type Fields struct {
	Addrs   []uint64
	Offsets []OffsetField
}

// EncodeFields is [EncodeAddrs] that also reports every field holding an
// offset into another section, for a writer of relocatable objects. A
// DW_FORM_sec_offset of an attribute whose section this package does not
// know (not DW_AT_stmt_list, DW_AT_ranges, a location list,
// DW_AT_str_offsets_base, DW_AT_addr_base, DW_AT_rnglists_base or
// DW_AT_loclists_base) is an error wrapping [ErrInvalidUnit]. Cost: that
// of Encode plus the slices.
func EncodeFields(units []*Unit, str *dwarf.StrTab) (info, abbrev []byte, f Fields, err error) {
	e := &encoder{codes: map[string]uint64{}, str: str, wantOffsets: true}
	for i, u := range units {
		if err := e.unit(u); err != nil {
			return nil, nil, Fields{}, fmt.Errorf("%w: unit %d: %v", ErrInvalidUnit, i, err)
		}
	}
	e.abbrev = append(e.abbrev, 0)
	return e.info, e.abbrev, Fields{Addrs: e.addrs, Offsets: e.offsets}, nil
}

// offsetSection names the section a section offset of attribute a points
// into in a unit of version ver; "" when unknown.
func offsetSection(a dwarf.Attr, ver uint16) string {
	switch a {
	case dwarf.DW_AT_stmt_list:
		return ".debug_line"
	case dwarf.DW_AT_ranges:
		if ver >= 5 {
			return ".debug_rnglists"
		}
		return ".debug_ranges"
	case dwarf.DW_AT_location, dwarf.DW_AT_frame_base, dwarf.DW_AT_data_member_location:
		if ver >= 5 {
			return ".debug_loclists"
		}
		return ".debug_loc"
	case dwarf.DW_AT_str_offsets_base:
		return ".debug_str_offsets"
	case dwarf.DW_AT_addr_base:
		return ".debug_addr"
	case dwarf.DW_AT_rnglists_base:
		return ".debug_rnglists"
	case dwarf.DW_AT_loclists_base:
		return ".debug_loclists"
	}
	return ""
}

// offsetField records a section offset about to be written at the end of
// info.
func (e *encoder) offsetField(section string) {
	if e.wantOffsets {
		e.offsets = append(e.offsets, OffsetField{At: uint64(len(e.info)), Size: e.enc.Format.OffsetSize(), Section: section})
	}
}

// secOffset records a DW_FORM_sec_offset (or older data4/8 offset) of
// attribute a, or fails when its section is unknown.
func (e *encoder) secOffset(a dwarf.Attr) error {
	if !e.wantOffsets {
		return nil
	}
	s := offsetSection(a, e.enc.Version)
	if s == "" {
		return fmt.Errorf("%v: section offset into a section this encoder does not know", a)
	}
	e.offsetField(s)
	return nil
}

// recentAbbrev is the abbreviation key and code of the last DIE of a
// tag.
type recentAbbrev struct {
	key  []byte
	code uint64
}

type fixup struct {
	at     int
	target *DIE
}

// Encode encodes units into .debug_info and one shared .debug_abbrev table
// (at offset 0, abbreviations deduplicated across units and numbered from
// 1 in order of first use, terminated by a 0 code). Strings go to str
// (.debug_str) as DW_FORM_strp; a nil str writes them inline. Each unit
// gets a DW_UT_compile header (DWARF 5 section 7.5.1.1) or the version 2–4
// header. Output is deterministic. It sets each Unit's Offset.
//
// Errors wrap [ErrInvalidUnit]. Cost: linear in the size of the trees.
func Encode(units []*Unit, str *dwarf.StrTab) (info, abbrev []byte, err error) {
	info, abbrev, _, err = EncodeAddrs(units, str)
	return info, abbrev, err
}

// EncodeAddrs is [Encode] that also returns the .debug_info offset of every
// DW_FORM_addr value written, in increasing order: the words a linker
// adds a constant to when it moves the code (they are the only absolute
// addresses in .debug_info). Cost: that of Encode plus the slice.
func EncodeAddrs(units []*Unit, str *dwarf.StrTab) (info, abbrev []byte, addrOffsets []uint64, err error) {
	e := &encoder{codes: map[string]uint64{}, str: str}
	for i, u := range units {
		if err := e.unit(u); err != nil {
			return nil, nil, nil, fmt.Errorf("%w: unit %d: %v", ErrInvalidUnit, i, err)
		}
	}
	e.abbrev = append(e.abbrev, 0)
	return e.info, e.abbrev, e.addrs, nil
}

func (e *encoder) unit(u *Unit) error {
	if err := e.begin(u); err != nil {
		return err
	}
	if err := e.die(u.Root, int(u.Offset)); err != nil {
		return err
	}
	return e.end()
}

// begin writes the unit header of u and prepares the per-unit state.
func (e *encoder) begin(u *Unit) error {
	if u == nil || u.Root == nil {
		return errors.New("no root DIE")
	}
	if err := u.Enc.Validate(); err != nil {
		return err
	}
	e.enc, e.order = u.Enc, u.Enc.ByteOrder
	e.offs = map[*DIE]uint64{}
	e.fixups = e.fixups[:0]
	osz := e.enc.Format.OffsetSize()
	u.Offset = uint64(len(e.info))
	if e.enc.Format == dwarf.Format64 {
		e.uint(4, 0xffffffff)
	}
	e.lenAt = len(e.info)
	e.uint(osz, 0) // unit_length
	e.unitStart = len(e.info)
	e.uint(2, uint64(e.enc.Version)) // version
	if e.enc.Version >= 5 {
		e.info = append(e.info, byte(dwarf.DW_UT_compile)) // unit_type
		e.info = append(e.info, e.enc.AddrSize)            // address_size
		e.offsetField(".debug_abbrev")
		e.uint(osz, 0) // debug_abbrev_offset
	} else {
		e.offsetField(".debug_abbrev")
		e.uint(osz, 0)                          // debug_abbrev_offset
		e.info = append(e.info, e.enc.AddrSize) // address_size
	}
	return nil
}

// end resolves the unit's references and writes its length.
func (e *encoder) end() error {
	for _, f := range e.fixups {
		off, ok := e.offs[f.target]
		if !ok {
			return fmt.Errorf("reference to a DIE (tag %v) not in the unit", tagOf(f.target))
		}
		e.order.PutUint32(e.info[f.at:], uint32(off))
	}
	e.fixups = e.fixups[:0]
	n := uint64(len(e.info) - e.unitStart)
	if e.enc.Format == dwarf.Format32 && n >= 0xfffffff0 {
		return fmt.Errorf("unit of %d bytes too large for 32-bit DWARF", n)
	}
	dwarf.PutUint(e.info[e.lenAt:], e.order, e.enc.Format.OffsetSize(), n)
	return nil
}

// UnitWriter encodes one unit as its DIEs are produced, so that a
// producer of many similar subtrees (a subprogram per procedure) can
// build each in reused memory instead of holding the whole tree: the root
// DIE's attributes first ([NewUnitWriter]), then each child subtree of
// the root in order ([UnitWriter.Add]), then [UnitWriter.Finish]. The
// bytes are those [EncodeFields] writes for the root with these children
// (abbreviations numbered in order of first use, the same forms), given
// that the root has at least one child (the root is written with
// DW_CHILDREN_yes).
//
// A subtree added with keep false is transient: its DIEs may be
// referenced only from DIEs added since the last [UnitWriter.Release],
// which resolves those references; after Release the caller may reuse
// the transient DIEs' memory (a later reference to one of them is an
// error of Finish, as a reference outside the unit is). DIEs added with keep true may be referenced
// from anywhere in the unit, before or after them. Errors wrap
// [ErrInvalidUnit]; after one, every method returns it. Cost: that of
// Encode, without the offset map of the transient DIEs.
type UnitWriter struct {
	e   *encoder
	u   *Unit
	err error
	// deferred is the number of leading fixups left by earlier Releases:
	// their targets can only be DIEs kept.
	deferred int
}

// NewUnitWriter starts encoding u: it writes the unit header and the
// attributes of u.Root, whose Children it ignores (pass them to Add).
// Strings go to str as in [Encode]; fields says whether Finish reports
// Fields.Offsets (and refuses unknown section offsets) as [EncodeFields]
// does, or only Fields.Addrs, as [EncodeAddrs]. hint, when positive, is the expected size
// of .debug_info in bytes, to allocate it once.
func NewUnitWriter(u *Unit, str *dwarf.StrTab, fields bool, hint int) (*UnitWriter, error) {
	e := &encoder{codes: map[string]uint64{}, str: str, wantOffsets: fields, local: map[*DIE]uint64{}}
	if hint > 0 {
		e.info = make([]byte, 0, hint)
	}
	w := &UnitWriter{e: e, u: u}
	if err := e.begin(u); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidUnit, err)
	}
	if err := e.dieHead(u.Root, int(u.Offset), true); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidUnit, err)
	}
	return w, nil
}

// Add encodes d and its descendants as the next child of the root; keep
// says whether they may be referenced after the next Release.
func (w *UnitWriter) Add(d *DIE, keep bool) error {
	if w.err != nil {
		return w.err
	}
	w.e.transient = !keep
	err := w.e.die(d, int(w.u.Offset))
	w.e.transient = false
	if err != nil {
		w.err = fmt.Errorf("%w: %v", ErrInvalidUnit, err)
	}
	return w.err
}

// Release resolves the references to DIEs added with keep false since
// the last Release and forgets those DIEs; references to DIEs not yet
// known are resolved by Finish, against the DIEs added with keep true.
func (w *UnitWriter) Release() error {
	if w.err != nil {
		return w.err
	}
	e := w.e
	rest := e.fixups[:0]
	for i, f := range e.fixups {
		var off uint64
		ok := false
		if i >= w.deferred {
			off, ok = e.local[f.target]
		}
		if !ok {
			off, ok = e.offs[f.target]
		}
		if !ok {
			rest = append(rest, f)
			continue
		}
		e.order.PutUint32(e.info[f.at:], uint32(off))
	}
	e.fixups = rest
	w.deferred = len(rest)
	if len(e.local) > localKeep {
		e.local = map[*DIE]uint64{} // clear would keep a large table to sweep each time
	} else {
		clear(e.local)
	}
	return nil
}

// localKeep is the number of DIEs released at once up to which Release
// clears the table of released DIEs for the next ones instead of making a
// new one: a batch of 128 procedures (the linker's) releases about 400,
// and a new table would grow again, rehashing, for every batch.
const localKeep = 4096

// Finish ends the root's children, resolves the remaining references and
// returns the sections as [EncodeFields] does. The Unit's Offset is set.
func (w *UnitWriter) Finish() (info, abbrev []byte, f Fields, err error) {
	if err := w.Release(); err != nil {
		return nil, nil, Fields{}, err
	}
	e := w.e
	e.info = append(e.info, 0)
	if err := e.end(); err != nil {
		w.err = fmt.Errorf("%w: %v", ErrInvalidUnit, err)
		return nil, nil, Fields{}, w.err
	}
	e.abbrev = append(e.abbrev, 0)
	w.err = errors.New("info: UnitWriter used after Finish")
	return e.info, e.abbrev, Fields{Addrs: e.addrs, Offsets: e.offsets}, nil
}

func tagOf(d *DIE) dwarf.Tag {
	if d == nil {
		return 0
	}
	return d.Tag
}

func (e *encoder) uint(size int, v uint64) {
	if size == 4 && e.order == binary.LittleEndian { // refs, strp, sec_offset: inlined
		e.info = binary.LittleEndian.AppendUint32(e.info, uint32(v))
		return
	}
	e.info = dwarf.AppendUint(e.info, e.order, size, v)
}

func fits(v uint64, size int) bool { return size >= 8 || v>>(8*uint(size)) == 0 }

// dataForms are the fixed-size constant forms, shortest first.
var dataForms = [...]dwarf.Form{dwarf.DW_FORM_data1, dwarf.DW_FORM_data2, dwarf.DW_FORM_data4, dwarf.DW_FORM_data8}

// dataFormSizes are the sizes of dataForms, from the form table.
var dataFormSizes = func() (n [len(dataForms)]int) {
	for i, f := range dataForms {
		n[i] = fixedSize(f)
	}
	return n
}()

// fixedSize is the size in bytes of a fixed-size form, from the form
// table.
func fixedSize(f dwarf.Form) int {
	s, _ := f.Spec()
	return int(s.N)
}

// form chooses the form of v in the current unit.
func (e *encoder) form(name dwarf.Attr, v *Value) (dwarf.Form, error) {
	ver := e.enc.Version
	switch v.class {
	case ClassString:
		if strings.IndexByte(v.str, 0) >= 0 {
			return 0, fmt.Errorf("%v: string %q contains a NUL byte", name, v.str)
		}
		if e.str == nil {
			return dwarf.DW_FORM_string, nil
		}
		return dwarf.DW_FORM_strp, nil
	case ClassAddress:
		if !fits(v.u, int(e.enc.AddrSize)) {
			return 0, fmt.Errorf("%v: address %#x does not fit in %d bytes", name, v.u, e.enc.AddrSize)
		}
		return dwarf.DW_FORM_addr, nil
	case ClassConstant:
		if name == dwarf.DW_AT_high_pc && ver < 4 {
			return 0, fmt.Errorf("DW_AT_high_pc as a constant needs version 4 (use Addr)")
		}
		if v.signed && v.s < 0 {
			return dwarf.DW_FORM_sdata, nil
		}
		u, signBit, leb := v.u, uint(0), dwarf.Uleb128Size(v.u)
		if v.signed {
			u, signBit, leb = uint64(v.s), 1, dwarf.Sleb128Size(v.s)
		}
		best, size := dwarf.DW_FORM_udata, leb
		if v.signed {
			best = dwarf.DW_FORM_sdata
		}
		for i, f := range dataForms {
			n := dataFormSizes[i]
			if n >= 4 && ver < 4 {
				break
			}
			if n == 8 && v.signed {
				break
			}
			if u>>(uint(n)*8-signBit) == 0 && n <= size {
				best = f
				break
			}
		}
		return best, nil
	case ClassFlag:
		if v.u == 0 {
			return dwarf.DW_FORM_flag, nil
		}
		if ver < 4 {
			return dwarf.DW_FORM_flag, nil
		}
		return dwarf.DW_FORM_flag_present, nil
	case ClassExprloc, ClassBlock:
		if v.class == ClassExprloc && ver >= 4 {
			return dwarf.DW_FORM_exprloc, nil
		}
		switch n := len(v.b); {
		case n < 1<<8:
			return dwarf.DW_FORM_block1, nil
		case n < 1<<16:
			return dwarf.DW_FORM_block2, nil
		case v.class == ClassExprloc:
			return dwarf.DW_FORM_block4, nil
		}
		return dwarf.DW_FORM_block, nil
	case ClassReference:
		if v.ref == nil {
			return 0, fmt.Errorf("%v: reference to a nil DIE", name)
		}
		return dwarf.DW_FORM_ref4, nil
	case ClassSecOffset:
		if !fits(v.u, e.enc.Format.OffsetSize()) {
			return 0, fmt.Errorf("%v: section offset %#x does not fit %v", name, v.u, e.enc.Format)
		}
		if ver < 4 {
			if e.enc.Format == dwarf.Format64 {
				return dwarf.DW_FORM_data8, nil
			}
			return dwarf.DW_FORM_data4, nil
		}
		return dwarf.DW_FORM_sec_offset, nil
	}
	return 0, fmt.Errorf("%v: value without a class (use a constructor)", name)
}

func (e *encoder) die(d *DIE, unitHdr int) error {
	if err := e.dieHead(d, unitHdr, len(d.Children) > 0); err != nil {
		return err
	}
	if len(d.Children) > 0 {
		for _, c := range d.Children {
			if err := e.die(c, unitHdr); err != nil {
				return err
			}
		}
		e.info = append(e.info, 0)
	}
	return nil
}

// dieHead records the offset of d and writes its abbreviation code and
// attributes; children says whether children follow.
func (e *encoder) dieHead(d *DIE, unitHdr int, children bool) error {
	if d == nil {
		return errors.New("nil DIE")
	}
	off := uint64(len(e.info) - unitHdr)
	if _, dup := e.offs[d]; dup {
		return fmt.Errorf("DIE (tag %v) appears twice in the tree", d.Tag)
	}
	if e.transient {
		if _, dup := e.local[d]; dup {
			return fmt.Errorf("DIE (tag %v) appears twice in the tree", d.Tag)
		}
		e.local[d] = off
	} else {
		e.offs[d] = off
	}
	if d.Tag == 0 {
		return errors.New("DIE with tag 0")
	}
	// Choose forms and find the abbreviation.
	e.forms = e.forms[:0]
	key := e.key[:0]
	key = dwarf.AppendUleb128(key, uint64(d.Tag))
	if children {
		key = append(key, 1)
	} else {
		key = append(key, 0)
	}
	for i := range d.Attrs {
		a := &d.Attrs[i]
		if a.Name == 0 {
			return fmt.Errorf("DIE (tag %v) attribute %d has name 0", d.Tag, i)
		}
		f, err := e.form(a.Name, &a.Value)
		if err != nil {
			return fmt.Errorf("DIE (tag %v): %v", d.Tag, err)
		}
		e.forms = append(e.forms, f)
		key = dwarf.AppendUleb128(key, uint64(a.Name))
		key = dwarf.AppendUleb128(key, uint64(f))
	}
	key = append(key, 0, 0)
	e.key = key
	// Most DIEs have the abbreviation of the last DIE of their tag (one
	// subprogram after another): compare with it before hashing the key.
	slot := &e.recent[uint(d.Tag)%uint(len(e.recent))]
	code, ok := slot.code, slot.code != 0 && string(slot.key) == string(key)
	if !ok {
		code, ok = e.codes[string(key)]
	}
	if !ok {
		code = uint64(len(e.codes) + 1)
		e.codes[string(key)] = code
		e.abbrev = dwarf.AppendUleb128(e.abbrev, code)
		e.abbrev = append(e.abbrev, key...)
	}
	if slot.code != code {
		slot.key, slot.code = append(slot.key[:0], key...), code
	}
	e.info = dwarf.AppendUleb128(e.info, code)
	osz := e.enc.Format.OffsetSize()
	for i := range d.Attrs {
		v := &d.Attrs[i].Value
		switch f := e.forms[i]; f {
		case dwarf.DW_FORM_string:
			e.info = append(e.info, v.str...)
			e.info = append(e.info, 0)
		case dwarf.DW_FORM_strp:
			off := e.str.Add(v.str)
			if !fits(off, osz) {
				return fmt.Errorf("string offset %#x does not fit %v", off, e.enc.Format)
			}
			e.offsetField(".debug_str")
			e.uint(osz, off)
		case dwarf.DW_FORM_addr:
			e.addrs = append(e.addrs, uint64(len(e.info)))
			e.uint(int(e.enc.AddrSize), v.u)
		case dwarf.DW_FORM_data1, dwarf.DW_FORM_data2, dwarf.DW_FORM_data4, dwarf.DW_FORM_data8:
			n := fixedSize(f)
			u := v.u
			if v.signed {
				u = uint64(v.s)
			}
			if v.class == ClassSecOffset {
				n = osz
				if err := e.secOffset(d.Attrs[i].Name); err != nil {
					return err
				}
			}
			e.uint(n, u)
		case dwarf.DW_FORM_udata:
			e.info = dwarf.AppendUleb128(e.info, v.u)
		case dwarf.DW_FORM_sdata:
			e.info = dwarf.AppendSleb128(e.info, v.s)
		case dwarf.DW_FORM_flag:
			e.info = append(e.info, byte(v.u))
		case dwarf.DW_FORM_flag_present:
		case dwarf.DW_FORM_exprloc, dwarf.DW_FORM_block:
			e.info = dwarf.AppendUleb128(e.info, uint64(len(v.b)))
			e.info = append(e.info, v.b...)
		case dwarf.DW_FORM_block1:
			e.info = append(e.info, byte(len(v.b)))
			e.info = append(e.info, v.b...)
		case dwarf.DW_FORM_block2:
			e.uint(2, uint64(len(v.b)))
			e.info = append(e.info, v.b...)
		case dwarf.DW_FORM_block4:
			e.uint(4, uint64(len(v.b)))
			e.info = append(e.info, v.b...)
		case dwarf.DW_FORM_ref4:
			e.fixups = append(e.fixups, fixup{at: len(e.info), target: v.ref})
			e.uint(4, 0)
		case dwarf.DW_FORM_sec_offset:
			if err := e.secOffset(d.Attrs[i].Name); err != nil {
				return err
			}
			e.uint(osz, v.u)
		}
	}
	return nil
}
