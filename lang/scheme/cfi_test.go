package scheme

import (
	"fmt"
	"github.com/elfimage/elfimage/dwarf"
	"slices"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/frame"
	"golang.org/x/arch/x86/x86asm"
)

// cfiRow is the part of a CFA table row the checks need.
type cfiRow struct {
	cfaReg  arch.Reg
	cfaOff  int64
	rbpRule frame.Op // OpSameValue (CIE default here) or OpOffset
	rbpOff  int64
	raUndef bool
	// saved[r] is the CFA offset where the caller's value of DWARF
	// register r is saved (OpOffset), 0 when it is the same value; the
	// return-address column is among them on AArch64 (x30).
	saved [33]int64
	// undef[r] is set where the caller's value of register r is lost
	// (OpUndefined).
	undef [33]bool
}

// cfiRows interprets p's x86-64 CFI (cfiRowsFor).
func cfiRows(p *elfimage.Proc) []cfiRow { return cfiRowsFor(arch.X86_64, p) }

// cfiRowsFor interprets p's CFI on top of the standard CIE of a (CFA =
// rsp+8, RA at CFA-8 on x86-64; CFA = sp, RA in x30 on AArch64) and
// returns the row in effect at each code offset. The rbp fields are
// those of a's frame pointer (x29 on AArch64).
func cfiRowsFor(a *arch.Arch, p *elfimage.Proc) []cfiRow {
	init := cfiRow{cfaReg: a.SP, cfaOff: 8, rbpRule: frame.OpSameValue}
	fp, ra := a.FP, a.RA
	nsaved := arch.Reg(16) // x86-64: every register but the RA column
	if a.Machine == arch.AArch64.Machine {
		init.cfaOff, nsaved = 0, 33
	}
	cur := init
	var stack []cfiRow
	rows := make([]cfiRow, len(p.Code))
	k := 0
	for pc := range rows {
		for k < len(p.CFI) && p.CFI[k].PC <= uint64(pc) {
			in := p.CFI[k]
			if k > 0 && in.PC < p.CFI[k-1].PC {
				simFail("%s: CFI not sorted at %d", p.Name, k)
			}
			switch in.Op {
			case frame.OpDefCFA:
				cur.cfaReg, cur.cfaOff = in.Reg, in.Offset
			case frame.OpDefCFAOffset:
				cur.cfaOff = in.Offset
			case frame.OpDefCFARegister:
				cur.cfaReg = in.Reg
			case frame.OpOffset:
				if in.Reg == fp {
					cur.rbpRule, cur.rbpOff = frame.OpOffset, in.Offset
				} else if in.Reg < nsaved {
					cur.saved[in.Reg], cur.undef[in.Reg] = in.Offset, false
				}
			case frame.OpSameValue, frame.OpRestore:
				if in.Reg == fp {
					cur.rbpRule = frame.OpSameValue
				} else if in.Reg < nsaved {
					cur.saved[in.Reg], cur.undef[in.Reg] = 0, false
				}
			case frame.OpUndefined:
				if in.Reg == ra {
					cur.raUndef = true
				} else if in.Reg < nsaved {
					cur.saved[in.Reg], cur.undef[in.Reg] = 0, true
				}
			case frame.OpRememberState:
				stack = append(stack, cur)
			case frame.OpRestoreState:
				if len(stack) == 0 {
					simFail("%s: restore_state with empty stack at pc %d", p.Name, in.PC)
				}
				cur, stack = stack[len(stack)-1], stack[:len(stack)-1]
			default:
				simFail("%s: unexpected CFI op %d", p.Name, in.Op)
			}
			k++
		}
		rows[pc] = cur
	}
	for ; k < len(p.CFI); k++ {
		simFail("%s: CFI insn at pc %d beyond the code (%d bytes)", p.Name, p.CFI[k].PC, len(p.Code))
	}
	return rows
}

// machState is the simulated frame state before an instruction, relative
// to the procedure's CFA (the rsp value before the call that entered it,
// plus 8).
type machState struct {
	rspOff   int64 // rsp = CFA + rspOff
	rbp      int   // rbpCaller, rbpFrame (= CFA-16), rbpUnknown
	rbpSaved bool  // the caller's rbp is stored at CFA-16
	aborted  bool  // %capture's abort path: in %start's frame, its contents but r15's slot unknown
}

const (
	rbpCaller = iota
	rbpFrame
	rbpUnknown
)

// Value identities the simulation tracks in registers and frame slots:
// 0 is unknown, callerVal(r) the value register r had at entry (so the
// caller's), varBase+i the value of the i-th variable of the procedure.
const varBase = 100

func callerVal(r int) int32 { return int32(1 + r) }

// lostVal is the value of a home register after %capture's abort: one
// of the discarded frames', not %start's caller's.
const lostVal = -1

// contents are the tracked values: registers in encoding order and the
// frame's 8-byte slots, mem[j] at CFA-8(j+1).
type contents struct {
	regs [16]int32
	mem  []int32
}

const maxTrackedSlots = MaxFrameSize/8 + 64

func (c *contents) clone() contents {
	return contents{regs: c.regs, mem: append([]int32(nil), c.mem...)}
}

func (c *contents) memAt(cfaOff int64) int32 {
	j := -cfaOff/8 - 1
	if cfaOff >= 0 || cfaOff%8 != 0 || j >= int64(len(c.mem)) {
		return 0
	}
	return c.mem[j]
}

func (c *contents) setMem(cfaOff int64, v int32) {
	if cfaOff >= 0 || cfaOff%8 != 0 {
		return
	}
	j := -cfaOff/8 - 1
	if j >= maxTrackedSlots {
		return
	}
	for int64(len(c.mem)) <= j {
		c.mem = append(c.mem, 0)
	}
	c.mem[j] = v
}

// meet keeps what c and o agree on and reports whether c changed.
func (c *contents) meet(o *contents) bool {
	changed := false
	for i := range c.regs {
		if c.regs[i] != o.regs[i] && c.regs[i] != 0 {
			c.regs[i], changed = 0, true
		}
	}
	for j := range c.mem {
		if c.mem[j] != 0 && (j >= len(o.mem) || o.mem[j] != c.mem[j]) {
			c.mem[j], changed = 0, true
		}
	}
	return changed
}

// regIndex maps an x86asm register of any width to its encoding number;
// full reports a 64-bit register.
func regIndex(r x86asm.Reg) (idx int, full, ok bool) {
	switch {
	case r >= x86asm.RAX && r <= x86asm.R15:
		return int(r - x86asm.RAX), true, true
	case r >= x86asm.EAX && r <= x86asm.R15L:
		return int(r - x86asm.EAX), false, true
	case r >= x86asm.AX && r <= x86asm.R15W:
		return int(r - x86asm.AX), false, true
	case r >= x86asm.AL && r <= x86asm.R15B:
		i := int(r - x86asm.AL)
		if i >= 4 {
			i -= 4
		}
		return i, false, true
	}
	return 0, false, false
}

func isReg(a x86asm.Arg, r x86asm.Reg) bool { ar, ok := a.(x86asm.Reg); return ok && ar == r }

// writesReg reports whether inst's destination is register r (for the
// instructions our encoder emits, the destination is Args[0]).
func writesReg(inst x86asm.Inst, r x86asm.Reg) bool {
	switch inst.Op {
	case x86asm.CMP, x86asm.TEST, x86asm.PUSH, x86asm.CALL, x86asm.JMP, x86asm.RET:
		return false
	}
	return isReg(inst.Args[0], r)
}

// simVar is a variable or parameter as the checks see it.
type simVar struct {
	v      elfimage.Var
	id     int32
	scopes []elfimage.CodeRange // where it is in scope; nil for parameters (everywhere)
}

func inRanges(rs []elfimage.CodeRange, pc int) bool {
	for _, r := range rs {
		if uint32(pc) >= r.Start && uint32(pc) < r.End {
			return true
		}
	}
	return false
}

// procVars lists p's parameters and the variables of its scopes, checking
// the shape of scopes and live ranges: sorted, disjoint, non-empty, inside
// the code, variables' live ranges inside their scope and scopes inside
// their parents.
func procVars(p *elfimage.Proc) []simVar {
	var out []simVar
	all := []elfimage.CodeRange{{Start: 0, End: uint32(len(p.Code))}}
	checkRanges := func(what string, rs []elfimage.CodeRange, parent []elfimage.CodeRange) {
		if len(rs) == 0 {
			simFail("%s: %s has no ranges", p.Name, what)
		}
		for i, r := range rs {
			if r.Start >= r.End || r.End > uint32(len(p.Code)) || (i > 0 && r.Start < rs[i-1].End) {
				simFail("%s: %s range %d [%#x, %#x) empty, unsorted or outside the code", p.Name, what, i, r.Start, r.End)
			}
			inside := false
			for _, q := range parent {
				inside = inside || (r.Start >= q.Start && r.End <= q.End)
			}
			if !inside {
				simFail("%s: %s range [%#x, %#x) outside its scope %v", p.Name, what, r.Start, r.End, parent)
			}
		}
	}
	add := func(v elfimage.Var, scope []elfimage.CodeRange) {
		if v.Line == 0 || v.Column == 0 || len(v.Live) == 0 {
			simFail("%s: variable %s without position or live ranges: %+v", p.Name, v.Name, v)
		}
		var live []elfimage.CodeRange
		for _, r := range v.Live {
			live = append(live, elfimage.CodeRange{Start: r.Start, End: r.End})
		}
		parent := scope
		if parent == nil {
			parent = all
		}
		checkRanges("variable "+v.Name, live, parent)
		out = append(out, simVar{v: v, id: varBase + int32(len(out)), scopes: scope})
	}
	for _, v := range p.Params {
		add(v, nil)
	}
	var walk func(sc *elfimage.Scope, parent []elfimage.CodeRange)
	walk = func(sc *elfimage.Scope, parent []elfimage.CodeRange) {
		checkRanges("scope", sc.Ranges, parent)
		if len(sc.Vars) == 0 {
			simFail("%s: scope %v binds nothing", p.Name, sc.Ranges)
		}
		for _, v := range sc.Vars {
			add(v, sc.Ranges)
		}
		for _, in := range sc.Scopes {
			walk(in, sc.Ranges)
		}
	}
	for _, sc := range p.Scopes {
		walk(sc, all)
	}
	return out
}

// simulate checks p's CFI against a simulation of its machine code; see
// simulateVars.
func simulate(p *elfimage.Proc) error { return simulateVars(p, nil) }

// simulateVars walks every path through p's code from its entry,
// simulating the effect of each instruction on rsp, rbp and the values in
// registers and frame slots, and checks at every reached instruction
// boundary:
//
//   - the CFI row: the CFA rule, the rule for rbp, and for rbx and r12-r15
//     that the caller's value is where the row says (in the register, or
//     saved at the CFA offset);
//   - when defs is not nil (the compiler's record of which instruction
//     stores which variable's value), every variable listed live there
//     really has its value at the listed location, and every variable in
//     scope whose home location holds its value is listed.
//
// Values meet at joins (a slot holds a variable only if it does on every
// path), so the checks hold for every path.
func simulateVars(p *elfimage.Proc, defs map[uint32]srcPos) (err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(simError)
			if !ok {
				panic(r)
			}
			err = e
		}
	}()
	rows := cfiRows(p)
	relocAt := map[uint32]bool{}
	for _, r := range p.Relocs {
		relocAt[r.Offset] = true
	}
	var vars []simVar
	defID := map[uint32]int32{}
	if defs != nil {
		vars = procVars(p)
		byPos := map[srcPos]int32{}
		for _, v := range vars {
			pos := srcPos{v.v.Line, v.v.Column}
			if byPos[pos] != 0 {
				simFail("%s: two variables at %d:%d", p.Name, pos.Line, pos.Column)
			}
			byPos[pos] = v.id
		}
		for pc, pos := range defs {
			if byPos[pos] == 0 {
				simFail("%s+%#x: store of a variable declared at %d:%d that is not in the debug info", p.Name, pc, pos.Line, pos.Column)
			}
			defID[pc] = byPos[pos]
		}
	}
	type state struct {
		m machState
		c contents
	}
	states := map[int]*state{}
	var work []int
	entry := &state{m: machState{rspOff: -8, rbp: rbpCaller}}
	for r := range entry.c.regs {
		entry.c.regs[r] = callerVal(r)
	}
	if defs != nil {
		for i, v := range p.Params {
			if !v.Optional {
				entry.c.regs[argRegs[i]] = vars[i].id
			}
		}
	}
	states[0] = entry
	work = append(work, 0)
	fail := func(pc int, inst x86asm.Inst, format string, args ...any) {
		simFail("%s+%#x (%v): %s", p.Name, pc, inst, fmt.Sprintf(format, args...))
	}
	flow := func(from, to int, s machState, c contents, inst x86asm.Inst) {
		if to < 0 || to > len(p.Code) {
			fail(from, inst, "jump target %#x outside the procedure", to)
		}
		if old, ok := states[to]; ok {
			if old.m != s {
				fail(from, inst, "state %+v flows into %#x which has state %+v", s, to, old.m)
			}
			if old.c.meet(&c) {
				work = append(work, to)
			}
			return
		}
		states[to] = &state{m: s, c: c.clone()}
		work = append(work, to)
	}
	// frameOff returns the CFA offset of a memory operand in the frame.
	frameOff := func(s machState, a x86asm.Arg) (int64, bool) {
		m, ok := a.(x86asm.Mem)
		if !ok || m.Index != 0 || s.aborted {
			return 0, false
		}
		switch {
		case m.Base == x86asm.RBP && s.rbp == rbpFrame:
			return m.Disp - 16, true
		case m.Base == x86asm.RSP:
			return s.rspOff + m.Disp, true
		}
		return 0, false
	}
	// Phase 1: the fixpoint of frame states and contents.
	for len(work) > 0 {
		pc := work[len(work)-1]
		work = work[:len(work)-1]
		st := states[pc]
		s := st.m
		if pc == len(p.Code) {
			simFail("%s: execution falls off the end", p.Name)
		}
		inst, err := x86asm.Decode(p.Code[pc:], 64)
		if err != nil {
			simFail("%s+%#x: decode: %v", p.Name, pc, err)
		}
		next := pc + inst.Len
		n := s
		c := st.c.clone()
		external := relocAt[uint32(next-4)] // rel32 field patched by the linker
		val := func(a x86asm.Arg) int32 {
			if r, ok := a.(x86asm.Reg); ok {
				if i, full, ok := regIndex(r); ok && full {
					return c.regs[i]
				}
				return 0
			}
			if o, ok := frameOff(s, a); ok {
				return c.memAt(o)
			}
			return 0
		}
		// setDst stores v into inst.Args[0] when it is a register or a
		// frame slot (a partial register write leaves an unknown value).
		setDst := func(v int32) {
			if r, ok := inst.Args[0].(x86asm.Reg); ok {
				if i, full, ok := regIndex(r); ok {
					if !full {
						v = 0
					}
					c.regs[i] = v
				}
				return
			}
			if o, ok := frameOff(s, inst.Args[0]); ok {
				if inst.MemBytes != 8 {
					v = 0
				}
				c.setMem(o, v)
			}
		}
		clobber := func(rs ...reg) {
			for _, r := range rs {
				c.regs[r] = 0
			}
		}
		switch inst.Op {
		case x86asm.PUSH:
			n.rspOff -= 8
			if isReg(inst.Args[0], x86asm.RBP) && s.rbp == rbpCaller && n.rspOff == -16 {
				n.rbpSaved = true
			}
			if !s.aborted {
				c.setMem(n.rspOff, val(inst.Args[0]))
			}
		case x86asm.POP:
			if isReg(inst.Args[0], x86asm.RBP) {
				if s.rspOff == -16 && s.rbpSaved {
					n.rbp = rbpCaller
				} else {
					n.rbp = rbpUnknown
				}
			} else {
				setDst(c.memAt(s.rspOff))
			}
			n.rspOff += 8
		case x86asm.LEAVE:
			if s.rbp != rbpFrame || !s.rbpSaved {
				fail(pc, inst, "leave without a frame")
			}
			n.rspOff, n.rbp = -8, rbpCaller
		case x86asm.RET:
			if s.rspOff != -8 || s.rbp != rbpCaller {
				fail(pc, inst, "ret with rsp = CFA%d, rbp state %d", s.rspOff, s.rbp)
			}
			continue
		case x86asm.UD2:
			continue
		case x86asm.JMP:
			if external {
				if s.rspOff != -8 || s.rbp != rbpCaller {
					fail(pc, inst, "tail jump with rsp = CFA%d, rbp state %d", s.rspOff, s.rbp)
				}
			} else {
				flow(pc, next+int(inst.Args[0].(x86asm.Rel)), s, c, inst)
			}
			continue
		case x86asm.CALL:
			if !external {
				fail(pc, inst, "call without relocation")
			}
			clobber(rax, rcx, rdx, rsi, rdi, r8, r9, r10, r11)
		case x86asm.SYSCALL:
			clobber(rax, rcx, r11)
		case x86asm.CQO:
			clobber(rdx)
		case x86asm.IDIV, x86asm.DIV:
			clobber(rax, rdx)
		case x86asm.MOVSB:
			clobber(rcx, rsi, rdi)
		case x86asm.CMP, x86asm.TEST:
		default:
			if inst.Op >= x86asm.JA && inst.Op <= x86asm.JS && inst.Op != x86asm.JMP {
				if external {
					fail(pc, inst, "conditional jump out of the procedure")
				}
				flow(pc, next+int(inst.Args[0].(x86asm.Rel)), s, c, inst)
				break
			}
			switch {
			case inst.Op == x86asm.MOV && isReg(inst.Args[0], x86asm.RBP) && isReg(inst.Args[1], x86asm.RSP):
				if s.rspOff != -16 {
					fail(pc, inst, "mov rbp, rsp with rsp = CFA%d", s.rspOff)
				}
				n.rbp = rbpFrame
			case inst.Op == x86asm.MOV && isReg(inst.Args[0], x86asm.RSP):
				// Only the abort path: back to %start's frame.
				m, ok := inst.Args[1].(x86asm.Mem)
				if !ok || m.Base != x86asm.R15 || m.Disp != ctlSavedSP {
					fail(pc, inst, "unexpected write of rsp")
				}
				// %start's frame: the caller's rbp at CFA-16, r15 at
				// CFA-24; the homes hold what the discarded frames
				// put there (lostVal), their callers' values are lost.
				n = machState{rspOff: -startFrameSize, rbp: rbpUnknown, rbpSaved: true, aborted: true}
				c = contents{}
				c.setMem(-24, callerVal(int(r15)))
				for _, r := range x86Homes {
					c.regs[r] = lostVal
				}
			case (inst.Op == x86asm.SUB || inst.Op == x86asm.ADD) && isReg(inst.Args[0], x86asm.RSP):
				imm, ok := inst.Args[1].(x86asm.Imm)
				if !ok {
					fail(pc, inst, "rsp adjusted by a non-constant")
				}
				if inst.Op == x86asm.SUB {
					n.rspOff -= int64(imm)
				} else {
					n.rspOff += int64(imm)
				}
			case writesReg(inst, x86asm.RSP) || writesReg(inst, x86asm.RBP):
				fail(pc, inst, "unexpected write of rsp or rbp")
			case inst.Op == x86asm.MOV:
				setDst(val(inst.Args[1]))
			default:
				setDst(0)
			}
		}
		if id, ok := defID[uint32(pc)]; ok {
			if inst.Op != x86asm.MOV {
				fail(pc, inst, "recorded as a variable store but is not a mov")
			}
			setDst(id)
		}
		flow(pc, next, n, c, inst)
	}
	if len(states) < 2 {
		simFail("%s: nothing reached", p.Name)
	}
	// Phase 2: the checks, in code order for stable messages.
	pcs := make([]int, 0, len(states))
	for pc := range states {
		pcs = append(pcs, pc)
	}
	slices.Sort(pcs)
	for _, pc := range pcs {
		st := states[pc]
		s, c := st.m, &st.c
		inst, _ := x86asm.Decode(p.Code[pc:], 64)
		row := rows[pc]
		switch row.cfaReg {
		case arch.X86_64_RSP:
			if row.cfaOff != -s.rspOff {
				fail(pc, inst, "CFI says CFA = rsp+%d, simulation rsp = CFA%d", row.cfaOff, s.rspOff)
			}
		case arch.X86_64_RBP:
			if s.rbp != rbpFrame || row.cfaOff != 16 {
				fail(pc, inst, "CFI says CFA = rbp+%d, but rbp state is %d", row.cfaOff, s.rbp)
			}
		default:
			fail(pc, inst, "CFA register %d", row.cfaReg)
		}
		switch row.rbpRule {
		case frame.OpSameValue:
			if s.rbp != rbpCaller {
				fail(pc, inst, "CFI says rbp is unchanged, but it is not the caller's")
			}
		case frame.OpOffset:
			if row.rbpOff != -16 || !s.rbpSaved {
				fail(pc, inst, "CFI says rbp at CFA%d, saved=%v", row.rbpOff, s.rbpSaved)
			}
		}
		for _, r := range []reg{rbx, r12, r13, r14, r15} {
			if row.undef[dwarfReg(r)] {
				if c.regs[r] == callerVal(int(r)) {
					fail(pc, inst, "CFI says the caller's %s is lost (undefined), but %s holds it", arch.X86_64.RegName(dwarfReg(r)), arch.X86_64.RegName(dwarfReg(r)))
				}
			} else if off := row.saved[dwarfReg(r)]; off != 0 {
				if c.memAt(off) != callerVal(int(r)) {
					fail(pc, inst, "CFI says the caller's %s is at CFA%d, but that slot holds value %d", arch.X86_64.RegName(dwarfReg(r)), off, c.memAt(off))
				}
			} else if c.regs[r] != callerVal(int(r)) {
				fail(pc, inst, "CFI says %s is unchanged, but it holds value %d", arch.X86_64.RegName(dwarfReg(r)), c.regs[r])
			}
		}
		if s.aborted {
			continue // no variables in %start's frame
		}
		for _, v := range vars {
			live := false
			for _, lr := range v.v.Live {
				if uint32(pc) < lr.Start || uint32(pc) >= lr.End {
					continue
				}
				live = true
				if got := locValue(c, lr.Location); got != v.id {
					fail(pc, inst, "%s listed live in %x, which holds value %d, not %d", v.v.Name, lr.Location, got, v.id)
				}
			}
			if live || (v.scopes != nil && !inRanges(v.scopes, pc)) {
				continue
			}
			for _, lr := range v.v.Live {
				if locValue(c, lr.Location) == v.id {
					fail(pc, inst, "%s is in scope and its value is in %x, but it is not listed live", v.v.Name, lr.Location)
				}
			}
		}
	}
	return nil
}

// locValue returns the tracked value at a location expression: DW_OP_regN
// or DW_OP_fbreg(off) (the frame base is the CFA).
func locValue(c *contents, loc []byte) int32 {
	if len(loc) == 1 && loc[0] >= byte(dwarf.DW_OP_reg0) && loc[0] < byte(dwarf.DW_OP_reg0)+16 {
		dr := arch.Reg(loc[0] - byte(dwarf.DW_OP_reg0))
		for r := rax; r <= r15; r++ {
			if dwarfReg(r) == dr {
				return c.regs[r]
			}
		}
	}
	if len(loc) > 1 && loc[0] == byte(dwarf.DW_OP_fbreg) {
		off, n := dwarf.Sleb128(loc[1:])
		if n == len(loc)-1 {
			return c.memAt(off)
		}
	}
	return -1
}

type simError string

func (e simError) Error() string { return string(e) }

func simFail(format string, args ...any) { panic(simError(fmt.Sprintf(format, args...))) }

// checkLines checks the line rows of a compiled (non-internal) procedure.
func checkLines(t *testing.T, p *elfimage.Proc) {
	t.Helper()
	if p.Internal {
		return
	}
	if len(p.Lines) == 0 || p.Lines[0].Offset != 0 || int(p.Lines[0].Line) != p.Line || int(p.Lines[0].Column) != p.Column {
		t.Errorf("%s: first line row %+v, want offset 0 at %d:%d", p.Name, p.Lines, p.Line, p.Column)
	}
	pe := 0
	for i, r := range p.Lines {
		if i > 0 && r.Offset <= p.Lines[i-1].Offset {
			t.Errorf("%s: line rows not strictly increasing at %d", p.Name, i)
		}
		if r.Line == 0 || r.Column == 0 || int(r.Offset) >= len(p.Code) {
			t.Errorf("%s: bad row %+v", p.Name, r)
		}
		if r.PrologueEnd {
			pe++
		}
	}
	if pe != 1 {
		t.Errorf("%s: %d rows with PrologueEnd, want 1", p.Name, pe)
	}
}

func TestCFIExact(t *testing.T) {
	for _, name := range []string{"kernels.scm", "demo.scm", "errors.scm", "scopes.scm"} {
		m, defs := compileFileDefs(t, name)
		for _, p := range m.Procs {
			if err := simulateVars(p, defs[p]); err != nil {
				t.Errorf("%s: %v", name, err)
			}
			checkLines(t, p)
		}
		if start := m.Procs[0]; start.Name != symStart || m.Entry != symStart {
			t.Errorf("%s: the entry procedure is %s (module entry %s), want %s first", name, start.Name, m.Entry, symStart)
		}
	}
}

// TestCFISimulatorFails makes sure the checker can fail: CFI missing a
// def_cfa_register, or a frame with the saved-rbp rule dropped, must be
// rejected.
func TestCFISimulatorFails(t *testing.T) {
	m := compileFile(t, "kernels.scm")
	var fib *elfimage.Proc
	for _, p := range m.Procs {
		if p.Name == "fib" {
			fib = p
		}
	}
	for _, drop := range []frame.Op{frame.OpDefCFARegister, frame.OpOffset, frame.OpRestoreState} {
		p := *fib
		p.CFI = nil
		for _, in := range fib.CFI {
			if in.Op != drop {
				p.CFI = append(p.CFI, in)
			}
		}
		if err := simulate(&p); err == nil {
			t.Errorf("simulation accepted CFI without op %d", drop)
		} else {
			t.Logf("without op %d: %v", drop, err)
		}
	}
}
