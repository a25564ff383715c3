package scheme

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
)

// Producer is the DW_AT_producer of modules this package compiles.
const Producer = "elfimage lang/scheme"

// Compile is [CompileFor] for the architecture of the running program and
// the running kernel's page size ([arch.Host]), or x86-64 on a host that is
// neither x86-64 nor AArch64: the module [Run] can run here.
func Compile(filename string, src []byte) (*elfimage.Module, error) {
	return CompileFor(arch.Host(), filename, src)
}

// CompileFor reads and compiles the Scheme program src, naming it
// filename in positions and debug information, into a Module for the
// architecture a ([arch.X86_64] or [arch.AArch64]; see "Code" in the
// package documentation) whose Entry is the runtime's entry stub (run it
// with [Run] after linking and loading, on a host of that architecture).
// The module holds one Proc per define, in source order after the entry
// stub, then the runtime support procedures (Internal). CompDir is the
// current directory.
//
// Errors are *[SyntaxError] values printing "file:line:column: message";
// CompileFor stops at the first one. Any other architecture is an error.
// Cost: linear in the size of src.
func CompileFor(a *arch.Arch, filename string, src []byte) (*elfimage.Module, error) {
	m, _, err := compile(a, filename, src, false)
	return m, err
}

// CompileObject is [CompileObjectFor] for x86-64, whatever the host.
func CompileObject(filename string, src []byte) (*elfimage.Module, error) {
	return CompileObjectFor(arch.X86_64, filename, src)
}

// CompileObjectFor compiles src as [CompileFor] does, for the
// architecture a ([arch.X86_64] or [arch.AArch64]), into a Module for
// [elfimage.LinkObject]: a relocatable object that C or C++ code links
// with and calls, which needs no host runtime (see "Objects" in the
// package documentation). It has no entry stub and needs no main; each
// top-level procedure without optional parameters is a global symbol
// spelled as [CName] gives, callable from C as int64_t NAME(int64_t, ...)
// (System V AMD64 or AAPCS64 calling convention). Errors are those of
// CompileFor, and one for two procedures whose C names are equal.
// Cost: linear in the size of src.
func CompileObjectFor(a *arch.Arch, filename string, src []byte) (*elfimage.Module, error) {
	m, _, err := compile(a, filename, src, true)
	return m, err
}

// CName returns the C identifier of the procedure named name in an object
// ([CompileObject]): ASCII letters, digits and "_" stay, "-" becomes "_",
// "?" "_p", "!" "_x", "*" "_star", "+" "_plus", "/" "_slash", "<" "_lt",
// ">" "_gt", "=" "_eq", any other character "_uXXXX" (its code point in
// hex); a leading digit gets a "_" before it; and main becomes
// scheme_main, so that it does not clash with C's main. Examples:
// fact-iter is fact_iter, even? is even_p, set-x! is set_x_x, list->vector
// would be list__gtvector.
func CName(name string) string {
	if name == "main" {
		return "scheme_main"
	}
	var b strings.Builder
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '_':
			b.WriteRune(r)
		case r >= '0' && r <= '9':
			if i == 0 {
				b.WriteByte('_')
			}
			b.WriteRune(r)
		default:
			if s, ok := cSpelling[r]; ok {
				b.WriteString(s)
			} else {
				fmt.Fprintf(&b, "_u%04x", r)
			}
		}
	}
	return b.String()
}

var cSpelling = map[rune]string{'-': "_", '?': "_p", '!': "_x", '*': "_star", '+': "_plus", '/': "_slash", '<': "_lt", '>': "_gt", '=': "_eq"}

// defMap records, per compiled Proc, the code offsets of the instructions
// that store a parameter's or variable's value into its home (register or
// frame slot), mapped to the source position of the binding's name (which
// identifies the Var). Tests use it to check live ranges against a
// simulation of the machine code.
type defMap map[*elfimage.Proc]map[uint32]srcPos

// compile compiles src for a (an object when object is set).
func compile(a *arch.Arch, filename string, src []byte, object bool) (*elfimage.Module, defMap, error) {
	var newMachine func() machine
	switch {
	case a == nil:
		return nil, nil, errors.New("scheme: no architecture given")
	case a.Machine == arch.X86_64.Machine:
		newMachine = func() machine { return newX86() }
	case a.Machine == arch.AArch64.Machine:
		newMachine = func() machine { return newA64() }
	default:
		return nil, nil, fmt.Errorf("scheme: no backend for %v (x86-64 and AArch64 are supported)", a.Machine)
	}
	forms, err := read(filename, src)
	if err != nil {
		return nil, nil, err
	}
	c := &compiler{file: filename, src: src, procs: map[string]*procInfo{}, strs: map[string]string{}, defs: defMap{}, object: object, arch: a, newMachine: newMachine}
	dir, _ := os.Getwd()
	c.mod = &elfimage.Module{
		Arch:     a,
		File:     filename,
		CompDir:  dir,
		Producer: Producer,
		Entry:    symStart,
	}
	if object {
		c.mod.Entry = ""
	}
	if err := c.run(forms); err != nil {
		return nil, nil, err
	}
	return c.mod, c.defs, nil
}

// bailout carries a *SyntaxError out of the recursive compiler.
type bailout struct{ err *SyntaxError }

type procInfo struct {
	name   string
	params []datum // symbols: the required parameters, then the optional ones
	nreq   int     // number of required parameters
	// defaults holds, per optional parameter, its default expression
	// (nil: the default is 0).
	defaults []*datum
	body     []datum
	doc      string
	props    []elfimage.Property
	pos      srcPos
	// extern is a C function of (define-extern (name arg ...)), called
	// at symbol CName(name) through the system linker.
	extern bool
}

// nopt is the number of optional parameters.
func (p *procInfo) nopt() int { return len(p.params) - p.nreq }

type compiler struct {
	file  string
	src   []byte
	defs  defMap
	mod   *elfimage.Module
	procs map[string]*procInfo
	order []*procInfo
	strs  map[string]string // literal → string object symbol
	// object compiles for CompileObject: no stack check, no host.
	object  bool
	externs []*procInfo // define-extern, in source order
	// arch is the target; newMachine makes its backend for a procedure.
	arch       *arch.Arch
	newMachine func() machine
}

func (c *compiler) errorf(p srcPos, format string, args ...any) {
	panic(bailout{&SyntaxError{File: c.file, Line: p.Line, Column: p.Column, Msg: fmt.Sprintf(format, args...)}})
}

// keywords are the special forms and builtins; they cannot be rebound.
var keywords = map[string]bool{
	"define": true, "define*": true, "declare": true, "if": true, "cond": true, "else": true, "when": true, "unless": true,
	"begin": true, "let": true, "let*": true, "set!": true, "and": true, "or": true,
	"quote": true, "lambda": true,
	"+": true, "-": true, "*": true, "quotient": true, "remainder": true, "modulo": true,
	"<": true, "<=": true, "=": true, ">=": true, ">": true, "not": true,
	"display": true, "newline": true, "backtrace": true, "error": true, "define-extern": true,
}

func (c *compiler) run(forms []datum) (err error) {
	defer func() {
		if r := recover(); r != nil {
			b, ok := r.(bailout)
			if !ok {
				panic(r)
			}
			err = b.err
		}
	}()
	for i := range forms {
		c.declare(&forms[i])
	}
	if c.object {
		return c.runObject()
	}
	main := c.procs["main"]
	if main == nil {
		c.errorf(srcPos{1, 1}, "no (define (main) ...) in program")
	}
	if len(main.params) != 0 {
		c.errorf(main.pos, "main takes no parameters")
	}
	start, support := genStart, genRuntime
	if c.arch.Machine == arch.AArch64.Machine {
		start, support = genStartA64, genRuntimeA64
	}
	c.mod.Procs = append(c.mod.Procs, start())
	for _, p := range c.order {
		c.mod.Procs = append(c.mod.Procs, c.compileProc(p))
	}
	c.mod.Procs = append(c.mod.Procs, support()...)
	// The runtime's own strings.
	c.stringObj("\n")
	c.stringObj(divZeroMessage)
	return nil
}

// runObject compiles the declared procedures for an object: C names, the
// object runtime and its data.
func (c *compiler) runObject() error {
	names := map[string]*procInfo{}
	for _, p := range c.externs {
		cn := CName(p.name)
		if prev := names[cn]; prev != nil {
			c.errorf(p.pos, "%s and %s (line %d) have one C name, %s", p.name, prev.name, prev.pos.Line, cn)
		}
		names[cn] = p
		c.mod.Externs = append(c.mod.Externs, cn)
	}
	for _, p := range c.order {
		proc := c.compileProc(p)
		if p.nopt() > 0 {
			// C cannot pass the argument count in rax.
			proc.Internal = true
		} else {
			cn := CName(p.name)
			if prev := names[cn]; prev != nil {
				c.errorf(p.pos, "%s and %s (line %d) have one C name, %s", p.name, prev.name, prev.pos.Line, cn)
			}
			names[cn] = p
			if cn != p.name {
				proc.LinkName = cn
			}
		}
		c.mod.Procs = append(c.mod.Procs, proc)
	}
	c.mod.Procs = append(c.mod.Procs, genObjectRuntime(c)...)
	c.stringObj(divZeroMessage)
	return nil
}

func (c *compiler) checkName(d *datum, what string) string {
	if d.kind != kSymbol {
		c.errorf(d.pos, "%s must be a symbol, not %s", what, d)
	}
	if keywords[d.str] {
		c.errorf(d.pos, "%s is a reserved name", d.str)
	}
	if d.str[0] == '%' {
		c.errorf(d.pos, "names beginning with %% are reserved: %s", d.str)
	}
	if strings.HasPrefix(d.str, "#:") {
		c.errorf(d.pos, "%s is a keyword, not a name", d.str)
	}
	return d.str
}

// text returns the source text of d as written.
func (c *compiler) text(d *datum) string {
	if d.off < 0 || d.end > len(c.src) || d.off > d.end {
		return d.String()
	}
	return string(c.src[d.off:d.end])
}

// declare records one top-level (define (name param ...) body ...) or
// (define* (name param ... #:optional opt ...) body ...), with its
// docstring and (declare ...) properties.
func (c *compiler) declare(d *datum) {
	if d.kind == kList && len(d.list) > 0 && d.list[0].isSym("define-extern") {
		c.declareExtern(d)
		return
	}
	if d.kind != kList || len(d.list) == 0 || !(d.list[0].isSym("define") || d.list[0].isSym("define*")) {
		c.errorf(d.pos, "only (define (name param ...) body ...) is allowed at top level")
	}
	star := d.list[0].isSym("define*")
	if len(d.list) < 3 || d.list[1].kind != kList || len(d.list[1].list) == 0 {
		c.errorf(d.pos, "malformed %s: want (%s (name param ...) body ...)", d.list[0].str, d.list[0].str)
	}
	sig := d.list[1].list
	name := c.checkName(&sig[0], "procedure name")
	if prev := c.procs[name]; prev != nil {
		c.errorf(sig[0].pos, "%s already defined at %d:%d", name, prev.pos.Line, prev.pos.Column)
	}
	p := &procInfo{name: name, pos: d.pos}
	seen := map[string]bool{}
	optional := false
	for i := 1; i < len(sig); i++ {
		e := &sig[i]
		if e.isSym("#:optional") {
			if !star {
				c.errorf(e.pos, "#:optional is only allowed in define*")
			}
			if optional {
				c.errorf(e.pos, "#:optional given twice")
			}
			optional = true
			continue
		}
		if e.kind == kSymbol && strings.HasPrefix(e.str, "#:") {
			c.errorf(e.pos, "%s is not supported; only #:optional is", e.str)
		}
		nameD, def := e, (*datum)(nil)
		if optional && e.kind == kList {
			if len(e.list) != 2 {
				c.errorf(e.pos, "optional parameter must be name or (name default)")
			}
			nameD, def = &e.list[0], &e.list[1]
		}
		pn := c.checkName(nameD, "parameter")
		if seen[pn] {
			c.errorf(nameD.pos, "duplicate parameter %s", pn)
		}
		seen[pn] = true
		p.params = append(p.params, *nameD)
		if optional {
			p.defaults = append(p.defaults, def)
		} else {
			p.nreq++
		}
	}
	if len(p.params) > MaxParams {
		c.errorf(p.params[MaxParams].pos, "%s has %d parameters; at most %d are supported", name, len(p.params), MaxParams)
	}
	p.body = d.list[2:]
	if len(p.body) > 1 && p.body[0].kind == kString {
		if strings.IndexByte(p.body[0].str, 0) >= 0 {
			// DWARF strings (DW_AT_description) end at the first NUL.
			c.errorf(p.body[0].pos, "the docstring of %s contains a NUL character, which debug information cannot hold", name)
		}
		p.doc = p.body[0].str
		p.body = p.body[1:]
	}
	if b := &p.body[0]; b.kind == kList && len(b.list) > 0 && b.list[0].isSym("declare") {
		p.props = c.properties(b)
		p.body = p.body[1:]
		if len(p.body) == 0 {
			c.errorf(b.pos, "%s has no body after its declare", name)
		}
	}
	c.procs[name] = p
	c.order = append(c.order, p)
}

// declareExtern records (define-extern (name param ...)): a C function
// of int64_t parameters returning int64_t, called at its C name.
func (c *compiler) declareExtern(d *datum) {
	if len(d.list) != 2 || d.list[1].kind != kList || len(d.list[1].list) == 0 {
		c.errorf(d.pos, "malformed define-extern: want (define-extern (name param ...))")
	}
	if !c.object {
		c.errorf(d.pos, "define-extern declares a C function, which only an object links with (elfimage build -c, CompileObject)")
	}
	sig := d.list[1].list
	name := c.checkName(&sig[0], "procedure name")
	if prev := c.procs[name]; prev != nil {
		c.errorf(sig[0].pos, "%s already defined at %d:%d", name, prev.pos.Line, prev.pos.Column)
	}
	p := &procInfo{name: name, pos: d.pos, extern: true}
	seen := map[string]bool{}
	for i := 1; i < len(sig); i++ {
		pn := c.checkName(&sig[i], "parameter")
		if seen[pn] {
			c.errorf(sig[i].pos, "duplicate parameter %s", pn)
		}
		seen[pn] = true
		p.params = append(p.params, sig[i])
		p.nreq++
	}
	if len(p.params) > MaxParams {
		c.errorf(p.params[MaxParams].pos, "%s has %d parameters; at most %d are supported", name, len(p.params), MaxParams)
	}
	c.procs[name] = p
	c.externs = append(c.externs, p)
}

// properties reads (declare (name value) ...): each clause becomes a
// Property with the value's source text.
func (c *compiler) properties(d *datum) []elfimage.Property {
	var props []elfimage.Property
	seen := map[string]bool{}
	for i := 1; i < len(d.list); i++ {
		cl := &d.list[i]
		if cl.kind != kList || len(cl.list) != 2 || cl.list[0].kind != kSymbol {
			c.errorf(cl.pos, "declare clause must be (name value)")
		}
		n := cl.list[0].str
		if seen[n] {
			c.errorf(cl.pos, "property %s declared twice", n)
		}
		seen[n] = true
		v := c.text(&cl.list[1])
		if strings.IndexByte(v, 0) >= 0 {
			c.errorf(cl.list[1].pos, "property %s's value contains a NUL character, which the procedure table cannot hold", n)
		}
		props = append(props, elfimage.Property{Name: n, Value: v})
	}
	return props
}

// stringObj returns the symbol of the string object for s, creating the
// bytes (ROData, NUL-terminated) and the object {address, length} (Data,
// with an Abs64 relocation the loader applies) on first use.
func (c *compiler) stringObj(s string) string {
	if sym, ok := c.strs[s]; ok {
		return sym
	}
	n := strconv.Itoa(len(c.strs))
	bytesSym, objSym := "%str."+n, "%strobj."+n
	c.mod.ROData = append(c.mod.ROData, &elfimage.Datum{Name: bytesSym, Bytes: append([]byte(s), 0), Align: 1})
	obj := make([]byte, 16)
	for i := 0; i < 8; i++ {
		obj[8+i] = byte(uint64(len(s)) >> (8 * i))
	}
	c.mod.Data = append(c.mod.Data, &elfimage.Datum{
		Name: objSym, Bytes: obj, Align: 8,
		Relocs: []elfimage.Reloc{{Offset: 0, Type: elfimage.RelocAbs64, Symbol: bytesSym}},
	})
	c.strs[s] = objSym
	return objSym
}

const divZeroMessage = "division by zero"

// Per-procedure compilation.

// binding is one entry of the lexical environment: a variable in a frame
// slot or a callee-saved register, or a named-let loop.
type binding struct {
	name  string
	slot  int
	inReg bool
	home  int // the home register's index, when inReg
	v     *varInfo
	loop  *loopInfo
	next  *binding
}

type loopInfo struct {
	name  string
	head  *label
	slots []int
	vars  []*varInfo
}

// varInfo is what the compiler knows about one binding (parameter or
// variable) for its debug information.
type varInfo struct {
	name  string
	pos   srcPos
	inReg bool
	home  int
	slot  int
	// param >= 0 marks parameter number param; its live ranges are
	// computed from the prologue, not from a scope.
	param int
}

// scopeInfo is a lexical scope being compiled: the code [start, end) and
// the variables bound in it.
type scopeInfo struct {
	start, end int
	vars       []*varInfo
	kids       []*scopeInfo
	parent     *scopeInfo
}

// ctx says where an expression's value goes: tail means the procedure
// returns it (and calls are proper tail calls); loops are the named lets
// for which the expression is in tail position (calls to them jump).
type ctx struct {
	tail  bool
	loops []*loopInfo
}

var valueCtx = ctx{}

type fn struct {
	c        *compiler
	p        *procInfo
	m        machine // the backend
	a        *asm    // m's code buffer
	env      *binding
	nslots   int
	maxSlots int
	overflow *label
	// nsaved is the number of home registers the prologue saves
	// (below the saved rbp, before the slots); regDepth is the number in
	// use by enclosing lets and maxRegs the most ever in use.
	nsaved, regDepth, maxRegs int
	scope                     *scopeInfo   // innermost open scope; nil in the body itself
	scopes                    []*scopeInfo // top-level scopes of the body
	defs                      map[uint32]srcPos
	params                    []elfimage.Var
}

// disp is the frame-pointer-relative displacement of frame slot i
// (rbp, x29).
func (f *fn) disp(i int) int32 { return int32(-8 * (f.nsaved + i + 1)) }

// fbreg returns DW_OP_fbreg for frame slot i (the frame base is the CFA,
// which is the frame pointer + 16 in the body on both architectures).
func (f *fn) fbreg(i int) []byte {
	return dwarf.AppendSleb128([]byte{byte(dwarf.DW_OP_fbreg)}, int64(f.disp(i))-16)
}

// regLoc returns DW_OP_reg<n> for DWARF register n (below 32).
func regLoc(n uint8) []byte { return []byte{byte(dwarf.DW_OP_reg0) + n} }

func (f *fn) alloc(n int) int {
	base := f.nslots
	f.nslots += n
	f.maxSlots = max(f.maxSlots, f.nslots)
	return base
}

func (f *fn) free(n int) { f.nslots -= n }

func (f *fn) lookup(name string) *binding {
	for b := f.env; b != nil; b = b.next {
		if b.name == name {
			return b
		}
	}
	return nil
}

// def records that the instruction at offset at stores the value of v.
func (f *fn) def(at int, v *varInfo) { f.defs[uint32(at)] = v.pos }

// storeVar stores the accumulator into b's home (slot or register).
func (f *fn) storeVar(b *binding) {
	if b.inReg {
		f.def(f.m.storeHome(b.home), b.v)
	} else {
		f.def(f.m.storeSlot(f.disp(b.slot)), b.v)
	}
}

// openScope starts a scope binding vars at the current offset.
func (f *fn) openScope(vars ...*varInfo) {
	s := &scopeInfo{start: f.a.off(), vars: vars, parent: f.scope}
	if f.scope == nil {
		f.scopes = append(f.scopes, s)
	} else {
		f.scope.kids = append(f.scope.kids, s)
	}
	f.scope = s
}

// closeScopes ends the open scopes down to outer.
func (f *fn) closeScopes(outer *scopeInfo) {
	for f.scope != outer {
		f.scope.end = f.a.off()
		f.scope = f.scope.parent
	}
}

// compileProc generates one procedure. A first pass finds how many
// callee-saved registers its lets use; the second generates the code with
// them saved in the prologue (on x86-64; the package documentation shows
// the AArch64 frame, step for step the same):
//
//	push rbp; mov rbp, rsp; push rbx ...; sub rsp, N
//	mov [rbp-8(s+1)], rdi ...            ; required parameters into slots
//	cmp rsp, [r15+limit]; jb overflow
//	cmp rax, nreq+1; jb default0         ; define* only: passed optionals
//	mov [slot], reg; cmp rax, nreq+2; jb default1; mov [slot], reg; ...
//	jmp body
//	default0: <default 0>; mov [slot], rax
//	default1: <default 1>; mov [slot], rax ...
//	body: ...                            ; value in rax, leave; ret / leave; jmp
//	overflow: mov edi, 3; call %capture; ud2
func (c *compiler) compileProc(p *procInfo) *elfimage.Proc {
	f := c.genProc(p, 0)
	if f.maxRegs > 0 {
		f = c.genProc(p, f.maxRegs)
	}
	proc := f.proc()
	c.defs[proc] = f.defs
	return proc
}

func (c *compiler) genProc(p *procInfo, nsaved int) *fn {
	m := c.newMachine()
	f := &fn{c: c, p: p, m: m, a: m.base(), nsaved: nsaved, defs: map[uint32]srcPos{}}
	a := f.a
	a.row(p.pos, true)
	m.prologue(nsaved)
	// The required parameters are stored before the stack check, so that
	// the overflow path's backtrace reads them where DWARF says they are.
	// The stores stay within the frame, at most MaxFrameSize below a
	// stack pointer that passed the caller's check, well inside the
	// StackMargin above the guard page.
	params := make([]elfimage.Var, len(p.params))
	vars := make([]*binding, len(p.params))
	for i := range p.params {
		v := &varInfo{name: p.params[i].str, pos: p.params[i].pos, slot: f.alloc(1), param: i}
		vars[i] = &binding{name: v.name, slot: v.slot, v: v}
		params[i] = elfimage.Var{Name: v.name, Location: f.fbreg(v.slot), Line: v.pos.Line, Column: v.pos.Column}
	}
	for i := 0; i < p.nreq; i++ {
		f.def(m.storeArg(i, f.disp(vars[i].slot)), vars[i].v)
		end := uint32(a.off())
		params[i].Live = []elfimage.LiveRange{{Start: 0, End: end, Location: regLoc(m.argReg(i))}, {Start: end, Location: params[i].Location}}
		vars[i].next = f.env
		f.env = vars[i]
	}
	f.overflow = a.newLabel()
	if !c.object {
		m.stackCheck(f.overflow)
	}
	if p.nopt() > 0 {
		f.optionals(params, vars)
	}
	a.row(p.body[0].pos, true)
	a.lines[len(a.lines)-1].PrologueEnd = true
	f.body(p.body, ctx{tail: true})
	if a.reachable {
		m.epilogueRet()
	}
	f.closeScopes(nil)
	a.bind(f.overflow)
	overflowAt := uint32(a.off())
	// An object has no stack check, so nothing reaches the overflow
	// path: AArch64 objects leave it out (x86-64 ones keep it, as they
	// always had it).
	if !c.object || c.arch.Machine == arch.X86_64.Machine {
		a.row(p.pos, false)
		m.argImm(0, int64(KindStackOverflow))
		m.call(symCapture)
		m.trap()
	}
	if !a.finish() {
		c.errorf(p.pos, "internal error: unbound label in %s", p.name)
	}
	total := (8*(nsaved+f.maxSlots) + 15) &^ 15
	if total > MaxFrameSize {
		c.errorf(p.pos, "%s needs a %d-byte frame; at most %d bytes are supported", p.name, total, MaxFrameSize)
	}
	m.setFrameSize(total - 8*nsaved)
	// Required parameters stay in their slots to the end of the code;
	// optional ones are stored after the stack check, so not on the
	// overflow path.
	for i := range params {
		end := uint32(len(a.code))
		if params[i].Optional {
			end = overflowAt
		}
		params[i].Live[len(params[i].Live)-1].End = end
	}
	f.params = params
	return f
}

// optionals emits the argument-count dispatch of a define*: the passed
// optional parameters (rax, x9 hold the argument count) are stored into
// their slots, then the defaults of the missing ones are evaluated in
// order, each in the scope of the parameters before it.
func (f *fn) optionals(params []elfimage.Var, vars []*binding) {
	a, m, p := f.a, f.m, f.p
	n := p.nopt()
	body := a.newLabel()
	dflt := make([]*label, n)
	passedEnd := make([]uint32, n)
	for k := range n {
		i := p.nreq + k
		dflt[k] = a.newLabel()
		m.argCountBelow(i+1, dflt[k])
		f.def(m.storeArg(i, f.disp(vars[i].slot)), vars[i].v)
		passedEnd[k] = uint32(a.off())
	}
	m.jump(body)
	chainEnd := uint32(a.off())
	for k := range n {
		i := p.nreq + k
		a.bind(dflt[k])
		if d := p.defaults[k]; d != nil {
			a.row(d.pos, true)
			f.expr(d, valueCtx)
		} else {
			a.row(p.params[i].pos, true)
			m.loadImm(0)
		}
		f.storeVar(vars[i])
		params[i].Optional = true
		if d := p.defaults[k]; d != nil {
			params[i].Default = f.c.text(d)
		}
		params[i].Live = []elfimage.LiveRange{{Start: passedEnd[k], End: chainEnd, Location: params[i].Location}, {Start: uint32(a.off()), Location: params[i].Location}}
		vars[i].next = f.env
		f.env = vars[i]
	}
	a.bind(body)
}

// proc assembles the Proc of a finished procedure.
func (f *fn) proc() *elfimage.Proc {
	p, a := f.p, f.a
	out := &elfimage.Proc{
		Name: p.name, Code: a.code, Line: p.pos.Line, Column: p.pos.Column, Doc: p.doc,
		Lines: a.lines, CFI: a.cfi, Params: f.params, Properties: p.props, Relocs: a.relocs,
	}
	for _, s := range f.scopes {
		if sc := f.scopeOf(s); sc != nil {
			out.Scopes = append(out.Scopes, sc)
		}
	}
	return out
}

// scopeOf converts a compiled scope; empty scopes (no code) are dropped
// with everything inside them.
func (f *fn) scopeOf(s *scopeInfo) *elfimage.Scope {
	if s.start >= s.end {
		return nil
	}
	sc := &elfimage.Scope{Ranges: []elfimage.CodeRange{{Start: uint32(s.start), End: uint32(s.end)}}}
	for _, v := range s.vars {
		sc.Vars = append(sc.Vars, f.varOf(v, s))
	}
	for _, k := range s.kids {
		if ks := f.scopeOf(k); ks != nil {
			sc.Scopes = append(sc.Scopes, ks)
		}
	}
	return sc
}

// varOf gives a scope's variable its exact live ranges: the whole scope
// for a slot (the slot is written before the scope starts and reused only
// after it ends); for a register, the scope minus the epilogues after the
// register is restored.
func (f *fn) varOf(v *varInfo, s *scopeInfo) elfimage.Var {
	out := elfimage.Var{Name: v.name, Line: v.pos.Line, Column: v.pos.Column}
	if !v.inReg {
		out.Location = f.fbreg(v.slot)
		out.Live = []elfimage.LiveRange{{Start: uint32(s.start), End: uint32(s.end), Location: out.Location}}
		return out
	}
	loc := regLoc(f.m.homeReg(v.home))
	at := s.start
	for _, k := range f.a.kills {
		if k.home != v.home || k.to <= at || k.from >= s.end {
			continue
		}
		if k.from > at {
			out.Live = append(out.Live, elfimage.LiveRange{Start: uint32(at), End: uint32(k.from), Location: loc})
		}
		at = k.to
	}
	if at < s.end {
		out.Live = append(out.Live, elfimage.LiveRange{Start: uint32(at), End: uint32(s.end), Location: loc})
	}
	return out
}

// body compiles a sequence: every form but the last for effect, the last
// in k. Each form starts a statement row.
func (f *fn) body(forms []datum, k ctx) {
	if len(forms) == 0 {
		f.m.loadImm(0)
		f.done(k)
		return
	}
	for i := range forms {
		f.a.row(forms[i].pos, true)
		if i == len(forms)-1 {
			f.expr(&forms[i], k)
		} else {
			f.expr(&forms[i], valueCtx)
		}
	}
}

// done finishes an expression whose value is in the accumulator: in
// tail position it returns from the procedure.
func (f *fn) done(k ctx) {
	if k.tail && f.a.reachable {
		f.m.epilogueRet()
	}
}

func (f *fn) expr(d *datum, k ctx) {
	a, m := f.a, f.m
	a.row(d.pos, false)
	switch d.kind {
	case kInt, kBool:
		m.loadImm(d.num)
		f.done(k)
		return
	case kString:
		f.c.errorf(d.pos, "string literals are only supported as arguments of display and error")
	case kSymbol:
		b := f.lookup(d.str)
		switch {
		case b != nil && b.loop == nil && b.inReg:
			m.loadHome(b.home)
			f.done(k)
			return
		case b != nil && b.loop == nil:
			m.loadSlot(f.disp(b.slot))
			f.done(k)
			return
		case b != nil:
			f.c.errorf(d.pos, "loop %s is not a value", d.str)
		case f.c.procs[d.str] != nil:
			f.c.errorf(d.pos, "procedure %s is not a first-class value; call it", d.str)
		case keywords[d.str]:
			f.c.errorf(d.pos, "%s is not a value", d.str)
		}
		f.c.errorf(d.pos, "unbound variable %s", d.str)
	}
	// A list: a special form, a builtin or a call.
	if len(d.list) == 0 {
		f.c.errorf(d.pos, "empty combination ()")
	}
	head := &d.list[0]
	if head.kind != kSymbol {
		f.c.errorf(head.pos, "cannot call %s", head)
	}
	args := d.list[1:]
	if b := f.lookup(head.str); b != nil {
		if b.loop == nil {
			f.c.errorf(head.pos, "%s is a variable, not a procedure", head.str)
		}
		f.loopCall(d, b.loop, args, k)
		return
	}
	switch head.str {
	case "if":
		f.ifForm(d, args, k)
	case "cond":
		f.condForm(d, args, k)
	case "when", "unless":
		f.whenForm(d, args, k, head.str == "when")
	case "begin":
		f.body(args, k)
	case "let":
		if len(args) > 0 && args[0].kind == kSymbol {
			f.namedLet(d, args, k)
		} else {
			f.letForm(d, args, k, false)
		}
	case "let*":
		f.letForm(d, args, k, true)
	case "set!":
		f.setForm(d, args, k)
	case "and", "or":
		f.andOr(args, k, head.str == "and")
	case "+", "*":
		f.arith(d, args, k, head.str)
	case "-":
		f.arith(d, args, k, "-")
	case "quotient", "remainder", "modulo":
		f.division(d, args, k, head.str)
	case "<", "<=", "=", ">=", ">":
		f.compare(d, args, k, compareCond[head.str])
	case "not":
		f.arity(d, args, 1)
		f.expr(&args[0], valueCtx)
		m.notAcc()
		f.done(k)
	case "display":
		f.arity(d, args, 1)
		if args[0].kind == kString {
			a.row(d.pos, false)
			m.argAddr(0, f.c.stringObj(args[0].str))
			m.call(symDisplayString)
		} else {
			f.expr(&args[0], valueCtx)
			a.row(d.pos, false)
			m.accToArg0()
			m.call(symDisplayInt)
		}
		f.done(k)
	case "newline":
		f.arity(d, args, 0)
		m.argAddr(0, f.c.stringObj("\n"))
		m.call(symDisplayString)
		f.done(k)
	case "backtrace":
		f.arity(d, args, 0)
		m.argImm(0, int64(KindBacktrace))
		m.call(symCapture)
		f.done(k)
	case "error":
		f.errorForm(d, args)
	case "define", "define*", "define-extern":
		f.c.errorf(d.pos, "%s is only allowed at top level", head.str)
	case "declare":
		f.c.errorf(d.pos, "declare is only allowed first in a procedure body (after the docstring)")
	case "quote", "lambda", "else":
		f.c.errorf(head.pos, "%s is not supported here", head.str)
	default:
		p := f.c.procs[head.str]
		if p == nil {
			f.c.errorf(head.pos, "unbound variable %s", head.str)
		}
		switch {
		case p.nopt() == 0 && len(args) != len(p.params):
			f.c.errorf(d.pos, "%s takes %d arguments, given %d", p.name, len(p.params), len(args))
		case len(args) < p.nreq || len(args) > len(p.params):
			f.c.errorf(d.pos, "%s takes %d to %d arguments, given %d", p.name, p.nreq, len(p.params), len(args))
		}
		f.call(d, p, args, k)
	}
}

func (f *fn) arity(d *datum, args []datum, n int) {
	if len(args) != n {
		f.c.errorf(d.pos, "%s takes %d arguments, given %d", d.list[0].str, n, len(args))
	}
}

// evalToSlots evaluates args left to right into consecutive new frame
// slots and returns the first slot index; free them with f.free(len(args)).
func (f *fn) evalToSlots(args []datum) int {
	base := f.alloc(len(args))
	for i := range args {
		f.expr(&args[i], valueCtx)
		f.m.storeSlot(f.disp(base + i))
	}
	return base
}

// call compiles a call of a global procedure: arguments into slots, then
// into the argument registers; a define* procedure also gets the argument
// count (in rax, x9). In tail position the epilogue and a jump reuse the
// frame.
func (f *fn) call(d *datum, p *procInfo, args []datum, k ctx) {
	a, m := f.a, f.m
	base := f.evalToSlots(args)
	a.row(d.pos, false)
	for i := range args {
		m.loadArg(i, f.disp(base+i))
	}
	f.free(len(args))
	if p.nopt() > 0 {
		m.setArgCount(len(args))
	}
	sym := p.name
	if p.extern {
		sym = CName(p.name)
	}
	if k.tail {
		m.tailJump(sym)
		return
	}
	m.call(sym)
}

func (f *fn) loopCall(d *datum, l *loopInfo, args []datum, k ctx) {
	inTail := false
	for _, t := range k.loops {
		inTail = inTail || t == l
	}
	if !inTail {
		f.c.errorf(d.pos, "loop %s called in non-tail position (only tail calls of a named let are supported)", l.name)
	}
	if len(args) != len(l.slots) {
		f.c.errorf(d.pos, "loop %s takes %d arguments, given %d", l.name, len(l.slots), len(args))
	}
	m := f.m
	base := f.evalToSlots(args)
	f.a.row(d.pos, false)
	for i := range args {
		m.loadSlot(f.disp(base + i))
		f.def(m.storeSlot(f.disp(l.slots[i])), l.vars[i])
	}
	f.free(len(args))
	m.jump(l.head)
}

// test compiles d as a condition and jumps to target when its truth equals
// jumpIf. Two-argument comparisons compile to a compare and a
// conditional branch.
func (f *fn) test(d *datum, jumpIf bool, target *label) {
	if d.kind == kList && len(d.list) == 3 && d.list[0].kind == kSymbol && f.lookup(d.list[0].str) == nil {
		if cc, ok := compareCond[d.list[0].str]; ok {
			f.a.row(d.pos, false)
			base := f.evalToSlots(d.list[1:3])
			f.free(2)
			if !jumpIf {
				cc = cc.not()
			}
			f.m.cmpSlotsJump(f.disp(base), f.disp(base+1), cc, target)
			return
		}
	}
	f.expr(d, valueCtx)
	f.m.jumpIfZero(!jumpIf, target)
}

// branchEnd ends one arm of a conditional that is not in tail position.
func (f *fn) branchEnd(k ctx, end *label) {
	if !k.tail && f.a.reachable {
		f.m.jump(end)
	}
}

func (f *fn) ifForm(d *datum, args []datum, k ctx) {
	if len(args) != 2 && len(args) != 3 {
		f.c.errorf(d.pos, "if takes a test, a consequent and an optional alternative")
	}
	a := f.a
	els, end := a.newLabel(), a.newLabel()
	f.test(&args[0], false, els)
	a.row(args[1].pos, true)
	f.expr(&args[1], k)
	f.branchEnd(k, end)
	a.bind(els)
	if len(args) == 3 {
		a.row(args[2].pos, true)
		f.expr(&args[2], k)
	} else {
		f.m.loadImm(0)
		f.done(k)
	}
	a.bind(end)
}

func (f *fn) condForm(d *datum, clauses []datum, k ctx) {
	a := f.a
	end := a.newLabel()
	hasElse := false
	for i := range clauses {
		cl := &clauses[i]
		if cl.kind != kList || len(cl.list) < 2 {
			f.c.errorf(cl.pos, "cond clause must be (test body ...) or (else body ...)")
		}
		if cl.list[0].isSym("else") {
			if i != len(clauses)-1 {
				f.c.errorf(cl.pos, "else must be the last cond clause")
			}
			hasElse = true
			f.body(cl.list[1:], k)
			break
		}
		next := a.newLabel()
		f.test(&cl.list[0], false, next)
		f.body(cl.list[1:], k)
		f.branchEnd(k, end)
		a.bind(next)
	}
	if !hasElse {
		f.m.loadImm(0)
		f.done(k)
	}
	a.bind(end)
}

func (f *fn) whenForm(d *datum, args []datum, k ctx, when bool) {
	if len(args) < 2 {
		f.c.errorf(d.pos, "%s takes a test and a body", d.list[0].str)
	}
	a := f.a
	skip, end := a.newLabel(), a.newLabel()
	f.test(&args[0], !when, skip)
	f.body(args[1:], k)
	f.branchEnd(k, end)
	a.bind(skip)
	f.m.loadImm(0)
	f.done(k)
	a.bind(end)
}

// bindingsOf checks a let binding list ((name init) ...).
func (f *fn) bindingsOf(d *datum) []datum {
	if d.kind != kList {
		f.c.errorf(d.pos, "let bindings must be a list of (name init)")
	}
	for i := range d.list {
		b := &d.list[i]
		if b.kind != kList || len(b.list) != 2 {
			f.c.errorf(b.pos, "let binding must be (name init)")
		}
		f.c.checkName(&b.list[0], "let variable")
	}
	return d.list
}

// letForm compiles let and let*. The first binding lives in the next
// free callee-saved register (while fewer than len(calleeSaved) are in
// use), the others in frame slots. A let opens one scope after all its
// values are stored; a let* opens one nested scope per binding, right
// after its value is stored.
func (f *fn) letForm(d *datum, args []datum, k ctx, sequential bool) {
	if len(args) < 2 {
		f.c.errorf(d.pos, "%s takes bindings and a body", d.list[0].str)
	}
	bs := f.bindingsOf(&args[0])
	saved, outer := f.env, f.scope
	useReg := len(bs) > 0 && f.regDepth < numHomes
	nslots := len(bs)
	if useReg {
		nslots--
	}
	base := f.alloc(nslots)
	env := f.env
	var vars []*varInfo
	for i := range bs {
		f.expr(&bs[i].list[1], valueCtx)
		v := &varInfo{name: bs[i].list[0].str, pos: bs[i].list[0].pos, param: -1}
		if i == 0 && useReg {
			v.inReg, v.home = true, f.regDepth
			f.regDepth++
			f.maxRegs = max(f.maxRegs, f.regDepth)
		} else {
			v.slot = base + i
			if useReg {
				v.slot--
			}
		}
		b := &binding{name: v.name, slot: v.slot, inReg: v.inReg, home: v.home, v: v, next: env}
		f.storeVar(b)
		env = b
		if sequential {
			f.env = env
			f.openScope(v)
		} else {
			vars = append(vars, v)
		}
	}
	f.env = env
	if !sequential && len(vars) > 0 {
		f.openScope(vars...)
	}
	f.body(args[1:], k)
	f.closeScopes(outer)
	f.env = saved
	f.free(nslots)
	if useReg {
		f.regDepth--
	}
}

// namedLet compiles (let name ((var init) ...) body ...) as a loop in the
// current frame; name may only be called in tail position of the body.
// The variables live in frame slots; their scope starts at the loop head.
func (f *fn) namedLet(d *datum, args []datum, k ctx) {
	if len(args) < 3 {
		f.c.errorf(d.pos, "named let takes a name, bindings and a body")
	}
	name := f.c.checkName(&args[0], "loop name")
	bs := f.bindingsOf(&args[1])
	saved, outer := f.env, f.scope
	base := f.alloc(len(bs))
	l := &loopInfo{name: name, head: f.a.newLabel()}
	for i := range bs {
		v := &varInfo{name: bs[i].list[0].str, pos: bs[i].list[0].pos, slot: base + i, param: -1}
		l.slots = append(l.slots, v.slot)
		l.vars = append(l.vars, v)
		f.expr(&bs[i].list[1], valueCtx)
		f.def(f.m.storeSlot(f.disp(v.slot)), v)
	}
	f.env = &binding{name: name, loop: l, next: f.env}
	for i, v := range l.vars {
		f.env = &binding{name: v.name, slot: base + i, v: v, next: f.env}
	}
	l.head.used = true // jumped to from the body
	f.a.bind(l.head)
	if len(l.vars) > 0 {
		f.openScope(l.vars...)
	}
	inner := ctx{tail: k.tail, loops: append(append([]*loopInfo(nil), k.loops...), l)}
	f.body(args[2:], inner)
	f.closeScopes(outer)
	f.env = saved
	f.free(len(bs))
}

func (f *fn) setForm(d *datum, args []datum, k ctx) {
	if len(args) != 2 || args[0].kind != kSymbol {
		f.c.errorf(d.pos, "set! takes a variable and a value")
	}
	b := f.lookup(args[0].str)
	if b == nil || b.loop != nil {
		f.c.errorf(args[0].pos, "set! of %s: not a local variable or parameter", args[0].str)
	}
	f.expr(&args[1], valueCtx)
	f.storeVar(b)
	f.done(k)
}

func (f *fn) andOr(args []datum, k ctx, isAnd bool) {
	a, m := f.a, f.m
	if len(args) == 0 {
		if isAnd {
			m.loadImm(1)
		} else {
			m.loadImm(0)
		}
		f.done(k)
		return
	}
	end := a.newLabel()
	for i := range args {
		if i == len(args)-1 {
			f.expr(&args[i], k)
			break
		}
		f.expr(&args[i], valueCtx)
		m.jumpIfZero(isAnd, end)
	}
	a.bind(end)
	if end.used {
		f.done(k)
	}
}

func (f *fn) arith(d *datum, args []datum, k ctx, op string) {
	m := f.m
	switch {
	case len(args) == 0 && op == "-":
		f.c.errorf(d.pos, "- needs at least one argument")
	case len(args) == 0:
		if op == "*" {
			m.loadImm(1)
		} else {
			m.loadImm(0)
		}
	case len(args) == 1:
		f.expr(&args[0], valueCtx)
		if op == "-" {
			m.negAcc()
		}
	default:
		acc := f.alloc(1)
		f.expr(&args[0], valueCtx)
		m.storeSlot(f.disp(acc))
		for i := 1; i < len(args); i++ {
			f.expr(&args[i], valueCtx)
			m.arithSlot(op, f.disp(acc))
			if i < len(args)-1 {
				m.storeSlot(f.disp(acc))
			}
		}
		f.free(1)
	}
	f.done(k)
}

// division compiles quotient (truncating), remainder (sign of the
// dividend) and modulo (sign of the divisor). A zero divisor raises the
// Scheme error "division by zero"; dividing the most negative integer by
// -1 wraps (quotient = the dividend, remainder 0) instead of trapping.
func (f *fn) division(d *datum, args []datum, k ctx, op string) {
	f.arity(d, args, 2)
	a, m := f.a, f.m
	base := f.evalToSlots(args)
	f.free(2)
	nonzero := a.newLabel()
	m.divLoad(f.disp(base), f.disp(base+1), nonzero)
	a.row(d.pos, false)
	m.argImm(0, int64(KindError))
	m.argAddr(1, f.c.stringObj(divZeroMessage))
	m.argImm(2, 0)
	m.argImm(3, 0)
	m.call(symCapture)
	m.trap()
	a.bind(nonzero)
	m.divide(op)
	f.done(k)
}

var compareCond = map[string]cond{"<": condLt, "<=": condLe, "=": condEq, ">=": condGe, ">": condGt}

// compare compiles a chain (op a b c ...): 1 if every adjacent pair
// satisfies op, else 0. All arguments are evaluated.
func (f *fn) compare(d *datum, args []datum, k ctx, cc cond) {
	if len(args) < 2 {
		f.c.errorf(d.pos, "%s needs at least 2 arguments", d.list[0].str)
	}
	a, m := f.a, f.m
	base := f.evalToSlots(args)
	f.free(len(args))
	no, end := a.newLabel(), a.newLabel()
	for i := 0; i+1 < len(args); i++ {
		if i+2 < len(args) {
			m.cmpSlotsJump(f.disp(base+i), f.disp(base+i+1), cc.not(), no)
		} else {
			m.cmpSlotsSet(f.disp(base+i), f.disp(base+i+1), cc)
		}
	}
	if no.used {
		m.jump(end)
		a.bind(no)
		m.loadImm(0)
		a.bind(end)
	}
	f.done(k)
}

// errorForm compiles (error "message" value ...): the values go into
// ascending memory (an int64 array), then %capture records the error and
// ends the run; it never returns.
func (f *fn) errorForm(d *datum, args []datum) {
	if len(args) == 0 || args[0].kind != kString {
		f.c.errorf(d.pos, "error takes a string literal message and values")
	}
	vals := args[1:]
	if len(vals) > MaxErrorArgs {
		f.c.errorf(vals[MaxErrorArgs].pos, "error takes at most %d values", MaxErrorArgs)
	}
	m := f.m
	n := len(vals)
	base := f.alloc(n)
	for i := range vals {
		f.expr(&vals[i], valueCtx)
		m.storeSlot(f.disp(base + n - 1 - i))
	}
	f.a.row(d.pos, false)
	m.argImm(0, int64(KindError))
	m.argAddr(1, f.c.stringObj(args[0].str))
	m.argImm(2, int64(n))
	m.argFrameAddr(3, f.disp(base+n-1))
	m.call(symCapture)
	m.trap()
	f.free(n)
}
