package inspect

import (
	"fmt"
	"io"
	"strings"
)

// The Write functions print the values in the layout of readelf -W
// (columns in its order, numbers in its bases), to be read by people;
// scripts should take the JSON form.

// WriteHeader prints h as readelf -h does.
func WriteHeader(w io.Writer, h Header) {
	fmt.Fprintf(w, "ELF Header:\n")
	for _, kv := range [][2]string{
		{"Class", h.Class}, {"Data", h.Data}, {"Version", fmt.Sprint(h.IdentVersion)}, {"OS/ABI", h.OSABI},
		{"ABI Version", fmt.Sprint(h.ABIVersion)}, {"Type", h.Type}, {"Machine", h.Machine},
		{"Version", fmt.Sprintf("%#x", h.Version)}, {"Entry point address", fmt.Sprintf("%#x", h.Entry)},
		{"Start of program headers", fmt.Sprintf("%d (bytes into file)", h.ProgramHeaderStart)},
		{"Start of section headers", fmt.Sprintf("%d (bytes into file)", h.SectionHeaderStart)},
		{"Flags", fmt.Sprintf("%#x", h.Flags)}, {"Size of this header", fmt.Sprintf("%d (bytes)", h.HeaderSize)},
		{"Size of program headers", fmt.Sprintf("%d (bytes)", h.ProgramHeaderSize)},
		{"Number of program headers", fmt.Sprint(h.ProgramHeaders)},
		{"Size of section headers", fmt.Sprintf("%d (bytes)", h.SectionHeaderSize)},
		{"Number of section headers", fmt.Sprint(h.SectionHeaders)},
		{"Section header string table index", fmt.Sprint(h.SectionNames)},
	} {
		fmt.Fprintf(w, "  %-34s %s\n", kv[0]+":", kv[1])
	}
	fmt.Fprintln(w)
}

func hexw(wide bool) string {
	if wide {
		return "0x%016x"
	}
	return "0x%08x"
}

// WritePrograms prints the program headers and the section to segment
// mapping as readelf -l -W does; wide selects 64-bit address columns.
func WritePrograms(w io.Writer, h Header, ps []Program) {
	wide := h.Class == "ELF64"
	fmt.Fprintf(w, "Program Headers:\n")
	ad := hexw(wide)
	fmt.Fprintf(w, "  %-14s %-8s %-*s %-*s %-8s %-8s %-3s %s\n", "Type", "Offset", len(fmt.Sprintf(ad, 0)), "VirtAddr",
		len(fmt.Sprintf(ad, 0)), "PhysAddr", "FileSiz", "MemSiz", "Flg", "Align")
	for _, p := range ps {
		fmt.Fprintf(w, "  %-14s 0x%06x "+ad+" "+ad+" 0x%06x 0x%06x %s %#x\n", p.Type, p.Offset, p.VirtAddr, p.PhysAddr, p.FileSize, p.MemSize, p.Flags, p.Align)
		if p.Type == "INTERP" && h.Interpreter != "" {
			fmt.Fprintf(w, "      [Requesting program interpreter: %s]\n", h.Interpreter)
		}
	}
	if len(ps) > 0 && h.SectionHeaders > 0 {
		fmt.Fprintf(w, "\n Section to Segment mapping:\n  Segment Sections...\n")
		for i, p := range ps {
			fmt.Fprintf(w, "   %02d     %s\n", i, strings.Join(p.Sections, " "))
		}
	}
	fmt.Fprintln(w)
}

// WriteSections prints section headers as readelf -S -W does.
func WriteSections(w io.Writer, h Header, ss []Section) {
	ad := "%016x"
	if h.Class == "ELF32" {
		ad = "%08x"
	}
	fmt.Fprintf(w, "Section Headers:\n")
	fmt.Fprintf(w, "  [Nr] %-17s %-15s %-*s %-6s %-6s ES Flg Lk Inf Al\n", "Name", "Type", len(fmt.Sprintf(ad, 0)), "Address", "Off", "Size")
	for _, s := range ss {
		fmt.Fprintf(w, "  [%2d] %-17s %-15s "+ad+" %06x %06x %02x %3s %2d %3d %2d\n", s.Index, s.Name, s.Type, s.Address, s.Offset, s.Size, s.EntSize, s.Flags, s.Link, s.Info, s.Alignment)
	}
	fmt.Fprintln(w, "Key to Flags: W (write), A (alloc), X (execute), M (merge), S (strings), I (info), L (link order),")
	fmt.Fprintln(w, "  O (extra OS processing required), G (group), T (TLS), C (compressed), R (retain), E (exclude), l (large)")
	fmt.Fprintln(w)
}

// WriteSymbols prints symbol tables as readelf -s -W does.
func WriteSymbols(w io.Writer, h Header, ts []SymbolTable) {
	ad := "%016x"
	if h.Class == "ELF32" {
		ad = "%08x"
	}
	for _, t := range ts {
		fmt.Fprintf(w, "Symbol table '%s' contains %d entries:\n", t.Name, len(t.Symbols))
		fmt.Fprintf(w, "   Num: %-*s  Size Type    Bind   Vis      Ndx Name\n", len(fmt.Sprintf(ad, 0)), "   Value")
		for _, s := range t.Symbols {
			fmt.Fprintf(w, "%6d: "+ad+" %5d %-7s %-6s %-8s %3s %s%s\n", s.Num, s.Value, s.Size, s.Type, s.Bind, s.Visibility, s.Ndx, s.Name, s.Version)
		}
		fmt.Fprintln(w)
	}
}

// WriteNotes prints notes as readelf -n does.
func WriteNotes(w io.Writer, ns []Note) {
	where := "\x00"
	for _, n := range ns {
		if n.Where != where {
			where = n.Where
			fmt.Fprintf(w, "Displaying notes found in: %s\n  %-20s %-10s\tDescription\n", where, "Owner", "Data size")
		}
		fmt.Fprintf(w, "  %-20s 0x%08x\t%s\t    %s\n", n.Owner, n.DataSize, n.Type, n.Description)
	}
	if len(ns) > 0 {
		fmt.Fprintln(w)
	}
}

// WriteDynamic prints dynamic entries as readelf -d does.
func WriteDynamic(w io.Writer, ds []Dyn) {
	if len(ds) == 0 {
		return
	}
	fmt.Fprintf(w, "Dynamic section contains %d entries:\n  %-18s %-20s %s\n", len(ds), "Tag", "Type", "Name/Value")
	for _, d := range ds {
		v := fmt.Sprintf("%#x", d.Value)
		switch d.Tag {
		case "NEEDED":
			v = "Shared library: [" + d.Name + "]"
		case "SONAME":
			v = "Library soname: [" + d.Name + "]"
		case "RPATH":
			v = "Library rpath: [" + d.Name + "]"
		case "RUNPATH":
			v = "Library runpath: [" + d.Name + "]"
		case "PLTRELSZ", "RELASZ", "RELSZ", "RELAENT", "RELENT", "STRSZ", "SYMENT", "INIT_ARRAYSZ", "FINI_ARRAYSZ", "RELRSZ", "RELRENT":
			v = fmt.Sprintf("%d (bytes)", d.Value)
		}
		fmt.Fprintf(w, " 0x%016x %-20s %s\n", d.TagValue, "("+d.Tag+")", v)
	}
	fmt.Fprintln(w)
}

// WriteRelocations prints relocation sections as readelf -r -W does.
func WriteRelocations(w io.Writer, h Header, rs []RelocSection) {
	ad := "%016x"
	if h.Class == "ELF32" {
		ad = "%08x"
	}
	for _, r := range rs {
		if r.Words > 0 {
			fmt.Fprintf(w, "Relocation section '%s' at offset %#x contains %d entries:\n  %d offsets\n", r.Name, r.Offset, r.Words, len(r.RelrOffsets))
			for _, o := range r.RelrOffsets {
				fmt.Fprintf(w, ad+"\n", o)
			}
			fmt.Fprintln(w)
			continue
		}
		fmt.Fprintf(w, "Relocation section '%s' at offset %#x contains %d entries:\n", r.Name, r.Offset, len(r.Entries))
		fmt.Fprintf(w, "    %-*s %-*s %-22s %-*s %s\n", len(fmt.Sprintf(ad, 0)), "Offset", len(fmt.Sprintf(ad, 0)), "Info", "Type",
			len(fmt.Sprintf(ad, 0)), "Symbol's Value", "Symbol's Name + Addend")
		for _, e := range r.Entries {
			fmt.Fprintf(w, "    "+ad+" "+ad+" %-22s ", e.Offset, e.Info, e.Type)
			switch {
			case e.SymbolIndex != 0:
				fmt.Fprintf(w, ad+" %s", e.SymValue, e.SymName)
				if e.HasAddend {
					sign := "+"
					a := e.Addend
					if a < 0 {
						sign, a = "-", -a
					}
					fmt.Fprintf(w, " %s %x", sign, uint64(a))
				}
			case e.HasAddend:
				fmt.Fprintf(w, "%*s %x", len(fmt.Sprintf(ad, 0)), "", uint64(e.Addend))
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w)
	}
}
