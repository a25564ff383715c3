package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/elfimage/elfimage/symbolize"
)

// runSymbolize is `elfimage symbolize [-e FILE] [-f] [-i] [--json]
// [-columns] [ADDR...]`: addr2line -f -i style answers (or JSON like
// llvm-symbolizer --output-style=JSON) for link-time addresses of any ELF
// file, through package symbolize.
func runSymbolize(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("symbolize", stderr)
	exe := fs.String("e", "", "the ELF `file` (required): an image, a gcc/clang or Go binary, a library")
	fs.Bool("f", true, "print function names (always on; accepted for addr2line compatibility)")
	inlines := fs.Bool("i", true, "print inlined frames, innermost first, each as its own function and file:line pair (-i=false: one frame per address)")
	asJSON := fs.Bool("json", false, "print one JSON object per address, like llvm-symbolizer --output-style=JSON")
	columns := fs.Bool("columns", false, "print file:line:column instead of addr2line's file:line")
	debugFile := fs.String("debug-file", "", "read the DWARF from the separate debug `FILE` of -e's file (its build ID must match)")
	df := addDebugFlags(fs)
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		fmt.Fprint(stderr, debugFilesHelp)
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if *exe == "" {
		return fmt.Errorf("%w: -e FILE is required", errUsage)
	}
	sym, err := openSymbolizer(*exe, *debugFile, df, stderr)
	if err != nil {
		return err
	}
	defer sym.Close()
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	p := symPrinter{w: w, sym: sym, file: *exe, inlines: *inlines, json: *asJSON, columns: *columns}
	if fs.NArg() > 0 {
		// One answer per argument, for its first word, as addr2line and
		// llvm-symbolizer give (an empty argument is malformed).
		for _, a := range fs.Args() {
			p.addWord(firstWord([]byte(a)))
		}
		if err := p.flush(); err != nil {
			return err
		}
		return p.err()
	}
	// Addresses are answered in batches: whatever input is already waiting
	// (up to batchMax addresses), prepared together so that the units they
	// fall in are indexed in parallel. A batch ends when no more input is
	// buffered, so that a process driving us through pipes gets each
	// answer at once. Lines are read in place (a line longer than the
	// buffer is gathered in long).
	const batchMax = 1 << 14
	in := bufio.NewReaderSize(os.Stdin, 64<<10)
	// Sized once for a batch of batchMax words and a little more (a batch
	// ends after the line that reaches batchMax, which may add any number
	// of words: then they grow).
	p.batch, p.addrs = make([]query, 0, batchMax+1024), make([]uint64, 0, batchMax+1024)
	var long []byte
	for {
		line, rerr := in.ReadSlice('\n')
		if rerr == bufio.ErrBufferFull {
			long = append(long, line...)
			continue
		}
		if len(long) > 0 {
			line = append(long, line...)
			long = long[:0]
		}
		p.add(line)
		if in.Buffered() == 0 || len(p.batch) >= batchMax || rerr != nil {
			if err := p.flush(); err != nil {
				return err
			}
			if in.Buffered() == 0 {
				w.Flush()
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	return p.err()
}

// err reports the malformed words and the addresses whose debug
// information could not be read, after every address was answered.
func (p *symPrinter) err() error {
	var errs []error
	if len(p.bad) > 0 {
		errs = append(errs, fmt.Errorf("not hexadecimal addresses: %q", p.bad))
	}
	if p.failed > 0 {
		errs = append(errs, fmt.Errorf("%d addresses answered ?? for malformed debug information; the first: %w", p.failed, p.firstErr))
	}
	return errors.Join(errs...)
}

type symPrinter struct {
	w                      *bufio.Writer
	sym                    *symbolize.Symbolizer
	file                   string
	inlines, json, columns bool
	batch                  []query  // the addresses read and not yet answered
	words                  []string // the malformed words of the batch
	addrs                  []uint64 // the batch's valid addresses, for Prepare
	frames                 []symbolize.Frame
	bad                    []string
	failed                 int    // addresses whose debug information is malformed
	firstErr               error  // the first of their errors
	num                    []byte // scratch for formatting a frame
}

// query is one word of the input: a valid address, or (bad >= 0) the
// index in symPrinter.words of an invalid one's text.
type query struct {
	addr uint64
	bad  int32
}

// add appends the words of line to the batch: the runs of characters
// between white space (unicode.IsSpace, as strings.Fields splits).
func (p *symPrinter) add(line []byte) {
	for len(line) > 0 {
		i := 0
		for i < len(line) {
			if n := spaceAt(line[i:]); n > 0 {
				i += n
			} else {
				break
			}
		}
		j := i
		for j < len(line) && spaceAt(line[j:]) == 0 {
			j++
		}
		if i < j {
			p.addWord(line[i:j])
		}
		line = line[j:]
	}
}

// firstWord returns the first run of non-space characters of b, or an
// empty slice.
func firstWord(b []byte) []byte {
	i := 0
	for i < len(b) && spaceAt(b[i:]) > 0 {
		i += spaceAt(b[i:])
	}
	j := i
	for j < len(b) && spaceAt(b[j:]) == 0 {
		j++
	}
	return b[i:j]
}

// addWord appends one word to the batch.
func (p *symPrinter) addWord(w []byte) {
	if a, ok := parseAddr(w); ok {
		p.batch = append(p.batch, query{addr: a, bad: -1})
	} else {
		p.batch = append(p.batch, query{bad: int32(len(p.words))})
		p.words = append(p.words, string(w))
	}
}

// spaceAt returns the length in bytes of the white-space character that b
// starts with, or 0.
func spaceAt(b []byte) int {
	if c := b[0]; c < utf8.RuneSelf {
		if c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f' {
			return 1
		}
		return 0
	}
	if r, n := utf8.DecodeRune(b); unicode.IsSpace(r) {
		return n
	}
	return 0
}

// flush prepares the batch's addresses together and answers them in order.
func (p *symPrinter) flush() error {
	p.addrs = p.addrs[:0]
	for _, q := range p.batch {
		if q.bad < 0 {
			p.addrs = append(p.addrs, q.addr)
		}
	}
	if len(p.addrs) > 1 {
		// Errors show up again, per address, in p.one.
		_ = p.sym.Prepare(p.addrs)
	}
	for _, q := range p.batch {
		if err := p.one(q); err != nil {
			return err
		}
	}
	p.batch, p.words = p.batch[:0], p.words[:0]
	return nil
}

// parseAddr parses a hexadecimal address of up to 64 bits, with or without
// 0x or 0X, as addr2line does, without allocating.
func parseAddr(b []byte) (uint64, bool) {
	if len(b) > 2 && b[0] == '0' && (b[1] == 'x' || b[1] == 'X') {
		b = b[2:]
	}
	if len(b) == 0 {
		return 0, false
	}
	var a uint64
	for _, c := range b {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		if a>>60 != 0 {
			return 0, false // more than 64 bits
		}
		a = a<<4 | uint64(d)
	}
	return a, true
}

// jsonFrame and jsonAnswer are the JSON output, in llvm-symbolizer's
// field names (plus Inlined).
type jsonFrame struct {
	FunctionName string
	FileName     string
	Line         uint32
	Column       uint32
	Inlined      bool
}

type jsonAnswer struct {
	Address    string
	ModuleName string
	Symbol     []jsonFrame `json:",omitempty"`
	Error      string      `json:",omitempty"`
}

// one answers one address. Like addr2line it answers every address and
// reports the malformed ones at the end; like addr2line it prints "??"
// for an unknown function, "??:0" when nothing is known about the
// address, and "FILE:?" for a known place without a line.
func (p *symPrinter) one(q query) error {
	addr, ok := q.addr, q.bad < 0
	if !ok {
		p.bad = append(p.bad, p.words[q.bad])
		p.frames = p.frames[:0]
	} else {
		var err error
		p.frames, err = p.sym.Symbolize(addr, p.frames[:0])
		if err != nil && !errors.Is(err, symbolize.ErrNoInfo) {
			// Malformed debug information fails only the addresses
			// it covers: they get addr2line's "??" answer, and the
			// first error is reported at the end.
			if errors.Is(err, symbolize.ErrClosed) {
				return err
			}
			if p.failed == 0 {
				p.firstErr = fmt.Errorf("address %#x: %w", addr, err)
			}
			p.failed++
			p.frames = p.frames[:0]
		}
	}
	frames := p.frames
	if !p.inlines && len(frames) > 1 {
		frames = frames[:1]
		frames[0].Inlined = false
	}
	if p.json {
		a := jsonAnswer{Address: fmt.Sprintf("%#x", addr), ModuleName: p.file}
		if !ok {
			a.Address, a.Error = p.words[q.bad], "not a hexadecimal address"
		} else if len(frames) == 0 {
			a.Symbol = []jsonFrame{{}}
		}
		for _, f := range frames {
			a.Symbol = append(a.Symbol, jsonFrame{f.Function, f.File, f.Line, f.Column, f.Inlined})
		}
		b, err := json.Marshal(a)
		if err != nil {
			return err
		}
		p.w.Write(b)
		p.w.WriteByte('\n')
		return nil
	}
	if len(frames) == 0 {
		p.w.WriteString("??\n??:0\n")
		return nil
	}
	// name\nfile:line[:column]\n per frame, without fmt (this is the
	// batch loop).
	for _, f := range frames {
		name, file := f.Function, f.File
		if name == "" {
			name = "??"
		}
		if file == "" {
			file = "??"
		}
		b := append(p.num[:0], name...)
		b = append(b, '\n')
		b = append(b, file...)
		b = append(b, ':')
		if f.Line == 0 {
			b = append(b, '?')
		} else {
			b = strconv.AppendUint(b, uint64(f.Line), 10)
			if p.columns && f.Column != 0 {
				b = append(b, ':')
				b = strconv.AppendUint(b, uint64(f.Column), 10)
			}
		}
		p.num = append(b, '\n')
		p.w.Write(p.num)
	}
	return nil
}
