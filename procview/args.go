package procview

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/expr"
	"github.com/elfimage/elfimage/dwarf/info"
	"github.com/elfimage/elfimage/dwarf/loc"
	"github.com/elfimage/elfimage/dwarf/value"
	"github.com/elfimage/elfimage/symbolize"
	"github.com/elfimage/elfimage/unwind"
)

// Arg is one formal parameter of a frame's function and its value in the
// frame, as gdb's backtrace prints it.
type Arg struct {
	Name string
	// Value is formatted as gdb's bt does by default (print
	// frame-arguments scalars; value.Brief): integers in decimal (signed
	// or unsigned per DW_ATE_*), characters as 97 'a', booleans true or
	// false, floating-point values with 9 or 17 significant digits,
	// pointers as 0x hexadecimal, enumerations by enumerator name, and
	// "..." for aggregates (structures, unions, classes, arrays), which
	// are not read. Where there is no value it says why in gdb's words:
	// "<optimized out>" (no location at the pc), "<not saved>" (a
	// register the unwinding did not recover), "<error: ...>".
	Value string
	// Err is why no value was read (nil for a value and for "...").
	Err error
	// Entry is the parameter's value on entry to the function, formatted
	// as Value is, when the caller's call site gives it (gdb's
	// "x@entry"): for a parameter of the frame's subprogram (not of an
	// inlined function) whose location at the function's entry is a
	// register, the DW_AT_call_value of the caller's
	// DW_TAG_call_site_parameter for that register, evaluated in the
	// caller's frame (DWARF 5 section 3.4.2). "" when not known: no call
	// site at the caller's return address, one that calls another
	// function (a tail call in between), a function that may call itself
	// by tail calls, a call value in registers the unwinding did not
	// recover in the caller, or an aggregate.
	Entry string
}

// String formats the argument as gdb's bt does with its default print
// entry-values setting: "x=V" when the value on entry is not known,
// "x=x@entry=V" when it is and equals the value, "x=V, x@entry=E" when
// they differ (V may then be "<optimized out>").
func (a Arg) String() string {
	switch {
	case a.Entry == "":
		return a.Name + "=" + a.Value
	case a.Entry == a.Value:
		return a.Name + "=" + a.Name + "@entry=" + a.Value
	}
	return a.Name + "=" + a.Value + ", " + a.Name + "@entry=" + a.Entry
}

// Limits of the argument reader (the debug information is untrusted).
const (
	// MaxArgs bounds the parameters read for one function.
	MaxArgs = 256
	// maxTypeHops bounds the abstract_origin and specification chains
	// followed.
	maxTypeHops = 16
	// maxArgRanges bounds the compile-unit ranges indexed per module.
	maxArgRanges = 1 << 20
)

// argIndex reads formal parameters from one module's DWARF: the compile
// unit covering an address (through .debug_aranges, else the units' root
// ranges), and per unit, on first use, its subprograms' ranges.
type argIndex struct {
	data *info.Data
	sec  loc.Sections
	cus  []span // sorted by lo
	err  error

	types *value.Reader

	mu       sync.Mutex
	subs     map[uint64][]span     // unit offset -> subprograms (off: DIE offset), sorted by lo
	bases    map[uint64]uint64     // unit offset -> base address (root DW_AT_low_pc)
	sites    map[uint64]*callSites // subprogram DIE offset -> its call sites
	selfTail map[uint64]error      // function entry -> callsItselfByTail's answer
}

// span is [lo, hi) -> off.
type span struct{ lo, hi, off uint64 }

// args returns the argument index of o, built on first use.
func (v *View) args(o *object) *argIndex {
	v.ext.argsMu.Lock()
	defer v.ext.argsMu.Unlock()
	if x := v.ext.args[o]; x != nil {
		return x
	}
	if v.ext.args == nil {
		v.ext.args = map[*object]*argIndex{}
	}
	s := o.debug(v.finder())
	x := newArgIndex(func(name string) []byte {
		b, _, err := s.Section(name)
		if err != nil {
			return nil
		}
		return b
	})
	v.ext.args[o] = x
	return x
}

// newArgIndex indexes the DWARF whose sections sect returns (nil when
// absent): the compile units' ranges.
func newArgIndex(sect func(name string) []byte) *argIndex {
	x := &argIndex{subs: map[uint64][]span{}, bases: map[uint64]uint64{}, sites: map[uint64]*callSites{}, selfTail: map[uint64]error{}}
	var sec info.Sections
	sec.Info, sec.Abbrev = sect(".debug_info"), sect(".debug_abbrev")
	if len(sec.Info) == 0 || len(sec.Abbrev) == 0 {
		x.err = symbolize.ErrNoInfo
		return x
	}
	sec.Str, sec.LineStr, sec.StrOffsets = sect(".debug_str"), sect(".debug_line_str"), sect(".debug_str_offsets")
	sec.Addr, sec.RngLists, sec.LocLists = sect(".debug_addr"), sect(".debug_rnglists"), sect(".debug_loclists")
	sec.Order = binary.LittleEndian
	if x.data, x.err = info.New(sec); x.err != nil {
		return x
	}
	x.types = value.NewReader(x.data)
	x.sec = loc.Sections{Loc: sect(".debug_loc"), LocLists: sec.LocLists, Ranges: sect(".debug_ranges"), RngLists: sec.RngLists, Addr: sec.Addr}
	if ar := sect(".debug_aranges"); len(ar) > 0 {
		if sets, err := loc.ReadAranges(ar, binary.LittleEndian); err == nil {
			for _, s := range sets {
				for _, r := range s.Ranges {
					if len(x.cus) < maxArgRanges && r.Start < r.End {
						x.cus = append(x.cus, span{r.Start, r.End, s.CUOffset})
					}
				}
			}
		}
	}
	if len(x.cus) == 0 {
		units := x.data.Units()
		for i := range units {
			u := &units[i]
			x.cus = append(x.cus, x.ranges(u, u.Offset, nil)...)
		}
	}
	sort.Slice(x.cus, func(i, j int) bool { return x.cus[i].lo < x.cus[j].lo })
	return x
}

// ranges returns the ranges of the DIE at off in unit u (DW_AT_low_pc and
// DW_AT_high_pc, or DW_AT_ranges), each tagged with tag; e is the DIE when
// the caller has it.
func (x *argIndex) ranges(u *info.UnitHeader, tag uint64, e *info.Entry) []span {
	if e == nil {
		r := x.data.Reader()
		r.Seek(u.Offset)
		var err error
		if e, err = r.Next(); err != nil || e == nil {
			return nil
		}
	}
	if lo, hi, ok := e.PCRange(); ok {
		if lo < hi {
			return []span{{lo, hi, tag}}
		}
		return nil
	}
	f, ok := e.Val(dwarf.DW_AT_ranges)
	if !ok || f.Class != info.ClassSecOffset {
		return nil
	}
	rs, err := loc.ReadRangeList(x.sec4(u), u.Enc, f.Val, x.base(u))
	if err != nil {
		return nil
	}
	out := make([]span, 0, len(rs))
	for _, r := range rs {
		if r.Start < r.End {
			out = append(out, span{r.Start, r.End, tag})
		}
	}
	return out
}

// sec4 returns the list sections for unit u (its DW_AT_addr_base).
func (x *argIndex) sec4(u *info.UnitHeader) loc.Sections {
	s := x.sec
	s.AddrBase = u.AddrBase
	return s
}

// base returns the base address of unit u's lists: its root DIE's
// DW_AT_low_pc, or 0.
func (x *argIndex) base(u *info.UnitHeader) uint64 {
	x.mu.Lock()
	b, ok := x.bases[u.Offset]
	x.mu.Unlock()
	if ok {
		return b
	}
	r := x.data.Reader()
	r.Seek(u.Offset)
	if e, err := r.Next(); err == nil && e != nil {
		b, _ = e.Uint(dwarf.DW_AT_low_pc)
	}
	x.mu.Lock()
	x.bases[u.Offset] = b
	x.mu.Unlock()
	return b
}

// contains reports whether the DIE e of unit u covers addr.
func (x *argIndex) contains(u *info.UnitHeader, e *info.Entry, addr uint64) bool {
	if lo, hi, ok := e.PCRange(); ok {
		return lo <= addr && addr < hi
	}
	f, ok := e.Val(dwarf.DW_AT_ranges)
	if !ok || f.Class != info.ClassSecOffset {
		return false
	}
	in, err := loc.RangeContains(x.sec4(u), u.Enc, f.Val, x.base(u), addr)
	return err == nil && in
}

// subprograms returns the subprograms of the unit at off, indexed on
// first use: every DW_TAG_subprogram DIE with code, at any depth.
func (x *argIndex) subprograms(off uint64) ([]span, *info.UnitHeader, error) {
	u, ok := x.data.UnitAt(off)
	if !ok {
		return nil, nil, fmt.Errorf("procview: no unit at .debug_info offset %#x", off)
	}
	x.mu.Lock()
	subs, ok := x.subs[u.Offset]
	x.mu.Unlock()
	if ok {
		return subs, u, nil
	}
	r := x.data.Reader()
	r.Seek(u.Offset)
	for {
		e, err := r.Next()
		if err != nil {
			return nil, nil, err
		}
		if e == nil || r.Unit() != u {
			break
		}
		if e.Tag == dwarf.DW_TAG_subprogram {
			subs = append(subs, x.ranges(u, e.Offset, e)...)
			r.SkipChildren()
		}
	}
	sort.Slice(subs, func(i, j int) bool { return subs[i].lo < subs[j].lo })
	x.mu.Lock()
	x.subs[u.Offset] = subs
	x.mu.Unlock()
	return subs, u, nil
}

// scope is one function (a subprogram, or an inlined subroutine in it) at
// an address: its parameters and the frame base of its subprogram.
type scope struct {
	params    []param
	frameBase []byte
	origin    uint64 // DW_AT_abstract_origin of its DIE, 0 if none
	off       uint64 // its DIE's offset
}

type param struct {
	origin   uint64 // DW_AT_abstract_origin of its DIE, 0 if none
	name     string
	typ      uint64 // .debug_info offset of its type, 0 if none
	location []byte // the expression at the address; nil: optimized out
	atEntry  []byte // the expression at the subprogram's entry; nil: none
	constant *info.Field
}

// scopes returns the functions covering the link-time address addr,
// outermost (the subprogram) first, each with its parameters.
func (x *argIndex) scopes(addr uint64) ([]scope, *info.UnitHeader, error) {
	if x.err != nil {
		return nil, nil, x.err
	}
	i := sort.Search(len(x.cus), func(i int) bool { return x.cus[i].hi > addr })
	var subs []span
	var u *info.UnitHeader
	for ; i < len(x.cus) && x.cus[i].lo <= addr; i++ {
		s, uu, err := x.subprograms(x.cus[i].off)
		if err != nil {
			return nil, nil, err
		}
		if j := sort.Search(len(s), func(j int) bool { return s[j].hi > addr }); j < len(s) && s[j].lo <= addr {
			subs, u = s[j:j+1], uu
			break
		}
	}
	if len(subs) == 0 {
		return nil, nil, fmt.Errorf("%w: no subprogram covers %#x", symbolize.ErrNoInfo, addr)
	}
	r := x.data.Reader()
	r.Seek(subs[0].off)
	e, err := r.Next()
	if err != nil || e == nil {
		return nil, nil, err
	}
	fb := exprOf(e, dwarf.DW_AT_frame_base)
	origin, _ := refOf(e, dwarf.DW_AT_abstract_origin)
	out := []scope{{frameBase: fb, origin: origin, off: e.Offset}}
	entry, hasEntry := x.entryOf(u, e)
	if !e.Children {
		return x.abstractParams(out), u, nil
	}
	// owner[d] is the index in out of the function whose DIE is at depth
	// d (the subprogram at 0), or -1 for a lexical block.
	owner := []int{0}
	for depth := 1; depth > 0; {
		c, err := r.Next()
		if err != nil {
			return nil, nil, err
		}
		if c == nil || r.Unit() != u {
			break
		}
		if c.Tag == 0 {
			depth--
			owner = owner[:depth]
			continue
		}
		switch {
		case c.Tag == dwarf.DW_TAG_formal_parameter && owner[depth-1] >= 0:
			s := &out[owner[depth-1]]
			if len(s.params) < MaxArgs {
				p := x.param(u, c, addr)
				if owner[depth-1] == 0 && hasEntry {
					p.atEntry = x.locationAt(u, c, entry)
				}
				s.params = append(s.params, p)
			}
		case (c.Tag == dwarf.DW_TAG_inlined_subroutine || c.Tag == dwarf.DW_TAG_lexical_block) && c.Children && x.contains(u, c, addr):
			if c.Tag == dwarf.DW_TAG_inlined_subroutine {
				origin, _ := refOf(c, dwarf.DW_AT_abstract_origin)
				out = append(out, scope{frameBase: fb, origin: origin})
				owner = append(owner, len(out)-1)
			} else {
				owner = append(owner, -1)
			}
			depth++
			continue
		}
		if c.Children {
			r.SkipChildren()
		}
	}
	return x.abstractParams(out), u, nil
}

// abstractParams gives each scope that is a concrete instance of an
// abstract function (DW_AT_abstract_origin: an inlined subroutine, or
// an out-of-line copy) the parameters of the abstract function, in its
// order, as gdb does: those without a concrete DIE have no location
// (optimized out). Concrete parameters without an abstract one follow.
func (x *argIndex) abstractParams(scopes []scope) []scope {
	for i := range scopes {
		s := &scopes[i]
		if s.origin == 0 {
			continue
		}
		abs := x.originParams(s.origin)
		if len(abs) == 0 {
			continue
		}
		var out []param
		used := make([]bool, len(s.params))
		for _, a := range abs {
			p := a
			for j, c := range s.params {
				if !used[j] && c.origin == a.origin {
					p, used[j] = c, true
					break
				}
			}
			out = append(out, p)
		}
		for j, c := range s.params {
			if !used[j] && len(out) < MaxArgs {
				out = append(out, c)
			}
		}
		s.params = out
	}
	return scopes
}

// originParams returns the formal parameters of the abstract function at
// off (following DW_AT_abstract_origin and DW_AT_specification chains
// to one with children), each with origin set to its own DIE offset and
// no location.
func (x *argIndex) originParams(off uint64) []param {
	r := x.data.Reader()
	for hop := 0; hop < maxTypeHops; hop++ {
		r.Seek(off)
		e, err := r.Next()
		if err != nil || e == nil {
			return nil
		}
		if !e.Children {
			next, ok := refOf(e, dwarf.DW_AT_abstract_origin)
			if !ok {
				next, ok = refOf(e, dwarf.DW_AT_specification)
			}
			if !ok {
				return nil
			}
			off = next
			continue
		}
		var out []param
		for len(out) < MaxArgs {
			c, err := r.Next()
			if err != nil || c == nil || c.Tag == 0 {
				break
			}
			if c.Tag == dwarf.DW_TAG_formal_parameter {
				p := param{origin: c.Offset}
				p.name, _ = c.String(dwarf.DW_AT_name)
				p.typ, _ = refOf(c, dwarf.DW_AT_type)
				out = append(out, p)
			}
			if c.Children {
				r.SkipChildren()
			}
		}
		return out
	}
	return nil
}

// exprOf returns attribute a of e when it is an expression.
func exprOf(e *info.Entry, a dwarf.Attr) []byte {
	f, ok := e.Val(a)
	if ok && (f.Class == info.ClassExprloc || f.Class == info.ClassBlock) && len(f.Block) > 0 {
		return f.Block
	}
	return nil
}

// param reads a formal parameter DIE: name and type (through
// DW_AT_abstract_origin when it has none), and its location at addr.
func (x *argIndex) param(u *info.UnitHeader, e *info.Entry, addr uint64) param {
	var p param
	p.name, _ = e.String(dwarf.DW_AT_name)
	p.typ, _ = refOf(e, dwarf.DW_AT_type)
	p.origin, _ = refOf(e, dwarf.DW_AT_abstract_origin)
	origin := e
	for hop := 0; (p.name == "" || p.typ == 0) && hop < maxTypeHops; hop++ {
		off, ok := refOf(origin, dwarf.DW_AT_abstract_origin)
		if !ok {
			break
		}
		r := x.data.Reader()
		r.Seek(off)
		o, err := r.Next()
		if err != nil || o == nil {
			break
		}
		origin = o
		if p.name == "" {
			p.name, _ = o.String(dwarf.DW_AT_name)
		}
		if p.typ == 0 {
			p.typ, _ = refOf(o, dwarf.DW_AT_type)
		}
	}
	if c, ok := e.Val(dwarf.DW_AT_const_value); ok {
		p.constant = &c
		return p
	}
	p.location = x.locationAt(u, e, addr)
	return p
}

// locationAt returns the DW_AT_location expression of e at the
// link-time address addr (its location list's entry covering addr), nil
// when there is none.
func (x *argIndex) locationAt(u *info.UnitHeader, e *info.Entry, addr uint64) []byte {
	f, ok := e.Val(dwarf.DW_AT_location)
	switch {
	case !ok:
	case f.Class == info.ClassExprloc || f.Class == info.ClassBlock:
		if len(f.Block) > 0 {
			return f.Block
		}
	case f.Class == info.ClassSecOffset:
		if ex, ok, err := loc.LocationAt(x.sec4(u), u.Enc, f.Val, x.base(u), addr); err == nil && ok && len(ex) > 0 {
			return ex
		}
	}
	return nil
}

func refOf(e *info.Entry, a dwarf.Attr) (uint64, bool) {
	f, ok := e.Val(a)
	if !ok || f.Class != info.ClassReference {
		return 0, false
	}
	return f.Val, true
}

// argContext is the expr.Context of one frame.
// A register, the CFA or the frame base it did not know sets missing.
type argContext struct {
	f       *Frame
	mem     unwind.Memory
	fb      uint64
	hasFB   bool
	missing bool
	entry   *entrySource // values on entry (nil: not known)
	bias    uint64       // the module's load bias (for DW_OP_addr)
}

// EntryValue implements expr.EntryValuer through the caller's call site.
func (c *argContext) EntryValue(r arch.Reg, size int) (uint64, error) {
	if c.entry == nil {
		return 0, fmt.Errorf("%w: no caller frame", errNoEntry)
	}
	return c.entry.value(r, size)
}

// ParameterValue implements expr.ParameterValuer through the caller's
// call site.
func (c *argContext) ParameterValue(off uint64) (uint64, error) {
	if c.entry == nil {
		return 0, fmt.Errorf("%w: no caller frame", errNoEntry)
	}
	return c.entry.paramValue(off)
}

// setFrameBase evaluates the subprogram's DW_AT_frame_base fb in the
// frame.
func (c *argContext) setFrameBase(fb []byte, ep expr.Params) {
	if fb == nil {
		return
	}
	if r, err := expr.Eval(fb, ep, c); err == nil && r.Kind == expr.Memory {
		c.fb, c.hasFB = r.Addr, true
	} else if err == nil && r.Kind == expr.Register {
		c.fb, c.hasFB = c.f.Regs.Get(r.Reg)
	}
}

func (c *argContext) Reg(r arch.Reg) (uint64, bool) {
	v, ok := c.f.Regs.Get(r)
	c.missing = c.missing || !ok
	return v, ok
}
func (c *argContext) ReadMemory(a uint64, n int) (uint64, error) {
	return value.Read(c.mem, a, n)
}
func (c *argContext) CFA() (uint64, bool) {
	c.missing = c.missing || c.f.CFA == 0
	return c.f.CFA, c.f.CFA != 0
}
func (c *argContext) FrameBase() (uint64, bool) {
	c.missing = c.missing || !c.hasFB
	return c.fb, c.hasFB
}

// frameArgs reads the parameters of the functions of frames[i] (Funcs,
// innermost first) from its module's DWARF: Args[i] for Funcs[i], nil
// where the DWARF has no function for it. Values on entry come from
// frames[i+1], the caller.
func (v *View) frameArgs(frames []Frame, i int, m *Module, pc uint64, mem unwind.Memory) {
	f := &frames[i]
	o := m.obj.get()
	if o.err != nil || len(f.Funcs) == 0 {
		return
	}
	x := v.args(o)
	src := &entrySource{mods: v, frames: frames, i: i, mem: mem, x: x, syms: o.symbols, bias: m.Bias}
	x.frameArgs(f, pc-m.Bias, mem, src)
}

// frameArgs sets f.Args for the link-time address addr of f's pc; src,
// when not nil, gives values on entry (its entry and names are set
// here).
func (x *argIndex) frameArgs(f *Frame, addr uint64, mem unwind.Memory, src *entrySource) {
	scopes, u, err := x.scopes(addr)
	if err != nil || len(scopes) == 0 {
		return
	}
	ctx := &argContext{f: f, mem: mem}
	if src != nil {
		ctx.bias = src.bias
		r := x.data.Reader()
		r.Seek(scopes[0].off)
		if e, err := r.Next(); err == nil && e != nil {
			if entry, ok := x.entryOf(u, e); ok {
				src.entry, src.unit, src.names = entry, u.Offset, x.namesOf(e.Offset)
				ctx.entry = src
			}
		}
	}
	ctx.setFrameBase(scopes[0].frameBase, expr.Params{Section: ".debug_info", Offset: scopes[0].off, AddrSize: u.Enc.AddrSize, Order: binary.LittleEndian, AddrBias: ctx.bias})
	// scopes[0] is the subprogram, the last of Funcs; each inlined
	// subroutine in it the one before.
	f.Args = make([][]Arg, len(f.Funcs))
	for k := 0; k < len(f.Funcs) && k < len(scopes); k++ {
		s := scopes[k]
		args := make([]Arg, 0, len(s.params))
		for _, p := range s.params {
			a := Arg{Name: p.name}
			a.Value, a.Err = x.value(&p, ctx, u.Enc.AddrSize)
			if k == 0 && ctx.entry != nil {
				a.Entry = x.entryValue(&p, ctx, u.Enc.AddrSize)
			}
			args = append(args, a)
		}
		f.Args[len(f.Funcs)-1-k] = args
	}
}

// entryValue formats the value on entry of parameter p of the frame's
// subprogram (Arg.Entry), "" when not known: its location at the entry
// must be a register (as gdb, which also takes DW_OP_fbreg for arguments
// passed on the stack, not done here), given by the caller's call site.
func (x *argIndex) entryValue(p *param, ctx *argContext, as uint8) string {
	if p.constant != nil || p.atEntry == nil {
		return ""
	}
	r, size, ok := expr.EntryRegister(p.atEntry, as)
	if !ok || size != 0 {
		return ""
	}
	var t *value.Type
	if p.typ != 0 {
		t, _ = x.types.Type(p.typ)
	}
	if !value.IsScalar(t) {
		return ""
	}
	v, err := ctx.EntryValue(r, 0)
	if err != nil {
		return ""
	}
	s, err := value.Format(t, value.Object{Bytes: binary.LittleEndian.AppendUint64(nil, v)}, &value.Options{Style: value.Brief, Mem: ctx.mem, PtrSize: int(as)})
	if err != nil {
		return ""
	}
	return s
}

// errNotSaved is the Err of an Arg in a register the unwinding did not
// recover.
var errNotSaved = errors.New("procview: register not recovered in this frame")

// value reads and formats one parameter of address size as, in the
// style of gdb's bt (value.Brief): an aggregate is "..." whatever its
// location; a type that cannot be read is the default integer.
func (x *argIndex) value(p *param, ctx *argContext, as uint8) (string, error) {
	var t *value.Type
	if p.typ != 0 {
		t, _ = x.types.Type(p.typ)
	}
	if !value.IsScalar(t) {
		return "...", nil
	}
	opts := &value.Options{Style: value.Brief, Mem: ctx.mem, PtrSize: int(as)}
	if c := p.constant; c != nil {
		switch c.Class {
		case info.ClassConstant:
			return value.Format(t, value.Object{Bytes: binary.LittleEndian.AppendUint64(nil, c.Val)}, opts)
		case info.ClassBlock, info.ClassExprloc:
			return value.Format(t, value.Object{Bytes: c.Block}, opts)
		}
		return "<error: unsupported constant form>", fmt.Errorf("procview: %s: DW_AT_const_value of class %d", p.name, c.Class)
	}
	ep := expr.Params{Section: ".debug_info", AddrSize: as, Order: binary.LittleEndian, AddrBias: ctx.bias}
	ctx.missing = false
	obj, err := value.Locate(p.location, ep, ctx)
	switch {
	case err == nil:
		return value.Format(t, obj, opts)
	case errors.Is(err, value.ErrOptimizedOut):
		// Also a value on entry the caller's call site
		// (DW_TAG_call_site_parameter) did not give: gdb prints
		// <optimized out> when it cannot find it either.
		return "<optimized out>", err
	case errors.Is(err, expr.ErrUnsupported):
		return "<error: unsupported location>", err
	case ctx.missing || errors.Is(err, value.ErrNotSaved): // a register, the CFA or the frame base
		return "<not saved>", fmt.Errorf("%w: %w", errNotSaved, err)
	}
	return "<error: " + err.Error() + ">", err
}
