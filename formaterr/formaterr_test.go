package formaterr_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/line"
	"github.com/elfimage/elfimage/elfobj"
	"github.com/elfimage/elfimage/formaterr"
	"github.com/elfimage/elfimage/jit/jitdump"
	"github.com/elfimage/elfimage/jit/perfmap"
	"github.com/elfimage/elfimage/meta"
	"github.com/elfimage/elfimage/procview"
)

// TestOneErrorsAs: the errors of every decoder, from the ELF reader to
// the core file reader, are caught by one errors.As with *formaterr.Error
// (and so with its aliases elfimage.FormatError and dwarf.FormatError),
// and name the source, the offset and the field of what is wrong.
func TestOneErrorsAs(t *testing.T) {
	// An ELF64 little-endian header with e_phentsize 0 and one program
	// header: malformed for the ELF reader, the loader and the core reader.
	ehdr := func(typ uint16) []byte {
		b := make([]byte, 64)
		copy(b, "\x7fELF")
		b[4], b[5], b[6] = 2, 1, 1
		binary.LittleEndian.PutUint16(b[16:], typ)
		binary.LittleEndian.PutUint16(b[18:], 62) // EM_X86_64
		binary.LittleEndian.PutUint32(b[20:], 1)
		binary.LittleEndian.PutUint64(b[32:], 64) // e_phoff
		binary.LittleEndian.PutUint16(b[52:], 64) // e_ehsize
		binary.LittleEndian.PutUint16(b[56:], 1)  // e_phnum, e_phentsize 0
		return b
	}
	longLine := strings.Repeat("x", perfmap.MaxLine+1)
	cases := []struct {
		decoder string
		run     func() error
		source  string
		offset  uint64
		field   string
	}{
		{"ELF reader", func() error { _, err := elfobj.NewBytes(ehdr(3)); return err }, "ELF header", 54, "e_phentsize"},
		{"loader", func() error { _, err := elfimage.Load("short.elf", []byte("\x7fELF"), nil); return err }, "short.elf", 4, "ELF header"},
		{"DWARF line program", func() error {
			_, err := line.NewReader(line.Sections{Line: []byte{2, 0, 0, 0, 9, 0}}, 0, "")
			return err
		}, ".debug_line", 4, "version"},
		{"DWARF buffer", func() error {
			b := dwarf.MakeBuf(".debug_info", binary.LittleEndian, []byte{1})
			b.U32("unit_length")
			return b.Err()
		}, ".debug_info", 0, "unit_length"},
		{"procedure table", func() error { _, err := meta.NewTable(make([]byte, meta.HeaderSize), nil); return err }, meta.SectionProcs, 0, "magic"},
		{"jitdump", func() error {
			h := make([]byte, jitdump.HeaderSize)
			binary.LittleEndian.PutUint32(h, jitdump.Magic)
			binary.LittleEndian.PutUint32(h[4:], jitdump.Version+1)
			binary.LittleEndian.PutUint32(h[8:], jitdump.HeaderSize)
			_, err := jitdump.Parse(h)
			return err
		}, jitdump.Section, 4, "version"},
		{"perf map", func() error { _, err := perfmap.Parse(strings.NewReader(longLine)); return err }, perfmap.Section, 0, "line"},
		{"/proc/PID/maps", func() error { _, err := procview.ParseMaps(strings.NewReader("zzz\n")); return err }, "maps", 0, "line"},
		{"core reader", func() error {
			b := ehdr(1) // ET_REL
			_, err := procview.NewCore(bytes.NewReader(b), int64(len(b)))
			return err
		}, "core header", 16, "e_type"},
	}
	for _, c := range cases {
		err := c.run()
		var fe *formaterr.Error
		if !errors.As(err, &fe) {
			t.Errorf("%s: %v (%T) is not a *formaterr.Error", c.decoder, err, err)
			continue
		}
		if fe.Source != c.source || fe.Offset != c.offset || fe.Field != c.field {
			t.Errorf("%s: %v: source %q, offset %#x, field %q; want %q, %#x, %q", c.decoder, err, fe.Source, fe.Offset, fe.Field, c.source, c.offset, c.field)
		}
		// The aliases catch the same value.
		var root *elfimage.FormatError
		var dw *dwarf.FormatError
		if !errors.As(err, &root) || !errors.As(err, &dw) || root != fe || dw != fe {
			t.Errorf("%s: the aliases elfimage.FormatError and dwarf.FormatError do not catch %v", c.decoder, err)
		}
	}
}

// TestErrorString: the message names source, offset, field and cause, and
// Unwrap returns the cause.
func TestErrorString(t *testing.T) {
	cause := errors.New("unexpected EOF")
	for _, c := range []struct {
		e    *formaterr.Error
		want string
	}{
		{&formaterr.Error{Source: ".debug_line", Offset: 0x10, Field: "version", Msg: "unsupported version 9"}, ".debug_line: version at offset 0x10: unsupported version 9"},
		{&formaterr.Error{Source: "a.elf", Offset: 0, Msg: "empty"}, "a.elf at offset 0x0: empty"},
		{&formaterr.Error{Source: ".zdebug_info", Offset: 0x40, Field: "ch_size", Err: cause}, ".zdebug_info: ch_size at offset 0x40: unexpected EOF"},
		{&formaterr.Error{Source: "jitdump", Offset: 8, Field: "total_size", Msg: "short", Err: cause}, "jitdump: total_size at offset 0x8: short: unexpected EOF"},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
	}
	e := &formaterr.Error{Source: "x", Err: cause}
	if !errors.Is(e, cause) || e.Unwrap() != cause {
		t.Error("Unwrap does not return the cause")
	}
}
