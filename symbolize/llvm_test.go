package symbolize_test

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/json"
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

	"github.com/elfimage/elfimage/internal/qemutest"
	"github.com/elfimage/elfimage/internal/tooltest"
	"github.com/elfimage/elfimage/symbolize"
)

// The C test program: several files with static inline functions, so that
// gcc -O2 inlines and clones (testdata/csrc).
func cSources(t testing.TB) []string {
	m, err := filepath.Glob("testdata/csrc/*.c")
	if err != nil || len(m) == 0 {
		t.Fatalf("no C sources: %v", err)
	}
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	return m
}

var buildCache sync.Map // key → path (binaries built once per test process)

// buildDirs are the directories buildC and buildGo made, removed by
// TestMain when the tests end.
var (
	buildDirsMu sync.Mutex
	buildDirs   []string
)

// buildDir makes a directory for a test binary, removed when the tests end.
func buildDir(t testing.TB) string {
	dir, err := os.MkdirTemp("", "symbolize-test")
	if err != nil {
		t.Fatal(err)
	}
	buildDirsMu.Lock()
	buildDirs = append(buildDirs, dir)
	buildDirsMu.Unlock()
	return dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range buildDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// buildC compiles testdata/csrc with compiler cc and flags, in that
// directory (so DW_AT_comp_dir is it and file names are relative).
func buildC(t testing.TB, cc string, flags ...string) string {
	key := cc + " " + strings.Join(flags, " ")
	if p, ok := buildCache.Load(key); ok {
		return p.(string)
	}
	dir := buildDir(t)
	out := filepath.Join(dir, "prog")
	args := append(append([]string{}, flags...), "-o", out)
	args = append(args, cSources(t)...)
	cmd := exec.Command(cc, args...)
	cmd.Dir = "testdata/csrc"
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, msg)
	}
	buildCache.Store(key, out)
	return out
}

// buildGo builds testdata/goprog with the go command running the test
// (DWARF on, -compressdwarf at its default, true).
func buildGo(t testing.TB) string {
	if p, ok := buildCache.Load("go"); ok {
		return p.(string)
	}
	dir := buildDir(t)
	out := filepath.Join(dir, "goprog")
	gocmd := tooltest.Require(t, "go")
	cmd := exec.Command(gocmd, "build", "-o", out, ".")
	cmd.Dir = "testdata/goprog"
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, msg)
	}
	buildCache.Store("go", out)
	return out
}

// codeAddrs picks n addresses uniformly over the bytes of the sized
// STT_FUNC symbols of .text, deterministically from seed.
func codeAddrs(t testing.TB, path string, n int, seed uint64) []uint64 {
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	text := f.Section(".text")
	if text == nil {
		t.Fatal("no .text")
	}
	type fn struct{ lo, hi uint64 }
	var fns []fn
	var total uint64
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Size == 0 || s.Value < text.Addr || s.Value+s.Size > text.Addr+text.Size {
			continue
		}
		fns = append(fns, fn{s.Value, s.Value + s.Size})
		total += s.Size
	}
	if total == 0 {
		t.Fatal("no functions in .text")
	}
	cum := make([]uint64, len(fns))
	var c uint64
	for i, f := range fns {
		c += f.hi - f.lo
		cum[i] = c
	}
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	out := make([]uint64, n)
	for i := range out {
		x := r.Uint64N(total)
		j, _ := slices.BinarySearch(cum, x+1)
		f := fns[j]
		out[i] = f.hi - (cum[j] - x)
	}
	return out
}

type llvmFrame struct {
	FunctionName string
	FileName     string
	Line         uint32
	Column       uint32
}

// llvmSymbolize runs llvm-symbolizer --inlining once over all addresses.
func llvmSymbolize(t testing.TB, path string, addrs []uint64) [][]symbolize.Frame {
	tool := tooltest.Require(t, "llvm-symbolizer")
	var in bytes.Buffer
	for _, a := range addrs {
		fmt.Fprintf(&in, "%#x\n", a)
	}
	cmd := exec.Command(tool, "--inlining", "--output-style=JSON", "--obj="+path)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("llvm-symbolizer: %v\n%s", err, stderr.Bytes())
	}
	var res [][]symbolize.Frame
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var obj struct {
			Address string
			Symbol  []llvmFrame
		}
		if err := json.Unmarshal(sc.Bytes(), &obj); err != nil {
			t.Fatalf("llvm-symbolizer output %q: %v", sc.Text(), err)
		}
		var fs []symbolize.Frame
		for i, f := range obj.Symbol {
			fr := symbolize.Frame{Function: f.FunctionName, File: f.FileName, Line: f.Line, Column: f.Column, Inlined: i+1 < len(obj.Symbol)}
			if fr.Function == "<invalid>" {
				fr.Function = ""
			}
			if fr.File == "<invalid>" {
				fr.File = ""
			}
			fs = append(fs, fr)
		}
		res = append(res, fs)
	}
	if len(res) != len(addrs) {
		t.Fatalf("llvm-symbolizer answered %d of %d addresses", len(res), len(addrs))
	}
	return res
}

func fmtFrames(fs []symbolize.Frame) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "\n\t\t%s %s:%d:%d", orQ(f.Function), orQ(f.File), f.Line, f.Column)
		if f.Inlined {
			b.WriteString(" (inlined)")
		}
	}
	return b.String()
}

func orQ(s string) string {
	if s == "" {
		return "??"
	}
	return s
}

// compareWithLLVM symbolizes n random code addresses of path with us and
// with llvm-symbolizer and fails on every difference in function, file,
// line, column or inlined frames.
func compareWithLLVM(t *testing.T, path string, n int) {
	t.Helper()
	compareAddrsWithLLVM(t, path, codeAddrs(t, path, n, 1), true)
}

func compareAddrsWithLLVM(t *testing.T, path string, addrs []uint64, wantInlined bool) {
	t.Helper()
	compareOpenWithLLVM(t, path, addrs, wantInlined, func() (*symbolize.Symbolizer, error) { return symbolize.Open(path) })
}

// compareOpenWithLLVM is compareAddrsWithLLVM with our Symbolizer made by
// open (OpenDebug for a file with a separate debug file).
func compareOpenWithLLVM(t *testing.T, path string, addrs []uint64, wantInlined bool, open func() (*symbolize.Symbolizer, error)) {
	t.Helper()
	want := llvmSymbolize(t, path, addrs)
	s, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var frames []symbolize.Frame
	bad, inl := 0, 0
	for i, a := range addrs {
		frames, err = s.Symbolize(a, frames[:0])
		if err != nil {
			frames = append(frames[:0], symbolize.Frame{})
		}
		if len(frames) > 1 {
			inl++
		}
		if !slices.Equal(asLLVM(frames), want[i]) {
			bad++
			if bad <= 10 {
				t.Errorf("%#x: ours (err %v):%s\n\tllvm-symbolizer:%s", a, err, fmtFrames(frames), fmtFrames(want[i]))
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d addresses differ", bad, len(addrs))
	}
	if wantInlined && inl == 0 {
		t.Errorf("no address had inlined frames")
	}
	t.Logf("%d addresses, %d with inlined frames", len(addrs), inl)
	// The scan path (the first address of a unit, without the index)
	// on a sample: each scan walks its whole unit.
	defer symbolize.ScanAlways()()
	bad = 0
	for i := 0; i < len(addrs); i += max(1, len(addrs)/300) {
		frames, err = s.Symbolize(addrs[i], frames[:0])
		if err != nil {
			frames = append(frames[:0], symbolize.Frame{})
		}
		if !slices.Equal(asLLVM(frames), want[i]) {
			bad++
			if bad <= 10 {
				t.Errorf("%#x, scanned: ours (err %v):%s\n\tllvm-symbolizer:%s", addrs[i], err, fmtFrames(frames), fmtFrames(want[i]))
			}
		}
	}
	if bad > 0 {
		t.Errorf("scanned: %d addresses differ", bad)
	}
}

func TestGCCDWARF5(t *testing.T) {
	gcc := tooltest.Require(t, "gcc")
	compareWithLLVM(t, buildC(t, gcc, "-O2", "-g", "-gdwarf-5"), 10000)
}

func TestGCCDWARF4(t *testing.T) {
	gcc := tooltest.Require(t, "gcc")
	compareWithLLVM(t, buildC(t, gcc, "-O2", "-g", "-gdwarf-4"), 10000)
}

func TestClang(t *testing.T) {
	clang := tooltest.Require(t, "clang-14", "clang")
	compareWithLLVM(t, buildC(t, clang, "-O2", "-g", "-gdwarf-5"), 10000)
}

func TestGoBinary(t *testing.T) {
	compareWithLLVM(t, buildGo(t), 10000)
}

// TestNoDWARF: without debug sections the symbol table names functions,
// from .symtab, or from .dynsym when the file is fully stripped, as
// llvm-symbolizer does; addresses are taken before stripping.
func TestNoDWARF(t *testing.T) {
	gcc := tooltest.Require(t, "gcc")
	strip := tooltest.Require(t, "strip")
	full := buildC(t, gcc, "-O2", "-g", "-rdynamic")
	addrs := codeAddrs(t, full, 3000, 6)
	addrs = append(addrs, 0, 1, 0x400, 0xffffffff, ^uint64(0))
	for _, c := range []struct{ name, flag string }{{"symtab", "--strip-debug"}, {"dynsym", "--strip-all"}} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), c.name)
			if msg, err := exec.Command(strip, c.flag, "-o", out, full).CombinedOutput(); err != nil {
				t.Fatalf("strip: %v\n%s", err, msg)
			}
			s, err := symbolize.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := s.HasDWARF(); ok || err != nil {
				t.Errorf("HasDWARF = %v, %v after strip", ok, err)
			}
			if fs, err := s.Symbolize(0, nil); !errors.Is(err, symbolize.ErrNoInfo) || len(fs) != 0 {
				t.Errorf("address 0: %v, error %v, want ErrNoInfo", fs, err)
			}
			s.Close()
			compareAddrsWithLLVM(t, out, addrs, false)
		})
	}
}

// TestCompressed: the gcc binary with its debug sections compressed by
// objcopy (zlib, and zstd) gives the same frames as uncompressed.
func TestCompressed(t *testing.T) {
	gcc := tooltest.Require(t, "gcc")
	objcopy := tooltest.Require(t, "objcopy")
	plain := buildC(t, gcc, "-O2", "-g", "-gdwarf-5")
	addrs := codeAddrs(t, plain, 2000, 2)
	ref := symbolizeAll(t, plain, addrs)
	for _, kind := range []string{"zlib", "zstd", "zlib-gnu"} {
		t.Run(kind, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "prog."+kind)
			if msg, err := exec.Command(objcopy, "--compress-debug-sections="+kind, plain, out).CombinedOutput(); err != nil {
				if kind == "zstd" && bytes.Contains(msg, []byte("zstd")) {
					tooltest.Skip(t, "objcopy without zstd: %s", msg)
				}
				t.Fatalf("objcopy: %v\n%s", err, msg)
			}
			f, err := elf.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			compressed := false
			for _, s := range f.Sections {
				if s.Flags&elf.SHF_COMPRESSED != 0 || strings.HasPrefix(s.Name, ".zdebug") {
					compressed = true
				}
			}
			f.Close()
			if !compressed {
				t.Fatal("objcopy compressed nothing")
			}
			got := symbolizeAll(t, out, addrs)
			for i := range addrs {
				if !slices.Equal(got[i], ref[i]) {
					t.Fatalf("%#x: compressed%s\n\tplain%s", addrs[i], fmtFrames(got[i]), fmtFrames(ref[i]))
				}
			}
		})
	}
}

func symbolizeAll(t testing.TB, path string, addrs []uint64) [][]symbolize.Frame {
	s, err := symbolize.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out := make([][]symbolize.Frame, len(addrs))
	for i, a := range addrs {
		out[i], err = s.Symbolize(a, nil)
		if err != nil {
			t.Fatalf("%#x: %v", a, err)
		}
	}
	return out
}

// TestPrepare: after Prepare (units indexed in parallel, the symbol table
// sorted at once) every answer is the one a fresh Symbolizer gives address
// by address, on gcc DWARF 5 and Go binaries; Prepare on a closed
// Symbolizer fails with ErrClosed.
func TestPrepare(t *testing.T) {
	gcc := tooltest.Require(t, "gcc")
	for _, path := range []string{buildC(t, gcc, "-O2", "-g", "-gdwarf-5"), buildGo(t)} {
		addrs := codeAddrs(t, path, 3000, 11)
		want := symbolizeAll(t, path, addrs)
		s, err := symbolize.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Prepare(addrs); err != nil {
			t.Fatalf("Prepare: %v", err)
		}
		for i, a := range addrs {
			got, err := s.Symbolize(a, nil)
			if err != nil || !slices.Equal(got, want[i]) {
				t.Fatalf("%s %#x after Prepare: %v%s\nwant%s", filepath.Base(path), a, err, fmtFrames(got), fmtFrames(want[i]))
			}
		}
		s.Close()
		if err := s.Prepare(addrs); !errors.Is(err, symbolize.ErrClosed) {
			t.Errorf("Prepare after Close: %v, want ErrClosed", err)
		}
	}
}

// TestPrepareCommon: PrepareCommon sorts the symbol table (a gcc -O2
// DWARF 5 binary, a Go binary), alone or racing with Prepare and
// Symbolize (run with -race), and the answers stay Symbolize's on a fresh
// Symbolizer; after Close it fails with ErrClosed.
func TestPrepareCommon(t *testing.T) {
	gcc := tooltest.Require(t, "gcc")
	for _, path := range []string{buildC(t, gcc, "-O2", "-g", "-gdwarf-5"), buildGo(t)} {
		addrs := codeAddrs(t, path, 3000, 13)
		want := symbolizeAll(t, path, addrs)
		for _, racing := range []bool{false, true} {
			s, err := symbolize.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			wg.Go(func() {
				if err := s.PrepareCommon(); err != nil {
					t.Errorf("PrepareCommon: %v", err)
				}
			})
			if !racing {
				wg.Wait()
				if sorted, _ := symbolize.CommonDone(s); !sorted {
					t.Errorf("%s: PrepareCommon left the symbol table unsorted", filepath.Base(path))
				}
			}
			if err := s.Prepare(addrs); err != nil {
				t.Fatalf("Prepare: %v", err)
			}
			for i, a := range addrs {
				got, err := s.Symbolize(a, nil)
				if err != nil || !slices.Equal(got, want[i]) {
					t.Fatalf("%s %#x after PrepareCommon (racing %v): %v%s\nwant%s", filepath.Base(path), a, racing, err, fmtFrames(got), fmtFrames(want[i]))
				}
			}
			wg.Wait()
			if err := s.PrepareCommon(); err != nil {
				t.Errorf("PrepareCommon again: %v", err)
			}
			s.Close()
			if err := s.PrepareCommon(); !errors.Is(err, symbolize.ErrClosed) {
				t.Errorf("PrepareCommon after Close: %v, want ErrClosed", err)
			}
		}
	}
}

// TestConcurrent: goroutines symbolizing at once on a fresh Symbolizer
// (racing to build the same indexes, one of them through Prepare) get the
// sequential answers.
func TestConcurrent(t *testing.T) {
	path := buildGo(t)
	addrs := codeAddrs(t, path, 2000, 7)
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
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var fs []symbolize.Frame
			for i := range addrs {
				j := (i*7 + g*501) % len(addrs)
				var err error
				fs, err = s.Symbolize(addrs[j], fs[:0])
				if err != nil || !slices.Equal(fs, want[j]) {
					t.Errorf("goroutine %d, %#x: %v%s", g, addrs[j], err, fmtFrames(fs))
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestTruncated: a file truncated after Open (its mapping then faults, as
// SIGBUS) makes Prepare and every Symbolize fail with ErrFault, however
// often they are called and whatever they had loaded before, and never
// panic; with the indexes in a slab (freed only by Close), faulting again
// takes no more of it (a unit whose index faulted is not rebuilt per
// query).
func TestTruncated(t *testing.T) {
	t.Run("heap", testTruncated)
	t.Run("slab", func(t *testing.T) {
		defer symbolize.SetSlabMinFile(0)()
		testTruncated(t)
	})
}

func testTruncated(t *testing.T) {
	if why := qemutest.Emulated(); why != "" {
		t.Skipf("%s, and qemu-user delivers SIGBUS without the faulting address (addr 0), which the Symbolizer needs to tell a fault on its mapping from a bug", why)
	}
	gcc := tooltest.Require(t, "gcc")
	src := buildC(t, gcc, "-O2", "-g", "-gdwarf-5")
	addrs := codeAddrs(t, src, 200, 13)
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
		if warm < len(addrs) {
			if err := s.Prepare(addrs); !errors.Is(err, symbolize.ErrFault) {
				t.Errorf("warm %d: Prepare after truncation: %v, want ErrFault", warm, err)
			}
		}
		var used int
		for round := range 2 {
			for i := range 5 {
				a := addrs[(i*37)%len(addrs)]
				if _, err := s.Symbolize(a, nil); !errors.Is(err, symbolize.ErrFault) && warm < len(addrs) {
					t.Errorf("warm %d: Symbolize #%d after truncation: %v, want ErrFault", warm, i, err)
				}
			}
			if round == 0 {
				used = symbolize.SlabBytes(s)
			} else if got := symbolize.SlabBytes(s); got != used {
				t.Errorf("warm %d: asking the same addresses again took the slab from %d to %d bytes, want no growth", warm, used, got)
			}
		}
		s.Close()
	}
}

// TestNamesBudget: a small file whose many units each name one long
// string (so that each unit would copy it) is stopped by the names budget:
// the first units answer, the rest fail with an error naming DW_AT_name,
// instead of the library allocating units × the string. Each unit is
// asked twice: the first address in a unit is answered by a scan, which
// keeps no copy; the second builds the unit's index.
func TestNamesBudget(t *testing.T) {
	gcc := tooltest.Require(t, "gcc")
	const units, strLen = 400, 100000 // each unit's subprogram is named by the same 100 KB string
	var s strings.Builder
	fmt.Fprintf(&s, "\t.text\n\t.globl main\n\t.type main,@function\nmain:\n\tret\n\t.size main,1\n\t.p2align 4\nblob:\n\t.fill %d,1,0x90\n", units*16)
	// Abbrev 1: compile unit with low_pc/high_pc; 2: subprogram with
	// name (strp), low_pc, high_pc (data4).
	s.WriteString("\t.section .debug_abbrev,\"\",@progbits\n" +
		"\t.uleb128 1\n\t.uleb128 0x11\n\t.byte 1\n\t.uleb128 0x11\n\t.uleb128 0x01\n\t.uleb128 0x12\n\t.uleb128 0x06\n\t.byte 0,0\n" +
		"\t.uleb128 2\n\t.uleb128 0x2e\n\t.byte 0\n\t.uleb128 0x03\n\t.uleb128 0x0e\n\t.uleb128 0x11\n\t.uleb128 0x01\n\t.uleb128 0x12\n\t.uleb128 0x06\n\t.byte 0,0\n\t.byte 0\n" +
		"\t.section .debug_info,\"\",@progbits\n")
	for u := range units {
		fmt.Fprintf(&s, "\t.long .Le%d - .Ls%d\n.Ls%d:\n\t.value 4\n\t.long 0\n\t.byte 8\n\t.uleb128 1\n\t.quad blob+%d\n\t.long 16\n"+
			"\t.uleb128 2\n\t.long 0\n\t.quad blob+%d\n\t.long 16\n\t.byte 0\n.Le%d:\n", u, u, u, u*16, u*16, u)
	}
	fmt.Fprintf(&s, "\t.section .debug_str,\"MS\",@progbits,1\n\t.fill %d,1,0x41\n\t.byte 0\n", strLen)
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "many.s"), filepath.Join(dir, "many")
	if err := os.WriteFile(src, []byte(s.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if msg, err := exec.Command(gcc, "-nostdlib", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, msg)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	blob := uint64(0)
	syms, _ := f.Symbols()
	for _, sy := range syms {
		if sy.Name == "blob" {
			blob = sy.Value
		}
	}
	f.Close()
	sym, err := symbolize.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer sym.Close()
	answered, failed := 0, 0
	for u := range units {
		if frames, err := sym.Symbolize(blob+uint64(u)*16+3, nil); err != nil || len(frames) != 1 {
			t.Fatalf("unit %d, first address (scan): %v, %d frames %s", u, err, len(frames), fmtFrames(frames))
		}
		frames, err := sym.Symbolize(blob+uint64(u)*16+4, nil)
		switch {
		case err == nil && len(frames) == 1: // named by the symbol table, as llvm-symbolizer does
			answered++
		case err != nil && strings.Contains(err.Error(), "DW_AT_name"):
			failed++
		default:
			t.Fatalf("unit %d at %#x: %v, %d frames %s", u, blob+uint64(u)*16+4, err, len(frames), fmtFrames(frames))
		}
	}
	// The budget is 16 times the sections (about 1.7 MB here) plus 1 MiB:
	// about 37 units of 100 KB.
	if answered < 10 || failed == 0 || answered+failed != units {
		t.Errorf("%d units answered, %d failed: want the first ones answered and the rest failed", answered, failed)
	}
}
