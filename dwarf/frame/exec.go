package frame

import (
	"encoding/binary"
	"fmt"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/formaterr"
)

// MaxRowRegs is the number of distinct registers one row can give rules
// for; more fails with an error. Real code saves at most a few dozen.
const MaxRowRegs = 48

// MaxTableRows bounds the rows [Table] returns for one FDE; more fails.
const MaxTableRows = 10000

// MaxStateStack bounds the DW_CFA_remember_state stack; deeper nesting fails.
const MaxStateStack = 64

// RuleKind is a register rule or CFA rule (DWARF 5 section 6.4.1).
type RuleKind uint8

// Rule kinds. The first eight are register rules; RuleCFA and
// RuleCFAExpression are the two CFA rules.
const (
	// RuleUnspecified: no instruction gave a rule. Unwinders treat it as
	// RuleSameValue (what GCC's unwinder does for callee-saved registers).
	RuleUnspecified   RuleKind = iota
	RuleUndefined              // no recoverable value (outermost frame for the RA column)
	RuleSameValue              // unchanged from the callee
	RuleOffset                 // saved at address CFA+Offset
	RuleValOffset              // value is CFA+Offset
	RuleRegister               // value is in register Reg
	RuleExpression             // saved at the address Expr computes (CFA pushed first)
	RuleValExpression          // value is what Expr computes (CFA pushed first)
	RuleCFA                    // CFA rule: CFA = Reg + Offset
	RuleCFAExpression          // CFA rule: CFA = value of Expr
)

var ruleNames = [...]string{"unspecified", "undefined", "same_value", "offset", "val_offset", "register", "expression", "val_expression", "cfa", "cfa_expression"}

func (k RuleKind) String() string {
	if int(k) < len(ruleNames) {
		return ruleNames[k]
	}
	return fmt.Sprintf("rule(%d)", uint8(k))
}

// Rule is how to find a register's value in the caller (or, for the CFA
// rule, how to compute the CFA). Offset is in bytes; Expr points into the
// section data. A RuleCFAExpression keeps the Reg and Offset of the
// register rule before it, which a later DW_CFA_def_cfa_register takes
// back (libgcc's unwinder does the same).
type Rule struct {
	Kind   RuleKind
	Reg    arch.Reg
	Offset int64
	Expr   []byte
}

// Format formats the rule as readelf --debug-dump=frames-interp does
// ("rsp+8", "c-16", "u", "s", "v+8", "rbp", "exp", "vexp"), naming registers
// with name (for example (*arch.Arch).RegName); name may be nil ("r<N>").
func (r Rule) Format(name func(arch.Reg) string) string {
	if name == nil {
		name = func(reg arch.Reg) string { return fmt.Sprintf("r%d", reg) }
	}
	switch r.Kind {
	case RuleUnspecified, RuleUndefined:
		return "u"
	case RuleSameValue:
		return "s"
	case RuleOffset:
		return fmt.Sprintf("c%+d", r.Offset)
	case RuleValOffset:
		return fmt.Sprintf("v%+d", r.Offset)
	case RuleRegister:
		return name(r.Reg)
	case RuleExpression, RuleCFAExpression:
		return "exp"
	case RuleValExpression:
		return "vexp"
	case RuleCFA:
		return fmt.Sprintf("%s%+d", name(r.Reg), r.Offset)
	}
	return "n/a"
}

// Row is one row of the call frame table (DWARF 5 section 6.4.1): the CFA
// rule and the register rules in effect for the addresses [Loc, End).
// A Row is a plain value (about 2 KiB); copy it freely.
type Row struct {
	Loc, End uint64 // the addresses the row covers, [Loc, End)
	CFA      Rule   // RuleCFA or RuleCFAExpression (RuleUnspecified if never defined)
	ArgsSize uint64 // DW_CFA_GNU_args_size in effect (bytes)
	// RASigned is the AArch64 RA_SIGN_STATE pseudo-register: true when an
	// odd number of DW_CFA_AARCH64_negate_ra_state instructions were
	// executed, meaning the saved return address carries a pointer
	// authentication code that must be stripped before use.
	RASigned bool
	n        int
	cols     [MaxRowRegs]arch.Reg
	rules    [MaxRowRegs]Rule
}

// Rule returns the rule for register reg (RuleUnspecified if none). Cost:
// O(NumRules).
func (r *Row) Rule(reg arch.Reg) Rule {
	for i := 0; i < r.n; i++ {
		if r.cols[i] == reg {
			return r.rules[i]
		}
	}
	return Rule{}
}

// NumRules returns how many registers the row has rules for (including
// rules set back to RuleUnspecified by DW_CFA_restore).
func (r *Row) NumRules() int { return r.n }

// RuleAt returns the i'th register and its rule, 0 <= i < NumRules, in the
// order the registers were first mentioned.
func (r *Row) RuleAt(i int) (arch.Reg, Rule) { return r.cols[i], r.rules[i] }

// Rules returns the row's registers and their rules, in the order
// [Row.RuleAt] gives them (len NumRules): views of the row, valid until it
// changes, which the caller must not modify. It spares a loop over the
// rules the copy of each Rule that RuleAt returns. Cost: O(1).
func (r *Row) Rules() (regs []arch.Reg, rules []Rule) {
	n := min(max(r.n, 0), MaxRowRegs)
	return r.cols[:n:n], r.rules[:n:n]
}

// reset makes r the empty row without clearing all of its arrays.
func (r *Row) reset() {
	r.Loc, r.End, r.CFA, r.ArgsSize, r.RASigned = 0, 0, Rule{}, 0, false
	clear(r.rules[:r.n])
	r.n = 0
}

// copyFrom makes r a copy of src, copying only the rules in use.
func (r *Row) copyFrom(src *Row) {
	r.Loc, r.End, r.CFA, r.ArgsSize, r.RASigned = src.Loc, src.End, src.CFA, src.ArgsSize, src.RASigned
	if r.n > src.n {
		clear(r.rules[src.n:r.n])
	}
	r.n = src.n
	// Element by element: rows hold a few rules, for which copy's call
	// into the runtime (a Rule holds a slice) costs more than the copies.
	for i := range src.n {
		r.cols[i], r.rules[i] = src.cols[i], src.rules[i]
	}
}

func (r *Row) set(reg arch.Reg, rule Rule) bool {
	for i := 0; i < r.n; i++ {
		if r.cols[i] == reg {
			r.rules[i] = rule
			return true
		}
	}
	if r.n == MaxRowRegs {
		return false
	}
	r.cols[r.n], r.rules[r.n] = reg, rule
	r.n++
	return true
}

// Exec executes call frame instructions (DWARF 5 section 6.4.2). Its zero
// value is ready; reuse one per goroutine so that [Exec.RowAt] allocates
// nothing (the DW_CFA_remember_state stack grows once, up to
// [MaxStateStack] rows). An Exec keeps the initial rows of the last two
// CIEs it ran (keyed by the *Section and the CIE's offset, instructions
// and factors), so FDEs sharing a CIE do not re-run its initial
// instructions, even when a walk alternates between two CIEs (a C++
// library's "zR" and "zPLR"): the bytes of a Section, and its Bases and
// Indirect, must not change while an Exec is used with it.
type Exec struct {
	inits [2]initRow
	cur   int // the entry of inits in use (the most recent)
	stack []Row
	depth int
	// generic turns runFast off (tests compare the two interpreters).
	generic bool
}

// initRow is a CIE's initial row, valid when sec is non-nil; key
// identifies the CIE.
type initRow struct {
	row Row
	sec *Section
	key cieKey
}

// init returns the initial row of the CIE of the FDE being run.
func (e *Exec) init() *Row { return &e.inits[e.cur].row }

// cieKey is what the initial row of a CIE depends on: its instructions
// (by position in the section) and the parameters they are decoded with.
type cieKey struct {
	off, insnsOff, insnsLen, codeAlign uint64
	dataAlign                          int64
	addrSize                           uint8
	fdeEnc                             dwarf.EHPE
}

// matches reports whether k is keyOf(c), comparing the fields most
// likely to differ first (no call to compare the whole struct).
func (k *cieKey) matches(c *ParsedCIE) bool {
	return k.off == c.Offset && k.insnsOff == c.InitialOff && k.insnsLen == uint64(len(c.Initial)) &&
		k.codeAlign == c.CodeAlign && k.dataAlign == c.DataAlign && k.addrSize == c.AddrSize && k.fdeEnc == c.FDEEnc
}

func keyOf(c *ParsedCIE) cieKey {
	return cieKey{c.Offset, c.InitialOff, uint64(len(c.Initial)), c.CodeAlign, c.DataAlign, c.AddrSize, c.FDEEnc}
}

// RowAt computes the row in effect at pc, which must be in the FDE's range
// [Start, Start+Size), into row: it runs the CIE's initial instructions and
// then the FDE's up to the first advance past pc. Errors are
// *formaterr.Error for malformed instructions (unknown opcode, truncated
// operand, DW_CFA_restore_state with nothing remembered, more than
// MaxStateStack remembered states, more than MaxRowRegs registers,
// DW_CFA_def_cfa_offset before any CFA rule; a DW_CFA_def_cfa_register
// without a register rule takes the last register rule's offset, 0 if
// none, as libgcc and readelf do) or wrap
// [ErrNoFDE] when pc is outside the range. Cost: O(instructions); no
// allocation after the first calls. In a little-endian section the
// instructions compilers emit (advances, offset, restore, def_cfa*,
// register, undefined, same_value, remember/restore_state, args_size) are
// run by an interpreter that reads them straight from the bytes and stops
// at the first advance past pc; any other instruction, or any malformed
// one, sends the FDE to the general decoder from its start (at most twice
// the work), so results and errors are the same either way.
func (e *Exec) RowAt(fde *ParsedFDE, pc uint64, row *Row) error {
	if !fde.Contains(pc) {
		return fmt.Errorf("%w %#x: FDE at %#x covers [%#x, %#x)", ErrNoFDE, pc, fde.Offset, fde.Start, fde.Start+fde.Size)
	}
	return e.run(fde, pc, row, nil)
}

// Table returns every row of the FDE in order: one per advance of the
// location (DW_CFA_advance_loc*, DW_CFA_set_loc) and one for the rest of the
// range, as readelf --debug-dump=frames-interp prints them (an advance by 0
// gives an empty row [Loc, Loc)). An FDE without instructions has one row,
// the CIE's. Errors are as for [Exec.RowAt], and more than [MaxTableRows]
// rows fail. Cost: O(instructions);
// allocates the rows.
func Table(fde *ParsedFDE) ([]Row, error) {
	var e Exec
	var row Row
	var out []Row
	err := e.run(fde, 0, &row, func(r *Row) bool {
		out = append(out, *r)
		return true
	})
	return out, err
}

// Rows calls fn with each row of the FDE in order, the rows [Table]
// returns, computed in place in row: fn must copy what it keeps and must
// not change row. fn returning false stops the walk (with no error). Errors
// are those of Table. Cost: O(instructions); no allocation after the
// first calls, so a dump of every row of a large library costs no more
// than executing its instructions.
func (e *Exec) Rows(fde *ParsedFDE, row *Row, fn func(row *Row) bool) error {
	return e.run(fde, 0, row, fn)
}

// InitialRow computes into row the row the initial instructions of cie
// (read from s) define: the rules in effect at the first address of every
// FDE using it, as readelf --debug-dump=frames-interp prints under a CIE.
// row.Loc and row.End are 0. Errors are as for [Exec.RowAt]; advances in
// initial instructions are ignored, as DWARF 5 section 6.4.1 leaves them
// meaningless. Cost: O(initial instructions); no allocation after the
// first calls.
func (e *Exec) InitialRow(s *Section, cie *ParsedCIE, row *Row) error {
	return e.runCIE(s, cie, row)
}

func (e *Exec) runCIE(s *Section, cie *ParsedCIE, row *Row) error {
	e.depth = 0
	row.reset()
	r := s.insnReader(cie, cie.Initial, cie.InitialOff, 0)
	var d Decoded
	for r.next(&d) {
		if d.Op == OpAdvanceLoc {
			continue
		}
		if msg := e.apply(row, &d, nil); msg != "" {
			r.b.FailAt(d.Off, d.Code.String(), msg)
		}
	}
	return r.b.Err()
}

// run computes the row at pc into row or, with emit set, passes every row
// to emit.
func (e *Exec) run(fde *ParsedFDE, pc uint64, row *Row, emit func(*Row) bool) error {
	s := fde.sec
	if s == nil {
		return fmt.Errorf("frame: ParsedFDE not read from a Section")
	}
	cie := &fde.CIE
	if in := &e.inits[e.cur]; in.sec == s && in.key.matches(cie) {
		row.copyFrom(&in.row)
	} else if in := &e.inits[1-e.cur]; in.sec == s && in.key.matches(cie) {
		e.cur = 1 - e.cur
		row.copyFrom(&in.row)
	} else {
		// Replace the less recent entry.
		in.sec = nil
		if err := e.runCIE(s, cie, row); err != nil {
			return err
		}
		in.row.copyFrom(row)
		in.sec, in.key = s, keyOf(cie)
		e.cur = 1 - e.cur
	}
	init := e.init()
	if emit == nil && s.le && !e.generic {
		if e.runFast(fde, pc, row) {
			return nil
		}
		row.copyFrom(init) // start again with the general interpreter
	}
	var d Decoded
	e.depth = 0
	end := fde.Start + fde.Size
	row.Loc = fde.Start
	r := s.insnReader(cie, fde.Insns, fde.InsnsOff, fde.Start)
	rows := 0
	for r.next(&d) {
		if d.Op == OpAdvanceLoc {
			loc := fde.Start + d.PC
			if emit != nil {
				if rows == MaxTableRows {
					return &formaterr.Error{Source: s.Name(), Offset: d.Off, Field: "instructions", Msg: fmt.Sprintf("more than %d rows", MaxTableRows)}
				}
				rows++
				row.End = loc
				if !emit(row) {
					return nil
				}
			} else if loc > pc {
				row.End = loc
				return nil
			}
			row.Loc = loc
			continue
		}
		if msg := e.apply(row, &d, init); msg != "" {
			r.b.FailAt(d.Off, d.Code.String(), msg)
		}
	}
	if err := r.b.Err(); err != nil {
		return err
	}
	row.End = end
	if row.Loc > end {
		row.End = row.Loc
	}
	if emit != nil {
		emit(row)
	}
	return nil
}

// apply executes one non-advance instruction on row; init is the CIE's row
// (nil while running the CIE). It returns an error message or "".
func (e *Exec) apply(row *Row, d *Decoded, init *Row) string {
	set := func(rule Rule) string {
		if !row.set(d.Reg, rule) {
			return fmt.Sprintf("more than %d registers", MaxRowRegs)
		}
		return ""
	}
	switch d.Op {
	case OpNop:
	case OpDefCFA:
		row.CFA = Rule{Kind: RuleCFA, Reg: d.Reg, Offset: d.Offset}
	case OpDefCFARegister:
		// Without a register CFA rule (MIPS and RISC-V gcc CIEs start
		// with DW_CFA_def_cfa_register), the offset is that of the last
		// register rule, 0 if none: what libgcc's unwinder and readelf
		// do (the offset survives a DW_CFA_def_cfa_expression).
		row.CFA = Rule{Kind: RuleCFA, Reg: d.Reg, Offset: row.CFA.Offset}
	case OpDefCFAOffset:
		switch row.CFA.Kind {
		case RuleCFA:
		case RuleCFAExpression:
			// libgcc and readelf record the offset and keep the
			// expression: it matters once a DW_CFA_def_cfa_register
			// follows.
		default:
			return "CFA rule is not register+offset"
		}
		row.CFA.Offset = d.Offset
	case OpDefCFAExpression:
		row.CFA = Rule{Kind: RuleCFAExpression, Reg: row.CFA.Reg, Offset: row.CFA.Offset, Expr: d.Expr}
	case OpOffset:
		return set(Rule{Kind: RuleOffset, Offset: d.Offset})
	case OpValOffset:
		return set(Rule{Kind: RuleValOffset, Offset: d.Offset})
	case OpRegister:
		return set(Rule{Kind: RuleRegister, Reg: d.Reg2})
	case OpExpression:
		return set(Rule{Kind: RuleExpression, Expr: d.Expr})
	case OpValExpression:
		return set(Rule{Kind: RuleValExpression, Expr: d.Expr})
	case OpUndefined:
		return set(Rule{Kind: RuleUndefined})
	case OpSameValue:
		return set(Rule{Kind: RuleSameValue})
	case OpRestore:
		var rule Rule
		if init != nil {
			rule = init.Rule(d.Reg)
		}
		return set(rule)
	case OpRememberState:
		if e.depth == MaxStateStack {
			return fmt.Sprintf("more than %d remembered states", MaxStateStack)
		}
		if e.depth == len(e.stack) {
			e.stack = append(e.stack, Row{})
		}
		e.stack[e.depth].copyFrom(row)
		e.depth++
	case OpRestoreState:
		if e.depth == 0 {
			return "DW_CFA_restore_state without a remembered state"
		}
		e.depth--
		loc := row.Loc
		row.copyFrom(&e.stack[e.depth])
		row.Loc = loc
	case OpArgsSize:
		row.ArgsSize = uint64(d.Offset)
	case OpNegateRAState:
		row.RASigned = !row.RASigned
	default:
		return fmt.Sprintf("unexpected op %v", d.Op)
	}
	return ""
}

// runFast is run's search for the row at pc (in the FDE's range) for the
// instructions compilers emit, decoded straight from the bytes of a
// little-endian section: the advances (DW_CFA_advance_loc, _loc1, _loc2,
// _loc4), DW_CFA_offset, _offset_extended, _offset_extended_sf, restore,
// _restore_extended, undefined, same_value, register, def_cfa,
// def_cfa_register, def_cfa_offset, remember_state, restore_state,
// GNU_args_size and nop. row holds the CIE's initial row (e.init()). It
// stops at the first advance past pc, as run does, and reports whether it
// computed the row; on any other opcode, truncated operand, register out
// of range, overflowing advance or rule run would reject it returns false
// (after at most one pass over the instructions), and run starts again
// with the general decoder, which gives the error with its offset and
// field. What it accepts it computes exactly as run does.
func (e *Exec) runFast(fde *ParsedFDE, pc uint64, row *Row) bool {
	code := fde.Insns
	ca, da := fde.CIE.CodeAlign, fde.CIE.DataAlign
	if ca == 0 || ca > 1<<24 || len(code) > MaxInsns {
		return false // the general decoder's overflow checks apply
	}
	start := fde.Start
	e.depth = 0
	row.Loc = start
	loc := uint64(0) // offset from start
	i := 0
	// uleb decodes the ULEB128 at code[i:], as dwarf.Uleb128 does.
	uleb := func() (uint64, bool) {
		if i < len(code) && code[i] < 0x80 {
			i++
			return uint64(code[i-1]), true
		}
		v, n := dwarf.Uleb128(code[i:])
		i += n
		return v, n != 0
	}
	reg := func() (arch.Reg, bool) {
		v, ok := uleb()
		return arch.Reg(v), ok && v <= 0xffff
	}
	for i < len(code) {
		op := code[i]
		i++
		var delta uint64
		switch op >> 6 {
		case 1: // DW_CFA_advance_loc
			delta = uint64(op & 0x3f)
		case 2: // DW_CFA_offset
			v, ok := uleb()
			if !ok || !row.set(arch.Reg(op&0x3f), Rule{Kind: RuleOffset, Offset: int64(v) * da}) {
				return false
			}
			continue
		case 3: // DW_CFA_restore
			r := arch.Reg(op & 0x3f)
			if !row.set(r, e.init().Rule(r)) {
				return false
			}
			continue
		default:
			switch dwarf.CFA(op) {
			case dwarf.DW_CFA_nop:
				continue
			case dwarf.DW_CFA_advance_loc1:
				if i+1 > len(code) {
					return false
				}
				delta = uint64(code[i])
				i++
			case dwarf.DW_CFA_advance_loc2:
				if i+2 > len(code) {
					return false
				}
				delta = uint64(binary.LittleEndian.Uint16(code[i:]))
				i += 2
			case dwarf.DW_CFA_advance_loc4:
				if i+4 > len(code) {
					return false
				}
				delta = uint64(binary.LittleEndian.Uint32(code[i:]))
				i += 4
			case dwarf.DW_CFA_offset_extended, dwarf.DW_CFA_offset_extended_sf:
				r, ok := reg()
				if !ok {
					return false
				}
				var off int64
				if op == byte(dwarf.DW_CFA_offset_extended) {
					v, ok2 := uleb()
					off, ok = int64(v)*da, ok2
				} else {
					v, n := dwarf.Sleb128(code[i:])
					i += n
					off, ok = v*da, n != 0
				}
				if !ok || !row.set(r, Rule{Kind: RuleOffset, Offset: off}) {
					return false
				}
				continue
			case dwarf.DW_CFA_restore_extended:
				r, ok := reg()
				if !ok || !row.set(r, e.init().Rule(r)) {
					return false
				}
				continue
			case dwarf.DW_CFA_undefined, dwarf.DW_CFA_same_value:
				r, ok := reg()
				k := RuleUndefined
				if op == byte(dwarf.DW_CFA_same_value) {
					k = RuleSameValue
				}
				if !ok || !row.set(r, Rule{Kind: k}) {
					return false
				}
				continue
			case dwarf.DW_CFA_register:
				r, ok := reg()
				r2, ok2 := reg()
				if !ok || !ok2 || !row.set(r, Rule{Kind: RuleRegister, Reg: r2}) {
					return false
				}
				continue
			case dwarf.DW_CFA_def_cfa:
				r, ok := reg()
				v, ok2 := uleb()
				if !ok || !ok2 {
					return false
				}
				row.CFA = Rule{Kind: RuleCFA, Reg: r, Offset: int64(v)}
				continue
			case dwarf.DW_CFA_def_cfa_register:
				r, ok := reg()
				if !ok {
					return false
				}
				row.CFA = Rule{Kind: RuleCFA, Reg: r, Offset: row.CFA.Offset}
				continue
			case dwarf.DW_CFA_def_cfa_offset:
				v, ok := uleb()
				if !ok || row.CFA.Kind != RuleCFA && row.CFA.Kind != RuleCFAExpression {
					return false
				}
				row.CFA.Offset = int64(v)
				continue
			case dwarf.DW_CFA_remember_state:
				if e.depth == MaxStateStack {
					return false
				}
				if e.depth == len(e.stack) {
					e.stack = append(e.stack, Row{})
				}
				e.stack[e.depth].copyFrom(row)
				e.depth++
				continue
			case dwarf.DW_CFA_restore_state:
				if e.depth == 0 {
					return false
				}
				e.depth--
				l := row.Loc
				row.copyFrom(&e.stack[e.depth])
				row.Loc = l
				continue
			case dwarf.DW_CFA_GNU_args_size:
				v, ok := uleb()
				if !ok {
					return false
				}
				row.ArgsSize = v
				continue
			default:
				return false
			}
		}
		// An advance: delta*ca cannot overflow (ca <= 1<<24, delta < 1<<32).
		f := delta * ca
		if loc+f < loc || start+loc+f < start {
			return false
		}
		loc += f
		if start+loc > pc {
			row.End = start + loc
			return true
		}
		row.Loc = start + loc
	}
	end := start + fde.Size
	row.End = end
	if row.Loc > end {
		row.End = row.Loc
	}
	return true
}
