// Package a64sim checks the call frame information (DWARF 5 section 6.4)
// and the variable locations of AArch64 procedures against a simulation of
// their machine code: the AArch64 counterpart of the x86-64 simulators in
// the tests of examples/bf and lang/scheme. Instructions are decoded with
// golang.org/x/arch/arm64/arm64asm.
//
// The simulation walks every path from the procedure's entry (offset 0)
// and tracks, relative to the procedure's CFA (the value of sp at entry,
// AArch64's standard CIE: CFA = sp+0, the return address in x30), the
// stack pointer, x0 to x30 and the 8-byte stack slots of the frame (up to
// 32 KiB either side of the CFA; a store through a register that holds no
// frame address is assumed not to alias the frame, and one through an
// index register forgets the frame). A value
// is unknown, the caller's value of a register (as it was at entry), an
// address in the frame (CFA + offset), or a variable's value. At every
// instruction boundary reached it checks the row of the call frame table:
//
//   - the CFA rule (sp, x29 or another register plus an offset) gives the
//     CFA;
//   - the rules for the callee-saved x19 to x28, the frame pointer x29 and
//     the return-address column x30 find the caller's values: same value
//     (or no rule) where the register holds it, offset(N) where the frame
//     slot at CFA+N holds it and lies at or above sp (AArch64 has no red
//     zone: a signal handler may overwrite anything below sp), register(R)
//     where register R holds it, undefined (lost) only where the register
//     no longer holds it (as after a stack switch, Switch.Clobbered).
//
// With [Options.Vars] it also checks every parameter's and variable's
// live ranges (Var.Live): wherever a range says the value is in a register
// or frame slot, the simulation must find it there.
//
// The supported instructions are the integer subset compilers emit for
// prologues, epilogues and simple bodies: loads and stores (LDR, STR,
// LDP, STP and their byte, halfword and unscaled forms), ADD, SUB and the
// other integer data-processing instructions, MOV and its wide forms,
// comparisons, B, B.cond, CBZ, CBNZ, TBZ, TBNZ, RET, BL and BLR (calls:
// the target is not followed, the callee keeps what AAPCS64 says it
// keeps), B with a relocation in Proc.Relocs (a tail call: the frame must
// be restored), SVC, NOP, and BRK and UDF (which end a path). Anything
// else (floating point, SIMD, pointer authentication, indirect branches,
// writes to sp that are not constant adjustments or listed stack
// switches) is an error naming the instruction, never a silent pass.
package a64sim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/expr"
	"github.com/elfimage/elfimage/dwarf/frame"
	"golang.org/x/arch/arm64/arm64asm"
)

// Options select the checks beyond the call frame information.
type Options struct {
	// Vars checks the live ranges (Var.Live) of the procedure's
	// parameters and of the variables of its scopes: at every reached
	// instruction inside a range, the location (DW_OP_regN for x0 to x30,
	// DW_OP_fbreg(N), which is CFA+N as elfimage's frame base is
	// DW_OP_call_frame_cfa, or DW_OP_bregN(M) of sp or of a register
	// holding a frame address) must hold the variable's value. A
	// parameter's value is, at entry, in the argument register of its
	// position (AAPCS64: x0 to x7) unless it is Optional; a variable's
	// value appears where an instruction listed in Defs puts it, and
	// moves with the copies, loads and stores the simulation follows.
	// Variables with a Location and no Live ranges are not checked.
	Vars bool
	// Complete, with Vars, also fails where a variable's value sits in
	// one of the locations its live ranges name while no range covering
	// that instruction lists it (a debugger would show it as optimized
	// out though it is there), inside its scope (anywhere for a
	// parameter).
	Complete bool
	// Defs names the instructions that compute a variable's value, by code
	// offset: after the instruction at the offset runs, its destination
	// (the register it writes, or the frame slot it stores) holds the
	// value of the variable declared at the Pos (Var.Line, Var.Column).
	Defs map[uint32]Pos
	// StackSwitch lists, by code offset, the instructions that set sp to
	// a stack pointer the simulation cannot compute: a non-local exit
	// into an outer frame, as a runtime's abort to its entry procedure
	// does. After the instruction, sp is CFA+Switch.SP for the CFI rows
	// that follow (which describe the outer frame), the frame slots hold
	// what Switch.Saved says and nothing else, x29 and x30 are unknown
	// until loaded, the registers of Switch.Clobbered hold values of
	// frames between, and the other registers of x19 to x28 keep what they
	// held (the outer frame's caller's values where they held this
	// procedure's caller's: no frame between changes them); their rules
	// are checked on that path as everywhere. Any other write of sp that
	// is not a constant adjustment is an error.
	StackSwitch map[uint32]Switch
}

// Switch describes the outer frame a stack switch enters (see
// Options.StackSwitch).
type Switch struct {
	// SP is the stack pointer after the switch, as an offset from the CFA
	// the following CFI rows give (negative: sp below the CFA).
	SP int64
	// Saved maps registers (19-30) to the CFA offsets where the outer
	// frame keeps its caller's values; these registers are unknown after
	// the switch (until loaded), so their rules are checked.
	Saved map[int]int64
	// Clobbered lists the registers of x19 to x28 not in Saved that the
	// frames between the outer frame and this procedure may have changed
	// and that the switch discards without restoring (the callee-saved
	// registers compiled code saves in those frames, such as a
	// compiler's homes of variables): after the switch they hold none of
	// the outer frame's caller's values, which are lost, so the CFI must
	// say so with an undefined rule (DW_CFA_undefined); a same-value rule
	// for them fails. A return with them so is accepted: the outer
	// frame's caller gets them clobbered, which its ABI must allow.
	Clobbered []int
}

// Pos identifies a variable by its declaration position (Var.Line,
// Var.Column, 1-based).
type Pos struct{ Line, Column int }

// MaxCode is the largest procedure Check simulates, in bytes; a larger one
// is an error. The simulation costs O(instructions × tracked values) time
// and memory.
const MaxCode = 16 << 20

// maxSlots bounds the frame the simulation tracks, in 8-byte slots below
// and above the CFA; stores outside it are forgotten.
const maxSlots = 1 << 12

// ErrCheck is wrapped by every error reporting that the code and its call
// frame information or variable locations disagree (as opposed to code
// the simulation cannot follow, which wraps [ErrUnsupported]).
var ErrCheck = errors.New("a64sim: code and debug information disagree")

// ErrUnsupported is wrapped by the errors for code outside what the
// simulation follows: an instruction it does not model, an indirect
// branch, a CFI rule it cannot check.
var ErrUnsupported = errors.New("a64sim: unsupported")

// Check simulates the AArch64 code of p from its entry and checks p.CFI (on
// the standard CIE of arch.AArch64: CFA = sp+0, x30 the return-address
// column; on the "S" CIE when p.SignalFrame) at every reachable instruction
// boundary, and with opts.Vars the variables' live ranges, as the package
// documentation describes. The CFI is encoded as the linker encodes it
// (package dwarf/frame) and its table read back, so the rows checked are
// what a debugger reads. It also fails when an instruction is never
// reached (except BRK and UDF, which pad), a branch leaves the procedure or
// lands inside nothing, execution falls off the end, or paths that meet
// disagree on sp.
//
// Errors wrap [ErrCheck] or [ErrUnsupported] and name the procedure, the
// code offset and the instruction. Cost: O(len(p.Code) × tracked values).
func Check(p *elfimage.Proc, opts Options) error {
	rows, err := procRows(p)
	if err != nil {
		return err
	}
	return check(p.Name, p.Code, rows, p, opts)
}

// CheckTable is [Check] for code read back from an image: code is the
// procedure's bytes, starting at address addr, and rows its call frame
// table as frame.Table returns it (from the image's .eh_frame or
// .debug_frame), so the rows checked are exactly what debuggers read.
// Variables are not checked (opts.Vars must be false), and as the code has
// no relocations left, a B out of the procedure (a linked tail call) is an
// error. Errors are as for Check, with ErrCheck also for an instruction
// no row covers. Cost: O(len(code) × (len(rows) + tracked values)).
func CheckTable(name string, code []byte, addr uint64, rows []frame.Row, opts Options) error {
	if opts.Vars {
		return fmt.Errorf("%w: CheckTable checks no variables (Options.Vars)", ErrUnsupported)
	}
	rs := make([]row, len(code)/4)
	for i := range rs {
		pc := addr + uint64(4*i)
		j := slices.IndexFunc(rows, func(r frame.Row) bool { return pc >= r.Loc && pc < r.End })
		if j < 0 {
			return fmt.Errorf("%w: %s+%#x: no row of the call frame table", ErrCheck, name, 4*i)
		}
		rs[i] = rowOf(&rows[j])
	}
	return check(name, code, rs, nil, opts)
}

// row is the part of a call frame table row the checks read: the CFA rule
// and the rules for x0 to x30 (others are refused when set).
type row struct {
	cfa    frame.Rule
	regs   [31]frame.Rule
	other  arch.Reg // a register above x30 with a rule other than unspecified, or 0
	signed bool
}

func rowOf(r *frame.Row) row {
	var out row
	out.cfa, out.signed = r.CFA, r.RASigned
	for i := range r.NumRules() {
		reg, rule := r.RuleAt(i)
		switch {
		case reg <= 30:
			out.regs[reg] = rule
		case rule.Kind != frame.RuleUnspecified && rule.Kind != frame.RuleUndefined:
			out.other = reg
		}
	}
	return out
}

// procRows encodes p's CFI in a .debug_frame (the same encoder the linker's
// .eh_frame uses), reads its table back and returns the row in effect at
// each instruction (one per 4 bytes of code).
func procRows(p *elfimage.Proc) ([]row, error) {
	if len(p.Code) > MaxCode || len(p.Code)%4 != 0 || len(p.Code) == 0 {
		return nil, fmt.Errorf("%w: %s: %d bytes of code (want a multiple of 4, 4 to %d)", ErrUnsupported, p.Name, len(p.Code), MaxCode)
	}
	cie := frame.StandardCIE(arch.AArch64)
	cie.Signal = p.SignalFrame
	data, _, err := frame.EncodeDebugFrame(cie, []frame.FDE{{Start: 0, Size: uint64(len(p.Code)), Insns: p.CFI}}, dwarf.Default64)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: CFI: %v", ErrCheck, p.Name, err)
	}
	fdes, err := frame.NewDebugFrame(data, binary.LittleEndian, 8).FDEs()
	if err != nil || len(fdes) != 1 {
		return nil, fmt.Errorf("%w: %s: CFI read back: %v", ErrCheck, p.Name, err)
	}
	table, err := frame.Table(&fdes[0])
	if err != nil {
		return nil, fmt.Errorf("%w: %s: CFI: %v", ErrCheck, p.Name, err)
	}
	rs := make([]row, len(p.Code)/4)
	k := 0
	for i := range rs {
		pc := uint64(4 * i)
		for k < len(table) && !(pc >= table[k].Loc && pc < table[k].End) {
			k++
		}
		if k == len(table) {
			return nil, fmt.Errorf("%w: %s+%#x: no row of the call frame table", ErrCheck, p.Name, pc)
		}
		rs[i] = rowOf(&table[k])
	}
	return rs, nil
}

// Value kinds.
const (
	unknown   = iota
	callerVal // the caller's value of register n
	frameAddr // the address CFA + n
	varVal    // the value of variable n
	lostVal   // after a stack switch: a value of frames between (Switch.Clobbered)
)

// A value is what the simulation knows of a register or stack slot.
type value struct {
	kind uint8
	n    int64
}

func (v value) String() string {
	switch v.kind {
	case callerVal:
		return fmt.Sprintf("the caller's x%d", v.n)
	case frameAddr:
		return fmt.Sprintf("CFA%+d", v.n)
	case varVal:
		return fmt.Sprintf("variable #%d", v.n)
	case lostVal:
		return "a value of the frames a stack switch discarded (the caller's is lost)"
	}
	return "unknown"
}

// state is the machine before an instruction.
type state struct {
	sp   int64           // sp = CFA + sp
	regs [31]value       // x0 to x30
	mem  map[int64]value // 8-byte slots by CFA offset (multiples of 8)
}

func (s *state) clone() *state {
	c := *s
	c.mem = make(map[int64]value, len(s.mem))
	for k, v := range s.mem {
		c.mem[k] = v
	}
	return &c
}

// meet keeps in s what s and o agree on and reports whether s changed.
func (s *state) meet(o *state) bool {
	changed := false
	for i := range s.regs {
		if s.regs[i] != o.regs[i] && s.regs[i].kind != unknown {
			s.regs[i], changed = value{}, true
		}
	}
	for k, v := range s.mem {
		if ov, ok := o.mem[k]; !ok || ov != v {
			delete(s.mem, k)
			changed = true
		}
	}
	return changed
}

func (s *state) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sp=CFA%+d", s.sp)
	for i, v := range s.regs {
		if v.kind != unknown && (i >= 19 || v.kind != callerVal) {
			fmt.Fprintf(&b, " x%d=%v", i, v)
		}
	}
	keys := make([]int64, 0, len(s.mem))
	for k := range s.mem {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, " [CFA%+d]=%v", k, s.mem[k])
	}
	return b.String()
}

// variable is a parameter or variable as the checks see it.
type variable struct {
	v      elfimage.Var
	scopes []elfimage.CodeRange // nil for parameters: in scope everywhere
}

// sim is one procedure's simulation.
type sim struct {
	name  string
	code  []byte
	insts []arm64asm.Inst
	rows  []row
	opts  Options
	vars  []variable
	defs  map[int]int64 // instruction index -> variable number
	// relocAt marks the instructions a link-time relocation patches
	// (Proc.Relocs): a B there is a tail call out of the procedure.
	relocAt map[int]bool
}

type simError struct{ err error }

func (s *sim) fail(i int, kind error, format string, args ...any) {
	panic(simError{fmt.Errorf("%w: %s+%#x %v: %s", kind, s.name, 4*i, s.insts[i], fmt.Sprintf(format, args...))})
}

func check(name string, code []byte, rows []row, p *elfimage.Proc, opts Options) (err error) {
	if len(code) > MaxCode || len(code)%4 != 0 || len(code) == 0 {
		return fmt.Errorf("%w: %s: %d bytes of code (want a multiple of 4, 4 to %d)", ErrUnsupported, name, len(code), MaxCode)
	}
	s := &sim{name: name, code: code, rows: rows, opts: opts, insts: make([]arm64asm.Inst, len(code)/4)}
	for i := range s.insts {
		in, err := arm64asm.Decode(code[4*i:])
		if err != nil {
			w := binary.LittleEndian.Uint32(code[4*i:])
			if w>>16 == 0 { // UDF #imm16: padding
				in = arm64asm.Inst{Enc: w}
			} else {
				return fmt.Errorf("%w: %s+%#x: %08x: %v", ErrUnsupported, name, 4*i, w, err)
			}
		}
		s.insts[i] = in
	}
	s.relocAt = map[int]bool{}
	if p != nil {
		for _, r := range p.Relocs {
			s.relocAt[int(r.Offset/4)] = true
		}
	}
	if opts.Vars {
		if err := s.setVars(p); err != nil {
			return err
		}
	}
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(simError)
			if !ok {
				panic(r)
			}
			err = e.err
		}
	}()
	states := s.run(p)
	for i := range s.insts {
		if states[i] == nil {
			if isTrap(s.insts[i]) {
				continue
			}
			s.fail(i, ErrCheck, "never reached")
		}
		s.checkRow(i, states[i])
		if opts.Vars {
			s.checkVars(i, states[i])
		}
	}
	return nil
}

// isTrap reports whether in is BRK or UDF (including an undecodable zero
// word, UDF #0).
func isTrap(in arm64asm.Inst) bool {
	return in.Op == 0 || in.Op == arm64asm.BRK
}

// setVars lists the parameters and variables and numbers the Defs.
func (s *sim) setVars(p *elfimage.Proc) error {
	if p == nil {
		return fmt.Errorf("%w: no procedure to check variables of", ErrUnsupported)
	}
	for _, v := range p.Params {
		s.vars = append(s.vars, variable{v: v})
	}
	var walk func(sc *elfimage.Scope)
	walk = func(sc *elfimage.Scope) {
		for _, v := range sc.Vars {
			s.vars = append(s.vars, variable{v: v, scopes: sc.Ranges})
		}
		for _, in := range sc.Scopes {
			walk(in)
		}
	}
	for _, sc := range p.Scopes {
		walk(sc)
	}
	byPos := map[Pos]int64{}
	for i, v := range s.vars {
		if len(v.v.Live) == 0 {
			continue
		}
		for _, lr := range v.v.Live {
			if _, ok := location(lr.Location); !ok {
				return fmt.Errorf("%w: %s: variable %s: location % x (want DW_OP_regN, DW_OP_fbreg or DW_OP_bregN)", ErrUnsupported, s.name, v.v.Name, lr.Location)
			}
		}
		pos := Pos{v.v.Line, v.v.Column}
		if _, dup := byPos[pos]; dup && len(s.opts.Defs) > 0 {
			return fmt.Errorf("%w: %s: two variables declared at %d:%d", ErrUnsupported, s.name, pos.Line, pos.Column)
		}
		byPos[pos] = int64(i)
	}
	s.defs = map[int]int64{}
	for pc, pos := range s.opts.Defs {
		n, ok := byPos[pos]
		if !ok {
			return fmt.Errorf("%w: %s+%#x: defines a variable declared at %d:%d, which has no live ranges in the debug information", ErrCheck, s.name, pc, pos.Line, pos.Column)
		}
		if pc%4 != 0 || int(pc/4) >= len(s.insts) {
			return fmt.Errorf("%w: %s: Defs offset %#x is not an instruction", ErrCheck, s.name, pc)
		}
		s.defs[int(pc/4)] = n
	}
	return nil
}

// loc is a decoded variable location.
type loc struct {
	reg  int   // x0..x30, or -1 for memory
	base int   // memory: 31 for sp, 32 for the CFA (fbreg), else a register
	off  int64 // memory: the offset from base
}

func (l loc) String() string {
	switch {
	case l.reg >= 0:
		return fmt.Sprintf("x%d", l.reg)
	case l.base == 32:
		return fmt.Sprintf("[CFA%+d]", l.off)
	case l.base == 31:
		return fmt.Sprintf("[sp%+d]", l.off)
	}
	return fmt.Sprintf("[x%d%+d]", l.base, l.off)
}

// location decodes the locations the checks understand.
func location(b []byte) (loc, bool) {
	ops, err := expr.Decode(b, expr.Params{AddrSize: 8})
	if err != nil || len(ops) != 1 {
		return loc{}, false
	}
	o := ops[0]
	switch {
	case o.Op >= dwarf.DW_OP_reg0 && o.Op <= dwarf.DW_OP_reg0+30:
		return loc{reg: int(o.Op - dwarf.DW_OP_reg0)}, true
	case o.Op == dwarf.DW_OP_fbreg:
		return loc{reg: -1, base: 32, off: int64(o.Args[0])}, true
	case o.Op >= dwarf.DW_OP_breg0 && o.Op <= dwarf.DW_OP_breg31:
		return loc{reg: -1, base: int(o.Op - dwarf.DW_OP_breg0), off: int64(o.Args[0])}, true
	}
	return loc{}, false
}

// at returns the value at location l in st, and false when l is memory
// outside the frame the simulation knows.
func (st *state) at(l loc) (value, bool) {
	if l.reg >= 0 {
		return st.regs[l.reg], true
	}
	var off int64
	switch {
	case l.base == 32:
		off = l.off
	case l.base == 31:
		off = st.sp + l.off
	case st.regs[l.base].kind == frameAddr:
		off = st.regs[l.base].n + l.off
	default:
		return value{}, false
	}
	v, ok := st.mem[off]
	return v, ok && off%8 == 0
}

func inRanges(rs []elfimage.CodeRange, pc uint32) bool {
	for _, r := range rs {
		if pc >= r.Start && pc < r.End {
			return true
		}
	}
	return false
}

// checkVars checks the live ranges at instruction i.
func (s *sim) checkVars(i int, st *state) {
	pc := uint32(4 * i)
	for n, v := range s.vars {
		want := value{varVal, int64(n)}
		live := false
		for _, lr := range v.v.Live {
			if pc < lr.Start || pc >= lr.End {
				continue
			}
			live = true
			l, _ := location(lr.Location)
			if got, _ := st.at(l); got != want {
				s.fail(i, ErrCheck, "%s is listed live in %v, which holds %v (state %v)", v.v.Name, l, got, st)
			}
		}
		if live || !s.opts.Complete || (v.scopes != nil && !inRanges(v.scopes, pc)) {
			continue
		}
		for _, lr := range v.v.Live {
			l, _ := location(lr.Location)
			if got, _ := st.at(l); got == want {
				s.fail(i, ErrCheck, "%s is in scope and its value is in %v, but no live range lists it here", v.v.Name, l)
			}
		}
	}
}

// checkRow checks the call frame table row at instruction i against st.
func (s *sim) checkRow(i int, st *state) {
	r := &s.rows[i]
	if r.signed {
		s.fail(i, ErrUnsupported, "the return address is signed (negate_ra_state); pointer authentication is not simulated")
	}
	if r.other != 0 {
		s.fail(i, ErrUnsupported, "a rule for register %s, which the simulation does not track", arch.AArch64.RegName(r.other))
	}
	cfa := r.cfa
	if cfa.Kind != frame.RuleCFA {
		s.fail(i, ErrUnsupported, "CFA rule %v", cfa.Kind)
	}
	switch {
	case cfa.Reg == arch.AArch64_SP:
		if st.sp+cfa.Offset != 0 {
			s.fail(i, ErrCheck, "the CFI says CFA = sp%+d, but sp = CFA%+d", cfa.Offset, st.sp)
		}
	case cfa.Reg <= 30:
		v := st.regs[cfa.Reg]
		if v.kind != frameAddr || v.n+cfa.Offset != 0 {
			s.fail(i, ErrCheck, "the CFI says CFA = x%d%+d, but x%d holds %v", cfa.Reg, cfa.Offset, cfa.Reg, v)
		}
	default:
		s.fail(i, ErrUnsupported, "CFA rule %s", cfa.Format(arch.AArch64.RegName))
	}
	for reg := 19; reg <= 30; reg++ {
		want := value{callerVal, int64(reg)}
		switch rule := r.regs[reg]; rule.Kind {
		case frame.RuleUnspecified, frame.RuleSameValue:
			if st.regs[reg] != want {
				s.fail(i, ErrCheck, "the CFI says x%d holds the caller's value, but it holds %v", reg, st.regs[reg])
			}
		case frame.RuleOffset:
			if v, ok := st.mem[rule.Offset]; !ok || v != want {
				s.fail(i, ErrCheck, "the CFI says the caller's x%d is at CFA%+d, which holds %v", reg, rule.Offset, v)
			}
			if rule.Offset < st.sp {
				s.fail(i, ErrCheck, "the CFI says the caller's x%d is at CFA%+d, below sp (CFA%+d)", reg, rule.Offset, st.sp)
			}
		case frame.RuleRegister:
			if rule.Reg > 30 || st.regs[rule.Reg] != want {
				s.fail(i, ErrCheck, "the CFI says the caller's x%d is in %s, which does not hold it", reg, arch.AArch64.RegName(rule.Reg))
			}
		case frame.RuleUndefined:
			// Lost: right only where the register no longer holds it
			// (a debugger then shows it as not saved).
			if st.regs[reg] == want {
				s.fail(i, ErrCheck, "the CFI says the caller's x%d is lost (undefined), but x%d holds it", reg, reg)
			}
		default:
			s.fail(i, ErrCheck, "x%d: rule %v (want same value, offset, register or undefined)", reg, rule.Kind)
		}
	}
	for reg := 0; reg < 19; reg++ {
		switch r.regs[reg].Kind {
		case frame.RuleUnspecified, frame.RuleUndefined, frame.RuleSameValue:
		default:
			s.fail(i, ErrUnsupported, "x%d (caller-saved): rule %v", reg, r.regs[reg].Kind)
		}
	}
}

// entry returns the state at offset 0.
func (s *sim) entry(p *elfimage.Proc) *state {
	st := &state{mem: map[int64]value{}}
	for r := range st.regs {
		st.regs[r] = value{callerVal, int64(r)}
	}
	if s.opts.Vars && p != nil {
		for i, v := range p.Params {
			if i < 8 && !v.Optional {
				st.regs[i] = value{varVal, int64(i)}
			}
		}
	}
	return st
}

// run computes the fixpoint of the states before every instruction.
func (s *sim) run(p *elfimage.Proc) []*state {
	states := make([]*state, len(s.insts))
	states[0] = s.entry(p)
	work := []int{0}
	flow := func(from, to int, st *state) {
		if to < 0 || to >= len(s.insts) {
			s.fail(from, ErrCheck, "goes to %#x, outside the procedure (%d bytes)", 4*to, len(s.code))
		}
		old := states[to]
		if old == nil {
			states[to] = st
			work = append(work, to)
			return
		}
		if old.sp != st.sp {
			s.fail(from, ErrCheck, "paths meet at %#x with sp = CFA%+d and sp = CFA%+d", 4*to, old.sp, st.sp)
		}
		if old.meet(st) {
			work = append(work, to)
		}
	}
	for len(work) > 0 {
		i := work[len(work)-1]
		work = work[:len(work)-1]
		st := states[i].clone()
		succ := s.step(i, st)
		if succ.fall {
			if i+1 == len(s.insts) {
				s.fail(i, ErrCheck, "execution falls off the end")
			}
			flow(i, i+1, st)
		}
		if succ.branch {
			t := st
			if succ.fall {
				t = st.clone()
			}
			flow(i, succ.target, t)
		}
	}
	return states
}

// leave checks that the caller's frame is back when instruction i
// returns or tail-calls: sp at the CFA, x19 to x29 the caller's (or, after
// a stack switch, lost values of Switch.Clobbered, which checkRow has
// made sure the CFI marks undefined).
func (s *sim) leave(i int, st *state, what string) {
	if st.sp != 0 {
		s.fail(i, ErrCheck, "%s with sp = CFA%+d", what, st.sp)
	}
	for reg := 19; reg <= 29; reg++ {
		if st.regs[reg] != (value{callerVal, int64(reg)}) && st.regs[reg].kind != lostVal {
			s.fail(i, ErrCheck, "%s with x%d holding %v, not the caller's value", what, reg, st.regs[reg])
		}
	}
}

// switchStack applies a stack switch to st.
func (s *sim) switchStack(st *state, sw Switch) {
	st.sp = sw.SP
	clear(st.mem)
	for _, r := range sw.Clobbered {
		if r >= 19 && r <= 28 {
			st.regs[r] = value{lostVal, 0}
		}
	}
	st.regs[29], st.regs[30] = value{}, value{}
	for r, off := range sw.Saved {
		if r >= 19 && r <= 30 {
			st.mem[off] = value{callerVal, int64(r)}
			st.regs[r] = value{} // checked: the rules must find the slot
		}
	}
}

// successors says where execution goes after an instruction.
type successors struct {
	fall   bool
	branch bool
	target int // instruction index
}

// xreg returns the number (0-30) of a 64-bit general register, 31 for sp,
// 32 for xzr; w reports a 32-bit register (wN, wsp, wzr); ok is false for
// anything else.
func xreg(a arm64asm.Arg) (n int, w, ok bool) {
	var r arm64asm.Reg
	switch a := a.(type) {
	case arm64asm.Reg:
		r = a
	case arm64asm.RegSP:
		r = arm64asm.Reg(a)
		switch r {
		case arm64asm.SP:
			return 31, false, true
		case arm64asm.WSP:
			return 31, true, true
		}
	default:
		return 0, false, false
	}
	switch {
	case r >= arm64asm.X0 && r <= arm64asm.X30:
		return int(r - arm64asm.X0), false, true
	case r == arm64asm.XZR:
		return 32, false, true
	case r >= arm64asm.W0 && r <= arm64asm.W30:
		return int(r - arm64asm.W0), true, true
	case r == arm64asm.WZR:
		return 32, true, true
	}
	return 0, false, false
}

// imm parses an immediate argument's value (arm64asm keeps ImmShift's and
// MemImmediate's fields unexported; their String forms are exact).
func imm(a arm64asm.Arg) (int64, bool) {
	switch a := a.(type) {
	case arm64asm.Imm:
		return int64(a.Imm), true
	case arm64asm.Imm64:
		return int64(a.Imm), true
	case arm64asm.ImmShift:
		str := a.String() // "#0x10" or "#0x10, LSL #12"
		v, shift, _ := strings.Cut(strings.TrimPrefix(str, "#"), ", LSL #")
		n, err := strconv.ParseInt(v, 0, 64)
		if err != nil {
			return 0, false
		}
		if shift != "" {
			sh, err := strconv.Atoi(shift)
			if err != nil || strings.Contains(str, "MSL") {
				return 0, false
			}
			n <<= sh
		}
		return n, true
	}
	return 0, false
}

// memOperand returns a MemImmediate's base register (31 for sp), mode and
// byte offset.
func memOperand(m arm64asm.MemImmediate) (base int, mode arm64asm.AddrMode, off int64, ok bool) {
	base, _, ok = xreg(m.Base)
	if !ok || m.Mode == arm64asm.AddrPostReg {
		return 0, 0, 0, false
	}
	str := m.String() // "[SP]", "[SP,#16]", "[SP,#-32]!", "[SP],#32"
	if i := strings.LastIndexByte(str, '#'); i >= 0 {
		n, err := strconv.ParseInt(strings.TrimRight(str[i+1:], "]!"), 10, 64)
		if err != nil {
			return 0, 0, 0, false
		}
		off = n
	}
	return base, m.Mode, off, true
}

// accessSize returns the bytes one register of a load or store moves.
func accessSize(op arm64asm.Op, w bool) int {
	switch op {
	case arm64asm.LDRB, arm64asm.STRB, arm64asm.LDRSB, arm64asm.LDURB, arm64asm.STURB, arm64asm.LDURSB:
		return 1
	case arm64asm.LDRH, arm64asm.STRH, arm64asm.LDRSH, arm64asm.LDURH, arm64asm.STURH, arm64asm.LDURSH:
		return 2
	case arm64asm.LDRSW, arm64asm.LDURSW, arm64asm.LDPSW:
		return 4
	}
	if w {
		return 4
	}
	return 8
}

// step applies instruction i to st and returns its successors.
func (s *sim) step(i int, st *state) successors {
	in := s.insts[i]
	next := successors{fall: true}
	get := func(r int) value {
		switch {
		case r == 31:
			return value{frameAddr, st.sp}
		case r == 32:
			return value{}
		}
		return st.regs[r]
	}
	set := func(r int, v value) {
		switch {
		case r == 31:
			s.fail(i, ErrUnsupported, "writes sp other than by a constant adjustment")
		case r < 31:
			st.regs[r] = v
		}
	}
	// addr returns the CFA offset a memory operand addresses, when it
	// is in the frame, and applies its write-back.
	addr := func(a arm64asm.Arg, size int64) (int64, bool) {
		switch m := a.(type) {
		case arm64asm.MemImmediate:
			base, mode, off, ok := memOperand(m)
			if !ok {
				s.fail(i, ErrUnsupported, "addressing mode")
			}
			b := get(base)
			at := b.n + off
			if mode == arm64asm.AddrPostIndex {
				at = b.n
			}
			if mode == arm64asm.AddrPreIndex || mode == arm64asm.AddrPostIndex {
				switch {
				case base == 31:
					st.sp += off
				case b.kind == frameAddr:
					st.regs[base] = value{frameAddr, b.n + off}
				default:
					set(base, value{})
				}
			}
			return at, b.kind == frameAddr
		case arm64asm.MemExtend:
			base, _, _ := xreg(m.Base)
			if get(base).kind == frameAddr {
				// An address in the frame the simulation cannot
				// compute: forget the whole frame.
				clear(st.mem)
			}
			return 0, false
		}
		s.fail(i, ErrUnsupported, "memory operand %v", a)
		return 0, false
	}
	store := func(at int64, inFrame bool, size int, v value) {
		if !inFrame {
			return
		}
		for k := at &^ 7; k < at+int64(size); k += 8 {
			delete(st.mem, k)
		}
		if size == 8 && at%8 == 0 && at >= -8*maxSlots && at < 8*maxSlots {
			st.mem[at] = v
		}
	}
	load := func(at int64, inFrame bool, size int) value {
		if !inFrame || size != 8 || at%8 != 0 {
			return value{}
		}
		return st.mem[at]
	}
	reg := func(k int) (int, bool) {
		r, w, ok := xreg(in.Args[k])
		if !ok {
			s.fail(i, ErrUnsupported, "operand %d %v", k, in.Args[k])
		}
		return r, w
	}
	target := func(a arm64asm.Arg) int {
		rel, ok := a.(arm64asm.PCRel)
		if !ok || rel%4 != 0 {
			s.fail(i, ErrUnsupported, "branch target %v", a)
		}
		return i + int(rel/4)
	}
	defDst := -1 // the register the instruction writes, for Defs
	defAt, defInFrame := int64(0), false
	hasDefAt := false

	switch in.Op {
	case 0, arm64asm.BRK:
		return successors{}
	case arm64asm.NOP:
	case arm64asm.STR, arm64asm.STRB, arm64asm.STRH, arm64asm.STUR, arm64asm.STURB, arm64asm.STURH:
		r, w := reg(0)
		size := accessSize(in.Op, w)
		at, ok := addr(in.Args[1], int64(size))
		v := get(r)
		if w || r == 31 {
			v = value{}
		}
		store(at, ok, size, v)
		defAt, defInFrame, hasDefAt = at, ok, true
	case arm64asm.STP:
		r1, w := reg(0)
		r2, _ := reg(1)
		size := accessSize(in.Op, w)
		at, ok := addr(in.Args[2], int64(2*size))
		v1, v2 := get(r1), get(r2)
		if w {
			v1, v2 = value{}, value{}
		}
		store(at, ok, size, v1)
		store(at+int64(size), ok, size, v2)
	case arm64asm.LDR, arm64asm.LDRB, arm64asm.LDRH, arm64asm.LDRSB, arm64asm.LDRSH, arm64asm.LDRSW,
		arm64asm.LDUR, arm64asm.LDURB, arm64asm.LDURH, arm64asm.LDURSB, arm64asm.LDURSH, arm64asm.LDURSW:
		r, w := reg(0)
		if _, lit := in.Args[1].(arm64asm.PCRel); lit { // a literal load
			set(r, value{})
			defDst = r
			break
		}
		size := accessSize(in.Op, w)
		at, ok := addr(in.Args[1], int64(size))
		v := load(at, ok, size)
		if w {
			v = value{}
		}
		set(r, v)
		defDst = r
	case arm64asm.LDP, arm64asm.LDPSW:
		r1, w := reg(0)
		r2, _ := reg(1)
		if r1 == r2 {
			s.fail(i, ErrUnsupported, "ldp into one register twice")
		}
		size := accessSize(in.Op, w)
		at, ok := addr(in.Args[2], int64(2*size))
		v1, v2 := load(at, ok, size), load(at+int64(size), ok, size)
		if w {
			v1, v2 = value{}, value{}
		}
		set(r1, v1)
		set(r2, v2)
	case arm64asm.ADD, arm64asm.SUB:
		d, _ := reg(0)
		n, w := reg(1)
		k, isImm := imm(in.Args[2])
		if in.Op == arm64asm.SUB {
			k = -k
		}
		src := get(n)
		switch {
		case isImm && !w && src.kind == frameAddr:
			if d == 31 {
				st.sp = src.n + k
			} else {
				set(d, value{frameAddr, src.n + k})
			}
		case d == 31:
			s.fail(i, ErrUnsupported, "sets sp to something other than a frame address plus a constant")
		case isImm && k == 0 && !w:
			set(d, src)
		default:
			set(d, value{})
		}
		defDst = d
	case arm64asm.MOV:
		d, w := reg(0)
		if sw, ok := s.opts.StackSwitch[uint32(4*i)]; ok {
			if d != 31 {
				s.fail(i, ErrCheck, "listed in StackSwitch, but does not set sp")
			}
			s.switchStack(st, sw)
			break
		}
		if n, _, ok := xreg(in.Args[1]); ok && !w {
			v := get(n)
			if d == 31 {
				if v.kind != frameAddr {
					s.fail(i, ErrUnsupported, "sets sp to a value not in the frame")
				}
				st.sp = v.n
			} else {
				set(d, v)
			}
		} else {
			set(d, value{})
		}
		defDst = d
	case arm64asm.MOVZ, arm64asm.MOVN, arm64asm.MOVK, arm64asm.ADR, arm64asm.ADRP, arm64asm.NEG, arm64asm.NEGS,
		arm64asm.ADDS, arm64asm.SUBS, arm64asm.AND, arm64asm.ANDS, arm64asm.ORR, arm64asm.EOR, arm64asm.ORN, arm64asm.EON,
		arm64asm.BIC, arm64asm.BICS, arm64asm.MVN, arm64asm.LSL, arm64asm.LSR, arm64asm.ASR, arm64asm.ROR,
		arm64asm.MUL, arm64asm.MADD, arm64asm.MSUB, arm64asm.MNEG, arm64asm.SMULH, arm64asm.UMULH, arm64asm.SMULL, arm64asm.UMULL,
		arm64asm.SDIV, arm64asm.UDIV, arm64asm.CSEL, arm64asm.CSINC, arm64asm.CSINV, arm64asm.CSNEG,
		arm64asm.CSET, arm64asm.CSETM, arm64asm.CINC, arm64asm.CINV, arm64asm.CNEG,
		arm64asm.SXTB, arm64asm.SXTH, arm64asm.SXTW, arm64asm.UXTB, arm64asm.UXTH,
		arm64asm.UBFM, arm64asm.SBFM, arm64asm.UBFX, arm64asm.SBFX, arm64asm.UBFIZ, arm64asm.SBFIZ, arm64asm.BFI, arm64asm.BFXIL,
		arm64asm.EXTR, arm64asm.CLZ, arm64asm.RBIT, arm64asm.REV:
		d, _ := reg(0)
		if d == 31 {
			s.fail(i, ErrUnsupported, "writes sp")
		}
		set(d, value{})
		defDst = d
	case arm64asm.CMP, arm64asm.CMN, arm64asm.TST, arm64asm.CCMP, arm64asm.CCMN:
		// Flags only.
	case arm64asm.B:
		if _, cond := in.Args[0].(arm64asm.Cond); cond {
			if s.relocAt[i] {
				s.fail(i, ErrUnsupported, "a conditional branch out of the procedure")
			}
			next = successors{fall: true, branch: true, target: target(in.Args[1])}
		} else if s.relocAt[i] {
			// A tail call (a B the linker points at another
			// procedure): the caller's frame must be back.
			s.leave(i, st, "tail-calls")
			return successors{}
		} else {
			next = successors{branch: true, target: target(in.Args[0])}
		}
	case arm64asm.CBZ, arm64asm.CBNZ:
		next = successors{fall: true, branch: true, target: target(in.Args[1])}
	case arm64asm.TBZ, arm64asm.TBNZ:
		next = successors{fall: true, branch: true, target: target(in.Args[2])}
	case arm64asm.RET:
		r, _ := reg(0)
		if r > 30 || st.regs[r] != (value{callerVal, 30}) {
			s.fail(i, ErrCheck, "returns through x%d, which holds %v, not the caller's x30 (state %v)", r, get(r), st)
		}
		s.leave(i, st, "returns")
		return successors{}
	case arm64asm.BL, arm64asm.BLR:
		// A call (to another procedure: the target of a BL is not
		// followed): the callee preserves sp, x19-x29 and the frame
		// (AAPCS64 section 6.1.1); x0-x18 and x30 are the callee's.
		if st.sp%16 != 0 {
			s.fail(i, ErrCheck, "calls with sp = CFA%+d, not 16-byte aligned", st.sp)
		}
		for r := 0; r <= 18; r++ {
			st.regs[r] = value{}
		}
		st.regs[30] = value{}
	case arm64asm.SVC:
		// Linux: the result in x0, every other register preserved.
		st.regs[0] = value{}
	default:
		s.fail(i, ErrUnsupported, "instruction not simulated")
	}
	if n, ok := s.defs[i]; ok {
		v := value{varVal, n}
		switch {
		case defDst >= 0 && defDst < 31:
			st.regs[defDst] = v
		case hasDefAt && defInFrame:
			store(defAt, true, 8, v)
		default:
			s.fail(i, ErrCheck, "listed in Defs, but writes no register or frame slot")
		}
	}
	return next
}
