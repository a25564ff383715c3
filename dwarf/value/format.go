package value

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Bounds on formatting one value, as a debugger's print settings bound
// it (gdb prints 200 elements by default).
const (
	maxElements  = 200     // array elements shown; more are "..."
	maxValueText = 4096    // bytes of text; a longer value ends in "..."
	maxNesting   = 16      // structures within structures shown
	maxString    = 64      // bytes of a char * target shown
	maxRepeats   = 10      // equal elements shown one by one; more are "x <repeats n times>"
	maxValues    = 1 << 14 // values (members, elements) formatted, however many repeat
)

// Memory reads the memory of the target: ReadUint64 returns the 8 bytes
// at addr, little-endian. It is the shape of unwind.Memory.
type Memory interface {
	ReadUint64(addr uint64) (uint64, error)
}

// SizedMemory is a Memory that also reads 1 to 8 bytes exactly (the
// shape of unwind.SizedMemory).
type SizedMemory interface {
	Memory
	ReadSized(addr uint64, size int) (uint64, error)
}

// Read reads size bytes (1 to 8) at addr from mem as a little-endian
// integer: with ReadSized when mem is a SizedMemory, else with ReadUint64
// of the one or two aligned 8-byte words that hold them, so that no read
// touches a page the bytes are not on. Errors: a bad size, bytes that
// wrap around the address space, and mem's. Cost: one or two reads.
func Read(mem Memory, addr uint64, size int) (uint64, error) {
	if size < 1 || size > 8 {
		return 0, fmt.Errorf("value: reading %d bytes", size)
	}
	if addr+uint64(size) < addr {
		return 0, fmt.Errorf("value: %d bytes at %#x wrap around the address space", size, addr)
	}
	if mem == nil {
		return 0, fmt.Errorf("value: no memory to read %#x from", addr)
	}
	if sm, ok := mem.(SizedMemory); ok {
		return sm.ReadSized(addr, size)
	}
	base := addr &^ 7
	lo, err := mem.ReadUint64(base)
	if err != nil {
		return 0, err
	}
	shift := (addr - base) * 8
	v := lo >> shift
	if int(addr-base)+size > 8 {
		hi, err := mem.ReadUint64(base + 8)
		if err != nil {
			return 0, err
		}
		v |= hi << (64 - shift)
	}
	if size < 8 {
		v &= 1<<(8*size) - 1
	}
	return v, nil
}

// Style says how Format shows a value.
type Style uint8

// Styles.
const (
	// Print shows a value as gdb's print command does: integers in
	// decimal, booleans as true or false (other values in decimal),
	// floating-point numbers with 9 (float) or 17 (double) significant
	// digits as gdb's %g does, characters as their code and quoted in C
	// ('a', '\n', '\377'; a wider one as a Unicode character), pointers
	// in hex (a pointer to a one-byte character also with the string it
	// points to, at most 64 bytes), enumerations by name (or number),
	// structures and unions as {member = value, ...} (at most 16 deep; an
	// opaque one as <N bytes>), arrays as {element, ...} of at most 200
	// elements, runs of more than 10 equal ones as "x <repeats n
	// times>", arrays of one-byte characters as strings (the NUL that
	// ends an array shown whole dropped). A part that cannot be read (a
	// member in unmapped memory) shows as <unreadable: why>.
	Print Style = iota
	// Brief shows a value as gdb's backtrace shows arguments (print
	// frame-arguments scalars): a scalar (IsScalar) as Print does, but a
	// pointer without the string it points to; anything else as "...",
	// not read. A value that cannot be read shows as <error: Cannot
	// access memory at address 0x...> (gdb's words) or <error: why>.
	Brief
)

// Options tune Format. The zero value shows in Print style with no
// memory readable.
type Options struct {
	Style Style
	// Mem is the memory of an object in memory and of what pointers in
	// it point to; nil reads nothing.
	Mem Memory
	// PtrSize is the size of a pointer in bytes (0 means 8).
	PtrSize int
	// Vars gives the integer values of variables by name, for arrays
	// whose length is a variable (Type.CountVar).
	Vars map[string]int64
}

// Format shows the value of type t (nil: DefaultType) that obj holds, in
// opts' style (see Style for every rule), and returns the first error met
// reading it (the value's own bytes, a member, an element, a string), nil
// when everything shown was read. The text is at most 4 KiB (longer ends
// in "..."). Cost: at most 16384 members and elements formatted, however
// many repeat, one or two reads of memory for each scalar shown.
func Format(t *Type, obj Object, opts *Options) (string, error) {
	if opts == nil {
		opts = &Options{}
	}
	if t == nil {
		t = DefaultType()
	}
	budget := maxValues
	f := &formatter{opts: opts, budget: &budget}
	if opts.Style == Brief && !IsScalar(t) {
		return "...", nil
	}
	f.value(t, obj, 0, 0)
	return f.b.String(), f.err
}

// Integer returns the value of type t (nil: DefaultType) that obj holds
// as an integer: of its size, sign- or zero-extended, for an integer,
// boolean, character or enumeration type of 1 to 8 bytes; the first 8
// bytes (fewer, zero-extended, of a shorter value not in memory) for
// other types. Errors are those of reading. Cost: one or two reads.
func Integer(t *Type, obj Object, opts *Options) (int64, error) {
	if opts == nil {
		opts = &Options{}
	}
	if t == nil {
		t = DefaultType()
	}
	f := &formatter{opts: opts}
	if u := Under(t); u != nil && u.Size >= 1 && u.Size <= 8 {
		switch u.Kind {
		case KindSigned, KindUnsigned, KindBool, KindChar, KindUnsignedChar, KindEnum:
			v, err := f.integer(obj, 0, u.Size, signedKind(u))
			return int64(v), err
		}
	}
	n := 8
	if !obj.InMemory {
		n = min(n, len(obj.Bytes))
	}
	if n == 0 {
		return 0, nil
	}
	v, err := f.read(obj, 0, n)
	return int64(v), err
}

// signedKind reports whether values of the scalar u are signed.
func signedKind(u *Type) bool {
	switch u.Kind {
	case KindSigned:
		return true
	case KindChar:
		return u.Size == 1
	case KindEnum:
		e := Under(u.Elem)
		return e == nil || e.Kind != KindUnsigned
	}
	return false
}

// formatter writes one value's text, bounded in length, and in work:
// budget counts the values it (and the formatters of its elements) may
// still format.
type formatter struct {
	opts   *Options
	b      strings.Builder
	full   bool
	budget *int
	err    error // the first read that failed
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

// readError is a read of n bytes at off of an object that failed.
type readError struct {
	obj Object
	off uint64
	err error
}

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// read returns n bytes (1 to 8) at offset off of obj as a little-endian
// integer.
func (f *formatter) read(obj Object, off uint64, n int) (uint64, error) {
	if !obj.InMemory {
		if off+uint64(n) > uint64(len(obj.Bytes)) || off+uint64(n) < off {
			return 0, &readError{obj, off, fmt.Errorf("%d bytes at %d of a %d-byte value", n, off, len(obj.Bytes))}
		}
		var w [8]byte
		copy(w[:], obj.Bytes[off:off+uint64(n)])
		return binary.LittleEndian.Uint64(w[:]), nil
	}
	a := obj.Addr + off
	if a < obj.Addr {
		return 0, &readError{obj, off, fmt.Errorf("%d bytes at %#x+%d: the address wraps", n, obj.Addr, off)}
	}
	v, err := Read(f.opts.Mem, a, n)
	if err != nil {
		return 0, &readError{obj, off, err}
	}
	return v, nil
}

// integer reads an integer of size bytes at off, sign-extended when
// signed.
func (f *formatter) integer(obj Object, off uint64, size int, signed bool) (uint64, error) {
	if size < 1 || size > 8 {
		return 0, &readError{obj, off, fmt.Errorf("an integer of %d bytes", size)}
	}
	v, err := f.read(obj, off, size)
	if err != nil {
		return 0, err
	}
	if signed && size < 8 {
		sh := 64 - 8*uint(size)
		v = uint64(int64(v<<sh) >> sh)
	}
	return v, nil
}

// fail shows a part that could not be read, in the style's words, and
// keeps the first error.
func (f *formatter) fail(err error) {
	if f.err == nil {
		f.err = err
	}
	if f.opts.Style == Brief {
		var re *readError
		if errors.As(err, &re) && re.obj.InMemory {
			f.put(fmt.Sprintf("<error: Cannot access memory at address %#x>", re.obj.Addr+re.off))
			return
		}
		f.put("<error: " + err.Error() + ">")
		return
	}
	f.put("<unreadable: " + err.Error() + ">")
}

func (f *formatter) ptrSize() int {
	if f.opts.PtrSize == 0 {
		return 8
	}
	return f.opts.PtrSize
}

// value formats the object of type t at offset off of obj.
func (f *formatter) value(t *Type, obj Object, off uint64, depth int) {
	if f.full {
		return
	}
	if *f.budget--; depth > maxNesting || t == nil || *f.budget < 0 {
		f.put("...")
		f.full = f.full || *f.budget < 0
		return
	}
	switch t.Kind {
	case KindSigned, KindUnsigned:
		v, err := f.integer(obj, off, t.Size, t.Kind == KindSigned)
		switch {
		case err != nil:
			f.fail(err)
		case t.Kind == KindSigned:
			f.put(strconv.FormatInt(int64(v), 10))
		default:
			f.put(strconv.FormatUint(v, 10))
		}
	case KindBool:
		v, err := f.integer(obj, off, t.Size, false)
		switch {
		case err != nil:
			f.fail(err)
		case v == 0:
			f.put("false")
		case v == 1:
			f.put("true")
		default:
			f.put(strconv.FormatUint(v, 10))
		}
	case KindFloat:
		v, err := f.integer(obj, off, t.Size, false)
		switch {
		case err != nil:
			f.fail(err)
		case t.Size == 4:
			f.put(strconv.FormatFloat(float64(math.Float32frombits(uint32(v))), 'g', 9, 32))
		case t.Size == 8:
			f.put(strconv.FormatFloat(math.Float64frombits(v), 'g', 17, 64))
		default:
			f.fail(fmt.Errorf("a %d-byte float", t.Size))
		}
	case KindChar, KindUnsignedChar:
		signed := t.Kind == KindChar && t.Size == 1
		v, err := f.integer(obj, off, t.Size, signed)
		switch {
		case err != nil:
			f.fail(err)
		case signed:
			f.put(strconv.FormatInt(int64(v), 10) + " " + quoteChar(v, t.Size))
		default:
			f.put(strconv.FormatUint(v, 10) + " " + quoteChar(v, t.Size))
		}
	case KindPointer:
		v, err := f.integer(obj, off, f.ptrSize(), false)
		if err != nil {
			f.fail(err)
			return
		}
		f.put(fmt.Sprintf("%#x", v))
		if e := Under(t.Elem); f.opts.Style == Print && e != nil && (e.Kind == KindChar || e.Kind == KindUnsignedChar) && e.Size == 1 && v != 0 && f.opts.Mem != nil {
			f.put(" " + f.cString(v))
		}
	case KindEnum:
		signed := signedKind(t)
		v, err := f.integer(obj, off, t.Size, signed)
		if err != nil {
			f.fail(err)
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
		f.value(t.Elem, obj, off, depth+1)
	case KindStruct, KindUnion:
		if len(t.Members) == 0 && t.Size > 0 && t.Kind == KindStruct && t.Name != "" {
			// An opaque type (a base type this model lacks): its size.
			f.put(fmt.Sprintf("<%d bytes>", t.Size))
			return
		}
		f.put("{")
		for i, m := range t.Members {
			if i > 0 {
				f.put(", ")
			}
			f.put(m.Name + " = ")
			f.value(m.Type, obj, off+uint64(m.Offset), depth+1)
		}
		f.put("}")
	case KindArray:
		f.array(t, obj, off, depth)
	case KindVoid:
		f.put("<void>")
	default:
		f.put("<" + t.Kind.String() + ">")
	}
}

// array formats the array t at offset off of obj.
func (f *formatter) array(t *Type, obj Object, off uint64, depth int) {
	n := int64(t.Count)
	if t.CountVar != "" {
		v, ok := f.opts.Vars[t.CountVar]
		if !ok {
			f.put("<length " + t.CountVar + " unknown>")
			return
		}
		n = v
	}
	es, ok := SizeOf(t.Elem, f.opts.Vars, f.ptrSize())
	if !ok {
		f.put("<elements of unknown size>")
		return
	}
	if e := Under(t.Elem); e != nil && (e.Kind == KindChar || e.Kind == KindUnsignedChar) && e.Size == 1 {
		f.chars(obj, off, n)
		return
	}
	// Runs of more than maxRepeats equal elements are shown once with
	// their count, as gdb shows them.
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
	for i := int64(0); i < n && i < maxElements && !f.full; i++ {
		e := &formatter{opts: f.opts, budget: f.budget}
		e.value(t.Elem, obj, off+uint64(i*es), depth+1)
		if f.err == nil {
			f.err = e.err
		}
		if *f.budget < 0 {
			// The element is incomplete: shown as far as it got.
			flush(shown == 0)
			if shown += run; shown > 0 {
				f.put(", ")
			}
			f.put(e.b.String())
			f.full = true
			return
		}
		if text := e.b.String(); run > 0 && text == prev {
			run++
		} else {
			flush(shown == 0)
			shown += run
			prev, run = text, 1
		}
	}
	flush(shown == 0)
	if n > maxElements {
		f.put("...")
	}
	f.put("}")
}

// chars formats an array of n one-byte characters at off as a string, as
// gdb does: at most maxElements bytes; the last byte dropped when it is a
// NUL and the array is shown whole; runs of more than maxRepeats equal
// bytes shown once with their count ("abc", '\000' <repeats 12 times>).
func (f *formatter) chars(obj Object, off uint64, n int64) {
	var b []byte
	for i := int64(0); i < n && i < maxElements; i++ {
		c, err := f.read(obj, off+uint64(i), 1)
		if err != nil {
			f.fail(err)
			return
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
	f.put(s)
}

// cString reads the NUL-terminated string at addr (at most maxString
// bytes) and quotes it; unreadable memory ends it.
func (f *formatter) cString(addr uint64) string {
	var b []byte
	for i := uint64(0); i < maxString; i++ {
		c, err := Read(f.opts.Mem, addr+i, 1)
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
// ASCII as itself, the quote and the backslash escaped, \a \b \f \n \r
// \t \v, other bytes in octal ('\000', '\033', '\377').
func cQuote(b []byte, q byte) string {
	out := []byte{q}
	for _, c := range b {
		switch {
		case c == q || c == '\\':
			out = append(out, '\\', c)
		case c >= 0x20 && c < 0x7f:
			out = append(out, c)
		case c >= '\a' && c <= '\r':
			out = append(out, '\\', "abtnvfr"[c-'\a'])
		default:
			out = append(out, fmt.Sprintf("\\%03o", c)...)
		}
	}
	return string(append(out, q))
}
