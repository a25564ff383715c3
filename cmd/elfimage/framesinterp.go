package main

import (
	"bufio"
	"debug/elf"
	"fmt"
	"io"
	"sort"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/elfobj"
)

// dumpFramesInterp prints the call frame table of every CIE and FDE in the
// .eh_frame and .debug_frame sections of any ELF file (ours or another
// producer's), in the layout of readelf --debug-dump=frames-interp: per
// entry a header line, the register columns and one row per location,
// rules spelled "rsp+8" (CFA), "c-16" (saved at CFA-16), "v+8" (value
// CFA+8), "u" (undefined or unspecified), "s" (same value), a register
// name, "exp" and "vexp". The file is read with package elfobj:
// compressed sections (zlib, zstd) are decompressed and a relocatable
// object's sections relocated. Registers have binutils' names
// (arch.DWARFRegName); addresses and entry lengths are 8 hex digits in
// an ELF32 file, 16 in an ELF64 one. A file with neither section prints
// nothing, as readelf.
func dumpFramesInterp(w io.Writer, path string) error {
	f, err := elfobj.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	addrSize := uint8(8)
	if f.Class == elf.ELFCLASS32 {
		addrSize = 4
	}
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	// In section header order, as readelf.
	for i := range f.Sections {
		name := f.Sections[i].Name
		if (name != ".eh_frame" && name != ".debug_frame") || f.Sections[i].Type == elf.SHT_NOBITS || f.FindSection(name) != i {
			continue
		}
		data, err := f.Relocated(i)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		var sec *frame.Section
		if name == ".eh_frame" {
			sec = frame.NewEHFrame(data, f.Sections[i].Addr, f.ByteOrder, addrSize)
		} else {
			sec = frame.NewDebugFrame(data, f.ByteOrder, addrSize)
		}
		if err := printFramesInterp(bw, sec, f.Machine, addrSize); err != nil {
			return err
		}
	}
	return nil
}

// printFramesInterp prints one section; see dumpFramesInterp.
func printFramesInterp(w io.Writer, sec *frame.Section, m elf.Machine, addrSize uint8) error {
	fmt.Fprintf(w, "Contents of the %s section:\n\n\n", sec.Name())
	var e frame.Exec
	var row frame.Row
	var ferr error
	isEH := sec.IsEHFrame()
	addrFmt := "%016x"
	if addrSize == 4 {
		addrFmt = "%08x"
	}
	var end uint64 // end of the last entry
	err := sec.Entries(func(c *frame.ParsedCIE, f *frame.ParsedFDE) bool {
		if c != nil {
			end = c.End
			id := uint64(0)
			if !isEH {
				id = 0xffffffff
				if c.Format == dwarf.Format64 {
					id = ^uint64(0)
				}
			}
			fmt.Fprintf(w, "%08x "+addrFmt+" "+idFmt(c.Format)+" CIE %q cf=%d df=%d ra=%d\n", c.Offset, entryLength(c.Offset, c.End, c.Format), id, c.Augmentation, c.CodeAlign, c.DataAlign, c.RA)
			if err := e.InitialRow(sec, c, &row); err != nil {
				ferr = err
				return false
			}
			if !allNops(sec, c, nil) {
				printTable(w, []frame.Row{row}, c.RA, m, addrFmt)
			}
			fmt.Fprintln(w)
			return true
		}
		end = f.End
		id := f.CIE.Offset
		if isEH {
			idOff := f.Offset + 4
			if f.CIE.Format == dwarf.Format64 {
				idOff += 8
			}
			id = idOff - f.CIE.Offset
		}
		fmt.Fprintf(w, "%08x "+addrFmt+" "+idFmt(f.CIE.Format)+" FDE cie=%08x pc="+addrFmt+".."+addrFmt+"\n", f.Offset, entryLength(f.Offset, f.End, f.CIE.Format), id, f.CIE.Offset, f.Start, f.Start+f.Size)
		rows, err := frame.Table(f)
		if err != nil {
			ferr = err
			return false
		}
		if !allNops(sec, nil, f) {
			printTable(w, rows, f.CIE.RA, m, addrFmt)
		}
		fmt.Fprintln(w)
		return true
	})
	if err == nil {
		err = ferr
	}
	if err == nil && isEH {
		if k, _, kerr := sec.EntryAt(end); kerr == nil && k == frame.EntryTerminator {
			fmt.Fprintf(w, "%08x ZERO terminator\n\n\n", end)
		}
	}
	return err
}

// idFmt is the format of the CIE id or CIE pointer field.
func idFmt(f dwarf.Format) string {
	if f == dwarf.Format64 {
		return "%016x"
	}
	return "%08x"
}

// entryLength is the value of an entry's length field.
func entryLength(off, end uint64, f dwarf.Format) uint64 {
	if f == dwarf.Format64 {
		return end - off - 12
	}
	return end - off - 4
}

// allNops reports whether the entry's instructions are all DW_CFA_nop
// (readelf prints no table for such an entry).
func allNops(sec *frame.Section, c *frame.ParsedCIE, f *frame.ParsedFDE) bool {
	ins, err := sec.DecodeInsns(c, f)
	if err != nil {
		return false
	}
	for _, d := range ins {
		if d.Op != frame.OpNop {
			return false
		}
	}
	return true
}

// printTable prints the columns (every register some row has a rule for,
// in number order, the return-address column as "ra") and the rows.
func printTable(w io.Writer, rows []frame.Row, ra arch.Reg, m elf.Machine, addrFmt string) {
	regName := func(r arch.Reg) string { n, _ := arch.DWARFRegName(m, r); return n }
	seen := map[arch.Reg]bool{}
	for i := range rows {
		for j := 0; j < rows[i].NumRules(); j++ {
			r, _ := rows[i].RuleAt(j)
			seen[r] = true
		}
	}
	cols := make([]arch.Reg, 0, len(seen))
	for r := range seen {
		cols = append(cols, r)
	}
	sort.Slice(cols, func(i, j int) bool { return cols[i] < cols[j] })
	// A register rule names the register by number and name, as readelf.
	regRule := func(r arch.Reg) string {
		if name, named := arch.DWARFRegName(m, r); named {
			return fmt.Sprintf("r%d (%s)", r, name)
		}
		return fmt.Sprintf("r%d", r)
	}
	name := func(r arch.Reg) string {
		if r == ra {
			return "ra"
		}
		return regName(r)
	}
	if addrFmt == "%08x" {
		fmt.Fprint(w, "   LOC   CFA      ")
	} else {
		fmt.Fprint(w, "   LOC           CFA      ")
	}
	for _, r := range cols {
		fmt.Fprintf(w, "%-5s ", name(r))
	}
	fmt.Fprintln(w)
	for i := range rows {
		r := &rows[i]
		fmt.Fprintf(w, addrFmt+" %-8s ", r.Loc, r.CFA.Format(regName))
		for _, c := range cols {
			fmt.Fprintf(w, "%-5s ", r.Rule(c).Format(regRule))
		}
		fmt.Fprintln(w)
	}
}
