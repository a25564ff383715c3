package main

import (
	"bufio"
	"debug/elf"
	"fmt"
	"io"
	"slices"
	"strconv"

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

// printFramesInterp prints one section; see dumpFramesInterp. Rows are
// computed in place (frame.Exec.Rows), twice per entry: once for the
// set of register columns, once to print; each line is formatted into
// one reused buffer, without package fmt.
func printFramesInterp(w io.Writer, sec *frame.Section, m elf.Machine, addrSize uint8) error {
	fmt.Fprintf(w, "Contents of the %s section:\n\n\n", sec.Name())
	p := &tablePrinter{w: w, names: newRegNames(m), addrWidth: 16}
	if addrSize == 4 {
		p.addrWidth = 8
	}
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
			if err := p.e.InitialRow(sec, c, &p.row); err != nil {
				ferr = err
				return false
			}
			if !allNops(c.Initial) {
				p.cols = appendColumns(p.cols[:0], &p.row)
				p.header(c.RA)
				p.printRow(&p.row)
			}
			w.Write(newline)
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
		b := appendHex(p.buf[:0], f.Offset, 8)
		b = append(b, ' ')
		b = appendHex(b, entryLength(f.Offset, f.End, f.CIE.Format), p.addrWidth)
		b = append(b, ' ')
		b = appendHex(b, id, idWidth(f.CIE.Format))
		b = append(b, " FDE cie="...)
		b = appendHex(b, f.CIE.Offset, 8)
		b = append(b, " pc="...)
		b = appendHex(b, f.Start, p.addrWidth)
		b = append(b, ".."...)
		b = appendHex(b, f.Start+f.Size, p.addrWidth)
		b = append(b, '\n')
		p.buf = b
		w.Write(b)
		if !allNops(f.Insns) {
			p.cols = p.cols[:0]
			if err := p.e.Rows(f, &p.row, func(r *frame.Row) bool {
				p.cols = appendColumns(p.cols, r)
				return true
			}); err != nil {
				ferr = err
				return false
			}
			p.header(f.CIE.RA)
			if err := p.e.Rows(f, &p.row, func(r *frame.Row) bool {
				p.printRow(r)
				return true
			}); err != nil {
				ferr = err
				return false
			}
		} else if err := p.e.Rows(f, &p.row, func(*frame.Row) bool { return true }); err != nil {
			ferr = err // readelf prints no rows, but the CIE's instructions may still be bad
			return false
		}
		w.Write(newline)
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

var newline = []byte{'\n'}

// tablePrinter holds what printing one section reuses: the executor, the
// row, the columns and the line buffer.
type tablePrinter struct {
	w         io.Writer
	names     *regNames
	addrWidth int
	e         frame.Exec
	row       frame.Row
	cols      []arch.Reg // the entry's register columns, sorted
	ra        arch.Reg
	buf       []byte
}

// appendColumns adds the registers row has rules for to cols, once each,
// sorted by number.
func appendColumns(cols []arch.Reg, row *frame.Row) []arch.Reg {
	for j := 0; j < row.NumRules(); j++ {
		r, _ := row.RuleAt(j)
		i, found := slices.BinarySearch(cols, r)
		if !found {
			cols = slices.Insert(cols, i, r)
		}
	}
	return cols
}

// header prints the column headers: LOC, CFA, and each register column by
// name, the return-address column as "ra".
func (p *tablePrinter) header(ra arch.Reg) {
	p.ra = ra
	b := p.buf[:0]
	if p.addrWidth == 8 {
		b = append(b, "   LOC   CFA      "...)
	} else {
		b = append(b, "   LOC           CFA      "...)
	}
	for _, r := range p.cols {
		n := "ra"
		if r != ra {
			n = p.names.name(r)
		}
		b = appendPadded(b, n, 5)
		b = append(b, ' ')
	}
	b = append(b, '\n')
	p.buf = b
	p.w.Write(b)
}

// printRow prints one row: its location, the CFA rule (8 wide) and the
// rule of each column (5 wide), as readelf.
func (p *tablePrinter) printRow(r *frame.Row) {
	b := appendHex(p.buf[:0], r.Loc, p.addrWidth)
	b = append(b, ' ')
	n := len(b)
	b = p.appendRule(b, r.CFA)
	b = pad(b, n+8)
	b = append(b, ' ')
	for _, c := range p.cols {
		n := len(b)
		b = p.appendRule(b, r.Rule(c))
		b = pad(b, n+5)
		b = append(b, ' ')
	}
	b = append(b, '\n')
	p.buf = b
	p.w.Write(b)
}

// appendRule appends rule as frame.Rule.Format spells it, with the CFA
// register by name and a register rule's register as "r<N> (name)" (or
// "r<N>" for a number binutils leaves unnamed).
func (p *tablePrinter) appendRule(b []byte, rule frame.Rule) []byte {
	switch rule.Kind {
	case frame.RuleUnspecified, frame.RuleUndefined:
		return append(b, 'u')
	case frame.RuleSameValue:
		return append(b, 's')
	case frame.RuleOffset:
		return appendSigned(append(b, 'c'), rule.Offset)
	case frame.RuleValOffset:
		return appendSigned(append(b, 'v'), rule.Offset)
	case frame.RuleRegister:
		return append(b, p.names.rule(rule.Reg)...)
	case frame.RuleExpression, frame.RuleCFAExpression:
		return append(b, "exp"...)
	case frame.RuleValExpression:
		return append(b, "vexp"...)
	case frame.RuleCFA:
		return appendSigned(append(b, p.names.name(rule.Reg)...), rule.Offset)
	}
	return append(b, "n/a"...)
}

// appendSigned appends v with its sign, as %+d.
func appendSigned(b []byte, v int64) []byte {
	if v >= 0 {
		b = append(b, '+')
	}
	return strconv.AppendInt(b, v, 10)
}

// appendHex appends v in lower-case hex, zero-padded to width digits.
func appendHex(b []byte, v uint64, width int) []byte {
	var d [16]byte
	i := len(d)
	for v != 0 || i == len(d) {
		i--
		d[i] = "0123456789abcdef"[v&15]
		v >>= 4
	}
	for n := len(d) - i; n < width; n++ {
		b = append(b, '0')
	}
	return append(b, d[i:]...)
}

// appendPadded appends s, then spaces up to width bytes (as %-<width>s).
func appendPadded(b []byte, s string, width int) []byte {
	n := len(b)
	return pad(append(b, s...), n+width)
}

// pad appends spaces until b is n bytes long.
func pad(b []byte, n int) []byte {
	for len(b) < n {
		b = append(b, ' ')
	}
	return b
}

// regNames caches a machine's register names (arch.DWARFRegName) as
// readelf prints them in a column header or CFA rule (name) and in a
// register rule (rule).
type regNames struct {
	m     elf.Machine
	names map[arch.Reg][2]string
}

func newRegNames(m elf.Machine) *regNames {
	return &regNames{m: m, names: map[arch.Reg][2]string{}}
}

func (n *regNames) get(r arch.Reg) [2]string {
	s, ok := n.names[r]
	if !ok {
		name, named := arch.DWARFRegName(n.m, r)
		rule := fmt.Sprintf("r%d", r)
		if named {
			rule = fmt.Sprintf("r%d (%s)", r, name)
		}
		s = [2]string{name, rule}
		n.names[r] = s
	}
	return s
}

func (n *regNames) name(r arch.Reg) string { return n.get(r)[0] }
func (n *regNames) rule(r arch.Reg) string { return n.get(r)[1] }

// idFmt is the format of the CIE id or CIE pointer field.
func idFmt(f dwarf.Format) string {
	if f == dwarf.Format64 {
		return "%016x"
	}
	return "%08x"
}

// idWidth is the number of hex digits of the CIE id or CIE pointer field.
func idWidth(f dwarf.Format) int {
	if f == dwarf.Format64 {
		return 16
	}
	return 8
}

// entryLength is the value of an entry's length field.
func entryLength(off, end uint64, f dwarf.Format) uint64 {
	if f == dwarf.Format64 {
		return end - off - 12
	}
	return end - off - 4
}

// allNops reports whether the instructions are all DW_CFA_nop (readelf
// prints no table for such an entry): every byte is 0, since DW_CFA_nop
// is the one instruction whose opcode byte is 0 and the first non-zero
// byte after nops is an opcode.
func allNops(insns []byte) bool {
	for _, c := range insns {
		if c != 0 {
			return false
		}
	}
	return true
}
