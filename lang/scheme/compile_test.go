package scheme

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
)

// compileFile compiles testdata/name for x86-64, whose machine code the
// tests inspect (with the x86 CFI simulator) on any host.
func compileFile(t testing.TB, name string) *elfimage.Module {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	m, err := CompileFor(arch.X86_64, name, src)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// compileFileDefs compiles testdata/name for x86-64 and returns the
// module with the compiler's record of variable stores.
func compileFileDefs(t testing.TB, name string) (*elfimage.Module, defMap) {
	return compileFileDefsFor(t, arch.X86_64, name)
}

// compileFileDefsFor is compileFileDefs for architecture a (on AArch64
// the record's offsets are those of the stur, str or mov storing a
// variable).
func compileFileDefsFor(t testing.TB, a *arch.Arch, name string) (*elfimage.Module, defMap) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	m, defs, err := compile(a, name, src, false)
	if err != nil {
		t.Fatal(err)
	}
	return m, defs
}

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"(define (main)\n  (foo 1))", "prog.scm:2:4: unbound variable foo"},
		{"(define (main)\n  (+ 1 x))", "prog.scm:2:8: unbound variable x"},
		{"(define (main) 1", "prog.scm:1:1: unclosed \"(\""},
		{"(define (main) 1))", "prog.scm:1:18: unexpected \")\""},
		{"(define (main) \"abc)", "prog.scm:1:16: unterminated string"},
		{"(define (main) 99999999999999999999)", "prog.scm:1:16: integer literal 99999999999999999999 out of range or malformed"},
		{"(define (f x) x)", "prog.scm:1:1: no (define (main) ...) in program"},
		{"(define (main) (f 1 2))\n(define (f x) x)", "prog.scm:1:16: f takes 1 arguments, given 2"},
		{"(define (main) (let loop ((i 0)) (+ 1 (loop i))))", "prog.scm:1:39: loop loop called in non-tail position"},
		{"(define (main) (set! y 1))", "prog.scm:1:22: set! of y: not a local variable"},
		{"(define (main) (display 1 2))", "prog.scm:1:16: display takes 1 arguments, given 2"},
		{"(define (f a b c d e f g) a)\n(define (main) 0)", "prog.scm:1:24: f has 7 parameters; at most 6 are supported"},
		{"#| unclosed (define (main) 0)", "prog.scm:1:1: unterminated block comment"},
		{"(define (main) (quotient 1))", "prog.scm:1:16: quotient takes 2 arguments, given 1"},
		{"(define (main) fib)\n(define (fib) 1)", "prog.scm:1:16: procedure fib is not a first-class value"},
		{"(define (main) 0)\n(define (main) 1)", "prog.scm:2:10: main already defined at 1:1"},
		{"x", "prog.scm:1:1: only (define (name param ...) body ...) is allowed at top level"},
		{"(define (main) (if))", "prog.scm:1:16: if takes a test"},
		{"(define (main) 'x)", "prog.scm:1:16: quotation is not supported"},
		{"(define (%f) 0)", "prog.scm:1:10: names beginning with % are reserved"},
		{"(define (main) (let ((if 1)) if))", "prog.scm:1:23: if is a reserved name"},
	} {
		_, err := Compile("prog.scm", []byte(tc.src))
		var se *SyntaxError
		if err == nil || !errors.As(err, &se) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Compile(%q) = %v, want prefix %q", tc.src, err, tc.want)
		}
	}
}

func TestCompileModule(t *testing.T) {
	m := compileFile(t, "kernels.scm")
	if m.Entry != symStart || m.File != "kernels.scm" || m.Producer == "" {
		t.Errorf("module header: %+v", m)
	}
	byName := map[string]*elfimage.Proc{}
	for _, p := range m.Procs {
		if byName[p.Name] != nil {
			t.Errorf("duplicate proc %s", p.Name)
		}
		byName[p.Name] = p
	}
	fib := byName["fib"]
	if fib == nil || fib.Doc != "Naive doubly recursive Fibonacci." || fib.Line != 4 || fib.Column != 1 || fib.Internal {
		t.Fatalf("fib: %+v", fib)
	}
	if len(fib.Params) != 1 || fib.Params[0].Name != "n" || string(fib.Params[0].Location) != "\x91\x68" { // DW_OP_fbreg(-24)
		t.Errorf("fib params: %+v", fib.Params)
	}
	tak := byName["tak"]
	if len(tak.Params) != 3 || string(tak.Params[2].Location) != "\x91\x58" { // fbreg(-40)
		t.Errorf("tak params: %+v", tak.Params)
	}
	for _, n := range []string{symCapture, symDisplayInt, symDisplayString, symWrite, symStart} {
		if p := byName[n]; p == nil || !p.Internal {
			t.Errorf("runtime proc %s missing or not internal", n)
		}
	}
	// Every relocation names a symbol of the module.
	syms := map[string]bool{}
	for _, p := range m.Procs {
		syms[p.Name] = true
	}
	for _, d := range append(append([]*elfimage.Datum{}, m.ROData...), m.Data...) {
		syms[d.Name] = true
	}
	for _, p := range m.Procs {
		for _, r := range p.Relocs {
			if !syms[r.Symbol] || r.Type != elfimage.RelocPC32 || r.Addend != -4 || int(r.Offset)+4 > len(p.Code) {
				t.Errorf("%s: bad reloc %+v", p.Name, r)
			}
		}
	}
	for _, d := range m.Data {
		if len(d.Bytes) != 16 || len(d.Relocs) != 1 || d.Relocs[0].Type != elfimage.RelocAbs64 || !syms[d.Relocs[0].Symbol] {
			t.Errorf("string object %s: %+v", d.Name, d)
		}
	}
}
