package procview

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/expr"
	"github.com/elfimage/elfimage/dwarf/info"
	"github.com/elfimage/elfimage/dwarf/loc"
	"github.com/elfimage/elfimage/symbolize"
	"github.com/elfimage/elfimage/unwind"
)

// oneModule is a moduleFinder of one module at bias 0 covering every
// address but 0xdead0000 and above.
type oneModule struct{ x *argIndex }

// twoModules is oneModule with the callers' addresses, from 0x2000 on,
// in a second module whose DWARF is caller.
type twoModules struct{ x, caller *argIndex }

func (m twoModules) moduleArgs(pc uint64) (modArgs, error) {
	a, err := oneModule{m.x}.moduleArgs(pc)
	if err == nil && pc >= 0x2000 {
		a.x, a.name = m.caller, "caller"
	}
	return a, err
}

func (m oneModule) moduleArgs(pc uint64) (modArgs, error) {
	if pc >= 0xdead0000 {
		return modArgs{}, ErrNoModule
	}
	return modArgs{x: m.x, name: "m", syms: func() []symEntry { return []symEntry{{value: 0x1000, size: 0x100, name: "f_sym"}} }}, nil
}

// entryCase is a unit with a callee f [0x1000, 0x1100) with parameters p
// (its location: loc) and q (in rsi at the pc, DW_OP_reg4), a caller g
// [0x2000, 0x2100) whose call site (site) returns to 0x2010, and h
// [0x3000, 0x3100) calling g, returning to 0x3010 (its call site gives
// g's rdi as 20).
type entryCase struct {
	name   string
	loc    []byte // p's location after 0x1010 (in rdi before, a location list)
	single bool   // p's location is loc alone (an exprloc)
	// paramRef, when not nil, is the operand of a DW_OP_GNU_parameter_ref
	// in loc, which sections sets to the unit offset of "removed".
	paramRef []byte
	site     func(f, g *info.DIE) *info.DIE // g's call site (nil: none)
	fsites   func(f *info.DIE) []*info.DIE  // f's own call sites
	frames   []Frame                        // from f outwards; nil: f, g, h
	want     string                         // the Args of f, as Arg.String shows them
	why      string                         // in p's error, when p is not known
	// otherCaller puts g and h in a second module with the same DWARF
	// at the same addresses (unit offsets then name DIEs of another
	// module's DWARF).
	otherCaller bool
}

var (
	rdi, rsi = arch.X86_64_RDI, arch.X86_64_RSI
	sv       = byte(dwarf.DW_OP_stack_value)
)

func entryOp(sub ...byte) []byte {
	return append([]byte{byte(dwarf.DW_OP_entry_value), byte(len(sub))}, sub...)
}

func reg(r arch.Reg) []byte { return []byte{byte(dwarf.DW_OP_reg0) + byte(r)} }

func csParam(r arch.Reg, value []byte) *info.DIE {
	return &info.DIE{Tag: dwarf.DW_TAG_call_site_parameter, Attrs: []info.Attr{
		{Name: dwarf.DW_AT_location, Value: info.Exprloc(reg(r))},
		{Name: dwarf.DW_AT_call_value, Value: info.Exprloc(value)}}}
}

func callSiteDIE(ret uint64, origin *info.DIE, params ...*info.DIE) *info.DIE {
	d := &info.DIE{Tag: dwarf.DW_TAG_call_site, Attrs: []info.Attr{{Name: dwarf.DW_AT_call_return_pc, Value: info.Addr(ret)}}, Children: params}
	if origin != nil {
		d.Attrs = append(d.Attrs, info.Attr{Name: dwarf.DW_AT_call_origin, Value: info.Ref(origin)})
	}
	return d
}

func (c *entryCase) sections(t testing.TB) func(string) []byte {
	long := &info.DIE{Tag: dwarf.DW_TAG_base_type, Attrs: []info.Attr{
		{Name: dwarf.DW_AT_name, Value: info.String("long")},
		{Name: dwarf.DW_AT_encoding, Value: info.Udata(uint64(dwarf.DW_ATE_signed))},
		{Name: dwarf.DW_AT_byte_size, Value: info.Udata(8)}}}
	fn := func(name string, lo uint64, params ...*info.DIE) *info.DIE {
		return &info.DIE{Tag: dwarf.DW_TAG_subprogram, Attrs: []info.Attr{
			{Name: dwarf.DW_AT_name, Value: info.String(name)},
			{Name: dwarf.DW_AT_low_pc, Value: info.Addr(lo)},
			{Name: dwarf.DW_AT_high_pc, Value: info.Udata(0x100)},
			{Name: dwarf.DW_AT_frame_base, Value: info.Exprloc([]byte{byte(dwarf.DW_OP_call_frame_cfa)})}}, Children: params}
	}
	param := func(name string, loc []byte) *info.DIE {
		d := &info.DIE{Tag: dwarf.DW_TAG_formal_parameter, Attrs: []info.Attr{
			{Name: dwarf.DW_AT_name, Value: info.String(name)},
			{Name: dwarf.DW_AT_type, Value: info.Ref(long)}}}
		if loc != nil {
			d.Attrs = append(d.Attrs, info.Attr{Name: dwarf.DW_AT_location, Value: info.Exprloc(loc)})
		}
		return d
	}
	p := param("p", c.loc)
	lists, err := loc.NewLocLists(dwarf.Default64, 0x1000)
	if err != nil {
		t.Fatal(err)
	}
	if !c.single {
		off, err := lists.AddList([]loc.Entry{{Start: 0x1000, End: 0x1010, Expr: reg(rdi)}, {Start: 0x1010, End: 0x1100, Expr: c.loc}})
		if err != nil {
			t.Fatal(err)
		}
		p.Attrs[2] = info.Attr{Name: dwarf.DW_AT_location, Value: info.SecOffset(off)}
	}
	f := fn("f", 0x1000, p, param("q", reg(rsi)))
	if c.fsites != nil {
		f.Children = append(f.Children, c.fsites(f)...)
	}
	g := fn("g", 0x2000, param("gp", append(entryOp(reg(rdi)...), sv)))
	h := fn("h", 0x3000)
	decl := &info.DIE{Tag: dwarf.DW_TAG_subprogram, Attrs: []info.Attr{
		{Name: dwarf.DW_AT_name, Value: info.String("f_sym")},
		{Name: dwarf.DW_AT_declaration, Value: info.Flag(true)}}}
	// The abstract f's parameter "removed", which a clone of f lost:
	// DW_OP_GNU_parameter_ref refers to it.
	removed := &info.DIE{Tag: dwarf.DW_TAG_formal_parameter, Attrs: []info.Attr{
		{Name: dwarf.DW_AT_name, Value: info.String("removed")},
		{Name: dwarf.DW_AT_type, Value: info.Ref(long)}}}
	declF := &info.DIE{Tag: dwarf.DW_TAG_subprogram, Attrs: []info.Attr{
		{Name: dwarf.DW_AT_name, Value: info.String("f")},
		{Name: dwarf.DW_AT_declaration, Value: info.Flag(true)}}, Children: []*info.DIE{removed}}
	entryDecls = [3]*info.DIE{decl, declF, removed}
	if c.site != nil {
		g.Children = append(g.Children, c.site(f, g))
	}
	h.Children = append(h.Children, callSiteDIE(0x3010, g, csParam(rdi, []byte{byte(dwarf.DW_OP_lit0) + 20})))
	cu := &info.DIE{Tag: dwarf.DW_TAG_compile_unit, Attrs: []info.Attr{
		{Name: dwarf.DW_AT_name, Value: info.String("e.c")},
		{Name: dwarf.DW_AT_low_pc, Value: info.Addr(0x1000)},
		{Name: dwarf.DW_AT_high_pc, Value: info.Udata(0x3000)}}, Children: []*info.DIE{long, decl, declF, f, g, h}}
	str := dwarf.NewStrTab()
	infoSec, abbrev, err := info.Encode([]*info.Unit{{Enc: dwarf.Default64, Root: cu}}, str)
	if err != nil {
		t.Fatal(err)
	}
	if c.paramRef != nil {
		// Patch in the unit offset of "removed" (the layout does not
		// change) and encode again.
		d, err := info.New(info.Sections{Info: infoSec, Abbrev: abbrev, Str: str.Bytes(), Order: binary.LittleEndian})
		if err != nil {
			t.Fatal(err)
		}
		r := d.Reader()
		for {
			e, err := r.Next()
			if err != nil || e == nil {
				t.Fatalf("no DIE removed: %v", err)
			}
			if n, _ := e.String(dwarf.DW_AT_name); n == "removed" {
				binary.LittleEndian.PutUint32(c.paramRef, uint32(e.Offset))
				break
			}
		}
		str = dwarf.NewStrTab()
		if infoSec, abbrev, err = info.Encode([]*info.Unit{{Enc: dwarf.Default64, Root: cu}}, str); err != nil {
			t.Fatal(err)
		}
	}
	secs := map[string][]byte{".debug_info": infoSec, ".debug_abbrev": abbrev, ".debug_str": str.Bytes(), ".debug_loclists": lists.Bytes()}
	return func(n string) []byte { return secs[n] }
}

// entryDecls are the declarations of the unit being built: one named as
// f's symbol (f_sym), one named f.
var entryDecls [3]*info.DIE

func entryFrames() []Frame {
	fs := []Frame{
		{PC: 0x1050, Exact: true, CFA: 0x8000, Funcs: []symbolize.Frame{{Function: "f"}}},
		{PC: 0x2010, CFA: 0x8100, Funcs: []symbolize.Frame{{Function: "g"}}},
		{PC: 0x3010, CFA: 0x8200, Funcs: []symbolize.Frame{{Function: "h"}}},
	}
	fs[0].Regs.Set(rsi, 9)
	fs[1].Regs.Set(arch.X86_64_RBX, 100)
	fs[1].Regs.Set(arch.X86_64_RAX, 0x1000)
	return fs
}

// TestEntryValueResolver: DW_OP_entry_value and Arg.Entry through the
// caller's call site, case by case: a call value in the caller's
// registers, a nested one (the caller's own value on entry, from its
// caller), an indirect call (DW_AT_call_target), a declaration found by
// name or by the callee's symbol, the GNU DWARF 4 forms, a
// DW_AT_call_data_value; and not known (with the reason) without a call
// site, for a call site calling another function, a callee that can
// call itself by tail calls, an interrupted caller, a missing parameter,
// too deep a nesting.
func TestEntryValueResolver(t *testing.T) {
	pEntry := append(entryOp(reg(rdi)...), sv)
	rbxPlus5 := []byte{byte(dwarf.DW_OP_breg0) + byte(arch.X86_64_RBX), 5}
	lit7 := []byte{byte(dwarf.DW_OP_lit0) + 7}
	basic := func(f, g *info.DIE) *info.DIE {
		return callSiteDIE(0x2010, f, csParam(rdi, rbxPlus5), csParam(rsi, lit7))
	}
	tailSelf := func(f *info.DIE) []*info.DIE {
		return []*info.DIE{{Tag: dwarf.DW_TAG_call_site, Attrs: []info.Attr{
			{Name: dwarf.DW_AT_call_return_pc, Value: info.Addr(0x1080)},
			{Name: dwarf.DW_AT_call_tail_call, Value: info.Flag(true)},
			{Name: dwarf.DW_AT_call_origin, Value: info.Ref(f)}}}}
	}
	cases := []entryCase{
		{name: "caller's register", loc: pEntry, site: basic, want: "p=p@entry=105, q=9, q@entry=7"},
		{name: "an exprloc", loc: pEntry, single: true, site: basic, want: "p=105, q=9, q@entry=7"}, // gdb: no x@entry unless a register at entry
		{name: "nested", loc: pEntry, site: func(f, g *info.DIE) *info.DIE {
			return callSiteDIE(0x2010, f, csParam(rdi, append(entryOp(reg(rdi)...), byte(dwarf.DW_OP_plus_uconst), 1)))
		}, want: "p=p@entry=21, q=9"},
		{name: "indirect", loc: pEntry, site: func(f, g *info.DIE) *info.DIE {
			d := callSiteDIE(0x2010, nil, csParam(rdi, rbxPlus5))
			d.Attrs = append(d.Attrs, info.Attr{Name: dwarf.DW_AT_call_target, Value: info.Exprloc([]byte{byte(dwarf.DW_OP_breg0) + byte(arch.X86_64_RAX), 0})})
			return d
		}, want: "p=p@entry=105, q=9"},
		{name: "indirect elsewhere", loc: pEntry, site: func(f, g *info.DIE) *info.DIE {
			d := callSiteDIE(0x2010, nil, csParam(rdi, rbxPlus5))
			d.Attrs = append(d.Attrs, info.Attr{Name: dwarf.DW_AT_call_target, Value: info.Exprloc([]byte{byte(dwarf.DW_OP_breg0) + byte(arch.X86_64_RAX), 8})})
			return d
		}, want: "p=<optimized out>, q=9", why: "calls 0x1008, not this frame's function"},
		{name: "declaration by name", loc: pEntry, site: func(f, g *info.DIE) *info.DIE {
			return callSiteDIE(0x2010, entryDecls[1], csParam(rdi, rbxPlus5))
		}, want: "p=p@entry=105, q=9"},
		{name: "declaration by symbol", loc: pEntry, site: func(f, g *info.DIE) *info.DIE {
			return callSiteDIE(0x2010, entryDecls[0], csParam(rdi, rbxPlus5))
		}, want: "p=p@entry=105, q=9"},
		{name: "GNU", loc: append([]byte{byte(dwarf.DW_OP_GNU_entry_value), 1, byte(dwarf.DW_OP_reg0) + byte(rdi)}, sv), site: func(f, g *info.DIE) *info.DIE {
			return &info.DIE{Tag: dwarf.DW_TAG_GNU_call_site, Attrs: []info.Attr{
				{Name: dwarf.DW_AT_low_pc, Value: info.Addr(0x2010)},
				{Name: dwarf.DW_AT_abstract_origin, Value: info.Ref(f)}}, Children: []*info.DIE{
				{Tag: dwarf.DW_TAG_GNU_call_site_parameter, Attrs: []info.Attr{
					{Name: dwarf.DW_AT_location, Value: info.Exprloc(reg(rdi))},
					{Name: dwarf.DW_AT_GNU_call_site_value, Value: info.Exprloc(rbxPlus5)}}}}}
		}, want: "p=p@entry=105, q=9"},
		{name: "data value", loc: append(entryOp(byte(dwarf.DW_OP_breg0)+byte(rdi), 0, byte(dwarf.DW_OP_deref_size), 1), sv), site: func(f, g *info.DIE) *info.DIE {
			d := csParam(rdi, rbxPlus5)
			d.Attrs = append(d.Attrs, info.Attr{Name: dwarf.DW_AT_call_data_value, Value: info.Exprloc([]byte{byte(dwarf.DW_OP_const2u), 0x34, 0x12})})
			return callSiteDIE(0x2010, f, d)
		}, want: "p=52, p@entry=105, q=9"}, // *rdi on entry, and rdi on entry
		{name: "no call site", loc: pEntry, want: "p=<optimized out>, q=9", why: "no DW_TAG_call_site with return pc 0x2010"},
		{name: "another function", loc: pEntry, site: func(f, g *info.DIE) *info.DIE {
			return callSiteDIE(0x2010, g, csParam(rdi, rbxPlus5))
		}, want: "p=<optimized out>, q=9", why: "calls 0x2000, not this frame's function at 0x1000"},
		{name: "no target", loc: pEntry, site: func(f, g *info.DIE) *info.DIE {
			return callSiteDIE(0x2010, nil, csParam(rdi, rbxPlus5))
		}, want: "p=<optimized out>, q=9", why: "has no target"},
		{name: "tail calls itself", loc: pEntry, site: basic, fsites: tailSelf, want: "p=<optimized out>, q=9", why: "can call itself by tail calls"},
		{name: "tail call to a run-time target", loc: pEntry, site: basic, fsites: func(f *info.DIE) []*info.DIE {
			return []*info.DIE{{Tag: dwarf.DW_TAG_call_site, Attrs: []info.Attr{
				{Name: dwarf.DW_AT_call_return_pc, Value: info.Addr(0x1080)},
				{Name: dwarf.DW_AT_call_tail_call, Value: info.Flag(true)},
				{Name: dwarf.DW_AT_call_target, Value: info.Exprloc([]byte{byte(dwarf.DW_OP_breg0) + byte(arch.X86_64_RAX), 0})}}}}
		}, want: "p=<optimized out>, q=9", why: "a tail call with a target known only at run time"},
		{name: "a call to itself not a tail call (flag 0)", loc: pEntry, site: basic, fsites: func(f *info.DIE) []*info.DIE {
			d := tailSelf(f)
			d[0].Attrs[1].Value = info.Flag(false)
			return d
		}, want: "p=p@entry=105, q=9, q@entry=7"},
		{name: "no parameter", loc: pEntry, site: func(f, g *info.DIE) *info.DIE {
			return callSiteDIE(0x2010, f, csParam(rsi, lit7))
		}, want: "p=<optimized out>, q=9, q@entry=7", why: "no parameter for register 5"},
		{name: "parameter at a register's address", loc: pEntry, site: func(f, g *info.DIE) *info.DIE {
			// DW_AT_location *rdi: not the parameter in rdi.
			d := csParam(rdi, rbxPlus5)
			d.Attrs[0].Value = info.Exprloc([]byte{byte(dwarf.DW_OP_breg0) + byte(rdi), 0, byte(dwarf.DW_OP_deref)})
			return callSiteDIE(0x2010, f, d, csParam(rsi, lit7))
		}, want: "p=<optimized out>, q=9, q@entry=7", why: "no parameter for register 5"},
		{name: "interrupted caller", loc: pEntry, site: basic, frames: func() []Frame {
			fs := entryFrames()
			fs[1].Exact = true
			return fs
		}(), want: "p=<optimized out>, q=9", why: "interrupted"},
		{name: "no caller", loc: pEntry, site: basic, frames: entryFrames()[:1], want: "p=<optimized out>, q=9", why: "no caller"},
		{name: "caller in no module", loc: pEntry, site: basic, frames: func() []Frame {
			fs := entryFrames()
			fs[1].PC = 0xdead0010
			return fs
		}(), want: "p=<optimized out>, q=9", why: "outside every module"},
		{name: "caller's register not known", loc: pEntry, site: func(f, g *info.DIE) *info.DIE {
			return callSiteDIE(0x2010, f, csParam(rdi, []byte{byte(dwarf.DW_OP_breg0) + 12, 0}))
		}, want: "p=<optimized out>, q=9", why: "register 12 unknown"},
	}
	// A parameter gcc removed from a clone: DW_OP_GNU_parameter_ref to
	// the abstract f's "removed", given by the call site parameter whose
	// DW_AT_abstract_origin it is.
	refLoc := []byte{byte(dwarf.DW_OP_GNU_parameter_ref), 0, 0, 0, 0, sv}
	removedSite := func(attr dwarf.Attr) func(f, g *info.DIE) *info.DIE {
		return func(f, g *info.DIE) *info.DIE {
			return callSiteDIE(0x2010, f, &info.DIE{Tag: dwarf.DW_TAG_call_site_parameter, Attrs: []info.Attr{
				{Name: attr, Value: info.Ref(entryDecls[2])},
				{Name: dwarf.DW_AT_call_value, Value: info.Exprloc(rbxPlus5)}}})
		}
	}
	cases = append(cases,
		entryCase{name: "parameter ref", loc: refLoc, paramRef: refLoc[1:5], single: true, site: removedSite(dwarf.DW_AT_call_parameter), want: "p=105, q=9"},
		entryCase{name: "parameter ref GNU", loc: refLoc, paramRef: refLoc[1:5], single: true, site: removedSite(dwarf.DW_AT_abstract_origin), want: "p=105, q=9"},
		entryCase{name: "parameter ref of another module", loc: refLoc, paramRef: refLoc[1:5], single: true, site: removedSite(dwarf.DW_AT_call_parameter), otherCaller: true,
			want: "p=<optimized out>, q=9", why: "no parameter for the DW_TAG_formal_parameter at .debug_info offset"},
		entryCase{name: "parameter ref without the parameter", loc: refLoc, paramRef: refLoc[1:5], single: true, site: basic,
			want: "p=<optimized out>, q=9, q@entry=7", why: "no parameter for the DW_TAG_formal_parameter at .debug_info offset"})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.check(t) })
	}
}

func (c *entryCase) check(t *testing.T) {
	t.Helper()
	x := newArgIndex(c.sections(t))
	frames := c.frames
	if frames == nil {
		frames = entryFrames()
	}
	var mods moduleFinder = oneModule{x}
	if c.otherCaller {
		mods = twoModules{x, newArgIndex(c.sections(t))}
	}
	m, _ := oneModule{x}.moduleArgs(0)
	src := &entrySource{mods: mods, frames: frames, x: x, syms: m.syms, mem: &unwind.Snapshot{Base: 0x7000, Data: make([]byte, 0x2000)}}
	x.frameArgs(&frames[0], frames[0].PC, src.mem, src)
	if len(frames[0].Args) != 1 {
		t.Fatalf("args %+v", frames[0].Args)
	}
	var got []string
	for _, a := range frames[0].Args[0] {
		got = append(got, a.String())
	}
	if g := strings.Join(got, ", "); g != c.want {
		t.Errorf("(%s), want (%s)", g, c.want)
	}
	p := frames[0].Args[0][0]
	if c.why != "" && (!errors.Is(p.Err, expr.ErrNoEntryValue) || !strings.Contains(p.Err.Error(), c.why)) {
		t.Errorf("p's error %v, want ErrNoEntryValue saying %q", p.Err, c.why)
	}
}

// TestFuncNamesSame: a call site's target found by name is this frame's
// function when the linkage names are equal (C++ overloads share a
// name), or, when either has none, the names.
func TestFuncNamesSame(t *testing.T) {
	for _, c := range []struct {
		a, b funcNames
		want bool
	}{
		{funcNames{"_Z1fi", "f"}, funcNames{"_Z1fi", "f"}, true},
		{funcNames{"_Z1fi", "f"}, funcNames{"_Z1fl", "f"}, false},
		{funcNames{"", "f"}, funcNames{"_Z1fl", "f"}, true},
		{funcNames{"", "f"}, funcNames{"", "g"}, false},
		{funcNames{}, funcNames{}, false},
	} {
		if got := c.a.same(c.b); got != c.want || c.b.same(c.a) != c.want {
			t.Errorf("%+v same %+v: %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// TestEntryValueDepth: a chain of frames of a function that passes its
// own value on entry plus one to itself (f calls f, returning to
// 0x1010), below g's call giving rbx+5: known through maxEntryDepth call
// values, not known beyond.
func TestEntryValueDepth(t *testing.T) {
	for _, n := range []int{1, maxEntryDepth - 1, maxEntryDepth, maxEntryDepth + 3} {
		c := entryCase{loc: append(entryOp(reg(rdi)...), sv), site: func(f, g *info.DIE) *info.DIE {
			return callSiteDIE(0x2010, f, csParam(rdi, []byte{byte(dwarf.DW_OP_breg0) + byte(arch.X86_64_RBX), 5}))
		}}
		c.fsites = func(f *info.DIE) []*info.DIE {
			return []*info.DIE{callSiteDIE(0x1010, f, csParam(rdi, append(entryOp(reg(rdi)...), byte(dwarf.DW_OP_plus_uconst), 1)))}
		}
		fs := entryFrames()
		c.frames = []Frame{fs[0]}
		for range n - 1 {
			c.frames = append(c.frames, Frame{PC: 0x1010, CFA: 0x8000, Funcs: fs[0].Funcs})
		}
		c.frames = append(c.frames, fs[1], fs[2])
		// n frames of f: the innermost's value is 105 + n - 1, found
		// through n call values.
		if n <= maxEntryDepth {
			c.want = "p=p@entry=" + itoa(105+n-1) + ", q=9"
		} else {
			c.want, c.why = "p=<optimized out>, q=9", "nested"
		}
		t.Run(itoa(n), func(t *testing.T) { c.check(t) })
	}
}

// TestEntryValueLookups: a chain of frames of f whose call value for
// its parameter is the sum of four of its own values on entry, found in
// the next frame out, and so on (hostile DWARF: 4^n lookups for n frames
// without a bound on lookups): not known past maxEntryLookups lookups
// for the frame, the reason said.
func TestEntryValueLookups(t *testing.T) {
	e := entryOp(reg(rdi)...)
	sum := append(append(append(append(append([]byte{}, e...), e...), e...), e...),
		byte(dwarf.DW_OP_plus), byte(dwarf.DW_OP_plus), byte(dwarf.DW_OP_plus))
	c := entryCase{loc: append(entryOp(reg(rdi)...), sv), site: func(f, g *info.DIE) *info.DIE {
		return callSiteDIE(0x2010, f, csParam(rdi, []byte{byte(dwarf.DW_OP_lit0) + 1}))
	}, want: "p=<optimized out>, q=9", why: "values on entry looked up for one frame"}
	c.fsites = func(f *info.DIE) []*info.DIE { return []*info.DIE{callSiteDIE(0x1010, f, csParam(rdi, sum))} }
	fs := entryFrames()
	c.frames = []Frame{fs[0]}
	for range maxEntryDepth - 2 {
		c.frames = append(c.frames, Frame{PC: 0x1010, CFA: 0x8000, Funcs: fs[0].Funcs})
	}
	c.frames = append(c.frames, fs[1], fs[2])
	c.check(t)
	// Two frames of f: 4 + 1 lookups, within the bound.
	c.frames = []Frame{fs[0], {PC: 0x1010, CFA: 0x8000, Funcs: fs[0].Funcs}, fs[1], fs[2]}
	c.want, c.why = "p=p@entry=4, q=9", ""
	c.check(t)
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
