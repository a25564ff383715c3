package elfobj

import "math"

// StringTable builds the contents of an ELF string table section
// (SHT_STRTAB: .strtab, .dynstr; gABI "String Table"): NUL-terminated
// strings, the first byte NUL so that offset 0 is the empty string.
// Strings are appended in the order added and never merged as suffixes of
// one another, so offsets are known at once and the bytes follow the
// order of the calls. The zero value is an empty table, ready to use.
//
// Once a [Writer] has reserved the table ([Writer.ReserveStringTable]) it
// may not change: Add and AddUnique then panic.
type StringTable struct {
	data   []byte
	offs   map[string]uint32
	frozen bool
}

// init gives the table its leading NUL.
func (t *StringTable) init() {
	if len(t.data) == 0 {
		t.data = append(t.data, 0)
	}
}

// Add returns the offset of s in the table, appending it if no earlier
// Add appended it. Cost: one map lookup (and insertion, for a new
// string), plus the copy of a new string.
func (t *StringTable) Add(s string) uint32 {
	if s == "" {
		if !t.frozen {
			t.init()
		}
		return 0
	}
	if off, ok := t.offs[s]; ok {
		return off
	}
	off := t.AddUnique(s)
	if t.offs == nil {
		t.offs = make(map[string]uint32)
	}
	t.offs[s] = off
	return off
}

// AddUnique appends s and returns its offset without looking it up, for
// strings the caller knows to be distinct (symbol names of a module, say):
// no hashing. A string added twice is stored twice, which is valid ELF;
// a later [StringTable.Add] of s does not find it. Offsets past 4 GiB do
// not fit st_name: [Writer.ReserveStringTable] then fails with
// [ErrRange]. Cost: the copy of s.
func (t *StringTable) AddUnique(s string) uint32 {
	if t.frozen {
		panic("elfobj: StringTable changed after its section was reserved")
	}
	t.init()
	if s == "" {
		return 0
	}
	off := len(t.data)
	t.data = append(t.data, s...)
	t.data = append(t.data, 0)
	if off > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(off)
}

// Grow makes room for n more bytes of strings (their NULs included), so
// that adding them does not reallocate.
func (t *StringTable) Grow(n int) {
	t.init()
	if n > cap(t.data)-len(t.data) {
		d := make([]byte, len(t.data), len(t.data)+n)
		copy(d, t.data)
		t.data = d
	}
}

// Size returns the size of the table in bytes (1 for an empty table: its
// leading NUL).
func (t *StringTable) Size() int { return max(len(t.data), 1) }

// Bytes returns the table's contents, which the caller must not modify.
func (t *StringTable) Bytes() []byte {
	if len(t.data) == 0 {
		return []byte{0}
	}
	return t.data
}

func (t *StringTable) freeze() {
	if len(t.data) == 0 {
		t.data = []byte{0}
	}
	t.frozen = true
}
