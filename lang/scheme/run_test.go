package scheme

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/arch"
)

// kernelSrc is the kernels file with main replaced by body.
func kernelSrc(t testing.TB, mainBody string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/kernels.scm")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "(define (main)")
	return s[:i] + "(define (main)\n  " + mainBody + ")\n"
}

type runFunc func(t testing.TB, src string, opts RunOptions) (*Result, error)

func flatRunner(t testing.TB, src string, opts RunOptions) (*Result, error) {
	res, _, err := runFlat(t, src, opts)
	return res, err
}

// runners are the ways tests run programs: the test-only flat loader, and
// (in linked_test.go) Link → WriteFile → Open → Run.
var runners = map[string]runFunc{"flat": flatRunner}

var kernelCases = []struct {
	name, main string
	want       int64
}{
	{"fib25", "(fib 25)", 75025},
	{"tak", "(tak 18 12 6)", 7},
	{"ack", "(ack 2 9)", 21},
	{"sum", "(sum-to 10000)", 50005000},
	{"even", "(if (my-even? 1000001) 1 2)", 2},
	{"count-up", "(count-up 100)", 4950},
	{"arith", "(arith -7 2)", -3*10000 - 1*100 + 1},
	{"arith2", "(arith 7 -2)", -3*10000 + 1*100 - 1},
	{"logic", "(logic 1 0)", 10 + 100 + 10000 + 1000000},
	{"variadic", "(+ (+) (*) (- 5) (- 10 1 2) (* 2 3 4) (+ 1 2 3))", 0 + 1 - 5 + 7 + 24 + 6},
	{"wrap", "(+ 9223372036854775807 1)", -9223372036854775808},
	{"minquot", "(quotient (- -9223372036854775807 1) -1)", -9223372036854775808},
	{"minrem", "(remainder (- -9223372036854775807 1) -1)", 0},
	{"cmp", "(+ (= 1 1) (< 2 1) (>= 3 3 2) (> 3 2 2) (<= 1 1 2) (not 0) (not 5))", 1 + 0 + 1 + 0 + 1 + 1 + 0},
	{"let", "(let ((a 1) (b 2)) (let ((a b) (b a)) (- a b)))", 1},
	{"let*", "(let* ((a 1) (b (+ a 1))) (* a b 10))", 20},
	{"set", "(let ((x 1)) (set! x (+ x 41)) x)", 42},
	{"condelse", "(cond ((= 1 2) 5) ((< 1 2) 6) (else 7))", 6},
	{"condnone", "(cond ((= 1 2) 5))", 0},
	{"nested-loops", "(let outer ((i 0) (acc 0)) (if (= i 10) acc (outer (+ i 1) (let inner ((j 0) (a acc)) (if (= j i) a (inner (+ j 1) (+ a 1)))))))", 45},
}

func TestKernels(t *testing.T) {
	for rname, run := range runners {
		for _, tc := range kernelCases {
			t.Run(rname+"/"+tc.name, func(t *testing.T) {
				res, err := run(t, kernelSrc(t, tc.main), RunOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if res.Value != tc.want {
					t.Errorf("%s = %d, want %d", tc.main, res.Value, tc.want)
				}
			})
		}
	}
}

// TestDeepTailCalls runs a 1,000,000-deep mutual recursion in tail
// position on a small stack: it only works if tail calls reuse the frame.
func TestDeepTailCalls(t *testing.T) {
	for rname, run := range runners {
		res, err := run(t, kernelSrc(t, "(+ (if (my-even? 1000000) 10 20) (if (my-odd? 1000001) 1 2))"), RunOptions{StackSize: 256 << 10})
		if err != nil {
			t.Fatalf("%s: %v", rname, err)
		}
		if res.Value != 11 {
			t.Errorf("%s: got %d, want 11", rname, res.Value)
		}
	}
}

func captureOutput(t testing.TB, f func(w *os.File)) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []byte)
	go func() { b, _ := io.ReadAll(r); done <- b }()
	f(w)
	w.Close()
	out := <-done
	r.Close()
	return string(out)
}

func TestDisplay(t *testing.T) {
	src := `(define (main)
  (display "hello, \"world\"") (newline)
  (display 0) (display " ") (display -42) (display " ")
  (display 9223372036854775807) (display " ") (display (- -9223372036854775807 1))
  (newline)
  (display #t) (display #f) (display "")
  (newline)
  7)`
	want := "hello, \"world\"\n0 -42 9223372036854775807 -9223372036854775808\n10\n"
	for rname, run := range runners {
		var res *Result
		var err error
		got := captureOutput(t, func(w *os.File) { res, err = run(t, src, RunOptions{Stdout: w}) })
		if err != nil || res.Value != 7 {
			t.Fatalf("%s: %v %+v", rname, err, res)
		}
		if got != want {
			t.Errorf("%s: output %q, want %q", rname, got, want)
		}
	}
}

func TestStackOverflow(t *testing.T) {
	src := kernelSrc(t, "(+ 1 (deep 0))") + "(define (deep n) (+ 1 (deep (+ n 1))))\n"
	for rname, run := range runners {
		for range 2 {
			res, err := run(t, src, RunOptions{StackSize: 1 << 20})
			if !errors.Is(err, ErrStackOverflow) {
				t.Fatalf("%s: err = %v, want stack overflow", rname, err)
			}
			var so *StackOverflowError
			if !errors.As(err, &so) || so.Capture == nil || so.Capture.Kind != KindStackOverflow || len(so.Capture.Stack) == 0 {
				t.Fatalf("%s: capture %+v", rname, so)
			}
			if res == nil || res.Value != 0 {
				t.Errorf("%s: result %+v", rname, res)
			}
			// A later run on the same setup works.
			res, err = run(t, kernelSrc(t, "(fib 20)"), RunOptions{StackSize: 1 << 20})
			if err != nil || res.Value != 6765 {
				t.Fatalf("%s: run after overflow: %v %+v", rname, err, res)
			}
		}
	}
}

func TestErrorAndBacktrace(t *testing.T) {
	src, err := os.ReadFile("testdata/errors.scm")
	if err != nil {
		t.Fatal(err)
	}
	for rname, run := range runners {
		res, err := run(t, string(src), RunOptions{})
		var se *Error
		if !errors.As(err, &se) {
			t.Fatalf("%s: err = %v, want *Error", rname, err)
		}
		if se.Message != "negative value" || len(se.Args) != 2 || se.Args[0] != -21 || se.Args[1] != -42 {
			t.Errorf("%s: error %+v", rname, se)
		}
		if se.Error() != "scheme: error: negative value -21 -42" {
			t.Errorf("%s: Error() = %q", rname, se.Error())
		}
		c := se.Capture
		if c == nil || c.Kind != KindError || c.Arch != arch.Host() || c.Regs[c.Arch.SP] != c.StackAddr || c.PC() == 0 {
			t.Fatalf("%s: capture %+v", rname, c)
		}
		// The saved frame pointer chain is inside the copied stack:
		// [rbp] = caller's rbp ([x29] = caller's x29).
		if _, ok := c.ReadStack(c.Regs[c.Arch.FP]); !ok {
			t.Errorf("%s: frame pointer %#x outside the copied stack [%#x, +%d)", rname, c.Regs[c.Arch.FP], c.StackAddr, len(c.Stack))
		}
		if len(res.Captures) != 1 || res.Captures[0].Kind != KindBacktrace {
			t.Errorf("%s: captures %+v", rname, res.Captures)
		}
	}
}

func TestDivisionByZero(t *testing.T) {
	for rname, run := range runners {
		for _, op := range []string{"quotient", "remainder", "modulo"} {
			_, err := run(t, "(define (main) (let ((z 0)) ("+op+" 7 z)))", RunOptions{})
			var se *Error
			if !errors.As(err, &se) || se.Message != "division by zero" || len(se.Args) != 0 {
				t.Errorf("%s %s: err = %v", rname, op, err)
			}
		}
	}
}

func TestCaptureLimit(t *testing.T) {
	src := "(define (main) (let loop ((i 0)) (when (< i 20) (backtrace) (loop (+ i 1)))) 5)"
	for rname, run := range runners {
		res, err := run(t, src, RunOptions{MaxCaptures: 3})
		if err != nil || res.Value != 5 || len(res.Captures) != 3 || res.Dropped != 17 {
			t.Errorf("%s: %v, %d captures, %d dropped", rname, err, len(res.Captures), res.Dropped)
		}
	}
}

func TestConcurrentRuns(t *testing.T) {
	m, err := Compile("prog.scm", []byte(kernelSrc(t, "(fib 22)")))
	if err != nil {
		t.Fatal(err)
	}
	f := loadFlat(t, m) // one image, four runs at once
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			res, err := runEntry(f.syms[symStart], RunOptions{StackSize: 256 << 10}, f.inImage)
			if err == nil && res.Value != 17711 {
				err = errors.New("wrong value")
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
