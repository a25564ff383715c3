package elfimage

import (
	"runtime"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf/frame"
)

// TestHotPathsDoNotAllocate: after the first query built its index, the
// run-time lookups (image by pc, procedure, source position, FDE through
// the registry) allocate nothing.
func TestHotPathsDoNotAllocate(t *testing.T) {
	m := &Module{
		File: "hot.s",
		Procs: []*Proc{{
			Name: "f",
			Code: []byte{0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3}, // push rbp; mov rbp, rsp; pop rbp; ret
			CFI: []frame.Insn{
				{PC: 1, Op: frame.OpDefCFAOffset, Offset: 16},
				{PC: 1, Op: frame.OpOffset, Reg: arch.X86_64_RBP, Offset: -16},
				{PC: 4, Op: frame.OpDefCFARegister, Reg: arch.X86_64_RBP},
				{PC: 5, Op: frame.OpDefCFA, Reg: arch.X86_64_RSP, Offset: 8},
			},
			Lines: []LineRow{{Offset: 0, Line: 1, Column: 1, IsStmt: true}, {Offset: 4, Line: 2, Column: 3}},
		}},
	}
	b, err := Link(m, LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	im, err := Load("hot.elf", b, &LoadOptions{Arch: arch.X86_64}) // x86-64 CFI, queried, never run
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	procs, err := im.Procedures()
	if err != nil || len(procs) != 1 {
		t.Fatalf("Procedures = %v, %v", procs, err)
	}
	addr := procs[0].Start + 4
	pc := im.Base() + uintptr(addr)
	var fde frame.ParsedFDE
	var finder imageFinder
	check := func(name string, f func() error) {
		if err := f(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n := testing.AllocsPerRun(100, func() { f() }); n != 0 {
			t.Errorf("%s allocates %.1f times per call", name, n)
		}
	}
	check("Lookup", func() error { _, err := Lookup(pc); return err })
	check("ProcedureAt", func() error { _, err := im.ProcedureAt(addr); return err })
	check("PositionAt", func() error {
		p, err := im.PositionAt(addr)
		if err == nil && (p.Line != 2 || p.Column != 3) {
			t.Errorf("PositionAt = %v, want line 2 column 3", p)
		}
		return err
	})
	check("FindFDE through the registry", func() error { return finder.FindFDE(uint64(pc), &fde) })
}

// linkLineProcs links a module of source file file whose procedures,
// named names, are x86-64 "push rbp; mov rbp, rsp; pop rbp; ret" (6
// bytes) with two line rows: offset 0 at 1:1, offset 4 (pop) at 2:3.
func linkLineProcs(t *testing.T, file string, names ...string) []byte {
	t.Helper()
	m := &Module{File: file}
	for _, name := range names {
		m.Procs = append(m.Procs, &Proc{
			Name:  name,
			Code:  []byte{0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3},
			Lines: []LineRow{{Offset: 0, Line: 1, Column: 1, IsStmt: true}, {Offset: 4, Line: 2, Column: 3}},
		})
	}
	b, err := Link(m, LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFirstPositionAllocations: the first PositionAt on a freshly loaded
// image allocates one thing: its file name's string (answered from the
// position index without a query state) or, on the line-sequence path,
// its query state with the line unit's reader and the file name's bytes
// beside it (no line header tables, no remembered-answers chunk, no
// string); a second address in the same file allocates at most two: the
// query state (the index's path) or the chunks of remembered answers the
// two answers then go to (one or two).
func TestFirstPositionAllocations(t *testing.T) {
	b := linkLineProcs(t, "first.s", "f", "g")
	mallocs := func(f func()) uint64 {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		f()
		runtime.ReadMemStats(&m1)
		return m1.Mallocs - m0.Mallocs
	}
	best := [2]uint64{1 << 62, 1 << 62} // the least of a few runs: the runtime may allocate meanwhile
	for range 5 {
		im, err := Load("first.elf", b, &LoadOptions{Arch: arch.X86_64})
		if err != nil {
			t.Fatal(err)
		}
		procs, err := im.Procedures()
		if err != nil || len(procs) != 2 {
			t.Fatalf("Procedures = %v, %v", procs, err)
		}
		im.Close()
		if im, err = Load("first.elf", b, &LoadOptions{Arch: arch.X86_64}); err != nil {
			t.Fatal(err)
		}
		var p [2]Position
		for i := range 2 {
			n := mallocs(func() { p[i], err = im.PositionAt(procs[i].Start + 4) })
			if err != nil || p[i].Line != 2 || p[i].Column != 3 || p[i].File != "first.s" {
				t.Fatalf("PositionAt(%s+4) = %v, %v", procs[i].Name, p[i], err)
			}
			best[i] = min(best[i], n)
		}
		im.Close()
	}
	if best[0] > 1 || best[1] > 2 {
		t.Errorf("first PositionAt allocates %d times, the second %d; want at most 1 and 2", best[0], best[1])
	}
}

// TestFirstPositionPathRoom: the file names of an image's first
// PositionAt (a string of its own, made without the query state) and of
// its second (which makes the state: built in the state's room or,
// longer than it, in a slice of its own) are the file's path, and stay
// so after Close.
func TestFirstPositionPathRoom(t *testing.T) {
	for _, file := range []string{"s.scm", strings.Repeat("d/", 40) + "s.scm", strings.Repeat("long/", 60) + "s.scm"} {
		b := linkLineProcs(t, file, "f")
		im, err := Load("room.elf", b, &LoadOptions{Arch: arch.X86_64})
		if err != nil {
			t.Fatal(err)
		}
		procs, err := im.Procedures()
		if err != nil || len(procs) != 1 {
			t.Fatalf("Procedures = %v, %v", procs, err)
		}
		im.Close()
		if im, err = Load("room.elf", b, &LoadOptions{Arch: arch.X86_64}); err != nil {
			t.Fatal(err)
		}
		p, err := im.PositionAt(procs[0].Start + 4)
		if err != nil || p.File != file || p.Line != 2 {
			t.Fatalf("PositionAt = %+v, %v; want file %q line 2", p, err, file)
		}
		q, err := im.PositionAt(procs[0].Start)
		if err != nil || q.File != file || q.Line != 1 {
			t.Fatalf("second PositionAt = %+v, %v", q, err)
		}
		im.Close()
		runtime.GC()
		if p.File != file || q.File != file {
			t.Fatalf("after Close: %q, %q", p.File, q.File)
		}
	}
}

// TestPositionOnlyRemembers: on an image asked nothing but PositionAt,
// only the first answer is made without the query state (and not
// remembered); from the second query on the state holds the answers, so
// that a repeated PositionAt allocates nothing.
func TestPositionOnlyRemembers(t *testing.T) {
	b := linkLineProcs(t, "only.s", "f")
	load := func() *Image {
		im, err := Load("only.elf", b, &LoadOptions{Arch: arch.X86_64})
		if err != nil {
			t.Fatal(err)
		}
		return im
	}
	im0 := load()
	procs, err := im0.Procedures()
	im0.Close()
	if err != nil || len(procs) != 1 {
		t.Fatalf("Procedures = %v, %v", procs, err)
	}
	addr := procs[0].Start + 4
	im := load()
	defer im.Close()
	for i := range 2 {
		p, err := im.PositionAt(addr)
		if err != nil || p.Line != 2 || p.Column != 3 || p.File != "only.s" {
			t.Fatalf("PositionAt %d = %v, %v", i, p, err)
		}
		if (im.debug.Load() != nil) != (i == 1) {
			t.Fatalf("after PositionAt %d: query state made %v, want %v", i, im.debug.Load() != nil, i == 1)
		}
	}
	if n := testing.AllocsPerRun(100, func() { im.PositionAt(addr) }); n != 0 {
		t.Errorf("repeated PositionAt allocates %.1f times per call", n)
	}
}
