package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/elfimage/elfimage"
)

// build compiles src (named file), links and loads the image; the image
// is closed when the test ends.
func build(t testing.TB, file string, src []byte, opts Options) *elfimage.Image {
	t.Helper()
	mod, err := Compile(file, "/bf", src, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := elfimage.Link(mod, elfimage.LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	img, err := elfimage.Load(file+".elf", b, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { img.Close() })
	return img
}

// jit runs img's program (src is its source) with input on a pipe to ,
// and returns what . wrote to another pipe, and Execute's error.
func jit(t testing.TB, img *elfimage.Image, file string, src, input []byte) ([]byte, error) {
	t.Helper()
	var in, out [2]int
	if err := syscall.Pipe2(in[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Pipe2(out[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	inR, inW := os.NewFile(uintptr(in[0]), "in"), os.NewFile(uintptr(in[1]), "in")
	outR, outW := os.NewFile(uintptr(out[0]), "out"), os.NewFile(uintptr(out[1]), "out")
	defer inR.Close()
	defer outR.Close()
	go func() {
		inW.Write(input) // fails with EPIPE if the program stops reading early
		inW.Close()
	}()
	got := make(chan []byte)
	go func() {
		var b bytes.Buffer
		b.ReadFrom(outR)
		got <- b.Bytes()
	}()
	err := Execute(img, file, src, int(inR.Fd()), int(outW.Fd()))
	outW.Close()
	return <-got, err
}

// A refError is a failure of the reference interpreter, at a command.
type refError struct {
	line, col int
	msg       string
}

func (e *refError) Error() string { return fmt.Sprintf("%d:%d: %s", e.line, e.col, e.msg) }

var errSteps = errors.New("step limit reached")

// interpret runs src the plainest way, one command at a time, for at most
// maxSteps commands: an oracle that shares nothing with the compiler.
func interpret(src, input []byte, eof, maxSteps int) ([]byte, error) {
	type cmd struct {
		op        byte
		line, col int
		match     int
	}
	var prog []cmd
	var open []int
	line, col := 1, 0
	for _, b := range src {
		col++
		if b == '\n' {
			line, col = line+1, 0
			continue
		}
		if !strings.ContainsRune("+-<>[].,", rune(b)) {
			continue
		}
		prog = append(prog, cmd{op: b, line: line, col: col})
		switch b {
		case '[':
			open = append(open, len(prog)-1)
		case ']':
			if len(open) == 0 {
				return nil, &refError{line, col, "unmatched ]"}
			}
			o := open[len(open)-1]
			open = open[:len(open)-1]
			prog[o].match, prog[len(prog)-1].match = len(prog)-1, o
		}
	}
	if len(open) > 0 {
		c := prog[open[len(open)-1]]
		return nil, &refError{c.line, c.col, "unmatched ["}
	}
	var tape [TapeLen]byte
	var out []byte
	p := 0
	for pc, steps := 0, 0; pc < len(prog); pc, steps = pc+1, steps+1 {
		if steps == maxSteps {
			return out, errSteps
		}
		c := prog[pc]
		switch c.op {
		case '+':
			tape[p]++
		case '-':
			tape[p]--
		case '>', '<':
			if c.op == '>' {
				p++
			} else {
				p--
			}
			if p < 0 || p >= TapeLen {
				return out, &refError{c.line, c.col, ErrOffTape.Error()}
			}
		case '[':
			if tape[p] == 0 {
				pc = c.match
			}
		case ']':
			if tape[p] != 0 {
				pc = c.match
			}
		case '.':
			out = append(out, tape[p])
		case ',':
			if len(input) > 0 {
				tape[p], input = input[0], input[1:]
			} else if eof != KeepCell {
				tape[p] = byte(eof)
			}
		}
	}
	return out, nil
}

// numbers is what testdata/numbers.b prints.
func numbers() []byte {
	var b bytes.Buffer
	for i := range 100 {
		fmt.Fprintf(&b, "%02d\n", i)
	}
	return b.Bytes()
}

// nonZero returns n pseudo-random bytes none of which is 0 (cat.b stops
// at a 0, which it cannot tell from the end of the input).
func nonZero(n int) []byte {
	b := make([]byte, n)
	x := uint32(1)
	for i := range b {
		x = x*1103515245 + 12345
		b[i] = byte(x>>16)%255 + 1
	}
	return b
}

// programs are the classic programs of testdata with an input and the
// output they must print, known without running any bf.
var programs = []struct {
	name      string
	input     []byte
	want      []byte
	reference bool // also compare with the reference interpreter (too slow for busy)
}{
	{"hello", nil, []byte("Hello, World!\n"), true},
	{"numbers", nil, numbers(), true},
	{"rev", []byte("one\ntwo\nthree\n"), []byte("\neerht\nowt\neno"), true},
	{"rev", nil, nil, true},
	{"cat", []byte("a line\nand another\n"), []byte("a line\nand another\n"), true},
	{"cat", nonZero(70000), nonZero(70000), true}, // more than a pipe holds (64 KiB)
	{"busy", nil, []byte("ok\n"), false},
}

// TestPrograms runs the classic programs compiled with and without
// folding, and checks their output against what they must print and
// against the reference interpreter.
func TestPrograms(t *testing.T) {
	for _, p := range programs {
		src, err := os.ReadFile(filepath.Join("testdata", p.name+".b"))
		if err != nil {
			t.Fatal(err)
		}
		for _, fold := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/%d/fold=%v", p.name, len(p.input), fold), func(t *testing.T) {
				img := build(t, p.name+".b", src, Options{Fold: fold})
				got, err := jit(t, img, p.name+".b", src, p.input)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, p.want) {
					t.Errorf("output %.200q, want %.200q", got, p.want)
				}
				if p.reference {
					ref, err := interpret(src, p.input, 0, 1e8)
					if err != nil || !bytes.Equal(ref, got) {
						t.Errorf("the reference interpreter printed %.200q (%v), the JIT %.200q", ref, err, got)
					}
				}
			})
		}
	}
}

// TestEOF: , at the end of the input stores 0, 255 or nothing, as
// Options.EOF says, and reads one byte at a time before that.
func TestEOF(t *testing.T) {
	src := []byte(strings.Repeat("+", 'x') + ",.,.") // cell = 'x'; read and print twice
	for _, tc := range []struct {
		eof  int
		want string
	}{{0, "a\x00"}, {255, "a\xff"}, {KeepCell, "aa"}} {
		img := build(t, "eof.b", src, Options{Fold: true, EOF: tc.eof})
		got, err := jit(t, img, "eof.b", src, []byte("a"))
		if err != nil || string(got) != tc.want {
			t.Errorf("eof %d: output %q (%v), want %q", tc.eof, got, err, tc.want)
		}
	}
}

// TestFold: folding changes the code, not what the program does: runs
// fold into one instruction each (the image is smaller), net-zero runs
// into nothing, [-] into a store, and runs never cross a line.
func TestFold(t *testing.T) {
	for _, tc := range []struct {
		src   string
		cmds  string // the commands parse returns, as op letters
		wantN []int
	}{
		{"+++--", "+", []int{1}},
		{"+-", "+", []int{0}},
		{">>><", ">", []int{2}},
		{"++\n++", "++", []int{2, 2}},
		{"+[-]>", "+z>", []int{1, 0, 1}},
		{"+[---]", "+z", []int{1, 0}},
		{"+[--]", "+[+]", []int{1, 0, -2, 0}}, // even: not a clear (it may never end)
		{"[\n-]", "[+]", []int{0, -1, 0}},     // across lines: not folded
		{"+ comment +", "+", []int{2}},
	} {
		cmds, _, _, err := parse("f.b", []byte(tc.src), true)
		if err != nil {
			t.Fatal(err)
		}
		var ops []byte
		var ns []int
		for _, c := range cmds {
			ops = append(ops, c.op)
			ns = append(ns, c.n)
		}
		if string(ops) != tc.cmds || !slices.Equal(ns, tc.wantN) {
			t.Errorf("%q: commands %q %v, want %q %v", tc.src, ops, ns, tc.cmds, tc.wantN)
		}
	}
	// A run never folds past the tape's length, so its move fits an
	// immediate and a check.
	cmds, _, _, _ := parse("long.b", bytes.Repeat([]byte(">"), 2*TapeLen+1), true)
	if len(cmds) != 3 || cmds[0].n != TapeLen-1 {
		t.Errorf("a run of %d > folds into %d commands (first %d)", 2*TapeLen+1, len(cmds), cmds[0].n)
	}
}

// TestErrors: a move off either end of the tape, a failed write and a
// failed read stop the program with an error naming the command's file,
// line and column, found from the address the code returns through the
// image's line table; unmatched brackets are compile errors.
func TestErrors(t *testing.T) {
	dir := t.TempDir()
	ro, err := os.Open(filepath.Join(dir, "."))
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	for _, tc := range []struct {
		name, src string
		in, out   int // file descriptors; -1: the test's pipes
		want      string
	}{
		{"left", "+.\n <", -1, -1, "left.b:2:2: the data pointer left the tape"},
		{"right", "+[>+]", -1, -1, "right.b:1:3: the data pointer left the tape"},
		{"far", "\n" + strings.Repeat(">", TapeLen), -1, -1, "far.b:2:30000: the data pointer left the tape"},
		{"exact", strings.Repeat(">", TapeLen-1) + "\n<", -1, -1, ""},
		{"write", "++\n  .", -1, int(ro.Fd()), "write.b:2:3: write: bad file descriptor"},
		{"read", "  ,", int(ro.Fd()), -1, "read.b:1:3: read: is a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := []byte(tc.src)
			for _, fold := range []bool{true, false} {
				img := build(t, tc.name+".b", src, Options{Fold: fold})
				var err error
				if tc.in < 0 && tc.out < 0 {
					_, err = jit(t, img, tc.name+".b", src, nil)
				} else {
					in, out := tc.in, tc.out
					if in < 0 {
						in = int(os.Stdin.Fd())
					}
					if out < 0 {
						out = int(os.Stdout.Fd())
					}
					err = Execute(img, tc.name+".b", src, in, out)
				}
				if tc.want == "" {
					if err != nil {
						t.Errorf("fold=%v: %v", fold, err)
					}
					continue
				}
				if err == nil || err.Error() != tc.want {
					t.Errorf("fold=%v: error %v, want %q", fold, err, tc.want)
				}
			}
		})
	}
	for _, tc := range []struct{ src, want string }{
		{"+[[]\n", "bad.b:1:2: [ without a matching ]"},
		{"+\n  ]", "bad.b:2:3: ] without a matching ["},
	} {
		_, err := Compile("bad.b", "/", []byte(tc.src), Options{})
		var se *SyntaxError
		if !errors.As(err, &se) || err.Error() != tc.want {
			t.Errorf("%q: error %v, want %q", tc.src, err, tc.want)
		}
	}
	if _, err := Compile("big.b", "/", make([]byte, MaxSource+1), Options{}); err == nil {
		t.Errorf("a program of %d bytes compiled", MaxSource+1)
	}
}

// TestProcName: procedure names are C identifiers derived from the file.
func TestProcName(t *testing.T) {
	for in, want := range map[string]string{
		"hello.b": "hello", "dir/rot-13.bf": "rot_13", "99bottles.b": "bf_99bottles", ".b": "bf_", "x": "x",
	} {
		if got := ProcName(in); got != want {
			t.Errorf("ProcName(%q) = %q, want %q", in, got, want)
		}
	}
}
