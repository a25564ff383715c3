package main

import (
	"bufio"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/elfobj"
	inspectpkg "github.com/elfimage/elfimage/internal/inspect"
	"github.com/elfimage/elfimage/meta"
)

func runDump(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dump", stderr)
	headers := fs.Bool("headers", false, "print the ELF header and program headers (segments), as readelf -h -l does")
	sections := fs.Bool("sections", false, "print the section headers, as readelf -S does")
	symbols := fs.Bool("symbols", false, "print the symbol tables (.symtab, .dynsym), as readelf -s does; for an elfimage image also its functions")
	notes := fs.Bool("notes", false, "print the notes, as readelf -n does")
	dynamic := fs.Bool("dynamic", false, "print the dynamic section, as readelf -d does")
	relocs := fs.Bool("relocs", false, "print the relocation sections, as readelf -r does")
	lines := fs.Bool("lines", false, "print the decoded line table (address, file:line:column, flags); for any other ELF file every line program of .debug_line, as llvm-dwarfdump --debug-line does")
	frames := fs.Bool("frames", false, "print the CFI rows of every FDE in .eh_frame and .debug_frame (CFA rule and register rules per row); for any other ELF file, -frames-interp")
	infoFlag := fs.Bool("info", false, "print the DIE tree of .debug_info with every attribute, location and range lists expanded (llvm-dwarfdump --debug-info)")
	procsFlag := fs.Bool("procs", false, "print the procedure table (.elfimage.procs): ranges, arity, argument names, defaults, docstrings, properties")
	asJSON := fs.Bool("json", false, "print the selected views as one JSON object (field names as in package internal/inspect)")
	read := fs.Bool("read", false, "load with the read() fallback instead of mmap")
	framesInterp := fs.Bool("frames-interp", false, "print the call frame table of every CIE and FDE in .eh_frame and .debug_frame of any ELF file, as readelf --debug-dump=frames-interp does")
	disasm := fs.Bool("disasm", false, "disassemble the code (x86-64 in GNU/AT&T syntax as objdump -d, AArch64 in GNU syntax) of any ELF file with, per instruction, its address, bytes, source file:line:column, the CFA rule and saved registers in effect (as -frames-interp spells them) and, for an elfimage image, the variables live there with their locations")
	procName := fs.String("proc", "", "with -disasm: only the function of this name (a symbol, or a procedure of an elfimage image)")
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
		return fmt.Errorf("%w: want one ELF file, got %d arguments", errUsage, fs.NArg())
	}
	path := fs.Arg(0)
	if *framesInterp {
		return dumpFramesInterp(stdout, path)
	}
	if *procName != "" && !*disasm {
		return fmt.Errorf("%w: -proc needs -disasm", errUsage)
	}
	if *disasm && *asJSON {
		return fmt.Errorf("%w: -disasm has no --json form", errUsage)
	}
	if *disasm {
		f, err := elfobj.Open(path)
		if err != nil {
			return err
		}
		ours := isImage(f)
		f.Close()
		var img *elfimage.Image
		if ours {
			if img, err = inspect(path, *read, df); err != nil {
				return err
			}
			defer img.Close()
		}
		return dumpDisasm(stdout, path, *procName, img)
	}
	if ok, err := dumpOther(stdout, path); ok || err != nil {
		return err
	}
	f, err := elfobj.Open(path)
	if err != nil {
		// The loader's error names the file once, in the words the
		// other commands use.
		if img, ierr := inspect(path, *read, df); ierr != nil {
			return ierr
		} else {
			img.Close()
		}
		return err
	}
	defer f.Close()
	v := dumpViews{headers: *headers, sections: *sections, symbols: *symbols, notes: *notes, dynamic: *dynamic,
		relocs: *relocs, lines: *lines, frames: *frames, info: *infoFlag, procs: *procsFlag}
	ours := isImage(f)
	if v == (dumpViews{}) {
		// Everything but the DWARF for any file (readelf -h -l -S -s -n -d
		// -r); for an image of ours everything it has.
		v = dumpViews{headers: true, sections: true, symbols: true, notes: true, dynamic: true, relocs: true,
			lines: ours, frames: ours, info: ours, procs: ours}
	}
	var img *elfimage.Image
	if ours {
		if img, err = inspect(path, *read, df); err != nil {
			return err
		}
		defer img.Close()
	} else if v.procs && f.FindSection(meta.SectionProcs) >= 0 {
		return fmt.Errorf("%s: a separate debug file (the image's code is not in it): dump -procs reads the image, which finds its debug file", path)
	} else if v.procs {
		return fmt.Errorf("%s: not an elfimage image: it has no procedure table (%s)", path, meta.SectionProcs)
	}
	bw := bufio.NewWriter(stdout)
	defer bw.Flush()
	if *asJSON {
		return dumpJSON(bw, f, img, v)
	}
	return dumpText(bw, path, f, img, v)
}

// dumpViews are the views dump prints.
type dumpViews struct {
	headers, sections, symbols, notes, dynamic, relocs, lines, frames, info, procs bool
}

// isImage reports whether f is an image of ours: it has the procedure
// table elfimage writes and its code. An image's separate debug file
// (elfimage strip -debug-file, objcopy --only-keep-debug, eu-strip -f)
// keeps the procedure table and the program headers but not the code: an
// executable PT_LOAD with no file bytes. It is read as any ELF file is,
// its DWARF by -info and -lines, not loaded.
func isImage(f *elfobj.File) bool {
	table := f.FindSection(meta.SectionProcs) >= 0
	for _, p := range f.Progs {
		switch {
		case p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && p.Filesz == 0 && p.Memsz > 0:
			return false
		case p.Type == elfimage.PTProcTable:
			table = true
		}
	}
	return table
}

func init() {
	inspectpkg.ProgTypeNames[elfimage.PTProcTable] = "PTProcTable"
	inspectpkg.ProgTypeNames[elfimage.PTLineProgram] = "PTLineProgram"
	inspectpkg.ProgTypeNames[elfimage.PTLineStrings] = "PTLineStrings"
}

// dumpText prints the views of f (and, for an image of ours, img) as text.
func dumpText(w *bufio.Writer, path string, f *elfobj.File, img *elfimage.Image, v dumpViews) error {
	h := inspectpkg.FileHeader(f)
	if v.headers {
		inspectpkg.WriteHeader(w, h)
		if img != nil {
			dumpImageHeader(w, img, f)
		}
		inspectpkg.WritePrograms(w, h, inspectpkg.ProgramHeaders(f))
	}
	if v.sections {
		inspectpkg.WriteSections(w, h, inspectpkg.Sections(f))
	}
	if v.symbols {
		ts, err := inspectpkg.SymbolTables(f)
		inspectpkg.WriteSymbols(w, h, ts)
		if err != nil {
			return err
		}
		if img != nil {
			if err := dumpSymbols(w, img); err != nil {
				return err
			}
		}
	}
	if v.notes {
		ns, err := inspectpkg.Notes(f)
		inspectpkg.WriteNotes(w, ns)
		if err != nil {
			return err
		}
	}
	if v.dynamic {
		ds, err := inspectpkg.Dynamic(f)
		if err != nil {
			return err
		}
		inspectpkg.WriteDynamic(w, ds)
	}
	if v.relocs {
		rs, err := inspectpkg.Relocations(f)
		inspectpkg.WriteRelocations(w, h, rs)
		if err != nil {
			return err
		}
	}
	if v.procs && img != nil {
		if err := dumpProcs(w, img); err != nil {
			return err
		}
	}
	if v.info {
		if err := dumpInfo(w, f, img); err != nil {
			return err
		}
	}
	if v.lines {
		var err error
		if img != nil {
			err = dumpLines(w, img)
		} else {
			err = dumpLinePrograms(w, f)
		}
		if err != nil {
			return err
		}
	}
	if v.frames {
		if img == nil {
			w.Flush()
			return dumpFramesInterp(w, path)
		}
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
	// An image for another architecture (elfimage build -arch) is
	// loaded for reading as well: its code is never run here.
	im, err := elfimage.Open(path, &elfimage.LoadOptions{ForceRead: read, DebugFiles: finder, Arch: machineOf(path)})
	var fe *elfimage.FormatError
	if errors.As(err, &fe) && fe.Field != "ELF header" && fe.Field != "e_ident" {
		err = fmt.Errorf("%w\n(not an elfimage image? `elfimage dump -frames-interp` and `elfimage symbolize -e` read any ELF file)", err)
	}
	return im, err
}

// machineOf returns the Arch of the ELF file at path by its e_machine
// (an ELF64 little-endian header's bytes 18-19), or nil (the host's) when
// the file is unreadable, not such a header or of an architecture package
// arch does not know; the loader then reports what is wrong.
func machineOf(path string) *arch.Arch {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var h [20]byte
	if _, err := io.ReadFull(f, h[:]); err != nil || string(h[:4]) != elf.ELFMAG || h[elf.EI_CLASS] != byte(elf.ELFCLASS64) || h[elf.EI_DATA] != byte(elf.ELFDATA2LSB) {
		return nil
	}
	return arch.ForMachine(elf.Machine(binary.LittleEndian.Uint16(h[18:])))
}

// dumpImageHeader prints what the loader knows of an image of ours: where
// it is loaded, its build ID, its debug file and the loader's notes.
func dumpImageHeader(w io.Writer, img *elfimage.Image, f *elfobj.File) {
	fmt.Fprintf(w, "elfimage image:\n")
	fmt.Fprintf(w, "  loaded at %#x (%s), %d bytes loaded of %d in the file\n", img.Base(), loadPath(img), img.Size(), f.Size())
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
	fmt.Fprintln(w)
}

func loadPath(img *elfimage.Image) string {
	if img.Mapped() {
		return "mmap"
	}
	return "read fallback"
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
	idx, err := positionIndex(img)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Procedure table (%s): %s\n", meta.SectionProcs, idx.summary())
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
		if r, ok := idx.procs[p.Start]; ok {
			fmt.Fprintf(w, " positions: %d rows, lines %d-%d", r.rows, r.minLine, r.maxLine)
			if len(idx.files) > 1 {
				fmt.Fprintf(w, " of %s", r.file)
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	return nil
}

// procPositions is what dump -procs shows of a procedure's position block.
type procPositions struct {
	file             string
	rows             int
	minLine, maxLine uint32
}

// tableIndex is the procedure table's position index (meta.FlagPositions)
// as dump -procs shows it.
type tableIndex struct {
	present      bool
	rows, bytes  int
	files        []string
	procs        map[uint64]procPositions // by start
	without, all int                      // procedures without a block; all procedures
	starts       int                      // start index entries (meta.FlagStartIndex)
}

// positionIndex reads the position blocks of the image's procedure
// table.
func positionIndex(img *elfimage.Image) (tableIndex, error) {
	idx := tableIndex{procs: map[uint64]procPositions{}}
	sec, err := img.Section(meta.SectionProcs)
	if errors.Is(err, elfimage.ErrNoSection) {
		return idx, nil // Procedure says so
	}
	if err != nil {
		return idx, err
	}
	var strs []byte
	if meta.ExternalStrings(sec) {
		if strs, err = img.Section(meta.SectionStrs); err != nil {
			return idx, err
		}
	}
	t, err := meta.NewTable(sec, strs)
	if err != nil {
		return idx, err
	}
	idx.present = sec[7]&meta.FlagPositions != 0
	idx.all, idx.starts = t.Len(), t.IndexLen()
	seen := map[string]bool{}
	for i := range t.Len() {
		e, err := t.At(i)
		if err != nil {
			return idx, err
		}
		if !e.HasPositions {
			if e.HasLineSeq {
				idx.without++
			}
			continue
		}
		file, rows, err := t.Positions(e)
		if err != nil {
			return idx, err
		}
		off, end := e.PositionBlock()
		idx.rows += len(rows)
		idx.bytes += end - off
		if !seen[file] {
			seen[file] = true
			idx.files = append(idx.files, file)
		}
		pp := procPositions{file: file, rows: len(rows), minLine: ^uint32(0)}
		for _, r := range rows {
			pp.minLine, pp.maxLine = min(pp.minLine, r.Line), max(pp.maxLine, r.Line)
		}
		idx.procs[e.Start] = pp
	}
	return idx, nil
}

// summary is the index's line under the table's heading.
func (idx tableIndex) summary() string {
	starts := ""
	if idx.starts > 0 {
		entries := "entries"
		if idx.starts == 1 {
			entries = "entry"
		}
		starts = fmt.Sprintf(", start index of %d %s (one per %d records)", idx.starts, entries, meta.IndexStride)
	}
	if !idx.present {
		return fmt.Sprintf("%d procedures%s, no position index (positions from .debug_line)", idx.all, starts)
	}
	s := fmt.Sprintf("%d procedures%s, position index of %d rows in %d bytes", idx.all, starts, idx.rows, idx.bytes)
	switch len(idx.files) {
	case 0:
	case 1:
		s += fmt.Sprintf(", file %s", idx.files[0])
	default:
		s += fmt.Sprintf(", %d files", len(idx.files))
	}
	if idx.without > 0 {
		s += fmt.Sprintf(" (%d procedures' from .debug_line)", idx.without)
	}
	return s
}

// progFlags spells segment flags as rwx.
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

// exprString prints a DWARF expression of an x86-64 image of ours.
func exprString(b []byte) string {
	return inspectpkg.ExprString(b, dwarf.Encoding{Version: 5, AddrSize: 8, ByteOrder: binary.LittleEndian})
}
