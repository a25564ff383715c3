package main

import (
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/internal/tooltest"
)

func TestSummarize(t *testing.T) {
	s, ok := summarize([]float64{5, 1, 3, 9})
	if !ok || s.med != 4 || s.min != 1 || s.max != 9 {
		t.Errorf("summarize = %+v %v, want median 4, 1–9", s, ok)
	}
	if _, ok := summarize(nil); ok {
		t.Error("summarize(nil) ok")
	}
	if got := cell(stat{med: 12345, min: 999, max: 2e6, n: 3}, true, 1); got != "12,300 (999–2,000,000)" {
		t.Errorf("cell = %q", got)
	}
}

func TestParseBench(t *testing.T) {
	out := `goos: linux
BenchmarkUnwindSteps-2   	   10000	    123.5 ns/op	  8000000 steps/s	       0 allocs/op
BenchmarkLookup/entries=100-2         	 2000000	        41.20 ns/op
BenchmarkLookup/entries=100-2         	 2000000	        43.00 ns/op
PASS`
	r := parseBench(out)
	if got := r["BenchmarkUnwindSteps"]["steps/s"]; len(got) != 1 || got[0] != 8e6 {
		t.Errorf("steps/s = %v", got)
	}
	if got := r["BenchmarkLookup/entries=100"]["ns/op"]; len(got) != 2 || got[1] != 43 {
		t.Errorf("lookup ns/op = %v", got)
	}
}

func TestBenchPattern(t *testing.T) {
	p := benchPattern([]string{"BenchmarkLookup/entries=1", "BenchmarkLookup/entries=1000"})
	if p != "^(BenchmarkLookup)$/^(entries=1|entries=1000)$" {
		t.Errorf("pattern %q", p)
	}
	sub := regexp.MustCompile(strings.SplitN(p, "/", 2)[1])
	if sub.MatchString("entries=100") {
		t.Errorf("%q matches entries=100", p)
	}
}

func TestSpliceMarkers(t *testing.T) {
	doc := "# Benchmarks\n\nIntro.\n\n## Old\n\ntext\n"
	once := spliceMarkers(doc, "## Generated\n\nrow 1\n")
	if !strings.HasPrefix(once, "# Benchmarks\n\n"+beginMarker) || !strings.Contains(once, "Intro.\n\n## Old\n\ntext\n") {
		t.Errorf("first splice:\n%s", once)
	}
	twice := spliceMarkers(once, "## Generated\n\nrow 2\n")
	if strings.Contains(twice, "row 1") || !strings.Contains(twice, "row 2") || strings.Count(twice, beginMarker) != 1 {
		t.Errorf("second splice:\n%s", twice)
	}
	if spliceMarkers(twice, "## Generated\n\nrow 2\n") != twice {
		t.Error("splicing the same text twice changes the file")
	}
	if strings.Replace(twice, "row 2", "row 1", 1) != once {
		t.Errorf("splice does not keep the rest of the file:\n%s\n---\n%s", once, twice)
	}
}

// TestAsmMatchesLink: the assembler source of the Link rows assembles
// and defines the same procedures, with the same code bytes (apart from
// the add immediate's encoding, which as may shorten), as the image.
func TestAsmMatchesLink(t *testing.T) {
	as := tooltest.Require(t, "as")
	dir := t.TempDir()
	src := filepath.Join(dir, "p.s")
	obj := filepath.Join(dir, "p.o")
	if err := os.WriteFile(src, []byte(asmSource(3)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(as, "--gdwarf-5", "-o", obj, src).CombinedOutput(); err != nil {
		t.Fatalf("as: %v\n%s", err, out)
	}
	f, err := elf.Open(obj)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	text, err := f.Section(".text").Data()
	if err != nil {
		t.Fatal(err)
	}
	img, err := elfimage.Link(linkModule(3), elfimage.LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "p.elf")
	if err := os.WriteFile(path, img, 0o644); err != nil {
		t.Fatal(err)
	}
	// linkModule is x86-64 code (Module.Arch nil), as is asmSource: the
	// image is opened as x86-64 whatever the test's GOARCH (on arm64,
	// Open's default would want EM_AARCH64).
	im, err := elfimage.Open(path, &elfimage.LoadOptions{Arch: arch.X86_64})
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	procs, err := im.Procedures()
	if err != nil {
		t.Fatal(err)
	}
	syms, _ := f.Symbols()
	for i, name := range []string{"p0", "p1", "p2"} {
		var off uint64
		found := false
		for _, s := range syms {
			if s.Name == name {
				off, found = s.Value, true
			}
		}
		if !found {
			t.Fatalf("as output lacks %s", name)
		}
		got := text[off : off+uint64(len(linkBody))]
		want := linkModule(3).Procs[i].Code
		if string(got[:12]) != string(want[:12]) || string(got[18:]) != string(want[18:]) {
			t.Errorf("%s: as code % x, Link code % x", name, got, want)
		}
		if procs[i].Name != name || procs[i].Size != uint64(len(linkBody)) {
			t.Errorf("image procedure %d = %s size %d", i, procs[i].Name, procs[i].Size)
		}
	}
	if f.Section(".debug_line") == nil || f.Section(".eh_frame") == nil {
		t.Error("as output lacks .debug_line or .eh_frame")
	}
}

func TestSchemeSourceDocLength(t *testing.T) {
	src := schemeSource(2, 100)
	if !strings.Contains(src, "(define* (p1 a") || len(src) < 200 {
		t.Errorf("source:\n%s", src)
	}
	b, err := schemeImage(10, 1000)
	if err != nil {
		t.Fatal(err)
	}
	// Ten 1,000-byte docstrings land in the tail about twice each.
	path := filepath.Join(t.TempDir(), "i.elf")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, tail, err := tailSize(path)
	if err != nil {
		t.Fatal(err)
	}
	if tail < 20000 {
		t.Errorf("tail %d bytes, want ≥ 20,000", tail)
	}
}

// BenchmarkLink is the Link row in process, for profiling:
//
//	go test -run NONE -bench Link -cpuprofile cpu.prof ./bench/cmd/benchrun
func BenchmarkLink(b *testing.B) {
	m := linkModule(10000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := elfimage.Link(m, elfimage.LinkOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*10000/b.Elapsed().Seconds(), "procs/s")
}

// BenchmarkOpen is the Load row in process (1,000 procedures), for
// profiling:
//
//	go test -run NONE -bench Open -cpuprofile cpu.prof ./bench/cmd/benchrun
func BenchmarkOpen(b *testing.B) {
	img, err := schemeImage(1000, 0)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "i.elf")
	if err := os.WriteFile(path, img, 0o644); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		im, err := elfimage.Open(path, nil)
		if err != nil {
			b.Fatal(err)
		}
		im.Close()
	}
}

// TestLeastOf: the least of the values, wherever it comes, and the first
// error, after which nothing more runs.
func TestLeastOf(t *testing.T) {
	for _, vals := range [][]float64{{3, 1, 2}, {1, 2, 3}, {3, 2, 1}, {2, 2, 2}} {
		i := 0
		got, err := leastOf(len(vals), func() (float64, error) { i++; return vals[i-1], nil })
		if want := slices.Min(vals); got != want || err != nil || i != len(vals) {
			t.Errorf("%v: %v, %v after %d runs; want %v", vals, got, err, i, want)
		}
	}
	boom := errors.New("boom")
	i := 0
	if _, err := leastOf(4, func() (float64, error) {
		i++
		if i == 2 {
			return 0, boom
		}
		return 1, nil
	}); err != boom || i != 2 {
		t.Errorf("error %v after %d runs; want boom after 2", err, i)
	}
}

// TestTimeStdinBest runs a shell script that counts its runs in a file
// and reads its standard input: timeStdinBest must run it k times, each
// with the whole input, and fail on the first failing run.
func TestTimeStdinBest(t *testing.T) {
	sh := tooltest.Require(t, "sh")
	dir := t.TempDir()
	in, count := filepath.Join(dir, "in"), filepath.Join(dir, "count")
	if err := os.WriteFile(in, []byte("a\nb\nc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Each run appends the line count of its input; the third run fails
	// when the script is given a second argument.
	script := `n=$(wc -l); echo $n >> "$1"; [ -z "$2" ] || [ $(wc -l < "$1") -lt 3 ]`
	if _, err := timeStdinBest(4, in, sh, "-c", script, "sh", count); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(count)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(b)); !slices.Equal(got, []string{"3", "3", "3", "3"}) {
		t.Errorf("runs saw input lines %q, want 4 runs of 3", got)
	}
	os.Remove(count)
	if _, err := timeStdinBest(4, in, sh, "-c", script, "sh", count, "fail"); err == nil {
		t.Error("no error from a failing third run")
	}
	if b, _ := os.ReadFile(count); len(strings.Fields(string(b))) != 3 {
		t.Errorf("runs after the failing one: %q", b)
	}
}
