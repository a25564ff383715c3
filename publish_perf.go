package elfimage

import (
	"fmt"
	"runtime/debug"
	"slices"

	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/dwarf/line"
	"github.com/elfimage/elfimage/jit/jitdump"
	"github.com/elfimage/elfimage/jit/perfmap"
)

// PerfMapEntries returns one perf map entry per procedure of the image, at
// its run-time address [Base+Start, Base+Start+Size), in address order, for
// [perfmap.Writer.AddBatch]. Images mapped from a file do not need a perf
// map: perf records the file mapping of their text segment and reads
// names and lines from the file itself; the map serves images loaded from
// memory ([Load]).
//
// The entries also name the library's entry routine ([EntryName], in the
// entry image, [EntryImage]), which sits between the image's code and its
// Go caller in every call through native.Call, so that perf's call graphs
// name it; announcing it once per image is harmless (the lines are
// identical). Errors: those of [Image.Procedures]. Cost: one allocation of
// the entries.
func (im *Image) PerfMapEntries() ([]perfmap.Entry, error) {
	out, err := im.perfMapEntries(nil)
	if err != nil {
		return nil, err
	}
	if ent := entryImg.Load(); ent != nil && ent != im {
		if out, err = ent.perfMapEntries(out); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(a, b perfmap.Entry) int { return cmpUint(a.Start, b.Start) })
	return out, nil
}

// perfMapEntries appends the entries of im's procedures to out.
func (im *Image) perfMapEntries(out []perfmap.Entry) ([]perfmap.Entry, error) {
	procs, err := im.Procedures()
	if err != nil {
		return nil, err
	}
	base := uint64(im.Base())
	for _, p := range procs {
		out = append(out, perfmap.Entry{Start: base + p.Start, Size: p.Size, Name: p.Name})
	}
	return out, nil
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// JitdumpFunctions returns the image's procedures as jitdump functions, in
// increasing address order, for [jitdump.Writer.Load]: name, run-time
// address, the code as it runs (aliasing the image), one line entry per
// line-table row (the last row at an address wins, rows with line 0 are
// skipped, file names as the line table gives them), and the CFI of the
// procedure decoded from the image's own .eh_frame (the instructions
// after the CIE's initial ones, with the CIE's alignment factors,
// return-address column and initial rules), so that perf's synthesized
// ELF files unwind exactly as the image does.
//
// Load them in the order returned: perf maps each function as its code
// plus the unwinding data's mapped size, and a later load of a higher
// address trims the earlier mapping, so loading in address order keeps
// every sample in the right function even though the image packs its
// procedures tightly.
//
// The functions also hold the library's entry routine ([EntryName], from
// the entry image, [EntryImage]), in address order with the others: it
// sits between the image's code and its Go caller in every call through
// native.Call, and perf needs its name and CFI for call graphs through it.
// Loading it once per image is harmless (perf keeps the latest load of an
// address).
//
// Errors: those of [Image.Procedures], [Image.LineTable] and the CFI
// decoder (a procedure without an FDE is an error: every elfimage
// procedure has one). Cost: linear in the procedures, rows and CFI.
func (im *Image) JitdumpFunctions() ([]jitdump.Function, error) {
	out, err := im.jitdumpFunctions(nil)
	if err != nil {
		return nil, err
	}
	if ent := entryImg.Load(); ent != nil && ent != im {
		if out, err = ent.jitdumpFunctions(out); err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(out, func(a, b jitdump.Function) int { return cmpUint(a.Addr, b.Addr) })
	return out, nil
}

// jitdumpFunctions appends the functions of im's procedures to out.
func (im *Image) jitdumpFunctions(out []jitdump.Function) (_ []jitdump.Function, err error) {
	defer im.guardFaults(&err, debug.SetPanicOnFault(true))
	procs, err := im.Procedures()
	if err != nil {
		return nil, err
	}
	tab, err := im.lineTable()
	if err != nil {
		return nil, err
	}
	src, err := im.unwindSource()
	if err != nil {
		return nil, err
	}
	slices.SortFunc(procs, func(a, b Procedure) int { return cmpUint(a.Start, b.Start) })
	base := uint64(im.Base())
	var cies cieCache
	for _, p := range procs {
		f := jitdump.Function{Name: p.Name, Addr: base + p.Start, Code: im.data[p.Start : p.Start+p.Size : p.Start+p.Size]}
		// Sequences are sorted by Start: visit those starting in the
		// procedure.
		first, _ := slices.BinarySearchFunc(tab.Sequences, p.Start, func(s line.DecodedSequence, a uint64) int { return cmpUint(s.Start, a) })
		for _, seq := range tab.Sequences[first:] {
			if seq.Start >= p.Start+p.Size {
				break
			}
			for _, r := range seq.Rows {
				if r.Address >= p.Start+p.Size || r.Line == 0 {
					continue
				}
				file, ok := tab.File(r.File)
				if !ok {
					continue
				}
				l := jitdump.Line{Offset: r.Address - p.Start, Line: uint32(r.Line), File: file.Path}
				if n := len(f.Lines); n > 0 && f.Lines[n-1].Offset == l.Offset {
					f.Lines[n-1] = l
					continue
				}
				f.Lines = append(f.Lines, l)
			}
		}
		var fde frame.ParsedFDE
		if err := src.FindFDE(base+p.Start, &fde); err != nil {
			return nil, fmt.Errorf("elfimage: %s: procedure %s: %w", im.path, p.Name, err)
		}
		cie, insns, err := cies.semantic(&fde)
		if err != nil {
			return nil, fmt.Errorf("elfimage: %s: procedure %s: %w", im.path, p.Name, err)
		}
		f.CFI, f.CIE = insns, cie
		out = append(out, f)
	}
	return out, nil
}

// cieCache keeps the CIEs already turned back into frame.CIE, by
// section offset (an image has one or two).
type cieCache map[uint64]*frame.CIE

// semantic turns a parsed FDE back into the CIE and instructions the
// frame encoder takes.
func (c *cieCache) semantic(fde *frame.ParsedFDE) (*frame.CIE, []frame.Insn, error) {
	s := fde.Section()
	cie := (*c)[fde.CIE.Offset]
	if cie == nil {
		initial, err := s.DecodeInsns(&fde.CIE, nil)
		if err != nil {
			return nil, nil, err
		}
		cie = &frame.CIE{CodeAlign: fde.CIE.CodeAlign, DataAlign: fde.CIE.DataAlign, RA: fde.CIE.RA, Signal: fde.CIE.Signal}
		for _, d := range initial {
			if d.Op != frame.OpNop {
				cie.Initial = append(cie.Initial, d.Insn)
			}
		}
		if *c == nil {
			*c = cieCache{}
		}
		(*c)[fde.CIE.Offset] = cie
	}
	decoded, err := s.DecodeInsns(&fde.CIE, fde)
	if err != nil {
		return nil, nil, err
	}
	insns := make([]frame.Insn, 0, len(decoded))
	for _, d := range decoded {
		if d.Op != frame.OpAdvanceLoc && d.Op != frame.OpNop {
			insns = append(insns, d.Insn)
		}
	}
	return cie, insns, nil
}
