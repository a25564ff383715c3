package line

import (
	"encoding/binary"
	"fmt"
	"io"
	"path"
	"slices"
	"unsafe"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/formaterr"
)

const secLine = ".debug_line"

// Sections holds the sections a line program refers to. Line is
// .debug_line; Str (.debug_str) and LineStr (.debug_line_str) resolve
// DW_FORM_strp and DW_FORM_line_strp in DWARF 5 headers and may be nil
// when unused. Order is the byte order; nil means little-endian.
type Sections struct {
	Line, Str, LineStr []byte
	Order              binary.ByteOrder
}

// Header is a decoded line program header (DWARF 5 section 6.2.4).
type Header struct {
	// Offset is the unit's offset in .debug_line.
	Offset uint64
	// Format is the offset format from unit_length.
	Format dwarf.Format
	// Version is the line table version, 2 to 5.
	Version uint16
	// AddrSize and SegmentSelectorSize come from a version 5 header;
	// 0 for earlier versions (DW_LNE_set_address then gives the size).
	AddrSize, SegmentSelectorSize uint8
	// HeaderLength is header_length: bytes from after it to the first
	// opcode.
	HeaderLength uint64
	// MinInstLength is minimum_instruction_length (bytes per address
	// advance unit); MaxOpsPerInst is maximum_operations_per_instruction
	// (1 before version 4).
	MinInstLength, MaxOpsPerInst uint8
	// DefaultIsStmt is default_is_stmt, the is_stmt register's start
	// value.
	DefaultIsStmt bool
	// LineBase, LineRange and OpcodeBase define the special opcodes
	// (section 6.2.5.1).
	LineBase              int8
	LineRange, OpcodeBase uint8
	// StandardOpcodeLengths[i] is the operand count of opcode i+1.
	StandardOpcodeLengths []uint8
	// Dirs is the directory table as written, with, for versions 2 to
	// 4, the compilation directory passed to the decoder as entry 0.
	Dirs []string
	// ProgramOffset is the .debug_line offset of the first opcode; End
	// is the offset just past the unit: the program is
	// [ProgramOffset, End).
	ProgramOffset, End uint64
}

// FileEntry is a decoded file entry.
type FileEntry struct {
	// Name is the name as written (DW_LNCT_path).
	Name string
	// Dir is the directory index (DW_LNCT_directory_index).
	Dir uint64
	// Path is Name resolved against its directory and the compilation
	// directory: Name if absolute, else Dirs[Dir]/Name, with a relative
	// directory taken relative to directory 0. Empty for the missing
	// entry 0 of versions 2 to 4 and for entries without DW_LNCT_path.
	Path string
	// MTime and Size are DW_LNCT_timestamp and DW_LNCT_size (0 when
	// absent).
	MTime, Size uint64
	// MD5 is DW_LNCT_MD5 when HasMD5 is set.
	MD5    [16]byte
	HasMD5 bool
}

// Reader runs a line number program and returns its rows one at a time
// (DWARF 5 section 6.2.2). Use [NewReader], then [Reader.Next] until
// io.EOF.
type Reader struct {
	hdr   Header
	files []FileEntry
	b     dwarf.Buf
	// state holds the state machine registers (section 6.2.2, table
	// 6.3): address, op_index, file, line, column, is_stmt,
	// basic_block, end_sequence, prologue_end, epilogue_begin, isa and
	// discriminator; see [Row] for each register's version.
	state Row
	// line is the line register at full width; advance_line may take it
	// outside uint32 in hostile input, Row.Line is its low 32 bits.
	line  int64
	lineS Sections
	// opLens holds the header's standard_opcode_lengths when they fit
	// (Header.StandardOpcodeLengths then points here: one allocation
	// less per reader).
	opLens [24]uint8
	// rangeMul divides by line_range with a multiplication: for an
	// adjusted opcode a < 256, a/line_range = a*rangeMul>>24 (rangeMul is
	// 2^24/line_range + 1; the error is below 256/2^24, less than the
	// 1/line_range a fraction can lack before the next integer).
	rangeMul uint32
	// special holds, for each opcode, ReadRows' decoding of it as a
	// special opcode when maximum_operations_per_instruction is 1
	// (section 6.2.5.1): 0 for an opcode below opcode_base, else the
	// address advance (minimum_instruction_length times the operation
	// advance, below 2^16) shifted left by 10 over the line advance plus
	// 512 (line_base + a value below 255: in [384, 894), never 0).
	special [256]uint32
	// tabs locates the directory and file tables that a reader from
	// [NewSequenceReader] checked but did not build.
	tabs lazyTables
}

// lazyTables locates a version 5 header's directory ([0]) and file ([1])
// tables, checked but not built (Reader.files and Header.Dirs are nil)
// when on is set.
type lazyTables struct {
	on    bool
	start uint64            // offset of directory_entry_format_count
	off   [2]uint64         // offsets of directories_count and file_names_count
	n     [2]uint64         // the counts
	nFmt  [2]uint8          // entry formats in fmts
	fmts  [2][8]entryFormat // the entry formats
}

// NewReader decodes the header of the line program at offset off of
// sec.Line and returns a reader positioned at its first opcode. compDir is
// the unit's DW_AT_comp_dir: directory 0 for versions 2 to 4, and the base
// of relative directories. Errors are *formaterr.Error. Cost: linear in
// the header size.
func NewReader(sec Sections, off uint64, compDir string) (*Reader, error) {
	r := &Reader{}
	if err := r.init(sec, off, compDir, false); err != nil {
		return nil, err
	}
	return r, nil
}

// NewSequenceReader is [NewReader] for a reader that runs single sequences
// ([Reader.SequenceRow]) and names single files ([Reader.FilePath]): it
// checks the header as NewReader does and fails with the same errors, but
// a version 5 header's directory and file tables (whose entry formats have
// at most 8 fields each) are not built into Go values: [Reader.Files]
// returns nil and Header.Dirs is nil, and [Reader.FilePath] finds the one
// entry asked in the header's bytes. (A DW_LNE_define_file run by
// [Reader.Next] builds them.) Versions 2 to 4 are read as NewReader reads
// them. Cost: linear in the header size; one allocation, the reader.
func NewSequenceReader(sec Sections, off uint64, compDir string) (*Reader, error) {
	r := &Reader{}
	if err := r.InitSequence(sec, off, compDir); err != nil {
		return nil, err
	}
	return r, nil
}

// InitSequence is [NewSequenceReader] into a Reader the caller holds
// (for example inside a larger object, to save an allocation): it
// overwrites all of *r with the reader NewSequenceReader(sec, off,
// compDir) returns, or returns the error NewSequenceReader would. After an
// error r holds no usable reader. Cost: that of NewSequenceReader, without
// its allocation.
func (r *Reader) InitSequence(sec Sections, off uint64, compDir string) error {
	*r = Reader{}
	return r.init(sec, off, compDir, true)
}

func (r *Reader) init(sec Sections, off uint64, compDir string, lazy bool) error {
	order := sec.Order
	if order == nil {
		order = binary.LittleEndian
	}
	r.lineS = sec
	r.b = dwarf.MakeBuf(secLine, order, sec.Line)
	r.tabs.on = lazy
	if err := r.header(off, compDir); err != nil {
		return err
	}
	r.rangeMul = 1<<24/uint32(r.hdr.LineRange) + 1
	r.setSpecial()
	r.reset()
	return nil
}

// Version returns the version of the line program unit at offset off of
// the .debug_line bytes data (DWARF 5 section 6.2.4: unit_length, then
// version) without decoding the rest of its header: what a caller needs to
// know whether the unit takes a compilation directory ([NewReader]'s
// compDir, used before version 5). order nil means little-endian. Errors
// are *formaterr.Error (a truncated unit_length or version, or a version
// outside [2, 5]). Cost: O(1).
func Version(data []byte, order binary.ByteOrder, off uint64) (uint16, error) {
	if order == nil {
		order = binary.LittleEndian
	}
	b := dwarf.MakeBuf(secLine, order, data)
	b.Seek(off, "unit offset")
	length, _ := b.UnitLength("unit_length")
	b.Limit(length, "unit_length")
	verOff := b.Off()
	v := b.U16("version")
	if b.Err() == nil && (v < 2 || v > 5) {
		b.FailAt(verOff, "version", fmt.Sprintf("unsupported line table version %d", v))
	}
	if err := b.Err(); err != nil {
		return 0, err
	}
	return v, nil
}

// Header returns the decoded header.
func (r *Reader) Header() *Header { return &r.hdr }

// Files returns the file entries indexed by the file register; for
// versions 2 to 4 entry 0 is empty. DW_LNE_define_file appends to it as
// the program runs.
func (r *Reader) Files() []FileEntry { return r.files }

// Offset returns the .debug_line offset of the next opcode.
func (r *Reader) Offset() uint64 { return r.b.Off() }

func (r *Reader) header(off uint64, compDir string) error {
	b := &r.b
	h := &r.hdr
	h.Offset = off
	b.Seek(off, "unit offset")
	length, format := b.UnitLength("unit_length")
	h.Format = format
	b.Limit(length, "unit_length")
	h.End = b.End()
	verOff := b.Off()
	h.Version = b.U16("version")
	if b.Err() == nil && (h.Version < 2 || h.Version > 5) {
		b.FailAt(verOff, "version", fmt.Sprintf("unsupported line table version %d", h.Version))
	}
	if h.Version >= 5 {
		h.AddrSize = b.U8("address_size")
		h.SegmentSelectorSize = b.U8("segment_selector_size")
	}
	hlOff := b.Off()
	h.HeaderLength = b.Offset(format, "header_length")
	if b.Err() == nil && h.HeaderLength > h.End-b.Off() {
		b.FailAt(hlOff, "header_length", fmt.Sprintf("header_length %#x runs past unit end %#x", h.HeaderLength, h.End))
	}
	h.ProgramOffset = b.Off() + h.HeaderLength
	unitEnd := b.Limit(h.HeaderLength, "header_length")
	h.MinInstLength = b.U8("minimum_instruction_length")
	h.MaxOpsPerInst = 1
	if h.Version >= 4 {
		f := b.Off()
		h.MaxOpsPerInst = b.U8("maximum_operations_per_instruction")
		if b.Err() == nil && h.MaxOpsPerInst == 0 {
			b.FailAt(f, "maximum_operations_per_instruction", "zero")
		}
	}
	h.DefaultIsStmt = b.U8("default_is_stmt") != 0
	h.LineBase = int8(b.U8("line_base"))
	f := b.Off()
	h.LineRange = b.U8("line_range")
	if b.Err() == nil && h.LineRange == 0 {
		b.FailAt(f, "line_range", "zero")
	}
	f = b.Off()
	h.OpcodeBase = b.U8("opcode_base")
	if b.Err() == nil && h.OpcodeBase == 0 {
		b.FailAt(f, "opcode_base", "zero")
	}
	if n := int(h.OpcodeBase) - 1; n > 0 {
		f = b.Off()
		lens := b.Bytes(uint64(n), "standard_opcode_lengths")
		if len(lens) <= len(r.opLens) {
			h.StandardOpcodeLengths = r.opLens[:copy(r.opLens[:], lens):len(lens)]
		} else {
			h.StandardOpcodeLengths = slices.Clone(lens)
		}
		for i, l := range h.StandardOpcodeLengths {
			if i < len(standardOpcodeLengths) && l != standardOpcodeLengths[i] {
				b.FailAt(f+uint64(i), "standard_opcode_lengths", fmt.Sprintf("opcode %d has %d operands, want %d", i+1, l, standardOpcodeLengths[i]))
				break
			}
		}
	}
	var lazyErr error
	switch {
	case h.Version >= 5 && r.tabs.on:
		at := b.Off()
		var ok bool
		if ok, lazyErr = r.tables5Lazy(); !ok {
			r.tabs.on = false
			b.Seek(at, "directory_entry_format_count")
			r.tables5()
		}
	case h.Version >= 5:
		r.tables5()
	default:
		r.tabs.on = false
		r.tables4(compDir)
	}
	if b.Err() != nil {
		return b.Err()
	}
	if lazyErr != nil {
		return lazyErr
	}
	// The directory of every file must exist; resolve paths.
	for i := range r.files {
		if h.Version < 5 && i == 0 {
			continue
		}
		if err := r.resolve(&r.files[i]); err != nil {
			return err
		}
	}
	b.SetEnd(unitEnd)
	b.Seek(h.ProgramOffset, "header_length")
	return b.Err()
}

// tables4 reads include_directories and file_names (versions 2 to 4).
func (r *Reader) tables4(compDir string) {
	b := &r.b
	r.hdr.Dirs = []string{compDir}
	for b.Err() == nil {
		d := b.CString("include_directories")
		if len(d) == 0 {
			break
		}
		r.hdr.Dirs = append(r.hdr.Dirs, string(d))
	}
	r.files = []FileEntry{{}}
	for b.Err() == nil {
		name := b.CString("file_names")
		if len(name) == 0 {
			break
		}
		r.files = append(r.files, FileEntry{
			Name:  string(name),
			Dir:   b.Uleb("directory index"),
			MTime: b.Uleb("modification time"),
			Size:  b.Uleb("file length"),
		})
	}
}

type entryFormat struct {
	lnct dwarf.LNCT
	form dwarf.Form
}

// formats reads an entry format description into dst's backing array
// when it has room (else a new one).
func (r *Reader) formats(dst []entryFormat, field string) []entryFormat {
	b := &r.b
	n := int(b.U8(field))
	if n > b.Len()/2 {
		b.Fail(field, fmt.Sprintf("%d entry formats do not fit in the header", n))
		return nil
	}
	fs := dst[:0]
	if cap(fs) < n {
		fs = make([]entryFormat, n)
	}
	fs = fs[:n]
	for i := range fs {
		fs[i].lnct = dwarf.LNCT(b.Uleb("content type code"))
		f := b.Off()
		fs[i].form = dwarf.Form(b.Uleb("form"))
		switch fs[i].form {
		case dwarf.DW_FORM_string, dwarf.DW_FORM_line_strp, dwarf.DW_FORM_strp,
			dwarf.DW_FORM_udata, dwarf.DW_FORM_data1, dwarf.DW_FORM_data2,
			dwarf.DW_FORM_data4, dwarf.DW_FORM_data8, dwarf.DW_FORM_data16,
			dwarf.DW_FORM_block:
		default:
			b.FailAt(f, field, fmt.Sprintf("unsupported form %v in entry format", fs[i].form))
			return nil
		}
	}
	return fs
}

// count5 reads a version 5 directories_count or file_names_count (field)
// and checks it against the formats fs and the bytes left; false when b
// failed.
func count5(b *dwarf.Buf, fs []entryFormat, field string) (uint64, bool) {
	f := b.Off()
	n := b.Uleb(field)
	if b.Err() != nil {
		return 0, false
	}
	if n > 0 && len(fs) == 0 {
		b.FailAt(f, field, fmt.Sprintf("%d entries without entry format", n))
		return 0, false
	}
	// Every entry takes at least one byte.
	if n > uint64(b.Len()) {
		b.FailAt(f, field, fmt.Sprintf("%d entries do not fit in %d bytes", n, b.Len()))
		return 0, false
	}
	return n, true
}

func (r *Reader) enc() dwarf.Encoding {
	return dwarf.Encoding{Version: r.hdr.Version, Format: r.hdr.Format, AddrSize: r.hdr.AddrSize}
}

// entries5 reads count-prefixed directory or file entries (version 5);
// field names the count.
func (r *Reader) entries5(fs []entryFormat, field string) []FileEntry {
	b := &r.b
	n, ok := count5(b, fs, field)
	if !ok {
		return nil
	}
	enc := r.enc()
	es := make([]FileEntry, n)
	for i := range es {
		if !r.entry5(b, fs, enc, &es[i], nil) {
			return nil
		}
	}
	return es
}

// entry5 reads one directory or file entry of formats fs from b into e.
// With name nil the path goes to e.Name (a copy); otherwise *name is set
// to its bytes in the section and e.Name is left alone. It reports false
// when b failed.
func (r *Reader) entry5(b *dwarf.Buf, fs []entryFormat, enc dwarf.Encoding, e *FileEntry, name *[]byte) bool {
	for _, ef := range fs {
		at := b.Off()
		// formats let only forms through that need no unit: inline
		// data, or an offset in a string section.
		spec, _ := ef.form.Spec()
		v, p := b.FormValue(&spec, enc, ef.lnct.String())
		if b.Err() != nil {
			return false
		}
		var s, blk []byte
		isStr := spec.Classes&dwarf.ClassString != 0
		switch spec.Target {
		case dwarf.TargetStr, dwarf.TargetLineStr:
			sec, data := ".debug_line_str", r.lineS.LineStr
			if spec.Target == dwarf.TargetStr {
				sec, data = ".debug_str", r.lineS.Str
			}
			str, err := dwarf.CStringBytesAt(sec, data, v, ef.lnct.String())
			if err != nil {
				b.FailAt(at, ef.lnct.String(), err.Error())
				return false
			}
			s = str
		default:
			if isStr {
				s = p
			} else if p != nil { // data16, block: no integer
				blk, v = p, 0
			}
		}
		switch ef.lnct {
		case dwarf.DW_LNCT_path:
			if !isStr {
				b.FailAt(at, "DW_LNCT_path", fmt.Sprintf("form %v is not a string form", ef.form))
				return false
			}
			if name != nil {
				*name = s
			} else {
				e.Name = string(s)
			}
		case dwarf.DW_LNCT_directory_index:
			e.Dir = v
		case dwarf.DW_LNCT_timestamp:
			e.MTime = v
		case dwarf.DW_LNCT_size:
			e.Size = v
		case dwarf.DW_LNCT_MD5:
			if len(blk) == 16 {
				copy(e.MD5[:], blk)
				e.HasMD5 = true
			}
		}
	}
	return true
}

// tables5Lazy checks the directory and file tables of version 5 as
// tables5 and resolve would (the same errors: those of reading, then the
// first directory index out of range, which it returns) and records where
// they are in r.tabs, building neither. It reports false, with b past
// some entry formats, when a format list does not fit r.tabs.fmts: the
// caller then seeks back and builds the tables.
func (r *Reader) tables5Lazy() (bool, error) {
	b := &r.b
	t := &r.tabs
	t.start = b.Off()
	enc := r.enc()
	var resolveErr error
	for k, field := range [2]string{"directory_entry_format", "file_name_entry_format"} {
		fs := r.formats(t.fmts[k][:0], field)
		if len(fs) > len(t.fmts[k]) {
			return false, nil
		}
		t.nFmt[k] = uint8(len(fs))
		t.off[k] = b.Off()
		n, ok := count5(b, fs, count5Fields[k])
		if !ok {
			return true, nil
		}
		t.n[k] = n
		for range n {
			var e FileEntry
			var name []byte
			if !r.entry5(b, fs, enc, &e, &name) {
				return true, nil
			}
			if k == 1 && resolveErr == nil && e.Dir >= t.n[0] {
				resolveErr = r.dirRangeError(string(name), e.Dir, t.n[0])
			}
		}
	}
	return true, resolveErr
}

var count5Fields = [2]string{"directories_count", "file_names_count"}

func (r *Reader) dirRangeError(name string, dir, n uint64) error {
	return &formaterr.Error{Source: secLine, Offset: r.hdr.Offset, Field: "directory index", Msg: fmt.Sprintf("file %q: directory %d out of range [0, %d)", name, dir, n)}
}

// buildTables builds the tables of a reader from NewSequenceReader that
// left them in the header (they were checked then).
func (r *Reader) buildTables() {
	if !r.tabs.on {
		return
	}
	saved := r.b
	r.b = dwarf.MakeBuf(secLine, saved.Order, r.lineS.Line)
	r.b.SetEnd(int(r.hdr.ProgramOffset))
	r.b.Seek(r.tabs.start, "directory_entry_format_count")
	r.tables5()
	for i := range r.files {
		r.resolve(&r.files[i])
	}
	r.b = saved
	r.tabs.on = false
}

// FilePath returns the path of file entry i, Files()[i].Path (see
// [FileEntry.Path]), or false when i is out of range of the file table
// (DW_LNE_define_file entries count only once [Reader.Next] ran them).
// On a reader from [NewSequenceReader] it walks the header's file table
// to entry i and the directory table to that entry's directory, in place,
// and allocates the one string (a name that needs no cleaning: one
// allocation); otherwise it costs nothing. It does not modify r: it may
// be called concurrently with itself and [Reader.SequenceRow].
func (r *Reader) FilePath(i uint64) (string, bool) {
	t := &r.tabs
	if !t.on {
		if i < uint64(len(r.files)) {
			return r.files[i].Path, true
		}
		return "", false
	}
	dir0, dir, dirIdx, name, ok := r.fileEntry(i)
	if !ok {
		return "", false
	}
	return joinPath(dir0, dir, dirIdx, name), true
}

// AppendFilePath appends to dst the path [Reader.FilePath] returns for
// file entry i and returns the extended slice, and false (dst
// unchanged) when FilePath's is false. It walks the header as FilePath
// does; the path is built in dst, so that a dst with room for it costs no
// allocation (a path that needs cleaning may take one, as in FilePath).
// It does not modify r.
func (r *Reader) AppendFilePath(dst []byte, i uint64) ([]byte, bool) {
	t := &r.tabs
	if !t.on {
		if i < uint64(len(r.files)) {
			return append(dst, r.files[i].Path...), true
		}
		return dst, false
	}
	dir0, dir, dirIdx, name, ok := r.fileEntry(i)
	if !ok {
		return dst, false
	}
	return appendJoinPath(dst, dir0, dir, dirIdx, name), true
}

// fileEntry walks a lazy reader's header to file entry i and its
// directory: the directory 0 and entry directory bytes, the directory
// index and the name bytes, all in the section.
func (r *Reader) fileEntry(i uint64) (dir0, dir []byte, dirIdx uint64, name []byte, ok bool) {
	t := &r.tabs
	if i >= t.n[1] {
		return nil, nil, 0, nil, false
	}
	b := dwarf.MakeBuf(secLine, r.b.Order, r.lineS.Line)
	b.SetEnd(int(r.hdr.ProgramOffset))
	enc := r.enc()
	var e FileEntry
	b.Seek(t.off[1], "file_names_count")
	b.Uleb("file_names_count")
	for range i + 1 {
		e, name = FileEntry{}, nil
		if !r.entry5(&b, t.fmts[1][:t.nFmt[1]], enc, &e, &name) {
			return nil, nil, 0, nil, false // checked by NewSequenceReader: a changed mapping
		}
	}
	b.Seek(t.off[0], "directories_count")
	b.Uleb("directories_count")
	for j := range e.Dir + 1 {
		var de FileEntry
		dir = nil
		if !r.entry5(&b, t.fmts[0][:t.nFmt[0]], enc, &de, &dir) {
			return nil, nil, 0, nil, false
		}
		if j == 0 {
			dir0 = dir
		}
	}
	return dir0, dir, e.Dir, name, true
}

// joinPath is resolve on bytes: name resolved against directory dirIdx
// (dir) and directory 0 (dir0), in one string.
func joinPath(dir0, dir []byte, dirIdx uint64, name []byte) string {
	var buf [256]byte
	return string(appendJoinPath(buf[:0], dir0, dir, dirIdx, name))
}

// appendJoinPath is joinPath into dst: the same path, appended.
func appendJoinPath(dst, dir0, dir []byte, dirIdx uint64, name []byte) []byte {
	if len(name) == 0 || isAbsBytes(name) || len(dir) == 0 {
		return append(dst, name...)
	}
	start := len(dst)
	if dirIdx != 0 && !isAbsBytes(dir) && len(dir0) > 0 {
		dst = append(append(dst, dir0...), '/')
	}
	dst = append(append(append(dst, dir...), '/'), name...)
	p := dst[start:]
	// path.Clean returns its argument, or a prefix of it, when there is
	// nothing else to clean; the view of p is read only by Clean.
	c := path.Clean(unsafe.String(unsafe.SliceData(p), len(p)))
	if len(c) > 0 && unsafe.StringData(c) == unsafe.SliceData(p) {
		return dst[:start+len(c)]
	}
	return append(dst[:start], c...)
}

func isAbsBytes(p []byte) bool { return len(p) > 0 && (p[0] == '/' || p[0] == '\\') }

// tables5 reads the directory and file name tables of version 5.
func (r *Reader) tables5() {
	var buf [8]entryFormat // formats are a few pairs: usually no allocation
	dirs := r.entries5(r.formats(buf[:0], "directory_entry_format"), "directories_count")
	r.hdr.Dirs = make([]string, len(dirs))
	for i := range dirs {
		r.hdr.Dirs[i] = dirs[i].Name
	}
	r.files = r.entries5(r.formats(buf[:0], "file_name_entry_format"), "file_names_count")
}

func isAbs(p string) bool { return len(p) > 0 && (p[0] == '/' || p[0] == '\\') }

func join(dir, name string) string {
	if dir == "" || name == "" || isAbs(name) {
		return name
	}
	return path.Join(dir, name)
}

func (r *Reader) resolve(e *FileEntry) error {
	dirs := r.hdr.Dirs
	if e.Dir >= uint64(len(dirs)) {
		return &formaterr.Error{Source: secLine, Offset: r.hdr.Offset, Field: "directory index", Msg: fmt.Sprintf("file %q: directory %d out of range [0, %d)", e.Name, e.Dir, len(dirs))}
	}
	d := dirs[e.Dir]
	if e.Dir != 0 && !isAbs(d) {
		d = join(dirs[0], d)
	}
	e.Path = join(d, e.Name)
	return nil
}

// setSpecial fills r.special from the header (once per reader: 256
// entries).
func (r *Reader) setSpecial() {
	h := &r.hdr
	for op := int(h.OpcodeBase); op < 256; op++ {
		adj := uint32(op) - uint32(h.OpcodeBase)
		q := adj / uint32(h.LineRange)
		lineAdv := int32(h.LineBase) + int32(adj-q*uint32(h.LineRange))
		r.special[op] = uint32(h.MinInstLength)*q<<10 | uint32(lineAdv+512)
	}
}

// reset sets the registers to their values at the start of a sequence
// (DWARF 5 section 6.2.2, table 6.4).
func (r *Reader) reset() {
	r.state = Row{File: 1, Line: 1, IsStmt: r.hdr.DefaultIsStmt}
	r.line = 1
}

// advance applies an operation advance (section 6.2.5.1).
func (r *Reader) advance(opAdv uint64) {
	h := &r.hdr
	if h.MaxOpsPerInst == 1 {
		r.state.Address += uint64(h.MinInstLength) * opAdv
		return
	}
	m := uint64(h.MaxOpsPerInst)
	// Split to avoid overflow of op_index + opAdv.
	q, rem := opAdv/m, opAdv%m
	oi := r.state.OpIndex + rem
	q += oi / m
	r.state.Address += uint64(h.MinInstLength) * q
	r.state.OpIndex = oi % m
}

// Next runs the program up to the next row and stores it in *row. It
// returns io.EOF after the last row, or a *formaterr.Error. Every opcode
// consumes at least one byte, so a program of n bytes yields at most n
// rows. Cost: allocation-free except for DW_LNE_define_file.
func (r *Reader) Next(row *Row) error {
	b := &r.b
	h := &r.hdr
	if h.MaxOpsPerInst == 1 && b.Err() == nil {
		// The opcodes compilers emit for nearly every row, decoded from
		// the bytes directly; anything else (and any operand that does
		// not end before the unit does) goes to the loop below, from the
		// opcode's first byte.
		data, off, end := b.Data(), int(b.Off()), int(b.End())
		if end > len(data) {
			end = len(data)
		}
	fast:
		for off < end {
			op := data[off]
			if op >= h.OpcodeBase {
				adj := uint32(op - h.OpcodeBase)
				q := adj * r.rangeMul >> 24
				r.state.Address += uint64(h.MinInstLength) * uint64(q)
				r.line += int64(h.LineBase) + int64(adj-q*uint32(h.LineRange))
				b.Seek(uint64(off+1), "opcode")
				r.emit(row)
				return nil
			}
			switch dwarf.LNS(op) {
			case dwarf.DW_LNS_copy:
				b.Seek(uint64(off+1), "opcode")
				r.emit(row)
				return nil
			case dwarf.DW_LNS_advance_pc:
				v, n := dwarf.Uleb128(data[off+1 : end])
				if n == 0 {
					break fast
				}
				r.state.Address += uint64(h.MinInstLength) * v
				off += 1 + n
			case dwarf.DW_LNS_advance_line:
				v, n := dwarf.Sleb128(data[off+1 : end])
				if n == 0 {
					break fast
				}
				r.line += v
				off += 1 + n
			case dwarf.DW_LNS_set_file:
				v, n := dwarf.Uleb128(data[off+1 : end])
				if n == 0 {
					break fast
				}
				r.state.File = v
				off += 1 + n
			case dwarf.DW_LNS_set_column:
				v, n := dwarf.Uleb128(data[off+1 : end])
				if n == 0 {
					break fast
				}
				r.state.Column = uint32(v)
				off += 1 + n
			case dwarf.DW_LNS_negate_stmt:
				r.state.IsStmt = !r.state.IsStmt
				off++
			case dwarf.DW_LNS_set_basic_block:
				r.state.BasicBlock = true
				off++
			case dwarf.DW_LNS_set_prologue_end:
				r.state.PrologueEnd = true
				off++
			case dwarf.DW_LNS_set_epilogue_begin:
				r.state.EpilogueBegin = true
				off++
			case dwarf.DW_LNS_const_add_pc:
				r.state.Address += uint64(h.MinInstLength) * uint64((255-uint32(h.OpcodeBase))*r.rangeMul>>24)
				off++
			default:
				break fast
			}
		}
		b.Seek(uint64(off), "opcode")
	}
	for {
		if err := b.Err(); err != nil {
			return err
		}
		if b.Len() == 0 {
			return io.EOF
		}
		at := b.Off()
		op := b.U8("opcode")
		if op >= h.OpcodeBase {
			adj := uint64(op - h.OpcodeBase)
			r.advance(adj / uint64(h.LineRange))
			r.line += int64(h.LineBase) + int64(adj%uint64(h.LineRange))
			r.emit(row)
			return nil
		}
		switch dwarf.LNS(op) {
		case 0:
			n := b.Uleb("extended opcode length")
			if b.Err() == nil && (n == 0 || n > uint64(b.Len())) {
				b.FailAt(at, "extended opcode length", fmt.Sprintf("length %d with %d bytes left", n, b.Len()))
			}
			if b.Err() != nil {
				return b.Err()
			}
			end := b.Off() + n
			sub := dwarf.LNE(b.U8("extended opcode"))
			switch sub {
			case dwarf.DW_LNE_end_sequence:
				r.state.EndSequence = true
				r.emit(row)
				r.reset()
				b.Seek(end, "extended opcode")
				return b.Err()
			case dwarf.DW_LNE_set_address:
				size := n - 1
				switch size {
				case 1, 2, 4, 8:
					r.state.Address = b.Uint(int(size), "DW_LNE_set_address")
					r.state.OpIndex = 0
				default:
					b.FailAt(at, "DW_LNE_set_address", fmt.Sprintf("address size %d", size))
				}
			case dwarf.DW_LNE_define_file:
				name := b.CString("DW_LNE_define_file")
				e := FileEntry{Name: string(name), Dir: b.Uleb("directory index"), MTime: b.Uleb("modification time"), Size: b.Uleb("file length")}
				if b.Err() == nil {
					r.buildTables()
					if err := r.resolve(&e); err != nil {
						b.FailAt(at, "DW_LNE_define_file", err.Error())
					}
					r.files = append(r.files, e)
				}
			case dwarf.DW_LNE_set_discriminator:
				r.state.Discriminator = b.Uleb("DW_LNE_set_discriminator")
			}
			if b.Err() == nil && b.Off() > end {
				b.FailAt(at, "extended opcode length", fmt.Sprintf("%v operands overrun length %d", sub, n))
			}
			b.Seek(end, "extended opcode")
		case dwarf.DW_LNS_copy:
			r.emit(row)
			return nil
		case dwarf.DW_LNS_advance_pc:
			r.advance(b.Uleb("DW_LNS_advance_pc"))
		case dwarf.DW_LNS_advance_line:
			r.line += b.Sleb("DW_LNS_advance_line")
		case dwarf.DW_LNS_set_file:
			r.state.File = b.Uleb("DW_LNS_set_file")
		case dwarf.DW_LNS_set_column:
			r.state.Column = uint32(b.Uleb("DW_LNS_set_column"))
		case dwarf.DW_LNS_negate_stmt:
			r.state.IsStmt = !r.state.IsStmt
		case dwarf.DW_LNS_set_basic_block:
			r.state.BasicBlock = true
		case dwarf.DW_LNS_const_add_pc:
			r.advance(uint64(255-h.OpcodeBase) / uint64(h.LineRange))
		case dwarf.DW_LNS_fixed_advance_pc:
			r.state.Address += uint64(b.U16("DW_LNS_fixed_advance_pc"))
			r.state.OpIndex = 0
		case dwarf.DW_LNS_set_prologue_end:
			r.state.PrologueEnd = true
		case dwarf.DW_LNS_set_epilogue_begin:
			r.state.EpilogueBegin = true
		case dwarf.DW_LNS_set_isa:
			r.state.ISA = b.Uleb("DW_LNS_set_isa")
		default:
			// An opcode this reader does not know: skip its operands.
			for i := uint8(0); i < h.StandardOpcodeLengths[op-1]; i++ {
				b.Uleb("unknown standard opcode operand")
			}
		}
	}
}

// emit appends a row: copies the registers to *row, then clears the
// per-row flags (section 6.2.5.1).
func (r *Reader) emit(row *Row) {
	r.state.Line = uint32(r.line)
	*row = r.state
	r.state.Discriminator = 0
	r.state.BasicBlock = false
	r.state.PrologueEnd = false
	r.state.EpilogueBegin = false
}

// Table is a decoded line program: header, file entries and complete
// sequences (those ended by DW_LNE_end_sequence), sorted by Start.
type Table struct {
	Header
	// Files is indexed by Row.File (see [Reader.Files]).
	Files []FileEntry
	// Sequences are sorted by Start; rows within a sequence are sorted by
	// address (stably, so a program's order is kept for equal addresses).
	Sequences []DecodedSequence
}

// DecodedSequence is one sequence: the rows of [Start, End), where Start is
// the first row's address and End the address of its end_sequence row
// (which is not in Rows).
type DecodedSequence struct {
	Start, End uint64
	Rows       []Row
}

// Decode decodes the whole line program at offset off of sec.Line (see
// [NewReader] for compDir). Rows after the last DW_LNE_end_sequence are
// dropped. Errors are *formaterr.Error. Cost: linear in the program
// size plus sorting; allocation bounded by a small multiple of it.
func Decode(sec Sections, off uint64, compDir string) (*Table, error) {
	r, err := NewReader(sec, off, compDir)
	if err != nil {
		return nil, err
	}
	t := &Table{Header: r.hdr}
	var rows []Row
	var row Row
	for {
		err := r.Next(&row)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if !row.EndSequence {
			rows = append(rows, row)
			continue
		}
		s := DecodedSequence{Start: row.Address, End: row.Address}
		if len(rows) > 0 {
			s.Rows = slices.Clip(rows)
			if !slices.IsSortedFunc(s.Rows, cmpRow) {
				slices.SortStableFunc(s.Rows, cmpRow)
			}
			s.Start = s.Rows[0].Address
		}
		t.Sequences = append(t.Sequences, s)
		rows = rows[len(rows):]
	}
	t.Files = r.files
	t.Header = r.hdr
	slices.SortStableFunc(t.Sequences, func(a, b DecodedSequence) int {
		switch {
		case a.Start < b.Start:
			return -1
		case a.Start > b.Start:
			return 1
		}
		return 0
	})
	return t, nil
}

func cmpRow(a, b Row) int {
	switch {
	case a.Address < b.Address:
		return -1
	case a.Address > b.Address:
		return 1
	}
	return 0
}

// Lookup returns the row that holds for addr: within the sequence whose
// [Start, End) contains addr, the last row whose address is at most addr
// (a row holds from its address up to the next row's). It reports false
// when no sequence covers addr. With overlapping sequences (hostile or
// gc'd input) it answers from the one with the greatest Start ≤ addr.
// Cost: two bisections, no allocation.
func (t *Table) Lookup(addr uint64) (Row, bool) {
	seqs := t.Sequences
	lo, hi := 0, len(seqs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if seqs[m].Start <= addr {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return Row{}, false
	}
	s := &seqs[lo-1]
	if addr >= s.End || len(s.Rows) == 0 {
		return Row{}, false
	}
	rows := s.Rows
	lo, hi = 0, len(rows)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if rows[m].Address <= addr {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return Row{}, false
	}
	return rows[lo-1], true
}

// File returns the file entry for a row's File register, or false when
// the index is out of range.
func (t *Table) File(i uint64) (*FileEntry, bool) {
	if i >= uint64(len(t.Files)) {
		return nil, false
	}
	return &t.Files[i], true
}

// PosRow is the part of a [Row] that places code in the source: its
// address, file index, line and column, and whether it ends a sequence
// (32 bytes where a Row takes 56).
type PosRow struct {
	Address     uint64
	File        uint64
	Line        uint32
	Column      uint32
	EndSequence bool
}

// The per-row flags of ReadRows' loop.
const (
	flagPrologueEnd = 1 << iota
	flagEpilogueBegin
	flagBasicBlock
)

// ReadRows runs the program up to the next len(dst) rows and stores
// their positions in dst, as that many calls of [Reader.Next] would (the
// registers, the other fields of Row among them, end as Next leaves
// them). It returns the number of rows stored and, when the program
// ended or failed after them, io.EOF or Next's *formaterr.Error (n may
// then be below len(dst), also 0); dst[n:] is left as it was. An empty
// dst gives 0 and nil without decoding. Cost: the opcodes compilers emit for
// nearly every row (special opcodes, DW_LNS_copy, advance_pc,
// advance_line, set_file, set_column, negate_stmt, const_add_pc, the
// flags prologue_end, epilogue_begin and basic_block, which a PosRow does
// not carry, and DW_LNE_set_address and end_sequence, which start and end
// each sequence: one a function where code is in sections of their own)
// are decoded in one loop with the registers in locals, without a call
// per row; anything else goes through Next.
// Allocation-free except as Next.
func (r *Reader) ReadRows(dst []PosRow) (int, error) {
	h := &r.hdr
	b := &r.b
	n := 0
	var row Row
	for n < len(dst) {
		// The loop keeps the per-row flags set since the last row in a
		// local and stores them at its exit: one set on entry (Next
		// left it so, or a flag opcode ended a batch) is Next's, which
		// decodes that row.
		if h.MaxOpsPerInst == 1 && b.Err() == nil && r.state.Discriminator == 0 && !r.state.BasicBlock && !r.state.PrologueEnd && !r.state.EpilogueBegin {
			data, off := b.Data(), int(b.Off())
			data = data[:min(int(b.End()), len(data))] // so that end is len(data)
			n0 := n
			// The registers that change on nearly every row in locals;
			// file and is_stmt (rarely set) stay in r.state.
			addr, ln, col := r.state.Address, r.line, r.state.Column
			// flags holds the per-row flags set since the last row
			// (flagPrologueEnd, ...), which a row clears.
			var flags uint8
			tab := &r.special
		fast:
			for off < len(data) {
				op := data[off]
				if e := tab[op]; e != 0 {
					addr += uint64(e >> 10)
					ln += int64(e&0x3ff) - 512
					off++
					dst[n] = PosRow{Address: addr, File: r.state.File, Line: uint32(ln), Column: col}
					flags = 0
					if n++; n == len(dst) {
						break
					}
					continue
				}
				switch dwarf.LNS(op) {
				case 0:
					// DW_LNE_end_sequence and DW_LNE_set_address of
					// a 4- or 8-byte address, their one-byte length
					// checked; any other extended opcode is Next's.
					if off+2 >= len(data) {
						break fast
					}
					switch {
					case data[off+1] == 1 && dwarf.LNE(data[off+2]) == dwarf.DW_LNE_end_sequence:
						off += 3
						dst[n] = PosRow{Address: addr, File: r.state.File, Line: uint32(ln), Column: col, EndSequence: true}
						n++
						// reset, with the registers in locals.
						r.state = Row{File: 1, Line: 1, IsStmt: h.DefaultIsStmt}
						addr, ln, col, flags = 0, 1, 0, 0
						if n == len(dst) {
							break fast
						}
					case data[off+1] == 9 && dwarf.LNE(data[off+2]) == dwarf.DW_LNE_set_address && off+11 <= len(data):
						addr = b.Order.Uint64(data[off+3:])
						off += 11
					case data[off+1] == 5 && dwarf.LNE(data[off+2]) == dwarf.DW_LNE_set_address && off+7 <= len(data):
						addr = uint64(b.Order.Uint32(data[off+3:]))
						off += 7
					default:
						break fast
					}
				case dwarf.DW_LNS_set_prologue_end:
					flags |= flagPrologueEnd
					off++
				case dwarf.DW_LNS_set_epilogue_begin:
					flags |= flagEpilogueBegin
					off++
				case dwarf.DW_LNS_set_basic_block:
					flags |= flagBasicBlock
					off++
				case dwarf.DW_LNS_copy:
					off++
					dst[n] = PosRow{Address: addr, File: r.state.File, Line: uint32(ln), Column: col}
					flags = 0
					if n++; n == len(dst) {
						break fast
					}
				case dwarf.DW_LNS_set_column:
					if off+1 < len(data) && data[off+1] < 0x80 {
						col = uint32(data[off+1])
						off += 2
						continue
					}
					v, k := dwarf.Uleb128(data[off+1:])
					if k == 0 {
						break fast
					}
					col = uint32(v)
					off += 1 + k
				case dwarf.DW_LNS_negate_stmt:
					r.state.IsStmt = !r.state.IsStmt
					off++
				case dwarf.DW_LNS_advance_line:
					if off+1 < len(data) && data[off+1] < 0x80 {
						// One byte: bit 6 is the sign.
						ln += int64(data[off+1]<<1) << 56 >> 57
						off += 2
						continue
					}
					if off+2 < len(data) && data[off+2] < 0x80 {
						// Two bytes: 14 bits, bit 13 the sign.
						v := uint64(data[off+1]&0x7f) | uint64(data[off+2])<<7
						ln += int64(v<<50) >> 50
						off += 3
						continue
					}
					v, k := dwarf.Sleb128(data[off+1:])
					if k == 0 {
						break fast
					}
					ln += v
					off += 1 + k
				case dwarf.DW_LNS_advance_pc:
					v, k := dwarf.Uleb128(data[off+1:])
					if k == 0 {
						break fast
					}
					addr += uint64(h.MinInstLength) * v
					off += 1 + k
				case dwarf.DW_LNS_set_file:
					v, k := dwarf.Uleb128(data[off+1:])
					if k == 0 {
						break fast
					}
					r.state.File = v
					off += 1 + k
				case dwarf.DW_LNS_const_add_pc:
					addr += uint64(h.MinInstLength) * uint64((255-uint32(h.OpcodeBase))*r.rangeMul>>24)
					off++
				default:
					break fast
				}
			}
			r.state.Address, r.line, r.state.Column = addr, ln, col
			if n > n0 && !dst[n-1].EndSequence {
				r.state.Line = dst[n-1].Line // as emit leaves it (reset's 1 after an end of sequence)
			}
			r.state.PrologueEnd = flags&flagPrologueEnd != 0
			r.state.EpilogueBegin = flags&flagEpilogueBegin != 0
			r.state.BasicBlock = flags&flagBasicBlock != 0
			b.Seek(uint64(off), "opcode")
			if n == len(dst) {
				return n, nil
			}
		}
		// An opcode the loop leaves to Next (or a program Next decodes
		// throughout): one row.
		if err := r.Next(&row); err != nil {
			return n, err
		}
		dst[n] = PosRow{Address: row.Address, File: row.File, Line: row.Line, Column: row.Column, EndSequence: row.EndSequence}
		n++
	}
	return n, nil
}
