package scheme

import (
	"strings"
	"testing"

	"golang.org/x/arch/x86/x86asm"
)

func TestCName(t *testing.T) {
	for in, want := range map[string]string{
		"fib": "fib", "show-fib": "show_fib", "even?": "even_p", "set-x!": "set_x_x", "main": "scheme_main",
		"list->vector": "list__gtvector", "a*b+c/d": "a_starb_plusc_slashd", "<=": "_lt_eq", "1+": "_1_plus",
		"λ": "_u03bb", "snake_case": "snake_case",
	} {
		if got := CName(in); got != want {
			t.Errorf("CName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCompileObject: an object's procedures get their C names as
// LinkName (none when the name is one), define* ones with optionals are
// local, define-extern adds to Externs, and no instruction of the code
// (decoded with x86asm up to each procedure's end) uses r15, the host's
// control block, which C callers do not set.
func TestCompileObject(t *testing.T) {
	src := `(define-extern (c-callback x y))
(define (fib n) (if (< n 2) n (+ (fib (- n 1)) (fib (- n 2)))))
(define (even? n) (= (remainder n 2) 0))
(define* (opt a #:optional (b 2)) (+ a b))
(define (go n) (c-callback n (opt n)))
(define (main) (display (fib 10)) (newline) (error "bad" 1) (backtrace))
`
	m, err := CompileObject("obj.scm", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if m.Entry != "" {
		t.Errorf("Entry %q, want none", m.Entry)
	}
	if len(m.Externs) != 1 || m.Externs[0] != "c_callback" {
		t.Errorf("Externs %q, want [c_callback]", m.Externs)
	}
	want := map[string]struct {
		link     string
		internal bool
	}{"fib": {"", false}, "even?": {"even_p", false}, "opt": {"", true}, "go": {"", false}, "main": {"scheme_main", false}}
	for _, p := range m.Procs {
		for off := 0; off < len(p.Code); {
			in, err := x86asm.Decode(p.Code[off:], 64)
			if err != nil {
				t.Errorf("%s+%#x: %v", p.Name, off, err)
				break
			}
			if strings.Contains(strings.ToLower(in.String()), "r15") {
				t.Errorf("%s+%#x: %v uses r15", p.Name, off, in)
			}
			off += in.Len
		}
		if strings.HasPrefix(p.Name, "%") {
			if !p.Internal {
				t.Errorf("runtime procedure %s is not Internal", p.Name)
			}
			continue
		}
		w, ok := want[p.Name]
		if !ok {
			t.Errorf("unexpected procedure %s", p.Name)
			continue
		}
		if p.LinkName != w.link || p.Internal != w.internal {
			t.Errorf("%s: LinkName %q Internal %v, want %q %v", p.Name, p.LinkName, p.Internal, w.link, w.internal)
		}
		delete(want, p.Name)
	}
	if len(want) != 0 {
		t.Errorf("missing procedures %v", want)
	}
	if _, err := Compile("obj.scm", []byte(src)); err == nil || !strings.Contains(err.Error(), "define-extern") {
		t.Errorf("Compile with define-extern: %v, want an error naming define-extern", err)
	}
	if _, err := CompileObject("x.scm", []byte("(define (a-b) 1)\n(define (a_b) 2)\n")); err == nil || !strings.Contains(err.Error(), "one C name, a_b") {
		t.Errorf("two procedures with one C name: %v", err)
	}
	if _, err := CompileObject("x.scm", []byte("(define (f) (define-extern (g)))\n")); err == nil {
		t.Error("define-extern inside a body compiles")
	}
}
