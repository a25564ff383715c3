package main

// Tests that run the real perf (linux-perf) on a hot loop and check what
// it shows against the image's own line table: (a) an image mapped from
// its file, with no perf map and no inject; (b) a JIT image announced in
// /tmp/perf-PID.map; (c) a JIT image announced in a jitdump, after `perf
// inject --jit`, with frame-pointer call graphs through the JIT frames.
//
// perf runs with -e cpu-clock (the machines have no hardware counters),
// -N (no build-id cache) and HOME set to a test directory, so nothing
// outside the test's directories is written except /tmp/perf-PID.map,
// which the perf map test removes. The CLI perf profiles is this test
// binary itself (see perfAsCLI).

import (
	"bufio"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/dwarf/line"
	"github.com/elfimage/elfimage/internal/qemutest"
	"github.com/elfimage/elfimage/internal/tooltest"
	"github.com/elfimage/elfimage/jit/jitdump"
)

// perfProg spends nearly all its time in spin's loop, whose body is spread
// over lines 4-7; main calls work calls spin (not tail calls), so a sample
// in spin has both callers on the stack. About 0.6 s of CPU on our machines.
const perfProg = `;;; hot.scm: sampled by perf_test.go.
(define (spin n acc)
  (let loop ((i 0) (a acc))
    (if (< i n)
        (loop (+ i 1)
              (+ (* a 3)
                 (remainder i 7)))
        a)))

(define (work k)
  (+ (spin k 1) 1))

(define (main)
  (display (work 150000000))
  (newline))
`

// perfProgOutput is what perfProg prints.
const perfProgOutput = "-396522702645081840\n"

// perfAsCLI in the environment (value "1") makes the test binary act as
// the elfimage command: the perf tests run it under perf as the CLI, which
// spares them a go build. This init runs after main.go's (the go tool
// hands the compiler the files in name order), so the commands are set.
const perfAsCLI = "ELFIMAGE_TEST_AS_CLI"

func init() {
	if os.Getenv(perfAsCLI) == "1" {
		os.Exit(cliMain())
	}
}

// perfFixture is the CLI, perfProg and its image, and the image's own
// procedures and line table: the reference perf's output is checked
// against.
type perfFixture struct {
	perf      string
	dir       string // holds everything below; HOME of the perf runs
	cli       string // this test binary, run as the CLI (see perfAsCLI)
	src, img  string
	procs     map[string]elfimage.Procedure // by name
	tab       *line.Table
	progHeads []elf.ProgHeader // PT_LOAD of the image file
}

// setupPerf builds the CLI and perfProg's image in a test directory, reads
// the image's procedures and line table, and checks that perf can record
// here: when perf_event_open is refused it skips the test, or fails it
// when CI is set. Under qemu-user (qemutest.Emulated) it skips the test:
// perf records the arm64 CLI natively (perf_event_open on a program the
// kernel cannot execute), and qemu emulates no perf events for it.
func setupPerf(t *testing.T) *perfFixture {
	t.Helper()
	if why := qemutest.Emulated(); why != "" {
		t.Skipf("%s: perf runs the CLI natively (perf_event_open), which qemu-user does not emulate", why)
	}
	perf := tooltest.Require(t, "perf")
	cli, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := &perfFixture{perf: perf, dir: dir, cli: cli,
		src: filepath.Join(dir, "hot.scm"), img: filepath.Join(dir, "hot.elf")}
	probe := filepath.Join(dir, "probe.data")
	if out, err := tooltest.RunTool(t, f.perfCmd("record", "-e", "cpu-clock", "-N", "-q", "-o", probe, "--", cli, "-h"), 2*time.Minute); err != nil {
		tooltest.Skip(t, "perf cannot record here (perf_event_open refused? .ci/run must let it through): perf record -e cpu-clock: %v\n%s", err, out)
	}
	if err := os.WriteFile(f.src, []byte(perfProg), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI(t, "build", "-o", f.img, f.src); code != 0 {
		t.Fatalf("elfimage build: exit %d\n%s%s", code, out, errOut)
	}
	im, err := elfimage.Open(f.img, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { im.Close() }) // the line table may alias the mapping
	procs, err := im.Procedures()
	if err != nil {
		t.Fatal(err)
	}
	f.procs = map[string]elfimage.Procedure{}
	for _, p := range procs {
		f.procs[p.Name] = p
	}
	for _, name := range []string{"spin", "work", "main"} {
		if _, ok := f.procs[name]; !ok {
			t.Fatalf("image has no procedure %s: %v", name, procs)
		}
	}
	if f.tab, err = im.LineTable(); err != nil {
		t.Fatal(err)
	}
	ef, err := elf.Open(f.img)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD {
			f.progHeads = append(f.progHeads, p.ProgHeader)
		}
	}
	return f
}

// TestPerf runs the three perf scenarios on one build of the CLI and the
// image.
func TestPerf(t *testing.T) {
	f := setupPerf(t)
	t.Run("FileMapped", func(t *testing.T) { testPerfFileMapped(t, f) })
	t.Run("PerfMap", func(t *testing.T) { testPerfMap(t, f) })
	t.Run("Jitdump", func(t *testing.T) { testPerfJitdump(t, f) })
}

// perfCmd is perf with args, HOME in the fixture's directory (perf's
// ~/.debug caches stay there) and the directory as working directory.
func (f *perfFixture) perfCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(f.perf, args...)
	cmd.Dir = f.dir
	cmd.Env = append(os.Environ(), "HOME="+f.dir, perfAsCLI+"=1")
	return cmd
}

// perfOutput runs perf and returns its standard output; it fails the test
// on a non-zero exit.
func (f *perfFixture) perfOutput(t *testing.T, args ...string) string {
	t.Helper()
	return tooltest.PerfOutput(t, f.perf, f.dir, []string{perfAsCLI + "=1"}, args...)
}

// record runs `perf record recordArgs -o data -- elfimage runArgs`, for 3
// minutes at the most (tooltest.RunToolSplit), with the program's output
// (perf's standard output) apart from perf's messages, and checks the
// output.
func (f *perfFixture) record(t *testing.T, data string, recordArgs, runArgs []string) {
	t.Helper()
	args := append(append([]string{"record", "-e", "cpu-clock", "-N", "-o", data}, recordArgs...), "--", f.cli)
	cmd := f.perfCmd(append(args, runArgs...)...)
	got, stderr, err := tooltest.RunToolSplit(t, cmd, 3*time.Minute)
	if err != nil {
		t.Fatalf("perf %s: %v\n%s", strings.Join(cmd.Args[1:], " "), err, stderr)
	}
	if got != perfProgOutput {
		t.Fatalf("program printed %q, want %q (perf: %s)", got, perfProgOutput, stderr)
	}
}

// noLine reports whether a perf srcline says "no line": empty, "??:0",
// or the unit's file with line 0.
func noLine(srcline string) bool {
	return srcline == "" || strings.HasSuffix(srcline, ":0")
}

// lineAt returns the line the image's own line table gives the link-time
// address addr (0 when none) and the file's base name.
func (f *perfFixture) lineAt(addr uint64) (string, int) {
	r, ok := f.tab.Lookup(addr)
	if !ok {
		return "", 0
	}
	file, _ := f.tab.File(r.File)
	if file == nil {
		return "", int(r.Line)
	}
	return filepath.Base(file.Path), int(r.Line)
}

// procAt returns the procedure of the image containing the link-time
// address addr.
func (f *perfFixture) procAt(addr uint64) (elfimage.Procedure, bool) {
	for _, p := range f.procs {
		if addr >= p.Start && addr < p.Start+p.Size {
			return p, true
		}
	}
	return elfimage.Procedure{}, false
}

// perfFrame is one line of `perf script -F ip,sym,symoff,dso,srcline`:
// "IP SYM+0xOFF (DSO)", then the source line "FILE:LINE" if perf found one.
type perfFrame struct {
	IP      uint64
	Sym     string
	Off     uint64
	HasOff  bool
	DSO     string
	Srcline string
}

// perfSample is one sample: its frames, innermost first (one without a
// call graph).
type perfSample struct{ Frames []perfFrame }

var (
	frameRE = regexp.MustCompile(`^\s*([0-9a-f]+) (.*?)(?:\+0x([0-9a-f]+))? \((.*)\)$`)
	mmapRE  = regexp.MustCompile(`PERF_RECORD_MMAP2 (\d+)/\d+: \[0x([0-9a-f]+)\(0x([0-9a-f]+)\) @ (0x[0-9a-f]+|0) .*\]: (\S+) (.*)$`)
)

// perfMmap is a PERF_RECORD_MMAP2 event: [Start, Start+Len) maps File from
// offset Pgoff.
type perfMmap struct {
	PID               int
	Start, Len, Pgoff uint64
	Prot, File        string
}

// parseScript parses `perf script` output of the fields ip, sym, symoff,
// dso and srcline, with --show-mmap-events; callchain says samples are
// call graphs (frames on tab-indented lines, samples separated by blank
// lines).
func parseScript(t *testing.T, out string, callchain bool) ([]perfSample, []perfMmap) {
	t.Helper()
	var samples []perfSample
	var mmaps []perfMmap
	var cur *perfSample
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if m := mmapRE.FindStringSubmatch(l); m != nil {
			pid, _ := strconv.Atoi(m[1])
			start, _ := strconv.ParseUint(m[2], 16, 64)
			n, _ := strconv.ParseUint(m[3], 16, 64)
			off, _ := strconv.ParseUint(strings.TrimPrefix(m[4], "0x"), 16, 64)
			mmaps = append(mmaps, perfMmap{PID: pid, Start: start, Len: n, Pgoff: off, Prot: m[5], File: m[6]})
			continue
		}
		if strings.TrimSpace(l) == "" {
			cur = nil
			continue
		}
		if m := frameRE.FindStringSubmatch(l); m != nil {
			ip, _ := strconv.ParseUint(m[1], 16, 64)
			fr := perfFrame{IP: ip, Sym: m[2], DSO: m[4]}
			if m[3] != "" {
				fr.Off, _ = strconv.ParseUint(m[3], 16, 64)
				fr.HasOff = true
			}
			if cur == nil || !callchain {
				samples = append(samples, perfSample{})
				cur = &samples[len(samples)-1]
			}
			cur.Frames = append(cur.Frames, fr)
			continue
		}
		if cur != nil && len(cur.Frames) > 0 && strings.HasPrefix(l, "  ") {
			cur.Frames[len(cur.Frames)-1].Srcline = strings.TrimSpace(l)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return samples, mmaps
}

// reportRow is one row of `perf report --stdio -t '|' --sort dso,sym[,srcline]`.
type reportRow struct {
	Percent          float64
	DSO, Sym, Source string
}

// parseReport parses perf report's rows; Sym drops the "[.] " prefix.
func parseReport(t *testing.T, out string) []reportRow {
	t.Helper()
	var rows []reportRow
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "#") || !strings.Contains(l, "|") {
			continue
		}
		fs := strings.Split(l, "|")
		if len(fs) < 3 {
			continue
		}
		p, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(fs[0]), "%"), 64)
		if err != nil {
			continue
		}
		r := reportRow{Percent: p, DSO: strings.TrimSpace(fs[1]), Sym: strings.TrimSpace(fs[2])}
		if _, s, ok := strings.Cut(r.Sym, "] "); ok && strings.HasPrefix(r.Sym, "[") {
			r.Sym = s
		}
		if len(fs) > 3 {
			r.Source = strings.TrimSpace(fs[3])
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		t.Fatalf("no rows in perf report output:\n%s", out)
	}
	return rows
}

// checkSrclines checks the rows perf reports for spin: together more than
// half of all samples, and each row's source line one that the image's
// line table gives to an address in spin.
func (f *perfFixture) checkSrclines(t *testing.T, rows []reportRow, dso func(string) bool) {
	t.Helper()
	spin := f.procs["spin"]
	lines := map[string]bool{}
	for a := spin.Start; a < spin.Start+spin.Size; a++ {
		if file, l := f.lineAt(a); l > 0 {
			lines[fmt.Sprintf("%s:%d", file, l)] = true
		}
	}
	var total float64
	for _, r := range rows {
		if r.Sym != "spin" || !dso(r.DSO) {
			continue
		}
		total += r.Percent
		if !lines[r.Source] {
			t.Errorf("perf report: %.2f%% of the samples in spin at %q, a line spin's code does not have (lines %v)", r.Percent, r.Source, lines)
		}
	}
	if total <= 50 {
		t.Errorf("perf report --sort dso,sym,srcline gives spin %.2f%% of the samples, want > 50%%:\n%v", total, rows)
	}
}

// testPerfFileMapped: the image runs mapped from its file; perf records
// the file mapping and names spin and its lines from the file itself, with
// no perf map and no inject.
func testPerfFileMapped(t *testing.T, f *perfFixture) {
	data := filepath.Join(t.TempDir(), "file.data")
	f.record(t, data, nil, []string{"run", f.img})

	rows := parseReport(t, f.perfOutput(t, "report", "--stdio", "-i", data, "-t", "|", "--sort", "dso,sym"))
	var spinPct float64
	for _, r := range rows {
		if r.Sym == "spin" {
			if r.DSO != filepath.Base(f.img) {
				t.Errorf("perf report: spin in DSO %q, want %q", r.DSO, filepath.Base(f.img))
			}
			spinPct += r.Percent
		}
	}
	if spinPct <= 50 {
		t.Errorf("perf report gives spin %.2f%% of the samples, want > 50%%:\n%v", spinPct, rows)
	}
	srcRows := parseReport(t, f.perfOutput(t, "report", "--stdio", "-i", data, "-t", "|", "--sort", "dso,sym,srcline"))
	f.checkSrclines(t, srcRows, func(d string) bool { return d == filepath.Base(f.img) })

	// Every sample in the image: perf's symbol, offset and line agree
	// with the procedure and line table at the link-time address, which
	// the MMAP2 event of the file gives (ip - start + pgoff is the file
	// offset; the PT_LOAD holding it turns that into an address).
	samples, mmaps := parseScript(t, f.perfOutput(t, "script", "-i", data, "--show-mmap-events", "-F", "ip,sym,symoff,dso,srcline"), false)
	var maps []perfMmap
	for _, m := range mmaps {
		if m.File == f.img && strings.Contains(m.Prot, "x") {
			maps = append(maps, m)
		}
	}
	if len(maps) == 0 {
		t.Fatalf("perf recorded no executable mapping of %s: %+v", f.img, mmaps)
	}
	n, inSpin, bad := 0, 0, 0
	for _, s := range samples {
		fr := s.Frames[0]
		if fr.DSO != f.img {
			continue
		}
		n++
		addr, ok := f.linkAddr(maps, fr.IP)
		if !ok {
			t.Errorf("sample at %#x in %s: outside its mappings %+v", fr.IP, f.img, maps)
			bad++
			continue
		}
		p, ok := f.procAt(addr)
		file, l := f.lineAt(addr)
		want := fmt.Sprintf("%s:%d", file, l)
		if l == 0 && noLine(fr.Srcline) {
			want = fr.Srcline // no line in the image, none from perf
		}
		if !ok || fr.Sym != p.Name || !fr.HasOff || fr.Off != addr-p.Start || fr.Srcline != want {
			if bad++; bad <= 10 {
				t.Errorf("sample at %#x (link-time %#x): perf says %s+%#x %s; the image says %s+%#x %s", fr.IP, addr, fr.Sym, fr.Off, fr.Srcline, p.Name, addr-p.Start, want)
			}
		}
		if p.Name == "spin" {
			inSpin++
		}
	}
	if n < 100 || inSpin*10 < n*8 {
		t.Errorf("%d samples in %s, %d of them in spin: want at least 100, more than 80%% in spin", n, f.img, inSpin)
	}
	t.Logf("%d samples in %s, %d in spin, %d disagreeing with the image", n, f.img, inSpin, bad)
}

// linkAddr turns a sampled run-time address into a link-time address
// through the mapping holding it.
func (f *perfFixture) linkAddr(maps []perfMmap, ip uint64) (uint64, bool) {
	for _, m := range maps {
		if ip < m.Start || ip-m.Start >= m.Len {
			continue
		}
		off := ip - m.Start + m.Pgoff
		for _, p := range f.progHeads {
			if off >= p.Off && off-p.Off < p.Filesz {
				return off - p.Off + p.Vaddr, true
			}
		}
	}
	return 0, false
}

// testPerfMap: the image is linked in memory (no file) and announced in
// /tmp/perf-PID.map; perf names spin from the map (no lines: a perf map
// has none). Samples in spin lie in its map entry.
func testPerfMap(t *testing.T, f *perfFixture) {
	data := filepath.Join(t.TempDir(), "map.data")
	f.record(t, data, nil, []string{"run", "-jit", "-perf-map", f.src})
	samples, mmaps := parseScript(t, f.perfOutput(t, "script", "-i", data, "--show-mmap-events", "-F", "ip,sym,symoff,dso"), false)
	pid := 0
	for _, m := range mmaps {
		if m.File == f.cli {
			pid = m.PID
			break
		}
	}
	if pid == 0 {
		t.Fatalf("no mapping of %s among perf's MMAP2 events", f.cli)
	}
	mapPath := filepath.Join("/tmp", fmt.Sprintf("perf-%d.map", pid))
	defer os.Remove(mapPath)
	fi, err := os.Stat(mapPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d bytes", mapPath, fi.Size())

	rows := parseReport(t, f.perfOutput(t, "report", "--stdio", "-i", data, "-t", "|", "--sort", "dso,sym"))
	var spinPct float64
	for _, r := range rows {
		if r.Sym == "spin" {
			spinPct += r.Percent
		}
	}
	if spinPct <= 50 {
		t.Errorf("perf report gives spin %.2f%% of the samples, want > 50%%:\n%v", spinPct, rows)
	}

	code, out, errOut := runCLI(t, "dump", mapPath)
	if code != 0 {
		t.Fatalf("dump %s: exit %d: %s", mapPath, code, errOut)
	}
	m := regexp.MustCompile(`\[0x([0-9a-f]+), 0x([0-9a-f]+)\) spin\n`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("perf map has no spin:\n%s", out)
	}
	start, _ := strconv.ParseUint(m[1], 16, 64)
	end, _ := strconv.ParseUint(m[2], 16, 64)
	if spin := f.procs["spin"]; end-start != spin.Size {
		t.Errorf("perf map: spin has %#x bytes, the image %#x", end-start, spin.Size)
	}
	n, bad := 0, 0
	for _, s := range samples {
		fr := s.Frames[0]
		if fr.Sym != "spin" {
			continue
		}
		n++
		if fr.DSO != mapPath || fr.IP < start || fr.IP >= end || fr.HasOff && fr.Off != fr.IP-start {
			if bad++; bad <= 10 {
				t.Errorf("sample at %#x: perf says spin+%#x in %s; the map says spin is [%#x, %#x) in %s", fr.IP, fr.Off, fr.DSO, start, end, mapPath)
			}
		}
	}
	if n < 100 {
		t.Errorf("only %d samples named spin", n)
	}
}

// testPerfJitdump: the image is linked in memory and announced in a
// jitdump; after `perf inject --jit`, perf names the procedures and their
// lines from the jitted-PID-N.so files it synthesized, and frame-pointer
// call graphs go from spin through work and main into the Go frames.
func testPerfJitdump(t *testing.T, f *perfFixture) {
	dir := t.TempDir()
	data, injected := filepath.Join(dir, "jit.data"), filepath.Join(dir, "jit.inj.data")
	f.record(t, data, []string{"-k", "1", "-g"}, []string{"run", "-jit", "-jitdump=" + dir, f.src})
	dumps, _ := filepath.Glob(filepath.Join(dir, "jit-*.dump"))
	if len(dumps) != 1 {
		t.Fatalf("want one jit-PID.dump in %s, have %v", dir, dumps)
	}
	dumpPath := dumps[0]
	f.perfOutput(t, "inject", "--jit", "-i", data, "-o", injected)

	// The dump: every procedure loaded once, with the image's code size,
	// and the library's entry routine (from the entry image), through
	// which the image's code is called.
	d, err := jitdump.ReadFile(dumpPath)
	if err != nil {
		t.Fatal(err)
	}
	ent, err := elfimage.EntryImage()
	if err != nil {
		t.Fatal(err)
	}
	entProcs, err := ent.Procedures()
	if err != nil || len(entProcs) != 1 || entProcs[0].Name != elfimage.EntryName {
		t.Fatalf("entry image procedures %+v, %v", entProcs, err)
	}
	loads := map[string]jitdump.LoadedCode{}
	for _, c := range d.Code() {
		loads[c.Name] = c
		p, ok := f.procs[c.Name]
		if c.Name == elfimage.EntryName {
			p, ok = entProcs[0], true
		}
		if !ok || p.Size != c.CodeSize {
			t.Errorf("dump loads %s of %#x bytes; the image has %+v", c.Name, c.CodeSize, p)
		}
	}
	pid := int(d.Header.PID)
	for _, name := range []string{"spin", "work", "main", elfimage.EntryName} {
		if _, ok := loads[name]; !ok {
			t.Fatalf("dump does not load %s", name)
		}
	}
	soOf := func(name string) string {
		return filepath.Join(dir, fmt.Sprintf("jitted-%d-%d.so", pid, loads[name].CodeIndex))
	}
	code, out, errOut := runCLI(t, "dump", dumpPath)
	if code != 0 {
		t.Fatalf("dump %s: exit %d: %s", dumpPath, code, errOut)
	}
	for _, want := range []string{"JIT_CODE_DEBUG_INFO", "JIT_CODE_UNWINDING_INFO", "JIT_CODE_LOAD spin ", "JIT_CODE_LOAD work ", "JIT_CODE_CLOSE"} {
		if !strings.Contains(out, want) {
			t.Errorf("elfimage dump %s lacks %q:\n%s", dumpPath, want, out)
		}
	}

	isJitted := func(d string) bool { return strings.HasPrefix(d, fmt.Sprintf("jitted-%d-", pid)) }
	rows := parseReport(t, f.perfOutput(t, "report", "--stdio", "-i", injected, "--no-children", "-g", "none", "-t", "|", "--sort", "dso,sym,srcline"))
	f.checkSrclines(t, rows, isJitted)

	// Every sample in JIT code: perf's .so, offset and line agree with the
	// load in the dump and with the image at the same offset.
	samples, _ := parseScript(t, f.perfOutput(t, "script", "-i", injected, "-G", "-F", "ip,sym,symoff,dso,srcline"), false)
	n, inSpin, bad := 0, 0, 0
	for _, s := range samples {
		fr := s.Frames[0]
		p, ok := f.procs[fr.Sym]
		if !ok || !isJitted(filepath.Base(fr.DSO)) {
			continue
		}
		n++
		if fr.Sym == "spin" {
			inSpin++
		}
		addr := p.Start + fr.Off
		file, l := f.lineAt(addr)
		want := fmt.Sprintf("%s:%d", file, l)
		if l == 0 && noLine(fr.Srcline) {
			// No line in the image (runtime support code without
			// rows): the jitdump has no DEBUG_INFO for it, and perf
			// prints no srcline.
			want = fr.Srcline
		}
		if fr.DSO != soOf(fr.Sym) || !fr.HasOff || fr.Off >= p.Size || fr.IP != loads[fr.Sym].CodeAddr+fr.Off || fr.Srcline != want {
			if bad++; bad <= 10 {
				t.Errorf("sample at %#x: perf says %s+%#x in %s at %s; the dump loads %s at %#x (%s), the image says %s at %s+%#x",
					fr.IP, fr.Sym, fr.Off, fr.DSO, fr.Srcline, fr.Sym, loads[fr.Sym].CodeAddr, soOf(fr.Sym), want, p.Name, fr.Off)
			}
		}
	}
	if n < 100 || inSpin*10 < n*8 {
		t.Errorf("%d samples in JIT code, %d of them in spin: want at least 100, more than 80%% in spin", n, inSpin)
	}

	// The call graphs (frame pointers) of the samples in spin: spin, work,
	// main, %start, the library's entry routine and on into the Go code
	// that called the image (native.trampoline, native.call, ... about ten
	// frames down to runtime.main).
	// (Without srcline: perf runs addr2line on every Go frame, which takes
	// seconds; the lines of the callers' .so files are checked below.)
	chained, _ := parseScript(t, f.perfOutput(t, "script", "-i", injected, "-F", "ip,sym,symoff,dso"), true)
	spins, chains := 0, 0
	for _, s := range chained {
		if fr := s.Frames[0]; fr.Sym != "spin" || fr.DSO != soOf("spin") {
			continue
		}
		spins++
		if err := f.checkChain(s.Frames, soOf); err != nil {
			if bad++; bad <= 10 {
				t.Errorf("call graph of a sample in spin: %v\n%+v", err, s.Frames)
			}
			continue
		}
		chains++
	}
	if spins < 100 || chains*10 < spins*8 {
		t.Errorf("%d samples in spin, %d of them with the call graph spin<-work<-main<-%%start<-%s<-Go: want at least 100, more than 80%%", spins, chains, elfimage.EntryName)
	}
	t.Logf("%d samples in JIT code, %d in spin, %d of those with the whole call graph; %d disagreeing", n, spins, chains, bad)

	for _, name := range []string{"spin", "work", "main"} {
		f.checkJittedSO(t, soOf(name), f.procs[name])
	}
}

// checkChain checks a call graph starting in spin: spin, work, main,
// %start and the library's entry routine, each in its own jitted .so, the
// callers at offsets that can be return addresses (inside the procedure,
// not its first byte), then only frames of the CLI (the Go code that
// called the image).
func (f *perfFixture) checkChain(frames []perfFrame, soOf func(string) string) error {
	want := []string{"spin", "work", "main", "%start", elfimage.EntryName}
	if len(frames) < len(want)+1 {
		return fmt.Errorf("%d frames, want at least %d", len(frames), len(want)+1)
	}
	for i, name := range want {
		fr := frames[i]
		if fr.Sym != name || fr.DSO != soOf(name) {
			return fmt.Errorf("frame %d is %s in %s, want %s in %s", i, fr.Sym, fr.DSO, name, soOf(name))
		}
		if p, ok := f.procs[name]; ok && i > 0 && (!fr.HasOff || fr.Off == 0 || fr.Off > p.Size) {
			return fmt.Errorf("frame %d: %s+%#x is no return address in %s", i, name, fr.Off, name)
		}
	}
	// Go's test binaries have no symbol table, so perf names none of
	// these frames; they must be the CLI's, all of them
	// (native.trampoline, native.call, native.CallErr, scheme.Run,
	// main.run, runtime.main, ... and no garbage).
	goFrames := frames[len(want):]
	for _, fr := range goFrames {
		if fr.DSO != f.cli {
			return fmt.Errorf("below %s: frame %s in %s, want only frames of %s", elfimage.EntryName, fr.Sym, fr.DSO, f.cli)
		}
	}
	if len(goFrames) < 4 {
		return fmt.Errorf("below %s: %d frames of %s, want the Go frames down to runtime.main", elfimage.EntryName, len(goFrames), f.cli)
	}
	return nil
}

// checkJittedSO checks the ELF file perf inject synthesized for p from our
// records: readelf decodes its CFI as one FDE covering exactly .text, whose
// rows are those of the image's own CFI; llvm-dwarfdump --verify accepts its
// DWARF; and addr2line gives every byte of the code the line the image's
// line table gives it.
func (f *perfFixture) checkJittedSO(t *testing.T, so string, p elfimage.Procedure) {
	t.Helper()
	ef, err := elf.Open(so)
	if err != nil {
		t.Fatal(err)
	}
	text := ef.Section(".text")
	ef.Close()
	if text == nil || text.Size != p.Size {
		t.Fatalf("%s: .text %+v, want %#x bytes", so, text, p.Size)
	}
	readelf := tooltest.Require(t, "readelf")
	out, err := exec.Command(readelf, "-wF", so).CombinedOutput()
	if err != nil {
		t.Fatalf("readelf -wF %s: %v\n%s", so, err, out)
	}
	fde := regexp.MustCompile(`FDE cie=[0-9a-f]+ pc=([0-9a-f]+)\.\.([0-9a-f]+)`).FindAllStringSubmatch(string(out), -1)
	if len(fde) != 1 {
		t.Fatalf("readelf -wF %s: want one FDE:\n%s", so, out)
	}
	lo, _ := strconv.ParseUint(fde[0][1], 16, 64)
	hi, _ := strconv.ParseUint(fde[0][2], 16, 64)
	if lo != text.Addr || hi != text.Addr+text.Size {
		t.Errorf("readelf -wF %s: FDE [%#x, %#x), .text [%#x, %#x)", so, lo, hi, text.Addr, text.Addr+text.Size)
	}
	// The image's CFI as readelf interprets it, rebased to the .so's .text.
	imgOut, err := exec.Command(readelf, "-wF", f.img).CombinedOutput()
	if err != nil {
		t.Fatalf("readelf -wF %s: %v\n%s", f.img, err, imgOut)
	}
	if got, want := cfiRows(string(out), text.Addr, text.Addr), cfiRows(string(imgOut), p.Start, text.Addr); got != want || got == "" {
		t.Errorf("CFI rows of %s:\n%s\nthe image's rows for %s:\n%s", so, got, p.Name, want)
	}

	dwarfdump := tooltest.Require(t, "llvm-dwarfdump")
	if out, err := exec.Command(dwarfdump, "--verify", so).CombinedOutput(); err != nil || !strings.Contains(string(out), "No errors.") {
		t.Errorf("llvm-dwarfdump --verify %s: %v\n%s", so, err, out)
	}

	addr2line := tooltest.Require(t, "addr2line")
	var addrs []string
	for off := uint64(0); off < p.Size; off++ {
		addrs = append(addrs, fmt.Sprintf("%#x", text.Addr+off))
	}
	out, err = exec.Command(addr2line, append([]string{"-e", so}, addrs...)...).Output()
	if err != nil {
		t.Fatalf("addr2line -e %s: %v", so, err)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(got) != len(addrs) {
		t.Fatalf("addr2line: %d lines for %d addresses", len(got), len(addrs))
	}
	bad := 0
	for off := range p.Size {
		file, l := f.lineAt(p.Start + off)
		want := fmt.Sprintf("%s:%d", file, l)
		g := got[off]
		if i := strings.Index(g, " ("); i >= 0 {
			g = g[:i]
		}
		if filepath.Base(g) != want {
			if bad++; bad <= 10 {
				t.Errorf("addr2line -e %s %s: %s; the image says %s at %s+%#x", filepath.Base(so), addrs[off], got[off], want, p.Name, off)
			}
		}
	}
}

// cfiRows returns the rows of the one FDE of readelf -wF output that covers
// start, with locations rebased from start to base, one per line.
func cfiRows(out string, start, base uint64) string {
	var b strings.Builder
	in := false
	fdeRE := regexp.MustCompile(`FDE cie=[0-9a-f]+ pc=([0-9a-f]+)\.\.([0-9a-f]+)`)
	for _, l := range strings.Split(out, "\n") {
		if m := fdeRE.FindStringSubmatch(l); m != nil {
			lo, _ := strconv.ParseUint(m[1], 16, 64)
			hi, _ := strconv.ParseUint(m[2], 16, 64)
			in = start >= lo && start < hi
			continue
		}
		if !in {
			continue
		}
		fs := strings.Fields(l)
		if len(fs) == 0 {
			in = false
			continue
		}
		loc, err := strconv.ParseUint(fs[0], 16, 64)
		if err != nil {
			continue // the column header
		}
		fmt.Fprintf(&b, "%#x %s\n", loc-start+base, strings.Join(fs[1:], " "))
	}
	return b.String()
}
