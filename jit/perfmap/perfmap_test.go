package perfmap

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/elfimage/elfimage/dwarf"
)

func TestWriterFormat(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if want := filepath.Join(dir, fmt.Sprintf("perf-%d.map", os.Getpid())); w.Path() != want {
		t.Fatalf("path %q, want %q", w.Path(), want)
	}
	if err := w.Add(0x7f00deadbe00, 0x1A0, "fib (lib.scm:3)"); err != nil {
		t.Fatal(err)
	}
	if err := w.Add(0x1000, 0x10, "evil\nname\r\x00x"); err != nil {
		t.Fatal(err)
	}
	if err := w.Add(0x2000, 0x10, "f"); err != nil {
		t.Fatal(err)
	}
	if err := w.AddBatch([]Entry{{0x3000, 8, "a b"}, {0x3008, 8, "[tramp]"}}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	want := "7f00deadbe00 1a0 fib (lib.scm:3)\n" +
		"1000 10 evil name  x\n" +
		"2000 10 f  \n" +
		"3000 8 a b\n" +
		"3008 8 [tramp]\n"
	if string(got) != want {
		t.Fatalf("file:\n%q\nwant\n%q", got, want)
	}
	fi, err := os.Stat(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Geteuid() {
		t.Errorf("owner %d, want %d", st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm()&^0o644 != 0 {
		t.Errorf("mode %v, want at most 0644", fi.Mode().Perm())
	}
	// Every line is one perf would keep: its name, after the two numbers
	// and spaces, is at least 3 bytes (perf's "len + 2 >= line_len").
	for _, l := range strings.Split(strings.TrimSuffix(string(got), "\n"), "\n") {
		f := strings.SplitN(l, " ", 3)
		if len(f) != 3 || len(f[2]) < 3 {
			t.Errorf("perf would skip line %q", l)
		}
	}
}

func TestWriterRejects(t *testing.T) {
	w, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []Entry{{1, 1, ""}, {1, 1, " \n"}, {1, 0, "zero"}, {^uint64(0), 2, "wrap"}} {
		if err := w.Add(e.Start, e.Size, e.Name); !errors.Is(err, ErrEntry) {
			t.Errorf("Add(%v) = %v, want ErrEntry", e, err)
		}
	}
	if err := w.AddBatch([]Entry{{1, 1, "good"}, {2, 0, "bad"}}); !errors.Is(err, ErrEntry) || !strings.Contains(err.Error(), "entry 1") {
		t.Errorf("AddBatch = %v", err)
	}
	if b, _ := os.ReadFile(w.Path()); len(b) != 0 {
		t.Errorf("rejected batch wrote %q", b)
	}
	w.Close()
	if err := w.Add(1, 1, "late"); !errors.Is(err, ErrClosed) {
		t.Errorf("Add after Close = %v", err)
	}
}

func TestOpenSingletonAndStale(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName(os.Getpid()))
	// A stale file from a previous process with the same pid, and a
	// symbolic link in its place later: neither is written through.
	if err := os.WriteFile(path, []byte("dead 1 stale\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	w1, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	w2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if w1 != w2 {
		t.Fatal("Open returned two writers for one file")
	}
	w1.Add(0x10, 4, "new")
	w1.Close()
	// Reopened after Close: appends.
	w3, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if w3 == w1 {
		t.Fatal("Open returned a closed writer")
	}
	w3.Add(0x20, 4, "more")
	w3.Close()
	got, _ := os.ReadFile(path)
	if string(got) != "10 4 new\n20 4 more\n" {
		t.Fatalf("file %q", got)
	}
	// A symbolic link planted in place of the file is not followed.
	os.Remove(path)
	target := filepath.Join(dir, "target")
	os.WriteFile(target, nil, 0o644)
	os.Symlink(target, path)
	if _, err := Open(dir); err == nil {
		t.Error("Open followed a symbolic link")
	}
	if b, _ := os.ReadFile(target); len(b) != 0 {
		t.Errorf("target written: %q", b)
	}
}

// TestConcurrentWriters: many goroutines add at once; every line must be
// whole and every entry present (run with -race).
func TestConcurrentWriters(t *testing.T) {
	w, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	const G, N = 8, 200
	var wg sync.WaitGroup
	for g := range G {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range N {
				start := uint64(g)<<32 | uint64(i)<<8
				name := fmt.Sprintf("g%d_proc_%d with a long name %s", g, i, strings.Repeat("x", i%50))
				if i%10 == 0 {
					if err := w.AddBatch([]Entry{{start, 0x80, name}, {start + 0x80, 0x80, name + "'"}}); err != nil {
						t.Error(err)
					}
				} else if err := w.Add(start, 0x100, name); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	f, err := os.Open(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	if m.Skipped != 0 {
		t.Fatalf("%d torn or malformed lines, first: %v", m.Skipped, m.FirstSkip)
	}
	if want := G * (N + N/10); len(m.Raw) != want {
		t.Fatalf("%d lines, want %d", len(m.Raw), want)
	}
	for g := range G {
		for i := range N {
			pc := uint64(g)<<32 | uint64(i)<<8 | 0x10
			e, ok := m.Lookup(pc)
			if !ok || !strings.HasPrefix(e.Name, fmt.Sprintf("g%d_proc_%d ", g, i)) {
				t.Fatalf("Lookup(%#x) = %v, %v", pc, e, ok)
			}
		}
	}
}

func TestParseOtherProducers(t *testing.T) {
	in := "" +
		"7F0012340000 40 Interpreter\r\n" + // upper-case hex, CRLF
		"0x7f0012340040 0x20 LazyCompile:~fib /tmp/x.js:1\n" + // 0x prefixes, spaces in name
		"\n" + // blank
		"   \t\n" + // blank with spaces
		"7f0012340060\t10\tjava.lang.String::hashCode()  \n" + // tabs, trailing spaces
		"not a line\n" + // malformed: skipped
		"1000 10\n" + // no name: skipped (perf skips too)
		"12345678901234567 1 toolong\n" + // 17 digits: skipped
		"ffffffffffffffff 2 wraps\n" + // past 2^64: skipped
		"7f0012340070 0 empty\n" + // size 0: kept raw, covers nothing
		"7f0012340080 8 last without newline"
	m, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{
		{0x7f0012340000, 0x40, "Interpreter"},
		{0x7f0012340040, 0x20, "LazyCompile:~fib /tmp/x.js:1"},
		{0x7f0012340060, 0x10, "java.lang.String::hashCode()"},
		{0x7f0012340070, 0, "empty"},
		{0x7f0012340080, 8, "last without newline"},
	}
	if fmt.Sprint(m.Raw) != fmt.Sprint(want) {
		t.Fatalf("raw\n%v\nwant\n%v", m.Raw, want)
	}
	if m.Skipped != 4 {
		t.Errorf("skipped %d, want 4", m.Skipped)
	}
	var fe *dwarf.FormatError
	if !errors.As(m.FirstSkip, &fe) || !strings.Contains(fe.Msg, "line 6") || fe.Source != Section {
		t.Errorf("FirstSkip = %v", m.FirstSkip)
	}
	if len(m.Entries) != 4 {
		t.Errorf("entries %v", m.Entries)
	}
	if e, ok := m.Lookup(0x7f0012340070); ok {
		t.Errorf("size-0 entry found: %v", e)
	}
	if e, _ := m.Lookup(0x7f0012340087); e.Name != "last without newline" {
		t.Errorf("Lookup = %v", e)
	}
}

// TestLaterWins: code freed and reused; the later line owns the overlap
// and the earlier one keeps only what is still visible.
func TestLaterWins(t *testing.T) {
	in := "" +
		"1000 100 old\n" + // [0x1000, 0x1100)
		"1040 20 new\n" + // [0x1040, 0x1060) inside old
		"10f0 20 tail\n" + // [0x10f0, 0x1110) overlapping old's end
		"2000 10 a\n" +
		"2000 10 b\n" // same range: b wins
	m, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{
		{0x1000, 0x40, "old"},
		{0x1040, 0x20, "new"},
		{0x1060, 0x90, "old"},
		{0x10f0, 0x20, "tail"},
		{0x2000, 0x10, "b"},
	}
	if fmt.Sprint(m.Entries) != fmt.Sprint(want) {
		t.Fatalf("entries\n%v\nwant\n%v", m.Entries, want)
	}
	for _, c := range []struct {
		pc   uint64
		name string
	}{{0xfff, ""}, {0x1000, "old"}, {0x103f, "old"}, {0x1040, "new"}, {0x105f, "new"}, {0x1060, "old"}, {0x10ef, "old"}, {0x10f0, "tail"}, {0x110f, "tail"}, {0x1110, ""}, {0x2005, "b"}, {0x2010, ""}} {
		e, ok := m.Lookup(c.pc)
		if e.Name != c.name || ok != (c.name != "") {
			t.Errorf("Lookup(%#x) = %v, %v; want %q", c.pc, e, ok, c.name)
		}
	}
	if _, err := m.Find(0x5000); !errors.Is(err, ErrNotFound) {
		t.Errorf("Find miss = %v", err)
	}
}

func TestParseLongLine(t *testing.T) {
	in := "1000 10 ok\n2000 10 " + strings.Repeat("n", MaxLine) + "\n"
	m, err := Parse(strings.NewReader(in))
	var fe *dwarf.FormatError
	if !errors.As(err, &fe) || !strings.Contains(fe.Msg, "line 2") {
		t.Fatalf("err = %v", err)
	}
	if len(m.Raw) != 1 {
		t.Errorf("raw %v", m.Raw)
	}
}

func TestLookupAllocs(t *testing.T) {
	var b bytes.Buffer
	for i := range 1000 {
		fmt.Fprintf(&b, "%x %x p%d\n", 0x10000+i*0x40, 0x40, i)
	}
	m, err := Parse(&b)
	if err != nil {
		t.Fatal(err)
	}
	var sink Entry
	if n := testing.AllocsPerRun(100, func() { sink, _ = m.Lookup(0x10000 + 517*0x40 + 3) }); n != 0 {
		t.Errorf("Lookup allocates %v", n)
	}
	if sink.Name != "p517" {
		t.Errorf("Lookup = %v", sink)
	}
}

// TestDefaultPath checks the path perf reads without writing to /tmp.
func TestDefaultPath(t *testing.T) {
	if got, want := filepath.Join(DefaultDir, FileName(1234)), "/tmp/perf-1234.map"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

func BenchmarkLookup(b *testing.B) {
	var buf bytes.Buffer
	for i := range 10000 {
		fmt.Fprintf(&buf, "%x %x p%d\n", 0x10000+i*0x40, 0x40, i)
	}
	m, _ := Parse(&buf)
	b.ReportAllocs()
	pc := uint64(0x10000)
	for b.Loop() {
		m.Lookup(pc)
		pc = 0x10000 + (pc*7+0x40)%(10000*0x40)
	}
}

func BenchmarkAdd(b *testing.B) {
	w, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	b.ReportAllocs()
	var i uint64
	for b.Loop() {
		w.Add(0x7f0000000000+i*0x40, 0x40, "procedure_name")
		i++
	}
}
