//go:build linux && (amd64 || arm64)

package gdbjit

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"
)

// viewSymbols reads the debugger's view of the list (readView) and parses
// every symbol file with debug/elf: it returns how many times each
// procedure (name@addr) appears, the number of symbol files, and fails
// the test if two SHF_ALLOC sections of different files overlap or a
// symbol lies outside its section.
func viewSymbols(t *testing.T) (map[string]int, int) {
	t.Helper()
	v := readView(t)
	syms := map[string]int{}
	type rng struct {
		lo, hi uint64
		file   int
	}
	var rs []rng
	for i, b := range v.files {
		f, err := elf.NewFile(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("symbol file %d: %v", i, err)
		}
		ss, err := f.Symbols()
		if err != nil {
			t.Fatalf("symbol file %d: %v", i, err)
		}
		for _, s := range ss {
			sec := f.Sections[s.Section]
			if s.Value < sec.Addr || s.Value+s.Size > sec.Addr+sec.Size {
				t.Errorf("symbol %s [%#x, +%d) outside its section [%#x, +%d)", s.Name, s.Value, s.Size, sec.Addr, sec.Size)
			}
			syms[fmt.Sprintf("%s@%#x", s.Name, s.Value)]++
		}
		for _, s := range f.Sections {
			if s.Flags&elf.SHF_ALLOC != 0 {
				rs = append(rs, rng{s.Addr, s.Addr + s.Size, i})
			}
		}
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].lo < rs[j].lo })
	for i := 1; i < len(rs); i++ {
		if rs[i].lo < rs[i-1].hi {
			t.Errorf("SHF_ALLOC sections overlap: [%#x, %#x) of file %d and [%#x, %#x) of file %d",
				rs[i-1].lo, rs[i-1].hi, rs[i-1].file, rs[i].lo, rs[i].hi, rs[i].file)
		}
	}
	return syms, len(v.files)
}

// checkPublished asserts that the debugger sees exactly the procedures of
// want (name@addr), each once.
func checkPublished(t *testing.T, want map[string]bool) int {
	t.Helper()
	got, files := viewSymbols(t)
	for k, n := range got {
		if !want[k] {
			t.Errorf("debugger sees %s (%d times), not published", k, n)
		} else if n != 1 {
			t.Errorf("debugger sees %s %d times", k, n)
		}
	}
	for k := range want {
		if got[k] == 0 {
			t.Errorf("debugger does not see %s", k)
		}
	}
	return files
}

func testProc(i int, addr uint64) Proc {
	return Proc{Name: fmt.Sprintf("p%d", i), Addr: addr, Size: 16, File: "/src/p.scm", Line: i + 1,
		Lines: []Line{{Offset: 5, Line: i + 2}}}
}

func key(p Proc) string { return fmt.Sprintf("%s@%#x", p.Name, p.Addr) }

// objectBound is the bound on objects the package documentation gives:
// (Fanout-1) per level up to MaxObjectProcs, plus Fanout*n/MaxObjectProcs.
func objectBound(n, fanout, maxObj int) int {
	return (fanout-1)*(level(maxObj, fanout)+1) + fanout*n/maxObj
}

// TestPublisherModel drives a Publisher with random adds (one at a time
// and in groups, in address order and scattered, including addresses
// freed just before), removes and flushes, and after every Flush compares
// what a debugger sees with the model: every live procedure exactly once,
// no removed one, SHF_ALLOC ranges of different files disjoint, and the
// number of registered files within the documented bound.
func TestPublisherModel(t *testing.T) {
	for _, opt := range []PublisherOptions{
		{Delay: time.Hour, MaxPending: 1 << 30},
		{Delay: time.Hour, MaxPending: 1 << 30, Fanout: 3, MaxObjectProcs: 64},
		{Delay: time.Millisecond, MaxPending: 7, MaxObjectProcs: 32},
	} {
		t.Run(fmt.Sprintf("%+v", opt), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			p := NewPublisher(opt)
			const slots = 3000
			base := uint64(0x7f0000000000)
			live := map[uint64]Proc{}
			next := 0
			for round := range 60 {
				for range rng.IntN(80) {
					var procs []Proc
					for range 1 + rng.IntN(3) {
						var a uint64
						if rng.IntN(2) == 0 {
							a = base + uint64(next%slots)*32 // sequential, like a bump allocator
						} else {
							a = base + uint64(rng.IntN(slots))*32 // reused holes
						}
						if _, ok := live[a]; ok || slices.ContainsFunc(procs, func(q Proc) bool { return q.Addr == a }) {
							continue
						}
						procs = append(procs, testProc(next, a))
						next++
					}
					if err := p.Add(procs...); err != nil {
						t.Fatal(err)
					}
					for _, q := range procs {
						live[q.Addr] = q
					}
				}
				for a := range live {
					if rng.IntN(8) == 0 {
						if err := p.Remove(a); err != nil {
							t.Fatal(err)
						}
						delete(live, a)
					}
				}
				if round%3 == 2 {
					continue // leave work to the next flush
				}
				if err := p.Flush(); err != nil {
					t.Fatal(err)
				}
				want := map[string]bool{}
				for _, q := range live {
					want[key(q)] = true
				}
				files := checkPublished(t, want)
				st := p.Stats()
				if st.Objects != files || st.Procs != len(live) || st.Pending != 0 {
					t.Errorf("Stats %+v; debugger sees %d files, model has %d procedures", st, files, len(live))
				}
				fanout, maxObj := opt.Fanout, opt.MaxObjectProcs
				if fanout == 0 {
					fanout = 4
				}
				if maxObj == 0 {
					maxObj = 1024
				}
				if b := objectBound(len(live), fanout, maxObj); files > b {
					t.Errorf("%d files for %d procedures, bound %d", files, len(live), b)
				}
				if t.Failed() {
					t.Fatalf("round %d", round)
				}
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			checkPublished(t, nil)
		})
	}
}

// TestPublisherOneAtATime adds 3,000 procedures one at a time in address
// order with a Flush after each, the worst case for the number of
// objects, and checks the bound after every flush and the amortized work
// (files registered per procedure).
func TestPublisherOneAtATime(t *testing.T) {
	p := NewPublisher(PublisherOptions{Delay: time.Hour, MaxObjectProcs: 512})
	defer p.Close()
	want := map[string]bool{}
	for i := range 3000 {
		q := testProc(i, 0x10000+uint64(i)*16)
		if err := p.Add(q); err != nil {
			t.Fatal(err)
		}
		want[key(q)] = true
		if err := p.Flush(); err != nil {
			t.Fatal(err)
		}
		if st := p.Stats(); st.Objects > objectBound(i+1, 4, 512) {
			t.Fatalf("after %d procedures: %d objects", i+1, st.Objects)
		}
	}
	files := checkPublished(t, want)
	st := p.Stats()
	t.Logf("%d files; %+v", files, st)
	// One registration per flush plus the merges: a merge replaces
	// Fanout files by one, so merges add at most 1/(Fanout-1) of the
	// flushes' registrations.
	if st.Registrations > 3000+3000/3+1 {
		t.Errorf("%d registrations for 3000 procedures", st.Registrations)
	}
}

// TestPublisherTimer checks that the timer publishes without Flush within
// a few Delays, and that MaxPending starts a flush at once.
func TestPublisherTimer(t *testing.T) {
	var mu sync.Mutex
	published := 0
	p := NewPublisher(PublisherOptions{Delay: 10 * time.Millisecond, MaxPending: 50,
		OnPublish: func(n int) { mu.Lock(); published += n; mu.Unlock() }})
	defer p.Close()
	if err := p.Add(testProc(1, 0x1000)); err != nil {
		t.Fatal(err)
	}
	wait := func(n int) time.Duration {
		start := time.Now()
		for time.Since(start) < 5*time.Second {
			mu.Lock()
			got := published
			mu.Unlock()
			if got >= n {
				return time.Since(start)
			}
			time.Sleep(time.Millisecond)
		}
		t.Fatalf("%d procedures not published after 5 s", n)
		return 0
	}
	wait(1)
	checkPublished(t, map[string]bool{key(testProc(1, 0x1000)): true})
	// MaxPending: 50 procedures at once do not wait for the timer.
	p.opt.Delay = time.Hour
	want := map[string]bool{key(testProc(1, 0x1000)): true}
	var procs []Proc
	for i := range 50 {
		procs = append(procs, testProc(10+i, 0x2000+uint64(i)*16))
		want[key(procs[i])] = true
	}
	if err := p.Add(procs...); err != nil {
		t.Fatal(err)
	}
	if d := wait(51); d > time.Second {
		t.Errorf("a full batch waited %v", d)
	}
	checkPublished(t, want)
}

func TestPublisherErrors(t *testing.T) {
	p := NewPublisher(PublisherOptions{Delay: time.Hour})
	if err := p.Add(Proc{Name: "", Addr: 1, Size: 1}); !errors.Is(err, ErrInvalidProc) {
		t.Errorf("empty name: %v", err)
	}
	if err := p.Add(testProc(1, 0x1000), testProc(2, 0x1000)); !errors.Is(err, ErrInvalidProc) {
		t.Errorf("two at one address: %v", err)
	}
	if err := p.Add(testProc(1, 0x1000)); err != nil {
		t.Fatal(err)
	}
	if err := p.Add(testProc(2, 0x1000)); !errors.Is(err, ErrInvalidProc) {
		t.Errorf("address published: %v", err)
	}
	if err := p.Remove(0x2000); !errors.Is(err, ErrNotPublished) {
		t.Errorf("Remove of nothing: %v", err)
	}
	// Overlapping in another way: found at the flush, the later one left
	// out, the other published.
	if err := p.Add(Proc{Name: "over", Addr: 0x1008, Size: 16}); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(); !errors.Is(err, ErrInvalidProc) {
		t.Errorf("Flush with overlapping procedures: %v", err)
	}
	checkPublished(t, map[string]bool{key(testProc(1, 0x1000)): true})
	if err := p.Remove(0x1008); !errors.Is(err, ErrNotPublished) {
		t.Errorf("Remove of a procedure left out: %v", err)
	}
	// A pending procedure overlapping a published one.
	if err := p.Add(Proc{Name: "over2", Addr: 0xff8, Size: 16}); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(); !errors.Is(err, ErrInvalidProc) {
		t.Errorf("Flush with a procedure overlapping a published one: %v", err)
	}
	checkPublished(t, map[string]bool{key(testProc(1, 0x1000)): true})
	if err := p.Flush(); err != nil {
		t.Errorf("second Flush: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	checkPublished(t, nil)
	if err := p.Add(testProc(3, 0x3000)); !errors.Is(err, ErrClosed) {
		t.Errorf("Add after Close: %v", err)
	}
	if err := p.Remove(0x1000); !errors.Is(err, ErrClosed) {
		t.Errorf("Remove after Close: %v", err)
	}
	if err := p.Flush(); !errors.Is(err, ErrClosed) {
		t.Errorf("Flush after Close: %v", err)
	}
	if err := p.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
}

// TestPublisherConcurrent adds and removes from several goroutines while
// background flushes run and Flush is called; run it with -race.
func TestPublisherConcurrent(t *testing.T) {
	p := NewPublisher(PublisherOptions{Delay: time.Millisecond, MaxPending: 20, MaxObjectProcs: 64})
	const workers, per = 6, 300
	var wg sync.WaitGroup
	var mu sync.Mutex
	want := map[string]bool{}
	errs := make(chan error, workers+1)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := map[string]bool{}
			for i := range per {
				q := testProc(w*per+i, uint64(0x100000*(w+1)+i*16))
				if err := p.Add(q); err != nil {
					errs <- err
					return
				}
				mine[key(q)] = true
				if i%4 == 3 {
					r := testProc(w*per+i-2, uint64(0x100000*(w+1)+(i-2)*16))
					if err := p.Remove(r.Addr); err != nil {
						errs <- err
						return
					}
					delete(mine, key(r))
				}
				if i%50 == 0 {
					if err := p.Flush(); err != nil {
						errs <- err
						return
					}
				}
			}
			mu.Lock()
			for k := range mine {
				want[k] = true
			}
			mu.Unlock()
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 50 {
			_ = p.Stats()
			time.Sleep(100 * time.Microsecond)
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	checkPublished(t, want)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	checkPublished(t, nil)
}

// TestSymfileGroups reads a symbol file of two groups with debug/elf and
// debug/dwarf: two .text sections with their ranges, each symbol in its
// own, two compile units with their line rows.
func TestSymfileGroups(t *testing.T) {
	g1 := []Proc{testProc(1, 0x1000), testProc(2, 0x1010)}
	g2 := []Proc{testProc(3, 0x5000), {Name: "nofile", Addr: 0x5020, Size: 8}}
	b, err := symfileGroups([][]Proc{g1, g2})
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var texts []*elf.Section
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC != 0 {
			texts = append(texts, s)
		}
	}
	if len(texts) != 2 || texts[0].Addr != 0x1000 || texts[0].Size != 0x20 || texts[1].Addr != 0x5000 || texts[1].Size != 0x28 {
		t.Fatalf("SHF_ALLOC sections: %v", texts)
	}
	if len(f.Progs) != 2 || f.Progs[1].Vaddr != 0x5000 || f.Progs[1].Memsz != 0x28 {
		t.Errorf("program headers: %v", f.Progs)
	}
	syms, _ := f.Symbols()
	for _, s := range syms {
		if sec := f.Sections[s.Section]; s.Value < sec.Addr || s.Value >= sec.Addr+sec.Size {
			t.Errorf("%s at %#x in section [%#x, +%#x)", s.Name, s.Value, sec.Addr, sec.Size)
		}
	}
	d, err := f.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	r := d.Reader()
	var cus int
	rows := map[uint64]int{}
	for {
		e, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e == nil {
			break
		}
		if e.Tag != dwarf.TagCompileUnit {
			continue
		}
		cus++
		lr, err := d.LineReader(e)
		if err != nil {
			t.Fatal(err)
		}
		if lr == nil {
			continue
		}
		var le dwarf.LineEntry
		for lr.Next(&le) == nil {
			if !le.EndSequence {
				rows[le.Address] = le.Line
			}
		}
	}
	if cus != 2 {
		t.Errorf("%d compile units, want 2", cus)
	}
	want := map[uint64]int{0x1000: 2, 0x1005: 3, 0x1010: 3, 0x1015: 4, 0x5000: 4, 0x5005: 5}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Errorf("line rows %v, want %v", rows, want)
	}
}

// BenchmarkPublisherAdd is the publishing overhead per procedure without a
// debugger: Add of one procedure at a time, with the flushes (symbol
// files built and registered, repacks) amortized in. flush=N flushes
// synchronously after every N Adds; flush=timer leaves it to the default
// timer (20 ms) on another goroutine. Every 10,000 procedures the
// benchmark flushes, closes the Publisher and starts a new one, so the
// cost is that of a JIT's first 10,000.
func BenchmarkPublisherAdd(b *testing.B) {
	for _, every := range []int{1, 64, 0} {
		name := fmt.Sprintf("flush=%d", every)
		if every == 0 {
			name = "flush=timer"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			const n = 10000
			opt := PublisherOptions{}
			if every > 0 {
				opt.Delay = time.Hour
			}
			p := NewPublisher(opt)
			i := 0
			finish := func() {
				if err := p.Flush(); err != nil {
					b.Fatal(err)
				}
				if err := p.Close(); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				if err := p.Add(Proc{Name: "proc", Addr: 0x10000 + uint64(i)*32, Size: 24, File: "/src/p.scm", Line: 7}); err != nil {
					b.Fatal(err)
				}
				i++
				if every > 0 && i%every == 0 {
					if err := p.Flush(); err != nil {
						b.Fatal(err)
					}
				}
				if i == n {
					finish()
					p = NewPublisher(opt)
					i = 0
				}
			}
			finish()
		})
	}
}
