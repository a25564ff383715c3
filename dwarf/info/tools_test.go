package info_test

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/info"
	"github.com/elfimage/elfimage/dwarf/line"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// writeELF writes a minimal ELF64 relocatable file holding the given
// non-allocated sections, enough for llvm-dwarfdump and readelf.
func writeELF(t *testing.T, path string, names []string, data [][]byte) {
	t.Helper()
	le := binary.LittleEndian
	shstr := []byte{0}
	nameOff := make([]uint32, len(names)+1)
	for i, n := range append(names, ".shstrtab") {
		nameOff[i] = uint32(len(shstr))
		shstr = append(shstr, n...)
		shstr = append(shstr, 0)
	}
	data = append(data, shstr)
	var body bytes.Buffer
	offs := make([]uint64, len(data))
	for i, d := range data {
		offs[i] = 64 + uint64(body.Len())
		body.Write(d)
	}
	for body.Len()%8 != 0 {
		body.WriteByte(0)
	}
	shoff := 64 + uint64(body.Len())
	var out bytes.Buffer
	hdr := elf.Header64{
		Ident:     [16]byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)},
		Type:      uint16(elf.ET_REL),
		Machine:   uint16(elf.EM_X86_64),
		Version:   uint32(elf.EV_CURRENT),
		Shoff:     shoff,
		Ehsize:    64,
		Shentsize: 64,
		Shnum:     uint16(len(data) + 1),
		Shstrndx:  uint16(len(data)),
	}
	binary.Write(&out, le, hdr)
	out.Write(body.Bytes())
	binary.Write(&out, le, elf.Section64{})
	for i, d := range data {
		typ := elf.SHT_PROGBITS
		if i == len(data)-1 {
			typ = elf.SHT_STRTAB
		}
		binary.Write(&out, le, elf.Section64{Name: nameOff[i], Type: uint32(typ), Off: offs[i], Size: uint64(len(d)), Addralign: 1})
	}
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTools writes a unit and its line program the way the linker will
// and has llvm-dwarfdump verify them and readelf decode the line table.
func TestTools(t *testing.T) {
	for _, enc := range []dwarf.Encoding{
		dwarf.Default64,
		{Version: 4, Format: dwarf.Format32, AddrSize: 8, ByteOrder: binary.LittleEndian},
		{Version: 5, Format: dwarf.Format64, AddrSize: 8, ByteOrder: binary.LittleEndian},
	} {
		lineStr, str := dwarf.NewStrTab(), dwarf.NewStrTab()
		p := &line.Program{Enc: enc, CompDir: "/work/src", Files: []line.File{{Name: "fact.scm"}, {Name: "fact.scm"}},
			Sequences: []line.Sequence{{Start: 0x1000, End: 0x1030, Rows: []line.Row{
				{Address: 0x1000, File: 1, Line: 3, Column: 1, IsStmt: true},
				{Address: 0x1008, File: 1, Line: 4, Column: 5, IsStmt: true, PrologueEnd: true},
				{Address: 0x1020, File: 1, Line: 7, Column: 9, IsStmt: true},
			}}}}
		lineSec, err := p.Encode(lineStr)
		if err != nil {
			t.Fatal(err)
		}
		intType := &info.DIE{Tag: dwarf.DW_TAG_base_type, Attrs: []info.Attr{
			{Name: dwarf.DW_AT_name, Value: info.String("long")},
			{Name: dwarf.DW_AT_byte_size, Value: info.Udata(8)},
			{Name: dwarf.DW_AT_encoding, Value: info.Udata(uint64(dwarf.DW_ATE_signed))},
		}}
		root := &info.DIE{Tag: dwarf.DW_TAG_compile_unit, Attrs: []info.Attr{
			{Name: dwarf.DW_AT_producer, Value: info.String("elfimage")},
			{Name: dwarf.DW_AT_name, Value: info.String("fact.scm")},
			{Name: dwarf.DW_AT_comp_dir, Value: info.String("/work/src")},
			{Name: dwarf.DW_AT_low_pc, Value: info.Addr(0x1000)},
			{Name: dwarf.DW_AT_high_pc, Value: info.Udata(0x30)},
			{Name: dwarf.DW_AT_stmt_list, Value: info.SecOffset(0)},
		}, Children: []*info.DIE{intType, {Tag: dwarf.DW_TAG_subprogram, Attrs: []info.Attr{
			{Name: dwarf.DW_AT_name, Value: info.String("fact")},
			{Name: dwarf.DW_AT_low_pc, Value: info.Addr(0x1000)},
			{Name: dwarf.DW_AT_high_pc, Value: info.Udata(0x30)},
			{Name: dwarf.DW_AT_frame_base, Value: info.Exprloc([]byte{byte(dwarf.DW_OP_call_frame_cfa)})},
			{Name: dwarf.DW_AT_decl_file, Value: info.Udata(1)},
			{Name: dwarf.DW_AT_decl_line, Value: info.Udata(3)},
			{Name: dwarf.DW_AT_type, Value: info.Ref(intType)},
			{Name: dwarf.DW_AT_external, Value: info.Flag(true)},
		}, Children: []*info.DIE{{Tag: dwarf.DW_TAG_formal_parameter, Attrs: []info.Attr{
			{Name: dwarf.DW_AT_name, Value: info.String("n")},
			{Name: dwarf.DW_AT_type, Value: info.Ref(intType)},
			{Name: dwarf.DW_AT_location, Value: info.Exprloc([]byte{byte(dwarf.DW_OP_fbreg), 0x68})},
		}}}}}}
		infoSec, abbrev, err := info.Encode([]*info.Unit{{Enc: enc, Root: root}}, str)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "t.o")
		names := []string{".debug_abbrev", ".debug_info", ".debug_str", ".debug_line"}
		secs := [][]byte{abbrev, infoSec, str.Bytes(), lineSec}
		if enc.Version >= 5 {
			names = append(names, ".debug_line_str")
			secs = append(secs, lineStr.Bytes())
		}
		writeELF(t, path, names, secs)

		dump := tooltest.Require(t, "llvm-dwarfdump", "llvm-dwarfdump-14")
		out, err := exec.Command(dump, "--verify", path).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "No errors.") {
			t.Errorf("v%d %v: llvm-dwarfdump --verify: %v\n%s", enc.Version, enc.Format, err, out)
		}
		out, err = exec.Command(dump, "--debug-info", path).CombinedOutput()
		if err != nil || !strings.Contains(string(out), `DW_AT_name	("fact")`) || !strings.Contains(string(out), "DW_OP_fbreg -24") {
			t.Errorf("v%d: llvm-dwarfdump --debug-info: %v\n%s", enc.Version, err, out)
		}
		readelf := tooltest.Require(t, "readelf")
		out, err = exec.Command(readelf, "--debug-dump=decodedline", path).CombinedOutput()
		s := string(out)
		if testing.Verbose() {
			t.Logf("%s", out)
		}
		if err != nil || !strings.Contains(s, "fact.scm") || !regexpRow(s, "4", "0x1008") || !regexpRow(s, "7", "0x1020") {
			t.Errorf("v%d: readelf --debug-dump=decodedline: %v\n%s", enc.Version, err, out)
		}
	}
}

// regexpRow reports whether a readelf decodedline row has the line and
// address.
func regexpRow(out, line, addr string) bool {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && f[0] == "fact.scm" && f[1] == line && f[2] == addr {
			return true
		}
	}
	return false
}
