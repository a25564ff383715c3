package publish

import (
	"fmt"
	"runtime/debug"
	"slices"

	"github.com/elfimage/elfimage"

	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/dwarf/line"
	"github.com/elfimage/elfimage/jit/jitdump"
	"github.com/elfimage/elfimage/jit/perfmap"
)

// PerfMapEntries returns one perf map entry per procedure of the image im, at
// its run-time address [Base+Start, Base+Start+Size), in address order, for
// [perfmap.Writer.AddBatch]. Images mapped from a file do not need a perf
// map: perf records the file mapping of their text segment and reads
// names and lines from the file itself; the map serves images loaded from
// memory (elfimage.Load).
//
// The entries also name the library's entry routine (elfimage.EntryName,
// in the entry image, [elfimage.EntryImage]), which sits between the image's code and its
// Go caller in every call through native.Call, so that perf's call graphs
// name it; announcing it once per image is harmless (the lines are
// identical). Errors: those of [elfimage.Image.Procedures]. Cost: one
// allocation of the entries.
func PerfMapEntries(im *elfimage.Image) ([]perfmap.Entry, error) {
	out, err := perfMapEntries(im, nil)
	if err != nil {
		return nil, err
	}
	if ent := entryImage(); ent != nil && ent != im {
		if out, err = perfMapEntries(ent, out); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(a, b perfmap.Entry) int { return cmpUint(a.Start, b.Start) })
	return out, nil
}

// entryImage returns the entry image, or nil where there is none.
func entryImage() *elfimage.Image {
	ent, err := elfimage.EntryImage()
	if err != nil {
		return nil
	}
	return ent
}

// perfMapEntries appends the entries of im's procedures to out.
func perfMapEntries(im *elfimage.Image, out []perfmap.Entry) ([]perfmap.Entry, error) {
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

// JitdumpFunctions returns the procedures of the image im as jitdump functions, in
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
// The functions also hold the library's entry routine (elfimage.EntryName,
// from the entry image, [elfimage.EntryImage]), in address order with the others: it
// sits between the image's code and its Go caller in every call through
// native.Call, and perf needs its name and CFI for call graphs through it.
// Loading it once per image is harmless (perf keeps the latest load of an
// address).
//
// Errors: those of [elfimage.Image.Procedures], [elfimage.Image.LineTable]
// and the CFI decoder (a procedure without an FDE is an error: every
// elfimage procedure has one), elfimage.ErrFault (wrapped) when the
// mapped file was truncated. Cost: linear in the procedures, rows and CFI.
func JitdumpFunctions(im *elfimage.Image) ([]jitdump.Function, error) {
	out, err := jitdumpFunctions(im, nil)
	if err != nil {
		return nil, err
	}
	if ent := entryImage(); ent != nil && ent != im {
		if out, err = jitdumpFunctions(ent, out); err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(out, func(a, b jitdump.Function) int { return cmpUint(a.Addr, b.Addr) })
	return out, nil
}

// guardFaults, deferred with the previous setting of
// debug.SetPanicOnFault, turns a memory fault while reading im (a mapped
// file truncated after loading) into an error wrapping elfimage.ErrFault,
// as the image's own queries do, and restores the setting.
func guardFaults(im *elfimage.Image, err *error, old bool) {
	debug.SetPanicOnFault(old)
	r := recover()
	if r == nil {
		return
	}
	if f, ok := r.(interface{ Addr() uintptr }); ok {
		*err = fmt.Errorf("%w: %s at %#x", elfimage.ErrFault, im.Path(), f.Addr())
		return
	}
	panic(r)
}

// jitdumpFunctions appends the functions of im's procedures to out.
func jitdumpFunctions(im *elfimage.Image, out []jitdump.Function) (_ []jitdump.Function, err error) {
	defer guardFaults(im, &err, debug.SetPanicOnFault(true))
	procs, err := im.Procedures()
	if err != nil {
		return nil, err
	}
	tab, err := im.LineTable()
	if err != nil {
		return nil, err
	}
	slices.SortFunc(procs, func(a, b elfimage.Procedure) int { return cmpUint(a.Start, b.Start) })
	base := uint64(im.Base())
	data := im.Bytes()
	var cies cieCache
	for _, p := range procs {
		f := jitdump.Function{Name: p.Name, Addr: base + p.Start, Code: data[p.Start : p.Start+p.Size : p.Start+p.Size]}
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
		if err := im.FindFDE(base+p.Start, &fde); err != nil {
			return nil, fmt.Errorf("publish: %s: procedure %s: %w", im.Path(), p.Name, err)
		}
		cie, insns, err := cies.semantic(&fde)
		if err != nil {
			return nil, fmt.Errorf("publish: %s: procedure %s: %w", im.Path(), p.Name, err)
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

// PerfMap announces the images to perf through the process's perf map,
// /tmp/perf-PID.map ([perfmap.Default]): the entries of [PerfMapEntries]
// for each image, in one batch per image, in the order given. Call it after
// the images are loaded and before their code runs under `perf record`.
//
// Errors: those of [perfmap.Default], [PerfMapEntries] and
// [perfmap.Writer.AddBatch]; the images before the failing one stay
// announced. Cost: one pass over each image's procedure table and
// O(entries) bytes written.
func PerfMap(images ...*elfimage.Image) error {
	w, err := perfmap.Default()
	if err != nil {
		return err
	}
	for _, im := range images {
		entries, err := PerfMapEntries(im)
		if err != nil {
			return err
		}
		if err := w.AddBatch(entries); err != nil {
			return err
		}
	}
	return nil
}

// Jitdump creates dir/jit-PID.dump ([jitdump.Open]; dir "" means
// [jitdump.DefaultDir]) and loads the functions of [JitdumpFunctions] of
// each image into it, with code, line rows and unwinding information, in
// address order per image. The returned writer must stay open (its first
// page stays mapped) while perf records: close it when the process is done
// with the images. `perf inject --jit` then turns the dump into per-function
// ELF files perf report reads.
//
// Errors: those of [jitdump.Open], [JitdumpFunctions] and
// [jitdump.Writer.Load]; on error the file is closed and nothing is
// returned. Cost: linear in the images' procedures, rows and CFI, plus the
// code copied into the file.
func Jitdump(dir string, images ...*elfimage.Image) (*jitdump.Writer, error) {
	w, err := jitdump.Open(dir, nil)
	if err != nil {
		return nil, err
	}
	for _, im := range images {
		fns, err := JitdumpFunctions(im)
		if err == nil {
			for i := range fns {
				if _, err = w.Load(&fns[i]); err != nil {
					break
				}
			}
		}
		if err != nil {
			w.Close()
			return nil, err
		}
	}
	return w, nil
}
