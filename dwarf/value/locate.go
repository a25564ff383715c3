package value

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/expr"
)

// MaxPieceBytes bounds the bytes of a value in pieces that Locate
// gathers.
const MaxPieceBytes = 1 << 12

// Errors of Locate; match them with errors.Is.
var (
	// ErrOptimizedOut is wrapped when the value has no location here: an
	// empty location (no entry of its location list covers the pc), a
	// piece without a location, or a value on entry (DW_OP_entry_value)
	// the Context could not give (it wraps expr.ErrNoEntryValue then).
	ErrOptimizedOut = errors.New("value: not available here (optimized out)")
	// ErrNotSaved is wrapped when a register the value is in is not
	// known in the frame (the unwinding did not recover it).
	ErrNotSaved = errors.New("value: register not known in this frame")
)

// Object is where a value's bytes are: in memory from Addr (InMemory), or
// Bytes, the little-endian bytes of a register, of a computed value
// (DW_OP_stack_value), of an implicit value, or gathered from pieces.
type Object struct {
	InMemory bool
	Addr     uint64
	Bytes    []byte
}

// Locate evaluates the DWARF location description location (DWARF 5
// section 2.6) with expr.Eval under p in ctx and returns where the
// object is: a memory location, a register's value (ctx.Reg), a stack
// value or an implicit value. DW_OP_entry_value is evaluated through
// ctx when it is an expr.EntryValuer (the caller's call site). A composite location (each piece a
// location followed by DW_OP_piece, section 2.6.1.2) is evaluated piece
// by piece and its bytes gathered, memory pieces through
// ctx.ReadMemory. Errors: ErrOptimizedOut (see there), ErrNotSaved, those
// of expr.Eval (a malformed or unsupported expression, a register, CFA or
// frame base ctx does not know), unreadable memory of a piece, pieces of
// more than MaxPieceBytes. Cost: one evaluation per piece; allocates the
// bytes of a value not in memory.
func Locate(location []byte, p expr.Params, ctx expr.Context) (Object, error) {
	if len(location) == 0 {
		return Object{}, ErrOptimizedOut
	}
	ops, err := expr.Decode(location, p)
	if err != nil {
		return Object{}, err
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
		obj, _, err := locateSimple(location, p, ctx)
		return obj, err
	}
	var b []byte
	start := 0
	base := p.Offset
	for _, end := range pieces {
		part := location[start:end]
		p.Offset = base + uint64(start)
		obj, n, err := locateSimple(part, p, ctx)
		if err != nil {
			return Object{}, err
		}
		if n == 0 || uint64(len(b))+n > MaxPieceBytes {
			return Object{}, fmt.Errorf("value: a composite location of more than %d bytes", MaxPieceBytes)
		}
		for i := uint64(0); i < n; {
			k := min(n-i, 8)
			var v uint64
			if obj.InMemory {
				if v, err = ctx.ReadMemory(obj.Addr+i, int(k)); err != nil {
					return Object{}, fmt.Errorf("value: piece at byte %d of the location: %w", start, err)
				}
			} else if i+k <= uint64(len(obj.Bytes)) {
				var w [8]byte
				copy(w[:], obj.Bytes[i:i+k])
				v = binary.LittleEndian.Uint64(w[:])
			} else {
				return Object{}, fmt.Errorf("value: piece at byte %d of the location: %d bytes of a %d-byte value", start, n, len(obj.Bytes))
			}
			var w [8]byte
			binary.LittleEndian.PutUint64(w[:], v)
			b = append(b, w[:k]...)
			i += k
		}
		start = end
	}
	return Object{Bytes: b}, nil
}

// locateSimple evaluates a location that is not composite (at most one
// piece, whose size it returns, 0 for none).
func locateSimple(location []byte, p expr.Params, ctx expr.Context) (Object, uint64, error) {
	if len(location) > 0 && dwarf.Op(location[0]) == dwarf.DW_OP_piece {
		return Object{}, 0, fmt.Errorf("%w: a piece without a location", ErrOptimizedOut)
	}
	r, err := expr.Eval(location, p, ctx)
	if errors.Is(err, expr.ErrNoEntryValue) {
		return Object{}, 0, fmt.Errorf("%w: %w", ErrOptimizedOut, err)
	}
	if err != nil {
		return Object{}, 0, err
	}
	word := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	var obj Object
	switch r.Kind {
	case expr.Memory:
		obj = Object{InMemory: true, Addr: r.Addr}
	case expr.Register:
		v, ok := ctx.Reg(r.Reg)
		if !ok {
			return Object{}, 0, fmt.Errorf("%w: DWARF register %d", ErrNotSaved, r.Reg)
		}
		obj = Object{Bytes: word(v)}
	case expr.Value:
		obj = Object{Bytes: word(r.Value)}
	case expr.Implicit:
		obj = Object{Bytes: r.Bytes}
	default:
		return Object{}, 0, fmt.Errorf("value: unsupported location kind %v", r.Kind)
	}
	if r.PieceSize > 0 && !obj.InMemory && r.PieceSize < uint64(len(obj.Bytes)) {
		obj.Bytes = obj.Bytes[:r.PieceSize]
	}
	return obj, r.PieceSize, nil
}
