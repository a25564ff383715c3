package scheme

import (
	"errors"
	"os"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
)

// FuzzCompile feeds arbitrary source to the reader and compiler: they must
// return a *SyntaxError or a module, never panic, and every module they
// produce must have exact CFI at every reachable instruction; compiled as
// an object (CompileObject) too, which LinkObject must accept; and for
// AArch64, with the same errors, into a module Link accepts and an object
// LinkObject accepts.
func FuzzCompile(f *testing.F) {
	for _, name := range []string{"kernels.scm", "demo.scm", "errors.scm", "scopes.scm"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		"(define (main) (let loop ((i 0)) (if (< i 3) (loop (+ i 1)) (quotient i 0))))",
		"(define (main) (and 1 (or 0 (error \"x\" 1 2 3))))",
		"(define (f a b c d e g) (f b c d e g a)) (define (main) (f 1 2 3 4 5 6))",
		"#| a #| b |# c |# (define (main) (cond ((< 1 2 3) 4) (else 5)))",
		"(define (main) (begin) (when 0 1) (unless 1 2) (set! x 1))",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		m, defs, err := compile(arch.X86_64, "fuzz.scm", src, false)
		// The AArch64 backend shares the front end: it accepts and
		// rejects the same programs with the same errors, and its
		// modules link (every branch and address relocation in range).
		am, aerr := CompileFor(arch.AArch64, "fuzz.scm", src)
		if (err == nil) != (aerr == nil) || err != nil && err.Error() != aerr.Error() {
			t.Fatalf("x86-64: %v; AArch64: %v\nsource: %q", err, aerr, src)
		}
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if _, err := elfimage.Link(am, elfimage.LinkOptions{}); err != nil {
			t.Fatalf("AArch64 Link: %v\nsource: %q", err, src)
		}
		for _, p := range m.Procs {
			if err := simulateVars(p, defs[p]); err != nil {
				t.Fatalf("%v\nsource: %q", err, src)
			}
		}
		// The same program as an object (no stack check, the object
		// runtime): as exact, and LinkObject takes it.
		m, defs, err = compile(arch.X86_64, "fuzz.scm", src, true)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("object: error of type %T: %v", err, err)
			}
			return
		}
		for _, p := range m.Procs {
			if err := simulateVars(p, defs[p]); err != nil {
				t.Fatalf("object: %v\nsource: %q", err, src)
			}
		}
		if _, err := elfimage.LinkObject(m, elfimage.LinkOptions{}); err != nil {
			t.Fatalf("LinkObject: %v\nsource: %q", err, src)
		}
		// And as an AArch64 object: LinkObject takes it too.
		if am, err = CompileObjectFor(arch.AArch64, "fuzz.scm", src); err != nil {
			t.Fatalf("AArch64 object: %v\nsource: %q", err, src)
		}
		if _, err := elfimage.LinkObject(am, elfimage.LinkOptions{}); err != nil {
			t.Fatalf("AArch64 LinkObject: %v\nsource: %q", err, src)
		}
	})
}
