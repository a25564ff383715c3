package main

import (
	"bufio"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/elfobj"
	"github.com/elfimage/elfimage/meta"
)

func runDump(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dump", stderr)
	headers := fs.Bool("headers", false, "print the ELF header and program headers (segments)")
	sections := fs.Bool("sections", false, "print the section headers")
	symbols := fs.Bool("symbols", false, "print the function symbols of .symtab")
	lines := fs.Bool("lines", false, "print the decoded line table (address, file:line:column, flags)")
	frames := fs.Bool("frames", false, "print the CFI rows of every FDE in .eh_frame and .debug_frame (CFA rule and register rules per row)")
	infoFlag := fs.Bool("info", false, "print the DIE tree of .debug_info with every attribute")
	procsFlag := fs.Bool("procs", false, "print the procedure table (.elfimage.procs): ranges, arity, argument names, defaults, docstrings, properties")
	read := fs.Bool("read", false, "load with the read() fallback instead of mmap")
	framesInterp := fs.Bool("frames-interp", false, "print the call frame table of every CIE and FDE in .eh_frame and .debug_frame of any ELF file, as readelf --debug-dump=frames-interp does")
	df := addDebugFlags(fs)
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		fmt.Fprint(stderr, debugFilesHelp)
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: want one image file, got %d arguments", errUsage, fs.NArg())
	}
	if *framesInterp {
		return dumpFramesInterp(stdout, fs.Arg(0))
	}
	if ok, err := dumpOther(stdout, fs.Arg(0)); ok || err != nil {
		return err
	}
	all := !*headers && !*sections && !*symbols && !*lines && !*frames && !*infoFlag && !*procsFlag
	img, err := inspect(fs.Arg(0), *read, df)
	if err != nil {
		return err
	}
	defer img.Close()
	bw := bufio.NewWriter(stdout)
	defer bw.Flush()
	w := bw
	if all || *headers {
		if err := dumpHeaders(w, img); err != nil {
			return err
		}
	}
	if all || *sections {
		if err := dumpSections(w, img); err != nil {
			return err
		}
	}
	if all || *symbols {
		if err := dumpSymbols(w, img); err != nil {
			return err
		}
	}
	if all || *procsFlag {
		if err := dumpProcs(w, img); err != nil {
			return err
		}
	}
	if all || *infoFlag {
		if err := dumpInfo(w, img); err != nil {
			return err
		}
	}
	if all || *lines {
		if err := dumpLines(w, img); err != nil {
			return err
		}
	}
	if all || *frames {
		if err := dumpFrames(w, img); err != nil {
			return err
		}
	}
	return nil
}

// inspect loads an image for reading its contents, a stripped image's
// debug file found as df says. An ELF file the loader refuses gets a hint
// at the commands that read any ELF file.
func inspect(path string, read bool, df *debugFlags) (*elfimage.Image, error) {
	finder, err := df.finder()
	if err != nil {
		return nil, err
	}
	im, err := elfimage.Open(path, &elfimage.LoadOptions{ForceRead: read, DebugFiles: finder})
	var fe *elfimage.FormatError
	if errors.As(err, &fe) && fe.Field != "ELF header" && fe.Field != "e_ident" {
		err = fmt.Errorf("%w\n(not an elfimage image? `elfimage dump -frames-interp` and `elfimage symbolize -e` read any ELF file)", err)
	}
	return im, err
}

func dumpHeaders(w io.Writer, img *elfimage.Image) error {
	b := img.Bytes()
	f, err := elfobj.NewBytes(b)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "ELF header:\n")
	fmt.Fprintf(w, "  class %v, data %v, type %v, machine %v\n", f.Class, f.Header.Data, f.Type, f.Machine)
	fmt.Fprintf(w, "  entry %#x, program headers at %#x (%d), section headers at %#x (%d)\n",
		f.Entry, f.Phoff, len(f.Progs), f.Shoff, len(f.Sections))
	fmt.Fprintf(w, "  loaded at %#x (%s), %d bytes loaded of %d in the file\n", img.Base(), loadPath(img), img.Size(), len(b))
	if id := img.BuildID(); id != nil {
		fmt.Fprintf(w, "  build ID %s\n", hex.EncodeToString(id))
	}
	switch p, err := img.DebugFile(); {
	case err != nil:
		_, why, _ := strings.Cut(err.Error(), "the image is stripped, and ")
		fmt.Fprintf(w, "  stripped; %s\n", why)
	case p != "":
		fmt.Fprintf(w, "  stripped; debug file %s\n", p)
	}
	for _, n := range img.LoadNotes() {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	fmt.Fprintf(w, "\nProgram headers:\n")
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "  type\toffset\tvaddr\tfilesz\tmemsz\tflags\talign\n")
	for _, p := range f.Progs {
		fmt.Fprintf(tw, "  %s\t%#x\t%#x\t%#x\t%#x\t%s\t%#x\n", progType(p.Type), p.Off, p.Vaddr, p.Filesz, p.Memsz, progFlags(p.Flags), p.Align)
	}
	tw.Flush()
	fmt.Fprintln(w)
	return nil
}

// progType names a program header type, including elfimage's own.
func progType(t elf.ProgType) string {
	switch t {
	case elfimage.PTProcTable:
		return "PTProcTable"
	case elfimage.PTLineProgram:
		return "PTLineProgram"
	case elfimage.PTLineStrings:
		return "PTLineStrings"
	}
	if t >= elf.PT_LOOS && t <= elf.PT_HIOS && t != elf.PT_GNU_EH_FRAME && t != elf.PT_GNU_STACK && t != elf.PT_GNU_RELRO && t != elf.PT_GNU_PROPERTY {
		return fmt.Sprintf("LOOS+%#x", uint32(t-elf.PT_LOOS))
	}
	return t.String()
}

func loadPath(img *elfimage.Image) string {
	if img.Mapped() {
		return "mmap"
	}
	return "read fallback"
}

func progFlags(f elf.ProgFlag) string {
	s := []byte("---")
	if f&elf.PF_R != 0 {
		s[0] = 'r'
	}
	if f&elf.PF_W != 0 {
		s[1] = 'w'
	}
	if f&elf.PF_X != 0 {
		s[2] = 'x'
	}
	return string(s)
}

func dumpSections(w io.Writer, img *elfimage.Image) error {
	secs, err := img.Sections()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Sections:\n")
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "  [nr]\tname\ttype\taddr\toffset\tsize\tflags\n")
	for i, s := range secs {
		if i == 0 {
			continue
		}
		fmt.Fprintf(tw, "  [%2d]\t%s\t%s\t%#x\t%#x\t%d\t%s\n", i, s.Name, secType(s.Type), s.Addr, s.Offset, s.Size, secFlags(s.Flags))
	}
	tw.Flush()
	fmt.Fprintln(w)
	return nil
}

func secType(t elf.SectionType) string {
	if t == 0x70000001 {
		return "X86_64_UNWIND" // x86-64 psABI section 4.2.4; debug/elf has no name for it
	}
	return strings.TrimPrefix(t.String(), "SHT_")
}

func secFlags(f elf.SectionFlag) string {
	var s strings.Builder
	for _, x := range []struct {
		f elf.SectionFlag
		c byte
	}{{elf.SHF_WRITE, 'W'}, {elf.SHF_ALLOC, 'A'}, {elf.SHF_EXECINSTR, 'X'}, {elf.SHF_MERGE, 'M'}, {elf.SHF_STRINGS, 'S'}} {
		if f&x.f != 0 {
			s.WriteByte(x.c)
		}
	}
	return s.String()
}

func dumpSymbols(w io.Writer, img *elfimage.Image) error {
	procs, err := img.Procedures()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Symbols (functions):\n")
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "  address\tsize\tbind\tname\n")
	for _, p := range procs {
		bind := "global"
		if p.Internal {
			bind = "local"
		}
		fmt.Fprintf(tw, "  %#x\t%d\t%s\t%s\n", p.Start, p.Size, bind, p.Name)
	}
	tw.Flush()
	fmt.Fprintln(w)
	return nil
}

func dumpLines(w io.Writer, img *elfimage.Image) error {
	t, err := img.LineTable()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Line table (version %d, %d sequences):\n", t.Version, len(t.Sequences))
	for i, f := range t.Files {
		if f.Path != "" { // versions before 5 have no file 0
			fmt.Fprintf(w, "  file %d: %s\n", i, f.Path)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "  address\tfile:line:column\tflags\n")
	for _, s := range t.Sequences {
		for _, r := range s.Rows {
			var flags []string
			if r.IsStmt {
				flags = append(flags, "is_stmt")
			}
			if r.PrologueEnd {
				flags = append(flags, "prologue_end")
			}
			if r.EpilogueBegin {
				flags = append(flags, "epilogue_begin")
			}
			name := "?"
			if f, ok := t.File(r.File); ok {
				name = f.Name
			}
			fmt.Fprintf(tw, "  %#x\t%s:%d:%d\t%s\n", r.Address, name, r.Line, r.Column, strings.Join(flags, " "))
		}
		fmt.Fprintf(tw, "  %#x\tend_sequence\t\n", s.End)
	}
	tw.Flush()
	fmt.Fprintln(w)
	return nil
}

func dumpFrames(w io.Writer, img *elfimage.Image) error {
	data, err := img.Section(".eh_frame")
	if err != nil {
		return err
	}
	secs, err := img.Sections()
	if err != nil {
		return err
	}
	var addr uint64
	for _, s := range secs {
		if s.Name == ".eh_frame" {
			addr = s.Addr
		}
	}
	a := img.Arch()
	fmt.Fprintf(w, "Call frame information. Rules as readelf prints them: c-16 = saved at CFA-16,\n")
	fmt.Fprintf(w, "  s = same value, u = undefined (for the return address: the outermost frame), v+N = value CFA+N.\n")
	if err := dumpFrameSection(w, img, frame.NewEHFrame(data, addr, binary.LittleEndian, uint8(a.PtrSize))); err != nil {
		return err
	}
	if df, err := img.Section(".debug_frame"); err == nil {
		return dumpFrameSection(w, img, frame.NewDebugFrame(df, binary.LittleEndian, uint8(a.PtrSize)))
	}
	return nil
}

// dumpFrameSection prints every FDE of a frame section with its rows.
func dumpFrameSection(w io.Writer, img *elfimage.Image, sec *frame.Section) error {
	a := img.Arch()
	fdes, err := sec.FDEs()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s, %d FDEs:\n", sec.Name(), len(fdes))
	for i := range fdes {
		f := &fdes[i]
		name := "?"
		if p, err := img.ProcedureAt(f.Start); err == nil {
			name = p.Name
		}
		fmt.Fprintf(w, "  FDE at %#x: [%#x, %#x) %s\n", f.Offset, f.Start, f.Start+f.Size, name)
		rows, err := frame.Table(f)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if r.Loc == r.End {
				continue
			}
			var regs []string
			for j := 0; j < r.NumRules(); j++ {
				reg, rule := r.RuleAt(j)
				if rule.Kind == frame.RuleUnspecified {
					continue
				}
				regs = append(regs, a.RegName(reg)+"="+rule.Format(a.RegName))
			}
			fmt.Fprintf(w, "    %#x  cfa=%s  %s\n", r.Loc, r.CFA.Format(a.RegName), strings.Join(regs, " "))
		}
	}
	fmt.Fprintln(w)
	return nil
}

func dumpProcs(w io.Writer, img *elfimage.Image) error {
	syms, err := img.Procedures()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Procedure table (%s):\n", meta.SectionProcs)
	for _, s := range syms {
		p, err := img.Procedure(s.Start)
		if err != nil {
			return err
		}
		var args []string
		for i, a := range p.Args {
			if i >= p.Required && p.Defaults[i-p.Required] != "" {
				a = "(" + a + " " + p.Defaults[i-p.Required] + ")"
			}
			if i == p.Required {
				args = append(args, "#:optional")
			}
			args = append(args, a)
		}
		fmt.Fprintf(w, "  [%#x, %#x) (%s)", p.Start, p.Start+p.Size, strings.Join(append([]string{p.Name}, args...), " "))
		if p.Doc != "" {
			fmt.Fprintf(w, " doc %q", p.Doc)
		}
		for _, pr := range p.Properties {
			fmt.Fprintf(w, " %s=%s", pr.Name, pr.Value)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	return nil
}
