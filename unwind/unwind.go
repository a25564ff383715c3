// Package unwind walks the stack by call frame information: given the
// registers of one frame and a way to read memory, it computes the
// registers of the caller (DWARF 5 section 6.4.4 "Call Frame Instruction
// Usage"), using the CFA rule and register rules of the row of the FDE
// covering the pc ([frame.Exec.RowAt]) and [expr.Eval] for expression
// rules. It knows nothing of any particular ABI beyond [arch.Arch] (the
// stack pointer, return-address column and register count), so it works on
// x86-64 and AArch64 alike, and on any ELF with .eh_frame, not only
// elfimage's.
//
// [Unwinder.Step] computes one caller frame and allocates nothing (the
// Unwinder is the reusable context: the CFA machine's state, the FDE and
// the row live in it). With CFI that cannot change ([*Source],
// [*frame.Finder]) an Unwinder also remembers the rows of the last 256 pcs
// it unwound, so that repeated stacks (a profiler's) skip the FDE search
// and the CFA program. Memory is read through the [Memory] interface:
// [Local] reads the calling process (faults become errors), [Snapshot] a
// copied stack, [Remote] another process (process_vm_readv). Signal frames
// (CIE augmentation "S") are handled: the frame they interrupted is looked
// up at its exact pc, not pc-1. On AArch64, return addresses signed with
// pointer authentication (DW_CFA_AARCH64_negate_ra_state) are stripped
// ([Unwinder.PACMask]). A walk ends cleanly with [ErrOutermost] at a frame
// whose return-address rule is undefined or whose return address is 0.
// [Unwinder.StepFP] is the fallback for frames without CFI: it follows the
// frame-pointer chain (with prologue and epilogue analysis for an
// innermost x86-64 frame) and checks every candidate caller for
// plausibility; each frame records how it was found ([Frame.Method]).
// FDEs are found through a [Finder]: [Source] serves one module's
// .eh_frame_hdr and .eh_frame at their run-time addresses, [Sources] tries
// several modules; a process-wide registry can implement Finder itself.
package unwind

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/expr"
	"github.com/elfimage/elfimage/dwarf/frame"
)

// MaxRegs is the number of registers a [Regs] holds: DWARF registers
// [0, MaxRegs). It covers x86-64 (17) and AArch64 (33); rules for higher
// registers (vector registers) are ignored.
const MaxRegs = 33

var (
	// ErrOutermost ends a walk cleanly: the frame's return-address rule is
	// undefined (DW_CFA_undefined on the RA column marks the outermost
	// frame), or the return address or pc is 0.
	ErrOutermost = errors.New("unwind: outermost frame")
	// ErrNoFDE is frame.ErrNoFDE: no CFI covers the pc.
	ErrNoFDE = frame.ErrNoFDE
	// ErrNoProgress is returned when the caller frame would equal the
	// current one (same pc and stack pointer): a walk would never end.
	ErrNoProgress = errors.New("unwind: no progress")
	// ErrUnknownRegister is wrapped when a rule needs a register whose
	// value is not known.
	ErrUnknownRegister = errors.New("unwind: register value unknown")
)

// Regs is a register set: the values of DWARF registers [0, MaxRegs) and
// which of them are known. The zero value knows no register.
type Regs struct {
	v     [MaxRegs]uint64
	valid uint64 // bit r set: v[r] is known
}

// Get returns register r's value and whether it is known.
func (r *Regs) Get(reg arch.Reg) (uint64, bool) {
	if int(reg) >= MaxRegs || r.valid&(1<<reg) == 0 {
		return 0, false
	}
	return r.v[reg], true
}

// Set makes register reg known with value v; registers >= MaxRegs are
// ignored.
func (r *Regs) Set(reg arch.Reg, v uint64) {
	if int(reg) < MaxRegs {
		r.v[reg] = v
		r.valid |= 1 << reg
	}
}

// Clear makes register reg unknown.
func (r *Regs) Clear(reg arch.Reg) {
	if int(reg) < MaxRegs {
		r.valid &^= 1 << reg
	}
}

// Memory reads the unwound process's memory.
type Memory interface {
	// ReadUint64 reads the 8-byte little-endian (target order) value at
	// addr.
	ReadUint64(addr uint64) (uint64, error)
}

// SizedMemory is a Memory that can also read 1 to 8 bytes, used by
// DW_OP_deref_size in CFI expressions. Without it, sized reads read 8 bytes
// and keep the low ones (little-endian targets).
type SizedMemory interface {
	Memory
	ReadSized(addr uint64, size int) (uint64, error)
}

// Finder finds the FDE covering a pc (an address in the unwound process).
// It returns an error wrapping [ErrNoFDE] on a miss and must not allocate on
// a hit for [Unwinder.Step] to be allocation-free. *frame.Finder, *Source
// and Sources implement it.
type Finder interface {
	FindFDE(pc uint64, fde *frame.ParsedFDE) error
}

// Source finds FDEs in one module: its .eh_frame_hdr and .eh_frame bytes
// (usually slices of the mapped image) at their run-time addresses, so
// that pc-relative pointers decode to run-time pcs.
type Source struct {
	frame.Finder
}

// NewSource returns the Source for one module whose .eh_frame (at run-time
// address ehFrameAddr) and .eh_frame_hdr (at hdrAddr; nil when absent: FDE
// lookup then scans .eh_frame) are given. Both are little-endian with a's
// address size. Errors are those of [frame.ParseEHFrameHdr].
func NewSource(a *arch.Arch, ehFrameHdr []byte, hdrAddr uint64, ehFrame []byte, ehFrameAddr uint64) (*Source, error) {
	f, err := frame.NewFinder(ehFrame, ehFrameAddr, ehFrameHdr, hdrAddr, binary.LittleEndian, uint8(a.PtrSize))
	if err != nil {
		return nil, err
	}
	return &Source{*f}, nil
}

// Sources tries each Finder in order and returns the first hit.
type Sources []Finder

// FindFDE implements [Finder]. Cost: the sum of the Finders' costs on a
// miss.
func (s Sources) FindFDE(pc uint64, fde *frame.ParsedFDE) error {
	for _, f := range s {
		err := f.FindFDE(pc, fde)
		if err == nil || !errors.Is(err, frame.ErrNoFDE) {
			return err
		}
	}
	return fmt.Errorf("%w %#x", frame.ErrNoFDE, pc)
}

// Frame is one frame of a walk.
type Frame struct {
	// PC is the frame's pc: the interrupted instruction for the first
	// frame, a return address for the others.
	PC uint64
	// SP is the stack pointer (for callers, the callee's CFA).
	SP uint64
	// CFA is the frame's canonical frame address (what
	// DW_OP_call_frame_cfa pushes); Step fills it in for the frame it
	// unwinds from.
	CFA uint64
	// Regs are the frame's known registers.
	Regs Regs
	// First marks the innermost frame, whose PC is exact: CFI is looked
	// up at PC, not PC-1.
	First bool
	// AfterSignal marks the frame a signal interrupted (the caller of a
	// signal frame): its PC is exact too.
	AfterSignal bool
	// Signal is set by Step when the frame's CIE has augmentation "S".
	Signal bool
	// Method says how the frame's registers were found: MethodRegisters
	// for FirstFrame, MethodCFI or MethodSignal for a caller made by Step,
	// a frame-pointer method for one made by StepFP.
	Method Method
}

// LookupPC returns the address at which the frame's code is looked up,
// for its CFI ([Unwinder.Step]) as for its procedure and source line: PC
// itself for the first frame and for the caller of a signal frame (both
// exact pcs, AfterSignal), PC-1 for the others, whose PC is a return
// address that may lie just past the call's procedure (DWARF 5 section
// 6.4.4; the "S" augmentation of the LSB's .eh_frame).
func (f *Frame) LookupPC() uint64 {
	if f.First || f.AfterSignal || f.PC == 0 {
		return f.PC
	}
	return f.PC - 1
}

// FirstFrame returns the innermost frame for the registers regs of ABI a,
// with PC = pc and SP from regs.
func FirstFrame(a *arch.Arch, pc uint64, regs Regs) Frame {
	sp, _ := regs.Get(a.SP)
	return Frame{PC: pc, SP: sp, Regs: regs, First: true, Method: MethodRegisters}
}

// Unwinder computes caller frames. It holds the reusable state of the CFA
// machine; use one per goroutine.
type Unwinder struct {
	Arch   *arch.Arch
	Finder Finder
	Mem    Memory
	// PACMask is, on AArch64, the set of address bits that hold a pointer
	// authentication code in a signed return address (one whose row has
	// DW_CFA_AARCH64_negate_ra_state in effect, frame.Row.RASigned). They
	// are cleared from such a return address before it becomes the
	// caller's pc. Zero means bits 48 to 63 (Linux user space with 48-bit
	// virtual addresses); set it from the kernel's NT_ARM_PAC_MASK when
	// known.
	PACMask uint64

	exec frame.Exec
	fde  frame.ParsedFDE
	row  frame.Row
	ctx  exprCtx
	rows *rowCache // remembered rows (rows.go); nil until the first step that keeps one
}

// New returns an Unwinder for ABI a that finds CFI with f and reads memory
// with m.
func New(a *arch.Arch, f Finder, m Memory) *Unwinder {
	return &Unwinder{Arch: a, Finder: f, Mem: m}
}

// exprCtx is the expr.Context of one step.
type exprCtx struct {
	regs   Regs // a copy, so that the caller's Frame does not escape
	mem    Memory
	cfa    uint64
	hasCFA bool
}

func (c *exprCtx) Reg(r arch.Reg) (uint64, bool) { return c.regs.Get(r) }
func (c *exprCtx) ReadMemory(a uint64, n int) (uint64, error) {
	if sm, ok := c.mem.(SizedMemory); ok && n != 8 {
		return sm.ReadSized(a, n)
	}
	v, err := c.mem.ReadUint64(a)
	if n < 8 {
		v &= 1<<(8*n) - 1
	}
	return v, err
}
func (c *exprCtx) CFA() (uint64, bool)       { return c.cfa, c.hasCFA }
func (c *exprCtx) FrameBase() (uint64, bool) { return 0, false }

func (u *Unwinder) eval(code []byte, cur *Frame, cfa uint64, hasCFA bool, push bool) (expr.Result, error) {
	u.ctx = exprCtx{regs: cur.Regs, mem: u.Mem, cfa: cfa, hasCFA: hasCFA}
	p := expr.Params{Section: u.fde.Section().Name(), Offset: u.fde.InsnsOff, AddrSize: uint8(u.Arch.PtrSize), Order: binary.LittleEndian}
	if push {
		return expr.Eval(code, p, &u.ctx, cfa)
	}
	return expr.Eval(code, p, &u.ctx)
}

// Step unwinds one frame: it finds the FDE covering cur.LookupPC() (cur.PC-1
// unless cur is the first frame or was interrupted by a signal, since a
// return address may lie just past its call's FDE), computes the row in effect,
// sets cur.CFA and cur.Signal, and writes the caller's frame to caller:
// each register per its rule (values saved in memory are read through
// Mem), SP = CFA unless a rule says otherwise, PC = the return-address
// column (with its pointer authentication code removed, see PACMask, when
// the row says it is signed). Registers without a rule keep their value
// (as GCC's unwinder does); undefined ones become unknown.
//
// Step returns [ErrOutermost] when cur is the outermost frame (PC 0, an
// undefined return-address rule, or a return address of 0), an error
// wrapping [ErrNoFDE] when no CFI covers the pc, [ErrNoProgress] when the
// caller would equal cur, and other errors for unreadable memory, unknown
// registers ([ErrUnknownRegister]) and malformed CFI (*formaterr.Error).
// caller is not valid after an error. Cost: one FDE lookup and one row
// computation, or, for a pc whose row the Unwinder remembers, neither
// (see below); no allocation unless it fails.
//
// With a [*Source] or a [*frame.Finder] as its Finder (CFI that does not
// change), an Unwinder remembers the rows of the last pcs it unwound (256,
// in two-way sets; 30 KB allocated on the first such step), so that
// unwinding the same return addresses again, as a profiler does, costs only
// the register rules. Rows are forgotten when Finder or Arch is set to
// another value (until then the Unwinder keeps a reference to the Finder
// they came from); other Finders are searched on every step.
func (u *Unwinder) Step(cur, caller *Frame) error {
	a := u.Arch
	if cur.PC == 0 {
		return ErrOutermost
	}
	pc := cur.LookupPC()
	c := u.rowCache()
	var e *compactRow
	if c != nil {
		if e := c.lookup(pc); e != nil {
			return u.stepCompact(e, cur, caller)
		}
	}
	if err := u.findFDE(pc); err != nil {
		return err
	}
	if err := u.exec.RowAt(&u.fde, pc, &u.row); err != nil {
		return err
	}
	row := &u.row
	if c != nil {
		e = c.slot(pc)
		if compact(e, row, a) {
			e.pc, e.gen, e.signal = pc, c.gen, u.fde.CIE.Signal
			return u.stepCompact(e, cur, caller)
		}
		e.gen = 0 // partly written
	}
	var cfa uint64
	switch row.CFA.Kind {
	case frame.RuleCFA:
		v, ok := cur.Regs.Get(row.CFA.Reg)
		if !ok {
			return fmt.Errorf("%w: CFA register %s at pc %#x", ErrUnknownRegister, a.RegName(row.CFA.Reg), cur.PC)
		}
		cfa = v + uint64(row.CFA.Offset)
	case frame.RuleCFAExpression:
		r, err := u.eval(row.CFA.Expr, cur, 0, false, false)
		if err != nil {
			return fmt.Errorf("unwind: CFA expression at pc %#x: %w", cur.PC, err)
		}
		if r.Kind != expr.Memory {
			return fmt.Errorf("unwind: CFA expression at pc %#x gives a %v, not an address", cur.PC, r.Kind)
		}
		cfa = r.Addr
	default:
		return fmt.Errorf("unwind: no CFA rule at pc %#x (FDE at %#x)", cur.PC, u.fde.Offset)
	}
	if a.PtrSize == 4 {
		cfa &= 0xffffffff
	}
	cur.CFA = cfa
	cur.Signal = u.fde.CIE.Signal

	// Registers without a rule (or same_value) keep their value; then each
	// rule of the row, reading only cur, so rules do not see each other.
	n := min(a.NumRegs, MaxRegs)
	caller.Regs = cur.Regs
	caller.Regs.valid &= 1<<n - 1
	spKind, raKind := frame.RuleUnspecified, frame.RuleUnspecified
	regs, rules := row.Rules()
	for j := range rules {
		reg, rule := regs[j], &rules[j]
		// A row has one rule per register (Row.Rule's answer).
		if reg == a.SP {
			spKind = rule.Kind
		}
		if reg == a.RA {
			raKind = rule.Kind
		}
		if int(reg) >= n {
			continue
		}
		switch rule.Kind {
		case frame.RuleUnspecified, frame.RuleSameValue:
		case frame.RuleUndefined:
			caller.Regs.Clear(reg)
		case frame.RuleOffset:
			addr := cfa + uint64(rule.Offset)
			v, err := u.read(addr)
			if err != nil {
				return fmt.Errorf("unwind: reading saved %s at %#x (pc %#x): %w", a.RegName(reg), addr, cur.PC, err)
			}
			caller.Regs.Set(reg, v)
		case frame.RuleValOffset:
			caller.Regs.Set(reg, cfa+uint64(rule.Offset))
		case frame.RuleRegister:
			if v, ok := cur.Regs.Get(rule.Reg); ok {
				caller.Regs.Set(reg, v)
			} else {
				caller.Regs.Clear(reg)
			}
		case frame.RuleExpression, frame.RuleValExpression:
			r, err := u.eval(rule.Expr, cur, cfa, true, true)
			if err != nil {
				return fmt.Errorf("unwind: rule for %s at pc %#x: %w", a.RegName(reg), cur.PC, err)
			}
			var v uint64
			switch {
			case r.Kind == expr.Memory && rule.Kind == frame.RuleExpression:
				v, err = u.read(r.Addr)
				if err != nil {
					return fmt.Errorf("unwind: reading saved %s at %#x (pc %#x): %w", a.RegName(reg), r.Addr, cur.PC, err)
				}
			case r.Kind == expr.Memory:
				v = r.Addr
			case r.Kind == expr.Value:
				v = r.Value
			default:
				return fmt.Errorf("unwind: rule for %s at pc %#x gives a %v", a.RegName(reg), cur.PC, r.Kind)
			}
			caller.Regs.Set(reg, v)
		}
	}
	return u.returnTo(a, cfa, cur, caller, spKind == frame.RuleUnspecified || spKind == frame.RuleSameValue, raKind == frame.RuleUndefined, row.RASigned)
}

// returnTo ends a step once caller's registers are recovered: the
// caller's SP is the CFA when spCFA (no rule of its own), raUndef makes
// the frame the outermost (ErrOutermost), and a signed return address
// (AArch64 pointer authentication) loses its PAC bits before finish
// checks and sets the caller's pc.
func (u *Unwinder) returnTo(a *arch.Arch, cfa uint64, cur, caller *Frame, spCFA, raUndef, raSigned bool) error {
	if spCFA {
		caller.Regs.Set(a.SP, cfa)
	}
	if raUndef {
		return ErrOutermost
	}
	ra, ok := caller.Regs.Get(a.RA)
	if !ok {
		return fmt.Errorf("%w: return address at pc %#x", ErrUnknownRegister, cur.PC)
	}
	if raSigned {
		mask := u.PACMask
		if mask == 0 {
			mask = 0xffff_0000_0000_0000
		}
		ra &^= mask
		caller.Regs.Set(a.RA, ra)
	}
	return u.finish(ra, cur, caller)
}

// findFDE finds the FDE covering pc into u.fde, calling the FDE search
// of a *Source directly (no interface call).
func (u *Unwinder) findFDE(pc uint64) error {
	if s, ok := u.Finder.(*Source); ok {
		return s.Finder.FindFDE(pc, &u.fde)
	}
	return u.Finder.FindFDE(pc, &u.fde)
}

// finish completes caller once its registers are known: the return
// address ra (PAC already stripped) becomes its pc.
func (u *Unwinder) finish(ra uint64, cur, caller *Frame) error {
	a := u.Arch
	if ra == 0 {
		return ErrOutermost
	}
	sp, _ := caller.Regs.Get(a.SP)
	caller.PC, caller.SP, caller.CFA = ra, sp, 0
	caller.First, caller.AfterSignal, caller.Signal = false, cur.Signal, false
	caller.Method = MethodCFI
	if cur.Signal {
		caller.Method = MethodSignal
	}
	if caller.PC == cur.PC && caller.SP == cur.SP {
		return fmt.Errorf("%w at pc %#x sp %#x", ErrNoProgress, cur.PC, cur.SP)
	}
	return nil
}

// read reads the 8 bytes at addr through u.Mem, directly (no interface
// call) when it is a little-endian *Snapshot that holds them.
func (u *Unwinder) read(addr uint64) (uint64, error) {
	if s, ok := u.Mem.(*Snapshot); ok && (s.Order == nil || s.Order == binary.LittleEndian) {
		if off := addr - s.Base; addr >= s.Base && off <= uint64(len(s.Data)) && uint64(len(s.Data))-off >= 8 {
			return binary.LittleEndian.Uint64(s.Data[off:]), nil
		}
	}
	return u.Mem.ReadUint64(addr)
}

// Walk unwinds from start and stores the pc of each frame, start's first,
// into pcs until pcs is full, the outermost frame is reached (err nil) or a
// step fails (err non-nil, n frames stored). Cost: len(pcs) steps at most;
// no allocation unless it fails.
func (u *Unwinder) Walk(start Frame, pcs []uint64) (n int, err error) {
	// Two frames used in turn: a step's caller is the next step's frame
	// (Step writes every field of caller), so no Frame is copied.
	var f [2]Frame
	f[0] = start
	cur, caller := &f[0], &f[1]
	for n < len(pcs) {
		pcs[n] = cur.PC
		n++
		if n == len(pcs) {
			return n, nil
		}
		if err := u.Step(cur, caller); err != nil {
			if errors.Is(err, ErrOutermost) {
				return n, nil
			}
			return n, err
		}
		cur, caller = caller, cur
	}
	return n, nil
}
