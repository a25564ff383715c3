package scheme

import (
	"fmt"
	"os"
	"strconv"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
)

// Producer is the DW_AT_producer of modules this package compiles.
const Producer = "elfimage lang/scheme"

// Compile reads and compiles the Scheme program src, naming it filename in
// positions and debug information, into a Module whose Entry is the
// runtime's entry stub (run it with [Run] after linking and loading). The
// module holds one Proc per define, in source order after the entry stub,
// then the runtime support procedures (Internal). CompDir is the current
// directory.
//
// Errors are *[SyntaxError] values printing "file:line:column: message";
// Compile stops at the first one. Cost: linear in the size of src.
func Compile(filename string, src []byte) (*elfimage.Module, error) {
	forms, err := read(filename, src)
	if err != nil {
		return nil, err
	}
	c := &compiler{file: filename, procs: map[string]*procInfo{}, strs: map[string]string{}}
	dir, _ := os.Getwd()
	c.mod = &elfimage.Module{
		Arch:     arch.X86_64,
		File:     filename,
		CompDir:  dir,
		Producer: Producer,
		Entry:    symStart,
	}
	if err := c.run(forms); err != nil {
		return nil, err
	}
	return c.mod, nil
}

// bailout carries a *SyntaxError out of the recursive compiler.
type bailout struct{ err *SyntaxError }

type procInfo struct {
	name   string
	params []datum // symbols
	body   []datum
	doc    string
	pos    srcPos
}

type compiler struct {
	file  string
	mod   *elfimage.Module
	procs map[string]*procInfo
	order []*procInfo
	strs  map[string]string // literal → string object symbol
}

func (c *compiler) errorf(p srcPos, format string, args ...any) {
	panic(bailout{&SyntaxError{File: c.file, Line: p.Line, Column: p.Column, Msg: fmt.Sprintf(format, args...)}})
}

// keywords are the special forms and builtins; they cannot be rebound.
var keywords = map[string]bool{
	"define": true, "if": true, "cond": true, "else": true, "when": true, "unless": true,
	"begin": true, "let": true, "let*": true, "set!": true, "and": true, "or": true,
	"quote": true, "lambda": true,
	"+": true, "-": true, "*": true, "quotient": true, "remainder": true, "modulo": true,
	"<": true, "<=": true, "=": true, ">=": true, ">": true, "not": true,
	"display": true, "newline": true, "backtrace": true, "error": true,
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
	main := c.procs["main"]
	if main == nil {
		c.errorf(srcPos{1, 1}, "no (define (main) ...) in program")
	}
	if len(main.params) != 0 {
		c.errorf(main.pos, "main takes no parameters")
	}
	c.mod.Procs = append(c.mod.Procs, genStart())
	for _, p := range c.order {
		c.mod.Procs = append(c.mod.Procs, c.compileProc(p))
	}
	c.mod.Procs = append(c.mod.Procs, genRuntime()...)
	// The runtime's own strings.
	c.stringObj("\n")
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
	return d.str
}

// declare records one top-level (define (name param ...) body ...).
func (c *compiler) declare(d *datum) {
	if d.kind != kList || len(d.list) == 0 || !d.list[0].isSym("define") {
		c.errorf(d.pos, "only (define (name param ...) body ...) is allowed at top level")
	}
	if len(d.list) < 3 || d.list[1].kind != kList || len(d.list[1].list) == 0 {
		c.errorf(d.pos, "malformed define: want (define (name param ...) body ...)")
	}
	sig := d.list[1].list
	name := c.checkName(&sig[0], "procedure name")
	if prev := c.procs[name]; prev != nil {
		c.errorf(sig[0].pos, "%s already defined at %d:%d", name, prev.pos.Line, prev.pos.Column)
	}
	if len(sig)-1 > MaxParams {
		c.errorf(sig[MaxParams+1].pos, "%s has %d parameters; at most %d are supported", name, len(sig)-1, MaxParams)
	}
	seen := map[string]bool{}
	for i := 1; i < len(sig); i++ {
		pn := c.checkName(&sig[i], "parameter")
		if seen[pn] {
			c.errorf(sig[i].pos, "duplicate parameter %s", pn)
		}
		seen[pn] = true
	}
	p := &procInfo{name: name, params: sig[1:], body: d.list[2:], pos: d.pos}
	if len(p.body) > 1 && p.body[0].kind == kString {
		p.doc = p.body[0].str
		p.body = p.body[1:]
	}
	c.procs[name] = p
	c.order = append(c.order, p)
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
// slot, or a named-let loop.
type binding struct {
	name string
	slot int
	loop *loopInfo
	next *binding
}

type loopInfo struct {
	name  string
	head  *label
	slots []int
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
	a        *asm
	env      *binding
	nslots   int
	maxSlots int
	overflow *label
}

// slotDisp is the rbp-relative displacement of frame slot i.
func slotDisp(i int) int32 { return int32(-8 * (i + 1)) }

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

// compileProc generates one procedure:
//
//	push rbp; mov rbp, rsp; sub rsp, N
//	mov [rbp-8], rdi ...                 ; parameters into slots
//	cmp rsp, [r15+limit]; jb overflow
//	body                                 ; value in rax, leave; ret / leave; jmp
//	overflow: mov edi, 3; call %capture; ud2
func (c *compiler) compileProc(p *procInfo) *elfimage.Proc {
	f := &fn{c: c, p: p, a: newAsm()}
	a := f.a
	a.row(p.pos, true)
	a.prologue()
	frameAt := a.subRSPImm32()
	// The parameters are stored before the stack check, so that the
	// overflow path's backtrace reads them where DWARF says they are.
	// The stores stay within the frame, at most MaxFrameSize below a
	// stack pointer that passed the caller's check, well inside the
	// StackMargin above the guard page.
	var params []elfimage.Var
	for i := range p.params {
		slot := f.alloc(1)
		a.store(rbp, slotDisp(slot), argRegs[i])
		f.env = &binding{name: p.params[i].str, slot: slot, next: f.env}
		loc := dwarf.AppendSleb128([]byte{byte(dwarf.DW_OP_fbreg)}, int64(slotDisp(slot))-16)
		params = append(params, elfimage.Var{Name: p.params[i].str, Location: loc})
	}
	f.overflow = a.newLabel()
	a.aluRM(aluCmp, rsp, r15, ctlStackLimit)
	a.jcc(condB, f.overflow)
	a.row(p.body[0].pos, true)
	a.lines[len(a.lines)-1].PrologueEnd = true
	f.body(p.body, ctx{tail: true})
	if a.reachable {
		a.epilogueRet()
	}
	a.bind(f.overflow)
	a.row(p.pos, false)
	a.movImm(rdi, int64(KindStackOverflow))
	a.call(symCapture)
	a.ud2()
	if !a.finish() {
		c.errorf(p.pos, "internal error: unbound label in %s", p.name)
	}
	size := (8*f.maxSlots + 15) &^ 15
	if size > MaxFrameSize {
		c.errorf(p.pos, "%s needs a %d-byte frame; at most %d bytes are supported", p.name, size, MaxFrameSize)
	}
	a.code[frameAt] = byte(size)
	a.code[frameAt+1] = byte(size >> 8)
	a.code[frameAt+2] = byte(size >> 16)
	a.code[frameAt+3] = byte(size >> 24)
	return &elfimage.Proc{
		Name: p.name, Code: a.code, Line: p.pos.Line, Column: p.pos.Column, Doc: p.doc,
		Lines: a.lines, CFI: a.cfi, Params: params, Relocs: a.relocs,
	}
}

// body compiles a sequence: every form but the last for effect, the last
// in k. Each form starts a statement row.
func (f *fn) body(forms []datum, k ctx) {
	if len(forms) == 0 {
		f.a.movImm(rax, 0)
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

// done finishes an expression whose value is in rax: in tail position it
// returns from the procedure.
func (f *fn) done(k ctx) {
	if k.tail && f.a.reachable {
		f.a.epilogueRet()
	}
}

func (f *fn) expr(d *datum, k ctx) {
	a := f.a
	a.row(d.pos, false)
	switch d.kind {
	case kInt, kBool:
		a.movImm(rax, d.num)
		f.done(k)
		return
	case kString:
		f.c.errorf(d.pos, "string literals are only supported as arguments of display and error")
	case kSymbol:
		b := f.lookup(d.str)
		switch {
		case b != nil && b.loop == nil:
			a.load(rax, rbp, slotDisp(b.slot))
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
		a.test(rax, rax)
		a.setccRAX(condE)
		f.done(k)
	case "display":
		f.arity(d, args, 1)
		if args[0].kind == kString {
			a.row(d.pos, false)
			a.leaRIP(rdi, f.c.stringObj(args[0].str))
			a.call(symDisplayString)
		} else {
			f.expr(&args[0], valueCtx)
			a.row(d.pos, false)
			a.movRR(rdi, rax)
			a.call(symDisplayInt)
		}
		f.done(k)
	case "newline":
		f.arity(d, args, 0)
		a.leaRIP(rdi, f.c.stringObj("\n"))
		a.call(symDisplayString)
		f.done(k)
	case "backtrace":
		f.arity(d, args, 0)
		a.movImm(rdi, int64(KindBacktrace))
		a.call(symCapture)
		f.done(k)
	case "error":
		f.errorForm(d, args)
	case "define":
		f.c.errorf(d.pos, "define is only allowed at top level")
	case "quote", "lambda", "else":
		f.c.errorf(head.pos, "%s is not supported here", head.str)
	default:
		p := f.c.procs[head.str]
		if p == nil {
			f.c.errorf(head.pos, "unbound variable %s", head.str)
		}
		if len(args) != len(p.params) {
			f.c.errorf(d.pos, "%s takes %d arguments, given %d", p.name, len(p.params), len(args))
		}
		f.call(d, p.name, args, k)
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
		f.a.store(rbp, slotDisp(base+i), rax)
	}
	return base
}

// call compiles a call of a global procedure: arguments into slots, then
// into rdi, rsi, ...; in tail position leave; jmp reuses the frame.
func (f *fn) call(d *datum, name string, args []datum, k ctx) {
	a := f.a
	base := f.evalToSlots(args)
	a.row(d.pos, false)
	for i := range args {
		a.load(argRegs[i], rbp, slotDisp(base+i))
	}
	f.free(len(args))
	if k.tail {
		a.tailJump(name)
		return
	}
	a.call(name)
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
	a := f.a
	base := f.evalToSlots(args)
	a.row(d.pos, false)
	for i := range args {
		a.load(rax, rbp, slotDisp(base+i))
		a.store(rbp, slotDisp(l.slots[i]), rax)
	}
	f.free(len(args))
	a.jmp(l.head)
}

// test compiles d as a condition and jumps to target when its truth equals
// jumpIf. Two-argument comparisons compile to cmp; jcc.
func (f *fn) test(d *datum, jumpIf bool, target *label) {
	a := f.a
	if d.kind == kList && len(d.list) == 3 && d.list[0].kind == kSymbol && f.lookup(d.list[0].str) == nil {
		if cc, ok := compareCond[d.list[0].str]; ok {
			a.row(d.pos, false)
			base := f.evalToSlots(d.list[1:3])
			a.load(rax, rbp, slotDisp(base))
			a.aluRM(aluCmp, rax, rbp, slotDisp(base+1))
			f.free(2)
			if !jumpIf {
				cc = cc.not()
			}
			a.jcc(cc, target)
			return
		}
	}
	f.expr(d, valueCtx)
	a.test(rax, rax)
	if jumpIf {
		a.jcc(condNE, target)
	} else {
		a.jcc(condE, target)
	}
}

// branchEnd ends one arm of a conditional that is not in tail position.
func (f *fn) branchEnd(k ctx, end *label) {
	if !k.tail && f.a.reachable {
		f.a.jmp(end)
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
		a.movImm(rax, 0)
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
		a.movImm(rax, 0)
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
	a.movImm(rax, 0)
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

func (f *fn) letForm(d *datum, args []datum, k ctx, sequential bool) {
	if len(args) < 2 {
		f.c.errorf(d.pos, "%s takes bindings and a body", d.list[0].str)
	}
	bs := f.bindingsOf(&args[0])
	saved := f.env
	base := f.alloc(len(bs))
	env := f.env
	for i := range bs {
		f.expr(&bs[i].list[1], valueCtx)
		f.a.store(rbp, slotDisp(base+i), rax)
		env = &binding{name: bs[i].list[0].str, slot: base + i, next: env}
		if sequential {
			f.env = env
		}
	}
	f.env = env
	f.body(args[1:], k)
	f.env = saved
	f.free(len(bs))
}

// namedLet compiles (let name ((var init) ...) body ...) as a loop in the
// current frame; name may only be called in tail position of the body.
func (f *fn) namedLet(d *datum, args []datum, k ctx) {
	if len(args) < 3 {
		f.c.errorf(d.pos, "named let takes a name, bindings and a body")
	}
	name := f.c.checkName(&args[0], "loop name")
	bs := f.bindingsOf(&args[1])
	saved := f.env
	base := f.alloc(len(bs))
	for i := range bs {
		f.expr(&bs[i].list[1], valueCtx)
		f.a.store(rbp, slotDisp(base+i), rax)
	}
	l := &loopInfo{name: name, head: f.a.newLabel()}
	f.env = &binding{name: name, loop: l, next: f.env}
	for i := range bs {
		l.slots = append(l.slots, base+i)
		f.env = &binding{name: bs[i].list[0].str, slot: base + i, next: f.env}
	}
	l.head.used = true // jumped to from the body
	f.a.bind(l.head)
	inner := ctx{tail: k.tail, loops: append(append([]*loopInfo(nil), k.loops...), l)}
	f.body(args[2:], inner)
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
	f.a.store(rbp, slotDisp(b.slot), rax)
	f.done(k)
}

func (f *fn) andOr(args []datum, k ctx, isAnd bool) {
	a := f.a
	if len(args) == 0 {
		if isAnd {
			a.movImm(rax, 1)
		} else {
			a.movImm(rax, 0)
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
		a.test(rax, rax)
		if isAnd {
			a.jcc(condE, end)
		} else {
			a.jcc(condNE, end)
		}
	}
	a.bind(end)
	if end.used {
		f.done(k)
	}
}

func (f *fn) arith(d *datum, args []datum, k ctx, op string) {
	a := f.a
	switch {
	case len(args) == 0 && op == "-":
		f.c.errorf(d.pos, "- needs at least one argument")
	case len(args) == 0:
		if op == "*" {
			a.movImm(rax, 1)
		} else {
			a.movImm(rax, 0)
		}
	case len(args) == 1:
		f.expr(&args[0], valueCtx)
		if op == "-" {
			a.neg(rax)
		}
	default:
		acc := f.alloc(1)
		f.expr(&args[0], valueCtx)
		a.store(rbp, slotDisp(acc), rax)
		for i := 1; i < len(args); i++ {
			f.expr(&args[i], valueCtx)
			switch op {
			case "+":
				a.aluRM(aluAdd, rax, rbp, slotDisp(acc))
			case "*":
				a.imulMem(rax, rbp, slotDisp(acc))
			case "-":
				a.movRR(rcx, rax)
				a.load(rax, rbp, slotDisp(acc))
				a.aluRR(aluSub, rax, rcx)
			}
			if i < len(args)-1 {
				a.store(rbp, slotDisp(acc), rax)
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
	a := f.a
	base := f.evalToSlots(args)
	a.load(rax, rbp, slotDisp(base))
	a.load(rcx, rbp, slotDisp(base+1))
	f.free(2)
	nonzero, normal, done := a.newLabel(), a.newLabel(), a.newLabel()
	a.test(rcx, rcx)
	a.jcc(condNE, nonzero)
	a.row(d.pos, false)
	a.movImm(rdi, int64(KindError))
	a.leaRIP(rsi, f.c.stringObj(divZeroMessage))
	a.movImm(rdx, 0)
	a.movImm(rcx, 0)
	a.call(symCapture)
	a.ud2()
	a.bind(nonzero)
	a.aluImm(aluCmp, rcx, -1)
	a.jcc(condNE, normal)
	if op == "quotient" {
		a.neg(rax)
	} else {
		a.movImm(rax, 0)
	}
	a.jmp(done)
	a.bind(normal)
	a.cqo()
	a.idiv(rcx)
	switch op {
	case "remainder":
		a.movRR(rax, rdx)
	case "modulo":
		a.movRR(rax, rdx)
		a.test(rax, rax)
		a.jcc(condE, done)
		a.aluRR(aluXor, rdx, rcx)
		a.jcc(condNS, done)
		a.aluRR(aluAdd, rax, rcx)
	}
	a.bind(done)
	f.done(k)
}

var compareCond = map[string]cond{"<": condL, "<=": condLE, "=": condE, ">=": condGE, ">": condG}

// compare compiles a chain (op a b c ...): 1 if every adjacent pair
// satisfies op, else 0. All arguments are evaluated.
func (f *fn) compare(d *datum, args []datum, k ctx, cc cond) {
	if len(args) < 2 {
		f.c.errorf(d.pos, "%s needs at least 2 arguments", d.list[0].str)
	}
	a := f.a
	base := f.evalToSlots(args)
	f.free(len(args))
	no, end := a.newLabel(), a.newLabel()
	for i := 0; i+1 < len(args); i++ {
		a.load(rax, rbp, slotDisp(base+i))
		a.aluRM(aluCmp, rax, rbp, slotDisp(base+i+1))
		if i+2 < len(args) {
			a.jcc(cc.not(), no)
		} else {
			a.setccRAX(cc)
		}
	}
	if no.used {
		a.jmp(end)
		a.bind(no)
		a.movImm(rax, 0)
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
	a := f.a
	n := len(vals)
	base := f.alloc(n)
	for i := range vals {
		f.expr(&vals[i], valueCtx)
		a.store(rbp, slotDisp(base+n-1-i), rax)
	}
	a.row(d.pos, false)
	a.movImm(rdi, int64(KindError))
	a.leaRIP(rsi, f.c.stringObj(args[0].str))
	a.movImm(rdx, int64(n))
	a.lea(rcx, rbp, slotDisp(base+n-1))
	a.call(symCapture)
	a.ud2()
	f.free(n)
}
