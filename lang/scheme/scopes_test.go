package scheme

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"golang.org/x/arch/x86/x86asm"
)

func procByName(t testing.TB, m *elfimage.Module, name string) *elfimage.Proc {
	t.Helper()
	for _, p := range m.Procs {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no proc %s", name)
	return nil
}

// fbregLoc and regLocOf spell the expected location expressions.
func fbregLoc(off int64) []byte  { return dwarf.AppendSleb128([]byte{byte(dwarf.DW_OP_fbreg)}, off) }
func regLocOf(r arch.Reg) []byte { return []byte{byte(dwarf.DW_OP_reg0) + byte(r)} }

func TestOptionalParamsAndProperties(t *testing.T) {
	m := compileFile(t, "scopes.scm")
	scale := procByName(t, m, "scale")
	type pv struct {
		name      string
		line, col int
		opt       bool
		def       string
	}
	want := []pv{{"x", 4, 17, false, ""}, {"k", 4, 31, true, "10"}, {"bias", 4, 38, true, "(* x 2)"}, {"pad", 4, 52, true, ""}}
	if len(scale.Params) != len(want) {
		t.Fatalf("scale params %+v", scale.Params)
	}
	for i, w := range want {
		v := scale.Params[i]
		if v.Name != w.name || v.Line != w.line || v.Column != w.col || v.Optional != w.opt || v.Default != w.def {
			t.Errorf("param %d = %s %d:%d optional=%v default=%q, want %+v", i, v.Name, v.Line, v.Column, v.Optional, v.Default, w)
		}
		// Var.Location stays the frame slot for simple consumers.
		if !slices.Equal(v.Location, fbregLoc(int64(-24-8*i))) {
			t.Errorf("param %s location %x", v.Name, v.Location)
		}
	}
	// x arrives in rdi and is listed there until it is stored.
	if x := scale.Params[0]; len(x.Live) != 2 || !slices.Equal(x.Live[0].Location, regLocOf(arch.X86_64_RDI)) || x.Live[0].Start != 0 ||
		!slices.Equal(x.Live[1].Location, x.Location) || x.Live[0].End != x.Live[1].Start || int(x.Live[1].End) != len(scale.Code) {
		t.Errorf("x live ranges %+v", x.Live)
	}
	wantProps := []elfimage.Property{{Name: "inline", Value: "#f"}, {Name: "category", Value: `"math"`}}
	if !slices.Equal(scale.Properties, wantProps) || scale.Doc != "x*k + bias + pad; bias defaults to twice x, pad to 0." {
		t.Errorf("scale properties %+v doc %q", scale.Properties, scale.Doc)
	}
	demo, err := Compile(DemoFile, DemoSource)
	if err != nil {
		t.Fatal(err)
	}
	if fib := procByName(t, demo, "fib"); !slices.Equal(fib.Properties, wantProps) || fib.Doc == "" {
		t.Errorf("demo fib properties %+v doc %q", fib.Properties, fib.Doc)
	}
	if s := procByName(t, demo, "sum-to"); len(s.Params) != 3 || s.Params[2].Default != "(if (< n from) -1 1)" {
		t.Errorf("demo sum-to params %+v", s.Params)
	}
}

func TestOptionalErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"(define* (f a #:optional (b 1)) b)\n(define (main) (f))", "prog.scm:2:16: f takes 1 to 2 arguments, given 0"},
		{"(define* (f a #:optional (b 1)) b)\n(define (main) (f 1 2 3))", "prog.scm:2:16: f takes 1 to 2 arguments, given 3"},
		{"(define (f a #:optional b) b)\n(define (main) 0)", "prog.scm:1:14: #:optional is only allowed in define*"},
		{"(define* (f #:optional (b 1 2)) b)\n(define (main) 0)", "prog.scm:1:24: optional parameter must be name or (name default)"},
		{"(define* (f #:key b) b)\n(define (main) 0)", "prog.scm:1:13: #:key is not supported"},
		{"(define* (f #:optional (b c)) b)\n(define (main) 0)", "prog.scm:1:27: unbound variable c"},
		{"(define* (f #:optional (b c) c) b)\n(define (main) 0)", "prog.scm:1:27: unbound variable c"},
		{"(define* (f a #:optional #:optional) a)\n(define (main) 0)", "prog.scm:1:26: #:optional given twice"},
		{"(define* (f a b c d #:optional e g h) a)\n(define (main) 0)", "prog.scm:1:36: f has 7 parameters"},
		{"(define (f) \"doc\" (declare (inline #f)))\n(define (main) 0)", "prog.scm:1:19: f has no body after its declare"},
		{"(define (f) (declare (inline)) 1)\n(define (main) 0)", "prog.scm:1:22: declare clause must be (name value)"},
		{"(define (f) (declare (a 1) (a 2)) 1)\n(define (main) 0)", "prog.scm:1:28: property a declared twice"},
		{"(define (f) \"a\x00b\" 1)\n(define (main) 0)", "prog.scm:1:13: the docstring of f contains a NUL character, which debug information cannot hold"},
		{"(define (f) (declare (a \"\x00\")) 1)\n(define (main) 0)", "prog.scm:1:25: property a's value contains a NUL character, which the procedure table cannot hold"},
		{"(define (main) 1 (declare (a 1)))", "prog.scm:1:18: declare is only allowed first"},
		{"(define (main) (let ((#:x 1)) 0))", "prog.scm:1:23: #:x is a keyword"},
	} {
		_, err := Compile("prog.scm", []byte(tc.src))
		var se *SyntaxError
		if err == nil || !errors.As(err, &se) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Compile(%q) = %v, want prefix %q", tc.src, err, tc.want)
		}
	}
}

// TestScopesShape checks the scopes and locations the compiler emits for
// nested let/let*, sibling lets and a let around a return and a tail
// call.
func TestScopesShape(t *testing.T) {
	m := compileFile(t, "scopes.scm")
	// nest: let (a b) > let* c > d > let e > let f > let g, one scope per
	// let* binding; the first binding of each let in rbx, r12, r13, r14 by
	// depth, the rest (and g, five lets deep) in slots.
	nest := procByName(t, m, "nest")
	var got []string
	sc := nest.Scopes
	for len(sc) > 0 {
		if len(sc) != 1 {
			t.Fatalf("nest: %d sibling scopes", len(sc))
		}
		for _, v := range sc[0].Vars {
			loc := v.Live[0].Location
			if loc[0] == byte(dwarf.DW_OP_fbreg) {
				got = append(got, v.Name+":slot")
			} else {
				got = append(got, v.Name+":"+arch.X86_64.RegName(arch.Reg(loc[0]-byte(dwarf.DW_OP_reg0))))
			}
		}
		sc = sc[0].Scopes
	}
	if want := "a:rbx b:slot c:r12 d:slot e:r13 f:r14 g:slot"; strings.Join(got, " ") != want {
		t.Errorf("nest bindings %v, want %s", got, want)
	}
	// siblings: first and second both use rbx, in disjoint scopes; the
	// loop's sq gets rbx again inside the named let's scope.
	sib := procByName(t, m, "siblings")
	if len(sib.Scopes) != 3 {
		t.Fatalf("siblings: %d scopes", len(sib.Scopes))
	}
	first, second := sib.Scopes[0].Vars[0], sib.Scopes[1].Vars[0]
	if first.Name != "first" || second.Name != "second" || !slices.Equal(first.Live[0].Location, regLocOf(arch.X86_64_RBX)) ||
		!slices.Equal(second.Live[0].Location, regLocOf(arch.X86_64_RBX)) || first.Live[len(first.Live)-1].End > second.Live[0].Start {
		t.Errorf("siblings: first %+v second %+v", first, second)
	}
	if loop := sib.Scopes[2]; len(loop.Vars) != 2 || loop.Vars[0].Name != "i" || loop.Vars[1].Name != "acc" || len(loop.Scopes) != 1 || loop.Scopes[0].Vars[0].Name != "sq" {
		t.Errorf("siblings loop scope %+v", loop)
	}
	// tail-in-let: m lives in rbx, except from its restore to the end of
	// the return's and of the tail call's epilogue: three pieces' worth of
	// gaps, so two or more live ranges inside one scope range.
	til := procByName(t, m, "tail-in-let")
	mv := til.Scopes[0].Vars[0]
	if len(mv.Live) != 2 || mv.Live[0].Start != til.Scopes[0].Ranges[0].Start || mv.Live[1].End >= til.Scopes[0].Ranges[0].End {
		t.Errorf("tail-in-let m: live %+v in scope %+v", mv.Live, til.Scopes[0].Ranges)
	}
	// The gaps are exactly after the restore of rbx up to the end of ret
	// or jmp.
	for i := 0; i+1 < len(mv.Live); i++ {
		checkEpilogueGap(t, til, mv.Live[i].End, mv.Live[i+1].Start)
	}
}

// checkEpilogueGap checks that [from, to) of p's code is leave; ret or
// leave; jmp, preceded by a restore of rbx from the frame.
func checkEpilogueGap(t *testing.T, p *elfimage.Proc, from, to uint32) {
	t.Helper()
	var ops []string
	for pc := int(from); pc < int(to); {
		inst, err := x86asm.Decode(p.Code[pc:], 64)
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, inst.Op.String())
		pc += inst.Len
	}
	if s := strings.Join(ops, " "); s != "LEAVE RET" && s != "LEAVE JMP" {
		t.Errorf("%s: gap [%#x, %#x) is %s, want an epilogue", p.Name, from, to, s)
	}
}

// TestLiveRangesCanFail shows the exactness check rejects wrong live
// ranges: widened into the instruction that stores the value, widened
// over an epilogue where the register is restored, shifted to another
// binding's slot, or narrowed where the value is available.
func TestLiveRangesCanFail(t *testing.T) {
	m, defs := compileFileDefs(t, "scopes.scm")
	prevInsn := func(p *elfimage.Proc, at uint32) uint32 {
		last := uint32(0)
		for pc := 0; pc < int(at); {
			inst, err := x86asm.Decode(p.Code[pc:], 64)
			if err != nil {
				t.Fatal(err)
			}
			last = uint32(pc)
			pc += inst.Len
		}
		return last
	}
	clone := func(p *elfimage.Proc) *elfimage.Proc {
		q := *p
		q.Params = slices.Clone(p.Params)
		for i := range q.Params {
			q.Params[i].Live = slices.Clone(q.Params[i].Live)
		}
		var cl func(s []*elfimage.Scope) []*elfimage.Scope
		cl = func(s []*elfimage.Scope) []*elfimage.Scope {
			var out []*elfimage.Scope
			for _, x := range s {
				y := *x
				y.Ranges = slices.Clone(x.Ranges)
				y.Vars = slices.Clone(x.Vars)
				for i := range y.Vars {
					y.Vars[i].Live = slices.Clone(y.Vars[i].Live)
				}
				y.Scopes = cl(x.Scopes)
				out = append(out, &y)
			}
			return out
		}
		q.Scopes = cl(p.Scopes)
		return &q
	}
	nest, til := procByName(t, m, "nest"), procByName(t, m, "tail-in-let")
	for _, p := range []*elfimage.Proc{nest, til} {
		if err := simulateVars(p, defs[p]); err != nil {
			t.Fatalf("unmodified %s: %v", p.Name, err)
		}
	}
	for _, tc := range []struct {
		name   string
		p      *elfimage.Proc
		mutate func(p *elfimage.Proc)
	}{
		{"slot var widened into its store", nest, func(p *elfimage.Proc) {
			d := p.Scopes[0].Scopes[0].Scopes[0] // let* binding d (slot)
			start := prevInsn(p, d.Ranges[0].Start)
			d.Ranges[0].Start = start
			d.Vars[0].Live[0].Start = start
		}},
		{"register var widened over its restore", til, func(p *elfimage.Proc) {
			v := &p.Scopes[0].Vars[0]
			v.Live = []elfimage.LiveRange{{Start: v.Live[0].Start, End: v.Live[len(v.Live)-1].End, Location: v.Live[0].Location}}
		}},
		{"var in another binding's slot", nest, func(p *elfimage.Proc) {
			b := &p.Scopes[0].Vars[1]
			b.Live[0].Location = fbregLoc(-72) // n's slot
		}},
		{"param listed in its register after a call", nest, func(p *elfimage.Proc) {
			n := &p.Params[0]
			n.Live = []elfimage.LiveRange{{Start: 0, End: uint32(len(p.Code)), Location: regLocOf(arch.X86_64_RDI)}}
		}},
		{"var narrowed", nest, func(p *elfimage.Proc) {
			a := &p.Scopes[0].Vars[0]
			a.Live[0].Start += 3
		}},
	} {
		q := clone(tc.p)
		tc.mutate(q)
		if err := simulateVars(q, defs[tc.p]); err == nil {
			t.Errorf("%s: accepted", tc.name)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
	}
}

func TestScopesRun(t *testing.T) {
	src, err := os.ReadFile("testdata/scopes.scm")
	if err != nil {
		t.Fatal(err)
	}
	const want = "12\n4\n5\n9\n124\n105\n12\n14\n24\n"
	for rname, run := range runners {
		var res *Result
		out := captureOutput(t, func(w *os.File) { res, err = run(t, string(src), RunOptions{Stdout: w}) })
		if err != nil {
			t.Fatalf("%s: %v", rname, err)
		}
		if out != want || res.Value != 205 || len(res.Captures) != 1 {
			t.Errorf("%s: output %q value %d captures %d, want %q 205 1", rname, out, res.Value, len(res.Captures), want)
		}
	}
}

// TestCaptureLocals reads every live parameter and variable of every frame
// of the backtrace taken in probe (called from inside nest's five nested
// lets) through the Module's live ranges and CFI, unwinding rbx and
// r12-r14 from where each frame saved them: the values must be the ones
// the program computed.
func TestCaptureLocals(t *testing.T) {
	m, err := Compile("scopes.scm", mustRead(t, "testdata/scopes.scm"))
	if err != nil {
		t.Fatal(err)
	}
	f := loadFlat(t, m)
	var res *Result
	captureOutput(t, func(w *os.File) { res, err = runEntry(f.syms[symStart], RunOptions{Stdout: w}, f.inImage) })
	if err != nil || len(res.Captures) != 1 {
		t.Fatalf("run: %v, %d captures", err, len(res.Captures))
	}
	c := &res.Captures[0]
	regs := c.Regs
	var got []string
	read := func(addr uint64) uint64 {
		v, ok := c.ReadStack(addr)
		if !ok {
			t.Fatalf("read of %#x outside the stack", addr)
		}
		return v
	}
	for depth := 0; depth < 10; depth++ {
		p, off, cfa, caller, last := unwindStep(t, c.Arch, m, f.syms, regs, read)
		var vals []string
		show := func(v elfimage.Var) {
			for _, lr := range v.Live {
				if off < lr.Start || off >= lr.End {
					continue
				}
				var x uint64
				if lr.Location[0] == byte(dwarf.DW_OP_fbreg) {
					o, _ := dwarf.Sleb128(lr.Location[1:])
					x = read(cfa + uint64(o))
				} else {
					x = regs[lr.Location[0]-byte(dwarf.DW_OP_reg0)]
				}
				vals = append(vals, fmt.Sprintf("%s=%d", v.Name, int64(x)))
			}
		}
		for _, v := range p.Params {
			show(v)
		}
		var walk func(s []*elfimage.Scope)
		walk = func(s []*elfimage.Scope) {
			for _, sc := range s {
				if inRanges(sc.Ranges, int(off)) {
					for _, v := range sc.Vars {
						show(v)
					}
					walk(sc.Scopes)
				}
			}
		}
		walk(p.Scopes)
		got = append(got, p.Name+"("+strings.Join(vals, " ")+")")
		if last {
			break
		}
		regs = caller
	}
	want := []string{
		"probe(a=123 b=1 d=122)",
		"nest(n=1 a=2 b=3 c=20 d=23 e=24 f=25 g=26)",
		"main()",
		"%start()",
	}
	if !slices.Equal(got, want) {
		t.Errorf("frames\n got %v\nwant %v", got, want)
	}
}

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
