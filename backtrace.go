package elfimage

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/elfimage/elfimage/addrmap"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/expr"
	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/dwarf/value"
	"github.com/elfimage/elfimage/unwind"
)

// Frame is one frame of a [Backtrace], innermost first.
type Frame struct {
	// PC is the run-time pc: the interrupted instruction for the first
	// frame (unless BacktraceOptions.AtCall), a return address for the
	// others.
	PC uint64
	// CFA is the frame's canonical frame address (DWARF 5 section 6.4),
	// the value of SP in the caller before its call instruction.
	CFA uint64
	// Image is the image holding PC.
	Image *Image
	// Proc, Pos and Args describe the code at PC-1 for return addresses
	// (so that a call at the very end of a procedure is attributed to it),
	// at PC itself for the first frame and for the caller of a signal
	// frame, whose pc is exact: the rule unwind.Step uses for CFI
	// (unwind.Frame.LookupPC). Err says why any of them is missing.
	Proc Procedure
	Pos  Position
	Args []Arg
	// Locals are the variables live at the code Pos describes when BacktraceOptions.Locals is set,
	// outermost scope first; parameters are in Args.
	Locals []Arg
	Err    error
}

// Arg is the value of a parameter or variable in a frame, read through
// its DWARF location. Err is set when the value could not be read.
type Arg struct {
	Name string
	// Type is the value's type from the image's DWARF (nil when it gives
	// none: the default 8-byte "integer").
	Type *Type
	// Value is the value as an integer: of its Size, sign- or
	// zero-extended, for an integer, boolean, character or enumeration
	// type; the 8 bytes at the location (the first 8 of a larger value)
	// for other types.
	Value int64
	// Text is the value as its type shows it ([FormatLocation]): "42",
	// "3.5", "0x7f3a2c001000", "{data = 0x..., cells = {1, 2, 3}}".
	Text string
	// Depth is a variable's lexical nesting (see [Local]); 0 for
	// parameters.
	Depth int
	Err   error
}

// BacktraceOptions tunes [Backtrace].
type BacktraceOptions struct {
	// Max is the most frames to return; 0 means 256.
	Max int
	// AtCall says the registers were captured at a call instruction, so
	// the first pc is a return address like every other frame's and is
	// attributed to the instruction before it.
	AtCall bool
	// Locals also reads the variables live in each frame (Frame.Locals).
	Locals bool
}

// imageFinder finds FDEs across every open image: it is the
// unwind.Finder of the process-wide registry.
type imageFinder struct{}

func (imageFinder) FindFDE(pc uint64, fde *frame.ParsedFDE) error {
	im, err := Lookup(uintptr(pc))
	if err != nil {
		return fmt.Errorf("%w %#x: %v", frame.ErrNoFDE, pc, err)
	}
	src, err := im.unwindSource()
	if err != nil {
		return err
	}
	return src.FindFDE(pc, fde)
}

// Finder returns the [unwind.Finder] of the process-wide registry: it
// finds the FDE covering a run-time pc in the open image holding it (the
// entry image included), from the image's .eh_frame_hdr and .eh_frame,
// indexed on the image's first use. A pc outside every image, or in an
// image without call frame information, gives an error wrapping
// frame.ErrNoFDE. The caller must keep the images it unwinds through open
// ([Acquire]). It is what [Backtrace] unwinds with; profilers and other
// walkers that assemble their own stacks use it with [unwind.New]. Cost
// per lookup: one [Lookup] and one bisection of the image's table.
func Finder() unwind.Finder { return imageFinder{} }

// unwindState of an image: its .eh_frame and .eh_frame_hdr as an
// unwind.Source at run-time addresses, built on first use.
type unwindState struct {
	once sync.Once
	src  *unwind.Source
	err  error
}

// FindFDE finds the FDE of the image's .eh_frame covering the run-time
// address pc (through .eh_frame_hdr's table) and parses it into fde, which
// then aliases the image: an *Image is an unwind.Finder for its own code.
// Errors: an error wrapping frame.ErrNoFDE when no FDE covers pc, a
// *FormatError when the image has no .eh_frame_hdr or its CFI is
// malformed, [ErrFault] when the mapped file was truncated. Cost: the
// first call indexes the image's CFI (O(1) with .eh_frame_hdr); then a
// bisection of the table and one FDE parse, no allocation.
func (im *Image) FindFDE(pc uint64, fde *frame.ParsedFDE) (err error) {
	defer im.guardFaults(&err, debug.SetPanicOnFault(true))
	src, err := im.unwindSource()
	if err != nil {
		return err
	}
	return src.FindFDE(pc, fde)
}

func (im *Image) unwindSource() (*unwind.Source, error) {
	s := &im.dbg().unwind
	s.once.Do(func() { s.err = errIndexFault; s.src, s.err = im.newUnwindSource() })
	return s.src, s.err
}

// newUnwindSource finds .eh_frame through PT_GNU_EH_FRAME alone, as a
// run-time unwinder must (the section headers are in the non-loaded tail):
// .eh_frame_hdr's eh_frame_ptr gives its start, the end of the loaded
// segment holding it bounds it, and its zero terminator ends it.
func (im *Image) newUnwindSource() (*unwind.Source, error) {
	hdr := im.EHFrameHdr()
	if hdr == nil {
		return nil, &FormatError{Source: im.path, Field: "PT_GNU_EH_FRAME", Msg: "no .eh_frame_hdr: the image has no call frame information"}
	}
	base := uint64(im.Base())
	h, err := frame.ParseEHFrameHdr(hdr, base+im.EHFrameHdrAddr(), binary.LittleEndian, uint8(im.arch.PtrSize))
	if err != nil {
		return nil, err
	}
	start := h.EHFramePtr - base // link-time address = file offset
	for _, seg := range im.segs {
		if start >= seg.Addr && start < seg.Addr+seg.Size && seg.Flags&elf.PF_W == 0 {
			data := im.data[start : seg.Addr+seg.Size]
			return unwind.NewSource(im.arch, hdr, base+im.EHFrameHdrAddr(), data, h.EHFramePtr)
		}
	}
	return nil, &FormatError{Source: im.path, Offset: im.EHFrameHdrAddr() + 4, Field: "eh_frame_ptr",
		Msg: fmt.Sprintf(".eh_frame address %#x is not in a read-only loaded segment", start)}
}

// Backtrace walks the stack from the registers regs (indexed by DWARF
// register number of the ABI of the image holding the pc, the pc in the
// return-address column, arch.X86_64_RA on x86-64; a zero value counts as
// unknown for any register but the pc) with the package unwind, finding each pc's call frame information in
// the open image that holds it, and describes every frame: procedure,
// source position, and argument values read through their DWARF
// locations, each also as its type shows it (Arg.Text, [FormatLocation]).
// It stops cleanly at the outermost frame (return-address rule
// DW_CFA_undefined) and at the first frame outside every image reached
// from an image frame: the host code that called into the images, which
// is returned as the last frame (Image nil) for its pc and CFA; the
// host's own frames need the host's unwinder. A first pc outside every
// image, a pc in an image without CFI, unreadable
// memory, or opts.Max frames (ErrMaxFrames) end the walk with that error
// returned beside the frames so far, the last of which is the frame that
// could not be unwound. Cost: one CFI lookup and row
// evaluation per frame plus the lazy debug queries of each image.
func Backtrace(regs []uint64, mem unwind.Memory, opts BacktraceOptions) ([]Frame, error) {
	// The pc is in the return-address column of the image's ABI: try
	// the host's first (arch.AArch64's x30 on arm64), then x86-64's.
	a := arch.X86_64
	for _, try := range []*arch.Arch{hostArch, arch.X86_64} {
		if len(regs) > int(try.RA) {
			if im, err := Lookup(uintptr(regs[try.RA])); err == nil && im.Arch().RA == try.RA {
				a = im.Arch()
				break
			}
		}
	}
	if len(regs) <= int(a.RA) {
		return nil, fmt.Errorf("elfimage: backtrace: %d registers, want %d", len(regs), a.RA+1)
	}
	max := opts.Max
	if max == 0 {
		max = 256
	}
	var rs unwind.Regs
	for i, v := range regs[:min(len(regs), a.NumRegs)] {
		if v != 0 {
			rs.Set(arch.Reg(i), v)
		}
	}
	cur := unwind.FirstFrame(a, regs[a.RA], rs)
	cur.First = !opts.AtCall
	u := unwind.New(a, imageFinder{}, mem)
	var frames []Frame
	// Hold every image the walk reads (Acquire) so that a concurrent
	// Close cannot unmap it under the unwinder; release them at the end.
	var refs []*addrmap.Ref[*Image]
	defer func() {
		for _, r := range refs {
			r.Release()
		}
	}()
	for len(frames) < max {
		lookup := cur.LookupPC() // the rule unwind.Step looks CFI up with
		var im *Image
		if ref, lerr := Acquire(uintptr(lookup)); lerr == nil {
			refs = append(refs, ref)
			im = ref.Value()
		}
		var caller unwind.Frame
		err := u.Step(&cur, &caller) // sets cur.CFA when it gets that far
		f := Frame{PC: cur.PC, CFA: cur.CFA}
		if im != nil {
			f.Image = im
			f.describe(im, im.LinkAddr(uintptr(lookup)), &cur, mem, opts.Locals)
		}
		frames = append(frames, f)
		switch {
		case errors.Is(err, unwind.ErrOutermost):
			return frames, nil
		case f.Image == nil && len(frames) > 1 && frames[len(frames)-2].Image != nil && errors.Is(err, frame.ErrNoFDE):
			return frames, nil // returned into the host
		case err != nil:
			return frames, fmt.Errorf("elfimage: backtrace: unwinding frame %d at pc %#x: %w", len(frames)-1, cur.PC, err)
		}
		cur = caller
	}
	return frames, fmt.Errorf("elfimage: backtrace: %w (%d)", ErrMaxFrames, max)
}

// ErrMaxFrames is returned (wrapped) by [Backtrace] beside the frames when
// the walk stopped at BacktraceOptions.Max frames before the outermost one.
var ErrMaxFrames = errors.New("more frames than the limit")

// describe fills in the procedure, position and arguments of f from the
// image's debug information.
func (f *Frame) describe(im *Image, addr uint64, uf *unwind.Frame, mem unwind.Memory, locals bool) {
	var errs []error
	p, err := im.ProcedureAt(addr)
	if err != nil {
		errs = append(errs, err)
	}
	f.Proc = p
	if f.Pos, err = im.PositionAt(addr); err != nil {
		errs = append(errs, err)
	}
	sub, err := im.SubprogramAt(addr)
	if err != nil {
		errs = append(errs, err)
	}
	st := &FrameState{Regs: uf.Regs, CFA: f.CFA, Mem: mem, Arch: im.arch}
	if sub.FrameBase != nil {
		params := expr.Params{Section: ".debug_info", AddrSize: uint8(im.arch.PtrSize), Order: binary.LittleEndian}
		if r, err := expr.Eval(sub.FrameBase, params, frameContext{st}); err == nil && r.Kind == expr.Memory {
			st.FrameBase, st.HasFrameBase = r.Addr, true
		}
	}
	var locs [][]byte // of f.Args, then f.Locals
	for _, prm := range sub.Params {
		f.Args = append(f.Args, Arg{Name: prm.Name, Type: prm.Type})
		locs = append(locs, prm.Location)
	}
	// The variables, including artificial ones (array lengths), which
	// are read for Vars but not shown: when asked for, or when an
	// argument's type needs them.
	var ls []Local
	if locals || slices.ContainsFunc(f.Args, func(a Arg) bool { u := value.Under(a.Type); return u != nil && u.CountVar != "" }) {
		var err error
		if ls, err = im.locals(addr, true); err != nil && locals {
			errs = append(errs, err)
		}
	}
	var hidden []Arg
	var hiddenLocs [][]byte
	for _, l := range ls {
		switch {
		case l.Param:
		case l.artificial:
			hidden = append(hidden, Arg{Name: l.Name, Type: l.Type})
			hiddenLocs = append(hiddenLocs, l.Location)
		case locals:
			f.Locals = append(f.Locals, Arg{Name: l.Name, Type: l.Type, Depth: l.Depth})
			locs = append(locs, l.Location)
		}
	}
	// Integer values first: an array's length may be another variable's
	// value (Type.CountVar); inner scopes shadow outer ones.
	all := make([]*Arg, 0, len(locs))
	for i := range f.Args {
		all = append(all, &f.Args[i])
	}
	for i := range f.Locals {
		all = append(all, &f.Locals[i])
	}
	for i := range hidden {
		all = append(all, &hidden[i])
	}
	locs = append(locs, hiddenLocs...)
	for i, a := range all {
		a.Value, a.Err = readInteger(locs[i], a.Type, st)
		if a.Err == nil {
			if st.Vars == nil {
				st.Vars = map[string]int64{}
			}
			st.Vars[a.Name] = a.Value
		}
	}
	all = all[:len(all)-len(hidden)]
	for i, a := range all {
		if a.Err == nil {
			a.Text, a.Err = FormatLocation(locs[i], a.Type, st)
		}
	}
	f.Err = errors.Join(errs...)
}

// readInteger reads a value as an integer of its type (see Arg.Value).
func readInteger(location []byte, t *Type, st *FrameState) (int64, error) {
	obj, opts, err := st.locate(location)
	if err != nil {
		return 0, err
	}
	return value.Integer(t, obj, opts)
}

// FrameState is what location expressions read in one frame: its
// registers, its canonical frame address, the value of its subprogram's
// DW_AT_frame_base, and memory.
type FrameState struct {
	Regs unwind.Regs
	CFA  uint64
	// FrameBase is the frame base (DW_OP_fbreg operands are relative to
	// it); when HasFrameBase is false, the CFA is used, which is what
	// images written by Link declare (DW_OP_call_frame_cfa).
	FrameBase    uint64
	HasFrameBase bool
	Mem          unwind.Memory
	// Arch is the frame's ABI; nil means arch.X86_64.
	Arch *arch.Arch
	// Vars gives the integer values of the frame's variables by name,
	// for types whose shape depends on them ([FormatLocation]: an array
	// of Type.CountVar elements). Backtrace sets it; nil is empty.
	Vars map[string]int64
}

// ReadLocation evaluates a location expression (a [Param.Location] or
// [Local.Location]) in a frame and returns the 8-byte value it designates:
// the word in memory at a memory location, a register's value, or the
// value of a DW_OP_stack_value expression (the bytes of an implicit or
// composite value, zero-extended). Errors: those of value.Locate (the
// expression is malformed or unsupported, a register it needs is not
// known, it is empty: optimized out), or memory cannot be read. Cost: one
// expression evaluation.
func ReadLocation(location []byte, st *FrameState) (int64, error) {
	obj, opts, err := st.locate(location)
	if err != nil {
		return 0, err
	}
	return value.Integer(VoidType(), obj, opts) // untyped: the first 8 bytes
}

// frameContext is the expr.Context of a FrameState.
type frameContext struct{ st *FrameState }

func (c frameContext) Reg(r arch.Reg) (uint64, bool) { return c.st.Regs.Get(r) }
func (c frameContext) ReadMemory(addr uint64, size int) (uint64, error) {
	return value.Read(c.st.Mem, addr, size)
}
func (c frameContext) CFA() (uint64, bool) { return c.st.CFA, c.st.CFA != 0 }
func (c frameContext) FrameBase() (uint64, bool) {
	if c.st.HasFrameBase {
		return c.st.FrameBase, true
	}
	return c.st.CFA, c.st.CFA != 0
}
