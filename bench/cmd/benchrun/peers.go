package main

import (
	"bytes"
	"debug/elf"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/elfimage/elfimage"
)

// lookupSection: addrmap.Map.Lookup against glibc's _dl_find_object with
// 1, 100 and 1,000 objects (addrmap/testdata/dlfind.c, reused as is).
func lookupSection(cfg *config, t *toolset) (section, error) {
	s := section{
		title: "Lookup",
		intro: "Which loaded object holds a pc: `addrmap.Map.Lookup` (`go test -bench BenchmarkLookup ./addrmap`: random pcs inside 1, 100 or 1,000 ranges " +
			"of 32 KB every 64 KB, as `dlopen`ed objects lie) against glibc's `_dl_find_object` with the same number of `dlopen`ed objects " +
			"(`addrmap/testdata/dlfind.c`, random pcs inside the objects' code), and, for our side, the same lookups on an irregular layout " +
			"(`BenchmarkLookupIrregular`: one range at 0x400000, the others far above it with random sizes from 4 KB to 4 MB and random gaps up to 1 MB). ns per lookup.",
		header: []string{"objects", "addrmap.Lookup ns", "_dl_find_object ns", "ours/peer", "addrmap.Lookup, irregular layout, ns", "reproduce"},
	}
	sizes := []int{1, 100, 1000}
	var ids []string
	for _, n := range sizes {
		ids = append(ids, fmt.Sprintf("lookup/objects=%d", n))
	}
	if !cfg.wantAny(ids...) {
		return section{}, nil
	}
	var subs []string
	for _, n := range sizes {
		if cfg.want(fmt.Sprintf("lookup/objects=%d", n)) {
			subs = append(subs, fmt.Sprintf("BenchmarkLookup/entries=%d", n), fmt.Sprintf("BenchmarkLookupIrregular/entries=%d", n))
		}
	}
	bt := "2000000x"
	iters := "10000000"
	if cfg.quick {
		bt, iters = "500000x", "2000000"
	}
	logf("lookup: addrmap")
	res, _, err := goTest(cfg, t, "./addrmap", benchPattern(subs), bt, cfg.reps)
	if err != nil {
		logf("lookup: %v", err)
	}
	// The peer: one tiny shared object copied 1,000 times.
	var harness, dir string
	if bin, err := buildC(cfg, t, "addrmap/testdata/dlfind.c", "-ldl"); err == nil {
		dir = filepath.Join(cfg.work, "dlfind")
		err = os.MkdirAll(dir, 0o755)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "lib.c"), []byte("int f(int x) { return x * 3 + 1; }\n"), 0o644)
		}
		if err == nil {
			_, err = command("", t.gcc, "-O2", "-shared", "-fPIC", "-o", filepath.Join(dir, "lib.so"), filepath.Join(dir, "lib.c"))
		}
		if err == nil {
			var so []byte
			so, err = os.ReadFile(filepath.Join(dir, "lib.so"))
			for i := 0; err == nil && i < 1000; i++ {
				err = os.WriteFile(filepath.Join(dir, fmt.Sprintf("lib%d.so", i)), so, 0o755)
			}
		}
		if err == nil {
			harness = bin
		} else {
			logf("lookup: %v", err)
		}
	} else {
		logf("lookup: %v", err)
	}
	var lookupRatios []float64
	for _, n := range sizes {
		id := fmt.Sprintf("lookup/objects=%d", n)
		if !cfg.want(id) {
			continue
		}
		var peer []float64
		if harness != "" {
			for range cfg.reps {
				out, err := command("", harness, dir, strconv.Itoa(n), iters)
				if err != nil {
					logf("lookup: %v", err)
					break
				}
				var got int
				var ns float64
				if _, err := fmt.Sscanf(strings.TrimSpace(out), "objects=%d ns/lookup=%g", &got, &ns); err != nil || got != n {
					logf("lookup: harness output %q", out)
					break
				}
				peer = append(peer, ns)
			}
		}
		o, ok := summarize(res[fmt.Sprintf("BenchmarkLookup/entries=%d", n)]["ns/op"])
		p, okP := summarize(peer)
		r := "n/a"
		if ok && okP {
			r = ratio(o.med, p.med)
			lookupRatios = append(lookupRatios, o.med/p.med)
		}
		irr, okI := summarize(res[fmt.Sprintf("BenchmarkLookupIrregular/entries=%d", n)]["ns/op"])
		s.rows = append(s.rows, []string{group(strconv.Itoa(n)), cell(o, ok, 1), cell(p, okP, 1), r, cell(irr, okI, 1),
			fmt.Sprintf("`bench/run --only '%s$'`", id)})
	}
	if len(lookupRatios) > 0 {
		s.withTargets(lookupTarget(lookupRatios))
	}
	s.notes = append(s.notes, "The rows use synthetic ranges on our side and real objects on glibc's. "+
		"glibc bisects a sorted array of objects; addrmap reads a direct-mapped bucket index over the ranges and compares with the one or two candidates it names "+
		"(ranges outside the index's window or crowded into one bucket are bisected; see the addrmap package documentation).")
	return s, nil
}

// funcAddrs returns count addresses chosen at random (seeded) inside the
// sized STT_FUNC symbols of an ELF file.
func funcAddrs(path string, count int, seed uint64) ([]uint64, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		return nil, err
	}
	var fns []elf.Symbol
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Size > 0 && s.Value != 0 {
			fns = append(fns, s)
		}
	}
	if len(fns) == 0 {
		return nil, fmt.Errorf("%s: no function symbols", path)
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	out := make([]uint64, count)
	for i := range out {
		s := fns[rng.IntN(len(fns))]
		out[i] = s.Value + uint64(rng.IntN(int(s.Size)))
	}
	return out, nil
}

// gccBinary builds, once, a gcc -O2 -g program of n small functions in
// files of 1,000, each inlining a helper (the shape of package symbolize's
// benchmark binary).
func gccBinary(cfg *config, t *toolset, n int) (string, error) {
	if t.gcc == "" {
		return "", fmt.Errorf("gcc not found")
	}
	dir := filepath.Join(cfg.work, fmt.Sprintf("gccbin%d", n))
	bin := filepath.Join(dir, "big")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var srcs []string
	for f := 0; f*1000 < n; f++ {
		var b bytes.Buffer
		fmt.Fprintf(&b, "static inline int mix%d(int x, int k) { return x * k + %d; }\n", f, f)
		for i := f * 1000; i < min(n, (f+1)*1000); i++ {
			fmt.Fprintf(&b, "int fn%d(int x)\n{\n\treturn mix%d(x, %d) ^ %d;\n}\n", i, f, i+1, i%97)
		}
		name := filepath.Join(dir, fmt.Sprintf("f%03d.c", f))
		if err := os.WriteFile(name, b.Bytes(), 0o644); err != nil {
			return "", err
		}
		srcs = append(srcs, name)
	}
	mainC := filepath.Join(dir, "main.c")
	if err := os.WriteFile(mainC, []byte("int fn0(int);\nint main(int c, char **v) { return fn0(c); }\n"), 0o644); err != nil {
		return "", err
	}
	srcs = append(srcs, mainC)
	objs, err := compileAll(t, srcs, "-O2", "-g")
	if err != nil {
		return "", err
	}
	if _, err := command("", t.gcc, append([]string{"-o", bin}, objs...)...); err != nil {
		return "", err
	}
	return bin, nil
}

// compileAll compiles each C source to SRC.o with gcc and flags, as many
// at a time as there are CPUs, and returns the object files.
func compileAll(t *toolset, srcs []string, flags ...string) ([]string, error) {
	var wg sync.WaitGroup
	errs := make([]error, len(srcs))
	sem := make(chan struct{}, runtime.NumCPU())
	for i, src := range srcs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			_, errs[i] = command("", t.gcc, append(append([]string{}, flags...), "-c", "-o", src+".o", src)...)
		})
	}
	wg.Wait()
	objs := make([]string, len(srcs))
	for i, err := range errs {
		if err != nil {
			return nil, err
		}
		objs[i] = srcs[i] + ".o"
	}
	return objs, nil
}

// symbolizeRuns is how many times the symbolize section runs each
// command on each input in a round, keeping the shortest time.
const symbolizeRuns = 3

// timeStdinBest is timeStdin run k times in a row, returning the least
// wall time in seconds: the time of a run no other process delayed. The
// rates are differences of such times (t(n) − t(1) is 5 to 15 ms for our
// command on two cores), which one run's scheduling delay of a few
// milliseconds would swing by half. It fails when any run fails.
func timeStdinBest(k int, in, name string, args ...string) (float64, error) {
	return leastOf(k, func() (float64, error) { return timeStdin(in, name, args...) })
}

// leastOf calls run k times in a row and returns the least value it
// gave (0 for k < 1); it stops at the first error and returns it.
func leastOf(k int, run func() (float64, error)) (float64, error) {
	best := 0.0
	for i := range k {
		t, err := run()
		if err != nil {
			return 0, err
		}
		if i == 0 || t < best {
			best = t
		}
	}
	return best, nil
}

// timeStdin runs a command with the file in on standard input and its
// standard output discarded (/dev/null: the time is the command's, not a
// reader's), and returns its wall time in seconds; it fails when the
// command fails.
func timeStdin(in, name string, args ...string) (float64, error) {
	f, err := os.Open(in)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return 0, err
	}
	defer devNull.Close()
	cmd := exec.Command(name, args...)
	cmd.Stdin, cmd.Stdout = f, devNull
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	t0 := time.Now()
	err = cmd.Run()
	d := time.Since(t0).Seconds()
	if err != nil {
		return 0, fmt.Errorf("%s: %v %s", filepath.Base(name), err, lastLines(stderr.String(), 5))
	}
	return d, nil
}

// answersLines runs a command with the file in on standard input and
// checks that it prints at least one line per input line (every tool
// here prints two or more per address).
func answersLines(in, name string, args ...string) error {
	b, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	cmd := exec.Command(name, args...)
	cmd.Stdin = bytes.NewReader(b)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%s: %v %s", filepath.Base(name), err, lastLines(stderr.String(), 5))
	}
	if got, want := bytes.Count(out, []byte("\n")), bytes.Count(b, []byte("\n")); got < want {
		return fmt.Errorf("%s: %d lines of output for %d addresses", filepath.Base(name), got, want)
	}
	return nil
}

func symbolizeSection(cfg *config, t *toolset) (section, error) {
	s := section{
		title: "Symbolize",
		intro: "Batch symbolization of random code addresses, the commands fed on standard input from a file, their output to /dev/null: " +
			"`elfimage symbolize -e FILE` against `llvm-symbolizer --inlining --obj=FILE` and `addr2line -f -i -e FILE`, on the same file and addresses. " +
			"\"First\" is the wall time of a command given one address (process start, opening the file and the first answer). " +
			"Each command is timed on 1, n and 10n addresses (n = 10,000; the 10n addresses start with the n), each input run three times in a row in every round and its shortest wall time kept: " +
			"the cold rate is (n − 1) / (t(n) − t(1)), the steady rate 9n / (t(10n) − t(n)). Process start-up cancels out of both; " +
			"the cold rate also carries each tool's indexing of the units the n addresses fall in (nearly all of them), " +
			"the steady rate is the rate once the file is read (the issue's peer figures, llvm-symbolizer 175k/s and addr2line 335k/s " +
			"on a 20,000-function gcc binary, are of this kind).",
		header: []string{"file", "tool", "first address ms", "cold addresses/s", "steady addresses/s", "ours/tool (cold)", "ours/tool (steady)", "tool/ours (first)", "reproduce"},
	}
	type file struct {
		id, label, path string
	}
	nAddrs, nFns := 10000, 20000
	if cfg.quick {
		nAddrs, nFns = 2000, 2000
	}
	nBig := 10 * nAddrs
	var files []file
	if cfg.want("symbolize/image") {
		p := filepath.Join(cfg.work, "load", "load-procs-10000.elf")
		if _, err := os.Stat(p); err != nil {
			logf("symbolize: writing a 10,000-procedure image")
			b, err := schemeImage(10000, 0)
			if err != nil {
				return s, err
			}
			p = filepath.Join(cfg.work, "sym-image.elf")
			if err := os.WriteFile(p, b, 0o644); err != nil {
				return s, err
			}
		}
		files = append(files, file{"symbolize/image", "our image, 10,000 procedures", p})
	}
	if cfg.want("symbolize/gcc") {
		logf("symbolize: building a %d-function gcc -O2 -g program", nFns)
		p, err := gccBinary(cfg, t, nFns)
		if err != nil {
			logf("symbolize: %v", err)
		} else {
			files = append(files, file{"symbolize/gcc", fmt.Sprintf("gcc -O2 -g, %s functions", group(strconv.Itoa(nFns))), p})
		}
	}
	if len(files) == 0 {
		return section{}, nil
	}
	cli := filepath.Join(cfg.work, "bin", "elfimage")
	if _, err := command(cfg.root, t.goCmd, "build", "-o", cli, "./cmd/elfimage"); err != nil {
		return s, err
	}
	type tool struct {
		name, path string
		args       func(f string) []string
	}
	tools := []tool{
		{"elfimage symbolize", cli, func(f string) []string { return []string{"symbolize", "-e", f} }},
		{"llvm-symbolizer", t.llvmSymbolizer, func(f string) []string { return []string{"--inlining", "--obj=" + f} }},
		{"addr2line", t.addr2line, func(f string) []string { return []string{"-f", "-i", "-e", f} }},
	}
	var notes []string
	var coldLLVM []fileRatio
	steadyA2L := 0.0
	for _, f := range files {
		addrs, err := funcAddrs(f.path, nBig, 3) // its first nAddrs are the batch of nAddrs
		if err != nil {
			return s, err
		}
		in := map[string]string{}
		for _, c := range []struct {
			name string
			n    int
		}{{"one", 1}, {"all", nAddrs}, {"big", nBig}} {
			var b bytes.Buffer
			for _, a := range addrs[:c.n] {
				fmt.Fprintf(&b, "%#x\n", a)
			}
			in[c.name] = filepath.Join(cfg.work, strings.ReplaceAll(f.id, "/", "-")+"-"+c.name+".txt")
			if err := os.WriteFile(in[c.name], b.Bytes(), 0o644); err != nil {
				return s, err
			}
		}
		type res struct{ first, cold, steady []float64 }
		rs := make([]res, len(tools))
		logf("symbolize: %s", f.label)
		for i, tl := range tools {
			if tl.path == "" {
				continue
			}
			if err := answersLines(in["all"], tl.path, tl.args(f.path)...); err != nil { // also warms the cache
				logf("symbolize: %v", err)
				tools[i].path = ""
				continue
			}
		}
		for range cfg.reps {
			for i, tl := range tools {
				if tl.path == "" {
					continue
				}
				t1, err1 := timeStdinBest(symbolizeRuns, in["one"], tl.path, tl.args(f.path)...)
				tn, errN := timeStdinBest(symbolizeRuns, in["all"], tl.path, tl.args(f.path)...)
				tb, errB := timeStdinBest(symbolizeRuns, in["big"], tl.path, tl.args(f.path)...)
				if err1 != nil || errN != nil || errB != nil || tn <= t1 || tb <= tn {
					continue
				}
				rs[i].first = append(rs[i].first, t1)
				rs[i].cold = append(rs[i].cold, float64(nAddrs-1)/(tn-t1))
				rs[i].steady = append(rs[i].steady, float64(nBig-nAddrs)/(tb-tn))
			}
		}
		oursCold, okOC := summarize(rs[0].cold)
		oursSteady, okOS := summarize(rs[0].steady)
		oursFirst, okOF := summarize(rs[0].first)
		for i, tl := range tools {
			fst, okF := summarize(rs[i].first)
			cold, okC := summarize(rs[i].cold)
			steady, okS := summarize(rs[i].steady)
			r1, r2, r3 := "—", "—", "—"
			if i > 0 {
				r1, r2, r3 = "n/a", "n/a", "n/a"
				if okOC && okC {
					r1 = ratio(oursCold.med, cold.med)
				}
				if okOS && okS {
					r2 = ratio(oursSteady.med, steady.med)
				}
				if okOF && okF {
					r3 = ratio(fst.med, oursFirst.med)
				}
			}
			s.rows = append(s.rows, []string{f.label, tl.name, cell(fst, okF, 1e-3), cell(cold, okC, 1), cell(steady, okS, 1), r1, r2, r3,
				fmt.Sprintf("`bench/run --only '%s$'`", f.id)})
			tools[i].path = tl.path
		}
		var v []string
		for _, peer := range []struct {
			i      int
			name   string
			target float64
		}{{1, "llvm-symbolizer's", 10}, {2, "addr2line's", 5}} {
			cold, okC := summarize(rs[peer.i].cold)
			steady, okS := summarize(rs[peer.i].steady)
			if !okC || !okS || !okOC || !okOS {
				continue
			}
			c, st := oursCold.med/cold.med, oursSteady.med/steady.med
			if peer.i == 1 {
				coldLLVM = append(coldLLVM, fileRatio{f.label, c})
			}
			if peer.i == 2 && f.id == "symbolize/gcc" {
				steadyA2L = st
			}
			v = append(v, fmt.Sprintf("≥ %.0f× %s throughput: steady %s (%.1f×), cold %s (%.1f×)", peer.target, peer.name,
				metMissed(st >= peer.target), st, metMissed(c >= peer.target), c))
		}
		if a2lFirst, okAF := summarize(rs[2].first); okAF && okOF {
			v = append(v, fmt.Sprintf("first address in under half of addr2line's time: %s (%.2f× its time)", metMissed(oursFirst.med/a2lFirst.med < 0.5), oursFirst.med/a2lFirst.med))
		}
		if len(v) > 0 {
			notes = append(notes, fmt.Sprintf("On %s: %s.", f.label, strings.Join(v, "; ")))
		}
	}
	s.notes = append(s.notes, notes...)
	s.withTargets(symbolizeTargets(steadyA2L, coldLLVM)...)
	return s, nil
}

// fileRatio is a ratio measured on one file of a section.
type fileRatio struct {
	file  string
	ratio float64
}

// symbolizeTargets decides the symbolize targets of issue 19: steadyA2L is
// ours/addr2line in steady rate on the gcc binary (0: not measured),
// coldLLVM ours/llvm-symbolizer in cold rate on each file measured.
func symbolizeTargets(steadyA2L float64, coldLLVM []fileRatio) []target {
	var ts []target
	if steadyA2L > 0 {
		ts = append(ts, target{"symbolize/steady-addr2line", steadyA2L >= 5, fmt.Sprintf("%.1f×", steadyA2L)})
	}
	if len(coldLLVM) > 0 {
		worst := coldLLVM[0].ratio
		var each []string
		for _, f := range coldLLVM {
			worst = min(worst, f.ratio)
			each = append(each, fmt.Sprintf("%s %.1f×", f.file, f.ratio))
		}
		ts = append(ts, target{"symbolize/cold-llvm", worst >= 10, fmt.Sprintf("worst file %.1f×: %s", worst, strings.Join(each, ", "))})
	}
	return ts
}

// lookupTarget decides the lookup target of issue 19 from ours/peer at
// each object count.
func lookupTarget(ratios []float64) target {
	worst := slices.Max(ratios)
	return target{"lookup/dlfind", worst <= 0.5, fmt.Sprintf("worst count %.2f×", worst)}
}

// memoryTarget decides the memory target of issue 19 from the RSS growth
// medians of ours and dlopen.
func memoryTarget(ours, dlopen float64) target {
	r := ours / dlopen
	return target{"memory/rss", r <= 1.2, fmt.Sprintf("%.2f×", r)}
}

// rollup returns Rss and Private_Dirty of /proc/self/smaps_rollup, bytes.
func rollup() (rss, dirty int64, err error) {
	b, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		return 0, 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "Rss:":
			rss = v << 10
		case "Private_Dirty:":
			dirty = v << 10
		}
	}
	return rss, dirty, nil
}

var sink byte

// memProc is `benchrun -memproc DIR N`: open DIR/img0.elf ..
// DIR/img{N-1}.elf, touch the first byte of each text segment (as the
// C harness touches each object's first function), print the smaps_rollup
// figures before and after in the C harness's format, and keep everything
// mapped until exit.
func memProc(dir, count string) error {
	n, err := strconv.Atoi(count)
	if err != nil {
		return err
	}
	// The baseline after the harness has run what it runs again after
	// the loads (a forced collection that returns memory to the kernel,
	// twice, and the read of smaps_rollup), so that their own first-use
	// memory is not counted as the images'.
	for range 2 {
		debug.FreeOSMemory()
		if _, _, err := rollup(); err != nil {
			return err
		}
	}
	debug.FreeOSMemory()
	rss0, dirty0, err := rollup()
	if err != nil {
		return err
	}
	ims := make([]*elfimage.Image, 0, n)
	for i := range n {
		im, err := elfimage.Open(filepath.Join(dir, fmt.Sprintf("img%d.elf", i)), nil)
		if err != nil {
			return err
		}
		for _, sg := range im.Segments() {
			if sg.Flags&elf.PF_X != 0 {
				sink += im.Bytes()[sg.Addr]
			}
		}
		ims = append(ims, im)
	}
	// Return the garbage of loading (the registry's index is rebuilt
	// every 16 inserts) to the kernel: what stays is what the images keep.
	debug.FreeOSMemory()
	rss1, dirty1, err := rollup()
	if err != nil {
		return err
	}
	fmt.Printf("before_rss=%d before_private_dirty=%d after_rss=%d after_private_dirty=%d checksum=%d\n", rss0, dirty0, rss1, dirty1, sink)
	runtime.KeepAlive(ims)
	return nil
}

// parseMem reads the "before_rss=... after_private_dirty=..." line.
func parseMem(out string) (rss, dirty int64, err error) {
	var r0, d0, r1, d1, ck int64
	if _, err := fmt.Sscanf(strings.TrimSpace(out), "before_rss=%d before_private_dirty=%d after_rss=%d after_private_dirty=%d checksum=%d", &r0, &d0, &r1, &d1, &ck); err != nil {
		return 0, 0, fmt.Errorf("memory harness output %q: %v", out, err)
	}
	return r1 - r0, d1 - d0, nil
}

func memorySection(cfg *config, t *toolset) (section, error) {
	const n = 1000
	id := "memory/1000"
	if !cfg.want(id) {
		return section{}, nil
	}
	s := section{
		title: "Memory",
		intro: fmt.Sprintf("A process loads %s distinct files of 100 procedures and touches one byte of each one's code: our images with `elfimage.Open` "+
			"(`benchrun -memproc`), against `dlopen(RTLD_NOW)` of as many copies of a `gcc -O2 -g` shared object of 100 functions (`bench/c/mem.c`). "+
			"Growth of `Rss` and `Private_Dirty` in `/proc/self/smaps_rollup` from before the first load to after the last, per process and per object "+
			"(ours includes the Go heap that the %s `Image` values and the address map keep, measured after `debug.FreeOSMemory`).", group(strconv.Itoa(n)), group(strconv.Itoa(n))),
		header: []string{"loader", "RSS growth", "per object", "private dirty growth", "per object", "reproduce"},
	}
	dir := filepath.Join(cfg.work, "mem")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return s, err
	}
	logf("memory: writing %d images and shared objects", n)
	img, err := schemeImage(100, 0)
	if err != nil {
		return s, err
	}
	var so []byte
	if p, err := sharedObject(cfg, t, 100); err == nil {
		so, _ = os.ReadFile(p)
	} else {
		logf("memory: %v", err)
	}
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("img%d.elf", i)), img, 0o644); err != nil {
			return s, err
		}
		if so != nil {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("lib%d.so", i)), so, 0o755); err != nil {
				return s, err
			}
		}
	}
	// Write the files back first: a page-cache page still dirty from the
	// write counts as Private_Dirty in a process that maps it privately.
	syscall.Sync()
	self, err := os.Executable()
	if err != nil {
		return s, err
	}
	harness, herr := buildC(cfg, t, "bench/c/mem.c", "-ldl")
	if herr != nil {
		logf("memory: %v", herr)
	}
	var oursR, oursD, peerR, peerD []float64
	for range cfg.reps {
		if out, err := command("", self, "-memproc", dir, strconv.Itoa(n)); err == nil {
			if r, d, err := parseMem(out); err == nil {
				oursR, oursD = append(oursR, float64(r)), append(oursD, float64(d))
			}
		} else {
			logf("memory: %v", err)
		}
		if harness != "" && so != nil {
			if out, err := command("", harness, dir, strconv.Itoa(n)); err == nil {
				if r, d, err := parseMem(out); err == nil {
					peerR, peerD = append(peerR, float64(r)), append(peerD, float64(d))
				}
			} else {
				logf("memory: %v", err)
			}
		}
	}
	row := func(name string, rs, ds []float64) []string {
		r, okR := summarize(rs)
		d, okD := summarize(ds)
		return []string{name, cell(r, okR, 1e6) + " MB", cell(r, okR, 1e3*n) + " KB", cell(d, okD, 1e6) + " MB", cell(d, okD, 1e3*n) + " KB",
			fmt.Sprintf("`bench/run --only '%s$'`", id)}
	}
	s.rows = append(s.rows, row("elfimage.Open", oursR, oursD), row("dlopen", peerR, peerD))
	o, ok1 := summarize(oursR)
	p, ok2 := summarize(peerR)
	od, ok3 := summarize(oursD)
	pd, ok4 := summarize(peerD)
	if ok1 && ok2 && ok3 && ok4 {
		s.notes = append(s.notes, fmt.Sprintf("Ratios ours/dlopen: RSS growth %s, private dirty growth %s.", ratio(o.med, p.med), ratio(od.med, pd.med)))
	}
	if ok1 && ok2 && p.med > 0 {
		s.withTargets(memoryTarget(o.med, p.med))
	}
	return s, nil
}
