package elfimage

import (
	"encoding/binary"
	"fmt"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/expr"
	"github.com/elfimage/elfimage/dwarf/value"
)

// FormatLocation evaluates the location expression location (a
// [Local.Location] or [Param.Location]) in the frame st and formats the
// value it designates as its type t shows it, as gdb's print command
// shows it (value.Print: integers in decimal, booleans as true or false,
// floats with gdb's 9 or 17 significant digits, characters as their code
// and quoted, pointers in hex (a char pointer also with the string it
// points to), enumerations by name, structures and unions as {member =
// value, ...}, arrays as {element, ...} of at most 200 elements, runs of
// more than 10 equal ones as "x <repeats n times>", char arrays as
// strings). The location may be composite (pieces, DWARF 5 section
// 2.6.1.2) when every piece has a location. A nil t is the default type,
// the 8-byte signed "integer". Members and elements are read from st.Mem;
// an array of a variable's length (Type.CountVar) takes the length from
// st.Vars.
//
// Errors are those of value.Locate (wrapping value.ErrOptimizedOut for an
// empty location, value.ErrNotSaved for a register not known in st), and
// for a value larger than its register or computed value. Parts that
// cannot be read (a member in unmapped memory) are shown as
// <unreadable: why> rather than failing the whole value. Cost: one
// evaluation per piece, one or two aligned 8-byte reads of st.Mem per
// member or element shown; at most 4 KiB of text and 16384 members and
// elements, however many repeat.
func FormatLocation(location []byte, t *Type, st *FrameState) (string, error) {
	obj, opts, err := st.locate(location)
	if err != nil {
		return "", err
	}
	if t == nil {
		t = defaultType
	}
	if n, ok := value.SizeOf(t, st.Vars, opts.PtrSize); ok && !obj.InMemory && n > int64(len(obj.Bytes)) {
		return "", fmt.Errorf("elfimage: a %d-byte %s in a register or computed value of %d bytes", n, t, len(obj.Bytes))
	}
	text, _ := value.Format(t, obj, opts) // unreadable parts are in the text
	return text, nil
}

// locate evaluates a location expression in the frame: the object and
// the options to format it with.
func (st *FrameState) locate(location []byte) (value.Object, *value.Options, error) {
	a := st.Arch
	if a == nil {
		a = arch.X86_64
	}
	p := expr.Params{Section: ".debug_info", AddrSize: uint8(a.PtrSize), Order: binary.LittleEndian}
	obj, err := value.Locate(location, p, frameContext{st})
	if err != nil {
		return value.Object{}, nil, err
	}
	return obj, &value.Options{Style: value.Print, Mem: st.Mem, PtrSize: a.PtrSize, Vars: st.Vars}, nil
}
