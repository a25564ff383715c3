package symbolize_test

import (
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/internal/tooltest"
	"github.com/elfimage/elfimage/symbolize"
)

// paritySource is the C program of the parity classes: pick and tri are
// kept out of line, sq is inlined at -O2, unused1 and unused2 are
// discarded by -ffunction-sections -Wl,--gc-sections (their line rows and
// ranges are left at the linker's tombstone); big's constants make Arm
// literal pools (mapping symbols $d.N and $a.N inside and between
// functions), sw a jump table.
const paritySource = `static int sq(int x) { return x * x; }
__attribute__((noinline)) int pick(int a, int b) { return a > b ? sq(a) : b; }
__attribute__((noinline)) int tri(int n) { int s = 0; for (int i = 0; i < n; i++) s += pick(i, n - i); return s; }
int unused1(int a) { return a * 7 + tri(a); }
int unused2(int a) { for (int i = 0; i < a; i++) a ^= i * 3; return a; }
__attribute__((noinline)) int big(int x) { return x * 123456789 + 987654321; }
__attribute__((noinline)) int sw(int x) {
	switch (x) { case 0: return 11; case 1: return big(x); case 2: return 33; case 3: return 44; case 4: return 57; case 5: return 3; default: return -1; }
}
int main(int argc, char **argv) { return tri(argc) + pick(argc, 3) + sw(argc); }
`

// parityInput is one file of a class: the class is what the file
// exercises (machine, class and byte order, producer, options).
type parityInput struct {
	class, path string
	// ref, when set, is the file llvm-symbolizer reads in path's place:
	// the same file with its debug sections decompressed, for a file
	// compressed with zstd, which llvm-symbolizer 14 cannot read.
	ref string
}

// parityInputs builds the parity program for every class the machine can
// build: gcc and clang x86-64 with GNU ld and lld, the AArch64 cross gcc,
// clang for 32- and 64-bit machines of both byte orders linked by lld
// (no C library: -nostdlib, entry main), each at -O0 and -O2 with
// -ffunction-sections -Wl,--gc-sections; and Go's debug/elf and
// debug/dwarf test executables.
func parityInputs(t *testing.T) []parityInput {
	dir := t.TempDir()
	src := filepath.Join(dir, "p.c")
	if err := os.WriteFile(src, []byte(paritySource), 0o644); err != nil {
		t.Fatal(err)
	}
	var in []parityInput
	build := func(class, cc string, flags ...string) {
		out := filepath.Join(dir, class)
		args := append(append([]string{"-g", "-ffunction-sections", "-Wl,--gc-sections"}, flags...), "-o", out, src)
		if msg, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", cc, args, err, msg)
		}
		in = append(in, parityInput{class: class, path: out})
	}
	gcc := tooltest.Require(t, "gcc")
	clang := tooltest.Require(t, "clang-14", "clang")
	tooltest.Require(t, "ld.lld")
	cross := tooltest.Require(t, "aarch64-linux-gnu-gcc")
	for _, o := range []string{"-O0", "-O2"} {
		build("gcc-x86-64"+o, gcc, o)
		build("gcc-x86-64-dwarf4"+o, gcc, o, "-gdwarf-4") // .debug_ranges: GNU ld's tombstone is 1 there
		build("clang-x86-64"+o, clang, o)
		build("clang-lld-x86-64"+o, clang, o, "-fuse-ld=lld")
		build("gcc-aarch64"+o, cross, o, "-nostdlib", "-Wl,-e,main")
		for _, target := range []string{
			"aarch64-linux-gnu", "armv7-linux-gnueabihf", "armv5te-linux-gnueabi", "thumbv7-linux-gnueabihf", "i386-linux-gnu",
			"riscv64-linux-gnu", "riscv32-linux-gnu",
			"powerpc64-linux-gnu", "powerpc-linux-gnu",
			"mips-linux-gnu", "mips64-linux-gnuabi64", "sparcv9-linux-gnu",
		} {
			flags := []string{"--target=" + target, "-fintegrated-as", "-fuse-ld=lld", "-nostdlib", "-Wl,-e,main", o}
			if target == "powerpc64-linux-gnu" {
				// ELFv1 function descriptors (.opd) filled by the
				// static linker: not position-independent.
				flags = append(flags, "-no-pie")
			}
			build("clang-"+target+o, clang, flags...)
		}
		// lld's other tombstones: -1 (DWARF 6's proposal, newer
		// linkers' default) and -2 in 32 bits.
		build("clang-lld-x86-64-tombstone-1"+o, clang, o, "-fuse-ld=lld", "-Wl,-z,dead-reloc-in-nonalloc=.debug_*=0xffffffffffffffff")
		build("clang-i386-linux-gnu-tombstone-2"+o, clang, "--target=i386-linux-gnu", "-fintegrated-as", "-fuse-ld=lld", "-nostdlib", "-Wl,-e,main", o,
			"-Wl,-z,dead-reloc-in-nonalloc=.debug_*=0xfffffffe")
	}
	root := goRoot(t)
	for _, p := range []string{
		"src/debug/elf/testdata/gcc-amd64-linux-exec",
		"src/debug/elf/testdata/gcc-386-freebsd-exec",
		"src/debug/elf/testdata/gcc-riscv64-linux-exec",
		"src/debug/elf/testdata/libtiffxx.so_",
		"src/debug/elf/testdata/go-relocation-test-gcc930-ranges-no-rela-x86-64",
		"src/debug/elf/testdata/go-relocation-test-gcc930-ranges-with-rela-x86-64",
		"src/debug/dwarf/testdata/line-gcc.elf",
		"src/debug/dwarf/testdata/line-clang.elf",
		"src/debug/dwarf/testdata/line-gcc-dwarf5.elf",
		"src/debug/dwarf/testdata/line-clang-dwarf5.elf",
		"src/debug/dwarf/testdata/line-gcc-zstd.elf",
		"src/debug/dwarf/testdata/cycle.elf",
		"src/debug/dwarf/testdata/typedef.elf",
		"src/debug/dwarf/testdata/typedef.elf4",
		"src/debug/dwarf/testdata/ranges.elf",
		"src/debug/dwarf/testdata/rnglistx.elf",
		"src/debug/dwarf/testdata/split.elf",
		"src/debug/dwarf/testdata/issue57046-clang.elf5",
	} {
		p = filepath.Join(root, p)
		if _, err := os.Stat(p); err != nil {
			t.Logf("%s: %v (Go's test data is not installed)", p, err)
			continue
		}
		pi := parityInput{class: "go-testdata-" + filepath.Base(p), path: p}
		if strings.Contains(p, "zstd") {
			pi.ref = filepath.Join(dir, "decompressed-"+filepath.Base(p))
			objcopy := tooltest.Require(t, "objcopy")
			if msg, err := exec.Command(objcopy, "--decompress-debug-sections", p, pi.ref).CombinedOutput(); err != nil {
				t.Fatalf("objcopy --decompress-debug-sections %s: %v\n%s", p, err, msg)
			}
		}
		in = append(in, pi)
	}
	return in
}

// parityAddrs returns every address of every SHF_EXECINSTR section
// (SHT_NOBITS ones of a separate debug file included), or for sections
// larger than limit bytes in all, about limit addresses spread evenly over
// them.
func parityAddrs(t *testing.T, path string, limit int) []uint64 {
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var total uint64
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_EXECINSTR != 0 {
			total += s.Size
		}
	}
	step := max(1, total/uint64(limit))
	var out []uint64
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_EXECINSTR == 0 {
			continue
		}
		for a := s.Addr; a < s.Addr+s.Size; a += step {
			out = append(out, a)
		}
	}
	return out
}

// TestParity symbolizes every code address (or a dense sample) of each
// class with us and with llvm-symbolizer --inlining and asserts that at
// least 99.5% of each class's addresses agree in every frame (function,
// file, line, column, inlined chain) with the reference, and that there
// is no other difference: the reference is llvm-symbolizer but where it
// is known wrong (parityKnownWrong), where it is binutils addr2line
// (function and line).
func TestParity(t *testing.T) {
	tooltest.Require(t, "llvm-symbolizer")
	fromSymbol := 0 // frames whose file is a symbol's STT_FILE (crtstuff.c)
	defer func() {
		if fromSymbol == 0 {
			t.Errorf("no frame had its file from an STT_FILE symbol")
		}
	}()
	for _, in := range parityInputs(t) {
		t.Run(in.class, func(t *testing.T) {
			addrs := parityAddrs(t, in.path, 20000)
			ref := in.path
			if in.ref != "" {
				ref = in.ref
			}
			want := llvmSymbolizeObject(t, ref, addrs)
			s, err := symbolize.Open(in.path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			type diff struct {
				i         int
				got       []symbolize.Frame
				err       error
				byA2L, ok bool
			}
			var diffs []diff
			for i, a := range addrs {
				got, err := s.Symbolize(a, nil)
				if err != nil {
					got = []symbolize.Frame{{}}
				}
				if n := len(got); got[n-1].FileFromSymbol {
					fromSymbol++
					if got[n-1].File == "" || got[n-1].Line != 0 || n > 1 {
						t.Errorf("%#x: a file from STT_FILE on%s", a, fmtFrames(got))
					}
				}
				if !slices.Equal(asLLVM(got), want[i]) {
					diffs = append(diffs, diff{i: i, got: got, err: err})
				}
			}
			// Differences where llvm-symbolizer is known wrong are
			// explained when binutils addr2line agrees with us.
			var ask []uint64
			for k := range diffs {
				d := &diffs[k]
				if parityKnownWrong(in, d.got, want[d.i]) {
					d.byA2L = true
					ask = append(ask, addrs[d.i])
				}
			}
			if len(ask) > 0 {
				a2l := addr2lineObject(t, tooltest.Require(t, "addr2line"), in.path, "", ask)
				j := 0
				for k := range diffs {
					if d := &diffs[k]; d.byA2L {
						d.ok = sameFunction(d.got, a2l[j]) && a2l[j][0].Line == d.got[0].Line
						j++
					}
				}
			}
			explained, bad := 0, 0
			for _, d := range diffs {
				if d.ok {
					explained++
					continue
				}
				if bad++; bad <= 10 {
					t.Errorf("%#x: ours (err %v):%s\n\tllvm-symbolizer:%s", addrs[d.i], d.err, fmtFrames(d.got), fmtFrames(want[d.i]))
				}
			}
			same := len(addrs) - len(diffs)
			share := float64(same+explained) / float64(len(addrs))
			t.Logf("%s: %d addresses, %d agree with llvm-symbolizer, %d more with addr2line where llvm-symbolizer is wrong (%.2f%% in all)", in.class, len(addrs), same, explained, 100*share)
			if bad > 0 {
				t.Errorf("%d differences unexplained", bad)
			}
			if share < 0.995 {
				t.Errorf("%.2f%% agree, want at least 99.5%%", 100*share)
			}
		})
	}
}

// parityKnownWrong reports whether our frames got may differ from
// llvm-symbolizer's want at an address because llvm-symbolizer is wrong
// there; the test then holds us to binutils addr2line. The one case:
// llvm-symbolizer 14 leaves out RISC-V's unnamed labels but not its .L
// labels (LLVM's getSymbolFlags marks only the unnamed ones
// SF_FormatSpecific), so it names basic blocks of functions ending in a
// jump (sw's ".LBB5_9") where DWARF, the function's own symbol and
// addr2line name the function.
func parityKnownWrong(in parityInput, got, want []symbolize.Frame) bool {
	if len(got) != len(want) || len(got) == 0 || !strings.HasPrefix(want[len(want)-1].Function, ".L") || !strings.Contains(in.class, "riscv") {
		return false
	}
	g, w := slices.Clone(got), slices.Clone(want)
	g[len(g)-1].Function, w[len(w)-1].Function = "", ""
	return slices.Equal(g, w)
}

// TestTombstones: the line rows and ranges of the functions
// -Wl,--gc-sections discarded (unused1, unused2) sit at the linker's
// tombstone (0 for GNU ld and lld 14; -1 and -2 when lld is asked), so
// that addresses from 0 up to the file's lowest code address, and at the
// tombstones, are covered by dead code. binutils addr2line answers "??"
// there and so must we; llvm-symbolizer 14 names the discarded function
// (which this test checks, so that the inputs do have such rows).
func TestTombstones(t *testing.T) {
	a2l := tooltest.Require(t, "addr2line")
	dead := 0
	for _, in := range parityInputs(t) {
		if strings.HasPrefix(in.class, "go-testdata-") {
			continue
		}
		t.Run(in.class, func(t *testing.T) {
			f, err := elf.Open(in.path)
			if err != nil {
				t.Fatal(err)
			}
			low := ^uint64(0)
			for _, s := range f.Sections {
				if s.Flags&elf.SHF_EXECINSTR != 0 && s.Size > 0 {
					low = min(low, s.Addr)
				}
			}
			top := ^uint64(0)
			if f.Class == elf.ELFCLASS32 {
				top = 1<<32 - 1
			}
			f.Close()
			var addrs []uint64
			for a := uint64(0); a < min(low, 0x80); a++ {
				addrs = append(addrs, a)
			}
			addrs = append(addrs, top, top-1, top-2)
			ref := addr2lineObject(t, a2l, in.path, "", addrs)
			llvm := llvmSymbolizeObject(t, in.path, addrs)
			s, err := symbolize.Open(in.path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for i, a := range addrs {
				got, err := s.Symbolize(a, nil)
				if err != nil && !errors.Is(err, symbolize.ErrNoInfo) {
					t.Fatalf("%#x: %v", a, err)
				}
				if len(got) == 0 {
					got = []symbolize.Frame{{}}
				}
				if a >= top-2 {
					// No DWARF answers at a tombstone; past every symbol,
					// llvm-symbolizer takes the last symbol of size 0
					// to reach the address (addr2line does not),
					// which the library follows.
					// (llvm-symbolizer answers the line of the
					// discarded code at -2 in 32 bits.)
					if got[0].Line != 0 || got[len(got)-1].Function != llvm[i][len(llvm[i])-1].Function {
						t.Errorf("%#x: ours (err %v):%s\n\tllvm-symbolizer:%s", a, err, fmtFrames(got), fmtFrames(llvm[i]))
					}
				} else if got[len(got)-1].Function != ref[i][len(ref[i])-1].Function || got[0].Line != ref[i][0].Line {
					t.Errorf("%#x: ours (err %v):%s\n\taddr2line:%s", a, err, fmtFrames(got), fmtFrames(ref[i]))
				}
				if fn := llvm[i]; len(fn) > 0 && strings.HasPrefix(fn[len(fn)-1].Function, "unused") {
					dead++
				}
			}
		})
	}
	if dead == 0 {
		t.Errorf("llvm-symbolizer named no discarded function: the inputs have no tombstoned rows")
	}
	t.Logf("llvm-symbolizer named a discarded function at %d addresses", dead)
}

// asLLVM clears what llvm-symbolizer's answers cannot carry
// (FileFromSymbol), for comparing ours with them; fs is modified.
func asLLVM(fs []symbolize.Frame) []symbolize.Frame {
	for i := range fs {
		fs[i].FileFromSymbol = false
	}
	return fs
}
