package loc_test

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	godwarf "debug/dwarf"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/info"
	"github.com/elfimage/elfimage/dwarf/loc"
	"github.com/elfimage/elfimage/internal/readelf"
	"github.com/elfimage/elfimage/internal/tooltest"
)

const (
	lowPC  = 0x401000
	highPC = 0x401100
)

// sample is one unit with a subprogram, a lexical block with a range list
// and a variable with a location list, in every debug section.
type sample struct {
	enc                  dwarf.Encoding
	info, abbrev, str    []byte
	locs, ranges, arange []byte
	locName, rangesName  string
	blockRanges          []loc.Range
	varLocs              []loc.Entry
}

func buildSample(t *testing.T, enc dwarf.Encoding) *sample {
	t.Helper()
	s := &sample{enc: enc}
	s.blockRanges = []loc.Range{{0x401010, 0x401020}, {0x401030, 0x401048}, {0x401080, 0x401090}}
	s.varLocs = []loc.Entry{
		{Start: 0x401000, End: 0x401010, Expr: []byte{byte(dwarf.DW_OP_reg0) + 5}},                   // rdi
		{Start: 0x401010, End: 0x401100, Expr: []byte{byte(dwarf.DW_OP_fbreg), 0x68}},                // fbreg -24
		{Start: 0x401100 - 8, End: 0x401100, Expr: []byte{byte(dwarf.DW_OP_breg0) + 7, 0x10}},        // breg7 16
		{Start: 0x401000, End: 0x401001, Expr: []byte{byte(dwarf.DW_OP_lit0) + 3, byte(0x9f)}},       // lit3 stack_value
		{Start: 0x401040, End: 0x401050, Expr: []byte{byte(dwarf.DW_OP_reg0) + 3, 0x93, 8}},          // rbx piece 8
		{Start: 0x401050, End: 0x401060, Expr: []byte{byte(dwarf.DW_OP_breg0) + 6, 0x70, 0x06}},      // rbp-16 deref
		{Start: 0x4010f0, End: 0x4010f4, Expr: []byte{byte(dwarf.DW_OP_reg0) + 1}},                   // rdx
		{Start: 0x401060, End: 0x401061, Expr: []byte{byte(dwarf.DW_OP_reg0) + 2}},                   // rcx
		{Start: 0x401061, End: 0x401062, Expr: []byte{byte(dwarf.DW_OP_reg0) + 4, 0x93, 4, 0x93, 4}}, // two pieces
	}
	lb, err := loc.NewLocLists(enc, lowPC)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := loc.NewRangeLists(enc, lowPC)
	if err != nil {
		t.Fatal(err)
	}
	locOff, err := lb.AddList(s.varLocs)
	if err != nil {
		t.Fatal(err)
	}
	rngOff, err := rb.AddList(s.blockRanges)
	if err != nil {
		t.Fatal(err)
	}
	s.locs, s.ranges, s.locName, s.rangesName = lb.Bytes(), rb.Bytes(), lb.Section(), rb.Section()

	long := &info.DIE{Tag: dwarf.DW_TAG_base_type, Attrs: []info.Attr{
		{Name: dwarf.DW_AT_name, Value: info.String("long")},
		{Name: dwarf.DW_AT_byte_size, Value: info.Udata(8)},
		{Name: dwarf.DW_AT_encoding, Value: info.Udata(uint64(dwarf.DW_ATE_signed))},
	}}
	block := &info.DIE{Tag: dwarf.DW_TAG_lexical_block, Attrs: []info.Attr{
		{Name: dwarf.DW_AT_ranges, Value: info.SecOffset(rngOff)},
	}}
	root := &info.DIE{Tag: dwarf.DW_TAG_compile_unit, Attrs: []info.Attr{
		{Name: dwarf.DW_AT_producer, Value: info.String("elfimage")},
		{Name: dwarf.DW_AT_name, Value: info.String("fact.scm")},
		{Name: dwarf.DW_AT_low_pc, Value: info.Addr(lowPC)},
		{Name: dwarf.DW_AT_high_pc, Value: info.Udata(highPC - lowPC)},
	}, Children: []*info.DIE{long, {Tag: dwarf.DW_TAG_subprogram, Attrs: []info.Attr{
		{Name: dwarf.DW_AT_name, Value: info.String("fact")},
		{Name: dwarf.DW_AT_low_pc, Value: info.Addr(lowPC)},
		{Name: dwarf.DW_AT_high_pc, Value: info.Udata(highPC - lowPC)},
		{Name: dwarf.DW_AT_frame_base, Value: info.Exprloc([]byte{byte(dwarf.DW_OP_call_frame_cfa)})},
	}, Children: []*info.DIE{{Tag: dwarf.DW_TAG_variable, Attrs: []info.Attr{
		{Name: dwarf.DW_AT_name, Value: info.String("n")},
		{Name: dwarf.DW_AT_type, Value: info.Ref(long)},
		{Name: dwarf.DW_AT_location, Value: info.SecOffset(locOff)},
	}}, block}}}}
	str := dwarf.NewStrTab()
	unit := &info.Unit{Enc: enc, Root: root}
	s.info, s.abbrev, err = info.Encode([]*info.Unit{unit}, str)
	if err != nil {
		t.Fatal(err)
	}
	s.str = str.Bytes()
	s.arange, err = loc.EncodeAranges(enc, unit.Offset, []loc.Range{{lowPC, highPC}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func toolEncodings() []dwarf.Encoding {
	le := binary.LittleEndian
	return []dwarf.Encoding{
		dwarf.Default64,
		{Version: 5, Format: dwarf.Format64, AddrSize: 8, ByteOrder: le},
		{Version: 4, Format: dwarf.Format32, AddrSize: 8, ByteOrder: le},
		{Version: 4, Format: dwarf.Format64, AddrSize: 8, ByteOrder: le},
	}
}

// TestGoDWARF reads the lexical block's DW_AT_ranges with Go's debug/dwarf
// (.debug_rnglists for DWARF 5, .debug_ranges for DWARF 4) and compares
// with what was written, and with this package's reader.
func TestGoDWARF(t *testing.T) {
	encs := toolEncodings()
	encs = append(encs, dwarf.Encoding{Version: 5, Format: dwarf.Format32, AddrSize: 4, ByteOrder: binary.LittleEndian},
		dwarf.Encoding{Version: 4, Format: dwarf.Format32, AddrSize: 4, ByteOrder: binary.LittleEndian})
	for _, enc := range encs {
		t.Run(fmt.Sprintf("v%d-%v-a%d", enc.Version, enc.Format, enc.AddrSize), func(t *testing.T) {
			s := buildSample(t, enc)
			var ranges []byte
			if enc.Version < 5 {
				ranges = s.ranges
			}
			d, err := godwarf.New(s.abbrev, s.arange, nil, s.info, nil, nil, ranges, s.str)
			if err != nil {
				t.Fatal(err)
			}
			if enc.Version >= 5 {
				if err := d.AddSection(".debug_rnglists", s.ranges); err != nil {
					t.Fatal(err)
				}
			}
			r := d.Reader()
			found := false
			for {
				e, err := r.Next()
				if err != nil {
					t.Fatal(err)
				}
				if e == nil {
					break
				}
				if e.Tag != godwarf.TagLexDwarfBlock {
					continue
				}
				found = true
				got, err := d.Ranges(e)
				if err != nil {
					t.Fatal(err)
				}
				var want [][2]uint64
				for _, r := range s.blockRanges {
					want = append(want, [2]uint64{r.Start, r.End})
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("debug/dwarf Ranges = %x, want %x", got, want)
				}
				off := uint64(e.Val(godwarf.AttrRanges).(int64))
				mine, err := loc.ReadRangeList(loc.Sections{Ranges: s.ranges, RngLists: s.ranges}, enc, off, lowPC)
				if err != nil || !reflect.DeepEqual(mine, s.blockRanges) {
					t.Errorf("ReadRangeList = %v, %v", mine, err)
				}
			}
			if !found {
				t.Fatal("no lexical block")
			}
			// debug/dwarf's own use of .debug_aranges: LookupFunction
			// is not it, but Reader.SeekPC consults aranges.
			r = d.Reader()
			e, err := r.SeekPC(0x401050)
			if err != nil || e == nil || e.Tag != godwarf.TagCompileUnit {
				t.Errorf("SeekPC via .debug_aranges: %v, %v", e, err)
			}
		})
	}
}

// TestLLVMDwarfdump has llvm-dwarfdump verify a file with every section
// and checks that it prints the lists and the address ranges written.
func TestLLVMDwarfdump(t *testing.T) {
	dump := tooltest.Require(t, "llvm-dwarfdump", "llvm-dwarfdump-14")
	for _, enc := range toolEncodings() {
		name := fmt.Sprintf("v%d-%v", enc.Version, enc.Format)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := buildSample(t, enc)
			file := readelf.WriteELF(elf.EM_X86_64, []readelf.Section{
				{Name: ".text", Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Addr: lowPC, Data: make([]byte, highPC-lowPC)},
				{Name: ".debug_abbrev", Data: s.abbrev},
				{Name: ".debug_info", Data: s.info},
				{Name: ".debug_str", Data: s.str},
				{Name: s.locName, Data: s.locs},
				{Name: s.rangesName, Data: s.ranges},
				{Name: ".debug_aranges", Data: s.arange},
			})
			path := filepath.Join(t.TempDir(), "t.so")
			if err := os.WriteFile(path, file, 0o644); err != nil {
				t.Fatal(err)
			}
			run := func(args ...string) string {
				out, err := exec.Command(dump, append(args, path)...).CombinedOutput()
				if err != nil {
					t.Fatalf("llvm-dwarfdump %v: %v\n%s", args, err, out)
				}
				if testing.Verbose() {
					t.Logf("llvm-dwarfdump %v:\n%s", args, out)
				}
				return string(out)
			}
			if out := run("--verify"); !strings.Contains(out, "No errors.") {
				t.Errorf("--verify:\n%s", out)
			}

			// Location list: every entry as [start, end) and its
			// expression, in the unit's DIE dump (resolved addresses).
			out := run("--debug-info")
			for _, e := range s.varLocs {
				re := regexp.MustCompile(fmt.Sprintf(`\[0x0*%x, 0x0*%x\): DW_OP_`, e.Start, e.End))
				if !re.MatchString(out) {
					t.Errorf("--debug-info: no location entry [%#x, %#x)\n%s", e.Start, e.End, out)
				}
			}
			if !strings.Contains(out, "DW_OP_fbreg -24") || !strings.Contains(out, "DW_OP_breg7 RSP+16") {
				t.Errorf("--debug-info: expressions missing\n%s", out)
			}
			for _, r := range s.blockRanges {
				re := regexp.MustCompile(fmt.Sprintf(`\[0x0*%x, 0x0*%x\)`, r.Start, r.End))
				if !re.MatchString(out) {
					t.Errorf("--debug-info: no range [%#x, %#x)\n%s", r.Start, r.End, out)
				}
			}

			// The sections' own dumps, with the entry kinds (-v).
			var lists, ranges []loc.Range
			if enc.Version >= 5 {
				out = run("--debug-loclists", "-v")
				if !strings.Contains(out, "version = 0x0005") || strings.Count(out, "DW_LLE_base_address ") != 1 ||
					strings.Count(out, "DW_LLE_offset_pair") != len(s.varLocs) || !strings.Contains(out, "DW_LLE_end_of_list") {
					t.Errorf("--debug-loclists -v: want one base_address, %d offset_pair entries and end_of_list\n%s", len(s.varLocs), out)
				}
				lists = parseRanges(t, out, `=> \[(0x[0-9a-f]+), (0x[0-9a-f]+)\)`, 0)
				out = run("--debug-rnglists", "-v")
				if strings.Count(out, "DW_RLE_offset_pair") != len(s.blockRanges) || !strings.Contains(out, "DW_RLE_end_of_list") {
					t.Errorf("--debug-rnglists -v:\n%s", out)
				}
				ranges = parseRanges(t, out, `=> \[(0x[0-9a-f]+), (0x[0-9a-f]+)\)`, 0)
			} else {
				// DWARF 4 dumps print the pairs relative to the base.
				out = run("--debug-loc")
				lists = parseRanges(t, out, `\((0x[0-9a-f]+), (0x[0-9a-f]+)\): DW_OP`, lowPC)
				out = run("--debug-ranges")
				ranges = parseRanges(t, out, `(?m)^[0-9a-f]{8} ([0-9a-f]{16}) ([0-9a-f]{16})$`, lowPC)
			}
			var want []loc.Range
			for _, e := range s.varLocs {
				want = append(want, loc.Range{Start: e.Start, End: e.End})
			}
			if !reflect.DeepEqual(lists, want) {
				t.Errorf("location list dump: %x, want %x", lists, want)
			}
			if !reflect.DeepEqual(ranges, s.blockRanges) {
				t.Errorf("range list dump: %x, want %x", ranges, s.blockRanges)
			}
			out = run("--debug-aranges")
			aranges := parseRanges(t, out, `\[(0x[0-9a-f]+), (0x[0-9a-f]+)\)`, 0)
			if !reflect.DeepEqual(aranges, []loc.Range{{lowPC, highPC}}) || !strings.Contains(out, "version = 0x0002") {
				t.Errorf("--debug-aranges: %x\n%s", aranges, out)
			}
		})
	}
}

// parseRanges returns the pairs of hexadecimal numbers pattern matches in
// out, plus base.
func parseRanges(t *testing.T, out, pattern string, base uint64) []loc.Range {
	t.Helper()
	var rs []loc.Range
	for _, m := range regexp.MustCompile(pattern).FindAllStringSubmatch(out, -1) {
		a, err1 := strconv.ParseUint(strings.TrimPrefix(m[1], "0x"), 16, 64)
		b, err2 := strconv.ParseUint(strings.TrimPrefix(m[2], "0x"), 16, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("bad numbers in %q", m[0])
		}
		rs = append(rs, loc.Range{Start: base + a, End: base + b})
	}
	return rs
}
