package procview

import (
	"errors"
	"fmt"

	"github.com/elfimage/elfimage/symbolize"
	"github.com/elfimage/elfimage/unwind"
)

// DefaultMaxFrames is the bound on the frames of one backtrace when the
// caller gives none.
const DefaultMaxFrames = 1024

// ErrMaxFrames is wrapped by the stop error of a walk cut at its frame
// bound.
var ErrMaxFrames = errors.New("procview: frame limit reached")

// Frame is one physical frame of a backtrace.
type Frame struct {
	// PC is the frame's pc: the interrupted instruction for the innermost
	// frame and for a frame a signal frame interrupted (Exact), a return
	// address for the others.
	PC uint64
	// SP is the frame's stack pointer; CFA its canonical frame address: by
	// its call frame information, or, for a frame unwound by frame
	// pointer, its caller's stack pointer (0 when the walk stopped before
	// finding it).
	SP, CFA uint64
	// Exact reports whether PC is the exact instruction (it is then
	// symbolized at PC, and otherwise at PC-1, the call instruction).
	Exact bool
	// Signal reports whether the frame's CIE is a signal frame
	// (augmentation "S"): gdb prints such a frame as "<signal handler
	// called>".
	Signal bool
	// Method says how the frame's registers were found:
	// unwind.MethodRegisters for the innermost frame (read from the
	// thread), MethodCFI or MethodSignal from the call frame information
	// of the frame before (MethodSignal also from the registers saved in
	// a signal frame without CFI), MethodFramePointer, MethodPrologue or
	// MethodEpilogue by the frame-pointer fallback, MethodStackSwitch
	// across native.Call's trampoline.
	Method unwind.Method
	// Regs are the frame's registers as unwinding recovered them (what
	// argument locations read); registers no rule recovered are unknown.
	Regs unwind.Regs
	// Module is the name of the module holding the frame's code, or, for
	// code outside every module that a perf map names, the perf map's
	// path ("" when neither).
	Module string
	// Funcs are the source frames at the pc, innermost first: every one
	// but the last was inlined into the next (symbolize.Frame.Inlined).
	// Empty when nothing is known about the address.
	Funcs []symbolize.Frame
	// Args[i] are the formal parameters of Funcs[i] with their values in
	// this frame, from the module's DWARF (View.DescribeFrames); Args is
	// nil when they were not read, and Args[i] nil when the DWARF has no
	// function for Funcs[i].
	Args [][]Arg
}

// Backtrace unwinds a stack from the frame start (usually
// unwind.FirstFrame of a thread's registers) with the View as FDE finder
// and mem as the memory of the View's process, and describes each frame
// (DescribeFrames, with mem). Frames without call frame information are
// unwound by frame pointer (unwind.StepFP, with the View's mappings as
// address space and the function starts its perf map and symbol tables
// give), native.Call's stack switch by the layout its trampoline leaves
// at the top of the native stack, and a signal frame without CFI, whose
// code is the rt_sigreturn trampoline, from the registers saved in it
// (read from mem; the code is read through the View). It returns at most maxFrames
// frames (DefaultMaxFrames when maxFrames <= 0) and the reason the walk
// stopped: nil at the outermost frame only (an undefined return address,
// a return address of 0, a zero frame pointer); otherwise an error
// wrapping ErrMaxFrames at the bound, ErrNotExecutable when the call
// frame information of a frame gives a pc outside executable memory (that
// frame is the last one returned), unwind.ErrNoFDE and
// unwind.ErrImplausible for a frame without CFI whose frame pointer is not
// plausible, or the unwinder's error (unreadable memory, malformed CFI),
// with the frames before it. Cost: one unwind step and one description
// per frame, and a read of 9 bytes of code; the first use of a module
// opens it.
func (v *View) Backtrace(mem unwind.Memory, start unwind.Frame, maxFrames int) ([]Frame, error) {
	frames, err := v.walk(mem, start, maxFrames)
	v.DescribeFrames(frames, mem)
	return frames, err
}

// walk is Backtrace without descriptions (Module is set). A frame whose
// code is the signal return trampoline (sigreturn.go) and that its CFI
// did not already make a signal frame becomes one, and the walk goes on
// from the registers the kernel saved in its signal frame.
func (v *View) walk(mem unwind.Memory, start unwind.Frame, maxFrames int) ([]Frame, error) {
	if maxFrames <= 0 {
		maxFrames = DefaultMaxFrames
	}
	u := unwind.New(v.Arch(), v, mem)
	space := addressSpace{v}
	cur := start
	var caller unwind.Frame
	var out []Frame
	for {
		f := Frame{PC: cur.PC, SP: cur.SP, Exact: cur.First || cur.AfterSignal, Method: cur.Method, Regs: cur.Regs}
		lookup := f.PC
		if !f.Exact && lookup > 0 {
			lookup--
		}
		if m, err := v.Lookup(lookup); err == nil {
			f.Module = m.Name
		}
		if len(out) > 0 && !space.Executable(lookup) {
			// Where the call frame information of the frame before says
			// it returns: shown, as gdb does, but not code.
			out = append(out, f)
			p := out[len(out)-2]
			return out, fmt.Errorf("%w: %#x, the return address the call frame information of the frame at %#x gives (a corrupt stack, or the end of a stack whose outermost frame is not marked)", ErrNotExecutable, f.PC, p.PC)
		}
		err := v.step(u, &cur, &caller, lookup)
		f.CFA, f.Signal = cur.CFA, cur.Signal
		if f.Signal {
			// A signal trampoline known by its CFI (augmentation "S",
			// glibc's __restore_rt): its pc is where the handler
			// returns, the trampoline's first instruction, not after a
			// call, and it is described there, as elfutils and gdb do.
			f.Exact = true
		}
		if !f.Signal && v.isSigreturn(f.PC) {
			// A signal frame without CFI (Go's sigreturn): whatever the
			// step made of it is replaced by the registers it restores.
			f.Signal, f.Exact = true, true
			caller, err = sigreturnCaller(v.Arch(), mem, f.SP)
			f.CFA = caller.SP // as glibc's CFI for __restore_rt defines it
		}
		out = append(out, f)
		switch {
		case err == nil:
		case errors.Is(err, unwind.ErrOutermost):
			return out, nil
		default:
			return out, fmt.Errorf("procview: unwinding the frame at %#x: %w", f.PC, err)
		}
		if len(out) == maxFrames {
			return out, fmt.Errorf("%w: %d frames", ErrMaxFrames, maxFrames)
		}
		cur = caller
	}
}

// SymbolizeFrames fills in the Module and Funcs of each frame from its PC
// (PC-1 unless Exact): from the module's symbolizer, or, outside every
// module, from the perf map (LoadPerfMap). Addresses nothing covers are
// left without Funcs. Cost: one symbolization per frame.
func (v *View) SymbolizeFrames(frames []Frame) { v.DescribeFrames(frames, nil) }

// DescribeFrames is SymbolizeFrames that also reads, when mem is not nil,
// each function's formal parameters from its module's DWARF (the image
// file, a GDB JIT symbol file, any ELF file with DW_TAG_formal_parameter
// entries) and their values in the frame (Frame.Args): the location
// expression or location list entry at the pc is evaluated with
// dwarf/expr against the frame's registers, its CFA, the subprogram's
// DW_AT_frame_base and mem, the memory of the process as it was when the
// frames were unwound (value.Locate, pieces included). Scalars are read
// and shown as gdb's bt shows them (value.Brief, see Arg); aggregates are
// shown as "..."; typed DWARF 5 operations are not supported (an Arg with
// an error). A value on entry (DW_OP_entry_value) comes, as in gdb, from
// the caller's call site (the next frame's DW_TAG_call_site whose return
// pc is its pc, the DW_TAG_call_site_parameter for the register, its
// DW_AT_call_value in the caller's frame; nested ones at most 8 frames
// outwards), and is "<optimized out>" without one; Arg.Entry is the
// value on entry of each parameter passed in a register when the call
// site gives it (gdb's "x@entry=", Arg.String).
// Cost: one symbolization and, per function with parameters, the
// decode of its DIEs; the first frame in a compile unit indexes the
// unit's subprograms.
func (v *View) DescribeFrames(frames []Frame, mem unwind.Memory) {
	for i := range frames {
		f := &frames[i]
		pc := f.PC
		if !f.Exact && pc > 0 {
			pc--
		}
		funcs, m, _ := v.Symbolize(pc, nil)
		f.Funcs, f.Args = funcs, nil
		if m != nil {
			f.Module = m.Name
			if mem != nil && len(funcs) > 0 {
				v.frameArgs(frames, i, m, pc, mem)
			}
			continue
		}
		if e, ok := v.perfEntry(pc); ok {
			f.Module = v.ext.perfPath
			f.Funcs = []symbolize.Frame{{Function: e.Name}}
		}
	}
}
