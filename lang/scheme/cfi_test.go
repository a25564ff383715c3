package scheme

import (
	"fmt"
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
}

// cfiRows interprets p's CFI on top of the standard CIE (CFA = rsp+8, RA
// at CFA-8) and returns the row in effect at each code offset.
func cfiRows(p *elfimage.Proc) []cfiRow {
	init := cfiRow{cfaReg: arch.X86_64_RSP, cfaOff: 8, rbpRule: frame.OpSameValue}
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
				if in.Reg == arch.X86_64_RBP {
					cur.rbpRule, cur.rbpOff = frame.OpOffset, in.Offset
				}
			case frame.OpSameValue, frame.OpRestore:
				if in.Reg == arch.X86_64_RBP {
					cur.rbpRule = frame.OpSameValue
				}
			case frame.OpUndefined:
				if in.Reg == arch.X86_64_RA {
					cur.raUndef = true
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
}

const (
	rbpCaller = iota
	rbpFrame
	rbpUnknown
)

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

// simulate walks every path through p's code from its entry, simulating
// the effect of each instruction on rsp and rbp, and checks the CFI row at
// every reached instruction boundary against the simulated state.
func simulate(p *elfimage.Proc) (err error) {
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
	states := map[int]machState{}
	work := []int{0}
	states[0] = machState{rspOff: -8, rbp: rbpCaller}
	fail := func(pc int, inst x86asm.Inst, format string, args ...any) {
		simFail("%s+%#x (%v): %s", p.Name, pc, inst, fmt.Sprintf(format, args...))
	}
	flow := func(from, to int, s machState, inst x86asm.Inst) {
		if to < 0 || to > len(p.Code) {
			fail(from, inst, "jump target %#x outside the procedure", to)
		}
		if old, ok := states[to]; ok {
			if old != s {
				fail(from, inst, "state %+v flows into %#x which has state %+v", s, to, old)
			}
			return
		}
		states[to] = s
		work = append(work, to)
	}
	for len(work) > 0 {
		pc := work[len(work)-1]
		work = work[:len(work)-1]
		s := states[pc]
		if pc == len(p.Code) {
			simFail("%s: execution falls off the end", p.Name)
		}
		inst, err := x86asm.Decode(p.Code[pc:], 64)
		if err != nil {
			simFail("%s+%#x: decode: %v", p.Name, pc, err)
		}
		// Check the CFI row in effect at this boundary.
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
		next := pc + inst.Len
		n := s
		external := relocAt[uint32(next-4)] // rel32 field patched by the linker
		switch inst.Op {
		case x86asm.PUSH:
			n.rspOff -= 8
			if isReg(inst.Args[0], x86asm.RBP) && s.rbp == rbpCaller && n.rspOff == -16 {
				n.rbpSaved = true
			}
		case x86asm.POP:
			if isReg(inst.Args[0], x86asm.RBP) {
				if s.rspOff == -16 && s.rbpSaved {
					n.rbp = rbpCaller
				} else {
					n.rbp = rbpUnknown
				}
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
				flow(pc, next+int(inst.Args[0].(x86asm.Rel)), s, inst)
			}
			continue
		case x86asm.CALL:
			if !external {
				fail(pc, inst, "call without relocation")
			}
		default:
			if inst.Op >= x86asm.JA && inst.Op <= x86asm.JS && inst.Op != x86asm.JMP {
				if external {
					fail(pc, inst, "conditional jump out of the procedure")
				}
				flow(pc, next+int(inst.Args[0].(x86asm.Rel)), s, inst)
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
				n = machState{rspOff: -startFrameSize, rbp: rbpUnknown, rbpSaved: true}
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
			}
		}
		flow(pc, next, n, inst)
	}
	if len(states) < 2 {
		simFail("%s: nothing reached", p.Name)
	}
	return nil
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
	for _, name := range []string{"kernels.scm", "demo.scm", "errors.scm"} {
		m := compileFile(t, name)
		for _, p := range m.Procs {
			if err := simulate(p); err != nil {
				t.Errorf("%s: %v", name, err)
			}
			checkLines(t, p)
		}
		start := m.Procs[0]
		if start.Name != symStart || len(start.CFI) == 0 || start.CFI[0].PC != 0 || start.CFI[0].Op != frame.OpUndefined || start.CFI[0].Reg != arch.X86_64_RA {
			t.Errorf("%s: entry stub does not start with RA undefined: %+v", name, start.CFI)
		}
	}
}

// TestCFISimulatorFails makes sure the checker can fail: CFI missing a
// def_cfa_register, or a frame with the saved-rbp rule dropped, must be
// rejected.
func TestCFISimulatorFails(t *testing.T) {
	m := compileFile(t, "kernels.scm")
	for _, drop := range []frame.Op{frame.OpDefCFARegister, frame.OpOffset, frame.OpRestoreState} {
		p := *m.Procs[1]
		p.CFI = nil
		for _, in := range m.Procs[1].CFI {
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
