package symbolize_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/elfimage/elfimage/internal/tooltest"
	"github.com/elfimage/elfimage/symbolize"
)

// The benchmark binary: benchFiles C files of benchPerFile small functions
// each (20,000 in all), built with gcc -O2 -g. Every function inlines a
// helper, with distinct constants so that gcc's identical code folding
// keeps them apart.
const (
	benchFiles   = 20
	benchPerFile = 1000
)

var (
	bigOnce sync.Once
	bigPath string
	bigErr  error
)

func bigBinary(tb testing.TB) string {
	gcc := tooltest.Require(tb, "gcc")
	bigOnce.Do(func() {
		// Kept between runs: building takes minutes.
		dir := filepath.Join(os.TempDir(), fmt.Sprintf("elfimage-symbolize-bench-%d-%d-v2", benchFiles, benchPerFile))
		bigPath = filepath.Join(dir, "big")
		if _, err := os.Stat(bigPath); err == nil {
			return
		}
		if bigErr = os.MkdirAll(dir, 0o755); bigErr != nil {
			return
		}
		var srcs []string
		for f := 0; f < benchFiles; f++ {
			var b bytes.Buffer
			fmt.Fprintf(&b, "static inline int mix%d(int x, int k) { return x * k + %d; }\n", f, f)
			for i := 0; i < benchPerFile; i++ {
				n := f*benchPerFile + i
				fmt.Fprintf(&b, "int fn%d(int x)\n{\n\treturn mix%d(x, %d) ^ %d;\n}\n", n, f, n+1, n%97)
			}
			name := filepath.Join(dir, fmt.Sprintf("f%02d.c", f))
			if bigErr = os.WriteFile(name, b.Bytes(), 0o644); bigErr != nil {
				return
			}
			srcs = append(srcs, name)
		}
		mainC := filepath.Join(dir, "main.c")
		if bigErr = os.WriteFile(mainC, []byte("int fn0(int);\nint main(int c, char **v) { return fn0(c); }\n"), 0o644); bigErr != nil {
			return
		}
		// Compile in parallel, then link.
		var wg sync.WaitGroup
		errs := make([]error, len(srcs)+1)
		sem := make(chan struct{}, runtime.NumCPU())
		for i, src := range append(srcs, mainC) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				if msg, err := exec.Command(gcc, "-O2", "-g", "-c", "-o", src+".o", src).CombinedOutput(); err != nil {
					errs[i] = fmt.Errorf("gcc %s: %v\n%s", src, err, msg)
				}
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				bigErr = err
				return
			}
		}
		objs, _ := filepath.Glob(filepath.Join(dir, "*.o"))
		if msg, err := exec.Command(gcc, append([]string{"-o", bigPath + ".tmp"}, objs...)...).CombinedOutput(); err != nil {
			bigErr = fmt.Errorf("link: %v\n%s", err, msg)
			return
		}
		bigErr = os.Rename(bigPath+".tmp", bigPath)
	})
	if bigErr != nil {
		tb.Fatal(bigErr)
	}
	return bigPath
}

// BenchmarkSymbolize is the warm batch throughput over 10,000 random code
// addresses of the 20,000-function binary (addresses/s in the metric).
func BenchmarkSymbolize(b *testing.B) {
	path := bigBinary(b)
	addrs := codeAddrs(b, path, 10000, 3)
	s, err := symbolize.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	frames := make([]symbolize.Frame, 0, 16)
	for _, a := range addrs { // warm up: every unit indexed
		if _, err := s.Symbolize(a, frames[:0]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		frames, _ = s.Symbolize(addrs[i%len(addrs)], frames[:0])
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "addr/s")
}

// BenchmarkFirstAddress is Open, the first address and Close, each time
// on a fresh Symbolizer (the file is in the page cache).
func BenchmarkFirstAddress(b *testing.B) {
	path := bigBinary(b)
	addr := codeAddrs(b, path, 1, 4)[0]
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		s, err := symbolize.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Symbolize(addr, nil); err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}

// BenchmarkColdBatch is what one run of `elfimage symbolize` does with
// 10,000 random addresses of the 20,000-function binary, in process: Open,
// every address (so every unit is indexed and the symbol table sorted), and
// Close, on a fresh Symbolizer each time; with prepare=true the addresses
// first go through Prepare, as the command does.
func BenchmarkColdBatch(b *testing.B) {
	path := bigBinary(b)
	addrs := codeAddrs(b, path, 10000, 3)
	for _, prepare := range []bool{false, true} {
		b.Run(fmt.Sprintf("prepare=%v", prepare), func(b *testing.B) {
			frames := make([]symbolize.Frame, 0, 16)
			b.ReportAllocs()
			// CPU time (user + system, every thread's) per batch: the
			// wall time of Prepare's goroutines depends on the other
			// load of the machine.
			cpu0, iters := processCPU(), 0
			defer func() {
				if cpu := processCPU(); cpu > 0 && iters > 0 {
					b.ReportMetric(float64(cpu-cpu0)/float64(iters), "cpu-ns/op")
				}
			}()
			for b.Loop() {
				iters++
				s, err := symbolize.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				if prepare {
					if err := s.Prepare(addrs); err != nil {
						b.Fatal(err)
					}
				}
				for _, a := range addrs {
					if frames, err = s.Symbolize(a, frames[:0]); err != nil {
						b.Fatal(err)
					}
				}
				s.Close()
			}
		})
	}
}

// TestSymbolizeAllocs: a warm lookup allocates nothing.
func TestSymbolizeAllocs(t *testing.T) {
	gcc := tooltest.Require(t, "gcc")
	path := buildC(t, gcc, "-O2", "-g", "-gdwarf-5")
	addrs := codeAddrs(t, path, 200, 5)
	s, err := symbolize.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	frames := make([]symbolize.Frame, 0, 16)
	for _, a := range addrs {
		s.Symbolize(a, frames[:0])
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		frames, _ = s.Symbolize(addrs[i%len(addrs)], frames[:0])
		i++
	})
	if allocs != 0 {
		t.Errorf("%v allocations per warm lookup, want 0", allocs)
	}
}

// TestBenchVsTools (ELFIMAGE_BENCH=1) measures, on the 20,000-function
// binary and the same 10,000 addresses, the batch throughput and the
// first-address latency (process start included) of `elfimage symbolize`,
// llvm-symbolizer and addr2line, and the in-process numbers of the
// library. Throughput of a command is 10,000 / (t(10,000) - t(1)); each
// time is the median of several runs.
func TestBenchVsTools(t *testing.T) {
	if os.Getenv("ELFIMAGE_BENCH") == "" {
		t.Skip("set ELFIMAGE_BENCH=1")
	}
	path := bigBinary(t)
	addrs := codeAddrs(t, path, 10000, 3)
	var all, one bytes.Buffer
	for _, a := range addrs {
		fmt.Fprintf(&all, "%#x\n", a)
	}
	fmt.Fprintf(&one, "%#x\n", addrs[0])
	cli := filepath.Join(t.TempDir(), "elfimage")
	gocmd := tooltest.Require(t, "go")
	if msg, err := exec.Command(gocmd, "build", "-o", cli, "../cmd/elfimage").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, msg)
	}
	run := func(in []byte, name string, args ...string) time.Duration {
		var ds []time.Duration
		for i := 0; i < 7; i++ {
			cmd := exec.Command(name, args...)
			cmd.Stdin = bytes.NewReader(in)
			start := time.Now()
			if out, err := cmd.Output(); err != nil || len(out) == 0 {
				t.Fatalf("%s: %v", name, err)
			}
			ds = append(ds, time.Since(start))
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	type row struct {
		name       string
		first, all time.Duration
	}
	var rows []row
	for _, c := range []struct {
		name string
		args []string
	}{
		{cli, []string{"symbolize", "-e", path}},
		{"llvm-symbolizer", []string{"--inlining", "--obj=" + path}},
		{"addr2line", []string{"-f", "-i", "-e", path}},
	} {
		if c.name != cli {
			c.name = tooltest.Require(t, c.name)
		}
		rows = append(rows, row{filepath.Base(c.name), run(one.Bytes(), c.name, c.args...), run(all.Bytes(), c.name, c.args...)})
	}
	rate := func(r row) float64 { return float64(len(addrs)-1) / (r.all - r.first).Seconds() }
	var b strings.Builder
	fmt.Fprintf(&b, "%d functions, %d addresses, gcc -O2 -g\n", benchFiles*benchPerFile, len(addrs))
	for _, r := range rows {
		fmt.Fprintf(&b, "%-16s first address %6.2f ms   batch %8.0f addr/s   (whole batch %v)\n", r.name, float64(r.first.Microseconds())/1000, rate(r), r.all.Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "throughput: %.1fx llvm-symbolizer, %.1fx addr2line; first address: %.2fx addr2line's time\n",
		rate(rows[0])/rate(rows[1]), rate(rows[0])/rate(rows[2]), float64(rows[0].first)/float64(rows[2].first))
	// In process.
	s, err := symbolize.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := s.Symbolize(addrs[0], nil); err != nil {
		t.Fatal(err)
	}
	firstIn := time.Since(start)
	frames := make([]symbolize.Frame, 0, 16)
	for _, a := range addrs {
		frames, _ = s.Symbolize(a, frames[:0])
	}
	start = time.Now()
	const rounds = 20
	for r := 0; r < rounds; r++ {
		for _, a := range addrs {
			frames, _ = s.Symbolize(a, frames[:0])
		}
	}
	warm := float64(rounds*len(addrs)) / time.Since(start).Seconds()
	s.Close()
	fmt.Fprintf(&b, "in process: first address (open excluded) %v, warm %.0f addr/s\n", firstIn, warm)
	t.Log("\n" + b.String())
}

// BenchmarkSortedAnswers is the answer phase of the command's batch: the
// 10,000 random addresses of BenchmarkSymbolize, sorted, answered into
// one frame store once every unit is indexed, by Symbolize address by
// address (each=true) or by one SymbolizeBatch.
func BenchmarkSortedAnswers(b *testing.B) {
	path := bigBinary(b)
	addrs := codeAddrs(b, path, 10000, 3)
	slices.Sort(addrs)
	s, err := symbolize.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Prepare(addrs); err != nil {
		b.Fatal(err)
	}
	store := make([]symbolize.Frame, 0, 4*len(addrs))
	ends := make([]int, len(addrs))
	for _, each := range []bool{true, false} {
		b.Run(fmt.Sprintf("each=%v", each), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if each {
					store = store[:0]
					for i, a := range addrs {
						store, _ = s.Symbolize(a, store)
						ends[i] = len(store)
					}
				} else {
					store, _ = s.SymbolizeBatch(addrs, store[:0], func(i, end int, _ error) { ends[i] = end })
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(addrs)), "ns/addr")
		})
	}
}

// BenchmarkColdAnswers is BenchmarkSortedAnswers on a fresh Symbolizer
// each time, its units just indexed by Prepare (not timed), as in one run
// of the command: the indexes' lines are not in the caches yet.
func BenchmarkColdAnswers(b *testing.B) {
	path := bigBinary(b)
	addrs := codeAddrs(b, path, 10000, 3)
	slices.Sort(addrs)
	store := make([]symbolize.Frame, 0, 4*len(addrs))
	ends := make([]int, len(addrs))
	for _, each := range []bool{true, false} {
		b.Run(fmt.Sprintf("each=%v", each), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				s, err := symbolize.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Prepare(addrs); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if each {
					store = store[:0]
					for i, a := range addrs {
						store, _ = s.Symbolize(a, store)
						ends[i] = len(store)
					}
				} else {
					store, _ = s.SymbolizeBatch(addrs, store[:0], func(i, end int, _ error) { ends[i] = end })
				}
				b.StopTimer()
				s.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(addrs)), "ns/addr")
		})
	}
}
