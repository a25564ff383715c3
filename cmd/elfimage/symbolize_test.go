package main

import (
	"bufio"
	"bytes"
	"cmp"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/elfimage/elfimage/internal/radix"
	"github.com/elfimage/elfimage/internal/tooltest"
	"github.com/elfimage/elfimage/symbolize"
)

// TestSymbolizeGCC: on a gcc -O2 -g binary (not ours), `symbolize --json`
// gives llvm-symbolizer --inlining's frames, and the default output prints
// each of those frames as an addr2line -f -i function and file:line pair.
func TestSymbolizeGCC(t *testing.T) {
	gcc := tooltest.Require(t, "gcc")
	llvm := tooltest.Require(t, "llvm-symbolizer")
	srcs, _ := filepath.Glob("../../symbolize/testdata/csrc/*.c")
	bin := filepath.Join(t.TempDir(), "prog")
	if msg, err := exec.Command(gcc, append([]string{"-O2", "-g", "-o", bin}, srcs...)...).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, msg)
	}
	// Every 7th byte of every sized function.
	var addrs []string
	for _, s := range funcSymbols(t, bin) {
		for o := uint64(0); o < s.Size; o += 7 {
			addrs = append(addrs, fmt.Sprintf("%#x", s.Value+o))
		}
	}
	code, ours, errOut := runCLI(t, append([]string{"symbolize", "--json", "-e", bin}, addrs...)...)
	if code != 0 {
		t.Fatal(errOut)
	}
	theirs, err := exec.Command(llvm, append([]string{"--inlining", "--output-style=JSON", "--obj=" + bin}, addrs...)...).Output()
	if err != nil {
		t.Fatal(err)
	}
	type frame struct {
		FunctionName, FileName string
		Line, Column           uint32
	}
	type answer struct {
		Address string
		Symbol  []frame
	}
	var want []answer
	if err := json.Unmarshal(theirs, &want); err != nil {
		t.Fatal(err)
	}
	var got []answer
	sc := bufio.NewScanner(strings.NewReader(ours))
	for sc.Scan() {
		var a answer
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		got = append(got, a)
	}
	if len(got) != len(want) || len(got) != len(addrs) {
		t.Fatalf("%d answers, llvm-symbolizer %d, %d addresses", len(got), len(want), len(addrs))
	}
	inlined, pairs := 0, 0
	for i := range got {
		if fmt.Sprint(got[i].Symbol) != fmt.Sprint(want[i].Symbol) {
			t.Errorf("%s: ours %v, llvm-symbolizer %v", addrs[i], got[i].Symbol, want[i].Symbol)
		}
		if len(got[i].Symbol) > 1 {
			inlined++
		}
		pairs += len(got[i].Symbol)
	}
	if inlined == 0 {
		t.Error("no inlined frames")
	}
	// Default output: the same frames as function / file:line pairs.
	code, text, errOut := runCLI(t, append([]string{"symbolize", "-e", bin}, addrs...)...)
	if code != 0 {
		t.Fatal(errOut)
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) != 2*pairs {
		t.Fatalf("%d lines of output for %d frames", len(lines), pairs)
	}
	k := 0
	for _, a := range got {
		for _, f := range a.Symbol {
			name, file := f.FunctionName, f.FileName
			if name == "" {
				name = "??"
			}
			if file == "" {
				file = "??"
			}
			loc := fmt.Sprintf("%s:%d", file, f.Line)
			if f.Line == 0 {
				loc = file + ":?"
			}
			if lines[k] != name || lines[k+1] != loc {
				t.Errorf("%s: printed %q %q, want %q %q", a.Address, lines[k], lines[k+1], name, loc)
			}
			k += 2
		}
	}
	// -i=false: one pair per address.
	code, text, _ = runCLI(t, append([]string{"symbolize", "-i=false", "-e", bin}, addrs...)...)
	if n := strings.Count(text, "\n"); code != 0 || n != 2*len(addrs) {
		t.Errorf("-i=false: exit %d, %d lines for %d addresses", code, n, len(addrs))
	}
}

// TestParseAddr: addresses parse as strconv.ParseUint(s, 16, 64) after an
// optional 0x or 0X, which is what addr2line accepts.
func TestParseAddr(t *testing.T) {
	for _, s := range []string{"0", "0x0", "0X1f", "401000", "0xffffffffffffffff", "0x10000000000000000",
		"00000000000000000000abc", "0x", "0x\n", "x10", "0xg", "ffffffffffffffff", "1ffffffffffffffff", "0001ffffffffffffffff", "-1", "+1", "1_0", "ffff ", "0x0x1", "FfFf"} {
		want, werr := strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X"), 16, 64)
		got, ok := parseAddr([]byte(s))
		if ok != (werr == nil) || (ok && got != want) {
			t.Errorf("parseAddr(%q) = %#x, %v; strconv: %#x, %v", s, got, ok, want, werr)
		}
		// A line of one word: lineAddr's pass agrees with the words'
		// (where it does not decline the line).
		for _, line := range []string{s, s + "\n", s + "\r\n", " " + s + "\n"} {
			var p symPrinter
			p.add([]byte(line))
			var oracle []query
			bad := int32(0)
			for _, w := range strings.Fields(line) {
				if a, ok := parseAddr([]byte(w)); ok {
					oracle = append(oracle, query{addr: a, bad: -1})
				} else {
					oracle = append(oracle, query{bad: bad})
					bad++
				}
			}
			if !slices.Equal(p.batch, oracle) {
				t.Errorf("line %q: words %v, want %v", line, p.batch, oracle)
			}
			if a, ok := lineAddr([]byte(line)); ok && (len(oracle) != 1 || oracle[0] != query{addr: a, bad: -1}) {
				t.Errorf("lineAddr(%q) = %#x, want the words' %v", line, a, oracle)
			}
		}
	}
}

// TestSymbolizeInputShapes: standard input with several words per line,
// tabs, no-break spaces, CRLF line ends, malformed words among the addresses and a line
// longer than the read buffer gives, for the valid addresses, the answers
// the same addresses give as arguments, in order; the malformed words get
// addr2line's "??" answer and are listed in the error.
func TestSymbolizeInputShapes(t *testing.T) {
	dir := t.TempDir()
	if code, _, errOut := runCLI(t, "demo", "-o", dir); code != 0 {
		t.Fatal(errOut)
	}
	path := filepath.Join(dir, "demo.elf")
	var addrs []string
	for _, s := range funcSymbols(t, path) {
		addrs = append(addrs, fmt.Sprintf("%#x", s.Value), fmt.Sprintf("%X", s.Value+s.Size/2))
	}
	// 20,000 words on one line: more than the 64 KiB read buffer.
	var long []string
	for len(long) < 20000 {
		long = append(long, addrs...)
	}
	long = long[:20000]
	all := append(append([]string{}, addrs...), long...)
	all = append(all, "zz", addrs[0])
	code, want, _ := runCLI(t, append([]string{"symbolize", "-e", path}, all...)...)
	if code == 0 || !strings.Contains(want, "??\n??:0\n") {
		t.Fatalf("arguments with a malformed word: exit %d, no ?? answer", code)
	}
	var in strings.Builder
	for i, a := range addrs {
		in.WriteString(a)
		in.WriteString([]string{"\n", " ", "\t", "\r\n", "\u00a0"}[i%5])
	}
	in.WriteString("\n" + strings.Join(long, " ") + "\n  zz\t" + addrs[0] + "\r\n")
	stdin, err := os.CreateTemp(dir, "addrs")
	if err != nil {
		t.Fatal(err)
	}
	stdin.WriteString(in.String())
	stdin.Seek(0, 0)
	saved := os.Stdin
	os.Stdin = stdin
	defer func() { os.Stdin = saved }()
	code, got, errOut := runCLI(t, "symbolize", "-e", path)
	if code == 0 || !strings.Contains(errOut, `"zz"`) {
		t.Errorf("stdin: exit %d, error %q: want failure naming \"zz\"", code, errOut)
	}
	if got != want {
		t.Errorf("stdin answers (%d lines) differ from the arguments' (%d lines)", strings.Count(got, "\n"), strings.Count(want, "\n"))
	}
}

// funcSymbols returns the STT_FUNC symbols of the ELF file at path with a
// nonzero address and size.
func funcSymbols(t *testing.T, path string) []elf.Symbol {
	t.Helper()
	_, syms := tooltest.ELFSymbols(t, path)
	var out []elf.Symbol
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Size > 0 && s.Value != 0 {
			out = append(out, s)
		}
	}
	return out
}

// TestSymbolizeInteractive: a program that drives symbolize through pipes,
// writing one address and waiting for its answer before writing the next,
// gets every answer without closing its end of the input.
func TestSymbolizeInteractive(t *testing.T) {
	dir := t.TempDir()
	if code, _, errOut := runCLI(t, "demo", "-o", dir); code != 0 {
		t.Fatal(errOut)
	}
	path := filepath.Join(dir, "demo.elf")
	var syms []elf.Symbol // the program's procedures: the runtime's (%...) have no lines
	for _, s := range funcSymbols(t, path) {
		if !strings.HasPrefix(s.Name, "%") {
			syms = append(syms, s)
		}
	}
	if len(syms) == 0 {
		t.Fatal("no procedures in the demo image")
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdin
	os.Stdin = inR
	defer func() { os.Stdin = saved }()
	outR, outW := io.Pipe()
	done := make(chan int)
	go func() {
		var stderr bytes.Buffer
		code := run([]string{"symbolize", "-e", path}, outW, &stderr)
		outW.Close()
		done <- code
	}()
	answers := bufio.NewReader(outR)
	for i, s := range syms[:min(len(syms), 5)] {
		fmt.Fprintf(inW, "%#x\n", s.Value)
		lines := make(chan [2]string, 1)
		go func() {
			fn, _ := answers.ReadString('\n')
			pos, _ := answers.ReadString('\n')
			lines <- [2]string{fn, pos}
		}()
		select {
		case l := <-lines:
			if strings.TrimSpace(l[0]) != s.Name || !strings.Contains(l[1], ".scm:") {
				t.Errorf("address %d (%s): answer %q", i, s.Name, l)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no answer to address %d while the input stays open", i)
		}
	}
	inW.Close()
	if code := <-done; code != 0 {
		t.Errorf("exit %d", code)
	}
}

// TestSymbolizeArguments: every argument gets one answer, for its first
// word, as with addr2line and llvm-symbolizer; an empty argument is
// malformed and named in the error.
func TestSymbolizeArguments(t *testing.T) {
	dir := t.TempDir()
	if code, _, errOut := runCLI(t, "demo", "-o", dir); code != 0 {
		t.Fatal(errOut)
	}
	path := filepath.Join(dir, "demo.elf")
	good := fmt.Sprintf("%#x", funcSymbols(t, path)[0].Value)
	code, out, errOut := runCLI(t, "symbolize", "-e", path, good, "", " "+good+" 0x1", good)
	if code == 0 || errOut != "elfimage symbolize: not hexadecimal addresses: [\"\"]\n" {
		t.Errorf("exit %d, error %q: want failure naming the empty argument only", code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 8 || lines[2] != "??" || lines[3] != "??:0" || lines[0] != lines[4] || lines[0] != lines[6] || lines[0] == "??" {
		t.Errorf("want 4 answers (the 2nd ??, the others alike), got:\n%s", out)
	}
}

// TestSymbolizeMalformedUnit: an address in a compile unit whose DIEs
// cannot be read gets addr2line's "??" answer, the other addresses their
// answers, and the error names the unit's problem at the end.
func TestSymbolizeMalformedUnit(t *testing.T) {
	gcc := tooltest.Require(t, "gcc")
	// Two functions, each in its own unit; the second unit's subprogram
	// uses abbreviation code 9, which its table does not define.
	var s strings.Builder
	s.WriteString("\t.text\n")
	for i := range 2 {
		fmt.Fprintf(&s, "\t.globl f%d\n\t.type f%d,@function\nf%d:\n\t.fill 16,1,0x90\n\t.size f%d,16\n", i, i, i, i)
	}
	s.WriteString("\t.globl _start\n_start:\n\tret\n" +
		"\t.section .debug_abbrev,\"\",@progbits\n" +
		"\t.uleb128 1\n\t.uleb128 0x11\n\t.byte 1\n\t.uleb128 0x11\n\t.uleb128 0x01\n\t.uleb128 0x12\n\t.uleb128 0x06\n\t.byte 0,0\n" +
		"\t.uleb128 2\n\t.uleb128 0x2e\n\t.byte 0\n\t.uleb128 0x03\n\t.uleb128 0x08\n\t.uleb128 0x11\n\t.uleb128 0x01\n\t.uleb128 0x12\n\t.uleb128 0x06\n\t.byte 0,0\n\t.byte 0\n" +
		"\t.section .debug_info,\"\",@progbits\n")
	for i, code := range []int{2, 9} {
		fmt.Fprintf(&s, "\t.long .Le%d - .Ls%d\n.Ls%d:\n\t.value 4\n\t.long 0\n\t.byte 8\n\t.uleb128 1\n\t.quad f%d\n\t.long 16\n"+
			"\t.uleb128 %d\n\t.string \"f%d\"\n\t.quad f%d\n\t.long 16\n\t.byte 0\n.Le%d:\n", i, i, i, i, code, i, i, i)
	}
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "two.s"), filepath.Join(dir, "two")
	if err := os.WriteFile(src, []byte(s.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if msg, err := exec.Command(gcc, "-nostdlib", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, msg)
	}
	var args []string
	for _, sy := range funcSymbols(t, bin) {
		args = append(args, fmt.Sprintf("%#x", sy.Value+4))
	}
	if len(args) != 2 {
		t.Fatalf("%d functions, want 2", len(args))
	}
	code, out, errOut := runCLI(t, append([]string{"symbolize", "-e", bin}, args...)...)
	if code == 0 || !strings.Contains(errOut, "1 addresses answered ??") || !strings.Contains(errOut, "abbrev code") {
		t.Errorf("exit %d, error %q: want failure reporting the malformed unit", code, errOut)
	}
	if want := "f0\n??:?\n??\n??:0\n"; out != want {
		t.Errorf("output %q, want %q", out, want)
	}

	// A batch large enough to be answered in address order (flushSorted)
	// and printed in input order: good, malformed-unit, unknown and
	// malformed words mixed, each answered as when asked alone, the
	// failures counted and the malformed word named.
	answers := map[string]string{args[0]: "f0\n??:?\n", args[1]: "??\n??:0\n", "0x1": "??\n??:0\n"}
	var batch []string
	var want strings.Builder
	failed := 0
	for i := range 3 * sortedMin {
		a := []string{args[1], args[0], "0x1", args[0]}[i*7%4]
		switch i {
		case sortedMin:
			a = "zz"
		case 2*sortedMin + 1: // in the later half
			a = "yy"
		}
		batch = append(batch, a)
		want.WriteString(cmp.Or(answers[a], "??\n??:0\n"))
		if a == args[1] {
			failed++
		}
	}
	// In one window of the batch, then in three (the words zz and yy in
	// the second and third); on one goroutine, then in two halves, the
	// later on another goroutine (zz in the first, yy in the second), and
	// in two halves both answered by the first goroutine (a helper that
	// never started).
	defer func(win, split, helper int) { sortedWindow, splitMin, splitHelper = win, split, helper }(sortedWindow, splitMin, splitHelper)
	for _, win := range []int{sortedWindow, sortedMin + 5} {
		for _, mode := range []struct {
			split, helper int
		}{{splitMin, helperAsync}, {sortedMin, helperFirst}, {sortedMin, helperNever}} {
			sortedWindow, splitMin, splitHelper = win, mode.split, mode.helper
			code, out, errOut = runCLI(t, append([]string{"symbolize", "-e", bin}, batch...)...)
			if code == 0 || !strings.Contains(errOut, fmt.Sprintf("%d addresses answered ??", failed)) || !strings.Contains(errOut, "abbrev code") || !strings.Contains(errOut, `["zz" "yy"]`) {
				t.Errorf("batch, windows of %d, halves from %d (helper mode %d): exit %d, error %q: want failure reporting %d addresses of the malformed unit and the words zz, yy", win, mode.split, mode.helper, code, errOut, failed)
			}
			if out != want.String() {
				t.Errorf("batch, windows of %d, halves from %d (helper mode %d): output differs from the addresses' answers one at a time:\n%s", win, mode.split, mode.helper, out)
			}
		}
	}
	// JSON's array of answers: the commas depend on the count of answers
	// before each, which the later half's printer is given.
	sortedWindow = sortedMin + 5
	var jsons [2]string
	for i, split := range []int{1 << 30, sortedMin} {
		splitMin, splitHelper = split, helperFirst
		_, jsons[i], _ = runCLI(t, append([]string{"symbolize", "--output-style=JSON", "-e", bin}, batch...)...)
	}
	if jsons[0] != jsons[1] || !json.Valid([]byte(jsons[1])) {
		t.Errorf("JSON in two halves differs from one goroutine's, or is not valid JSON:\n%s\nwant\n%s", jsons[1], jsons[0])
	}
}

// TestSymbolizeWordSplit: a line of standard input splits into the words
// strings.Fields gives (white space as unicode.IsSpace, invalid UTF-8 a
// word's byte), whatever mix of ASCII, other spaces and multi-byte text.
func TestSymbolizeWordSplit(t *testing.T) {
	parts := []string{"0x1f", "zz", " ", "\t", "\r\n", "\v\f", "\u00a0", "\u2003", "\u0085", "é", "\xff", "\xe2\x80", "401000"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(parts[rng.IntN(len(parts))])
		}
		line := b.String()
		var p symPrinter
		p.add([]byte(line))
		var got []string
		for _, q := range p.batch {
			if q.bad >= 0 {
				got = append(got, p.words[q.bad])
			} else {
				got = append(got, "#"+strconv.FormatUint(q.addr, 16))
			}
		}
		var want []string
		for _, w := range strings.Fields(line) {
			if a, ok := parseAddr([]byte(w)); ok {
				want = append(want, "#"+strconv.FormatUint(a, 16))
			} else {
				want = append(want, w)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("line %q: words %q, strings.Fields %q", line, got, want)
		}
	}
}

func BenchmarkBatchOrder(b *testing.B) {
	rng := rand.New(rand.NewPCG(11, 12))
	keys := make([]uint64, 10000)
	for i := range keys {
		keys[i] = rng.Uint64N(1<<23)<<14 | uint64(i)
	}
	work := make([]uint64, len(keys))
	b.Run("radix", func(b *testing.B) {
		w, tmp := work, []uint64(nil)
		for b.Loop() {
			copy(w, keys)
			w, tmp = radix.Sort(w, tmp, 37) // the two arrays, as flushSorted keeps them
		}
	})
	b.Run("slices.Sort", func(b *testing.B) {
		for b.Loop() {
			copy(work, keys)
			slices.Sort(work)
		}
	})
}

// failAfter is a writer that accepts n bytes and then fails, as stdout
// on a full device does.
type failAfter struct{ n int }

var errDeviceFull = errors.New("no space left on device")

func (f *failAfter) Write(b []byte) (int, error) {
	if len(b) > f.n {
		k := f.n
		f.n = 0
		return k, errDeviceFull
	}
	f.n -= len(b)
	return len(b), nil
}

// TestSymbolizeWriteError: answers that cannot be written (stdout on a
// full device) fail the command with the write's error, for addresses
// given as arguments and on standard input, whether the failure comes
// at the first write or after some answers.
func TestSymbolizeWriteError(t *testing.T) {
	dir := t.TempDir()
	if code, _, errOut := runCLI(t, "demo", "-o", dir); code != 0 {
		t.Fatal(errOut)
	}
	path := filepath.Join(dir, "demo.elf")
	good := fmt.Sprintf("%#x", funcSymbols(t, path)[0].Value)
	var many strings.Builder
	for range 20000 {
		many.WriteString(good + "\n")
	}
	for _, n := range []int{0, 100, 70000} {
		var stderr bytes.Buffer
		args := []string{"symbolize", "-e", path}
		for range 10000 {
			args = append(args, good)
		}
		if code := run(args, &failAfter{n}, &stderr); code != 1 || !strings.Contains(stderr.String(), errDeviceFull.Error()) {
			t.Errorf("arguments, failing after %d bytes: exit %d, error %q: want 1 and the write's error", n, code, stderr.String())
		}
		f, err := os.CreateTemp(dir, "in")
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(many.String())
		f.Seek(0, 0)
		saved := os.Stdin
		os.Stdin = f
		stderr.Reset()
		code := run([]string{"symbolize", "-e", path}, &failAfter{n}, &stderr)
		os.Stdin = saved
		f.Close()
		if code != 1 || !strings.Contains(stderr.String(), errDeviceFull.Error()) {
			t.Errorf("standard input, failing after %d bytes: exit %d, error %q: want 1 and the write's error", n, code, stderr.String())
		}
	}
}

// TestSymbolizeJSONFast: an answer whose strings need no escaping is
// written by jsonFast exactly as encoding/json writes it (the same
// printer with the module's name marked as needing escapes takes the
// encoder), in --output-style=JSON alone and in an array and in --json,
// for no frames, one, inlined ones, and names with <, > and &; names
// that need escapes take the encoder.
func TestSymbolizeJSONFast(t *testing.T) {
	answers := [][]symbolize.Frame{
		nil,
		{{Function: "f", File: "/a/b.c", Line: 3, Column: 7}},
		{{Function: "mix4", File: "/tmp/f004.c", Line: 1, Column: 49, Inlined: true}, {Function: "fn<int>&", File: "x.c", Line: 2752, Column: 9}},
		{{Function: "", File: "", Line: 0}},
		{{Function: "caf\u00e9", File: "q\"uote\\.c\t", Line: 1}},
		// One byte that needs an escape each, so that each of
		// jsonPlainString's tests is needed.
		{{Function: "q\"uote", File: "a.c", Line: 1}},
		{{Function: "f", File: "back\\slash.c", Line: 1}},
		{{Function: "tab\tbed", File: "a.c", Line: 1}},
		{{Function: "f", File: "caf\u00e9.c", Line: 1}},
		{{Function: "del\x7f", File: "invalid\xff.c", Line: 1}},
		{{Function: "sep\u2028", File: "a.c", Line: 1}},
	}
	for _, style := range []int{styleJSON, styleJSONLines} {
		for _, array := range []bool{false, true} {
			var got, want bytes.Buffer
			fast := symPrinter{w: bufio.NewWriter(&got), file: "/bin/mod", array: array, filePlain: true}
			slow := symPrinter{w: bufio.NewWriter(&want), file: "/bin/mod", array: array}
			fast.style, slow.style = style, style
			for i, fr := range answers {
				for _, p := range []*symPrinter{&fast, &slow} {
					p.answered++
					if err := p.json(query{addr: uint64(0x1000 * i), bad: -1}, uint64(0x1000*i), true, slices.Clone(fr)); err != nil {
						t.Fatal(err)
					}
				}
			}
			fast.w.Flush()
			slow.w.Flush()
			if got.String() != want.String() || got.Len() == 0 {
				t.Errorf("style %d, array %v: jsonFast wrote\n%s\nencoding/json\n%s", style, array, got.String(), want.String())
			}
		}
	}
	// A module name that needs escapes (filePlain as runSymbolize sets
	// it) takes the encoder: the answer decodes to the name.
	var out bytes.Buffer
	const mod = "/tmp/a\"b\\c"
	p := symPrinter{w: bufio.NewWriter(&out), file: mod, filePlain: jsonPlainString(mod)}
	p.style = styleJSON
	p.answered++
	if err := p.json(query{addr: 0x1000, bad: -1}, 0x1000, true, []symbolize.Frame{{Function: "f", File: "a.c", Line: 1}}); err != nil {
		t.Fatal(err)
	}
	p.w.Flush()
	var a jsonAnswer
	if err := json.Unmarshal(out.Bytes(), &a); err != nil || a.ModuleName != mod {
		t.Errorf("module %q: wrote %s (%v)", mod, out.String(), err)
	}
}

// TestAppendDecimal: appendDecimal appends what strconv.AppendUint does,
// for every value below 100,000, around each power of ten and at the
// largest.
func TestAppendDecimal(t *testing.T) {
	check := func(v uint32) {
		if got, want := string(appendDecimal([]byte("x"), v)), "x"+strconv.FormatUint(uint64(v), 10); got != want {
			t.Fatalf("appendDecimal(%d) = %q, want %q", v, got, want)
		}
	}
	for v := uint32(0); v < 100000; v++ {
		check(v)
	}
	for p := uint64(10); p <= 1<<32; p *= 10 {
		for d := uint64(0); d < 3; d++ {
			if p-1+d < 1<<32 {
				check(uint32(p - 1 + d))
			}
		}
	}
	check(^uint32(0))
}
