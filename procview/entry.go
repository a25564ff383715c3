package procview

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/expr"
	"github.com/elfimage/elfimage/dwarf/info"
	"github.com/elfimage/elfimage/unwind"
)

// Limits of the entry-value resolver (the debug information is
// untrusted).
const (
	// maxEntryDepth bounds the call values evaluated to find one value on
	// entry: a call value may itself hold the caller's entry value
	// (DW_OP_entry_value in DW_AT_call_value), found in the caller's
	// caller, and so on outwards.
	maxEntryDepth = 8
	// maxEntryLookups bounds the values on entry looked up for one
	// frame's arguments, nested ones included: a call value may hold
	// several entry values, each found through a call value that may
	// hold several more, which maxEntryDepth alone bounds only
	// exponentially.
	maxEntryLookups = 256
	// maxCallSites bounds the call sites indexed per subprogram.
	maxCallSites = 1 << 14
	// maxTailHops bounds the functions visited by the self-tail-call
	// check.
	maxTailHops = 64
	// maxCallSiteDIEs bounds the DIEs read per subprogram for its call
	// sites.
	maxCallSiteDIEs = 1 << 20
)

// callSite is a DW_TAG_call_site (DW_TAG_GNU_call_site) of a subprogram,
// DWARF 5 section 3.4.1.
type callSite struct {
	ret       uint64 // DW_AT_call_return_pc (GNU: DW_AT_low_pc), link-time
	hasRet    bool   // ret is known (a tail call may have only DW_AT_call_pc)
	tail      bool   // DW_AT_call_tail_call, DW_AT_GNU_tail_call
	origin    uint64 // DW_AT_call_origin (GNU: DW_AT_abstract_origin), 0 if none
	target    []byte // DW_AT_call_target (GNU: DW_AT_GNU_call_site_target), nil if none
	off       uint64 // the DIE's .debug_info offset, for errors
	params    []callParam
	hasTarget bool
}

// callParam is a DW_TAG_call_site_parameter (DW_TAG_GNU_call_site_parameter),
// DWARF 5 section 3.4.2.
type callParam struct {
	loc       []byte // DW_AT_location: where the callee finds it on entry
	value     []byte // DW_AT_call_value (GNU: DW_AT_GNU_call_site_value), in the caller's frame
	dataValue []byte // DW_AT_call_data_value: the value it points to
	origin    uint64 // DW_AT_call_parameter (GNU: DW_AT_abstract_origin): the callee's DW_TAG_formal_parameter, 0 if none
	off       uint64 // the DIE's .debug_info offset, for errors
}

// callSites are the call sites of one subprogram, sorted by return pc,
// with what evaluating their values in the caller's frame needs.
type callSites struct {
	sites     []callSite
	frameBase []byte
	entry     uint64 // the subprogram's entry pc, link-time
	names     funcNames
	unit      *info.UnitHeader
}

// funcNames are a function's DW_AT_linkage_name and DW_AT_name
// (through DW_AT_abstract_origin and DW_AT_specification).
type funcNames struct{ linkage, name string }

func (a funcNames) same(b funcNames) bool {
	if a.linkage != "" && b.linkage != "" {
		return a.linkage == b.linkage
	}
	return a.name != "" && a.name == b.name
}

// subprogramAt returns the subprogram covering the link-time address addr.
func (x *argIndex) subprogramAt(addr uint64) (span, *info.UnitHeader, error) {
	if x.err != nil {
		return span{}, nil, x.err
	}
	i := sort.Search(len(x.cus), func(i int) bool { return x.cus[i].hi > addr })
	for ; i < len(x.cus) && x.cus[i].lo <= addr; i++ {
		s, u, err := x.subprograms(x.cus[i].off)
		if err != nil {
			return span{}, nil, err
		}
		if j := sort.Search(len(s), func(j int) bool { return s[j].hi > addr }); j < len(s) && s[j].lo <= addr {
			return s[j], u, nil
		}
	}
	return span{}, nil, fmt.Errorf("procview: no subprogram covers %#x", addr)
}

// errNoEntry is wrapped by the resolver's errors: the value on entry is
// not known.
var errNoEntry = expr.ErrNoEntryValue

// entryOf returns the entry pc of the function DIE e of unit u: its
// DW_AT_low_pc, else the start of the first range of DW_AT_ranges.
func (x *argIndex) entryOf(u *info.UnitHeader, e *info.Entry) (uint64, bool) {
	if lo, _, ok := e.PCRange(); ok {
		return lo, true
	}
	if rs := x.ranges(u, 0, e); len(rs) > 0 {
		return rs[0].lo, true
	}
	return 0, false
}

// namesOf returns the names of the function DIE at off, following
// DW_AT_abstract_origin and DW_AT_specification (at most maxTypeHops).
func (x *argIndex) namesOf(off uint64) funcNames {
	var n funcNames
	r := x.data.Reader()
	for hop := 0; hop < maxTypeHops && (n.linkage == "" || n.name == ""); hop++ {
		r.Seek(off)
		e, err := r.Next()
		if err != nil || e == nil {
			break
		}
		if n.linkage == "" {
			if n.linkage, _ = e.String(dwarf.DW_AT_linkage_name); n.linkage == "" {
				n.linkage, _ = e.String(dwarf.DW_AT_MIPS_linkage_name)
			}
		}
		if n.name == "" {
			n.name, _ = e.String(dwarf.DW_AT_name)
		}
		next, ok := refOf(e, dwarf.DW_AT_abstract_origin)
		if !ok {
			next, ok = refOf(e, dwarf.DW_AT_specification)
		}
		if !ok {
			break
		}
		off = next
	}
	return n
}

// callSitesOf returns the call sites of the subprogram DIE at off in unit
// u, read on first use: every DW_TAG_call_site and DW_TAG_GNU_call_site
// below it (in lexical blocks and inlined subroutines too), with their
// parameters.
func (x *argIndex) callSitesOf(u *info.UnitHeader, off uint64) (*callSites, error) {
	x.mu.Lock()
	cs, ok := x.sites[off]
	x.mu.Unlock()
	if ok {
		return cs, nil
	}
	r := x.data.Reader()
	r.Seek(off)
	e, err := r.Next()
	if err != nil || e == nil {
		return nil, fmt.Errorf("procview: subprogram DIE at .debug_info offset %#x: %v", off, err)
	}
	cs = &callSites{frameBase: exprOf(e, dwarf.DW_AT_frame_base), names: x.namesOf(off), unit: u}
	cs.entry, _ = x.entryOf(u, e)
	if e.Children {
		// owner[d] is the index in cs.sites of the call site whose
		// children are at depth d+1, or -1 for another DIE.
		owner := []int{-1}
		for n := 0; len(owner) > 0 && n < maxCallSiteDIEs; n++ {
			c, err := r.Next()
			if err != nil {
				return nil, err
			}
			if c == nil || r.Unit() != u {
				break
			}
			if c.Tag == 0 {
				owner = owner[:len(owner)-1]
				continue
			}
			site := owner[len(owner)-1]
			switch c.Tag {
			case dwarf.DW_TAG_call_site, dwarf.DW_TAG_GNU_call_site:
				s, ok := readCallSite(c)
				if ok && len(cs.sites) < maxCallSites {
					cs.sites = append(cs.sites, s)
					if c.Children {
						owner = append(owner, len(cs.sites)-1)
						continue
					}
				}
			case dwarf.DW_TAG_call_site_parameter, dwarf.DW_TAG_GNU_call_site_parameter:
				if site >= 0 && len(cs.sites[site].params) < MaxArgs {
					cs.sites[site].params = append(cs.sites[site].params, callParam{
						loc:       exprOf(c, dwarf.DW_AT_location),
						value:     firstExpr(c, dwarf.DW_AT_call_value, dwarf.DW_AT_GNU_call_site_value),
						dataValue: firstExpr(c, dwarf.DW_AT_call_data_value, dwarf.DW_AT_GNU_call_site_data_value),
						origin:    originOf(c),
						off:       c.Offset,
					})
				}
			case dwarf.DW_TAG_subprogram:
				// A nested function has its own call sites.
			default:
				if c.Children {
					owner = append(owner, -1)
					continue
				}
			}
			if c.Children {
				r.SkipChildren()
			}
		}
	}
	sort.SliceStable(cs.sites, func(i, j int) bool { return cs.sites[i].ret < cs.sites[j].ret })
	x.mu.Lock()
	x.sites[off] = cs
	x.mu.Unlock()
	return cs, nil
}

// originOf returns the formal parameter a call site parameter DIE e
// passes: its DW_AT_call_parameter (DWARF 5), else DW_AT_abstract_origin
// (GNU), 0 if none.
func originOf(e *info.Entry) uint64 {
	if o, ok := refOf(e, dwarf.DW_AT_call_parameter); ok {
		return o
	}
	o, _ := refOf(e, dwarf.DW_AT_abstract_origin)
	return o
}

// readCallSite reads a call site DIE's attributes; false when it has
// neither a return pc nor is a tail call.
func readCallSite(c *info.Entry) (callSite, bool) {
	s := callSite{off: c.Offset}
	ret, ok := c.Val(dwarf.DW_AT_call_return_pc)
	if !ok {
		ret, ok = c.Val(dwarf.DW_AT_low_pc)
	}
	if ok && ret.Class == info.ClassAddress {
		s.ret, s.hasRet = ret.Val, true
	}
	for _, a := range []dwarf.Attr{dwarf.DW_AT_call_tail_call, dwarf.DW_AT_GNU_tail_call} {
		if f, ok := c.Val(a); ok && (f.Class != info.ClassFlag || f.Val != 0) {
			s.tail = true
		}
	}
	var ok2 bool
	if s.origin, ok2 = refOf(c, dwarf.DW_AT_call_origin); !ok2 {
		s.origin, ok2 = refOf(c, dwarf.DW_AT_abstract_origin)
	}
	s.target = firstExpr(c, dwarf.DW_AT_call_target, dwarf.DW_AT_GNU_call_site_target)
	s.hasTarget = ok2 || s.target != nil
	return s, s.hasRet || s.tail
}

// firstExpr returns the first of attributes as that e has as an
// expression.
func firstExpr(e *info.Entry, as ...dwarf.Attr) []byte {
	for _, a := range as {
		if b := exprOf(e, a); b != nil {
			return b
		}
	}
	return nil
}

// siteAt returns the call site whose return pc is ret (link-time).
func (cs *callSites) siteAt(ret uint64) (*callSite, bool) {
	i := sort.Search(len(cs.sites), func(i int) bool { return cs.sites[i].ret >= ret })
	for ; i < len(cs.sites) && cs.sites[i].ret == ret; i++ {
		if cs.sites[i].hasRet {
			return &cs.sites[i], true
		}
	}
	return nil, false
}

// staticTarget returns the link-time entry of the function the call
// site's DW_AT_call_origin names when that DIE has code, or its names.
func (x *argIndex) staticTarget(cs *callSites, s *callSite) (uint64, bool, funcNames) {
	if s.origin == 0 {
		return 0, false, funcNames{}
	}
	r := x.data.Reader()
	r.Seek(s.origin)
	if e, err := r.Next(); err == nil && e != nil {
		u, ok := x.data.UnitAt(s.origin)
		if !ok {
			u = cs.unit
		}
		if a, ok := x.entryOf(u, e); ok {
			return a, true, funcNames{}
		}
	}
	return 0, false, x.namesOf(s.origin)
}

// callsItselfByTail reports whether the function whose link-time entry
// is entry (names: its names) may reach itself through tail calls
// (DW_AT_call_tail_call sites, followed through the targets their
// DW_AT_call_origin gives, at most maxTailHops functions), or has a tail
// call whose target is known only at run time: as for gdb, its entry
// values are then not reliable (the frame may be a tail-called instance).
func (x *argIndex) callsItselfByTail(entry uint64, names funcNames) error {
	x.mu.Lock()
	err, ok := x.selfTail[entry]
	x.mu.Unlock()
	if ok {
		return err
	}
	err = x.tailWalk(entry, names)
	x.mu.Lock()
	x.selfTail[entry] = err
	x.mu.Unlock()
	return err
}

// tailWalk is callsItselfByTail without its cache.
func (x *argIndex) tailWalk(entry uint64, names funcNames) error {
	seen := map[uint64]bool{entry: true}
	todo := []uint64{entry}
	for len(todo) > 0 && len(seen) <= maxTailHops {
		a := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		sp, u, err := x.subprogramAt(a)
		if err != nil {
			continue
		}
		cs, err := x.callSitesOf(u, sp.off)
		if err != nil {
			return fmt.Errorf("%w: %w", errNoEntry, err)
		}
		for i := range cs.sites {
			s := &cs.sites[i]
			if !s.tail {
				continue
			}
			t, ok, tn := x.staticTarget(cs, s)
			switch {
			case ok && t == entry, !ok && tn.same(names):
				return fmt.Errorf("%w: the function at %#x can call itself by tail calls (DW_TAG_call_site at .debug_info offset %#x)", errNoEntry, entry, s.off)
			case !ok && s.target != nil:
				return fmt.Errorf("%w: a tail call with a target known only at run time (DW_TAG_call_site at .debug_info offset %#x)", errNoEntry, s.off)
			case ok && !seen[t]:
				seen[t] = true
				todo = append(todo, t)
			}
		}
	}
	return nil
}

// entrySource gives the values on entry of frames[i] (expr.EntryValuer,
// through argContext): from the call site of frames[i+1], its caller,
// whose return pc is that frame's pc, the call site parameter whose
// DW_AT_location is the register, and its DW_AT_call_value evaluated in
// the caller's frame (its registers, CFA, frame base and the memory),
// as gdb does (DWARF 5 sections 2.5.1.7 and 3.4.2).
type entrySource struct {
	mods   moduleFinder
	frames []Frame
	i      int
	mem    unwind.Memory
	x      *argIndex         // frames[i]'s module's DWARF
	syms   func() []symEntry // and symbols (nil: none)
	bias   uint64            // its load bias
	entry  uint64            // link-time entry of frames[i]'s function
	unit   uint64            // the .debug_info offset of its unit
	names  funcNames
	depth  int // call values being evaluated to get here
	// lookups counts the values on entry looked up for the frame whose
	// arguments are read, shared by the nested sources (nil: none yet).
	lookups *int
}

// moduleFinder finds the module of a run-time address: its DWARF, load
// bias, symbols and name (a View; tests give modules of their own).
type moduleFinder interface {
	moduleArgs(pc uint64) (modArgs, error)
}

// modArgs is one module as the entry-value resolver reads it.
type modArgs struct {
	x    *argIndex
	bias uint64
	syms func() []symEntry
	name string
}

// moduleArgs implements moduleFinder.
func (v *View) moduleArgs(pc uint64) (modArgs, error) {
	m, err := v.Lookup(pc)
	if err != nil {
		return modArgs{}, err
	}
	o := m.obj.get()
	if o.err != nil {
		return modArgs{}, fmt.Errorf("module %s: %w", m.Name, o.err)
	}
	return modArgs{x: v.args(o), bias: m.Bias, syms: o.symbols, name: m.Name}, nil
}

// value implements argContext.EntryValue.
func (s *entrySource) value(r arch.Reg, size int) (uint64, error) {
	return s.find(size, func(p *callParam, as uint8, _ *argIndex) bool {
		pr, psize, ok := expr.EntryRegister(p.loc, as)
		return ok && pr == r && psize == 0
	}, fmt.Sprintf("register %d", r))
}

// paramValue implements argContext.ParameterValue: the call site
// parameter whose DW_AT_abstract_origin is the DW_TAG_formal_parameter at
// unit offset off of frames[i]'s function's unit (in the same module).
func (s *entrySource) paramValue(off uint64) (uint64, error) {
	die := s.unit + off
	return s.find(0, func(p *callParam, _ uint8, caller *argIndex) bool {
		return p.origin == die && caller == s.x
	}, fmt.Sprintf("the DW_TAG_formal_parameter at .debug_info offset %#x", die))
}

// find evaluates the DW_AT_call_value (size 0) or DW_AT_call_data_value
// (the size bytes it points to) of the caller's call site parameter that
// match accepts, in the caller's frame; what names the parameter in
// errors.
func (s *entrySource) find(size int, match func(p *callParam, addrSize uint8, caller *argIndex) bool, what string) (uint64, error) {
	if s.depth >= maxEntryDepth {
		return 0, fmt.Errorf("%w: more than %d call values nested", errNoEntry, maxEntryDepth)
	}
	if s.lookups == nil {
		s.lookups = new(int)
	}
	if *s.lookups >= maxEntryLookups {
		return 0, fmt.Errorf("%w: more than %d values on entry looked up for one frame", errNoEntry, maxEntryLookups)
	}
	*s.lookups++
	if s.i+1 >= len(s.frames) {
		return 0, fmt.Errorf("%w: no caller", errNoEntry)
	}
	caller := &s.frames[s.i+1]
	if caller.Exact || caller.PC == 0 || s.frames[s.i].Signal {
		return 0, fmt.Errorf("%w: the caller was interrupted, not calling", errNoEntry)
	}
	m, err := s.mods.moduleArgs(caller.PC - 1)
	if err != nil {
		return 0, fmt.Errorf("%w: the caller: %w", errNoEntry, err)
	}
	cx := m.x
	ret := caller.PC - m.bias
	sp, u, err := cx.subprogramAt(ret - 1)
	if err != nil {
		return 0, fmt.Errorf("%w: the caller at %#x: %w", errNoEntry, caller.PC, err)
	}
	cs, err := cx.callSitesOf(u, sp.off)
	if err != nil {
		return 0, fmt.Errorf("%w: the caller at %#x: %w", errNoEntry, caller.PC, err)
	}
	site, ok := cs.siteAt(ret)
	if !ok {
		return 0, fmt.Errorf("%w: no DW_TAG_call_site with return pc %#x in %s", errNoEntry, ret, m.name)
	}
	// The caller's frame, where the call site's expressions are evaluated.
	cctx := &argContext{f: caller, mem: s.mem, bias: m.bias, entry: &entrySource{
		mods: s.mods, frames: s.frames, i: s.i + 1, mem: s.mem, x: cx, syms: m.syms, bias: m.bias, entry: cs.entry, unit: cs.unit.Offset, names: cs.names, depth: s.depth + 1, lookups: s.lookups}}
	ep := expr.Params{Section: ".debug_info", Offset: site.off, AddrSize: u.Enc.AddrSize, Order: binary.LittleEndian, AddrBias: m.bias}
	cctx.setFrameBase(cs.frameBase, ep)
	// The call site must call this frame's function: a tail call in
	// between leaves the caller's call site naming another function.
	if !site.hasTarget {
		return 0, fmt.Errorf("%w: DW_TAG_call_site at .debug_info offset %#x has no target", errNoEntry, site.off)
	}
	if t, ok, tn := cx.staticTarget(cs, site); ok {
		if t+m.bias != s.entry+s.bias {
			return 0, fmt.Errorf("%w: DW_TAG_call_site at .debug_info offset %#x calls %#x, not this frame's function at %#x", errNoEntry, site.off, t+m.bias, s.entry+s.bias)
		}
	} else if site.origin != 0 {
		if !tn.same(s.names) && !s.symbolNamed(tn) {
			return 0, fmt.Errorf("%w: DW_TAG_call_site at .debug_info offset %#x calls %q, not this frame's %q", errNoEntry, site.off, tn.name, s.names.name)
		}
	} else {
		t, err := evalValue(site.target, ep, cctx)
		if err != nil {
			return 0, fmt.Errorf("%w: DW_AT_call_target of DW_TAG_call_site at .debug_info offset %#x: %w", errNoEntry, site.off, err)
		}
		if t != s.entry+s.bias {
			return 0, fmt.Errorf("%w: DW_TAG_call_site at .debug_info offset %#x calls %#x, not this frame's function at %#x", errNoEntry, site.off, t, s.entry+s.bias)
		}
	}
	if err := s.x.callsItselfByTail(s.entry, s.names); err != nil {
		return 0, err
	}
	for i := range site.params {
		p := &site.params[i]
		if !match(p, u.Enc.AddrSize, cx) {
			continue
		}
		code, what := p.value, "DW_AT_call_value"
		if size > 0 {
			code, what = p.dataValue, "DW_AT_call_data_value"
		}
		if code == nil {
			return 0, fmt.Errorf("%w: DW_TAG_call_site_parameter at .debug_info offset %#x has no %s", errNoEntry, p.off, what)
		}
		ep.Offset = p.off
		v, err := evalValue(code, ep, cctx)
		if err != nil {
			return 0, fmt.Errorf("%w: %s of DW_TAG_call_site_parameter at .debug_info offset %#x: %w", errNoEntry, what, p.off, err)
		}
		if size > 0 && size < 8 {
			v &= 1<<(8*size) - 1
		}
		return v, nil
	}
	return 0, fmt.Errorf("%w: DW_TAG_call_site at .debug_info offset %#x has no parameter for %s", errNoEntry, site.off, what)
}

// symbolNamed reports whether frames[i]'s module has a symbol at its
// function's entry with the physical name of n (its linkage name, else
// its name): a call site's DW_AT_call_origin may be a declaration, to be
// found by name, as gdb finds it through the minimal symbols.
func (s *entrySource) symbolNamed(n funcNames) bool {
	name := n.linkage
	if name == "" {
		name = n.name
	}
	if name == "" || s.syms == nil {
		return false
	}
	syms := s.syms()
	i := sort.Search(len(syms), func(i int) bool { return syms[i].value >= s.entry })
	for ; i < len(syms) && syms[i].value == s.entry; i++ {
		if syms[i].name == name {
			return true
		}
	}
	return false
}

// evalValue evaluates a DWARF expression that yields a value
// (DW_AT_call_value, DW_AT_call_target): the top of the stack, a
// register's value, a stack or implicit value.
func evalValue(code []byte, ep expr.Params, ctx *argContext) (uint64, error) {
	res, err := expr.Eval(code, ep, ctx)
	if err != nil {
		return 0, err
	}
	switch res.Kind {
	case expr.Memory:
		return res.Addr, nil
	case expr.Value:
		return res.Value, nil
	case expr.Register:
		v, ok := ctx.Reg(res.Reg)
		if !ok {
			return 0, fmt.Errorf("register %d not known in the caller's frame", res.Reg)
		}
		return v, nil
	case expr.Implicit:
		if len(res.Bytes) <= 8 {
			var w [8]byte
			copy(w[:], res.Bytes)
			return binary.LittleEndian.Uint64(w[:]), nil
		}
	}
	return 0, errors.New("not a value")
}
