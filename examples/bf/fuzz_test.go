package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/internal/a64sim"
)

// FuzzCompile compiles arbitrary sources, folded and not. A source the
// reference interpreter rejects must fail to compile at the same
// position; any other must link, pass the CFI simulation (for x86-64 and
// AArch64, whatever the host), and, when the
// reference interpreter ends it within a bound of steps, print the same
// output when run. Without folding a run also stops with the same error at
// the same command; with folding, where only a run's net move is checked,
// the program runs only if the reference ends it without error.
func FuzzCompile(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.b")
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil && filepath.Base(name) != "busy.b" {
			f.Add(b, []byte("input\n"))
		}
	}
	f.Add([]byte(everything), []byte("xy"))
	f.Add([]byte("+[>+]"), []byte(nil))
	f.Add([]byte("<>+."), []byte(nil))
	f.Fuzz(func(t *testing.T, src, input []byte) {
		const maxSteps = 20000
		if len(src) > 4096 {
			return // the checks cost about 2 µs per instruction: keep each input fast
		}
		ref, refErr := interpret(src, input, 0, maxSteps)
		for _, fold := range []bool{false, true} {
			mod, err := Compile("f.b", "/", src, Options{Fold: fold})
			var re *refError
			if errors.As(refErr, &re) && re.msg != ErrOffTape.Error() {
				// Unmatched brackets.
				var se *SyntaxError
				if !errors.As(err, &se) || se.Line != re.line || se.Col != re.col {
					t.Fatalf("the reference rejects the source (%v); Compile: %v", refErr, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("fold=%v: %v", fold, err)
			}
			b, err := elfimage.Link(mod, elfimage.LinkOptions{})
			if err != nil {
				t.Fatalf("fold=%v: Link: %v", fold, err)
			}
			l, err := readImage(b, mod.Procs[0].Name)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkCFI(l); err != nil {
				t.Fatalf("fold=%v: %v", fold, err)
			}
			// The other architecture's code, checked by its simulator.
			other := arch.AArch64
			if l.arch == arch.AArch64 {
				other = arch.X86_64
			}
			if err := checkCFI(link(t, "f.b", src, Options{Fold: fold, Arch: other})); err != nil {
				t.Fatalf("fold=%v, %s: %v", fold, other.Name, err)
			}
			// The AArch64 procedure's own CFI and vm's live ranges.
			a64, err := Compile("f.b", "/", src, Options{Fold: fold, Arch: arch.AArch64})
			if err != nil {
				t.Fatal(err)
			}
			if err := a64sim.Check(a64.Procs[0], a64sim.Options{Vars: true}); err != nil {
				t.Fatalf("fold=%v, aarch64: %v", fold, err)
			}
			if refErr == errSteps || (fold && refErr != nil) {
				continue
			}
			img, err := elfimage.Load("f.elf", b, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := jit(t, img, "f.b", src, input)
			img.Close()
			if !bytes.Equal(got, ref) {
				t.Fatalf("fold=%v: output %q, the reference's %q", fold, got, ref)
			}
			want := ""
			if refErr != nil {
				want = fmt.Sprintf("f.b:%v", refErr)
			}
			if (err == nil) != (refErr == nil) || err != nil && err.Error() != want {
				t.Fatalf("fold=%v: error %v, the reference's %q", fold, err, want)
			}
		}
	})
}
