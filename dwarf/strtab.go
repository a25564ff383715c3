package dwarf

import "slices"

// StrTab builds a string section (.debug_str, .debug_line_str, .strtab):
// NUL-terminated strings, each stored once. The first Add of a string
// appends it; later Adds return the same offset. The zero value is an empty
// table; use [NewStrTab] for a table that starts with an empty string at
// offset 0, as ELF string tables must.
type StrTab struct {
	data []byte
	offs map[string]uint64
	room int // the number of strings offs was made for by Grow
}

// NewStrTab returns a table whose offset 0 holds the empty string.
func NewStrTab() *StrTab {
	t := &StrTab{}
	t.Add("")
	return t
}

// Add returns the offset of s in the table, appending it if it is new.
// Cost: one map lookup, plus one copy of s the first time.
func (t *StrTab) Add(s string) uint64 {
	if off, ok := t.offs[s]; ok {
		return off
	}
	if t.offs == nil {
		t.offs = make(map[string]uint64)
	}
	off := uint64(len(t.data))
	t.data = append(t.data, s...)
	t.data = append(t.data, 0)
	t.offs[s] = off
	return off
}

// Grow makes room for about n more distinct strings of size bytes in all
// (NUL bytes included), so that the next Adds do not grow the table.
// Cost: when the index of the strings was not made for as many strings
// by an earlier Grow, it is rebuilt at the new size, in time linear in
// the strings already held (a table from [NewStrTab] holds one).
func (t *StrTab) Grow(n, size int) {
	if n > 0 && len(t.offs)+n > t.room {
		offs := make(map[string]uint64, len(t.offs)+n)
		for s, off := range t.offs {
			offs[s] = off
		}
		t.offs, t.room = offs, len(t.offs)+n
	}
	t.data = slices.Grow(t.data, size)
}

// Reset empties the table, as the zero value is (no strings, not even
// the empty one: Add it first for an ELF string table), keeping its
// memory for the next strings. The slices Bytes returned before are
// overwritten by the next Adds. Cost: clears the index, in time linear in
// the number of strings it was made for.
func (t *StrTab) Reset() {
	t.data = t.data[:0]
	clear(t.offs)
}

// Bytes returns the section contents. The slice is the table's own: do not
// modify it, and call Bytes again after further Adds.
func (t *StrTab) Bytes() []byte { return t.data }

// Size returns the section size in bytes.
func (t *StrTab) Size() int { return len(t.data) }
