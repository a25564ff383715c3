package line

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/elfimage/elfimage/dwarf"
)

// ErrInvalidProgram is wrapped by every error [Program.Encode] returns for a
// model it refuses (unsorted rows, a row outside its sequence, a file or
// directory index out of range, an address wider than the address size).
// Match it with errors.Is.
var ErrInvalidProgram = errors.New("line: invalid program")

// Default header parameters used when the corresponding [Program] fields
// are zero.
const (
	DefaultMinInstLength = 1
	DefaultLineBase      = -5
	DefaultLineRange     = 14
	DefaultOpcodeBase    = 13
)

// Program is a line number program to encode (DWARF 5 section 6.2): the
// header's directory and file tables and the sequences of rows.
//
// File indexes follow DWARF 5 numbering in every version: Files[0] is the
// primary source file and rows normally use file 1, which the linker makes
// name the same file as entry 0 so that consumers that count files from 1
// agree. For versions 2 to 4 entry 0 is not written (those versions have
// no file 0), so a row must not use file 0 there.
//
// Directory 0 is CompDir; directory i (i ≥ 1) is Dirs[i-1].
type Program struct {
	// Enc selects version (2 to 5), offset format, address size and byte
	// order.
	Enc dwarf.Encoding
	// CompDir is the compilation directory, directory entry 0. For
	// versions 2 to 4 it is implicit (DW_AT_comp_dir of the unit) and
	// not written.
	CompDir string
	// Dirs are the include directories after CompDir.
	Dirs []string
	// Files are the file entries, see the type's comment for numbering.
	Files []File
	// Sequences are the address ranges with their rows. Each gets one
	// DW_LNE_set_address and ends with DW_LNE_end_sequence at End.
	Sequences []Sequence

	// MinInstLength is minimum_instruction_length; 0 means 1.
	MinInstLength uint8
	// LineBase and LineRange parameterise special opcodes; LineRange 0
	// means the defaults (LineBase -5, LineRange 14) for both.
	LineBase  int8
	LineRange uint8
	// OpcodeBase is opcode_base; 0 means 13. It must be at least 13, the
	// number of standard opcodes of DWARF 5 plus one.
	OpcodeBase uint8
}

// File is a file entry: a name and the index of its directory (0 is the
// compilation directory). A name that is an absolute path ignores Dir.
type File struct {
	Name string
	Dir  uint64
}

// Sequence is a contiguous address range [Start, End) of machine code with
// its rows, sorted by address (equal addresses allowed; the last row at an
// address is the one that holds for it). Every row must lie in
// [Start, End).
type Sequence struct {
	Start, End uint64
	Rows       []Row
}

// Row is one row of the line number matrix, the registers of the line
// number state machine (DWARF 5 section 6.2.2, table 6.3) at the moment a
// row is appended. The writer uses Address, File, Line, Column, IsStmt,
// BasicBlock, PrologueEnd, EpilogueBegin, ISA and Discriminator; it refuses
// rows with OpIndex or EndSequence set (a [Sequence]'s End plays that
// part). The reader fills every field.
type Row struct {
	// Address is the machine code address (DWARF 2).
	Address uint64
	// OpIndex is the operation index within a VLIW instruction (DWARF 4);
	// always 0 when maximum_operations_per_instruction is 1.
	OpIndex uint64
	// File is the file entry index (DWARF 2; 0-based in DWARF 5).
	File uint64
	// Line is the 1-based source line; 0 means no source line (DWARF 2).
	Line uint32
	// Column is the 1-based column; 0 means unknown (DWARF 2).
	Column uint32
	// IsStmt marks a recommended breakpoint location (DWARF 2).
	IsStmt bool
	// BasicBlock marks the start of a basic block (DWARF 2).
	BasicBlock bool
	// EndSequence marks the first address after a sequence; such a row
	// carries no source position (DWARF 2).
	EndSequence bool
	// PrologueEnd marks where a breakpoint on function entry should go
	// (DWARF 3).
	PrologueEnd bool
	// EpilogueBegin marks where a breakpoint before function exit should
	// go (DWARF 3).
	EpilogueBegin bool
	// ISA is the instruction set architecture (DWARF 3).
	ISA uint64
	// Discriminator is the block of the row among blocks with the same
	// file, line and column (DWARF 4).
	Discriminator uint64
}

type params struct {
	minInst   uint64
	lineBase  int64
	lineRange uint64
	opBase    uint64
}

func (p *Program) params() params {
	q := params{minInst: uint64(p.MinInstLength), lineBase: int64(p.LineBase), lineRange: uint64(p.LineRange), opBase: uint64(p.OpcodeBase)}
	if q.minInst == 0 {
		q.minInst = DefaultMinInstLength
	}
	if q.lineRange == 0 {
		q.lineBase, q.lineRange = DefaultLineBase, DefaultLineRange
	}
	if q.opBase == 0 {
		q.opBase = DefaultOpcodeBase
	}
	return q
}

// standardOpcodeLengths gives the number of ULEB128 operands of standard
// opcodes 1 to 12 (DWARF 5 section 6.2.5.2).
var standardOpcodeLengths = [...]uint8{0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidProgram, fmt.Sprintf(format, args...))
}

// Encode returns the line number program as one unit of .debug_line
// (unit_length through the last opcode), ready to be placed at any offset
// of the section.
//
// For version 5 the directory and file tables use DW_LNCT_path with
// DW_FORM_line_strp, offsets into lineStr (.debug_line_str), and
// DW_LNCT_directory_index with DW_FORM_udata; when lineStr is nil the paths
// are written inline as DW_FORM_string. Versions 2 to 4 write the
// include_directories and file_names tables (lineStr is unused).
//
// Rows become special opcodes where the line and address advance fit,
// otherwise DW_LNS_advance_line, DW_LNS_const_add_pc, DW_LNS_advance_pc, or
// DW_LNS_fixed_advance_pc for an advance that is not a multiple of
// MinInstLength. Only registers that change are set.
//
// Errors wrap [ErrInvalidProgram] for invalid models and describe the
// offending sequence and row. Cost: linear in the number of rows and files.
func (p *Program) Encode(lineStr *dwarf.StrTab) ([]byte, error) {
	data, _, err := p.encode(lineStr, false, nil)
	return data, err
}

// EncodeOffsets is [Program.Encode] that also reports where each sequence
// starts: seqOffsets[i] is the offset, from the start of data (the unit's
// unit_length field), of the DW_LNE_set_address opcode that begins
// Sequences[i]. Add the offset at which data is placed in .debug_line to
// get the section offset a reader such as [Reader.SequenceRow] takes.
// Errors and cost are those of Encode, plus one []uint64 of
// len(p.Sequences).
func (p *Program) EncodeOffsets(lineStr *dwarf.StrTab) (data []byte, seqOffsets []uint64, err error) {
	return p.encode(lineStr, true, nil)
}

// EncodeStrOffsets is [Program.EncodeOffsets] that also returns the
// offsets, from the start of data, of every DW_FORM_line_strp field of
// the version 5 header (4 bytes each, 8 in the 64-bit format): the fields
// an ET_REL object relocates against .debug_line_str (x86-64 psABI
// R_X86_64_32). The list is empty for versions 2 to 4 and for a nil
// lineStr. Errors and cost are those of EncodeOffsets.
func (p *Program) EncodeStrOffsets(lineStr *dwarf.StrTab) (data []byte, seqOffsets, strOffsets []uint64, err error) {
	strOffsets = []uint64{}
	data, seqOffsets, err = p.encode(lineStr, true, &strOffsets)
	return data, seqOffsets, strOffsets, err
}

func (p *Program) encode(lineStr *dwarf.StrTab, wantOffsets bool, strOffsets *[]uint64) ([]byte, []uint64, error) {
	enc := p.Enc
	if err := enc.Validate(); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrInvalidProgram, err)
	}
	q := p.params()
	if q.opBase < DefaultOpcodeBase {
		return nil, nil, invalid("opcode_base %d below %d", q.opBase, DefaultOpcodeBase)
	}
	if q.lineBase > 0 || q.lineBase+int64(q.lineRange) <= 0 {
		return nil, nil, invalid("line_base %d and line_range %d do not include a zero line advance", q.lineBase, q.lineRange)
	}
	if q.opBase+q.lineRange-1 > 255 {
		return nil, nil, invalid("opcode_base %d + line_range %d leaves no special opcode", q.opBase, q.lineRange)
	}
	if err := p.validate(q); err != nil {
		return nil, nil, err
	}

	// The section at once: a sequence is its DW_LNE_set_address and
	// end_sequence (about 16 bytes) and a few bytes per row.
	est := 256
	for i := range p.Sequences {
		est += 16 + 4*len(p.Sequences[i].Rows)
	}
	w := writer{order: enc.ByteOrder, b: make([]byte, 0, est)}
	off := enc.Format.OffsetSize()
	// unit_length
	if enc.Format == dwarf.Format64 {
		w.u32(0xffffffff)
	}
	lenAt := len(w.b)
	w.uint(off, 0)
	unitStart := len(w.b)
	w.u16(enc.Version) // version
	if enc.Version >= 5 {
		w.u8(enc.AddrSize) // address_size
		w.u8(0)            // segment_selector_size
	}
	hlenAt := len(w.b)
	w.uint(off, 0) // header_length
	hdrStart := len(w.b)
	w.u8(uint8(q.minInst)) // minimum_instruction_length
	if enc.Version >= 4 {
		w.u8(1) // maximum_operations_per_instruction
	}
	w.u8(1)                  // default_is_stmt
	w.u8(uint8(q.lineBase))  // line_base
	w.u8(uint8(q.lineRange)) // line_range
	w.u8(uint8(q.opBase))    // opcode_base
	for i := uint64(1); i < q.opBase; i++ {
		var n uint8
		if int(i-1) < len(standardOpcodeLengths) {
			n = standardOpcodeLengths[i-1]
		}
		w.u8(n) // standard_opcode_lengths
	}
	if enc.Version >= 5 {
		pathForm := dwarf.DW_FORM_line_strp
		if lineStr == nil {
			pathForm = dwarf.DW_FORM_string
		}
		putPath := func(s string) {
			if lineStr == nil {
				w.b = append(w.b, s...)
				w.u8(0)
				return
			}
			if strOffsets != nil {
				*strOffsets = append(*strOffsets, uint64(len(w.b)))
			}
			w.uint(off, lineStr.Add(s))
		}
		w.u8(1) // directory_entry_format_count
		w.uleb(uint64(dwarf.DW_LNCT_path))
		w.uleb(uint64(pathForm))
		w.uleb(uint64(1 + len(p.Dirs))) // directories_count
		putPath(p.CompDir)
		for _, d := range p.Dirs {
			putPath(d)
		}
		w.u8(2) // file_name_entry_format_count
		w.uleb(uint64(dwarf.DW_LNCT_path))
		w.uleb(uint64(pathForm))
		w.uleb(uint64(dwarf.DW_LNCT_directory_index))
		w.uleb(uint64(dwarf.DW_FORM_udata))
		w.uleb(uint64(len(p.Files))) // file_names_count
		for _, f := range p.Files {
			putPath(f.Name)
			w.uleb(f.Dir)
		}
	} else {
		for _, d := range p.Dirs {
			w.b = append(w.b, d...) // include_directories
			w.u8(0)
		}
		w.u8(0)
		for _, f := range p.Files[min(1, len(p.Files)):] {
			w.b = append(w.b, f.Name...) // file_names
			w.u8(0)
			w.uleb(f.Dir) // directory index
			w.uleb(0)     // modification time
			w.uleb(0)     // file length
		}
		w.u8(0)
	}
	hdrLen := len(w.b) - hdrStart
	var offs []uint64
	if wantOffsets {
		offs = make([]uint64, len(p.Sequences))
	}
	for i := range p.Sequences {
		if wantOffsets {
			offs[i] = uint64(len(w.b))
		}
		if err := w.sequence(&p.Sequences[i], enc, q); err != nil {
			return nil, nil, fmt.Errorf("%w: sequence %d: %v", ErrInvalidProgram, i, err)
		}
	}
	dwarf.PutUint(w.b[hlenAt:], enc.ByteOrder, off, uint64(hdrLen))
	dwarf.PutUint(w.b[lenAt:], enc.ByteOrder, off, uint64(len(w.b)-unitStart))
	if enc.Format == dwarf.Format32 && len(w.b)-unitStart > 0xfffffff0-1 {
		return nil, nil, invalid("unit of %d bytes too large for 32-bit DWARF", len(w.b)-unitStart)
	}
	return w.b, offs, nil
}

func (p *Program) validate(q params) error {
	v5 := p.Enc.Version >= 5
	ndirs := uint64(1 + len(p.Dirs))
	if !v5 {
		for i, d := range p.Dirs {
			if d == "" {
				return invalid("directory %d is empty (would end include_directories)", i+1)
			}
		}
		for i := 1; i < len(p.Files); i++ {
			if p.Files[i].Name == "" {
				return invalid("file %d has an empty name (would end file_names)", i)
			}
		}
	}
	check := func(what, s string) error {
		if strings.IndexByte(s, 0) >= 0 {
			return invalid("%s %q contains a NUL byte", what, s)
		}
		return nil
	}
	if err := check("compilation directory", p.CompDir); err != nil {
		return err
	}
	for _, d := range p.Dirs {
		if err := check("directory", d); err != nil {
			return err
		}
	}
	for i, f := range p.Files {
		if err := check("file name", f.Name); err != nil {
			return err
		}
		if f.Dir >= ndirs {
			return invalid("file %d %q: directory index %d out of range [0, %d)", i, f.Name, f.Dir, ndirs)
		}
	}
	minFile := uint64(0)
	if !v5 {
		minFile = 1
	}
	maxAddr := ^uint64(0)
	if p.Enc.AddrSize == 4 {
		maxAddr = 0xffffffff
	}
	for i := range p.Sequences {
		s := &p.Sequences[i]
		if s.Start > s.End {
			return invalid("sequence %d: start %#x after end %#x", i, s.Start, s.End)
		}
		if s.End > maxAddr {
			return invalid("sequence %d: end %#x does not fit in %d-byte addresses", i, s.End, p.Enc.AddrSize)
		}
		prev := s.Start
		for j := range s.Rows {
			r := &s.Rows[j]
			switch {
			case r.Address < s.Start || r.Address >= s.End:
				return invalid("sequence %d row %d: address %#x outside [%#x, %#x)", i, j, r.Address, s.Start, s.End)
			case r.Address < prev:
				return invalid("sequence %d row %d: address %#x before previous row's %#x", i, j, r.Address, prev)
			case r.File < minFile || r.File >= uint64(len(p.Files)):
				return invalid("sequence %d row %d: file index %d out of range [%d, %d)", i, j, r.File, minFile, len(p.Files))
			case r.OpIndex != 0:
				return invalid("sequence %d row %d: op_index %d (VLIW not supported)", i, j, r.OpIndex)
			case r.EndSequence:
				return invalid("sequence %d row %d: end_sequence row (use Sequence.End)", i, j)
			}
			prev = r.Address
		}
	}
	return nil
}

type writer struct {
	b     []byte
	order binary.ByteOrder
}

func (w *writer) u8(v uint8)      { w.b = append(w.b, v) }
func (w *writer) u16(v uint16)    { w.uint(2, uint64(v)) }
func (w *writer) u32(v uint32)    { w.uint(4, uint64(v)) }
func (w *writer) uleb(v uint64)   { w.b = dwarf.AppendUleb128(w.b, v) }
func (w *writer) sleb(v int64)    { w.b = dwarf.AppendSleb128(w.b, v) }
func (w *writer) op(op dwarf.LNS) { w.b = append(w.b, byte(op)) }
func (w *writer) uint(size int, v uint64) {
	w.b = dwarf.AppendUint(w.b, w.order, size, v)
}

// extended starts an extended opcode whose operands take n bytes.
func (w *writer) extended(op dwarf.LNE, n int) {
	w.u8(0)
	w.uleb(uint64(1 + n))
	w.u8(uint8(op))
}

// sequence writes one sequence: set_address, the rows, end_sequence.
func (w *writer) sequence(s *Sequence, enc dwarf.Encoding, q params) error {
	w.extended(dwarf.DW_LNE_set_address, int(enc.AddrSize))
	w.uint(int(enc.AddrSize), s.Start)
	// The registers after DW_LNE_set_address (section 6.2.2, table 6.4).
	addr, file, line, col, isStmt, isa := s.Start, uint64(1), int64(1), uint64(0), true, uint64(0)
	for j := range s.Rows {
		r := &s.Rows[j]
		if r.File != file {
			w.op(dwarf.DW_LNS_set_file)
			w.uleb(r.File)
			file = r.File
		}
		if uint64(r.Column) != col {
			w.op(dwarf.DW_LNS_set_column)
			w.uleb(uint64(r.Column))
			col = uint64(r.Column)
		}
		if r.IsStmt != isStmt {
			w.op(dwarf.DW_LNS_negate_stmt)
			isStmt = r.IsStmt
		}
		if r.ISA != isa {
			w.op(dwarf.DW_LNS_set_isa)
			w.uleb(r.ISA)
			isa = r.ISA
		}
		if r.BasicBlock {
			w.op(dwarf.DW_LNS_set_basic_block)
		}
		if r.PrologueEnd {
			w.op(dwarf.DW_LNS_set_prologue_end)
		}
		if r.EpilogueBegin {
			w.op(dwarf.DW_LNS_set_epilogue_begin)
		}
		if r.Discriminator != 0 {
			w.extended(dwarf.DW_LNE_set_discriminator, dwarf.Uleb128Size(r.Discriminator))
			w.uleb(r.Discriminator)
		}
		units, err := w.advance(r.Address-addr, q, false)
		if err != nil {
			return fmt.Errorf("row %d: %v", j, err)
		}
		w.row(int64(r.Line)-line, units, q)
		addr, line = r.Address, int64(r.Line)
	}
	if _, err := w.advance(s.End-addr, q, true); err != nil {
		return fmt.Errorf("end: %v", err)
	}
	w.extended(dwarf.DW_LNE_end_sequence, 0)
	return nil
}

// advance prepares an address advance of delta bytes. It returns the
// advance in units of minimum_instruction_length still to be applied (by a
// special opcode), or writes DW_LNS_fixed_advance_pc itself and returns 0
// when delta is not a multiple of the unit. With now set the whole
// advance is written.
func (w *writer) advance(delta uint64, q params, now bool) (units uint64, err error) {
	if delta%q.minInst != 0 {
		if delta > 0xffff {
			return 0, fmt.Errorf("address advance %#x is neither a multiple of minimum_instruction_length %d nor fits DW_LNS_fixed_advance_pc", delta, q.minInst)
		}
		w.op(dwarf.DW_LNS_fixed_advance_pc)
		w.uint(2, delta)
		return 0, nil
	}
	units = delta / q.minInst
	if now && units != 0 {
		if units == (255-q.opBase)/q.lineRange {
			w.op(dwarf.DW_LNS_const_add_pc)
		} else {
			w.op(dwarf.DW_LNS_advance_pc)
			w.uleb(units)
		}
		return 0, nil
	}
	return units, nil
}

// row appends a row advancing the line by dline and the address by units.
func (w *writer) row(dline int64, units uint64, q params) {
	if dline < q.lineBase || dline >= q.lineBase+int64(q.lineRange) {
		w.op(dwarf.DW_LNS_advance_line)
		w.sleb(dline)
		dline = 0
	}
	special := func(units uint64) (byte, bool) {
		if units > 255 {
			return 0, false
		}
		op := uint64(dline-q.lineBase) + q.lineRange*units + q.opBase
		return byte(op), op <= 255
	}
	if op, ok := special(units); ok {
		w.u8(op)
		return
	}
	constAdv := (255 - q.opBase) / q.lineRange
	if units >= constAdv {
		if op, ok := special(units - constAdv); ok {
			w.op(dwarf.DW_LNS_const_add_pc)
			w.u8(op)
			return
		}
	}
	w.op(dwarf.DW_LNS_advance_pc)
	w.uleb(units)
	op, _ := special(0)
	w.u8(op)
}
