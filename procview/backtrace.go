package procview

import (
	"errors"
	"fmt"

	"github.com/elfimage/elfimage/arch"
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
	// SP is the frame's stack pointer; CFA its canonical frame address (0
	// when its call frame information was not found).
	SP, CFA uint64
	// Exact reports whether PC is the exact instruction (it is then
	// symbolized at PC, and otherwise at PC-1, the call instruction).
	Exact bool
	// Signal reports whether the frame's CIE is a signal frame
	// (augmentation "S"): gdb prints such a frame as "<signal handler
	// called>".
	Signal bool
	// Module is the name of the module holding the frame's code ("" when
	// none does).
	Module string
	// Funcs are the source frames at the pc, innermost first: every one
	// but the last was inlined into the next (symbolize.Frame.Inlined).
	// Empty when nothing is known about the address.
	Funcs []symbolize.Frame
}

// Backtrace unwinds a stack from the frame start (usually
// unwind.FirstFrame of a thread's registers) with the View as FDE finder
// and mem as the memory of the View's process, and symbolizes each frame.
// It returns at most maxFrames frames (DefaultMaxFrames when maxFrames <=
// 0) and the reason the walk stopped: nil at the outermost frame (an
// undefined return address or a return address of 0) or at a frame whose
// pc is outside every module (that frame is the last one returned,
// without Funcs); an error wrapping ErrMaxFrames at the bound; otherwise
// the unwinder's error (unwind.ErrNoFDE for code without call frame
// information, unreadable memory, malformed CFI), with the frames before
// it. Cost: one unwind step and one symbolization per frame; the first use
// of a module opens it.
func (v *View) Backtrace(mem unwind.Memory, start unwind.Frame, maxFrames int) ([]Frame, error) {
	frames, err := v.walk(mem, start, maxFrames)
	v.SymbolizeFrames(frames)
	return frames, err
}

// walk is Backtrace without symbolization (Module is set).
func (v *View) walk(mem unwind.Memory, start unwind.Frame, maxFrames int) ([]Frame, error) {
	if maxFrames <= 0 {
		maxFrames = DefaultMaxFrames
	}
	u := unwind.New(arch.X86_64, v, mem)
	cur := start
	var caller unwind.Frame
	var out []Frame
	for {
		f := Frame{PC: cur.PC, SP: cur.SP, Exact: cur.First || cur.AfterSignal}
		lookup := f.PC
		if !f.Exact && lookup > 0 {
			lookup--
		}
		m, merr := v.Lookup(lookup)
		if merr == nil {
			f.Module = m.Name
		}
		err := u.Step(&cur, &caller)
		f.CFA, f.Signal = cur.CFA, cur.Signal
		out = append(out, f)
		switch {
		case err == nil:
		case errors.Is(err, unwind.ErrOutermost), errors.Is(err, ErrNoModule):
			return out, nil
		default:
			return out, err
		}
		if len(out) == maxFrames {
			return out, fmt.Errorf("%w: %d frames", ErrMaxFrames, maxFrames)
		}
		cur = caller
	}
}

// SymbolizeFrames fills in the Module and Funcs of each frame from its PC
// (PC-1 unless Exact). Addresses nothing covers are left without Funcs.
// Cost: one symbolization per frame.
func (v *View) SymbolizeFrames(frames []Frame) {
	for i := range frames {
		f := &frames[i]
		pc := f.PC
		if !f.Exact && pc > 0 {
			pc--
		}
		funcs, m, _ := v.Symbolize(pc, nil)
		f.Funcs = funcs
		if m != nil {
			f.Module = m.Name
		}
	}
}
