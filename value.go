package elfimage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/expr"
)

// Bounds on formatting one value, as a debugger's print settings bound
// it (gdb prints 200 elements by default).
const (
	maxElements   = 200     // array elements shown; more are "..."
	maxValueText  = 4096    // bytes of text; a longer value ends in "..."
	maxNesting    = 16      // structures within structures shown
	maxString     = 64      // bytes of a char * target shown
	maxRepeats    = 10      // equal elements shown one by one; more are "x <repeats n times>"
	maxValues     = 1 << 14 // values (members, elements) formatted, however many repeat
	maxPieceBytes = 1 << 12 // bytes of a value in pieces
)

// FormatLocation evaluates the location expression location (a
// [Local.Location] or [Param.Location]) in the frame st and formats the
// value it designates as its type t shows it, as gdb prints it: integers
// in decimal, booleans as true or false, floats in the shortest form that
// reads back the same, characters as their code and quoted, pointers in
// hex (a char pointer also with the string it points to), enumerations
// by name, structures and unions as {member = value, ...}, arrays as
// {element, ...} of at most 200 elements (runs of more than 10 equal ones
// as "x <repeats n times>", char arrays as strings). The location may be
// composite (pieces, DWARF 5 section 2.6.1.2) when every piece has a
// location. A nil t is the default type,
// the 8-byte signed "integer". Members and elements are read from
// st.Mem; an array of a variable's length (Type.CountVar) takes the
// length from st.Vars.
//
// Errors are those of [ReadLocation], and for a value larger than 8 bytes
// in a register or stack value, a piece without a location, or pieces of
// more than 4 KiB. Parts that cannot be read (a member in unmapped
// memory) are shown as <unreadable: why> rather than failing the whole
// value. Cost: one evaluation per piece, one or two aligned 8-byte reads
// of st.Mem per member or element shown; at most 4 KiB of text and 16384
// members and elements, however many repeat.
func FormatLocation(location []byte, t *Type, st *FrameState) (string, error) {
	src, err := locate(location, st)
	if err != nil {
		return "", err
	}
	if t == nil {
		t = defaultType
	}
	budget := maxValues
	f := &formatter{st: st, budget: &budget}
	if n, ok := sizeOf(t, st.Vars); ok && src.mem == nil && n > int64(len(src.bytes)) {
		return "", fmt.Errorf("elfimage: a %d-byte %s in a register or computed value of %d bytes", n, t, len(src.bytes))
	}
	f.value(t, src, 0, 0)
	return f.b.String(), nil
}

// source is where an object's bytes are: in memory at addr, or the bytes
// of a register or computed value.
type source struct {
	mem       *FrameState // memory at addr when set
	addr      uint64
	bytes     []byte
	pieceSize uint64 // the size of the one DW_OP_piece that ended the location, or 0
}

// read returns n bytes (1 to 8) at offset off of the object as a
// little-endian integer.
func (s source) read(off uint64, n int) (uint64, error) {
	if s.mem == nil {
		if off+uint64(n) > uint64(len(s.bytes)) {
			return 0, fmt.Errorf("%d bytes at %d of a %d-byte value", n, off, len(s.bytes))
		}
		var w [8]byte
		copy(w[:], s.bytes[off:off+uint64(n)])
		return binary.LittleEndian.Uint64(w[:]), nil
	}
	// Aligned words only: none crosses a page the object does not touch.
	a := s.addr + off
	if a < s.addr || a+uint64(n) < a {
		return 0, fmt.Errorf("%d bytes at %#x+%d: the address wraps", n, s.addr, off)
	}
	base := a &^ 7
	lo, err := s.mem.Mem.ReadUint64(base)
	if err != nil {
		return 0, err
	}
	shift := (a - base) * 8
	v := lo >> shift
	if int(a-base)+n > 8 {
		hi, err := s.mem.Mem.ReadUint64(base + 8)
		if err != nil {
			return 0, err
		}
		v |= hi << (64 - shift)
	}
	if n < 8 {
		v &= 1<<(8*n) - 1
	}
	return v, nil
}

// locate evaluates a location expression into the source of the object.
// A composite location (DWARF 5 section 2.6.1.2: locations each followed
// by DW_OP_piece) is evaluated piece by piece and its bytes gathered;
// a piece without a location, or more than maxPieceBytes in all, fails.
func locate(location []byte, st *FrameState) (source, error) {
	if len(location) == 0 {
		return source{}, errors.New("elfimage: value not available here (optimized out)")
	}
	a := st.Arch
	if a == nil {
		a = arch.X86_64
	}
	p := expr.Params{Section: ".debug_info", AddrSize: uint8(a.PtrSize), Order: binary.LittleEndian}
	ops, err := expr.Decode(location, p)
	if err != nil {
		return source{}, err
	}
	var pieces []int // end offsets of the pieces (after each DW_OP_piece)
	for i, o := range ops {
		if o.Op == dwarf.DW_OP_piece {
			end := uint64(len(location))
			if i+1 < len(ops) {
				end = ops[i+1].Offset
			}
			pieces = append(pieces, int(end))
		}
	}
	if len(pieces) <= 1 || pieces[len(pieces)-1] != len(location) {
		return locateSimple(location, p, st, a)
	}
	var b []byte
	start := 0
	for _, end := range pieces {
		part := location[start:end]
		p.Offset = uint64(start)
		s, err := locateSimple(part, p, st, a)
		if err != nil {
			return source{}, err
		}
		n := s.pieceSize
		if n == 0 || uint64(len(b))+n > maxPieceBytes {
			return source{}, fmt.Errorf("elfimage: a composite location of more than %d bytes", maxPieceBytes)
		}
		for i := uint64(0); i < n; i++ {
			c, err := s.read(i, 1)
			if err != nil {
				return source{}, fmt.Errorf("elfimage: piece at byte %d of the location: %w", start, err)
			}
			b = append(b, byte(c))
		}
		start = end
	}
	return source{bytes: b}, nil
}

// locateSimple evaluates a location that is not composite (at most one
// piece, which it records in pieceSize).
func locateSimple(location []byte, p expr.Params, st *FrameState, a *arch.Arch) (source, error) {
	if len(location) > 0 && dwarf.Op(location[0]) == dwarf.DW_OP_piece {
		return source{}, errors.New("elfimage: part of the value is not available here (optimized out)")
	}
	r, err := expr.Eval(location, p, frameContext{st})
	if err != nil {
		return source{}, err
	}
	word := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	var s source
	switch r.Kind {
	case expr.Memory:
		s = source{mem: st, addr: r.Addr}
	case expr.Register:
		v, ok := st.Regs.Get(r.Reg)
		if !ok {
			return source{}, fmt.Errorf("elfimage: register %s not known in this frame", a.RegName(r.Reg))
		}
		s = source{bytes: word(v)}
	case expr.Value:
		s = source{bytes: word(r.Value)}
	case expr.Implicit:
		s = source{bytes: r.Bytes}
	default:
		return source{}, fmt.Errorf("elfimage: unsupported location kind %v", r.Kind)
	}
	s.pieceSize = r.PieceSize
	if r.PieceSize > 0 && s.mem == nil && r.PieceSize < uint64(len(s.bytes)) {
		s.bytes = s.bytes[:r.PieceSize]
	}
	return s, nil
}

// sizeOf returns the size in bytes of a value of type t, false when it
// has none (void, an array of unknown length) or the type is too deep.
func sizeOf(t *Type, vars map[string]int64) (int64, bool) {
	for range maxTypeDepth {
		if t == nil {
			return 0, false
		}
		switch t.Kind {
		case KindPointer:
			return 8, true
		case KindTypedef, KindConst:
			t = t.Elem
			continue
		case KindArray:
			n := int64(t.Count)
			if t.CountVar != "" {
				v, ok := vars[t.CountVar]
				if !ok || v < 0 || v > maxTypeSize {
					return 0, false
				}
				n = v
			}
			e, ok := sizeOf(t.Elem, vars)
			if !ok || (e > 0 && n > maxTypeSize/e) {
				return 0, false
			}
			return n * e, true
		case KindVoid:
			return 0, false
		}
		return int64(t.Size), t.Size > 0
	}
	return 0, false
}

// formatter writes one value's text, bounded in length, and in work:
// budget counts the values it (and the formatters of its elements) may
// still format.
type formatter struct {
	st     *FrameState
	b      strings.Builder
	full   bool
	budget *int
}

func (f *formatter) put(s string) {
	if f.full {
		return
	}
	if f.b.Len()+len(s) > maxValueText {
		f.b.WriteString("...")
		f.full = true
		return
	}
	f.b.WriteString(s)
}

// integer reads an integer of size bytes at off, sign-extended when
// signed.
func integer(src source, off uint64, size int, signed bool) (uint64, error) {
	if size < 1 || size > 8 {
		return 0, fmt.Errorf("an integer of %d bytes", size)
	}
	v, err := src.read(off, size)
	if err != nil {
		return 0, err
	}
	if signed && size < 8 {
		sh := 64 - 8*uint(size)
		v = uint64(int64(v<<sh) >> sh)
	}
	return v, nil
}

// value formats the object of type t at offset off of src.
func (f *formatter) value(t *Type, src source, off uint64, depth int) {
	if f.full {
		return
	}
	if *f.budget--; depth > maxNesting || t == nil || *f.budget < 0 {
		f.put("...")
		f.full = f.full || *f.budget < 0
		return
	}
	fail := func(err error) { f.put("<unreadable: " + err.Error() + ">") }
	switch t.Kind {
	case KindSigned, KindUnsigned:
		v, err := integer(src, off, t.Size, t.Kind == KindSigned)
		if err != nil {
			fail(err)
			return
		}
		if t.Kind == KindSigned {
			f.put(strconv.FormatInt(int64(v), 10))
		} else {
			f.put(strconv.FormatUint(v, 10))
		}
	case KindBool:
		v, err := integer(src, off, t.Size, false)
		switch {
		case err != nil:
			fail(err)
		case v == 0:
			f.put("false")
		case v == 1:
			f.put("true")
		default:
			f.put(strconv.FormatUint(v, 10))
		}
	case KindFloat:
		v, err := integer(src, off, t.Size, false)
		switch {
		case err != nil:
			fail(err)
		case t.Size == 4:
			f.put(strconv.FormatFloat(float64(math.Float32frombits(uint32(v))), 'g', -1, 32))
		case t.Size == 8:
			f.put(strconv.FormatFloat(math.Float64frombits(v), 'g', -1, 64))
		default:
			fail(fmt.Errorf("a %d-byte float", t.Size))
		}
	case KindChar:
		v, err := integer(src, off, t.Size, t.Size == 1)
		if err != nil {
			fail(err)
			return
		}
		f.put(strconv.FormatInt(int64(v), 10) + " " + quoteChar(v, t.Size))
	case KindPointer:
		v, err := integer(src, off, 8, false)
		if err != nil {
			fail(err)
			return
		}
		f.put(fmt.Sprintf("%#x", v))
		if e := under(t.Elem); e != nil && e.Kind == KindChar && e.Size == 1 && v != 0 && f.st != nil && f.st.Mem != nil {
			f.put(" " + f.cString(v))
		}
	case KindEnum:
		signed := t.Elem == nil || under(t.Elem).Kind != KindUnsigned
		v, err := integer(src, off, t.Size, signed)
		if err != nil {
			fail(err)
			return
		}
		for _, e := range t.Enumerators {
			if uint64(e.Value) == v || (!signed && t.Size < 8 && uint64(e.Value)&(1<<(8*uint(t.Size))-1) == v) {
				f.put(e.Name)
				return
			}
		}
		if signed {
			f.put(strconv.FormatInt(int64(v), 10))
		} else {
			f.put(strconv.FormatUint(v, 10))
		}
	case KindTypedef, KindConst:
		f.value(t.Elem, src, off, depth+1)
	case KindStruct, KindUnion:
		if len(t.Members) == 0 && t.Size > 0 && t.Name != "" && t.Kind == KindStruct {
			// An opaque type (a foreign base type this package does not
			// model): its size only.
			f.put(fmt.Sprintf("<%d bytes>", t.Size))
			return
		}
		f.put("{")
		for i, m := range t.Members {
			if i > 0 {
				f.put(", ")
			}
			f.put(m.Name + " = ")
			f.value(m.Type, src, off+uint64(m.Offset), depth+1)
		}
		f.put("}")
	case KindArray:
		n := int64(t.Count)
		if t.CountVar != "" {
			v, ok := f.st.Vars[t.CountVar]
			if !ok {
				f.put("<length " + t.CountVar + " unknown>")
				return
			}
			n = v
		}
		es, ok := sizeOf(t.Elem, f.st.Vars)
		if !ok {
			f.put("<elements of unknown size>")
			return
		}
		if e := under(t.Elem); e != nil && e.Kind == KindChar && e.Size == 1 {
			f.put(f.chars(src, off, n))
			return
		}
		// Runs of more than maxRepeats equal elements are shown once
		// with their count, as gdb shows them.
		f.put("{")
		var prev string
		run := int64(0)
		flush := func(first bool) {
			switch {
			case run == 0:
				return
			case run > maxRepeats:
				if !first {
					f.put(", ")
				}
				f.put(prev + " <repeats " + strconv.FormatInt(run, 10) + " times>")
			default:
				for j := int64(0); j < run; j++ {
					if !first || j > 0 {
						f.put(", ")
					}
					f.put(prev)
				}
			}
		}
		shown := int64(0) // elements flushed
		exhausted := false
		for i := int64(0); i < n && i < maxElements && !f.full; i++ {
			e := &formatter{st: f.st, budget: f.budget}
			e.value(t.Elem, src, off+uint64(i*es), depth+1)
			if *f.budget < 0 {
				exhausted = true // the element is incomplete: shown as far as it got
				flush(shown == 0)
				if shown += run; shown > 0 {
					f.put(", ")
				}
				f.put(e.b.String())
				run = 0
				break
			}
			if text := e.b.String(); run > 0 && text == prev {
				run++
				continue
			} else {
				flush(shown == 0)
				shown += run
				prev, run = text, 1
			}
		}
		if exhausted {
			f.full = true
			return
		}
		flush(shown == 0)
		if n > maxElements {
			f.put("...")
		}
		f.put("}")
	case KindVoid:
		f.put("<void>")
	default:
		f.put("<" + t.Kind.String() + ">")
	}
}

// under returns t without typedefs and qualifiers.
func under(t *Type) *Type {
	for range maxTypeDepth {
		if t == nil || (t.Kind != KindTypedef && t.Kind != KindConst) {
			return t
		}
		t = t.Elem
	}
	return nil
}

// quoteChar quotes a character of size bytes as gdb does: 'a', '\n',
// '\377' for a byte that is not printable ASCII, a Unicode character for
// wider ones.
func quoteChar(v uint64, size int) string {
	if size == 1 {
		return cQuote([]byte{byte(v)}, '\'')
	}
	if v > utf8.MaxRune {
		return fmt.Sprintf("'\\x%x'", v)
	}
	return strconv.QuoteRune(rune(v))
}

// cQuote quotes bytes between q as C (and gdb) write them: printable
// ASCII as itself, \n \t \\ and the quote escaped, other bytes in octal.
func cQuote(b []byte, q byte) string {
	out := []byte{q}
	for _, c := range b {
		switch {
		case c == q || c == '\\':
			out = append(out, '\\', c)
		case c == '\n':
			out = append(out, '\\', 'n')
		case c == '\t':
			out = append(out, '\\', 't')
		case c >= 0x20 && c < 0x7f:
			out = append(out, c)
		default:
			out = append(out, fmt.Sprintf("\\%03o", c)...)
		}
	}
	return string(append(out, q))
}

// chars formats an array of n one-byte characters at off as a string, as
// gdb does: at most maxElements bytes; the last byte dropped when it is a
// NUL and the array is shown whole; runs of more than maxRepeats equal
// bytes shown once with their count ("abc", '\000' <repeats 12 times>).
func (f *formatter) chars(src source, off uint64, n int64) string {
	var b []byte
	for i := int64(0); i < n && i < maxElements; i++ {
		c, err := src.read(off+uint64(i), 1)
		if err != nil {
			return "<unreadable: " + err.Error() + ">"
		}
		b = append(b, byte(c))
	}
	truncated := n > maxElements
	if !truncated && len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	var parts []string
	var lit []byte
	for i := 0; i < len(b); {
		j := i
		for j < len(b) && b[j] == b[i] {
			j++
		}
		if j-i > maxRepeats {
			if len(lit) > 0 {
				parts = append(parts, cQuote(lit, '"'))
				lit = nil
			}
			parts = append(parts, fmt.Sprintf("%s <repeats %d times>", cQuote(b[i:i+1], '\''), j-i))
		} else {
			lit = append(lit, b[i:j]...)
		}
		i = j
	}
	if len(lit) > 0 || len(parts) == 0 {
		parts = append(parts, cQuote(lit, '"'))
	}
	s := strings.Join(parts, ", ")
	if truncated {
		s += "..."
	}
	return s
}

// cString reads the NUL-terminated string at addr (at most maxString
// bytes) and quotes it; unreadable memory ends it.
func (f *formatter) cString(addr uint64) string {
	src := source{mem: f.st, addr: addr}
	var b []byte
	for i := uint64(0); i < maxString; i++ {
		c, err := src.read(i, 1)
		if err != nil {
			if len(b) == 0 {
				return "<unreadable>"
			}
			break
		}
		if c == 0 {
			return cQuote(b, '"')
		}
		b = append(b, byte(c))
	}
	return cQuote(b, '"') + "..."
}
