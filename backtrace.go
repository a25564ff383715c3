package elfimage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/frame"
)

// Memory reads the memory a backtrace walks: a live stack, a copy of one,
// or another process's memory.
type Memory interface {
	// ReadUint64 returns the 8-byte little-endian word at addr, or an
	// error when addr is not readable.
	ReadUint64(addr uint64) (uint64, error)
}

// Frame is one frame of a [Backtrace], innermost first.
type Frame struct {
	// PC is the run-time pc: the interrupted instruction for the first
	// frame, a return address for the others.
	PC uint64
	// CFA is the frame's canonical frame address (DWARF 5 section 6.4),
	// the value of SP in the caller before the call instruction.
	CFA uint64
	// Image is the image holding PC, nil when PC is in none.
	Image *Image
	// Proc, Pos and Args describe the code at PC (at PC-1 for return
	// addresses, so a call at the end of a procedure is attributed to
	// it). Err says why any of them is missing.
	Proc Procedure
	Pos  Position
	Args []Arg
	Err  error
}

// Arg is the value of a formal parameter in a frame, read through its
// DWARF location. Err is set when the value could not be read.
type Arg struct {
	Name  string
	Value int64
	Err   error
}

// ErrOutermost ends a walk normally: the frame's return-address rule is
// DW_CFA_undefined, the convention for the outermost frame.
var ErrOutermost = errors.New("elfimage: outermost frame")

// cfiState of an image: its .eh_frame finder, built on first use.
type unwindState struct {
	once   sync.Once
	finder *frame.Finder
	err    error
}

func (im *Image) finder() (*frame.Finder, error) {
	s := &im.debug.unwind
	s.once.Do(func() {
		secs, err := im.Sections()
		if err != nil {
			s.err = err
			return
		}
		var eh SectionHeader
		for _, sh := range secs {
			if sh.Name == ".eh_frame" {
				eh = sh
			}
		}
		if eh.Name == "" {
			s.err = fmt.Errorf("elfimage: %s: section %q: %w", im.path, ".eh_frame", ErrNoSection)
			return
		}
		data := im.data[eh.Offset : eh.Offset+eh.Size]
		s.finder, s.err = frame.NewFinder(data, eh.Addr, im.EHFrameHdr(), im.EHFrameHdrAddr(),
			binary.LittleEndian, uint8(im.arch.PtrSize))
	})
	return s.finder, s.err
}

// BacktraceOptions tunes [Backtrace].
type BacktraceOptions struct {
	// Max is the most frames to return; 0 means 256.
	Max int
	// AtCall says the registers were captured at a call instruction, so
	// the first pc is a return address like every other frame's and is
	// attributed to the instruction before it.
	AtCall bool
}

// Backtrace walks the stack from the registers regs (indexed by DWARF
// register number, arch.X86_64 numbering, the pc at index arch.X86_64_RA;
// at least 17 values) using the call frame information of the open images
// that hold each pc, and describes every frame: procedure, source
// position, and argument values read through their DWARF locations. It
// stops at the outermost frame (return address rule undefined), after
// opts.Max frames, or at the first pc outside every image or without CFI, which it
// returns as the error together with the frames so far.
func Backtrace(regs []uint64, mem Memory, opts BacktraceOptions) ([]Frame, error) {
	max := opts.Max
	if max == 0 {
		max = 256
	}
	var cur [17]uint64
	if len(regs) < len(cur) {
		return nil, fmt.Errorf("elfimage: backtrace: %d registers, want %d", len(regs), len(cur))
	}
	copy(cur[:], regs)
	var frames []Frame
	var exec frame.Exec
	var row frame.Row
	var fde frame.ParsedFDE
	for i := 0; i < max; i++ {
		pc := cur[16]
		lookup := pc
		if i > 0 || opts.AtCall {
			lookup-- // a return address may be just past the procedure
		}
		im, err := Lookup(uintptr(lookup))
		if err != nil {
			return frames, fmt.Errorf("elfimage: backtrace: frame %d: pc %#x: %w", i, pc, err)
		}
		f := Frame{PC: pc, Image: im}
		addr := im.LinkAddr(uintptr(lookup))
		fi, err := im.finder()
		if err == nil {
			err = fi.FindFDE(addr, &fde)
		}
		if err == nil {
			err = exec.RowAt(&fde, addr, &row)
		}
		if err != nil {
			return frames, fmt.Errorf("elfimage: backtrace: frame %d: pc %#x: %w", i, pc, err)
		}
		if row.CFA.Kind != frame.RuleCFA || int(row.CFA.Reg) >= len(cur) {
			return frames, fmt.Errorf("elfimage: backtrace: frame %d: pc %#x: unsupported CFA rule %v", i, pc, row.CFA.Kind)
		}
		f.CFA = uint64(int64(cur[row.CFA.Reg]) + row.CFA.Offset)
		f.describe(im, addr, mem)
		frames = append(frames, f)

		// The caller's registers.
		next := cur
		next[7] = f.CFA // the caller's SP is the CFA (x86-64 psABI)
		ra := row.Rule(16)
		if ra.Kind == frame.RuleUndefined {
			return frames, nil
		}
		for j := 0; j < row.NumRules(); j++ {
			reg, rule := row.RuleAt(j)
			if int(reg) >= len(next) {
				continue
			}
			switch rule.Kind {
			case frame.RuleOffset:
				v, err := mem.ReadUint64(uint64(int64(f.CFA) + rule.Offset))
				if err != nil {
					return frames, fmt.Errorf("elfimage: backtrace: frame %d: reading saved %s: %w", i, im.arch.RegName(reg), err)
				}
				next[reg] = v
			case frame.RuleValOffset:
				next[reg] = uint64(int64(f.CFA) + rule.Offset)
			case frame.RuleRegister:
				if int(rule.Reg) < len(cur) {
					next[reg] = cur[rule.Reg]
				}
			case frame.RuleUndefined:
				next[reg] = 0
			case frame.RuleSameValue, frame.RuleUnspecified:
			default:
				return frames, fmt.Errorf("elfimage: backtrace: frame %d: unsupported rule %v for %s", i, rule.Kind, im.arch.RegName(reg))
			}
		}
		if next[16] == 0 {
			return frames, nil
		}
		cur = next
	}
	return frames, nil
}

// describe fills in the procedure, position and arguments of f from the
// image's debug information.
func (f *Frame) describe(im *Image, addr uint64, mem Memory) {
	var errs []error
	p, err := im.ProcedureAt(addr)
	if err != nil {
		errs = append(errs, err)
	}
	f.Proc = p
	pos, err := im.PositionAt(addr)
	if err != nil {
		errs = append(errs, err)
	}
	f.Pos = pos
	params, err := im.ParamsAt(addr)
	if err != nil {
		errs = append(errs, err)
	}
	for _, prm := range params {
		a := Arg{Name: prm.Name}
		a.Value, a.Err = evalFrameBaseSlot(prm.Location, f.CFA, mem)
		f.Args = append(f.Args, a)
	}
	f.Err = errors.Join(errs...)
}

// evalFrameBaseSlot reads a value whose location is DW_OP_fbreg(N) with
// the frame base DW_OP_call_frame_cfa, the form the linker's model
// documents for parameters.
func evalFrameBaseSlot(loc []byte, cfa uint64, mem Memory) (int64, error) {
	if len(loc) == 0 {
		return 0, errors.New("no location")
	}
	if dwarf.Op(loc[0]) != dwarf.DW_OP_fbreg {
		return 0, fmt.Errorf("unsupported location %v", dwarf.Op(loc[0]))
	}
	off, n := dwarf.Sleb128(loc[1:])
	if n == 0 || 1+n != len(loc) {
		return 0, errors.New("malformed DW_OP_fbreg")
	}
	v, err := mem.ReadUint64(uint64(int64(cfa) + off))
	return int64(v), err
}
