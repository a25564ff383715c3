package dwarf

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// table76 is DWARF 5 table 7.6, "Attribute form encodings", written out
// from the standard (section 7.5.6): name, code, classes as the table
// lists them (code 0x02 is reserved).
const table76 = `
DW_FORM_addr            0x01  address
DW_FORM_block2          0x03  block
DW_FORM_block4          0x04  block
DW_FORM_data2           0x05  constant
DW_FORM_data4           0x06  constant
DW_FORM_data8           0x07  constant
DW_FORM_string          0x08  string
DW_FORM_block           0x09  block
DW_FORM_block1          0x0a  block
DW_FORM_data1           0x0b  constant
DW_FORM_flag            0x0c  flag
DW_FORM_sdata           0x0d  constant
DW_FORM_strp            0x0e  string
DW_FORM_udata           0x0f  constant
DW_FORM_ref_addr        0x10  reference
DW_FORM_ref1            0x11  reference
DW_FORM_ref2            0x12  reference
DW_FORM_ref4            0x13  reference
DW_FORM_ref8            0x14  reference
DW_FORM_ref_udata       0x15  reference
DW_FORM_indirect        0x16  (see Section 7.5.3)
DW_FORM_sec_offset      0x17  addrptr, lineptr, loclist, loclistsptr, macptr, rnglist, rnglistsptr, stroffsetsptr
DW_FORM_exprloc         0x18  exprloc
DW_FORM_flag_present    0x19  flag
DW_FORM_strx            0x1a  string
DW_FORM_addrx           0x1b  address
DW_FORM_ref_sup4        0x1c  reference
DW_FORM_strp_sup        0x1d  string
DW_FORM_data16          0x1e  constant
DW_FORM_line_strp       0x1f  string
DW_FORM_ref_sig8        0x20  reference
DW_FORM_implicit_const  0x21  constant
DW_FORM_loclistx        0x22  loclist
DW_FORM_rnglistx        0x23  rnglist
DW_FORM_ref_sup8        0x24  reference
DW_FORM_strx1           0x25  string
DW_FORM_strx2           0x26  string
DW_FORM_strx3           0x27  string
DW_FORM_strx4           0x28  string
DW_FORM_addrx1          0x29  address
DW_FORM_addrx2          0x2a  address
DW_FORM_addrx3          0x2b  address
DW_FORM_addrx4          0x2c  address
`

// TestFormTableStandard checks the form table against table 7.6: every
// standard form is there with its code, name and classes, and the table
// has no other standard form.
func TestFormTableStandard(t *testing.T) {
	std := 0
	for s := range Forms() {
		if s.Version != 0 {
			std++
		}
	}
	rows := 0
	for _, line := range strings.Split(strings.TrimSpace(table76), "\n") {
		rows++
		f := strings.Fields(line)
		code, err := strconv.ParseUint(f[1], 0, 16)
		if err != nil {
			t.Fatal(err)
		}
		s, ok := Form(code).Spec()
		if !ok {
			t.Errorf("%s (%s) missing", f[0], f[1])
			continue
		}
		if s.Name != f[0] || s.Form.String() != f[0] || s.Form != Form(code) {
			t.Errorf("code %s: %s (%v), want %s", f[1], s.Name, s.Form, f[0])
		}
		want := strings.Join(f[2:], "") // "addrptr, lineptr" → "addrptr,lineptr"
		if strings.HasPrefix(want, "(see") {
			want = "-"
		}
		if got := s.Classes.String(); got != want {
			t.Errorf("%s: classes %s, want %s", f[0], got, want)
		}
	}
	if std != rows {
		t.Errorf("%d standard forms in the table, %d in table 7.6", std, rows)
	}
	for _, f := range []Form{0, 0x02, 0x2d, 0x1f00, 0x1f03, 0x1f1f, 0x1f22, 0x2001, 0xffff} {
		if s, ok := f.Spec(); ok {
			t.Errorf("%v: %+v, want no entry", f, s)
		}
	}
}

// formTargets says what each form's value refers to, from the
// descriptions of the classes in DWARF 5 section 7.5.5 (and, for the GNU
// forms, the GNU split-DWARF and dwz proposals); forms not listed hold the
// datum itself.
var formTargets = map[Form]FormTarget{
	DW_FORM_ref1: TargetUnit, DW_FORM_ref2: TargetUnit, DW_FORM_ref4: TargetUnit, DW_FORM_ref8: TargetUnit, DW_FORM_ref_udata: TargetUnit,
	DW_FORM_ref_addr: TargetInfo, DW_FORM_ref_sig8: TargetSignature,
	DW_FORM_ref_sup4: TargetSupInfo, DW_FORM_ref_sup8: TargetSupInfo, DW_FORM_GNU_ref_alt: TargetSupInfo,
	DW_FORM_strp: TargetStr, DW_FORM_line_strp: TargetLineStr, DW_FORM_strp_sup: TargetSupStr, DW_FORM_GNU_strp_alt: TargetSupStr,
	DW_FORM_strx: TargetStrOffsets, DW_FORM_strx1: TargetStrOffsets, DW_FORM_strx2: TargetStrOffsets,
	DW_FORM_strx3: TargetStrOffsets, DW_FORM_strx4: TargetStrOffsets, DW_FORM_GNU_str_index: TargetStrOffsets,
	DW_FORM_addrx: TargetAddr, DW_FORM_addrx1: TargetAddr, DW_FORM_addrx2: TargetAddr,
	DW_FORM_addrx3: TargetAddr, DW_FORM_addrx4: TargetAddr, DW_FORM_GNU_addr_index: TargetAddr,
	DW_FORM_loclistx: TargetLocLists, DW_FORM_rnglistx: TargetRngLists, DW_FORM_sec_offset: TargetSection,
}

func TestFormTargets(t *testing.T) {
	for s := range Forms() {
		if want := formTargets[s.Form]; s.Target != want {
			t.Errorf("%s: target %v, want %v", s.Name, s.Target, want)
		}
	}
}

// TestFormVersions spot-checks the version column: DWARF 2 defined
// 0x01-0x16, DWARF 4 added sec_offset, exprloc, flag_present and
// ref_sig8 (DWARF 4 section 7.5.4), DWARF 5 the rest (its appendix F).
func TestFormVersions(t *testing.T) {
	for s := range Forms() {
		want := uint8(5)
		switch {
		case s.Form <= DW_FORM_indirect:
			want = 2
		case s.Form <= DW_FORM_flag_present || s.Form == DW_FORM_ref_sig8:
			want = 4
		case strings.HasPrefix(s.Name, "DW_FORM_GNU_"):
			want = 0
		}
		if s.Version != want {
			t.Errorf("%s: version %d, want %d", s.Name, s.Version, want)
		}
	}
}

// formVectors are encodings of one value each, from the descriptions of
// the classes in DWARF 5 section 7.5.5 (sizes in bytes; LEB128 examples
// from figures 7.3 and 7.4): form, encoding (version/format/address
// size, "be" for big-endian), the bytes, how many of them the value
// takes, the integer and the bytes it reads ("-" for none).
const formVectors = `
# form                  enc        bytes                              len  v                   p
DW_FORM_addr            5/32/8     8877665544332211ff                 8    0x1122334455667788  -
DW_FORM_addr            5/32/4     44332211ff                         4    0x11223344          -
DW_FORM_addr            4/32/4/be  11223344ff                         4    0x11223344          -
DW_FORM_data1           5/32/8     7fff                               1    0x7f                -
DW_FORM_data2           5/32/8     3412ff                             2    0x1234              -
DW_FORM_data2           5/32/8/be  1234ff                             2    0x1234              -
DW_FORM_data4           5/32/8     78563412ff                         4    0x12345678          -
DW_FORM_data8           5/32/8     0807060504030201ff                 8    0x0102030405060708  -
DW_FORM_data16          5/32/8     000102030405060708090a0b0c0d0e0fff 16   0                   000102030405060708090a0b0c0d0e0f
DW_FORM_udata           5/32/8     b964ff                             2    12857               -
DW_FORM_sdata           5/32/8     807fff                             2    -128                -
DW_FORM_sdata           5/32/8     7eff                               1    -2                  -
DW_FORM_string          5/32/8     6162630064                         4    0                   616263
DW_FORM_block1          5/32/8     02aabbcc                           3    2                   aabb
DW_FORM_block2          5/32/8     0200aabbcc                         4    2                   aabb
DW_FORM_block2          5/32/8/be  0002aabbcc                         4    2                   aabb
DW_FORM_block4          5/32/8     02000000aabbcc                     6    2                   aabb
DW_FORM_block           5/32/8     02aabbcc                           3    2                   aabb
DW_FORM_exprloc         5/32/8     019cff                             2    1                   9c
DW_FORM_flag            5/32/8     01ff                               1    1                   -
DW_FORM_flag_present    5/32/8     ff                                 0    0                   -
DW_FORM_implicit_const  5/32/8     ff                                 0    0                   -
DW_FORM_strp            5/32/8     78563412ff                         4    0x12345678          -
DW_FORM_strp            5/64/8     0807060504030201ff                 8    0x0102030405060708  -
DW_FORM_line_strp       5/64/8     0807060504030201ff                 8    0x0102030405060708  -
DW_FORM_sec_offset      4/32/8     78563412ff                         4    0x12345678          -
DW_FORM_sec_offset      4/64/8     0807060504030201ff                 8    0x0102030405060708  -
DW_FORM_strp_sup        5/64/8     0807060504030201ff                 8    0x0102030405060708  -
DW_FORM_GNU_strp_alt    4/32/8     78563412ff                         4    0x12345678          -
DW_FORM_GNU_ref_alt     4/64/8     0807060504030201ff                 8    0x0102030405060708  -
DW_FORM_ref_addr        2/32/4     44332211ff                         4    0x11223344          -
DW_FORM_ref_addr        2/32/8     8877665544332211ff                 8    0x1122334455667788  -
DW_FORM_ref_addr        3/32/8     44332211ff                         4    0x11223344          -
DW_FORM_ref_addr        3/64/4     8877665544332211ff                 8    0x1122334455667788  -
DW_FORM_ref1            5/32/8     10ff                               1    0x10                -
DW_FORM_ref2            5/32/8     1000ff                             2    0x10                -
DW_FORM_ref4            5/32/8     10000000ff                         4    0x10                -
DW_FORM_ref8            5/32/8     1000000000000000ff                 8    0x10                -
DW_FORM_ref_udata       5/32/8     8001ff                             2    128                 -
DW_FORM_ref_sig8        5/32/8     0807060504030201ff                 8    0x0102030405060708  -
DW_FORM_ref_sup4        5/64/8     78563412ff                         4    0x12345678          -
DW_FORM_ref_sup8        5/32/8     0807060504030201ff                 8    0x0102030405060708  -
DW_FORM_strx            5/32/8     8101ff                             2    129                 -
DW_FORM_strx1           5/32/8     05ff                               1    5                   -
DW_FORM_strx2           5/32/8     0501ff                             2    0x105               -
DW_FORM_strx3           5/32/8     030201ff                           3    0x010203            -
DW_FORM_strx3           5/32/8/be  010203ff                           3    0x010203            -
DW_FORM_strx4           5/64/8     04030201ff                         4    0x01020304          -
DW_FORM_addrx           5/32/8     02ff                               1    2                   -
DW_FORM_addrx1          5/32/8     02ff                               1    2                   -
DW_FORM_addrx2          5/32/8     0201ff                             2    0x102               -
DW_FORM_addrx3          5/32/8     030201ff                           3    0x010203            -
DW_FORM_addrx4          5/32/8     04030201ff                         4    0x01020304          -
DW_FORM_GNU_addr_index  4/32/8     8001ff                             2    128                 -
DW_FORM_GNU_str_index   4/32/8     8001ff                             2    128                 -
DW_FORM_loclistx        5/32/8     03ff                               1    3                   -
DW_FORM_rnglistx        5/32/8     ff01ff                             2    255                 -
`

type formVector struct {
	line  string
	form  Form
	enc   Encoding
	in    []byte
	n     int
	v     uint64
	p     []byte
	field string
}

func parseFormVectors(t *testing.T) []formVector {
	byName := map[string]Form{}
	for s := range Forms() {
		byName[s.Name] = s.Form
	}
	var vs []formVector
	for _, line := range strings.Split(formVectors, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		v := formVector{line: line, field: f[0]}
		var ok bool
		if v.form, ok = byName[f[0]]; !ok {
			t.Fatalf("%s: no such form", f[0])
		}
		e := strings.Split(f[1], "/")
		ver, _ := strconv.Atoi(e[0])
		as, _ := strconv.Atoi(e[2])
		v.enc = Encoding{Version: uint16(ver), Format: Format32, AddrSize: uint8(as), ByteOrder: binary.LittleEndian}
		if e[1] == "64" {
			v.enc.Format = Format64
		}
		if len(e) == 4 {
			v.enc.ByteOrder = binary.BigEndian
		}
		var err error
		if v.in, err = hex.DecodeString(f[2]); err != nil {
			t.Fatal(err)
		}
		v.n, _ = strconv.Atoi(f[3])
		if i, err := strconv.ParseInt(f[4], 0, 64); err == nil {
			v.v = uint64(i)
		} else if v.v, err = strconv.ParseUint(f[4], 0, 64); err != nil {
			t.Fatal(err)
		}
		if f[5] != "-" {
			v.p, _ = hex.DecodeString(f[5])
		}
		vs = append(vs, v)
	}
	return vs
}

// TestFormValue reads each vector with Buf.FormValue: the value, the bytes
// taken (which FixedSize predicts for the fixed sizes), and, cut at every
// shorter length, a FormatError naming the field instead of a value.
func TestFormValue(t *testing.T) {
	vs := parseFormVectors(t)
	seen := map[Form]bool{}
	for _, c := range vs {
		seen[c.form] = true
		s, _ := c.form.Spec()
		b := NewBuf(".debug_info", c.enc.ByteOrder, c.in)
		v, p := b.FormValue(&s, c.enc, c.field)
		if err := b.Err(); err != nil || v != c.v || !bytes.Equal(p, c.p) || int(b.Off()) != c.n {
			t.Errorf("%s\n\tread %#x %x, %d bytes, err %v", c.line, v, p, b.Off(), err)
		}
		if n := s.FixedSize(c.enc); n >= 0 && n != c.n {
			t.Errorf("%s\n\tFixedSize %d", c.line, n)
		}
		for cut := range c.n {
			b := NewBuf(".debug_info", c.enc.ByteOrder, c.in[:cut])
			v, p := b.FormValue(&s, c.enc, c.field)
			var fe *FormatError
			if !errors.As(b.Err(), &fe) || fe.Field != c.field || v != 0 || p != nil {
				t.Errorf("%s\n\tcut to %d bytes: %#x %x, err %v", c.line, cut, v, p, b.Err())
			}
		}
	}
	for s := range Forms() {
		if !seen[s.Form] && s.Size != SizeIndirect {
			t.Errorf("%s: no test vector", s.Name)
		}
	}
	// Neither an unknown form nor an unresolved DW_FORM_indirect reads.
	for _, s := range []FormSpec{{}, func() FormSpec { s, _ := DW_FORM_indirect.Spec(); return s }()} {
		b := NewBuf(".debug_info", binary.LittleEndian, []byte{1, 2, 3})
		if b.FormValue(&s, Default64, "x"); b.Err() == nil {
			t.Errorf("%+v read", s)
		}
	}
}

// TestFormValueLongBlocks reads blocks longer than 127 bytes, where the
// length encodings differ (a ULEB128 length of 300 is 0xac 0x02).
func TestFormValueLongBlocks(t *testing.T) {
	body := bytes.Repeat([]byte{0x96}, 300)
	for _, c := range []struct {
		form Form
		len  []byte
	}{
		{DW_FORM_block2, []byte{0x2c, 0x01}},
		{DW_FORM_block4, []byte{0x2c, 0x01, 0, 0}},
		{DW_FORM_block, []byte{0xac, 0x02}},
		{DW_FORM_exprloc, []byte{0xac, 0x02}},
		{DW_FORM_block1, nil}, // at most 255: 200 bytes
	} {
		in, n := append(append([]byte{}, c.len...), body...), 300
		if c.len == nil {
			in, n = append([]byte{200}, body[:200]...), 200
		}
		s, _ := c.form.Spec()
		b := NewBuf(".debug_info", binary.LittleEndian, append(in, 0xff))
		v, p := b.FormValue(&s, Default64, "x")
		if b.Err() != nil || v != uint64(n) || len(p) != n || int(b.Off()) != len(in) {
			t.Errorf("%v: length %d, %d bytes, %d read, err %v", c.form, v, len(p), b.Off(), b.Err())
		}
	}
}

func TestIndirect(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Form
		n    int
		err  string
	}{
		{"0b", DW_FORM_data1, 1, ""},
		{"1616 0b", DW_FORM_data1, 3, ""},
		{"808004", 0, 0, "out of range"},
		{"21", 0, 0, "implicit_const"},
		{"16", 0, 0, "truncated"},
	} {
		in, _ := hex.DecodeString(strings.ReplaceAll(c.in, " ", ""))
		b := NewBuf(".debug_info", binary.LittleEndian, in)
		f := b.Indirect(DW_FORM_indirect)
		var fe *FormatError
		if c.err == "" && (b.Err() != nil || f != c.want || int(b.Off()) != c.n) {
			t.Errorf("%s: %v after %d bytes, err %v", c.in, f, b.Off(), b.Err())
		}
		if c.err != "" && (!errors.As(b.Err(), &fe) || fe.Field != "DW_FORM_indirect" || !strings.Contains(fe.Error(), c.err)) {
			t.Errorf("%s: %v, err %v, want %q", c.in, f, b.Err(), c.err)
		}
	}
	b := NewBuf(".debug_info", binary.LittleEndian, nil)
	if f := b.Indirect(DW_FORM_data2); f != DW_FORM_data2 || b.Off() != 0 {
		t.Errorf("direct form changed to %v", f)
	}
}

func TestFormSpecNames(t *testing.T) {
	prev := Form(0)
	for s := range Forms() {
		if s.Form <= prev && prev != 0 {
			t.Errorf("%v after %v", s.Form, prev)
		}
		prev = s.Form
		if strings.Contains(s.Size.String(), "(") || strings.Contains(s.Target.String(), "(") {
			t.Errorf("%s: size %v target %v", s.Name, s.Size, s.Target)
		}
	}
	if got := (ClassLineptr | ClassAddress).String(); got != "address,lineptr" {
		t.Errorf("ClassSet String = %q", got)
	}
	if got := fmt.Sprint(SizeClass(200), FormTarget(200), ClassSet(1<<15)); got != "SizeClass(200) FormTarget(200) ClassSet(1<<15)" {
		t.Errorf("unknown names %q", got)
	}
}
