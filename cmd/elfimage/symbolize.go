package main

import (
	"bufio"
	"bytes"
	"cmp"
	"debug/elf"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/elfimage/elfimage/elfobj"
	"github.com/elfimage/elfimage/internal/radix"
	"github.com/elfimage/elfimage/symbolize"
	"github.com/ianlancetaylor/demangle"
)

// runSymbolize is `elfimage symbolize [-e FILE] [addr2line and
// llvm-symbolizer flags] [ADDR...]`: addr2line -f -i style answers (or
// llvm-symbolizer's text or JSON) for link-time addresses of any ELF
// file, through package symbolize.
func runSymbolize(args []string, stdout, stderr io.Writer) error {
	// When this was measured (a batch of 10,000 addresses of a
	// 20,000-function binary, with every index on the Go heap), nearly
	// all the heap a symbolization built was the indexes it keeps to the
	// end, which a collection at the default GOGC (from a 4 MB heap on)
	// marks again at each doubling, and finds live: two cycles and a
	// seventh of the CPU time. Since then the indexes' large arrays of a
	// file of 1 MiB or more (symbolize.Open) are in mappings of their own,
	// outside the Go heap (the collector neither counts nor scans them);
	// the heap still holds the rest of what the indexes keep (names, file
	// names, small arrays), and files below 1 MiB keep every index there.
	// Collect at 4× the live heap (not measured again since), unless the
	// user set GOGC.
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(400))
	}
	fs := newFlags("symbolize", stderr)
	var o symOptions
	var exe string
	for i, n := range []string{"e", "exe", "obj"} {
		fs.StringVar(&exe, n, "", alias(i, "e", "the ELF `file` (required): an image, a gcc/clang or Go binary, a library (-e as addr2line, --exe and --obj as llvm-symbolizer)"))
	}
	o.functions = true
	fs.Var(&funcsFlag{&o.functions}, "f", "print function names (addr2line's -f; -f=false or --functions=none: file:line only)")
	fs.Var(&funcsFlag{&o.functions}, "functions", "the same as -f, with llvm-symbolizer's values none and linkage")
	for i, n := range []string{"i", "inlines", "inlining"} {
		fs.BoolVar(&o.inlines, n, true, alias(i, "i", "print inlined frames, innermost first, each as its own function and file:line pair (-i=false: one frame per address)"))
	}
	for i, n := range []string{"C", "demangle"} {
		fs.BoolVar(&o.demangle, n, false, alias(i, "C", "demangle C++ (Itanium) and Rust names, as addr2line -C and c++filt do (the default in --output-style=LLVM and JSON)"))
	}
	noDemangle := fs.Bool("no-demangle", false, "do not demangle names (llvm-symbolizer's flag)")
	noInlines := fs.Bool("no-inlines", false, "one frame per address, as -i=false (llvm-symbolizer's flag)")
	for i, n := range []string{"a", "addresses", "print-address"} {
		fs.BoolVar(&o.addresses, n, false, alias(i, "a", "print each address before its answer (addr2line's 0x%016x, llvm-symbolizer's 0x%x in --output-style=LLVM)"))
	}
	for i, n := range []string{"p", "pretty-print"} {
		fs.BoolVar(&o.pretty, n, false, alias(i, "p", "print each address's answer on one line: FUNCTION at FILE:LINE, inlined frames as \" (inlined by) ...\" lines"))
	}
	for i, n := range []string{"s", "basenames"} {
		fs.BoolVar(&o.basenames, n, false, alias(i, "s", "print file names without their directories"))
	}
	gnuDefaults := fs.Bool("addr2line", false, "take addr2line's defaults: no function names without -f, no inlined frames without -i (as `addr2line -e FILE` prints)")
	style := fs.String("output-style", "", "GNU (addr2line's output, the default), LLVM (llvm-symbolizer's: columns, a blank line after each answer, demangled) or JSON (llvm-symbolizer --output-style=JSON's fields and shape)")
	asJSON := fs.Bool("json", false, "print one JSON object per line and address: llvm-symbolizer's fields plus Inlined")
	fs.BoolVar(&o.columns, "columns", false, "print file:line:column instead of addr2line's file:line")
	debugFile := fs.String("debug-file", "", "read the DWARF from the separate debug `FILE` of -e's file (its build ID must match)")
	df := addDebugFlags(fs)
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		fmt.Fprint(stderr, debugFilesHelp)
	}
	if err := parse(fs, expandShortFlags(args)); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch strings.ToUpper(*style) {
	case "", "GNU":
		o.style = styleGNU
	case "LLVM":
		o.style, o.columns = styleLLVM, true
	case "JSON":
		o.style = styleJSON
	default:
		return fmt.Errorf("%w: --output-style=%s: want GNU, LLVM or JSON", errUsage, *style)
	}
	if *asJSON {
		o.style = styleJSONLines
	}
	if *gnuDefaults {
		o.functions = o.functions && (set["f"] || set["functions"])
		o.inlines = o.inlines && (set["i"] || set["inlines"] || set["inlining"])
	}
	if !set["C"] && !set["demangle"] {
		o.demangle = o.style == styleLLVM || o.style == styleJSON
	}
	if *noInlines {
		o.inlines = false
	}
	if *noDemangle {
		o.demangle = false
	}
	if exe == "" {
		return fmt.Errorf("%w: -e FILE is required", errUsage)
	}
	sym, err := openSymbolizer(exe, *debugFile, df, stderr)
	if err != nil {
		return err
	}
	defer sym.Close()
	// Answers are written in chunks of 64 KiB (a batch of 10,000 in a
	// few writes, where 4 KiB took a hundred), or at the end of each
	// batch.
	w := bufio.NewWriterSize(stdout, 64<<10)
	defer w.Flush()
	p := symPrinter{w: w, sym: sym, file: exe, symOptions: o}
	p.loaded, p.addrDigits = loadedRanges(exe)
	p.filePlain = jsonPlainString(exe)
	if fs.NArg() > 0 {
		// One answer per argument, for its first word, as addr2line and
		// llvm-symbolizer give (an empty argument is malformed);
		// llvm-symbolizer's JSON gives them as one array.
		p.array = o.style == styleJSON
		for _, a := range fs.Args() {
			p.addWord(firstWord([]byte(a)))
		}
		if p.array {
			w.WriteByte('[')
		}
		if err := p.flush(); err != nil {
			return err
		}
		if p.array {
			w.WriteString("]\n")
		}
		if err := w.Flush(); err != nil {
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
	// When the first read leaves a large batch waiting (commonMin bytes,
	// some thousand addresses), the work Prepare does for any large batch
	// (the symbol table's sort, the copy of .debug_str) starts on another
	// core while the addresses are read. A process that writes one
	// address at a time leaves nothing waiting and starts nothing.
	const commonMin = 16 << 10
	var common chan struct{}
	defer func() {
		if common != nil {
			<-common // before sym.Close
		}
	}()
	for {
		line, rerr := in.ReadSlice('\n')
		if common == nil && p.answered == 0 && len(p.batch) == 0 && in.Buffered() >= commonMin && runtime.GOMAXPROCS(0) > 1 {
			common = make(chan struct{})
			go func() {
				defer close(common)
				_ = sym.PrepareCommon() // its errors are Prepare's and Symbolize's, reported by them
			}()
			// It runs here at once, and this goroutine goes on
			// reading where a free core first takes it from the
			// global queue: otherwise the new goroutine waited in this
			// processor's next slot, often until Prepare, milliseconds
			// later on a VM (traced).
			runtime.Gosched()
		}
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
				// A failed write (stdout on a full device or a closed
				// pipe) ends the command: the bufio.Writer keeps the
				// error, so it is seen at the first flush after it.
				if err := w.Flush(); err != nil {
					return err
				}
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	if err := w.Flush(); err != nil {
		return err
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
	w    *bufio.Writer
	sym  *symbolize.Symbolizer
	file string
	symOptions
	loaded     [][2]uint64 // the allocated sections' [start, end); nil: no check
	addrDigits int         // addr2line's width of an address: 16 or 8 hex digits
	filePlain  bool        // file needs no escaping in JSON (jsonPlainString)
	array      bool        // JSON answers go in one array: a comma before all but the first
	answered   int
	batch      []query  // the addresses read and not yet answered
	words      []string // the malformed words of the batch
	addrs      []uint64 // the batch's valid addresses, for Prepare
	frames     []symbolize.Frame
	store      []symbolize.Frame // flushSorted's frames of a batch
	second     *symPrinter       // flushHalves' printer of a batch's later half
	laterText  *bytes.Buffer     // the second printer's (p.second's) output, which its w writes to
	spans      []answerSpan      // flushSorted's answers, by batch index
	errs       map[int]error     // flushSorted's errors of Symbolize, by batch index
	order      []uint64          // flushSorted's batch indexes in address order
	orderTmp   []uint64          // radix.Sort's scratch for order
	bad        []string
	failed     int          // addresses whose debug information is malformed
	firstErr   error        // the first of their errors
	num        []byte       // scratch for formatting a frame
	jbuf       bytes.Buffer // scratch for a JSON answer
}

// query is one word of the input: a valid address, or (bad >= 0) the
// index in symPrinter.words of an invalid one's text.
type query struct {
	addr uint64
	bad  int32
}

// add appends the words of line to the batch: the runs of characters
// between white space (unicode.IsSpace, as strings.Fields splits). ASCII
// bytes are classified by table; only other bytes decode a rune.
func (p *symPrinter) add(line []byte) {
	if a, ok := lineAddr(line); ok {
		p.batch = append(p.batch, query{addr: a, bad: -1})
		return
	}
	i := 0
	for i < len(line) {
		// Skip white space.
		if c := line[i]; c < utf8.RuneSelf {
			if asciiSpace[c] {
				i++
				continue
			}
		} else if n := spaceAt(line[i:]); n > 0 {
			i += n
			continue
		}
		// A word: up to the next white space.
		j := i + 1
		for j < len(line) {
			if c := line[j]; c < utf8.RuneSelf {
				if asciiSpace[c] {
					break
				}
				j++
			} else if spaceAt(line[j:]) > 0 {
				break
			} else {
				j++
			}
		}
		p.addWord(line[i:j])
		i = j
	}
}

// lineAddr parses the usual line, an address of at most 16 hexadecimal
// digits (0x or 0X before them or not) and its newline, in one pass;
// ok false for any other line, which add then splits into words.
func lineAddr(line []byte) (a uint64, ok bool) {
	b := line
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if len(b) > 2 && b[0] == '0' && b[1]|0x20 == 'x' {
		b = b[2:]
	}
	if len(b) == 0 || len(b) > 16 {
		return 0, false
	}
	for _, c := range b {
		d := hexDigit[c]
		if d > 0xf {
			return 0, false
		}
		a = a<<4 | uint64(d)
	}
	return a, true
}

// asciiSpace marks the ASCII white-space bytes (those unicode.IsSpace
// accepts).
var asciiSpace = [utf8.RuneSelf]bool{' ': true, '\n': true, '\t': true, '\r': true, '\v': true, '\f': true}

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
	if len(p.addrs) >= sortedMin {
		all := p.batch
		var err error
		if len(all) >= splitMin && runtime.GOMAXPROCS(0) > 1 {
			err = p.flushHalves(all)
		} else {
			err = p.flushWindows(all)
		}
		p.batch, p.words = all[:0], p.words[:0]
		return err
	}
	for _, q := range p.batch {
		if err := p.one(q, p.lookup(q, p.frames[:0])); err != nil {
			return err
		}
	}
	p.batch, p.words = p.batch[:0], p.words[:0]
	return nil
}

// flushWindows answers and prints the queries of all in windows, each
// sorted and printed before the next: the frames and text kept for input
// order are one window's, in memory the next window reuses (a batch of
// 10,000 in one window faulted in about 300 pages of them). Windows are
// of equal size, at most sortedWindow. It leaves p.batch at the last
// window.
func (p *symPrinter) flushWindows(all []query) error {
	n := len(all)
	windows := (n + sortedWindow - 1) / sortedWindow
	size := (n + windows - 1) / windows
	for w := 0; w < n; w += size {
		p.batch = all[w:min(w+size, n)]
		if err := p.flushSorted(); err != nil {
			return err
		}
	}
	return nil
}

// splitMin is the fewest words of a batch that flush answers in two
// halves at once (when GOMAXPROCS allows); a variable for the tests.
var splitMin = 4096

// splitHelper is how flushHalves starts its other goroutine: helperAsync
// but in the tests, which also take the two paths the timing picks,
// helperNever (this goroutine answers the later half, as when the other
// one finds no free core) and helperFirst (the other one takes the later
// half before this one starts on the first).
var splitHelper = helperAsync

const (
	helperAsync = iota
	helperNever
	helperFirst
)

// flushHalves answers and prints the queries of all in two halves of
// input order at once: the later half by a second printer (p.second,
// kept for the next batch) on another goroutine, into a buffer written
// after the first half, which this goroutine answers and prints as
// flushWindows does. The work is handed over once a batch: per window,
// handing a sleeping thread the upper half of address order and then the
// later half's text (an earlier design) cost more than it saved on two
// cores of a VM. This goroutine yields right after starting the other,
// which then runs at once and takes the later half while this one waits
// for a free core to resume on (see symbolize.Prepare's workers); should
// the other not have taken it by the time the first half is done, this
// goroutine answers the later half too, straight to the output, so the
// answers never wait on the hand-over. The output is the same either way: an
// answer's text depends only on its frames and on the count of answers
// before it (JSON's commas), known in advance; the second printer's
// counts, malformed words and first failure are merged as if one printer
// had printed both (the first failure's error is the earliest in input
// order).
func (p *symPrinter) flushHalves(all []query) error {
	h := len(all) / 2
	q := p.second
	if q == nil {
		// Its writer's buffer is small: it only passes the text on to
		// q.laterText, in memory (a fresh 64 KiB would be 16 page faults).
		q = &symPrinter{laterText: new(bytes.Buffer)}
		q.w = bufio.NewWriterSize(nil, 8<<10)
		p.second = q
	}
	// Room for the later half's text at 96 bytes an answer (gcc -O2
	// output takes about 63 in the default style), made to measure so
	// that the buffer does not grow by copies into fresh pages (a
	// doubling from 64 KiB to 512 KiB touched twice what a batch of 5,000
	// answers needs); a slice made with room (not bytes.Buffer.Grow, which
	// clears the room it makes) leaves the untouched tail of a fresh
	// allocation costing address space, not pages.
	if need := 96 * (len(all) - h); q.laterText.Cap() < need {
		q.laterText = bytes.NewBuffer(make([]byte, 0, need))
	}
	q.laterText.Reset()
	q.w.Reset(q.laterText)
	q.sym, q.file, q.symOptions, q.loaded, q.addrDigits, q.array, q.filePlain = p.sym, p.file, p.symOptions, p.loaded, p.addrDigits, p.array, p.filePlain
	q.words = p.words // read only, by both
	q.answered = p.answered + h
	q.bad, q.failed, q.firstErr = q.bad[:0], 0, nil
	// claim is 1 once the other goroutine takes the later half, 2 once
	// this one does.
	var claim atomic.Int32
	done := make(chan error, 1)
	helper := func() {
		if claim.CompareAndSwap(0, 1) {
			err := q.flushWindows(all[h:])
			if ferr := q.w.Flush(); err == nil {
				err = ferr
			}
			done <- err
		}
	}
	switch splitHelper {
	case helperAsync:
		go helper()
		runtime.Gosched() // the helper first (see symbolize.Prepare's workers)
	case helperFirst:
		go helper()
		for claim.Load() == 0 {
			runtime.Gosched()
		}
	}
	err := p.flushWindows(all[:h])
	if claim.CompareAndSwap(0, 2) {
		if err != nil {
			return err
		}
		return p.flushWindows(all[h:])
	}
	qerr := <-done
	if err != nil {
		return err
	}
	p.w.Write(q.laterText.Bytes())
	p.bad = append(p.bad, q.bad...)
	if p.failed == 0 {
		p.firstErr = q.firstErr
	}
	p.failed += q.failed
	p.answered = q.answered
	return qerr
}

// sortedMin is the fewest valid addresses in a batch that flushSorted
// answers in address order.
const sortedMin = 64

// sortedWindow is the most words of a batch that flushSorted answers
// and prints at once (the batch's windows are of equal size, at most
// this); a variable for the tests.
var sortedWindow = 4096

// flushSorted answers the batch's addresses (flush's window of the
// batch) in address order, keeping
// the frames, then prints them in input order. Consecutive lookups then
// read neighbouring parts of the indexes (the same segments, names, line
// rows and symbols, or the next ones), where random order misses the
// caches and TLB on nearly every step; the answers are the same
// (Symbolize's answer for an address does not depend on the addresses
// asked before it).
func (p *symPrinter) flushSorted() error {
	n := len(p.batch)
	order := p.order[:0]
	// An address and its batch index packed in one key when both fit
	// (addresses below 2^(64-k) for a batch below 2^k entries: any
	// executable's), so that the sort moves and compares plain integers.
	k := bits.Len(uint(n))
	minAddr, maxAddr := ^uint64(0), uint64(0)
	for _, q := range p.batch {
		if q.bad < 0 {
			minAddr, maxAddr = min(minAddr, q.addr), max(maxAddr, q.addr)
		}
	}
	packed := bits.Len64(maxAddr)+k <= 64
	for i, q := range p.batch {
		if q.bad < 0 {
			if packed {
				order = append(order, q.addr<<k|uint64(i))
			} else {
				order = append(order, uint64(i))
			}
		}
	}
	if packed {
		// The keys are made in batch order, so only the address bits
		// need sorting, and of them only those below the ones every
		// address in [minAddr, maxAddr] shares.
		order, p.orderTmp = radix.SortHigh(order, p.orderTmp, k, k+bits.Len64(minAddr^maxAddr))
	} else {
		slices.SortFunc(order, func(a, b uint64) int { return cmp.Compare(p.batch[a].addr, p.batch[b].addr) })
	}
	mask := uint64(1)<<k - 1
	if !packed {
		mask = ^uint64(0)
	}
	p.spans = slices.Grow(p.spans[:0], n)[:n]
	// The addresses in sorted order go to the radix sort's scratch,
	// pages it has touched (when it used it).
	if cap(p.orderTmp) < len(order) {
		p.orderTmp = make([]uint64, len(order))
	}
	addrs := p.orderTmp[:len(order)]
	// Sized once for two frames an address (gcc -O2 output averages
	// fewer than that); more grow it. A window is answered and printed
	// on this goroutine: in two halves of the window at once (the upper
	// half of address order on another goroutine, the later half of input
	// order formatted by another) they cost more than they saved when
	// measured on two cores of a VM (a batch's 10,000 cold addresses of a
	// 20,000-function gcc binary 0.89-0.92× the time, 100,000 warm ones
	// 0.80-0.85×, on one goroutine): each window handed work to a sleeping
	// thread twice. A large batch is split once instead (flushHalves).
	if cap(p.store) < 2*len(order) {
		p.store = make([]symbolize.Frame, 0, 2*len(order))
	}
	var store []symbolize.Frame
	store, p.errs = p.answerSorted(order, mask, p.store[:0], p.errs, addrs)
	p.store, p.order = store, order // order and orderTmp: the radix sort's two arrays
	if err := p.printSorted(store); err != nil {
		return err
	}
	clear(p.errs)
	return nil
}

// printSorted prints the batch's answers (flushSorted's spans into store)
// in input order.
func (p *symPrinter) printSorted(store []symbolize.Frame) error {
	// With addr2line's default flags (-f -i, the batch command's), an
	// answer without error is appended straight into the writer's
	// buffer (appendGNUPlain); any other goes through one.
	plain := p.style == styleGNU && p.functions && p.inlines && !p.addresses && !p.pretty && !p.demangle && !p.basenames && !p.columns
	var b []byte
	if plain {
		b = p.w.AvailableBuffer()
	}
	for i, q := range p.batch {
		var r result
		if q.bad < 0 {
			a := p.spans[i]
			r.frames = store[a.start:a.end:a.end]
			if a.failed {
				r.err = p.errs[i]
			}
			if plain && r.err == nil {
				b = appendGNUPlain(b, r.frames)
				p.answered++
				if len(b) > cap(b)-1024 {
					p.w.Write(b)
					if p.w.Available() < 4096 {
						p.w.Flush()
					}
					b = p.w.AvailableBuffer()
				}
				continue
			}
		}
		if plain {
			p.w.Write(b)
		}
		if err := p.one(q, r); err != nil {
			return err
		}
		if plain {
			b = p.w.AvailableBuffer()
		}
	}
	if plain {
		p.w.Write(b)
	}
	return nil
}

// answerSorted answers the addresses of keys (flushSorted's sorted keys,
// the batch index under mask) into store, setting their spans and
// recording Symbolize's errors in errs (made when needed), through one
// SymbolizeBatch of the keys' addresses, written to addrs (len(keys) of
// room). It returns the extended store and errs.
func (p *symPrinter) answerSorted(keys []uint64, mask uint64, store []symbolize.Frame, errs map[int]error, addrs []uint64) ([]symbolize.Frame, map[int]error) {
	addrs = addrs[:len(keys)]
	for j, key := range keys {
		addrs[j] = p.batch[key&mask].addr
	}
	// The keys are in address order, and so are the loaded ranges: an
	// address outside them is answered nothing, as answer does.
	r, start := 0, len(store)
	done := func(j, end int, err error) {
		i := int(keys[j] & mask)
		if p.loaded != nil {
			a := addrs[j]
			for r < len(p.loaded) && a >= p.loaded[r][1] {
				r++
			}
			if r == len(p.loaded) || a < p.loaded[r][0] {
				p.spans[i] = answerSpan{0, 0, false}
				start = end
				return
			}
		}
		p.spans[i] = answerSpan{int32(start), int32(end), err != nil}
		start = end
		if err != nil {
			if errs == nil {
				errs = map[int]error{}
			}
			errs[i] = err
		}
	}
	store, err := p.sym.SymbolizeBatch(addrs, store, done)
	if err != nil {
		// Closed: every address has that error, as Symbolize gives it.
		for j := range keys {
			done(j, start, err)
		}
	}
	return store, errs
}

// answerSpan is where flushSorted keeps one address's frames:
// symPrinter.store[start:end]; failed when symPrinter.errs holds the
// address's error.
type answerSpan struct {
	start, end int32
	failed     bool
}

// result is one address's frames and Symbolize's error for it.
type result struct {
	frames []symbolize.Frame
	err    error
}

// answer appends the frames of addr to frames; nothing for an address
// outside the loaded sections.
func (p *symPrinter) answer(addr uint64, frames []symbolize.Frame) ([]symbolize.Frame, error) {
	if !p.inLoaded(addr) {
		return frames, nil
	}
	return p.sym.Symbolize(addr, frames)
}

// lookup is answer for the query q, into frames; the frames of a
// malformed word are none.
func (p *symPrinter) lookup(q query, frames []symbolize.Frame) result {
	if q.bad >= 0 {
		return result{frames: frames}
	}
	frames, err := p.answer(q.addr, frames)
	p.frames = frames
	return result{frames, err}
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
		d := hexDigit[c]
		if d > 0xf || a>>60 != 0 {
			return 0, false // not a hexadecimal digit, or more than 64 bits
		}
		a = a<<4 | uint64(d)
	}
	return a, true
}

// hexDigit is the value of each hexadecimal digit byte, 0xff for the
// other bytes (a table: random digits make a switch's branches
// mispredict).
var hexDigit = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c], t[c-'a'+'A'] = byte(c-'a'+10), byte(c-'a'+10)
	}
	return t
}()

// Output styles.
const (
	styleGNU       = iota // addr2line's
	styleLLVM             // llvm-symbolizer's default
	styleJSON             // llvm-symbolizer --output-style=JSON
	styleJSONLines        // --json: one object per line, with Inlined
)

// symOptions are the addr2line and llvm-symbolizer options symbolize
// takes.
type symOptions struct {
	style                                           int
	functions, inlines, demangle, addresses, pretty bool
	basenames, columns                              bool
}

// funcsFlag is -f / --functions: a boolean (addr2line's -f) that also
// takes llvm-symbolizer's --functions=none and --functions=linkage.
type funcsFlag struct{ on *bool }

func (f *funcsFlag) IsBoolFlag() bool { return true }
func (f *funcsFlag) String() string {
	if f.on == nil || *f.on {
		return "true"
	}
	return "false"
}
func (f *funcsFlag) Set(s string) error {
	switch s {
	case "true", "1", "linkage":
		*f.on = true
	case "false", "0", "none":
		*f.on = false
	case "short":
		return errors.New("--functions=short is not supported (names are the symbol table's or DWARF linkage names): use linkage or none")
	default:
		return fmt.Errorf("want true, false, none or linkage, got %q", s)
	}
	return nil
}

// expandShortFlags splits addr2line's bundled one-letter flags ("-fiCp",
// "-Cfe FILE") into separate flags for the flag package. Only bundles made
// entirely of symbolize's one-letter flags are split, the value-taking -e
// last.
func expandShortFlags(args []string) []string {
	var out []string
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) < 3 || a[0] != '-' || a[1] == '-' || strings.ContainsRune(a, '=') {
			out = append(out, a)
			continue
		}
		b := a[1:]
		ok := true
		for j, c := range b {
			if !strings.ContainsRune("fiCaps", c) && !(c == 'e' && j == len(b)-1) {
				ok = false
			}
		}
		if !ok {
			out = append(out, a)
			continue
		}
		for _, c := range b {
			out = append(out, "-"+string(c))
		}
	}
	return out
}

// loadedRanges returns the [start, end) ranges of path's allocated
// sections, and 8 or 16, the digits addr2line prints an address of its
// class with. An address outside every allocated section is answered
// "??" as addr2line answers it (the symbol table's last symbol, often
// _end, does not cover it). A relocatable object (whose sections all
// start at 0), a file without sections or one elfobj cannot read gives no
// ranges: then nothing is filtered.
func loadedRanges(path string) ([][2]uint64, int) {
	f, err := elfobj.Open(path)
	if err != nil {
		return nil, 16
	}
	defer f.Close()
	digits := 16
	if f.Class == elf.ELFCLASS32 {
		digits = 8
	}
	if f.Type == elf.ET_REL {
		return nil, digits
	}
	var r [][2]uint64
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC != 0 && s.Size > 0 && s.Addr+s.Size > s.Addr {
			r = append(r, [2]uint64{s.Addr, s.Addr + s.Size})
		}
	}
	return mergeRanges(r), digits
}

// mergeRanges sorts the half-open ranges r by start and joins those that
// overlap or touch (a segment's sections usually do), so that inLoaded
// checks a few ranges instead of every section. It keeps r non-nil when
// it was.
func mergeRanges(r [][2]uint64) [][2]uint64 {
	slices.SortFunc(r, func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
	out := r[:0]
	for _, x := range r {
		if n := len(out); n > 0 && x[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], x[1])
			continue
		}
		out = append(out, x)
	}
	return out
}

// inLoaded reports whether addr lies in an allocated section (always,
// when the file gave no ranges).
func (p *symPrinter) inLoaded(addr uint64) bool {
	if p.loaded == nil {
		return true
	}
	for _, r := range p.loaded {
		if addr >= r[0] && addr < r[1] {
			return true
		}
	}
	return false
}

// jsonFrame and jsonAnswer are the JSON output in llvm-symbolizer's field
// names, in its (alphabetical) order; Inlined only with --json.
// StartAddress, StartFileName, StartLine and Discriminator are not known
// to package symbolize: they are "", "", 0 and 0, llvm-symbolizer's own
// values for unknown.
type jsonFrame struct {
	Column        uint32
	Discriminator uint32
	FileName      string
	FunctionName  string
	Inlined       *bool `json:",omitempty"`
	Line          uint32
	StartAddress  string
	StartFileName string
	StartLine     uint32
}

type jsonError struct{ Message string }

type jsonAnswer struct {
	Address    string      `json:",omitempty"`
	Error      any         `json:",omitempty"` // a string with --json, llvm-symbolizer's {"Message"} otherwise
	ModuleName string      `json:""`
	Symbol     []jsonFrame `json:",omitempty"`
}

// one answers one address. Like addr2line it answers every address and
// reports the malformed ones at the end; like addr2line it prints "??"
// for an unknown function, "??:0" when nothing is known about the
// address, and "FILE:?" for a known place without a line.
func (p *symPrinter) one(q query, r result) error {
	addr, ok := q.addr, q.bad < 0
	frames := r.frames
	switch {
	case !ok:
		p.bad = append(p.bad, p.words[q.bad])
		frames = frames[:0]
	case r.err != nil && !errors.Is(r.err, symbolize.ErrNoInfo):
		// Malformed debug information fails only the addresses it
		// covers: they get addr2line's "??" answer, and the first
		// error is reported at the end.
		if errors.Is(r.err, symbolize.ErrClosed) {
			return r.err
		}
		if p.failed == 0 {
			p.firstErr = fmt.Errorf("address %#x: %w", addr, r.err)
		}
		p.failed++
		frames = frames[:0]
	}
	if !p.inlines && len(frames) > 1 {
		if p.style == styleLLVM || p.style == styleJSON {
			// llvm-symbolizer --no-inlines names the outermost
			// function (the symbol table's) at the innermost place.
			frames[0].Function = frames[len(frames)-1].Function
		}
		frames = frames[:1]
		frames[0].Inlined = false
	}
	if p.demangle || p.basenames {
		for i := range frames {
			if p.demangle {
				frames[i].Function = p.demangleName(frames[i].Function)
			}
			if p.basenames && frames[i].File != "" {
				frames[i].File = filepath.Base(frames[i].File)
			}
		}
	}
	p.answered++
	switch p.style {
	case styleJSON, styleJSONLines:
		return p.json(q, addr, ok, frames)
	case styleLLVM:
		p.llvm(addr, ok, q, frames)
		return nil
	}
	p.gnu(addr, frames)
	return nil
}

// json prints one answer as llvm-symbolizer --output-style=JSON does (or
// as a line of --json).
func (p *symPrinter) json(q query, addr uint64, ok bool, frames []symbolize.Frame) error {
	lines := p.style == styleJSONLines
	if ok && p.jsonPlain(frames) {
		p.jsonFast(addr, frames, lines)
		return nil
	}
	a := jsonAnswer{Address: fmt.Sprintf("%#x", addr), ModuleName: p.file}
	switch {
	case !ok && lines:
		a.Address, a.Error = p.words[q.bad], "not a hexadecimal address"
	case !ok:
		a.Address, a.Error = "", jsonError{"unable to parse arguments: " + p.words[q.bad]}
	case len(frames) == 0:
		a.Symbol = []jsonFrame{{}}
	}
	for _, f := range frames {
		j := jsonFrame{FunctionName: f.Function, FileName: f.File, Line: f.Line, Column: f.Column}
		if lines {
			in := f.Inlined
			j.Inlined = &in
		}
		a.Symbol = append(a.Symbol, j)
	}
	if lines && a.Symbol != nil && a.Symbol[0].Inlined == nil {
		f := false
		a.Symbol[0].Inlined = &f
	}
	if p.array && p.answered > 1 {
		p.w.WriteByte(',')
	}
	// Names keep their <, > and & as llvm-symbolizer writes them.
	p.jbuf.Reset()
	enc := json.NewEncoder(&p.jbuf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(a); err != nil {
		return err
	}
	b := p.jbuf.Bytes()
	if p.array {
		b = b[:len(b)-1] // Encode ends with a newline
	}
	p.w.Write(b)
	return nil
}

// jsonPlain reports whether the strings of an answer (the module's and
// the frames' names) need no escaping in JSON: printable ASCII without
// quote and backslash, which encoding/json writes as they are. Then
// jsonFast formats the answer; otherwise json's encoder does.
func (p *symPrinter) jsonPlain(frames []symbolize.Frame) bool {
	if !p.filePlain {
		return false
	}
	for _, f := range frames {
		if !jsonPlainString(f.Function) || !jsonPlainString(f.File) {
			return false
		}
	}
	return true
}

func jsonPlainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// jsonFast appends one answer of a known address whose strings are plain
// (jsonPlain) as json's encoder writes jsonAnswer: the same fields in the
// same order, nothing escaped, the newline only outside an array.
func (p *symPrinter) jsonFast(addr uint64, frames []symbolize.Frame, lines bool) {
	b := p.num[:0]
	if p.array && p.answered > 1 {
		b = append(b, ',')
	}
	b = append(b, `{"Address":"0x`...)
	b = strconv.AppendUint(b, addr, 16)
	b = append(b, `","ModuleName":"`...)
	b = append(b, p.file...)
	b = append(b, `","Symbol":[`...)
	one := [1]symbolize.Frame{}
	if len(frames) == 0 {
		frames = one[:] // llvm-symbolizer's one empty frame
	}
	for i, f := range frames {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"Column":`...)
		b = strconv.AppendUint(b, uint64(f.Column), 10)
		b = append(b, `,"Discriminator":0,"FileName":"`...)
		b = append(b, f.File...)
		b = append(b, `","FunctionName":"`...)
		b = append(b, f.Function...)
		b = append(b, '"')
		if lines {
			b = append(b, `,"Inlined":`...)
			b = strconv.AppendBool(b, f.Inlined)
		}
		b = append(b, `,"Line":`...)
		b = strconv.AppendUint(b, uint64(f.Line), 10)
		b = append(b, `,"StartAddress":"","StartFileName":"","StartLine":0}`...)
	}
	b = append(b, "]}"...)
	if !p.array {
		b = append(b, '\n')
	}
	p.num = b
	p.w.Write(b)
}

// gnu prints one answer as addr2line does with the same flags:
// [-a] the address (0x and 16 or 8 digits); per frame [-f] the function
// and file:line; with -p all on one line, "FUNCTION at FILE:LINE", the
// outer frames as " (inlined by) " lines. The fast path (the default
// flags) formats without fmt: it is the batch loop.
func (p *symPrinter) gnu(addr uint64, frames []symbolize.Frame) {
	b := p.num[:0]
	if p.addresses {
		b = append(b, "0x"...)
		h := strconv.AppendUint(nil, addr, 16)
		for n := len(h); n < p.addrDigits; n++ {
			b = append(b, '0')
		}
		b = append(b, h...)
		if p.pretty {
			b = append(b, ": "...)
		} else {
			b = append(b, '\n')
		}
	}
	if len(frames) == 0 {
		// addr2line's answer when nothing is found.
		if p.functions && p.pretty {
			b = append(b, "?? "...)
		} else if p.functions {
			b = append(b, "??\n"...)
		}
		b = append(b, "??:0\n"...)
	}
	b = p.appendFrames(b, frames, false)
	p.num = b
	p.w.Write(b)
}

// appendGNUPlain appends the answer gnu prints for frames with
// addr2line's -f -i and no other flag: per frame the function and
// FILE:LINE lines ("??" for unknown, FILE:? without a line); "??" and
// "??:0" for no frames.
func appendGNUPlain(b []byte, frames []symbolize.Frame) []byte {
	if len(frames) == 0 {
		return append(b, "??\n??:0\n"...)
	}
	for _, f := range frames {
		b = appendOr(b, f.Function, "??")
		b = append(b, '\n')
		b = appendOr(b, f.File, "??")
		b = append(b, ':')
		if f.Line == 0 {
			b = append(b, '?')
		} else {
			b = appendDecimal(b, f.Line)
		}
		b = append(b, '\n')
	}
	return b
}

// appendDecimal appends v in decimal, as strconv.AppendUint does: line
// numbers below 10,000 (nearly all) from a table of digit pairs without
// its call.
func appendDecimal(b []byte, v uint32) []byte {
	switch {
	case v < 10:
		return append(b, byte('0'+v))
	case v < 100:
		return append(b, digitPairs[2*v], digitPairs[2*v+1])
	case v < 1000:
		q, r := v/100, v%100
		return append(b, byte('0'+q), digitPairs[2*r], digitPairs[2*r+1])
	case v < 10000:
		q, r := v/100, v%100
		return append(b, digitPairs[2*q], digitPairs[2*q+1], digitPairs[2*r], digitPairs[2*r+1])
	}
	return strconv.AppendUint(b, uint64(v), 10)
}

// digitPairs is "00" to "99".
const digitPairs = "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"

// llvm prints one answer as llvm-symbolizer's default output style does:
// [-a] 0xADDR; per frame the function and FILE:LINE:COLUMN (-p: on one
// line, as gnu); then a blank line.
func (p *symPrinter) llvm(addr uint64, ok bool, q query, frames []symbolize.Frame) {
	b := p.num[:0]
	if !ok {
		// llvm-symbolizer echoes input it cannot parse.
		b = append(b, p.words[q.bad]...)
		b = append(b, "\n\n"...)
		p.num = b
		p.w.Write(b)
		return
	}
	if p.addresses {
		b = append(b, "0x"...)
		b = strconv.AppendUint(b, addr, 16)
		if p.pretty {
			b = append(b, ": "...)
		} else {
			b = append(b, '\n')
		}
	}
	if len(frames) == 0 {
		frames = []symbolize.Frame{{}}
	}
	b = p.appendFrames(b, frames, true)
	b = append(b, '\n')
	p.num = b
	p.w.Write(b)
}

// appendFrames appends one line per frame, innermost first: [-f] the
// function, then its place (appendPlace); with -p all on one line,
// "FUNCTION at PLACE", the outer frames after " (inlined by) ". The
// style of both tools, llvm choosing llvm-symbolizer's places.
func (p *symPrinter) appendFrames(b []byte, frames []symbolize.Frame, llvm bool) []byte {
	for i, f := range frames {
		if p.pretty && i > 0 {
			b = append(b, " (inlined by) "...)
		}
		if p.functions {
			b = appendOr(b, f.Function, "??")
			if p.pretty {
				b = append(b, " at "...)
			} else {
				b = append(b, '\n')
			}
		}
		b = p.appendPlace(b, f, llvm)
		b = append(b, '\n')
	}
	return b
}

// appendPlace appends FILE:LINE (with -columns FILE:LINE:COLUMN): "??:0"
// for nothing known, FILE:? for a file without a line in addr2line's
// style, and llvm-symbolizer's ??:0:0 and FILE:0:0 in its.
func (p *symPrinter) appendPlace(b []byte, f symbolize.Frame, llvm bool) []byte {
	b = appendOr(b, f.File, "??")
	b = append(b, ':')
	switch {
	case llvm:
		b = strconv.AppendUint(b, uint64(f.Line), 10)
		b = append(b, ':')
		b = strconv.AppendUint(b, uint64(f.Column), 10)
	case f.Line == 0:
		b = append(b, '?')
	default:
		b = strconv.AppendUint(b, uint64(f.Line), 10)
		if p.columns && f.Column != 0 {
			b = append(b, ':')
			b = strconv.AppendUint(b, uint64(f.Column), 10)
		}
	}
	return b
}

func appendOr(b []byte, s, unknown string) []byte {
	if s == "" {
		return append(b, unknown...)
	}
	return append(b, s...)
}

// demangleName demangles an Itanium C++ or Rust name as c++filt does
// (package demangle; a name that is not mangled is returned as it is).
// In llvm-symbolizer's styles a clone's suffix is spelled as LLVM's
// demangler spells it, "f() (.cold)", rather than c++filt's
// "f() [clone .cold]".
func (p *symPrinter) demangleName(name string) string {
	if p.style == styleLLVM || p.style == styleJSON {
		if i := strings.IndexByte(name, '.'); i > 2 && strings.HasPrefix(name, "_Z") {
			if d, err := demangle.ToString(name[:i]); err == nil {
				return d + " (" + name[i:] + ")"
			}
		}
	}
	return demangle.Filter(name)
}

// alias returns the usage of flag name i of a list of synonyms: the
// first's usage, "the same as -FIRST" for the others.
func alias(i int, first, usage string) string {
	if i == 0 {
		return usage
	}
	return "the same as -" + first
}
