package elfimage

import (
	"cmp"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"unsafe"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/info"
	"github.com/elfimage/elfimage/dwarf/line"
	"github.com/elfimage/elfimage/dwarf/loc"
	"github.com/elfimage/elfimage/elfobj"
	"github.com/elfimage/elfimage/meta"
)

// ErrFault is returned (wrapped) by the debug queries when reading the
// mapped image faulted: the file was truncated or changed under the
// mapping after it was loaded (reads past its new end raise SIGBUS).
var ErrFault = errors.New("elfimage: reading the mapped image faulted (was the file truncated after loading?)")

// errIndexFault stays the result of a lazily built index whose building
// faulted (its sync.Once is spent): later queries report the fault again.
var errIndexFault = fmt.Errorf("%w while building an index", ErrFault)

// guardFaults, deferred with the previous setting of
// debug.SetPanicOnFault, turns a memory fault in a query into an error
// wrapping ErrFault, and restores the setting. Other panics go on.
func (im *Image) guardFaults(err *error, old bool) {
	debug.SetPanicOnFault(old)
	r := recover()
	if r == nil {
		return
	}
	if f, ok := r.(interface{ Addr() uintptr }); ok {
		*err = fmt.Errorf("%w: %s at %#x", ErrFault, im.path, f.Addr())
		return
	}
	panic(r)
}

// ErrUnknownPC is returned (wrapped with the address) by the debug queries
// when no procedure, line row or debug entry covers an address.
var ErrUnknownPC = errors.New("elfimage: no debug information for address")

// debugState holds the indexes an Image builds lazily, on the first debug
// query that needs each, from its mapped non-loaded tail. Nothing here is
// touched at load; each index is built at most once and then only read.
type debugState struct {
	secOnce sync.Once // the section header table (Image.Sections)
	secs    []SectionHeader
	secErr  error

	dbgFile debugFileState // the debug file, once looked for (debug.go)

	symOnce sync.Once
	syms    []procSym // STT_FUNC symbols sorted by address
	symErr  error

	lineOnce sync.Once
	lines    *line.Table
	lineErr  error

	info   infoState
	unwind unwindState
	types  typeState

	metaOnce sync.Once
	meta     *meta.Table // &metaT once checked
	metaT    meta.Table
	metaErr  error

	namesOnce sync.Once
	names     map[string]int // procedure name -> index in the table (or in syms)
	namesErr  error

	seqMu   sync.Mutex
	seq0    *line.Reader            // the first line unit parsed (images Link writes have one), at seq0Off
	seq0Off uint64                  //
	seqs    map[uint64]*line.Reader // line unit offset -> its header, for one-sequence runs, after seq0
	seqErrs map[uint64]error
	// seq0Mem is where the first line unit's reader goes when the state
	// was allocated by PositionAt with room for it (positionState), nil
	// once used or otherwise; under seqMu.
	seq0Mem *line.Reader
	// pathMem is, likewise, where the first file path's bytes go (length
	// 0, capacity filePathRoom), nil once used or otherwise; under seqMu.
	// A string made over them is never written again.
	pathMem []byte
	// lastFile is the last file name positionFromTable resolved (the
	// readers resolve each in the header's bytes), under seqMu.
	lastFile fileMemo

	answers answerCache // recent answers of Procedure and PositionAt
}

type procSym struct {
	start, size uint64
	name        string
	global      bool
}

// Procedure describes the procedure whose code holds an address.
// [Image.ProcedureAt] fills Name, Start, Size and Internal from the
// symbol table; [Image.Procedure] fills everything but Internal from the
// image's procedure table; [Image.ProcedureByName] and
// [Image.Procedures] fill everything.
type Procedure struct {
	// Name is the symbol name.
	Name string
	// Start and Size give the procedure's code as the link-time range
	// [Start, Start+Size).
	Start, Size uint64
	// Internal is true for runtime support code the source did not define
	// (a local symbol).
	Internal bool
	// Required and Optional count the parameters; Args names them
	// (Required+Optional names), Defaults gives the source text of each
	// optional parameter's default ("" when none was written).
	Required, Optional int
	Args, Defaults     []string
	// Doc is the docstring; Properties the declared metadata in source
	// order.
	Doc        string
	Properties []Property
}

// Position is a source position: a 1-based line and column in File
// (Column 0 when unknown).
type Position struct {
	File         string
	Line, Column int
}

func (p Position) String() string {
	if p.Column == 0 {
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Column)
}

// LinkAddr converts a run-time address inside the image to its link-time
// address (pc - Base). Every debug query takes link-time addresses, the
// addresses written in the file, so that they also answer for addresses
// read from the file by other tools.
func (im *Image) LinkAddr(pc uintptr) uint64 { return uint64(pc - im.Base()) }

// ProcedureAt returns the procedure whose code contains the link-time
// address addr. The first call builds a sorted index of the .symtab
// function symbols (cost linear in the symbol count); later calls bisect
// it without allocating. It returns an error wrapping ErrUnknownPC when no
// function symbol covers addr, or a *FormatError when .symtab is malformed.
func (im *Image) ProcedureAt(addr uint64) (_ Procedure, err error) {
	defer im.guardFaults(&err, debug.SetPanicOnFault(true))
	d := im.dbg()
	d.symOnce.Do(func() { d.symErr = errIndexFault; d.syms, d.symErr = im.readSymbols() })
	if d.symErr != nil {
		return Procedure{}, d.symErr
	}
	i, ok := slices.BinarySearchFunc(d.syms, addr, func(s procSym, a uint64) int {
		switch {
		case a < s.start:
			return 1
		case a >= s.start+s.size:
			return -1
		}
		return 0
	})
	if !ok {
		return Procedure{}, fmt.Errorf("%w %#x in %s", ErrUnknownPC, addr, im.path)
	}
	s := &d.syms[i]
	return Procedure{Name: s.name, Start: s.start, Size: s.size, Internal: !s.global}, nil
}

// readSymbols decodes the STT_FUNC symbols of .symtab into an index sorted
// by address. Overlapping symbols keep the first in address order.
func (im *Image) readSymbols() ([]procSym, error) {
	symtab, err := im.debugSection(".symtab")
	if err != nil {
		return nil, err
	}
	strtab, err := im.debugSection(".strtab")
	if err != nil {
		return nil, err
	}
	t, err := elfobj.NewSymbolTable(elf.ELFCLASS64, elf.ELFDATA2LSB, ".symtab", symtab, strtab)
	if err != nil {
		return nil, objError(im.path, err)
	}
	var syms []procSym
	for i := 1; i < t.Len(); i++ {
		sym := t.Sym(i)
		if sym.Type() != elf.STT_FUNC || sym.Size == 0 {
			continue
		}
		name, err := t.Name(i)
		if err != nil {
			return nil, err
		}
		if sym.Value+sym.Size < sym.Value {
			return nil, &FormatError{Source: im.path, Field: fmt.Sprintf("st_size of symbol %d", i), Msg: "address range overflows"}
		}
		syms = append(syms, procSym{start: sym.Value, size: sym.Size, name: name, global: sym.Bind() == elf.STB_GLOBAL})
	}
	// Overlapping symbols keep the first in address order, so that
	// bisection is exact.
	return disjoint(syms, func(s procSym) (uint64, uint64) { return s.start, s.start + s.size }), nil
}

// PositionAt returns the source position of the link-time address addr.
// When the image has a procedure table (.elfimage.procs, written by Link)
// with a position index (meta.FlagPositions, Link's images since the
// index), it bisects the table, decodes the procedure's entry (not its
// name) and scans its position rows there, reading no DWARF: cost
// O(log n) plus the procedure's rows up to addr. When it is the image's
// first debug query and the table keeps its strings inline (Link's
// tables), it answers without making the image's query state: the
// table's header is checked into a value on the stack, the file name's
// string is the one allocation, and the answer is not remembered. This
// is a policy for the image asked once (a backtrace through a module,
// a profiler's one sample in it), which thus does not pay for a query
// state and an answer cache it would not use again; it is not free for
// the image asked more: only the first PositionAt skips the state, the
// next query makes it (so an image asked twice allocates the state
// anyway, one query later, and answers its first address again from the
// table if asked it again). Otherwise it allocates, on the image's
// first debug query, its query state, and on a file name not asked just
// before, its string (in the state's room for a first file name of up to
// 128 bytes when PositionAt made the state). A procedure
// without index rows, or a table without the index, has its position
// from the procedure's one .debug_line sequence: the first call checks
// the line program's header (its file table is left in place, the one
// file name asked is resolved there), and no call decodes the whole
// program (cost: O(log n) plus one sequence; allocations as above, plus
// the line unit's reader, in the same first allocation). From the second
// answer on, a 1.5 KiB chunk of remembered answers is allocated on the
// first answer that falls in it; an address answered recently, of the
// 256 remembered two-way set-associative by address, costs one
// uncontended lock. Without a procedure table, the first call decodes
// the whole line program and later calls bisect it. Both sources give
// the same answers for the images Link writes. It returns an error
// wrapping ErrUnknownPC when no row covers addr, or a *FormatError when
// the sections are malformed.
func (im *Image) PositionAt(addr uint64) (_ Position, err error) {
	if d := im.debug.Load(); d != nil {
		if p, ok := d.answers.position(addr); ok {
			return p, nil
		}
	}
	defer im.guardFaults(&err, debug.SetPanicOnFault(true))
	if im.debug.Load() == nil && !im.firstAsked.Swap(true) {
		if p, ok := im.firstPosition(addr); ok {
			return p, nil
		}
	}
	im.dbgPosition() // reads the table's header: under the guard
	if t, err := im.procTable(); err == nil {
		p, err := im.positionFromTable(t, addr)
		if err == nil {
			im.dbg().answers.putPosition(addr, p)
		}
		return p, err
	} else if !errors.Is(err, ErrNoSection) {
		return Position{}, err
	}
	t, err := im.lineTable()
	if err != nil {
		return Position{}, err
	}
	row, ok := t.Lookup(addr)
	if !ok {
		return Position{}, fmt.Errorf("%w %#x in %s", ErrUnknownPC, addr, im.path)
	}
	var file string
	if f, ok := t.File(row.File); ok {
		file = f.Path
	}
	return Position{File: file, Line: int(row.Line), Column: int(row.Column)}, nil
}

// LineTable returns the image's decoded line program, decoding it on first
// use. The table is shared: do not modify it.
func (im *Image) LineTable() (_ *line.Table, err error) {
	defer im.guardFaults(&err, debug.SetPanicOnFault(true))
	return im.lineTable()
}

func (im *Image) lineTable() (*line.Table, error) {
	d := im.dbg()
	d.lineOnce.Do(func() {
		d.lineErr = errIndexFault
		sec := line.Sections{Order: binary.LittleEndian}
		var err error
		if sec.Line, err = im.debugSection(".debug_line"); err != nil {
			d.lineErr = err
			return
		}
		sec.Str, _ = im.debugSection(".debug_str")
		sec.LineStr, _ = im.debugSection(".debug_line_str")
		// Our images have one compile unit whose line program is at
		// offset 0. Before DWARF 5 the program does not hold the
		// compilation directory: take it from the unit.
		dir, err := im.lineCompDir(sec.Line, 0)
		if err != nil {
			d.lineErr = err
			return
		}
		d.lines, d.lineErr = line.Decode(sec, 0, dir)
	})
	return d.lines, d.lineErr
}

// Procedures returns every function symbol of the image in address order
// (building the index of [Image.ProcedureAt] if needed), with the fields
// the symbol table gives (Name, Start, Size, Internal) and, for the
// procedures of the image's procedure table (.elfimage.procs, written by
// Link) whose name, start and size agree with their symbol, what
// [Image.Procedure] gives: arity, argument names, defaults,
// docstring, properties. Cost: linear in the symbols, plus one table
// lookup (O(log n)) and the decoding of each procedure's table entry;
// allocates the result and its strings. Errors are those of
// [Image.ProcedureAt] and of a malformed procedure table.
func (im *Image) Procedures() (_ []Procedure, err error) {
	defer im.guardFaults(&err, debug.SetPanicOnFault(true))
	d := im.dbg()
	d.symOnce.Do(func() { d.symErr = errIndexFault; d.syms, d.symErr = im.readSymbols() })
	if d.symErr != nil {
		return nil, d.symErr
	}
	t, err := im.procTable()
	if err != nil && !errors.Is(err, ErrNoSection) {
		return nil, err
	}
	out := make([]Procedure, len(d.syms))
	for i, s := range d.syms {
		out[i] = Procedure{Name: s.name, Start: s.start, Size: s.size, Internal: !s.global}
		if t == nil {
			continue
		}
		e, err := t.Lookup(s.start)
		if err == meta.ErrNotFound || (err == nil && (e.Start != s.start || e.Size != s.size || string(e.NameBytes) != s.name)) {
			continue // a symbol the table does not describe: ProcedureAt's answer stands
		}
		if err != nil {
			return nil, err
		}
		p, err := describeEntry(t, e)
		if err != nil {
			return nil, err
		}
		p.Internal = out[i].Internal
		out[i] = p
	}
	return out, nil
}

// ErrNoProcedure is returned (wrapped with the name) by
// [Image.ProcedureByName] when the image has no procedure of that name.
var ErrNoProcedure = errors.New("elfimage: no procedure")

// ProcedureByName returns the image's procedure named name, with what
// [Image.Procedure] gives (arity, argument names, defaults, docstring,
// properties, from the procedure table) and Internal from the symbol
// table; an image without a procedure table gives the symbol table's
// fields only. The first call builds an index of the names (one pass over
// the table or the symbols; a map of the names); later calls cost one
// map lookup plus the decoding of the procedure's entry. It returns an
// error wrapping ErrNoProcedure when no procedure has that name, or the
// errors of a malformed table or symbol table.
func (im *Image) ProcedureByName(name string) (_ Procedure, err error) {
	defer im.guardFaults(&err, debug.SetPanicOnFault(true))
	d := im.dbg()
	d.symOnce.Do(func() { d.symErr = errIndexFault; d.syms, d.symErr = im.readSymbols() })
	if d.symErr != nil {
		return Procedure{}, d.symErr
	}
	t, err := im.procTable()
	if err != nil && !errors.Is(err, ErrNoSection) {
		return Procedure{}, err
	}
	d.namesOnce.Do(func() { d.namesErr = errIndexFault; d.names, d.namesErr = im.indexNames(t) })
	if d.namesErr != nil {
		return Procedure{}, d.namesErr
	}
	i, ok := d.names[name]
	if !ok {
		return Procedure{}, fmt.Errorf("%w named %q in %s", ErrNoProcedure, name, im.path)
	}
	if t == nil {
		s := d.syms[i]
		return Procedure{Name: s.name, Start: s.start, Size: s.size, Internal: !s.global}, nil
	}
	e, err := t.At(i)
	if err != nil {
		return Procedure{}, err
	}
	p, err := describeEntry(t, e)
	if err != nil {
		return Procedure{}, err
	}
	if sym, err := im.ProcedureAt(p.Start); err == nil && sym.Start == p.Start {
		p.Internal = sym.Internal
	}
	return p, nil
}

// indexNames maps each procedure name to its index in the procedure
// table t, or in the symbol index when t is nil. The first of two equal
// names (a hostile table) wins.
func (im *Image) indexNames(t *meta.Table) (map[string]int, error) {
	if t == nil {
		m := make(map[string]int, len(im.dbg().syms))
		for i, s := range im.dbg().syms {
			if _, dup := m[s.name]; !dup {
				m[s.name] = i
			}
		}
		return m, nil
	}
	m := make(map[string]int, t.Len())
	for i := range t.Len() {
		e, err := t.At(i)
		if err != nil {
			return nil, err
		}
		if _, dup := m[string(e.NameBytes)]; !dup {
			m[e.Name()] = i
		}
	}
	return m, nil
}

// describeEntry decodes one procedure table entry into a Procedure.
func describeEntry(t *meta.Table, e meta.Entry) (Procedure, error) {
	mp, err := t.Describe(e)
	if err != nil {
		return Procedure{}, err
	}
	p := Procedure{Name: mp.Name, Start: mp.Start, Size: mp.Size, Required: mp.Required, Optional: mp.Optional,
		Args: mp.Args, Defaults: mp.Defaults, Doc: mp.Doc}
	for _, pr := range mp.Props {
		p.Properties = append(p.Properties, Property{Name: pr.Name, Value: pr.Value})
	}
	return p, nil
}

// Param is a formal parameter of a procedure as the image's DWARF gives
// it: its name and its location expression (DWARF 5 section 2.6) at the
// address queried, to be evaluated with the frame's registers, CFA and
// memory.
type Param struct {
	Name string
	// Type is the parameter's type (DW_AT_type), nil when the DWARF gives
	// none.
	Type *Type
	// Location is the DW_AT_location expression, or the entry of its
	// location list that covers the address; nil when the value is not
	// available there (a debugger's "optimized out").
	Location []byte
}

// subprogramEntry finds, through the index built on first use, the
// DW_TAG_subprogram covering the link-time address addr, and returns a
// reader positioned after its DIE, the DIE and its index entry. A miss
// wraps ErrUnknownPC.
func (im *Image) subprogramEntry(addr uint64) (*info.Reader, *info.Entry, subprogram, error) {
	s := &im.dbg().info
	s.once.Do(func() { s.err = errIndexFault; s.subs, s.err = im.indexSubprograms() })
	if s.err != nil {
		return nil, nil, subprogram{}, s.err
	}
	i, ok := slices.BinarySearchFunc(s.subs, addr, func(sp subprogram, a uint64) int {
		switch {
		case a < sp.low:
			return 1
		case a >= sp.high:
			return -1
		}
		return 0
	})
	if !ok {
		return nil, nil, subprogram{}, fmt.Errorf("%w %#x in %s", ErrUnknownPC, addr, im.path)
	}
	r := s.data.Reader()
	r.Seek(s.subs[i].off)
	e, err := r.Next()
	if err != nil {
		return nil, nil, subprogram{}, err
	}
	if e == nil {
		return nil, nil, subprogram{}, fmt.Errorf("%w %#x in %s", ErrUnknownPC, addr, im.path)
	}
	return r, e, s.subs[i], nil
}

// subprogram is one DW_TAG_subprogram with a code range, in the index
// built on the first SubprogramAt.
type subprogram struct {
	low, high uint64 // [low, high)
	off       uint64 // .debug_info offset of the DIE
}

type infoState struct {
	dataOnce sync.Once
	data     *info.Data
	dataErr  error

	once sync.Once
	subs []subprogram // sorted by low, without overlaps
	err  error
}

// infoData returns the image's .debug_info reader, made on first use
// (which reads the unit headers and root DIEs only).
func (im *Image) infoData() (*info.Data, error) {
	s := &im.dbg().info
	s.dataOnce.Do(func() {
		s.dataErr = errIndexFault
		var sec info.Sections
		if sec.Info, s.dataErr = im.debugSection(".debug_info"); s.dataErr != nil {
			return
		}
		if sec.Abbrev, s.dataErr = im.debugSection(".debug_abbrev"); s.dataErr != nil {
			return
		}
		sec.Str, _ = im.debugSection(".debug_str")
		sec.LineStr, _ = im.debugSection(".debug_line_str")
		sec.Order = binary.LittleEndian
		s.data, s.dataErr = info.New(sec)
	})
	return s.data, s.dataErr
}

// isExpr reports whether a field holds a DWARF expression: exprloc in
// DWARF 4 and later, a block in DWARF 3.
func isExpr(f info.Field) bool { return f.Class == info.ClassExprloc || f.Class == info.ClassBlock }

// Subprogram is what the image's DWARF says about one procedure
// (a DW_TAG_subprogram): its name, its frame base expression and its formal
// parameters in declaration order.
type Subprogram struct {
	Name string
	// Low and High give its code as the link-time range [Low, High).
	Low, High uint64
	// FrameBase is the DW_AT_frame_base expression (DW_OP_fbreg operands
	// are relative to its value); nil when absent.
	FrameBase []byte
	Params    []Param
}

// SubprogramAt returns the DW_TAG_subprogram covering the link-time
// address addr. The first call decodes the DIE tree once to index
// subprograms by address (cost linear in .debug_info); later calls bisect
// the index and decode only that subprogram's DIE and children, and the
// parameters' types, each decoded once per image and cached. It returns
// an error wrapping ErrUnknownPC when no subprogram covers addr, or a
// *FormatError when the DWARF is malformed.
func (im *Image) SubprogramAt(addr uint64) (_ Subprogram, err error) {
	defer im.guardFaults(&err, debug.SetPanicOnFault(true))
	r, e, sp, err := im.subprogramEntry(addr)
	if err != nil {
		return Subprogram{}, err
	}
	sub := Subprogram{Low: sp.low, High: sp.high}
	sub.Name, _ = e.String(dwarf.DW_AT_name)
	if f, ok := e.Val(dwarf.DW_AT_frame_base); ok && isExpr(f) {
		sub.FrameBase = f.Block
	}
	if !e.Children {
		return sub, nil
	}
	u := r.Unit()
	for {
		c, err := r.Next()
		if err != nil {
			return Subprogram{}, err
		}
		if c == nil || c.Tag == 0 || r.Unit() != u {
			return sub, nil
		}
		if c.Tag == dwarf.DW_TAG_formal_parameter {
			p := Param{}
			p.Name, _ = c.String(dwarf.DW_AT_name)
			if p.Location, err = im.locationAt(c, u, addr); err != nil {
				return Subprogram{}, err
			}
			if p.Type, err = im.typeOf(c); err != nil {
				return Subprogram{}, err
			}
			sub.Params = append(sub.Params, p)
		}
		if c.Children {
			r.SkipChildren()
		}
	}
}

func (im *Image) indexSubprograms() ([]subprogram, error) {
	d, err := im.infoData()
	if err != nil {
		return nil, err
	}
	var subs []subprogram
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			return nil, err
		}
		if e == nil {
			break
		}
		if e.Tag != dwarf.DW_TAG_subprogram {
			continue
		}
		if lo, hi, ok := e.PCRange(); ok && lo < hi {
			subs = append(subs, subprogram{low: lo, high: hi, off: e.Offset})
		}
		if e.Children {
			r.SkipChildren()
		}
	}
	// Subprograms that overlap an earlier one (hostile or foreign DWARF)
	// are dropped, so that bisection is exact.
	return disjoint(subs, func(sp subprogram) (uint64, uint64) { return sp.low, sp.high }), nil
}

// disjoint sorts items by the start of their ranges [start, end) (stably)
// and drops every item that overlaps one kept before it, in place.
func disjoint[T any](items []T, span func(T) (start, end uint64)) []T {
	slices.SortStableFunc(items, func(a, b T) int {
		sa, _ := span(a)
		sb, _ := span(b)
		return cmp.Compare(sa, sb)
	})
	out := items[:0]
	var lastEnd uint64
	for _, it := range items {
		start, end := span(it)
		if len(out) > 0 && start < lastEnd {
			continue
		}
		out = append(out, it)
		lastEnd = end
	}
	return slices.Clip(out)
}

// DebugInfo returns a reader of the image's .debug_info, made on first
// use from the mapped tail (which reads only the unit headers and their
// root DIEs). The reader is shared and safe for concurrent use; create a
// [info.Reader] per goroutine with its Reader method.
func (im *Image) DebugInfo() (_ *info.Data, err error) {
	defer im.guardFaults(&err, debug.SetPanicOnFault(true))
	return im.infoData()
}

// locationAt returns the location expression of a DIE's DW_AT_location at
// the link-time address addr: the expression itself, or the entry of the
// location list (DWARF 5 section 2.6.2) covering addr, or nil.
func (im *Image) locationAt(e *info.Entry, u *info.UnitHeader, addr uint64) ([]byte, error) {
	f, ok := e.Val(dwarf.DW_AT_location)
	switch {
	case !ok:
		return nil, nil
	case isExpr(f):
		if len(f.Block) == 0 { // an empty expression: optimized out
			return nil, nil
		}
		return f.Block, nil
	case f.Class != info.ClassSecOffset || u == nil:
		return nil, nil
	}
	var sec loc.Sections
	if u.Enc.Version >= 5 {
		sec.LocLists, _ = im.debugSection(".debug_loclists")
	} else {
		sec.Loc, _ = im.debugSection(".debug_loc")
	}
	sec.Addr, _ = im.debugSection(".debug_addr")
	sec.AddrBase = u.AddrBase
	base, err := im.unitBase(u)
	if err != nil {
		return nil, err
	}
	expr, ok, err := loc.LocationAt(sec, u.Enc, f.Val, base, addr)
	if err != nil || !ok || len(expr) == 0 {
		return nil, err
	}
	return expr, nil
}

// unitBase returns the base address of a unit's location and range lists:
// its root DIE's DW_AT_low_pc (DWARF 5 section 3.1.1), or 0 when it has
// none. A unit whose root DIE cannot be read gives the error, not a base
// of 0 that would move every list entry.
func (im *Image) unitBase(u *info.UnitHeader) (uint64, error) {
	d, err := im.infoData()
	if err != nil {
		return 0, err
	}
	r := d.Reader()
	r.Seek(u.Offset)
	e, err := r.Next()
	if err == nil && e == nil {
		err = &FormatError{Source: ".debug_info", Offset: u.Offset, Field: "unit", Msg: "no root DIE"}
	}
	if err != nil {
		return 0, fmt.Errorf("elfimage: %s: base address of the unit at %#x: %w", im.path, u.Offset, err)
	}
	base, _ := e.Uint(dwarf.DW_AT_low_pc)
	return base, nil
}

// procTable returns the image's procedure table, checking its header on
// first use (O(1)). It is found through the PTProcTable program header
// (no section headers read), else through the section headers; an image
// without one gives an error wrapping ErrNoSection, and so does a table
// that keeps its strings outside it (meta.ExternalStrings) in an image
// without meta.SectionStrs (a malformed section table gives its
// *FormatError).
func (im *Image) procTable() (*meta.Table, error) {
	d := im.dbg()
	d.metaOnce.Do(func() {
		d.metaErr = errIndexFault
		sec := im.tail.get(PTProcTable) // found at load through PTProcTable
		if sec == nil {
			var err error
			if sec, err = im.debugSection(meta.SectionProcs); err != nil {
				d.metaErr = err
				return
			}
		}
		var strs []byte
		if meta.ExternalStrings(sec) { // strings kept outside the table
			var err error
			if strs, err = im.debugSection(meta.SectionStrs); err != nil {
				d.metaErr = fmt.Errorf("elfimage: %s: procedure table %s: strings: %w", im.path, meta.SectionProcs, err)
				return
			}
		}
		if d.metaErr = d.metaT.Init(sec, strs); d.metaErr == nil {
			d.meta = &d.metaT
		}
	})
	return d.meta, d.metaErr
}

// Procedure describes the procedure whose code contains the link-time
// address addr from the image's procedure table (.elfimage.procs, package
// meta): name, range, arity, argument names, defaults, docstring and
// properties, without parsing DWARF. The first call checks the table's
// header; every call bisects the fixed-width records in place and decodes
// that one procedure's entry. Cost: O(log n) plus the allocation of the
// returned strings; a procedure answered recently (the image remembers 256
// answers, direct-mapped by address) is returned again without either: one
// uncontended lock, no allocation. Its slices (Args, Defaults, Properties)
// are then shared with earlier results: do not modify them. The strings
// are Go strings, valid after Close. It returns an error wrapping ErrUnknownPC when no
// procedure covers addr, ErrNoSection when the image has no table, or a
// *FormatError when the table is malformed.
func (im *Image) Procedure(addr uint64) (_ Procedure, err error) {
	if p, ok := im.dbg().answers.procedure(addr); ok {
		return p, nil
	}
	defer im.guardFaults(&err, debug.SetPanicOnFault(true))
	t, err := im.procTable()
	if err != nil {
		return Procedure{}, err
	}
	e, err := t.Lookup(addr)
	if err == meta.ErrNotFound {
		return Procedure{}, fmt.Errorf("%w %#x in %s", ErrUnknownPC, addr, im.path)
	}
	if err != nil {
		return Procedure{}, err
	}
	p, err := describeEntry(t, e)
	if err == nil {
		im.dbg().answers.putProcedure(addr, p)
	}
	return p, err
}

// firstPosition answers the image's first PositionAt without making the
// query state (PositionAt calls it only while no query has made it),
// when the procedure table found through PTProcTable keeps its strings
// inline and has a position block for addr: the table's header checked
// into a Table on the stack, the bisection, the entry's head (not its
// name) and the block's rows; the answer's file is the one allocation,
// and the answer is not remembered. It says false on anything else (no
// such table, a malformed one, an address without a procedure or
// without rows), and PositionAt then answers with the state, from the
// start, with the same functions (so the same answer or error).
func (im *Image) firstPosition(addr uint64) (Position, bool) {
	sec := im.tail.get(PTProcTable)
	const need = meta.FlagPositions | meta.FlagInlineStrings
	if len(sec) < meta.HeaderSize || sec[7]&need != need {
		return Position{}, false
	}
	var t meta.Table
	if t.Init(sec, nil) != nil {
		return Position{}, false
	}
	e, err := t.LookupHead(addr)
	if err != nil || !e.HasPositions {
		return Position{}, false
	}
	p, err := t.Position(e, addr)
	if err != nil {
		return Position{}, false
	}
	return Position{File: string(p.File), Line: int(p.Line), Column: int(p.Column)}, true
}

// positionFromTable finds addr's procedure in the table and runs its one
// line sequence.
func (im *Image) positionFromTable(t *meta.Table, addr uint64) (Position, error) {
	e, err := t.LookupHead(addr)
	if err != nil || !e.HasLineSeq {
		if err != nil && err != meta.ErrNotFound {
			return Position{}, err
		}
		return Position{}, fmt.Errorf("%w %#x in %s", ErrUnknownPC, addr, im.path)
	}
	if e.HasPositions {
		p, err := t.Position(e, addr)
		if err == meta.ErrNotFound {
			return Position{}, fmt.Errorf("%w %#x in %s", ErrUnknownPC, addr, im.path)
		}
		if err != nil {
			return Position{}, err
		}
		return Position{File: im.indexFilePath(p), Line: int(p.Line), Column: int(p.Column)}, nil
	}
	return im.positionFromLines(e, addr)
}

// positionFromLines runs the line sequence of the procedure e (found in
// the procedure table) for addr: the path of a table without a position
// index, and of procedures that have none.
func (im *Image) positionFromLines(e meta.Entry, addr uint64) (Position, error) {
	r, err := im.lineUnit(e.LineUnit)
	if err != nil {
		return Position{}, err
	}
	row, err := r.SequenceRow(e.LineSeq, addr)
	if err == line.ErrNotCovered {
		return Position{}, fmt.Errorf("%w %#x in %s", ErrUnknownPC, addr, im.path)
	}
	if err != nil {
		return Position{}, err
	}
	return Position{File: im.filePath(e.LineUnit, r, row.File), Line: int(row.Line), Column: int(row.Column)}, nil
}

// filePath returns the path of file i of the line unit at off (reader
// r), "" when out of range; the last one asked is remembered, so that
// the queries of one file's procedures share its string.
func (im *Image) filePath(off uint64, r *line.Reader, i uint64) string {
	d := im.dbg()
	d.seqMu.Lock()
	if m := d.lastFile; m.ok && !m.fromIndex && m.unit == off && m.index == i {
		d.seqMu.Unlock()
		return m.path
	}
	buf := d.pathMem
	d.pathMem = nil
	d.seqMu.Unlock()
	var p string
	if buf == nil {
		p, _ = r.FilePath(i)
	} else if b, _ := r.AppendFilePath(buf, i); len(b) > 0 {
		// Built in positionState.path0 (or, longer than its room, in
		// the slice append made), which nothing writes again.
		p = unsafe.String(unsafe.SliceData(b), len(b))
	}
	d.seqMu.Lock()
	d.lastFile = fileMemo{ok: true, unit: off, index: i, path: p}
	d.seqMu.Unlock()
	return p
}

// indexFilePath returns p.File as a string: the one made for the last
// position asked when it named the same file, else a copy (into the
// state's room for the first path when it is free).
func (im *Image) indexFilePath(p meta.Pos) string {
	d := im.dbg()
	d.seqMu.Lock()
	if m := d.lastFile; m.ok && m.fromIndex && m.index == p.FileOff {
		d.seqMu.Unlock()
		return m.path
	}
	buf := d.pathMem
	d.pathMem = nil
	d.seqMu.Unlock()
	var s string
	if buf != nil && len(p.File) > 0 {
		b := append(buf, p.File...) // in the state's room, or the slice append made: never written again
		s = unsafe.String(unsafe.SliceData(b), len(b))
	} else {
		s = string(p.File)
	}
	d.seqMu.Lock()
	d.lastFile = fileMemo{ok: true, fromIndex: true, index: p.FileOff, path: s}
	d.seqMu.Unlock()
	return s
}

// fileMemo is the last file path [Image.filePath] or
// [Image.indexFilePath] resolved: file index of the line unit at unit,
// or (fromIndex) the string at offset index of the procedure table.
type fileMemo struct {
	ok, fromIndex bool
	unit, index   uint64
	path          string
}

// lineUnit returns the reader of the line program unit at off of
// .debug_line, parsing its header on first use (one per unit).
func (im *Image) lineUnit(off uint64) (*line.Reader, error) {
	d := im.dbg()
	d.seqMu.Lock()
	defer d.seqMu.Unlock()
	if d.seq0 != nil && d.seq0Off == off {
		return d.seq0, nil
	}
	if r, ok := d.seqs[off]; ok {
		return r, nil
	}
	if err, ok := d.seqErrs[off]; ok {
		return nil, err
	}
	// The reader is not in debugState: the queries that read no line
	// program do not pay for zeroing it (measured on Procedure). When
	// PositionAt was the image's first query, the state was allocated
	// with room for the first reader (positionState).
	r := d.seq0Mem
	if r == nil {
		r = new(line.Reader)
	}
	d.seq0Mem = nil
	err := im.initLineUnit(r, off)
	if err == nil && d.seq0 == nil {
		d.seq0, d.seq0Off = r, off
		return r, nil
	}
	if d.seqs == nil {
		d.seqs, d.seqErrs = map[uint64]*line.Reader{}, map[uint64]error{}
	}
	if err != nil {
		d.seqErrs[off] = err
		return nil, err
	}
	d.seqs[off] = r
	return r, nil
}

// initLineUnit parses into r the header of the line program unit at off
// of .debug_line, for one-sequence runs.
func (im *Image) initLineUnit(r *line.Reader, off uint64) error {
	sec := line.Sections{Order: binary.LittleEndian, Line: im.tail.get(PTLineProgram), LineStr: im.tail.get(PTLineStrings)}
	if sec.Line == nil { // no program header: through the section headers
		var err error
		if sec.Line, err = im.debugSection(".debug_line"); err != nil {
			return err
		}
		sec.Str, _ = im.debugSection(".debug_str")
		sec.LineStr, _ = im.debugSection(".debug_line_str")
	}
	compDir, err := im.lineCompDir(sec.Line, off)
	if err != nil {
		return err
	}
	// One sequence is run per query and one file named: the directory and
	// file tables are checked but left in the header.
	return r.InitSequence(sec, off, compDir)
}

// lineCompDir returns the compilation directory the line program unit at
// off of debugLine needs: "" from DWARF 5 on (the program names it itself,
// directory 0) or when its header is unreadable (line.NewReader then
// reports that), else the first unit's DW_AT_comp_dir ([Image.compDir]).
func (im *Image) lineCompDir(debugLine []byte, off uint64) (string, error) {
	if v, err := line.Version(debugLine, binary.LittleEndian, off); err != nil || v >= 5 {
		return "", nil
	}
	return im.compDir()
}

// compDir returns the DW_AT_comp_dir of the image's first unit: "" when
// the image has no .debug_info or the unit no such attribute, and the
// error when .debug_info, .debug_abbrev or the unit's root DIE is
// malformed (a wrong directory would silently misname every file).
func (im *Image) compDir() (string, error) {
	data, err := im.infoData()
	if errors.Is(err, ErrNoSection) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("elfimage: %s: compilation directory: %w", im.path, err)
	}
	r := data.Reader()
	e, err := r.Next()
	if err != nil {
		return "", fmt.Errorf("elfimage: %s: compilation directory: %w", im.path, err)
	}
	if e == nil {
		return "", nil
	}
	dir, _ := e.String(dwarf.DW_AT_comp_dir)
	return dir, nil
}

// Local is a parameter or variable whose value is available at an
// address, with where it is there.
type Local struct {
	Name string
	// Param is true for formal parameters.
	Param bool
	// Depth is the lexical nesting: 0 for parameters and variables of the
	// procedure itself, 1 inside its outermost blocks, and so on.
	Depth int
	// Line and Column give the declaration (0 when unknown).
	Line, Column int
	// Type is the value's type (DW_AT_type), nil when the DWARF gives
	// none; variables Link wrote without a type have the default,
	// "integer".
	Type *Type
	// Location is the DWARF location expression valid at the address
	// (evaluate it with [ReadLocation], or [FormatLocation] for the value
	// as its type shows it).
	Location []byte
	// artificial marks a variable the compiler made (DW_AT_artificial).
	artificial bool
}

// Locals returns the parameters and variables live at the link-time
// address addr: those of the procedure covering addr and of every lexical
// block (DW_TAG_lexical_block) containing addr, but not the artificial
// ones the compiler made (DW_AT_artificial), whose location (an
// expression, or the location-list entry covering addr) says where the
// value is there. A variable outside its live ranges is not returned: its
// value is not available ("optimized out"). Order: parameters, then
// variables outermost first in declaration order. Cost: decodes the one
// subprogram's DIE subtree (skipping blocks that do not contain addr),
// and for each parameter or variable with a location list, its unit's
// root DIE (for the lists' base address) and one scan of its list; each
// type is decoded once per image and cached (a recursive type reads back
// as a cycle of *Type); allocates the result. Errors are those of
// [Image.SubprogramAt].
func (im *Image) Locals(addr uint64) (_ []Local, err error) {
	defer im.guardFaults(&err, debug.SetPanicOnFault(true))
	return im.locals(addr, false)
}

// locals is Locals, with the artificial variables (DW_AT_artificial: the
// lengths of variable-length arrays) when artificial is set.
func (im *Image) locals(addr uint64, artificial bool) ([]Local, error) {
	r, e, _, err := im.subprogramEntry(addr)
	if err != nil || !e.Children {
		return nil, err
	}
	u := r.Unit()
	var out []Local
	depth := 0 // blocks entered below the subprogram
	for {
		c, err := r.Next()
		if err != nil {
			return nil, err
		}
		if c == nil || r.Unit() != u { // a subtree never runs past its unit
			return out, nil
		}
		switch c.Tag {
		case 0:
			if depth == 0 {
				return out, nil
			}
			depth--
			continue
		case dwarf.DW_TAG_formal_parameter, dwarf.DW_TAG_variable:
			art := false
			if f, ok := c.Val(dwarf.DW_AT_artificial); ok && f.Val != 0 {
				if !artificial {
					break
				}
				art = true
			}
			where, err := im.locationAt(c, u, addr)
			if err != nil {
				return nil, err
			}
			if where != nil {
				l := Local{Param: c.Tag == dwarf.DW_TAG_formal_parameter, Depth: depth, Location: where, artificial: art}
				l.Name, _ = c.String(dwarf.DW_AT_name)
				line, _ := c.Uint(dwarf.DW_AT_decl_line)
				col, _ := c.Uint(dwarf.DW_AT_decl_column)
				l.Line, l.Column = int(line), int(col)
				if l.Type, err = im.typeOf(c); err != nil {
					return nil, err
				}
				out = append(out, l)
			}
		case dwarf.DW_TAG_lexical_block:
			in, err := im.blockContains(c, u, addr)
			if err != nil {
				return nil, err
			}
			if in && c.Children {
				depth++
				continue
			}
		}
		if c.Children {
			r.SkipChildren()
		}
	}
}

// blockContains reports whether a lexical block's code contains addr:
// from DW_AT_low_pc/DW_AT_high_pc, or its DW_AT_ranges list.
func (im *Image) blockContains(e *info.Entry, u *info.UnitHeader, addr uint64) (bool, error) {
	if lo, hi, ok := e.PCRange(); ok {
		return addr >= lo && addr < hi, nil
	}
	f, ok := e.Val(dwarf.DW_AT_ranges)
	if !ok || f.Class != info.ClassSecOffset || u == nil {
		return false, nil
	}
	var sec loc.Sections
	if u.Enc.Version >= 5 {
		sec.RngLists, _ = im.debugSection(".debug_rnglists")
	} else {
		sec.Ranges, _ = im.debugSection(".debug_ranges")
	}
	sec.Addr, _ = im.debugSection(".debug_addr")
	sec.AddrBase = u.AddrBase
	base, err := im.unitBase(u)
	if err != nil {
		return false, err
	}
	return loc.RangeContains(sec, u.Enc, f.Val, base, addr)
}
