package dwarf

import (
	"fmt"
	"iter"
	"math"
	"math/bits"
	"strings"
)

// FormSpec is one row of the form table (DWARF 5 section 7.5.6, table 7.6,
// and the GNU extensions readers meet): how a value of the form is laid out
// in .debug_info, what it refers to, and the attribute classes it can
// encode. The table is data (dwarf/constants.txt); every DIE reader of
// elfimage decodes attribute values through it, with [Buf.FormValue].
type FormSpec struct {
	Form Form
	Name string // "DW_FORM_data2", as Form.String gives it
	// Version is the DWARF version that introduced the form (2, 4 or 5;
	// 3 added none), or 0 for a vendor extension.
	Version uint8
	Size    SizeClass
	// N is the size in bytes when Size is SizeFixed (0 for
	// DW_FORM_flag_present, 16 for DW_FORM_data16).
	N       uint8
	Target  FormTarget
	Classes ClassSet
}

// Spec returns the table's row for f, and false when f is not a form the
// table knows (a reader cannot tell the size of its values, so it cannot
// go on). Cost: a comparison and an index, no allocation.
func (f Form) Spec() (FormSpec, bool) {
	if s := formSpec(f); s != nil {
		return *s, true
	}
	return FormSpec{}, false
}

// Forms yields every row of the form table in code order.
func Forms() iter.Seq[FormSpec] {
	return func(yield func(FormSpec) bool) {
		for _, run := range formRuns {
			for _, s := range run {
				if s.Size != SizeUnknown && !yield(s) {
					return
				}
			}
		}
	}
}

// FixedSize returns the size in bytes of every value of the form in a unit
// of encoding enc, or -1 when the size depends on the value (LEB128,
// blocks, strings, DW_FORM_indirect). DW_FORM_implicit_const and
// DW_FORM_flag_present take 0 bytes.
func (s FormSpec) FixedSize(enc Encoding) int {
	switch s.Size {
	case SizeFixed:
		return int(s.N)
	case SizeAddr:
		return int(enc.AddrSize)
	case SizeOffset:
		return enc.Format.OffsetSize()
	case SizeRefAddr:
		if enc.Version == 2 {
			return int(enc.AddrSize)
		}
		return enc.Format.OffsetSize()
	case SizeImplicit:
		return 0
	}
	return -1
}

// SizeClass says how the bytes of a form's value are laid out (DWARF 5
// section 7.5.5 describes each class's encodings).
type SizeClass uint8

// Size classes.
const (
	SizeUnknown  SizeClass = iota // not a known form
	SizeFixed                     // FormSpec.N bytes
	SizeAddr                      // address_size bytes of the unit header
	SizeOffset                    // 4 bytes in the 32-bit DWARF format, 8 in the 64-bit (section 7.4)
	SizeRefAddr                   // address_size bytes in version 2, as SizeOffset from version 3 (section 7.4)
	SizeUleb                      // an unsigned LEB128 number
	SizeSleb                      // a signed LEB128 number
	SizeBlock1                    // a 1-byte length, then that many bytes
	SizeBlock2                    // a 2-byte length, then that many bytes
	SizeBlock4                    // a 4-byte length, then that many bytes
	SizeBlock                     // an unsigned LEB128 length, then that many bytes
	SizeString                    // bytes up to and including a NUL
	SizeImplicit                  // no bytes: the value is in the abbreviation (section 7.5.3)
	SizeIndirect                  // an unsigned LEB128 form code, then a value of that form (section 7.5.3)
)

var sizeNames = [...]string{"unknown", "fixed", "addr", "offset", "ref_addr", "uleb", "sleb", "block1", "block2", "block4", "block", "string", "implicit", "indirect"}

// String returns the size class's name in dwarf/constants.txt.
func (c SizeClass) String() string {
	if int(c) < len(sizeNames) {
		return sizeNames[c]
	}
	return fmt.Sprintf("SizeClass(%d)", uint8(c))
}

// FormTarget says what a form's value refers to, and so where a reader
// resolves it (DWARF 5 section 7.5.5).
type FormTarget uint8

// Targets.
const (
	TargetNone       FormTarget = iota // the value is the datum itself
	TargetUnit                         // an offset from the start of the unit header (ref1..ref8, ref_udata)
	TargetInfo                         // an offset in .debug_info (ref_addr)
	TargetSignature                    // the 8-byte signature of a type unit (ref_sig8)
	TargetStr                          // an offset in .debug_str (strp)
	TargetLineStr                      // an offset in .debug_line_str (line_strp)
	TargetStrOffsets                   // an index into the unit's .debug_str_offsets array (strx*)
	TargetAddr                         // an index into the unit's .debug_addr array (addrx*)
	TargetLocLists                     // an index into the unit's .debug_loclists offset array (loclistx)
	TargetRngLists                     // an index into the unit's .debug_rnglists offset array (rnglistx)
	TargetSection                      // an offset in the section the attribute's class names (sec_offset)
	TargetSupInfo                      // an offset in the supplementary object file's .debug_info (ref_sup4/8, GNU_ref_alt)
	TargetSupStr                       // an offset in the supplementary object file's .debug_str (strp_sup, GNU_strp_alt)
)

var targetNames = [...]string{"-", "unit", "info", "signature", "str", "line_str", "str_offsets", "addr", "loclists", "rnglists", "section", "sup_info", "sup_str"}

// String returns the target's name in dwarf/constants.txt.
func (t FormTarget) String() string {
	if int(t) < len(targetNames) {
		return targetNames[t]
	}
	return fmt.Sprintf("FormTarget(%d)", uint8(t))
}

// ClassSet is a set of attribute classes (DWARF 5 section 7.5.5, table
// 7.5.5). A form may belong to several (DW_FORM_sec_offset to eight); an
// attribute's entry in table 7.5 says which one it means.
type ClassSet uint16

// Attribute classes, in the standard's spelling.
const (
	ClassAddress ClassSet = 1 << iota
	ClassAddrptr
	ClassBlock
	ClassConstant
	ClassExprloc
	ClassFlag
	ClassLineptr
	ClassLoclist
	ClassLoclistsptr
	ClassMacptr
	ClassReference
	ClassRnglist
	ClassRnglistsptr
	ClassString
	ClassStroffsetsptr
)

var classNames = [...]string{"address", "addrptr", "block", "constant", "exprloc", "flag", "lineptr", "loclist", "loclistsptr", "macptr", "reference", "rnglist", "rnglistsptr", "string", "stroffsetsptr"}

// String returns the classes' names joined by commas, as in
// dwarf/constants.txt ("-" for the empty set).
func (c ClassSet) String() string {
	if c == 0 {
		return "-"
	}
	var b strings.Builder
	for c != 0 {
		i := bits.TrailingZeros16(uint16(c))
		c &^= 1 << i
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if i < len(classNames) {
			b.WriteString(classNames[i])
		} else {
			fmt.Fprintf(&b, "ClassSet(1<<%d)", i)
		}
	}
	return b.String()
}

// Indirect follows DW_FORM_indirect (DWARF 5 section 7.5.3): while f is
// DW_FORM_indirect it reads a form code (unsigned LEB128) at the cursor,
// and it returns the form of the value that follows. A code above 0xffff,
// or DW_FORM_implicit_const (whose value can only be in an abbreviation),
// fails the cursor at the first code, field "DW_FORM_indirect". Each code
// takes a byte at least, so a chain ends with the input. No allocation
// but the error.
func (b *Buf) Indirect(f Form) Form {
	at := b.Off()
	for f == DW_FORM_indirect && b.err == nil {
		v := b.Uleb("DW_FORM_indirect")
		if v > math.MaxUint16 {
			b.FailAt(at, "DW_FORM_indirect", fmt.Sprintf("form %#x out of range", v))
			return 0
		}
		f = Form(v)
		if f == DW_FORM_implicit_const {
			b.FailAt(at, "DW_FORM_indirect", "implicit_const through indirect")
			return 0
		}
	}
	return f
}

// FormValue reads one value of the form s at the cursor, in a unit of
// encoding enc (its version, offset format and address size decide the
// sizes of SizeAddr, SizeOffset and SizeRefAddr), and returns:
//
//   - v, the integer, for fixed sizes up to 8 bytes (in the cursor's byte
//     order), addresses, offsets and LEB128 numbers (an SLEB128 as its
//     two's complement; use int64(v));
//   - p, the bytes, a subslice of the section, for blocks (v is then the
//     length), fixed sizes above 8 bytes (DW_FORM_data16) and strings
//     (without the NUL);
//   - nothing for SizeImplicit: the value is in the abbreviation.
//
// The value is raw: references stay relative to their target (the unit, a
// section, an index) as [FormSpec.Target] says. field names the value in
// errors, which are the cursor's: a truncated value, an unknown form
// (s.Size SizeUnknown), or DW_FORM_indirect (resolve it first with
// [Buf.Indirect]). Cost: the bytes read, no allocation.
func (b *Buf) FormValue(s *FormSpec, enc Encoding, field string) (v uint64, p []byte) {
	switch s.Size {
	case SizeFixed:
		switch n := s.N; n {
		case 0:
		case 1:
			v = uint64(b.U8(field))
		case 2:
			v = uint64(b.U16(field))
		case 4:
			v = uint64(b.U32(field))
		case 8:
			v = b.U64(field)
		default:
			p = b.Bytes(uint64(n), field)
			if n < 8 && len(p) == int(n) {
				v, p = b.uintN(p), nil
			}
		}
	case SizeAddr:
		v = b.Addr(enc.AddrSize, field)
	case SizeOffset:
		v = b.Offset(enc.Format, field)
	case SizeRefAddr:
		if enc.Version == 2 {
			v = b.Addr(enc.AddrSize, field)
		} else {
			v = b.Offset(enc.Format, field)
		}
	case SizeUleb:
		v = b.Uleb(field)
	case SizeSleb:
		v = uint64(b.Sleb(field))
	case SizeBlock1:
		v = uint64(b.U8(field))
		p = b.Bytes(v, field)
	case SizeBlock2:
		v = uint64(b.U16(field))
		p = b.Bytes(v, field)
	case SizeBlock4:
		v = uint64(b.U32(field))
		p = b.Bytes(v, field)
	case SizeBlock:
		v = b.Uleb(field)
		p = b.Bytes(v, field)
	case SizeString:
		p = b.CString(field)
	case SizeImplicit:
	case SizeIndirect:
		b.Fail(field, "DW_FORM_indirect not resolved")
	default:
		b.Fail(field, fmt.Sprintf("unknown form %v", s.Form))
	}
	if b.err != nil {
		return 0, nil
	}
	return v, p
}

// uintN is p (1 to 7 bytes) as an unsigned integer in the cursor's byte
// order.
func (b *Buf) uintN(p []byte) uint64 {
	var v uint64
	if b.Order.Uint16([]byte{0, 1}) == 1 { // big-endian
		for _, c := range p {
			v = v<<8 | uint64(c)
		}
		return v
	}
	for i := len(p) - 1; i >= 0; i-- {
		v = v<<8 | uint64(p[i])
	}
	return v
}
