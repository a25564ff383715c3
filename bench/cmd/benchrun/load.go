package main

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/elfimage/elfimage"
)

// loadImage is one Load row's input: our image and the peer shared object.
type loadImage struct {
	id, label  string
	procs      int
	path, so   string
	size, tail int64 // file size and bytes after the last PT_LOAD
}

// buildC compiles bench/c/NAME.c (or another source path relative to the
// repository root) into the work directory once and returns the binary.
func buildC(cfg *config, t *toolset, src string, libs ...string) (string, error) {
	if t.gcc == "" {
		return "", fmt.Errorf("gcc not found")
	}
	name := strings.TrimSuffix(filepath.Base(src), ".c")
	bin := filepath.Join(cfg.work, "bin", name)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", err
	}
	args := append([]string{"-O2", "-o", bin, filepath.Join(cfg.root, src)}, libs...)
	if _, err := command("", t.gcc, args...); err != nil {
		return "", err
	}
	return bin, nil
}

// tailSize returns the file size and the bytes after the end of the last
// PT_LOAD segment of an ELF file.
func tailSize(path string) (size, tail int64, err error) {
	f, err := elf.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0, err
	}
	var end uint64
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Off+p.Filesz > end {
			end = p.Off + p.Filesz
		}
	}
	return fi.Size(), fi.Size() - int64(end), nil
}

// sharedObject builds, once, a shared object of n procedures. The full run
// compiles cSource(n) with gcc -O2 -g -fPIC (in files of 1,000 functions,
// compiled in parallel); -quick assembles asmSource(n) (the Link rows'
// procedures, with .loc and .cfi_* directives) with gcc -shared, since gcc
// needs about 5 ms per C function here. dlopen reads neither's debug
// sections.
func sharedObject(cfg *config, t *toolset, n int) (string, error) {
	so := filepath.Join(cfg.work, "so", fmt.Sprintf("lib%d.so", n))
	if _, err := os.Stat(so); err == nil {
		return so, nil
	}
	if t.gcc == "" {
		return "", fmt.Errorf("gcc not found")
	}
	dir := filepath.Join(cfg.work, "so", fmt.Sprintf("src%d", n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if cfg.quick {
		src := filepath.Join(dir, "p.s")
		if err := os.WriteFile(src, []byte(asmSource(n)), 0o644); err != nil {
			return "", err
		}
		_, err := command("", t.gcc, "-shared", "-Wa,--gdwarf-5", "-o", so, src)
		return so, err
	}
	var srcs []string
	for f := 0; f*1000 < n; f++ {
		var b strings.Builder
		for i := f * 1000; i < min(n, (f+1)*1000); i++ {
			fmt.Fprintf(&b, "/* Procedure %d. */\nlong p%d(long a, long b)\n{\n\tlong c = a + b;\n\tlong d = c * 2, e = d - a;\n\treturn c + d + e;\n}\n", i, i)
		}
		name := filepath.Join(dir, fmt.Sprintf("f%03d.c", f))
		if err := os.WriteFile(name, []byte(b.String()), 0o644); err != nil {
			return "", err
		}
		srcs = append(srcs, name)
	}
	objs, err := compileAll(t, srcs, "-O2", "-g", "-fPIC")
	if err != nil {
		return "", err
	}
	_, err = command("", t.gcc, append([]string{"-shared", "-o", so}, objs...)...)
	return so, err
}

// padSharedObject copies so to a new file with a non-loaded section added
// so that its tail (bytes after the last PT_LOAD) is tail bytes.
func padSharedObject(t *toolset, so, out string, tail int64) error {
	if t.objcopy == "" {
		return fmt.Errorf("objcopy not found")
	}
	_, have, err := tailSize(so)
	if err != nil {
		return err
	}
	pad := tail - have
	if pad < 0 {
		pad = 0
	}
	blob := out + ".blob"
	f, err := os.Create(blob)
	if err != nil {
		return err
	}
	// Not sparse: the page cache must hold real bytes, as for our file.
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte('a' + i%26)
	}
	for left := pad; left > 0; left -= int64(len(chunk)) {
		n := min(left, int64(len(chunk)))
		if _, err := f.Write(chunk[:n]); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	defer os.Remove(blob)
	_, err = command("", t.objcopy, "--add-section", ".debug_bench="+blob, "--set-section-flags", ".debug_bench=readonly,debug", so, out)
	return err
}

// loadInputs writes the images and shared objects of the selected Load
// rows.
func loadInputs(cfg *config, t *toolset) ([]*loadImage, error) {
	dir := filepath.Join(cfg.work, "load")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var out []*loadImage
	write := func(li *loadImage, doc int) error {
		li.path = filepath.Join(dir, strings.NewReplacer("/", "-", "=", "-").Replace(li.id)+".elf")
		b, err := schemeImage(li.procs, doc)
		if err != nil {
			return err
		}
		if err := os.WriteFile(li.path, b, 0o644); err != nil {
			return err
		}
		li.size, li.tail, err = tailSize(li.path)
		return err
	}
	for _, n := range []int{100, 1000, 10000} {
		li := &loadImage{id: fmt.Sprintf("load/procs=%d", n), procs: n}
		if !cfg.want(li.id) {
			continue
		}
		logf("load: writing the %d-procedure image and shared object", n)
		if err := write(li, 0); err != nil {
			return nil, err
		}
		li.label = fmt.Sprintf("%s procedures", group(strconv.Itoa(n)))
		so, err := sharedObject(cfg, t, n)
		if err != nil {
			logf("load: %v", err)
		}
		li.so = so
		out = append(out, li)
	}
	// Debug tails of about 1, 16 and 128 MB: 1,000 procedures with longer
	// docstrings (each docstring is in .debug_str and in the procedure
	// table, so a docstring byte costs about two bytes of tail; the factor
	// is measured on the first such image and used for the next ones).
	perDocByte := 2.0
	var base int64 = -1
	for _, li := range out {
		if li.procs == 1000 {
			base = li.tail
		}
	}
	for _, mbs := range []int{1, 16, 128} {
		li := &loadImage{id: fmt.Sprintf("load/tail=%dMB", mbs), procs: 1000}
		if !cfg.want(li.id) {
			continue
		}
		if base < 0 {
			probe := &loadImage{id: "load/probe", procs: 1000}
			if err := write(probe, 0); err != nil {
				return nil, err
			}
			base = probe.tail
			os.Remove(probe.path)
		}
		target := int64(mbs) << 20
		doc := max(0, int(float64(target-base)/perDocByte/1000))
		logf("load: writing the image with a %d MB tail (docstrings of %d bytes)", mbs, doc)
		if err := write(li, doc); err != nil {
			return nil, err
		}
		if doc > 0 {
			perDocByte = float64(li.tail-base) / float64(1000*doc)
		}
		li.label = fmt.Sprintf("1,000 procedures, %s tail", mb(li.tail))
		if so, err := sharedObject(cfg, t, 1000); err != nil {
			logf("load: %v", err)
		} else {
			padded := filepath.Join(cfg.work, "so", fmt.Sprintf("lib1000-tail%d.so", mbs))
			if err := padSharedObject(t, so, padded, li.tail); err != nil {
				logf("load: %v", err)
			} else {
				li.so = padded
			}
		}
		out = append(out, li)
	}
	return out, nil
}

// timeOpen returns the mean ns of elfimage.Open + Close of path over iters.
func timeOpen(path string, iters int) (float64, error) {
	t0 := time.Now()
	for range iters {
		im, err := elfimage.Open(path, nil)
		if err != nil {
			return 0, err
		}
		if err := im.Close(); err != nil {
			return 0, err
		}
	}
	return float64(time.Since(t0).Nanoseconds()) / float64(iters), nil
}

// goFloor is the floor of the Load rows in Go with x/sys/unix: open,
// mmap of the whole file, mprotect of the R+X and R+W segments, munmap and
// close, with the size and segments learned beforehand.
type goFloor struct {
	path string
	size int
	segs [][3]int // offset, length, protection
}

func newGoFloor(path string) (*goFloor, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	g := &goFloor{path: path, size: int(fi.Size())}
	page := uint64(os.Getpagesize())
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&(elf.PF_X|elf.PF_W) == 0 || p.Memsz == 0 {
			continue
		}
		start := p.Vaddr &^ (page - 1)
		end := (p.Vaddr + p.Memsz + page - 1) &^ (page - 1)
		prot := unix.PROT_READ
		if p.Flags&elf.PF_X != 0 {
			prot |= unix.PROT_EXEC
		}
		if p.Flags&elf.PF_W != 0 {
			prot |= unix.PROT_WRITE
		}
		g.segs = append(g.segs, [3]int{int(start), int(end - start), prot})
	}
	return g, nil
}

func (g *goFloor) time(iters int) (float64, error) {
	t0 := time.Now()
	for range iters {
		fd, err := unix.Open(g.path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return 0, err
		}
		mem, err := unix.Mmap(fd, 0, g.size, unix.PROT_READ, unix.MAP_PRIVATE)
		if err != nil {
			return 0, err
		}
		for _, s := range g.segs {
			if err := unix.Mprotect(mem[s[0]:s[0]+s[1]], s[2]); err != nil {
				return 0, err
			}
		}
		if err := unix.Munmap(mem); err != nil {
			return 0, err
		}
		unix.Close(fd)
	}
	return float64(time.Since(t0).Nanoseconds()) / float64(iters), nil
}

// runLoadHarness runs bench/c/load.c's binary for one round and returns
// its ns/op.
func runLoadHarness(bin, mode, file string, iters int) (float64, error) {
	out, err := command("", bin, mode, file, strconv.Itoa(iters), "1")
	if err != nil {
		return 0, err
	}
	var ns float64
	if _, err := fmt.Sscanf(strings.TrimSpace(out), "ns/op=%g", &ns); err != nil {
		return 0, fmt.Errorf("load harness output %q: %v", out, err)
	}
	return ns, nil
}

// itersFor returns how many iterations of an operation measured at ns
// each fill the time budget of one round.
func itersFor(cfg *config, ns float64) int {
	budget := 150e6
	if cfg.quick {
		budget = 40e6
	}
	if ns <= 0 {
		return 100
	}
	return max(5, min(200000, int(budget/ns)))
}

func loadSection(cfg *config, t *toolset) (section, error) {
	s := section{
		title: "Load",
		intro: "`elfimage.Open` + `Close` of an image (in process, Go) against, on files of the same shape: the floor, the system calls " +
			"any one-`mmap` loader makes (`open` + `mmap` of the whole file + `mprotect` of the R+X and R+W segments + `munmap` + `close`, " +
			"in C; the file size and program headers read once before timing, so no `fstat`), the floor plus the page faults a loader that reads its headers in place and relocates takes " +
			"(read the first byte of the mapping, write one byte of each writable segment: two faults when the image has data), the floor made from Go with `x/sys/unix`, and " +
			"`dlopen(RTLD_NOW)` + `dlclose` of a `gcc -O2 -g -shared` object with the same procedure count (C: `bench/c/load.c`). " +
			"The images are Scheme programs shaped like `query_bench_test.go`'s (a docstring, an optional argument, nested `let`s per procedure); " +
			"the large tails come from longer docstrings, and the shared objects get a non-loaded section of the same size (`objcopy --add-section`). " +
			"The shared objects are built from C (`gcc -O2 -g -fPIC`) in the full run and, with `--quick`, from the Link rows' assembly (`gcc -shared`, line table and CFI only). " +
			"Times are µs per load+unload, each round the mean of a loop.",
		header: []string{"image", "file (tail)", "elfimage µs", "floor µs (C)", "ours/floor", "floor + faults µs (C)", "ours/(floor + faults)", "dlopen µs", "ours/dlopen", "floor µs (Go)", "reproduce"},
	}
	if !cfg.wantAny("load/procs=100", "load/procs=1000", "load/procs=10000", "load/tail=1MB", "load/tail=16MB", "load/tail=128MB") {
		return s, nil
	}
	imgs, err := loadInputs(cfg, t)
	if err != nil {
		return s, err
	}
	harness, herr := buildC(cfg, t, "bench/c/load.c", "-ldl")
	if herr != nil {
		logf("load: %v", herr)
	}
	type result struct{ ours, floorC, faultsC, floorGo, dl []float64 }
	res := make([]result, len(imgs))
	for i, li := range imgs {
		logf("load: timing %s", li.id)
		// Warm: read the files, one untimed round of each.
		os.ReadFile(li.path)
		ns, err := timeOpen(li.path, 20)
		if err != nil {
			return s, err
		}
		itOurs := itersFor(cfg, ns)
		gf, err := newGoFloor(li.path)
		if err != nil {
			return s, err
		}
		ns, err = gf.time(20)
		if err != nil {
			return s, err
		}
		itFloor := itersFor(cfg, ns)
		itDL := 0
		if harness != "" && li.so != "" {
			if ns, err := runLoadHarness(harness, "dlopen", li.so, 20); err == nil {
				itDL = itersFor(cfg, ns)
			} else {
				logf("load: %v", err)
			}
		}
		for range cfg.reps {
			if ns, err := timeOpen(li.path, itOurs); err == nil {
				res[i].ours = append(res[i].ours, ns)
			} else {
				return s, err
			}
			if ns, err := gf.time(itFloor); err == nil {
				res[i].floorGo = append(res[i].floorGo, ns)
			}
			if harness != "" {
				if ns, err := runLoadHarness(harness, "floor", li.path, itFloor); err == nil {
					res[i].floorC = append(res[i].floorC, ns)
				} else {
					logf("load: %v", err)
				}
				if ns, err := runLoadHarness(harness, "faults", li.path, itOurs); err == nil {
					res[i].faultsC = append(res[i].faultsC, ns)
				} else {
					logf("load: %v", err)
				}
				if itDL > 0 {
					if ns, err := runLoadHarness(harness, "dlopen", li.so, itDL); err == nil {
						res[i].dl = append(res[i].dl, ns)
					} else {
						logf("load: %v", err)
					}
				}
			}
		}
	}
	var worstFloor, worstDL float64
	var tail1, tail128 float64
	for i, li := range imgs {
		o, ok := summarize(res[i].ours)
		fc, okC := summarize(res[i].floorC)
		fg, okG := summarize(res[i].floorGo)
		dl, okD := summarize(res[i].dl)
		ft, okT := summarize(res[i].faultsC)
		rf, rd, rt := "n/a", "n/a", "n/a"
		if ok && okT {
			rt = ratio(o.med, ft.med)
		}
		if ok && okC {
			rf = ratio(o.med, fc.med)
			worstFloor = max(worstFloor, o.med/fc.med)
		}
		if ok && okD {
			rd = ratio(o.med, dl.med)
			worstDL = max(worstDL, o.med/dl.med)
		}
		if li.id == "load/tail=1MB" {
			tail1 = o.med
		}
		if li.id == "load/tail=128MB" {
			tail128 = o.med
		}
		s.rows = append(s.rows, []string{li.label, fmt.Sprintf("%s (%s)", mb(li.size), mb(li.tail)),
			cell(o, ok, 1e3), cell(fc, okC, 1e3), rf, cell(ft, okT, 1e3), rt, cell(dl, okD, 1e3), rd, cell(fg, okG, 1e3),
			fmt.Sprintf("`bench/run --only '%s$'`", li.id)})
	}
	s.withTargets(loadTargets(worstFloor, worstDL, tail1, tail128)...)
	return s, nil
}

// loadTargets decides the load targets of issue 19: worstFloor and worstDL
// are the largest ours/floor and ours/dlopen ratios over the rows, tail1
// and tail128 the medians of the 1 MB and 128 MB tail rows; 0 means not
// measured.
func loadTargets(worstFloor, worstDL, tail1, tail128 float64) []target {
	var ts []target
	if worstFloor > 0 {
		ts = append(ts, target{"load/floor", worstFloor <= 1.2, fmt.Sprintf("worst row %.2f×", worstFloor)})
	}
	if worstDL > 0 {
		ts = append(ts, target{"load/dlopen", worstDL <= 0.6, fmt.Sprintf("worst row %.2f×", worstDL)})
	}
	if tail1 > 0 && tail128 > 0 {
		r := tail128 / tail1
		ts = append(ts, target{"load/tail", r >= 0.9 && r <= 1.1, fmt.Sprintf("128 MB costs %.2f× the 1 MB load", r)})
	}
	return ts
}

func metMissed(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**missed**"
}
