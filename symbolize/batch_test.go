package symbolize_test

import (
	"debug/elf"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/internal/qemutest"
	"github.com/elfimage/elfimage/internal/tooltest"
	"github.com/elfimage/elfimage/lang/scheme"
	"github.com/elfimage/elfimage/symbolize"
)

// batchImage links a scheme program of n procedures (each with an
// optional argument and nested lets: several line rows per procedure)
// into an image of ours and writes it to a file.
func batchImage(t *testing.T, n int) string {
	var src strings.Builder
	for i := range n {
		fmt.Fprintf(&src, "(define* (p%d a #:optional (b %d))\n  (let ((c (+ a b)))\n    (let* ((d (* c 2)) (e (- d a)))\n      (+ c d e))))\n", i, i)
	}
	src.WriteString("(define (main) (p0 1))\n")
	m, err := scheme.Compile("batch.scm", []byte(src.String()))
	if err != nil {
		t.Fatal(err)
	}
	b, err := elfimage.Link(m, elfimage.LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "image.elf")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// batchAddrs returns addresses of every kind for path: random ones in its
// functions, and a walk in steps of step bytes from below its lowest
// allocated section to past its highest (in no unit, between units, in
// the gaps between functions, outside every symbol), 0 and the largest
// address.
func batchAddrs(t *testing.T, path string, step uint64) []uint64 {
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lo, hi := ^uint64(0), uint64(0)
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC != 0 && s.Size > 0 {
			lo, hi = min(lo, s.Addr), max(hi, s.Addr+s.Size)
		}
	}
	var out []uint64
	if f.Section(".text") != nil {
		out = codeAddrs(t, path, 3000, 5)
	}
	for a := lo - min(lo, 0x200); a < hi+0x200; a += step {
		out = append(out, a)
	}
	return append(out, 0, ^uint64(0))
}

// checkBatch compares SymbolizeBatch on a fresh Symbolizer of path
// (prepared or not) with Symbolize address by address on another, for
// addrs sorted, sorted with every address twice, reversed and shuffled:
// the same frames and the same errors.
func checkBatch(t *testing.T, path string, addrs []uint64, open func(string) (*symbolize.Symbolizer, error)) {
	t.Helper()
	ref, err := open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	type answer struct {
		frames []symbolize.Frame
		err    string
	}
	want := map[uint64]answer{}
	for _, a := range addrs {
		fs, err := ref.Symbolize(a, nil)
		w := answer{frames: fs}
		if err != nil {
			w.err = err.Error()
		}
		want[a] = w
	}
	sorted := slices.Clone(addrs)
	slices.Sort(sorted)
	twice := make([]uint64, 0, 2*len(sorted))
	for _, a := range sorted {
		twice = append(twice, a, a)
	}
	reversed := slices.Clone(sorted)
	slices.Reverse(reversed)
	shuffled := slices.Clone(sorted)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for _, order := range []struct {
		name  string
		addrs []uint64
	}{{"sorted", sorted}, {"twice", twice}, {"reversed", reversed}, {"shuffled", shuffled}} {
		for _, prepare := range []bool{false, true} {
			s, err := open(path)
			if err != nil {
				t.Fatal(err)
			}
			if prepare {
				if err := s.Prepare(order.addrs); err != nil {
					t.Fatalf("Prepare: %v", err)
				}
			}
			// Frames already in the slice stay.
			pre := []symbolize.Frame{{Function: "before"}}
			next, calls, bad := 0, 0, 0
			start := len(pre)
			frames, err := s.SymbolizeBatch(order.addrs, pre, func(i, end int, err error) {
				calls++
				if i != next {
					t.Fatalf("%s: done(%d) after done(%d)", order.name, i, next-1)
				}
				next++
				a := order.addrs[i]
				w := want[a]
				var got []symbolize.Frame
				if end < start {
					t.Fatalf("%s, %#x: end %d before %d", order.name, a, end, start)
				}
				got, start = make([]symbolize.Frame, end-start), end
				// The frames are read after the batch (they may move
				// as it grows): here only their count and the error.
				if len(got) != len(w.frames) || (err == nil) != (w.err == "") || (err != nil && err.Error() != w.err) {
					if bad++; bad < 5 {
						t.Errorf("%s prepare=%v, %#x: %d frames, error %v; Symbolize: %d frames, error %q", order.name, prepare, a, len(got), err, len(w.frames), w.err)
					}
				}
			})
			if err != nil {
				t.Fatalf("SymbolizeBatch: %v", err)
			}
			if calls != len(order.addrs) {
				t.Fatalf("%s: %d calls of done for %d addresses", order.name, calls, len(order.addrs))
			}
			if frames[0].Function != "before" {
				t.Fatalf("%s: the frames before the batch were overwritten: %+v", order.name, frames[0])
			}
			// The frames, in order.
			at := 1
			for _, a := range order.addrs {
				w := want[a].frames
				if at+len(w) > len(frames) || !slices.Equal(frames[at:at+len(w)], w) {
					t.Fatalf("%s prepare=%v, %#x: frames%s\nSymbolize's%s", order.name, prepare, a, fmtFrames(frames[at:min(at+len(w), len(frames))]), fmtFrames(w))
				}
				at += len(w)
			}
			if at != len(frames) {
				t.Fatalf("%s: %d frames, want %d", order.name, len(frames), at)
			}
			s.Close()
		}
	}
}

// TestSymbolizeBatch: SymbolizeBatch answers as Symbolize does, address
// by address, on gcc (DWARF 4 and 5, -gsplit-dwarf), clang and Go
// binaries, a file without DWARF, an image of ours, a relocatable object
// and a file with a separate debug file, for addresses in functions, in
// no unit, between units and functions and outside every symbol, in any
// order and repeated.
func TestSymbolizeBatch(t *testing.T) {
	gcc := tooltest.Require(t, "gcc")
	clang := tooltest.Require(t, "clang-14", "clang")
	type input struct {
		name, path string
		step       uint64
		open       func(string) (*symbolize.Symbolizer, error)
	}
	ins := []input{
		{"gcc-dwarf5", buildC(t, gcc, "-O2", "-g", "-gdwarf-5"), 3, nil},
		{"gcc-dwarf4", buildC(t, gcc, "-O2", "-g", "-gdwarf-4"), 3, nil},
		{"gcc-O0", buildC(t, gcc, "-O0", "-g"), 5, nil},
		{"gcc-nodwarf", buildC(t, gcc, "-O2"), 3, nil},
		{"clang", buildC(t, clang, "-O2", "-g"), 3, nil},
		{"gcc-split", buildObjects(t, "gcc", "-O2", "-g", "-gsplit-dwarf"), 5, nil},
		{"go", buildGo(t), 61, nil},
		{"image", batchImage(t, 2000), 7, nil},
	}
	// A relocatable object: addresses are offsets in its text sections.
	dir := t.TempDir()
	obj := filepath.Join(dir, "o.o")
	src := filepath.Join(dir, "o.c")
	if err := os.WriteFile(src, []byte(objectSource), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(gcc, "-O2", "-g", "-c", "-o", obj, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc -c: %v\n%s", err, out)
	}
	ins = append(ins, input{"object", obj, 1, nil})
	// A stripped file with its debug file (objcopy --only-keep-debug).
	objcopy := tooltest.Require(t, "objcopy")
	full := buildC(t, gcc, "-O2", "-g", "-gdwarf-5")
	dbg, stripped := filepath.Join(dir, "prog.debug"), filepath.Join(dir, "prog")
	for _, args := range [][]string{{"--only-keep-debug", full, dbg}, {"--strip-debug", full, stripped}} {
		if out, err := exec.Command(objcopy, args...).CombinedOutput(); err != nil {
			t.Fatalf("objcopy %v: %v\n%s", args, err, out)
		}
	}
	ins = append(ins, input{"debug-file", stripped, 3, func(p string) (*symbolize.Symbolizer, error) { return symbolize.OpenDebug(p, dbg) }})
	for _, in := range ins {
		t.Run(in.name, func(t *testing.T) {
			open := in.open
			if open == nil {
				open = symbolize.Open
			}
			addrs := batchAddrs(t, in.path, in.step)
			if in.name == "object" {
				addrs = nil
				for a := uint64(0); a < 0x400; a++ {
					addrs = append(addrs, a)
				}
			}
			checkBatch(t, in.path, addrs, open)
		})
	}
}

// TestSymbolizeBatchClosed: after Close a batch answers nothing and
// returns ErrClosed without calling done.
func TestSymbolizeBatchClosed(t *testing.T) {
	s, err := symbolize.Open(buildGo(t))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	frames, err := s.SymbolizeBatch([]uint64{1, 2}, nil, func(int, int, error) { t.Fatal("done called") })
	if !errors.Is(err, symbolize.ErrClosed) || len(frames) != 0 {
		t.Fatalf("after Close: %d frames, %v; want none and ErrClosed", len(frames), err)
	}
}

// TestSymbolizeBatchTruncated: on a file truncated after Open (its
// mapping faults) every address of a batch fails with ErrFault, as
// Symbolize's do, without a panic; the frames passed in stay.
func TestSymbolizeBatchTruncated(t *testing.T) {
	if why := qemutest.Emulated(); why != "" {
		t.Skipf("%s, and qemu-user delivers SIGBUS without the faulting address", why)
	}
	gcc := tooltest.Require(t, "gcc")
	src := buildC(t, gcc, "-O2", "-g", "-gdwarf-5")
	addrs := codeAddrs(t, src, 200, 13)
	slices.Sort(addrs)
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, warm := range []int{0, 1, len(addrs)} {
		path := filepath.Join(t.TempDir(), "prog")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := symbolize.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs[:warm] {
			if _, err := s.Symbolize(a, nil); err != nil {
				t.Fatalf("before truncation, %#x: %v", a, err)
			}
		}
		if err := os.Truncate(path, 0); err != nil {
			t.Fatal(err)
		}
		faults := 0
		pre := []symbolize.Frame{{Function: "before"}}
		frames, err := s.SymbolizeBatch(addrs, pre, func(i, end int, err error) {
			if errors.Is(err, symbolize.ErrFault) {
				faults++
			} else if warm < len(addrs) {
				t.Errorf("warm %d, %#x: %v, want ErrFault", warm, addrs[i], err)
			}
		})
		if err != nil || len(frames) == 0 || frames[0].Function != "before" {
			t.Fatalf("warm %d: %d frames, %v", warm, len(frames), err)
		}
		if warm < len(addrs) && faults != len(addrs) {
			t.Errorf("warm %d: %d of %d addresses failed with ErrFault", warm, faults, len(addrs))
		}
		s.Close()
	}
}

// TestSymbolizeBatchConcurrent: batches on a fresh Symbolizer, at once
// with Prepare and with Symbolize (racing to build the same indexes and
// sort the symbol table), get the sequential answers.
func TestSymbolizeBatchConcurrent(t *testing.T) {
	path := buildGo(t)
	addrs := codeAddrs(t, path, 2000, 7)
	slices.Sort(addrs)
	want := symbolizeAll(t, path, addrs)
	s, err := symbolize.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.Prepare(addrs); err != nil {
			t.Errorf("Prepare: %v", err)
		}
	})
	wg.Go(func() {
		for i := len(addrs) - 1; i >= 0; i -= 3 {
			if fs, err := s.Symbolize(addrs[i], nil); err != nil || !slices.Equal(fs, want[i]) {
				t.Errorf("Symbolize %#x: %v%s", addrs[i], err, fmtFrames(fs))
				return
			}
		}
	})
	for g := range 2 {
		wg.Go(func() {
			part := addrs[g*len(addrs)/4:]
			start := 0
			var frames []symbolize.Frame
			ends := make([]int, len(part))
			frames, err := s.SymbolizeBatch(part, frames, func(i, end int, err error) {
				if err != nil {
					t.Errorf("batch %d, %#x: %v", g, part[i], err)
				}
				ends[i] = end
			})
			if err != nil {
				t.Errorf("batch %d: %v", g, err)
				return
			}
			for i := range part {
				if got := frames[start:ends[i]]; !slices.Equal(got, want[g*len(addrs)/4+i]) {
					t.Errorf("batch %d, %#x:%s\nwant%s", g, part[i], fmtFrames(got), fmtFrames(want[g*len(addrs)/4+i]))
					return
				}
				start = ends[i]
			}
		})
	}
	wg.Wait()
}
