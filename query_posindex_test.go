package elfimage_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/lang/scheme"
	"github.com/elfimage/elfimage/meta"
)

// dwarfPosition is what the DWARF line program says for addr: the whole
// program decoded ([elfimage.Image.LineTable]) and looked up, with the
// file's path from its header, as addr2line reads it; ok false when no
// row covers addr.
func dwarfPosition(t *testing.T, im *elfimage.Image, addr uint64) (elfimage.Position, bool) {
	t.Helper()
	lt, err := im.LineTable()
	if err != nil {
		t.Fatal(err)
	}
	row, ok := lt.Lookup(addr)
	if !ok {
		return elfimage.Position{}, false
	}
	var file string
	if f, ok := lt.File(row.File); ok {
		file = f.Path
	}
	return elfimage.Position{File: file, Line: int(row.Line), Column: int(row.Column)}, true
}

// positionModules are the modules the position index is checked on: the
// Scheme examples, the golden module, and rows the compiler does not
// make (several at one offset, a first row after offset 0, lines going
// back, columns 0 and large, long jumps).
func positionModules(t *testing.T) map[string]*elfimage.Module {
	t.Helper()
	// The golden module's code and CFI are x86-64's, but it is never run:
	// link it, without CFI, for the machine the test runs on, so that it
	// loads.
	forHost := func(m *elfimage.Module) *elfimage.Module {
		m.Arch = demoArch
		for _, p := range m.Procs {
			p.CFI = nil
		}
		return m
	}
	golden := forHost(goldenModule(40))
	ms := map[string]*elfimage.Module{"golden": golden}
	for _, f := range []string{"demo.scm", "errors.scm", "kernels.scm", "scopes.scm"} {
		src, err := os.ReadFile(filepath.Join("lang", "scheme", "testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		m, err := scheme.Compile(f, src)
		if err != nil {
			t.Fatal(err)
		}
		m.CompDir = "/src/examples"
		ms[f] = m
	}
	odd := forHost(goldenModule(6))
	odd.File, odd.CompDir = "sub/../odd.src", "/tmp//odd/"
	odd.Procs[0].Lines = []elfimage.LineRow{{Offset: 0, Line: 7}, {Offset: 0, Line: 9, Column: 2}, {Offset: 3, Line: 9, Column: 3}, {Offset: 3, Line: 1}}
	odd.Procs[1].Lines = []elfimage.LineRow{{Offset: 5, Line: 100000, Column: 70000}, {Offset: 6, Line: 2}, {Offset: 19, Line: 1 << 30}}
	odd.Procs[2].Lines = nil
	odd.Procs[3].Lines = []elfimage.LineRow{{Offset: 19, Line: 3}}
	ms["odd"] = odd
	return ms
}

// TestPositionIndexOracle links each module of positionModules in every
// encoding twice, with the procedure table's position index (as Link
// writes images now) and without it (as Link wrote them before), and
// checks at every address of every procedure, and one past each, that
// PositionAt gives the same answer from the index, from the line
// sequences, and as the DWARF line program decoded whole: the index
// changes no answer, and images without it keep the DWARF path.
func TestPositionIndexOracle(t *testing.T) {
	for name, m := range positionModules(t) {
		for _, e := range encodings {
			t.Run(name+"/"+e.name, func(t *testing.T) {
				dir := t.TempDir()
				var ims [2]*elfimage.Image
				for i, on := range []bool{true, false} {
					old := elfimage.SetPositionIndex(on)
					path := filepath.Join(dir, fmt.Sprintf("%d.elf", i))
					err := elfimage.WriteFile(path, m, e.opts)
					elfimage.SetPositionIndex(old)
					if err != nil {
						t.Fatal(err)
					}
					im, err := elfimage.Open(path, nil)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { im.Close() })
					sec, err := im.Section(meta.SectionProcs)
					if err != nil {
						t.Fatal(err)
					}
					if got := sec[7]&meta.FlagPositions != 0; got != on {
						t.Fatalf("index %v: table flags %#x", on, sec[7])
					}
					ims[i] = im
				}
				procs, err := ims[0].Procedures()
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, p := range procs {
					for a := p.Start; a <= p.Start+p.Size; a++ {
						want, ok := dwarfPosition(t, ims[0], a)
						for i, im := range ims {
							got, err := im.PositionAt(a)
							if !ok {
								if !errors.Is(err, elfimage.ErrUnknownPC) {
									t.Fatalf("image %d, %#x (%s): %v, %v, want ErrUnknownPC", i, a, p.Name, got, err)
								}
								continue
							}
							if err != nil || got != want {
								t.Fatalf("image %d, %#x (%s): %v, %v, want %v", i, a, p.Name, got, err, want)
							}
							n++
						}
					}
				}
				if n == 0 {
					t.Fatal("no address has a position")
				}
			})
		}
	}
}

// TestPositionIndexSize reports what the position index adds to the
// procedure table and to the file, at 100, 1,000 and 10,000 procedures
// of the benchmark's source (run with -v).
func TestPositionIndexSize(t *testing.T) {
	for _, n := range []int{100, 1000, 10000} {
		var src strings.Builder
		for i := range n {
			fmt.Fprintf(&src, "(define* (p%d a #:optional (b %d))\n  \"Procedure %d.\"\n  (let ((c (+ a b)))\n    (let* ((d (* c 2)) (e (- d a)))\n      (+ c d e))))\n", i, i, i)
		}
		src.WriteString("(define (main) (p0 1))\n")
		m, err := scheme.Compile("bench.scm", []byte(src.String()))
		if err != nil {
			t.Fatal(err)
		}
		var file, table [2]int
		for i, on := range []bool{true, false} {
			old := elfimage.SetPositionIndex(on)
			b, err := elfimage.Link(m, elfimage.LinkOptions{})
			elfimage.SetPositionIndex(old)
			if err != nil {
				t.Fatal(err)
			}
			im, err := elfimage.Load("bench.elf", b, nil)
			if err != nil {
				t.Fatal(err)
			}
			sec, err := im.Section(meta.SectionProcs)
			if err != nil {
				t.Fatal(err)
			}
			file[i], table[i] = len(b), len(sec)
			im.Close()
		}
		if file[0] <= file[1] || table[0] <= table[1] {
			t.Errorf("%d procedures: file %d bytes with the index, %d without; table %d and %d", n, file[0], file[1], table[0], table[1])
		}
		t.Logf("%d procedures: file %d -> %d bytes (+%.2f%%), table %d -> %d bytes (+%d, %.1f bytes per procedure)",
			n, file[1], file[0], 100*float64(file[0]-file[1])/float64(file[1]), table[1], table[0], table[0]-table[1], float64(table[0]-table[1])/float64(n))
	}
}

// linkWarm links m and loads it as path, an image whose query state
// Procedures made (closed when t ends): the reference for the first
// PositionAt of fresh loads of the returned bytes.
func linkWarm(t *testing.T, path string, m *elfimage.Module) ([]byte, *elfimage.Image, []elfimage.Procedure) {
	t.Helper()
	b, err := elfimage.Link(m, elfimage.LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	warm, err := elfimage.Load(path, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { warm.Close() })
	procs, err := warm.Procedures()
	if err != nil {
		t.Fatal(err)
	}
	return b, warm, procs
}

// TestFirstPositionStateless checks the first PositionAt of a freshly
// loaded image, which the position index answers without making the
// image's query state, against the answer of an image that has its state
// (a Procedure asked first) and against the DWARF line program, at every
// address of every procedure of positionModules and one past each (a
// fresh image per address); that the answer came without the state; and
// that the image answers again afterwards, making the state then.
func TestFirstPositionStateless(t *testing.T) {
	for name, m := range positionModules(t) {
		t.Run(name, func(t *testing.T) {
			b, warm, procs := linkWarm(t, name+".elf", m)
			n := 0
			for _, p := range procs {
				for a := p.Start; a <= p.Start+p.Size; a++ {
					want, werr := warm.PositionAt(a)
					dw, ok := dwarfPosition(t, warm, a)
					if ok != (werr == nil) || (ok && dw != want) {
						t.Fatalf("%#x (%s): with state %v, %v; DWARF %v, %v", a, p.Name, want, werr, dw, ok)
					}
					im, err := elfimage.Load(name+".elf", b, nil)
					if err != nil {
						t.Fatal(err)
					}
					got, err := im.PositionAt(a)
					stateless := !elfimage.HasQueryState(im)
					again, aerr := im.PositionAt(a)
					made := elfimage.HasQueryState(im)
					im.Close()
					if werr != nil {
						if !errors.Is(err, elfimage.ErrUnknownPC) || !errors.Is(aerr, elfimage.ErrUnknownPC) {
							t.Fatalf("%#x (%s): first %v, %v, again %v; want ErrUnknownPC", a, p.Name, got, err, aerr)
						}
						continue
					}
					if err != nil || got != want || aerr != nil || again != want {
						t.Fatalf("%#x (%s): first %v, %v, again %v, %v; want %v", a, p.Name, got, err, again, aerr, want)
					}
					// The first answer came from the path without the
					// state (else this compares the state path with
					// itself); the second made the state.
					if !stateless || !made {
						t.Fatalf("%#x (%s): query state after the first answer %v, after the second %v; want false, true", a, p.Name, !stateless, made)
					}
					n++
				}
			}
			if n == 0 {
				t.Fatal("no address has a position")
			}
		})
	}
}

// TestFirstPositionConcurrent: goroutines asking a fresh image's first
// positions at once (some without the query state, some making it) all
// get the answers of an image that has its state. Run with -race.
func TestFirstPositionConcurrent(t *testing.T) {
	b, warm, procs := linkWarm(t, "demo.elf", positionModules(t)["demo.scm"])
	var addrs []uint64
	var want []elfimage.Position
	for _, p := range procs {
		if w, err := warm.PositionAt(p.Start + p.Size/2); err == nil {
			addrs, want = append(addrs, p.Start+p.Size/2), append(want, w)
		}
	}
	for range 20 {
		im, err := elfimage.Load("demo.elf", b, nil)
		if err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 8)
		for g := range 8 {
			go func() {
				for k := range addrs {
					i := (k + g) % len(addrs)
					if got, err := im.PositionAt(addrs[i]); err != nil || got != want[i] {
						errs <- fmt.Errorf("goroutine %d, %#x: %v, %v; want %v", g, addrs[i], got, err, want[i])
						return
					}
				}
				errs <- nil
			}()
		}
		for range 8 {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
		im.Close()
	}
}
