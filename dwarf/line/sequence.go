package line

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/formaterr"
)

// ErrNotCovered is returned by [Reader.SequenceRow] when the sequence it
// ran does not cover the address. Match it with errors.Is.
var ErrNotCovered = errors.New("line: address not covered by the sequence")

// SequenceRow runs only the sequence that starts at offset seqOff of
// .debug_line (an offset [Program.EncodeOffsets] reports: normally the
// sequence's DW_LNE_set_address) up to its DW_LNE_end_sequence, and
// returns the row that holds for addr: the last row whose address is at
// most addr before the next row's (or the end_sequence row's) address. The
// state machine starts from the registers of section 6.2.2, table 6.4, as
// at the start of any sequence. The row's File indexes [Reader.Files].
//
// It returns [ErrNotCovered] (unwrapped, so that a miss costs nothing)
// when addr is before the sequence's first row or at or after its end,
// and a *formaterr.Error when seqOff is outside the unit's program
// [ProgramOffset, End), when an opcode is malformed or when the unit ends
// before DW_LNE_end_sequence.
//
// The reader r itself is not modified (the run uses a copy of its cursor
// and registers), so SequenceRow may be called concurrently from several
// goroutines on one Reader as long as nobody calls [Reader.Next] at the
// same time. Cost: linear in the sequence's bytes, no header parsing, no
// allocation (except on errors and for DW_LNE_define_file).
func (r *Reader) SequenceRow(seqOff, addr uint64) (Row, error) {
	h := &r.hdr
	if seqOff < h.ProgramOffset || seqOff >= h.End {
		return Row{}, &formaterr.Error{Source: secLine, Offset: seqOff, Field: "sequence offset", Msg: fmt.Sprintf("offset %#x outside the line program [%#x, %#x)", seqOff, h.ProgramOffset, h.End)}
	}
	var run Reader
	run.hdr, run.rangeMul = r.hdr, r.rangeMul
	run.lineS = r.lineS
	run.tabs = r.tabs // a DW_LNE_define_file builds run's tables, not r's
	order := r.lineS.Order
	if order == nil {
		order = binary.LittleEndian
	}
	run.b = dwarf.MakeBuf(secLine, order, r.lineS.Line)
	// Clip the file list so that a DW_LNE_define_file in the run appends
	// to a copy, never to r's backing array.
	run.files = r.files[:len(r.files):len(r.files)]
	run.b.SetEnd(int(h.End))
	run.b.Seek(seqOff, "sequence offset")
	run.reset()
	var prev, row Row
	have := false
	for {
		err := run.Next(&row)
		if err == io.EOF {
			return Row{}, &formaterr.Error{Source: secLine, Offset: seqOff, Field: "DW_LNE_end_sequence", Msg: "the unit ends before the sequence does"}
		}
		if err != nil {
			return Row{}, err
		}
		if have && prev.Address <= addr && addr < row.Address {
			return prev, nil
		}
		if row.EndSequence {
			return Row{}, ErrNotCovered
		}
		prev, have = row, true
	}
}
