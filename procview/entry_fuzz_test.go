package procview

import (
	"debug/dwarf"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/expr"
	"github.com/elfimage/elfimage/dwarf/info"
	"github.com/elfimage/elfimage/unwind"
)

// refCallSites reads the call sites below the subprogram DIE at off with
// Go's debug/dwarf, written from DWARF 5 section 3.4 independently of
// callSitesOf: DW_TAG_call_site and DW_TAG_GNU_call_site DIEs at any
// depth outside nested subprograms, with a return pc or a tail-call
// flag, and the parameters that are their children. ok is false when
// debug/dwarf cannot read them.
func refCallSites(d *dwarf.Data, off uint64) (sites []string, ok bool) {
	r := d.Reader()
	r.Seek(dwarf.Offset(off))
	sub, err := r.Next()
	if err != nil || sub == nil || !sub.Children {
		return nil, err == nil && sub != nil
	}
	exprAttr := func(e *dwarf.Entry, as ...dwarf.Attr) []byte {
		for _, a := range as {
			if f := e.AttrField(a); f != nil && (f.Class == dwarf.ClassExprLoc || f.Class == dwarf.ClassBlock) {
				if b, _ := f.Val.([]byte); len(b) > 0 {
					return b
				}
			}
		}
		return nil
	}
	ref := func(e *dwarf.Entry, as ...dwarf.Attr) uint64 {
		for _, a := range as {
			if f := e.AttrField(a); f != nil && f.Class == dwarf.ClassReference {
				o, _ := f.Val.(dwarf.Offset)
				return uint64(o)
			}
		}
		return 0
	}
	var walk func(inSite bool) bool
	cur := -1
	var params [][]string
	walk = func(inSite bool) bool {
		for {
			e, err := r.Next()
			if err != nil || e == nil {
				return false
			}
			if e.Tag == 0 {
				return true
			}
			switch e.Tag {
			case dwarf.TagCallSite, 0x4109:
				ret, hasRet := uint64(0), false
				for _, a := range []dwarf.Attr{dwarf.AttrCallReturnPC, dwarf.AttrLowpc} {
					if f := e.AttrField(a); f != nil {
						if f.Class == dwarf.ClassAddress {
							ret, hasRet = f.Val.(uint64)
						}
						break
					}
				}
				tail := false
				for _, a := range []dwarf.Attr{dwarf.AttrCallTailCall, 0x2115} {
					if f := e.AttrField(a); f != nil {
						b, isFlag := f.Val.(bool)
						tail = tail || !isFlag || b
					}
				}
				if !hasRet && !tail {
					if e.Children {
						r.SkipChildren()
					}
					continue
				}
				sites = append(sites, fmt.Sprintf("ret %#x/%v tail %v origin %#x target % x", ret, hasRet, tail,
					ref(e, dwarf.AttrCallOrigin, dwarf.AttrAbstractOrigin), exprAttr(e, dwarf.AttrCallTarget, 0x2113)))
				params = append(params, nil)
				if e.Children {
					saved := cur
					cur = len(sites) - 1
					if !walk(true) {
						return false
					}
					cur = saved
				}
				continue
			case dwarf.TagCallSiteParameter, 0x410a:
				if inSite {
					params[cur] = append(params[cur], fmt.Sprintf("(% x) = (% x) data (% x) origin %#x", exprAttr(e, dwarf.AttrLocation),
						exprAttr(e, dwarf.AttrCallValue, 0x2111), exprAttr(e, dwarf.AttrCallDataValue, 0x2112), ref(e, dwarf.AttrCallParameter, dwarf.AttrAbstractOrigin)))
				}
			case dwarf.TagSubprogram:
			default:
				if e.Children {
					saved := cur
					cur = -1
					if !walk(false) {
						return false
					}
					cur = saved
					continue
				}
			}
			if e.Children {
				r.SkipChildren()
			}
		}
	}
	if !walk(false) {
		return nil, false
	}
	for i := range sites {
		sites[i] += fmt.Sprintf(" %q", params[i])
	}
	return sites, true
}

// ourCallSites formats callSitesOf's answer as refCallSites does.
func ourCallSites(cs *callSites) []string {
	var out []string
	for _, s := range cs.sites {
		var ps []string
		for _, p := range s.params {
			ps = append(ps, fmt.Sprintf("(% x) = (% x) data (% x) origin %#x", p.loc, p.value, p.dataValue, p.origin))
		}
		out = append(out, fmt.Sprintf("ret %#x/%v tail %v origin %#x target % x %q", s.ret, s.hasRet, s.tail, s.origin, s.target, ps))
	}
	return out
}

// FuzzCallSites: the call-site reader on hostile .debug_info and
// .debug_abbrev against refCallSites (Go's debug/dwarf) wherever both
// read the subprogram (in return-pc order: callSitesOf sorts them), and
// the resolver on them: no panic, bounded, and a value on entry either
// found or not known (expr.ErrNoEntryValue).
func FuzzCallSites(f *testing.F) {
	for _, c := range []entryCase{
		{loc: append(entryOp(reg(rdi)...), sv), site: func(f, g *info.DIE) *info.DIE {
			return callSiteDIE(0x2010, f, csParam(rdi, []byte{0x73, 5}), csParam(rsi, []byte{0x37}))
		}},
		{loc: append(entryOp(reg(rdi)...), sv), site: func(f, g *info.DIE) *info.DIE {
			return &info.DIE{Tag: 0x4109, Attrs: []info.Attr{{Name: 0x11, Value: info.Addr(0x2010)}, {Name: 0x31, Value: info.Ref(f)}}, Children: []*info.DIE{
				{Tag: 0x410a, Attrs: []info.Attr{{Name: 0x02, Value: info.Exprloc(reg(rdi))}, {Name: 0x2111, Value: info.Exprloc(append(entryOp(reg(rdi)...), 0x23, 1))}}}}}
		}},
	} {
		sect := c.sections(f)
		f.Add(sect(".debug_info"), sect(".debug_abbrev"), sect(".debug_str"), uint64(0x2010))
	}
	f.Fuzz(func(t *testing.T, infoSec, abbrev, str []byte, ret uint64) {
		secs := map[string][]byte{".debug_info": infoSec, ".debug_abbrev": abbrev, ".debug_str": str}
		x := newArgIndex(func(n string) []byte { return secs[n] })
		if x.err != nil {
			return
		}
		d, derr := dwarf.New(abbrev, nil, nil, infoSec, nil, nil, nil, str)
		units := x.data.Units()
		for i := range units[:min(len(units), 4)] {
			subs, u, err := x.subprograms(units[i].Offset)
			if err != nil {
				continue
			}
			for _, sp := range subs[:min(len(subs), 8)] {
				cs, err := x.callSitesOf(u, sp.off)
				if err != nil {
					continue
				}
				if len(cs.sites) > maxCallSites {
					t.Fatalf("%d call sites", len(cs.sites))
				}
				if derr == nil {
					if want, ok := refCallSites(d, sp.off); ok {
						got := ourCallSites(cs)
						slices.SortStableFunc(want, func(a, b string) int { return cmpRet(a, b) })
						if os.Getenv("FUZZ_CALLSITES_LOG") != "" {
							t.Logf("%#x: %q", sp.off, got)
						}
						if !slices.Equal(got, want) {
							t.Fatalf("subprogram at %#x:\n ours %q\n ref  %q", sp.off, got, want)
						}
					}
				}
			}
		}
		// The resolver: f's frame at 0x1050 called from ret.
		fs := entryFrames()
		fs[1].PC = ret
		src := &entrySource{mods: oneModule{x}, frames: fs, x: x, mem: &unwind.Snapshot{Base: 0x7000, Data: make([]byte, 0x100)}}
		if sp, u, err := x.subprogramAt(0x1050); err == nil {
			r := x.data.Reader()
			r.Seek(sp.off)
			if e, err := r.Next(); err == nil && e != nil {
				src.entry, _ = x.entryOf(u, e)
			}
		}
		for _, rg := range []arch.Reg{rdi, rsi} {
			for _, size := range []int{0, 4} {
				if _, err := src.value(rg, size); err != nil && !errors.Is(err, expr.ErrNoEntryValue) {
					t.Fatalf("register %d: %v, not ErrNoEntryValue", rg, err)
				}
			}
		}
		x.frameArgs(&fs[0], 0x1050, src.mem, src)
	})
}

// cmpRet orders refCallSites' lines by return pc, as callSitesOf sorts
// its sites (stable for equal ones).
func cmpRet(a, b string) int {
	var ra, rb uint64
	fmt.Sscanf(a, "ret %x", &ra)
	fmt.Sscanf(b, "ret %x", &rb)
	switch {
	case ra < rb:
		return -1
	case ra > rb:
		return 1
	}
	return 0
}
