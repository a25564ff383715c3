//go:build linux && (amd64 || arm64)

package gdbjit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"
)

// procMem reads n bytes of this process at addr through /proc/self/mem,
// the way a debugger reads them (and without turning addresses into Go
// pointers).
func procMem(t testing.TB, addr uint64, n int) []byte {
	t.Helper()
	f, err := os.Open("/proc/self/mem")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, int64(addr)); err != nil {
		t.Fatalf("read %d bytes at %#x: %v", n, addr, err)
	}
	return b
}

// debuggerView is what a debugger sees: the descriptor fields and the
// list from first_entry, each entry as (address, prev, symfile bytes).
type debuggerView struct {
	version, action uint32
	relevant        uint64
	entries         []uint64
	prevs           []uint64
	files           [][]byte
}

func readView(t testing.TB) debuggerView {
	t.Helper()
	le := binary.LittleEndian
	d := procMem(t, uint64(DescriptorAddr()), 24)
	v := debuggerView{version: le.Uint32(d), action: le.Uint32(d[4:]), relevant: le.Uint64(d[8:])}
	for a := le.Uint64(d[16:]); a != 0; {
		if len(v.entries) > 100000 {
			t.Fatal("list does not end")
		}
		e := procMem(t, a, 32)
		v.entries = append(v.entries, a)
		v.prevs = append(v.prevs, le.Uint64(e[8:]))
		v.files = append(v.files, procMem(t, le.Uint64(e[16:]), int(le.Uint64(e[24:]))))
		a = le.Uint64(e)
	}
	return v
}

// checkList asserts that the debugger's view is exactly want, newest
// first, with consistent prev links and symbol files.
func checkList(t *testing.T, want []*Entry, files map[*Entry][]byte) {
	t.Helper()
	v := readView(t)
	if v.version != 1 || v.action != actionNone || v.relevant != 0 {
		t.Errorf("descriptor: version %d action %d relevant %#x, want 1 0 0", v.version, v.action, v.relevant)
	}
	if len(v.entries) != len(want) || Len() != len(want) {
		t.Fatalf("list has %d entries (Len %d), want %d", len(v.entries), Len(), len(want))
	}
	for i, e := range want {
		if v.entries[i] != uint64(e.Addr()) {
			t.Errorf("entry %d at %#x, want %#x", i, v.entries[i], e.Addr())
		}
		var prev uint64
		if i > 0 {
			prev = v.entries[i-1]
		}
		if v.prevs[i] != prev {
			t.Errorf("entry %d prev_entry %#x, want %#x", i, v.prevs[i], prev)
		}
		if !bytes.Equal(v.files[i], files[e]) {
			t.Errorf("entry %d symbol file differs", i)
		}
	}
}

func fakeSymfile(i int) []byte {
	return fmt.Appendf([]byte("\x7fELF"), "symbol file %d %s", i, bytes.Repeat([]byte{'x'}, i*37))
}

func TestRegisterUnregisterAnyOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	files := map[*Entry][]byte{}
	var live []*Entry // newest first
	checkList(t, live, files)
	for round := range 200 {
		if len(live) == 0 || rng.IntN(3) != 0 {
			b := fakeSymfile(round % 50)
			e, err := Register(b)
			if err != nil {
				t.Fatal(err)
			}
			files[e] = b
			live = append([]*Entry{e}, live...)
		} else {
			i := rng.IntN(len(live))
			e := live[i]
			if err := e.Unregister(); err != nil {
				t.Fatal(err)
			}
			if err := e.Unregister(); !errors.Is(err, ErrUnregistered) {
				t.Fatalf("second Unregister: %v, want ErrUnregistered", err)
			}
			live = slices.Delete(live, i, i+1)
			delete(files, e)
		}
		checkList(t, live, files)
	}
	for len(live) > 0 {
		if err := live[len(live)-1].Unregister(); err != nil {
			t.Fatal(err)
		}
		live = live[:len(live)-1]
		checkList(t, live, files)
	}
}

func TestRegisterBatch(t *testing.T) {
	files := map[*Entry][]byte{}
	var in [][]byte
	for i := range 5 {
		in = append(in, fakeSymfile(i))
	}
	es, err := RegisterBatch(in)
	if err != nil {
		t.Fatal(err)
	}
	var want []*Entry
	for i, e := range es {
		files[e] = in[i]
		want = append([]*Entry{e}, want...)
	}
	checkList(t, want, files)
	// A bad file in a batch registers nothing.
	if _, err := RegisterBatch([][]byte{fakeSymfile(9), []byte("not elf")}); !errors.Is(err, ErrNotELF) {
		t.Errorf("batch with a bad file: %v, want ErrNotELF", err)
	}
	checkList(t, want, files)
	for _, e := range es {
		if err := e.Unregister(); err != nil {
			t.Fatal(err)
		}
	}
	checkList(t, nil, nil)
}

func TestRegisterRejects(t *testing.T) {
	for _, b := range [][]byte{nil, {}, []byte("\x7fEL"), []byte("ELF\x7f....")} {
		if e, err := Register(b); !errors.Is(err, ErrNotELF) {
			t.Errorf("Register(%q) = %v, %v; want ErrNotELF", b, e, err)
		}
	}
	checkList(t, nil, nil)
}

func TestConcurrentRegistration(t *testing.T) {
	const workers, per = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []*Entry
			for i := range per {
				e, err := Register(fakeSymfile(w*per + i))
				if err != nil {
					errs <- err
					return
				}
				mine = append(mine, e)
				if i%3 == 2 {
					if err := mine[0].Unregister(); err != nil {
						errs <- err
						return
					}
					mine = mine[1:]
				}
			}
			for _, e := range mine {
				if err := e.Unregister(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkList(t, nil, nil)
}

func BenchmarkRegisterUnregister(b *testing.B) {
	sym, err := Symfile([]Proc{{Name: "f", Addr: 0x10000, Size: 16, File: "/src/f.scm", Line: 1}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		e, err := Register(sym)
		if err != nil {
			b.Fatal(err)
		}
		if err := e.Unregister(); err != nil {
			b.Fatal(err)
		}
	}
}
