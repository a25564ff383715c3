package scheme

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/arch/arm64/arm64asm"
	"golang.org/x/arch/x86/x86asm"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/internal/a64sim"
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

// TestCompileObjectAArch64 is TestCompileObject for AArch64: the same
// symbols, Externs and Internal procedures, and no instruction (decoded
// with arm64asm) uses x27, the host's control block, which C callers do
// not set, nor writes x18 (the platform register) or x28; the object
// runtime has no stack check (no procedure reads through x27 or
// compares sp).
func TestCompileObjectAArch64(t *testing.T) {
	src := `(define-extern (c-callback x y))
(define (fib n) (if (< n 2) n (+ (fib (- n 1)) (fib (- n 2)))))
(define (even? n) (= (remainder n 2) 0))
(define* (opt a #:optional (b 2)) (+ a b))
(define (go n) (c-callback n (opt n)))
(define (main) (display (fib 10)) (newline) (error "bad" 1) (backtrace))
`
	m, err := CompileObjectFor(arch.AArch64, "obj.scm", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if m.Arch != arch.AArch64 || m.Entry != "" {
		t.Errorf("Arch %v Entry %q, want AArch64 and none", m.Arch, m.Entry)
	}
	if len(m.Externs) != 1 || m.Externs[0] != "c_callback" {
		t.Errorf("Externs %q, want [c_callback]", m.Externs)
	}
	want := map[string]struct {
		link     string
		internal bool
	}{"fib": {"", false}, "even?": {"even_p", false}, "opt": {"", true}, "go": {"", false}, "main": {"scheme_main", false}}
	runtime := map[string]bool{}
	for _, p := range m.Procs {
		for off := 0; off+4 <= len(p.Code); off += 4 {
			in, err := arm64asm.Decode(p.Code[off : off+4])
			if err != nil {
				if p.Code[off] == 0 && p.Code[off+1] == 0 && p.Code[off+2] == 0 && p.Code[off+3] == 0 {
					continue // udf #0
				}
				t.Errorf("%s+%#x: %v", p.Name, off, err)
				continue
			}
			for _, a := range in.Args {
				if a == nil {
					break
				}
				s := a.String()
				if strings.Contains(s, "27") || in.Op == arm64asm.CMP && strings.Contains(s, "SP") {
					t.Errorf("%s+%#x: %v uses x27 or compares sp", p.Name, off, in)
				}
			}
			if r, ok := in.Args[0].(arm64asm.Reg); ok && (r == arm64asm.X18 || r == arm64asm.X28 || r == arm64asm.W18 || r == arm64asm.W28) && in.Op != arm64asm.STR && in.Op != arm64asm.STUR {
				t.Errorf("%s+%#x: %v writes x18 or x28", p.Name, off, in)
			}
		}
		if strings.HasPrefix(p.Name, "%") {
			runtime[p.Name] = true
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
	for _, name := range []string{symCapture, symDisplayInt, symDisplayString, symWrite} {
		if !runtime[name] {
			t.Errorf("no runtime procedure %s", name)
		}
	}
	fd := false
	for _, d := range m.Data {
		fd = fd || d.Name == symFD
	}
	if !fd {
		t.Errorf("no %s datum", symFD)
	}
}

// TestAArch64ObjectCFIExact checks every procedure of the test programs
// compiled as AArch64 objects (the object runtime included: %capture
// saving x19-x22, %write reading %fd) with a64sim: the CFI is exact at
// every instruction and every live range holds its value. It is not
// vacuous: each procedure with its first CFA offset off by 8 fails.
func TestAArch64ObjectCFIExact(t *testing.T) {
	procs := 0
	for _, name := range aarch64Programs {
		m, defs, err := compile(arch.AArch64, name, mustRead(t, filepath.Join("testdata", name)), true)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range m.Procs {
			procs++
			opts := a64sim.Options{Vars: true, Complete: true, Defs: map[uint32]a64sim.Pos{}}
			for off, pos := range defs[p] {
				opts.Defs[off] = a64sim.Pos{Line: pos.Line, Column: pos.Column}
			}
			if err := a64sim.Check(p, opts); err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			q := *p
			q.CFI = append([]frame.Insn(nil), p.CFI...)
			for i := range q.CFI {
				if q.CFI[i].Op == frame.OpDefCFAOffset {
					q.CFI[i].Offset -= 8
					if err := a64sim.Check(&q, opts); !errors.Is(err, a64sim.ErrCheck) {
						t.Errorf("%s: %s with the CFA off by 8 at %#x: %v", name, p.Name, q.CFI[i].PC, err)
					}
					break
				}
			}
		}
	}
	if procs < 20 {
		t.Errorf("checked %d procedures, want at least 20", procs)
	}
}
