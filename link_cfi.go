package elfimage

import (
	"errors"
	"fmt"
	"strings"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/frame"
)

// cfiState carries the call frame information of a link between the
// reserve phase (sizes) and the write phase (bytes at final addresses).
type cfiState struct {
	cie  frame.CIE
	fdes []frame.FDE
	eh   *frame.DeferredEHFrame // .eh_frame, its FDE addresses to be put
}

// newCFI builds one FDE per procedure on the architecture's standard CIE
// and encodes .eh_frame once, before any address is known: its size does
// not depend on addresses (every pointer is pc-relative sdata4), and the
// write phase puts the FDEs' addresses in (frame.DeferredEHFrame).
func (l *linker) newCFI() (*cfiState, error) {
	c := &cfiState{cie: frame.StandardCIE(l.a), fdes: make([]frame.FDE, len(l.m.Procs))}
	signal := frame.StandardCIE(l.a)
	signal.Signal = true
	for i, p := range l.m.Procs {
		if p == nil { // checkModule reports it; newCFI may run beside it
			return nil, &LinkError{"module", fmt.Sprintf("%s is nil", objectAt(symProc, i))}
		}
		// DW_CFA_restore_state pops the rules DW_CFA_remember_state
		// pushed (DWARF 5 section 6.4.2.4): popping an empty stack is
		// undefined, and readers differ.
		depth := 0
		for j, in := range p.CFI {
			if err := l.checkInsn(in, len(p.Code)); err != nil {
				return nil, &LinkError{"proc " + p.Name, fmt.Sprintf("CFI instruction %d (%v at pc %#x): %v", j, in.Op, in.PC, err)}
			}
			switch in.Op {
			case frame.OpRememberState:
				depth++
			case frame.OpRestoreState:
				if depth == 0 {
					return nil, &LinkError{"proc " + p.Name, fmt.Sprintf("CFI instruction %d: restore_state without a remember_state before it", j)}
				}
				depth--
			}
		}
		c.fdes[i] = frame.FDE{Start: 0, Size: uint64(len(p.Code)), Insns: p.CFI}
		if p.SignalFrame {
			c.fdes[i].CIE = &signal
		}
	}
	eh, err := frame.EncodeEHFrameDeferred(c.cie, c.fdes, l.enc)
	if err != nil {
		// Name the procedure: encode its FDE alone.
		for i, fde := range c.fdes {
			if _, _, ferr := frame.EncodeEHFrame(c.cie, []frame.FDE{fde}, 0, l.enc); ferr != nil {
				msg := ferr.Error()
				if _, rest, ok := strings.Cut(msg, "FDE 0 "); ok {
					if _, after, ok := strings.Cut(rest, ": "); ok {
						msg = after // the procedure is named; its range is in the model
					}
				}
				return nil, &LinkError{"proc " + l.m.Procs[i].Name, "CFI: " + msg}
			}
		}
		return nil, &LinkError{"module", fmt.Sprintf("call frame information: %v", err)}
	}
	c.eh = eh
	return c, nil
}

// checkInsn checks what the encoder cannot know of a CFI instruction: that
// it takes effect inside the procedure's code ([0, codeLen)) and that its
// registers and expression are the ABI's.
func (l *linker) checkInsn(in frame.Insn, codeLen int) error {
	if in.PC >= uint64(codeLen) {
		return fmt.Errorf("PC is at or past the end of the code (%#x bytes)", codeLen)
	}
	n := l.a.NumDWARFRegs()
	switch in.Op {
	case frame.OpNop, frame.OpRememberState, frame.OpRestoreState, frame.OpArgsSize, frame.OpDefCFAOffset, frame.OpAdvanceLoc, frame.OpNegateRAState:
	case frame.OpDefCFAExpression:
		return l.checkCFIExpr(in.Expr)
	default:
		if int(in.Reg) >= n {
			return fmt.Errorf("Reg %d is outside the %s ABI's registers 0-%d", in.Reg, l.a.Name, n-1)
		}
		if in.Op == frame.OpRegister && int(in.Reg2) >= n {
			return fmt.Errorf("Reg2 %d is outside the %s ABI's registers 0-%d", in.Reg2, l.a.Name, n-1)
		}
		if in.Op == frame.OpExpression || in.Op == frame.OpValExpression {
			return l.checkCFIExpr(in.Expr)
		}
	}
	return nil
}

// checkCFIExpr checks the expression of a CFI instruction.
func (l *linker) checkCFIExpr(code []byte) error {
	if len(code) == 0 {
		return errors.New("empty expression (Expr)")
	}
	if err := l.checkExpr(code); err != nil {
		return fmt.Errorf("expression (Expr): %v", err)
	}
	return nil
}

func (c *cfiState) setAddrs(procAddr []uint64) {
	for i := range c.fdes {
		c.fdes[i].Start = procAddr[i]
	}
}

func (c *cfiState) hdrSize() int { return frame.EHFrameHdrSize(len(c.fdes)) }

// debugFrame encodes the same rows as .debug_frame and returns the
// section offsets of the FDEs' initial_location fields (the section's only
// absolute addresses).
func (c *cfiState) debugFrame(l *linker) (data []byte, addrs []uint64, err error) {
	b, fdeOffsets, err := frame.EncodeDebugFrame(c.cie, c.fdes, l.enc)
	if err != nil {
		return nil, nil, &LinkError{"module", fmt.Sprintf(".debug_frame: %v", err)}
	}
	// An FDE is its initial length (4 bytes, or 12 in the 64-bit format),
	// the CIE pointer (an offset), then initial_location.
	skip := uint64(4 + l.enc.Format.OffsetSize())
	if l.enc.Format == dwarf.Format64 {
		skip += 8
	}
	for _, off := range fdeOffsets {
		addrs = append(addrs, off+skip)
	}
	return b, addrs, nil
}
