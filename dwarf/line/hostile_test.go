package line

import (
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"

	edwarf "github.com/elfimage/elfimage/dwarf"
)

// unit5 builds a 32-bit DWARF 5 line unit (address size 8) around the
// directory and file tables tables (formats and entries, as bytes) and the
// program prog.
func unit5(tables, prog []byte) []byte {
	le := binary.LittleEndian
	hdr := []byte{1, 1, 1, byte(0xfb), 14, 13} // min_inst, max_ops, default_is_stmt, line_base -5, line_range, opcode_base
	hdr = append(hdr, standardOpcodeLengths[:12]...)
	hdr = append(hdr, tables...)
	var b []byte
	b = le.AppendUint32(b, 0) // unit_length, patched
	b = le.AppendUint16(b, 5)
	b = append(b, 8, 0)
	b = le.AppendUint32(b, uint32(len(hdr)))
	b = append(b, hdr...)
	b = append(b, prog...)
	le.PutUint32(b, uint32(len(b)-4))
	return b
}

// TestTrapV5EntryFormatOrder (REFERENCE.md, DWARF): version 5 entry
// formats may list their fields in any order, here directory index before
// path, with an MD5 in between and a size after: all fields are decoded
// before the entry is built.
func TestTrapV5EntryFormatOrder(t *testing.T) {
	md5 := [16]byte{0: 0xde, 1: 0xad, 15: 0xef}
	var tb []byte
	// Directories: one format (path, string), two entries.
	tb = append(tb, 1, byte(edwarf.DW_LNCT_path), byte(edwarf.DW_FORM_string))
	tb = append(tb, 2)
	tb = append(tb, "/cd\x00lib\x00"...)
	// Files: directory_index (udata), MD5 (data16), path (string), size (data2).
	tb = append(tb, 4,
		byte(edwarf.DW_LNCT_directory_index), byte(edwarf.DW_FORM_udata),
		byte(edwarf.DW_LNCT_MD5), byte(edwarf.DW_FORM_data16),
		byte(edwarf.DW_LNCT_path), byte(edwarf.DW_FORM_string),
		byte(edwarf.DW_LNCT_size), byte(edwarf.DW_FORM_data2))
	tb = append(tb, 2)
	tb = append(tb, 1)
	tb = append(tb, md5[:]...)
	tb = append(tb, "a.scm\x00"...)
	tb = append(tb, 0x34, 0x12)
	tb = append(tb, 0)
	tb = append(tb, make([]byte, 16)...)
	tb = append(tb, "/abs/b.scm\x00"...)
	tb = append(tb, 0, 0)
	prog := []byte{0, 9, byte(edwarf.DW_LNE_set_address), 0, 0x10, 0, 0, 0, 0, 0, 0, byte(edwarf.DW_LNS_copy), 0, 1, byte(edwarf.DW_LNE_end_sequence)}
	data := unit5(tb, prog)
	r, err := NewReader(Sections{Line: data}, 0, "/ignored")
	if err != nil {
		t.Fatal(err)
	}
	fs := r.Files()
	if len(fs) != 2 {
		t.Fatalf("%d files", len(fs))
	}
	if f := fs[0]; f.Name != "a.scm" || f.Dir != 1 || f.Path != "/cd/lib/a.scm" || !f.HasMD5 || f.MD5 != md5 || f.Size != 0x1234 {
		t.Errorf("file 0 = %+v", f)
	}
	if f := fs[1]; f.Path != "/abs/b.scm" || f.Dir != 0 || f.Size != 0 {
		t.Errorf("file 1 = %+v", f)
	}
	var row Row
	if err := r.Next(&row); err != nil || row.Address != 0x1000 || row.File != 1 || row.Line != 1 {
		t.Errorf("row = %+v, %v", row, err)
	}
}

// TestTrapHeaderLengthPastUnit (REFERENCE.md, DWARF): a header_length
// that points past the end of its unit (or whose end overflows) is a
// FormatError on header_length, not a slice panic.
func TestTrapHeaderLengthPastUnit(t *testing.T) {
	for _, hl := range []uint32{1 << 20, 0xffffffff, 0xfffffff0} {
		data := unit5([]byte{0, 0, 0, 0}, nil)
		binary.LittleEndian.PutUint32(data[8:], hl)
		_, err := NewReader(Sections{Line: data}, 0, "")
		var fe *edwarf.FormatError
		if !errors.As(err, &fe) || fe.Field != "header_length" || fe.Offset != 8 {
			t.Errorf("header_length %#x: err = %v, want FormatError on header_length at 8", hl, err)
		}
	}
}

// allocated returns the bytes allocated while f runs.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestHugeCountsBounded: entry counts of 2^32 and more in a header of a
// few bytes are refused before anything proportional to them is
// allocated (issue 6, point 3).
func TestHugeCountsBounded(t *testing.T) {
	uleb := func(v uint64) []byte { return edwarf.AppendUleb128(nil, v) }
	path := []byte{1, byte(edwarf.DW_LNCT_path), byte(edwarf.DW_FORM_string)}
	for name, tables := range map[string][]byte{
		"directories_count 2^32": append(append(append([]byte(nil), path...), uleb(1<<32)...), 'x', 0),
		"directories_count 2^63": append(append(append([]byte(nil), path...), uleb(1<<63)...), 'x', 0),
		"file_names_count 2^40":  append(append(append(append([]byte(nil), path...), 1, 'd', 0), path...), uleb(1<<40)...),
		"255 entry formats":      append([]byte{255}, make([]byte, 20)...),
	} {
		data := unit5(tables, nil)
		var err error
		n := allocated(func() { _, err = NewReader(Sections{Line: data}, 0, "") })
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
		if n > 16<<10 {
			t.Errorf("%s: decoding %d bytes allocated %d bytes", name, len(data), n)
		}
	}
}

// TestHugeAdvancesBounded: address and line advances at their extremes
// (wrapping the address, a million const_add_pc) run in time linear in
// the program and end cleanly.
func TestHugeAdvancesBounded(t *testing.T) {
	tables := []byte{1, byte(edwarf.DW_LNCT_path), byte(edwarf.DW_FORM_string), 1, '/', 0,
		1, byte(edwarf.DW_LNCT_path), byte(edwarf.DW_FORM_string), 1, 'a', 0}
	var prog []byte
	prog = append(prog, byte(edwarf.DW_LNS_advance_pc))
	prog = edwarf.AppendUleb128(prog, ^uint64(0))
	prog = append(prog, byte(edwarf.DW_LNS_advance_line))
	prog = edwarf.AppendSleb128(prog, -1<<62)
	prog = append(prog, byte(edwarf.DW_LNS_copy))
	for range 1 << 20 {
		prog = append(prog, byte(edwarf.DW_LNS_const_add_pc))
	}
	prog = append(prog, byte(edwarf.DW_LNS_advance_pc))
	prog = edwarf.AppendUleb128(prog, ^uint64(0))
	prog = append(prog, byte(edwarf.DW_LNS_copy), 0, 1, byte(edwarf.DW_LNE_end_sequence))
	r, err := NewReader(Sections{Line: unit5(tables, prog)}, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for {
		var row Row
		err := r.Next(&row)
		if err == io.EOF {
			break
		}
		if err != nil {
			var fe *edwarf.FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("err %v (%T), want FormatError", err, err)
			}
			break
		}
		rows++
		if rows > 3 {
			t.Fatalf("%d rows from a program with 3 row-making opcodes", rows)
		}
	}
	if _, err := Decode(Sections{Line: unit5(tables, prog)}, 0, ""); err != nil {
		var fe *edwarf.FormatError
		if !errors.As(err, &fe) {
			t.Fatalf("Decode err %v (%T), want FormatError", err, err)
		}
	}
}
