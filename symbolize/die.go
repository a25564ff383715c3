package symbolize

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/info"
)

const (
	secInfo       = ".debug_info"
	secAbbrev     = ".debug_abbrev"
	atGNUAddrBase = dwarf.Attr(0x2133) // DW_AT_GNU_addr_base
	// The GNU split-DWARF extension for DWARF 4 (gcc -gdwarf-4
	// -gsplit-dwarf), what DWARF 5 standardised as skeleton units.
	atGNUDwoName    = dwarf.Attr(0x2130) // DW_AT_GNU_dwo_name
	atGNUDwoID      = dwarf.Attr(0x2131) // DW_AT_GNU_dwo_id
	atGNURangesBase = dwarf.Attr(0x2132) // DW_AT_GNU_ranges_base
	maxNameHops     = 8                  // specification/abstract_origin links followed for a name
)

// attrSpec is one attribute specification of an abbreviation, with what
// the form table says about its form, looked up once per abbreviation.
type attrSpec struct {
	attr     dwarf.Attr
	form     dwarf.Form
	size     int8 // bytes of a fixed-size form, -1 when variable
	want     bool // readAttrs keeps this attribute (wanted)
	kind     valueKind
	implicit int64
	fs       dwarf.FormSpec // the form's row (Size SizeUnknown when unknown)
}

// valueKind is what symbolization makes of a value, from the form table.
type valueKind uint8

const (
	kindOther     valueKind = iota // flags, blocks, data16, signatures, supplementary files, loclistx
	kindConst                      // an integer constant (v, or the abbreviation's implicit_const)
	kindAddr                       // an address
	kindAddrx                      // an index into .debug_addr
	kindStr                        // a string: offset or index (DW_FORM_string: its .debug_info offset)
	kindUnitRef                    // a reference relative to the unit header
	kindInfoRef                    // a .debug_info offset
	kindSecOffset                  // an offset into another section
	kindRnglistx                   // an index into the .debug_rnglists offsets
)

// kindOf is the kind of a value of form fs for attribute attr in units of
// encoding enc.
func kindOf(fs *dwarf.FormSpec, attr dwarf.Attr, enc dwarf.Encoding) valueKind {
	switch fs.Target {
	case dwarf.TargetNone:
		switch {
		case fs.Classes&dwarf.ClassConstant != 0 && (fs.Size != dwarf.SizeFixed || fs.N <= 8):
			if enc.Version < 4 && (fs.Form == dwarf.DW_FORM_data4 || fs.Form == dwarf.DW_FORM_data8) &&
				(attr == dwarf.DW_AT_ranges || attr == dwarf.DW_AT_stmt_list) {
				return kindSecOffset // DWARF 3 section 7.5.4: a lineptr or rangelistptr
			}
			return kindConst
		case fs.Classes&dwarf.ClassAddress != 0:
			return kindAddr
		case fs.Size == dwarf.SizeString:
			return kindStr
		}
	case dwarf.TargetAddr:
		return kindAddrx
	case dwarf.TargetStr, dwarf.TargetLineStr, dwarf.TargetStrOffsets:
		return kindStr
	case dwarf.TargetUnit:
		return kindUnitRef
	case dwarf.TargetInfo:
		return kindInfoRef
	case dwarf.TargetSection:
		return kindSecOffset
	case dwarf.TargetRngLists:
		return kindRnglistx
	}
	return kindOther
}

// wanted reports whether readAttrs keeps attribute a.
func wanted(a dwarf.Attr) bool {
	switch a {
	case dwarf.DW_AT_low_pc, dwarf.DW_AT_high_pc, dwarf.DW_AT_ranges, dwarf.DW_AT_name,
		dwarf.DW_AT_linkage_name, dwarf.DW_AT_MIPS_linkage_name, dwarf.DW_AT_specification,
		dwarf.DW_AT_abstract_origin, dwarf.DW_AT_call_file, dwarf.DW_AT_call_line,
		dwarf.DW_AT_call_column, dwarf.DW_AT_stmt_list, dwarf.DW_AT_comp_dir, dwarf.DW_AT_dwo_name,
		atGNUDwoName, atGNUDwoID, atGNURangesBase:
		return true
	}
	return false
}

// abbrev is one abbreviation declaration (DWARF 5 section 7.5.3).
type abbrev struct {
	tag      dwarf.Tag
	children bool
	fixed    int // total size when every form has a fixed size, else -1
	specs    []attrSpec
	// fast, when set (fixedOK), lists the kept attributes of a DIE whose
	// forms all have fixed sizes, at their offsets from the DIE's first
	// attribute: readAttrs then reads them in place, skipping the rest
	// unread.
	fast    []fastAttr
	fixedOK bool
	// skip, when skipOK, skips a DIE of variable size in place (see
	// skipInPlace): every form has a fixed size or one of the variable
	// sizes it knows.
	skip   []skipStep
	skipOK bool
	// mixed, when mixedOK, lists the kept attributes of a DIE of
	// variable size, placed by skip steps (planMixed): readAttrs reads
	// them in place as for fast.
	mixed   []fastAttr
	mixedOK bool
}

// maxMixedSteps is the most skip steps of an abbreviation whose DIEs
// readAttrs reads in place.
const maxMixedSteps = 16

// planMixed sets a.mixed and a.mixedOK for an abbreviation of variable
// size that planSkip planned, in at most maxMixedSteps steps, when every
// kept attribute has a fixed-size form that planFast accepts or is a
// DW_FORM_string name.
func planMixed(a *abbrev, all *[]fastAttr) {
	if !a.skipOK || len(a.skip) > maxMixedSteps {
		return
	}
	start := len(*all)
	mixed := *all
	defer func() { *all = mixed }()
	step, off := 0, 0
	for i := range a.specs {
		s := &a.specs[i]
		if s.size >= 0 {
			if s.want {
				switch s.kind {
				case kindConst, kindAddr, kindStr, kindUnitRef, kindInfoRef, kindSecOffset:
					if s.size > 8 {
						mixed = mixed[:start]
						return
					}
					f := fastAttr{off: int32(off), size: s.size, kind: s.kind, attr: s.attr, form: s.form, step: int16(step)}
					if s.fs.Size == dwarf.SizeImplicit {
						f.implicit = s.implicit
					}
					f.planSlot()
					mixed = append(mixed, f)
				case kindOther:
				default:
					mixed = mixed[:start]
					return
				}
			}
			off += int(s.size)
			continue
		}
		if s.want {
			switch {
			case s.kind == kindStr && s.fs.Size == dwarf.SizeString:
				f := fastAttr{kind: kindStr, attr: s.attr, form: s.form, step: int16(step), str: true}
				f.planSlot()
				mixed = append(mixed, f)
			case s.kind == kindOther:
			default:
				mixed = mixed[:start]
				return
			}
		}
		step, off = step+1, 0
	}
	a.mixed, a.mixedOK = mixed[start:len(mixed):len(mixed)], true
}

// skipStep is one step of skipping a DIE's values in place: fixed bytes
// (the fixed-size values since the previous step), then one value whose
// size is in its bytes, of size class op (SizeImplicit: none, the last
// step).
type skipStep struct {
	fixed uint32
	op    dwarf.SizeClass
}

// planSkip sets a.skip and a.skipOK for an abbreviation of variable size
// whose forms all have fixed sizes or LEB128, block or string values.
func planSkip(a *abbrev, all *[]skipStep) {
	if a.fixed >= 0 {
		return
	}
	start := len(*all)
	steps := *all
	defer func() { *all = steps }()
	acc := uint32(0)
	for i := range a.specs {
		sp := &a.specs[i]
		if sp.size >= 0 {
			acc += uint32(sp.size)
			continue
		}
		switch sp.fs.Size {
		case dwarf.SizeUleb, dwarf.SizeSleb, dwarf.SizeBlock1, dwarf.SizeBlock2, dwarf.SizeBlock4, dwarf.SizeBlock, dwarf.SizeString:
			steps = append(steps, skipStep{acc, sp.fs.Size})
			acc = 0
		default: // indirect, unknown
			steps = steps[:start]
			return
		}
	}
	steps = append(steps, skipStep{acc, dwarf.SizeImplicit})
	a.skip, a.skipOK = steps[start:len(steps):len(steps)], true
}

// skipInPlace returns the offset after the values of a DIE that starts at
// pos of data (values up to end), following steps, or false when they
// are not all there, or a LEB128 number runs over 10 bytes (the caller
// then skips value by value, which reports the error: skipInPlace never
// accepts what that path would fail).
//
// starts, when not nil, gets the offset at which each step's fixed bytes
// start (at most maxMixedSteps steps then).
func skipInPlace(data []byte, pos, end int, steps []skipStep, le bool, starts *[maxMixedSteps]int) (int, bool) {
	if end > len(data) || pos > end || starts != nil && len(steps) > maxMixedSteps {
		return 0, false
	}
	for k, st := range steps {
		if starts != nil {
			starts[k] = pos
		}
		if uint64(st.fixed) > uint64(end-pos) {
			return 0, false
		}
		pos += int(st.fixed)
		var n uint64 // bytes of a block's contents
		switch st.op {
		case dwarf.SizeImplicit:
			return pos, true
		case dwarf.SizeUleb, dwarf.SizeSleb, dwarf.SizeBlock:
			var v uint64
			i := 0
			for ; ; i++ {
				if i == 10 || pos+i >= end {
					return 0, false
				}
				c := data[pos+i]
				v |= uint64(c&0x7f) << (7 * i)
				if c < 0x80 {
					break
				}
			}
			pos += i + 1
			if st.op == dwarf.SizeBlock {
				n = v
			}
		case dwarf.SizeBlock1:
			if pos >= end {
				return 0, false
			}
			n, pos = uint64(data[pos]), pos+1
		case dwarf.SizeBlock2, dwarf.SizeBlock4:
			w := 2
			if st.op == dwarf.SizeBlock4 {
				w = 4
			}
			if end-pos < w {
				return 0, false
			}
			n, pos = fixedUint(data[pos:pos+w], le), pos+w
		case dwarf.SizeString:
			i := bytes.IndexByte(data[pos:end], 0)
			if i < 0 {
				return 0, false
			}
			pos += i + 1
		default:
			return 0, false
		}
		if n > uint64(end-pos) || n > 1<<31-1 {
			return 0, false
		}
		pos += int(n)
	}
	return 0, false // no final step
}

// slowAttrs turns readAttrs' in-place reading of fixed-size DIEs off
// (tests compare both paths).
var slowAttrs = false

// fastAttr is one kept attribute of a fixed-size abbreviation: size bytes
// at off (0 bytes: the implicit constant).
type fastAttr struct {
	off      int32
	size     int8
	kind     valueKind
	attr     dwarf.Attr
	form     dwarf.Form
	implicit int64
	// For a DIE of variable size (abbrev.mixed): off is from the start
	// of skip step step's fixed bytes; str marks a DW_FORM_string value,
	// the step's variable-size one.
	step int16
	str  bool
	// slot is where attrs.put stores the value (slotOf the attribute
	// and the class value gives), planned with the rest.
	slot slot
	// op is how readPlanned reads it (planOp), for the byte order of
	// the table's units.
	op uint8
}

// planSlot sets f.slot from f's attribute and kind.
func (f *fastAttr) planSlot() {
	class := byte('s') // a DW_FORM_string name of abbrev.mixed
	if !f.str {
		_, class = f.value(0, 0)
	}
	f.slot = slotOf(f.attr, class)
}

// Load plans of fastAttr (op): how readPlanned reads the value.
const (
	opGeneric  = iota // loadSlow
	opLE1             // one byte
	opLE2             // little-endian, 2 bytes
	opLE4             // little-endian, 4 bytes
	opLE8             // little-endian, 8 bytes
	opLERef4          // little-endian, 4 bytes, plus the unit's offset (DW_FORM_ref4)
	opImplicit        // the abbreviation's DW_FORM_implicit_const
)

// planOp sets f.op for values read in byte order le.
func (f *fastAttr) planOp(le bool) {
	f.op = opGeneric
	if f.kind == kindConst && f.size == 0 && !f.str {
		f.op = opImplicit
		return
	}
	if !le || f.str {
		return
	}
	switch {
	case f.kind == kindUnitRef && f.size == 4:
		f.op = opLERef4
	case f.kind == kindUnitRef:
	case f.size == 1:
		f.op = opLE1
	case f.size == 2:
		f.op = opLE2
	case f.size == 4:
		f.op = opLE4
	case f.size == 8:
		f.op = opLE8
	}
}

// loadSlow returns the value of f (not a str one) in place in p, whose
// byte f.off is the value's first (value's result for the bytes there),
// for the plans that readPlanned does not read inline (opGeneric: a
// big-endian file, sizes other than 1, 2, 4 and 8).
func (f *fastAttr) loadSlow(p []byte, le bool, unitOffset uint64) uint64 {
	var raw uint64
	if le {
		switch f.size {
		case 0:
		case 1:
			raw = uint64(p[f.off])
		case 2:
			raw = uint64(binary.LittleEndian.Uint16(p[f.off:]))
		case 4:
			raw = uint64(binary.LittleEndian.Uint32(p[f.off:]))
		case 8:
			raw = binary.LittleEndian.Uint64(p[f.off:])
		default:
			raw = fixedUint(p[f.off:f.off+int32(f.size)], le)
		}
	} else {
		raw = fixedUint(p[f.off:f.off+int32(f.size)], le)
	}
	switch f.kind {
	case kindConst:
		if f.size == 0 {
			return uint64(f.implicit)
		}
	case kindUnitRef:
		return unitOffset + raw
	}
	return raw
}

// value returns the attribute's value and its class ('c' constant, 'a'
// address, 's' string offset, 'r' reference, 'o' section offset) from raw,
// the bytes read at its offset: an implicit constant's own value, a
// unit-relative reference made relative to the section (unitOffset, the
// unit's offset in it).
func (f *fastAttr) value(raw, unitOffset uint64) (uint64, byte) {
	switch f.kind {
	case kindConst:
		if f.size == 0 {
			return uint64(f.implicit), 'c'
		}
		return raw, 'c'
	case kindAddr:
		return raw, 'a'
	case kindStr:
		return raw, 's'
	case kindUnitRef:
		return unitOffset + raw, 'r'
	case kindInfoRef:
		return raw, 'r'
	case kindSecOffset:
		return raw, 'o'
	}
	return raw, 0
}

// planFast sets a.fast and a.fixedOK when every form of a has a fixed
// size and every kept attribute is read without another section (no
// addrx, rnglistx or indirect forms).
func planFast(a *abbrev, all *[]fastAttr) {
	if a.fixed < 0 {
		return
	}
	start := len(*all)
	fast := *all
	defer func() { *all = fast }()
	off := 0
	for i := range a.specs {
		s := &a.specs[i]
		if s.want {
			switch s.kind {
			case kindConst, kindAddr, kindStr, kindUnitRef, kindInfoRef, kindSecOffset:
				if s.size > 8 || s.fs.Size == dwarf.SizeString {
					fast = fast[:start]
					return
				}
				f := fastAttr{off: int32(off), size: s.size, kind: s.kind, attr: s.attr, form: s.form}
				if s.fs.Size == dwarf.SizeImplicit {
					f.implicit = s.implicit
				}
				f.planSlot()
				fast = append(fast, f)
			case kindOther: // nothing kept (class 0)
			default:
				fast = fast[:start]
				return
			}
		}
		off += int(s.size)
	}
	a.fast, a.fixedOK = fast[start:len(fast):len(fast)], true
}

// fixedUint is p (at most 8 bytes) as an unsigned integer, little-endian
// when le, else big-endian.
func fixedUint(p []byte, le bool) uint64 {
	switch len(p) {
	case 1:
		return uint64(p[0])
	case 2:
		if le {
			return uint64(binary.LittleEndian.Uint16(p))
		}
		return uint64(binary.BigEndian.Uint16(p))
	case 4:
		if le {
			return uint64(binary.LittleEndian.Uint32(p))
		}
		return uint64(binary.BigEndian.Uint32(p))
	case 8:
		if le {
			return binary.LittleEndian.Uint64(p)
		}
		return binary.BigEndian.Uint64(p)
	}
	var v uint64
	for j := range p {
		if le {
			v |= uint64(p[j]) << (8 * j)
		} else {
			v = v<<8 | uint64(p[j])
		}
	}
	return v
}

// abbrevTable maps codes to declarations.
type abbrevTable struct {
	dense  []abbrev // dense[code-1]
	sparse map[uint64]*abbrev
}

func (t *abbrevTable) lookup(code uint64) *abbrev {
	if code-1 < uint64(len(t.dense)) {
		return &t.dense[code-1]
	}
	return t.sparse[code]
}

// fixedSize is the size in bytes of every value of form fs in units of
// encoding enc, or -1 when it varies (or the form is unknown, or
// DW_FORM_indirect).
func fixedSize(fs *dwarf.FormSpec, enc dwarf.Encoding) int8 {
	if n := fs.FixedSize(enc); n <= 127 {
		return int8(n)
	}
	return -1
}

// convertAbbrev turns an abbreviation table decoded (and checked) by
// dwarf/info into one for units of encoding enc and byte order le (little
// endian when set): each declaration gets the
// form sizes and kept attributes that readAttrs and build's skipping use.
// It returns the table and a lower bound of the bytes the table takes in
// .debug_abbrev (three per declaration, two per attribute specification).
func convertAbbrev(it *info.AbbrevTable, enc dwarf.Encoding, le bool) (*abbrevTable, uint64) {
	count, nspecs := 0, 0
	for _, a := range it.All() {
		count, nspecs = count+1, nspecs+len(a.Specs)
	}
	t := &abbrevTable{dense: make([]abbrev, 0, count)}
	all := make([]attrSpec, 0, nspecs) // one backing array for the table
	fastAll := make([]fastAttr, 0, nspecs)
	// A declaration has at most a skip step per specification and one
	// more.
	skipAll := make([]skipStep, 0, nspecs+count)
	mixedAll := make([]fastAttr, 0, nspecs)
	for code, ia := range it.All() {
		a := abbrev{tag: ia.Tag, children: ia.Children}
		start := len(all)
		for _, is := range ia.Specs {
			s := attrSpec{attr: is.Attr, form: is.Form, implicit: is.Implicit, want: wanted(is.Attr)}
			s.fs, _ = is.Form.Spec()
			s.size, s.kind = fixedSize(&s.fs, enc), kindOf(&s.fs, s.attr, enc)
			all = append(all, s)
			if s.size < 0 {
				a.fixed = -1
			} else if a.fixed >= 0 {
				a.fixed += int(s.size)
			}
		}
		a.specs = all[start:len(all):len(all)]
		planFast(&a, &fastAll)
		planSkip(&a, &skipAll)
		planMixed(&a, &mixedAll)
		for i := range a.fast {
			a.fast[i].planOp(le)
		}
		for i := range a.mixed {
			a.mixed[i].planOp(le)
		}
		if code == uint64(len(t.dense))+1 {
			t.dense = append(t.dense, a)
		} else {
			if t.sparse == nil {
				t.sparse = map[uint64]*abbrev{}
			}
			t.sparse[code] = &a
		}
	}
	return t, uint64(3*count + 2*nspecs)
}

// attrs are the attributes of a DIE that symbolization reads.
type attrs struct {
	lowPC, highPC   uint64
	hasLow, hasHigh bool
	highIsLen       bool
	ranges          uint64
	hasRanges       bool
	// nameRefs: name, linkage (strRef) and spec, origin (absolute
	// .debug_info offsets; noRef when absent), embedded so that a
	// subroutine's references are passed by pointer, not copied.
	nameRefs
	callFile          uint64
	callLine, callCol uint64
	stmtList          uint64
	hasStmt           bool
	compDir           strRef
	dwoName           strRef // DW_AT_dwo_name (or DW_AT_GNU_dwo_name) of a skeleton unit
	dwoID             uint64 // DW_AT_GNU_dwo_id (DWARF 5 has it in the header)
	hasDwoID          bool
	rangesBase        uint64 // DW_AT_GNU_ranges_base
}

const noRef = ^uint64(0)

// strRef is an unresolved string attribute: a form and an offset or
// index (for DW_FORM_string, the string's .debug_info offset).
type strRef struct {
	form dwarf.Form // 0 when absent
	val  uint64
}

// readAttrs decodes the attributes of abbreviation a at b's cursor into
// out, resolving address indexes and rnglistx (the strings stay
// references). Unknown forms fail b. b reads d's .debug_info, in its
// byte order.
func (d *dwarfData) readAttrs(b *dwarf.Buf, u *unit, a *abbrev, out *attrs) {
	if b.Err() == nil {
		if end, ok := d.readPlanned(b.Data(), int(b.Off()), int(b.End()), u, a, out); ok {
			b.Seek(uint64(end), "attribute value")
			return
		}
	}
	*out = attrs{nameRefs: nameRefs{spec: noRef, origin: noRef}}
	enc := u.hdr.Enc
	for i := range a.specs {
		s := &a.specs[i]
		if !s.want {
			if s.size >= 0 {
				b.Skip(uint64(s.size), "attribute value")
			} else {
				skipForm(b, s, enc)
			}
			continue
		}
		at := b.Off()
		form, fs, kind := s.form, &s.fs, s.kind
		if form == dwarf.DW_FORM_indirect {
			form = b.Indirect(form)
			ifs, _ := form.Spec()
			fs, kind = &ifs, kindOf(&ifs, s.attr, enc)
		}
		if fs.Size == dwarf.SizeUnknown {
			if b.Err() == nil {
				b.FailAt(at, "attribute form", fmt.Sprintf("unknown form %v", form))
			}
			return
		}
		start := b.Off()
		v, _ := b.FormValue(fs, enc, fs.Name)
		var class byte // c constant, a address, s string, r reference, o section offset, 0 other
		switch kind {
		case kindConst:
			class = 'c'
			if fs.Size == dwarf.SizeImplicit {
				v = uint64(s.implicit)
			}
		case kindAddr:
			class = 'a'
		case kindAddrx:
			v, class = d.addrx(b, u, v, at), 'a'
		case kindStr:
			class = 's'
			if fs.Size == dwarf.SizeString {
				v = start
			}
		case kindUnitRef:
			v, class = u.hdr.Offset+v, 'r'
		case kindInfoRef:
			class = 'r'
		case kindSecOffset:
			class = 'o'
		case kindRnglistx:
			v, class = d.rnglistx(b, u, v, at), 'o'
		}
		if b.Err() != nil {
			return
		}
		out.set(s.attr, class, form, v)
	}
}

// readPlanned is readAttrs in place for a planned abbreviation (fixedOK
// or mixedOK) whose values, from pos of data, all end by end: it returns
// the offset after them and true. Otherwise (an abbreviation without a
// plan, values past end, slowAttrs) it returns false and out is
// unspecified: readAttrs then reads value by value, and reports what
// fails.
func (d *dwarfData) readPlanned(data []byte, pos, end int, u *unit, a *abbrev, out *attrs) (int, bool) {
	if slowAttrs || end > len(data) || pos > end {
		return 0, false
	}
	le := d.le
	if a.fixedOK {
		// Every value at a known offset: read the kept ones in place.
		if a.fixed > end-pos {
			return 0, false
		}
		p := data[pos : pos+a.fixed]
		*out = attrs{nameRefs: nameRefs{spec: noRef, origin: noRef}}
		for i := range a.fast {
			f := &a.fast[i]
			var v uint64
			switch f.op { // the load plan (loadSlow for the rest)
			case opLE1:
				v = uint64(p[f.off])
			case opLE2:
				v = uint64(binary.LittleEndian.Uint16(p[f.off:]))
			case opLE4:
				v = uint64(binary.LittleEndian.Uint32(p[f.off:]))
			case opLERef4:
				v = u.hdr.Offset + uint64(binary.LittleEndian.Uint32(p[f.off:]))
			case opLE8:
				v = binary.LittleEndian.Uint64(p[f.off:])
			case opImplicit:
				v = uint64(f.implicit)
			default:
				v = f.loadSlow(p, le, u.hdr.Offset)
			}
			out.put(f.slot, f.form, v)
		}
		return pos + a.fixed, true
	}
	if !a.mixedOK {
		return 0, false
	}
	var starts [maxMixedSteps]int
	next, ok := skipInPlace(data, pos, end, a.skip, le, &starts)
	if !ok {
		return 0, false
	}
	*out = attrs{nameRefs: nameRefs{spec: noRef, origin: noRef}}
	for i := range a.mixed {
		f := &a.mixed[i]
		at := starts[f.step]
		if f.str {
			// The step's string, after its fixed bytes.
			out.put(f.slot, f.form, uint64(at+int(a.skip[f.step].fixed)))
			continue
		}
		p := data[at:]
		var v uint64
		switch f.op { // the load plan (loadSlow for the rest)
		case opLE1:
			v = uint64(p[f.off])
		case opLE2:
			v = uint64(binary.LittleEndian.Uint16(p[f.off:]))
		case opLE4:
			v = uint64(binary.LittleEndian.Uint32(p[f.off:]))
		case opLERef4:
			v = u.hdr.Offset + uint64(binary.LittleEndian.Uint32(p[f.off:]))
		case opLE8:
			v = binary.LittleEndian.Uint64(p[f.off:])
		case opImplicit:
			v = uint64(f.implicit)
		default:
			v = f.loadSlow(p, le, u.hdr.Offset)
		}
		out.put(f.slot, f.form, v)
	}
	return next, true
}

// set records the value v of attribute attr, of class class (c constant,
// a address, s string, r reference, o section offset, 0 other) and form
// form, when it is one symbolization reads in that class.
func (out *attrs) set(attr dwarf.Attr, class byte, form dwarf.Form, v uint64) {
	out.put(slotOf(attr, class), form, v)
}

// slot is a field of attrs that set fills, chosen by attribute and
// class (slotOf), so that readAttrs' planned attributes choose it once
// per abbreviation instead of once per value.
type slot uint8

const (
	slotNone       slot = iota // not read
	slotLow                    // DW_AT_low_pc, an address
	slotHigh                   // DW_AT_high_pc, an address
	slotHighLen                // DW_AT_high_pc, a constant (a length)
	slotRanges                 // DW_AT_ranges
	slotStmt                   // DW_AT_stmt_list
	slotDwoID                  // DW_AT_GNU_dwo_id
	slotRangesBase             // DW_AT_GNU_ranges_base
	slotName                   // DW_AT_name
	slotCompDir                // DW_AT_comp_dir
	slotDwoName                // DW_AT_dwo_name, DW_AT_GNU_dwo_name
	slotLinkage                // DW_AT_linkage_name, DW_AT_MIPS_linkage_name
	slotSpec                   // DW_AT_specification
	slotOrigin                 // DW_AT_abstract_origin
	slotCallFile               // DW_AT_call_file
	slotCallLine               // DW_AT_call_line
	slotCallCol                // DW_AT_call_column
)

// slotOf is the field of attrs that a value of attribute attr and class
// class fills, slotNone for one symbolization does not read.
func slotOf(attr dwarf.Attr, class byte) slot {
	switch attr {
	case dwarf.DW_AT_low_pc:
		if class == 'a' {
			return slotLow
		}
	case dwarf.DW_AT_high_pc:
		switch class {
		case 'a':
			return slotHigh
		case 'c':
			return slotHighLen
		}
	case dwarf.DW_AT_ranges:
		if class == 'o' {
			return slotRanges
		}
	case dwarf.DW_AT_stmt_list:
		if class == 'o' || class == 'c' {
			return slotStmt
		}
	case atGNUDwoID:
		if class == 'c' {
			return slotDwoID
		}
	case atGNURangesBase:
		if class == 'o' || class == 'c' {
			return slotRangesBase
		}
	case dwarf.DW_AT_name, dwarf.DW_AT_linkage_name, dwarf.DW_AT_MIPS_linkage_name, dwarf.DW_AT_comp_dir, dwarf.DW_AT_dwo_name, atGNUDwoName:
		if class != 's' {
			return slotNone
		}
		switch attr {
		case dwarf.DW_AT_name:
			return slotName
		case dwarf.DW_AT_comp_dir:
			return slotCompDir
		case dwarf.DW_AT_dwo_name, atGNUDwoName:
			return slotDwoName
		default:
			return slotLinkage
		}
	case dwarf.DW_AT_specification:
		if class == 'r' {
			return slotSpec
		}
	case dwarf.DW_AT_abstract_origin:
		if class == 'r' {
			return slotOrigin
		}
	case dwarf.DW_AT_call_file:
		if class == 'c' {
			return slotCallFile
		}
	case dwarf.DW_AT_call_line:
		if class == 'c' {
			return slotCallLine
		}
	case dwarf.DW_AT_call_column:
		if class == 'c' {
			return slotCallCol
		}
	}
	return slotNone
}

// put stores v, of form form, in field sl.
func (out *attrs) put(sl slot, form dwarf.Form, v uint64) {
	switch sl {
	case slotLow:
		out.lowPC, out.hasLow = v, true
	case slotHigh:
		out.highPC, out.hasHigh = v, true
	case slotHighLen:
		out.highPC, out.hasHigh, out.highIsLen = v, true, true
	case slotRanges:
		out.ranges, out.hasRanges = v, true
	case slotStmt:
		out.stmtList, out.hasStmt = v, true
	case slotDwoID:
		out.dwoID, out.hasDwoID = v, true
	case slotRangesBase:
		out.rangesBase = v
	case slotName:
		out.name = strRef{form: form, val: v}
	case slotCompDir:
		out.compDir = strRef{form: form, val: v}
	case slotDwoName:
		out.dwoName = strRef{form: form, val: v}
	case slotLinkage:
		out.linkage = strRef{form: form, val: v}
	case slotSpec:
		out.spec = v
	case slotOrigin:
		out.origin = v
	case slotCallFile:
		out.callFile = v
	case slotCallLine:
		out.callLine = v
	case slotCallCol:
		out.callCol = v
	}
}

// skipForm skips one value of s's form, of variable size (or fails b
// with the form unknown).
func skipForm(b *dwarf.Buf, s *attrSpec, enc dwarf.Encoding) {
	at := b.Off()
	form, fs := s.form, &s.fs
	if form == dwarf.DW_FORM_indirect {
		form = b.Indirect(form)
		ifs, _ := form.Spec()
		fs = &ifs
	}
	if fs.Size == dwarf.SizeUnknown {
		if b.Err() == nil {
			b.FailAt(at, "attribute form", fmt.Sprintf("unknown form %v", form))
		}
		return
	}
	b.FormValue(fs, enc, "attribute value")
}

// index reads entry i of size bytes from the array at base of data
// (.debug_addr, .debug_str_offsets, a .debug_rnglists offset array), in
// b's byte order.
func index(b *dwarf.Buf, section string, data []byte, base, i uint64, size int, at uint64) uint64 {
	if b.Err() != nil {
		return 0
	}
	off := base + i*uint64(size)
	if i > (^uint64(0)-base)/uint64(size) || off > uint64(len(data)) || uint64(len(data))-off < uint64(size) {
		b.FailAt(at, section+" index", fmt.Sprintf("index %d (base %#x) outside %s of %#x bytes", i, base, section, len(data)))
		return 0
	}
	var v uint64
	if b.Order == binary.BigEndian {
		for j := range size {
			v = v<<8 | uint64(data[off+uint64(j)])
		}
		return v
	}
	for j := size - 1; j >= 0; j-- {
		v = v<<8 | uint64(data[off+uint64(j)])
	}
	return v
}

func (d *dwarfData) addrx(b *dwarf.Buf, u *unit, i, at uint64) uint64 {
	return index(b, ".debug_addr", d.sec.Addr, u.hdr.AddrBase, i, int(u.hdr.Enc.AddrSize), at)
}

func (d *dwarfData) rnglistx(b *dwarf.Buf, u *unit, i, at uint64) uint64 {
	return u.hdr.RngListsBase + index(b, ".debug_rnglists", d.sec.RngLists, u.hdr.RngListsBase, i, u.hdr.Enc.Format.OffsetSize(), at)
}

// str resolves a string reference of unit u. A reference into a section
// that is missing, or to a supplementary file, gives false.
func (d *dwarfData) str(u *unit, r strRef) ([]byte, bool) {
	var sec []byte
	off := r.val
	switch r.form {
	case 0:
		return nil, false
	case dwarf.DW_FORM_string:
		sec = d.sec.Info
	case dwarf.DW_FORM_strp:
		sec = d.sec.Str
	case dwarf.DW_FORM_line_strp:
		sec = d.sec.LineStr
	case dwarf.DW_FORM_strx, dwarf.DW_FORM_GNU_str_index, dwarf.DW_FORM_strx1, dwarf.DW_FORM_strx2, dwarf.DW_FORM_strx3, dwarf.DW_FORM_strx4:
		b := dwarf.MakeBuf(".debug_str_offsets", d.sec.Order, nil)
		off = index(&b, ".debug_str_offsets", d.sec.StrOffsets, u.hdr.StrOffsetsBase, r.val, u.hdr.Enc.Format.OffsetSize(), 0)
		if b.Err() != nil {
			return nil, false
		}
		sec = d.sec.Str
	default:
		return nil, false
	}
	if off >= uint64(len(sec)) {
		return nil, false
	}
	s := sec[off:]
	if i := bytes.IndexByte(s, 0); i >= 0 {
		return s[:i], true
	}
	return nil, false
}
