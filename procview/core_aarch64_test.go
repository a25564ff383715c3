package procview_test

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/formaterr"
	"github.com/elfimage/elfimage/internal/gdbtest"
	"github.com/elfimage/elfimage/internal/qemutest"
	"github.com/elfimage/elfimage/internal/tooltest"
	"github.com/elfimage/elfimage/procview"
	"github.com/elfimage/elfimage/unwind"
)

func sampleRegsAArch64(base uint64) procview.UserPtRegs {
	var r procview.UserPtRegs
	for i := range r.Regs {
		r.Regs[i] = base + uint64(i)*0x11
	}
	r.Sp, r.Pc, r.Pstate = base+0x7000, base+0x400, 0x60000000
	return r
}

// sampleCoreAArch64 is an AArch64 core as qemu-user writes one: threads,
// NT_PRPSINFO and NT_AUXV, no NT_FILE.
func sampleCoreAArch64() *testCore {
	return &testCore{
		Machine: elf.EM_AARCH64,
		PID:     77, UID: 1000, Command: "crash", Args: "./crash segv",
		Threads: []procview.CoreThread{
			{TID: 77, Signal: 11, AArch64Regs: sampleRegsAArch64(0x5500000000)},
			{TID: 78, AArch64Regs: sampleRegsAArch64(0x5600000000)},
		},
		Auxv: []procview.AuxEntry{{Type: 3, Value: 0x400040}, {Type: 6, Value: 4096}, {Type: 9, Value: 0x400600}},
		Segs: []testSeg{
			{Addr: 0x400000, Size: 0x1000, Flags: elf.PF_R | elf.PF_X},
			{Addr: 0x5500000000, Data: pattern(0x1000, 7), Flags: elf.PF_R | elf.PF_W},
		},
	}
}

// TestCoreAArch64 decodes an AArch64 core written by the tests' encoder
// from the kernel's layout (struct elf_prstatus with user_pt_regs at byte
// 112, 392 bytes): the threads' registers, their DWARF numbering, and
// errors for an x86-64-sized NT_PRSTATUS.
func TestCoreAArch64(t *testing.T) {
	tc := sampleCoreAArch64()
	b := writeCore(tc)
	c, err := procview.NewCore(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if c.Arch != arch.AArch64 || c.PID != 77 || c.UID != 1000 || c.Command != "crash" || c.Args != "./crash segv" || len(c.Files) != 0 {
		t.Fatalf("core: arch %v pid %d uid %d %q %q files %v", c.Arch.Name, c.PID, c.UID, c.Command, c.Args, c.Files)
	}
	if len(c.Threads) != 2 {
		t.Fatalf("%d threads", len(c.Threads))
	}
	for i, th := range c.Threads {
		want := tc.Threads[i]
		if th.TID != want.TID || th.Signal != want.Signal || th.AArch64Regs != want.AArch64Regs || th.Regs != (procview.UserRegs{}) {
			t.Fatalf("thread %d: %+v, want %+v", i, th, want)
		}
		if th.Arch() != arch.AArch64 || th.PC() != want.AArch64Regs.Pc {
			t.Errorf("thread %d: arch %s pc %#x", i, th.Arch().Name, th.PC())
		}
		f := th.Frame()
		if f.PC != want.AArch64Regs.Pc || f.SP != want.AArch64Regs.Sp || !f.First {
			t.Errorf("thread %d frame: pc %#x sp %#x first %v", i, f.PC, f.SP, f.First)
		}
		// DWARF for the Arm 64-bit Architecture 4.1: x0-x30 are 0-30, sp
		// 31, pc 32.
		for r := range 31 {
			if v, ok := f.Regs.Get(arch.Reg(r)); !ok || v != want.AArch64Regs.Regs[r] {
				t.Errorf("thread %d: DWARF register %d = %#x, %v; want x%d = %#x", i, r, v, ok, r, want.AArch64Regs.Regs[r])
			}
		}
		if v, _ := f.Regs.Get(arch.AArch64_SP); v != want.AArch64Regs.Sp {
			t.Errorf("thread %d: sp %#x", i, v)
		}
		if v, _ := f.Regs.Get(arch.AArch64_PC); v != want.AArch64Regs.Pc {
			t.Errorf("thread %d: pc column %#x", i, v)
		}
	}
	// An x86-64 NT_PRSTATUS (336 bytes) in an AArch64 core is malformed.
	bad := *tc
	bad.Machine = elf.EM_X86_64
	xb := writeCore(&bad)
	copy(xb[18:20], []byte{byte(elf.EM_AARCH64), 0})
	_, err = procview.NewCore(bytes.NewReader(xb), int64(len(xb)))
	var fe *formaterr.Error
	if !errors.As(err, &fe) || fe.Source != "NT_PRSTATUS" || fe.Field != "n_descsz" || !strings.Contains(err.Error(), "392") {
		t.Errorf("x86-64 NT_PRSTATUS in an AArch64 core: %v", err)
	}
	// Other machines are refused, naming e_machine.
	copy(xb[18:20], []byte{byte(elf.EM_RISCV), 0})
	if _, err := procview.NewCore(bytes.NewReader(xb), int64(len(xb))); !errors.As(err, &fe) || fe.Field != "e_machine" {
		t.Errorf("RISC-V core: %v", err)
	}
}

// crashC crashes in deref (SIGSEGV at a bad pointer) three calls of walk
// deep, or aborts (SIGABRT through libc) with the argument "abort".
const crashC = `#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct point { long x, y; };

__attribute__((noinline)) int deref(int *p, long depth, struct point pt) {
	printf("deref %ld %ld\n", depth, pt.x);
	return *p + (int)depth;
}

__attribute__((noinline)) int walk(long depth, const char *name) {
	struct point pt = { depth * 3, depth * 5 };
	if (depth == 0)
		return deref((int *)(long)strlen(name) - 1 + 17, depth, pt);
	return walk(depth - 1, name) + 1;
}

int main(int argc, char **argv) {
	if (argc > 1 && strcmp(argv[1], "abort") == 0)
		abort();
	return walk(3, argv[0]);
}
`

// qemuSysroot is where Debian's cross toolchain and qemu-user's -L find
// the AArch64 C library.
const qemuSysroot = "/usr/aarch64-linux-gnu"

// qemuCore runs the AArch64 program exe (args) under qemu-aarch64 with
// core dumps allowed, in dir, and returns the core qemu wrote for the
// guest (qemu_PROG_DATE_PID.core). A directory named "core" keeps the host
// kernel from dumping qemu itself there (core_pattern "core").
func qemuCore(t *testing.T, qemu, dir, exe string, args ...string) string {
	t.Helper()
	os.Mkdir(filepath.Join(dir, "core"), 0o755)
	old, _ := filepath.Glob(filepath.Join(dir, "qemu_*.core"))
	for _, o := range old {
		os.Remove(o)
	}
	script := `ulimit -c unlimited && exec "$@"`
	cmd := exec.Command("sh", append([]string{"-c", script, "sh", qemu, "-L", qemuSysroot, exe}, args...)...)
	cmd.Dir = dir
	out, err := tooltest.RunTool(t, cmd, 2*time.Minute)
	if err == nil {
		t.Fatalf("%s %v did not crash:\n%s", exe, args, out)
	}
	cores, _ := filepath.Glob(filepath.Join(dir, "qemu_*.core"))
	if len(cores) != 1 {
		tooltest.Skip(t, "qemu-aarch64 wrote %d cores for %s (ulimit -c refused?): %v\n%s", len(cores), exe, err, out)
	}
	return cores[0]
}

// gdbCoreAArch64 runs gdb-multiarch on exe and core with the sysroot and
// returns its registers (info registers: x0-x30, sp, pc, cpsr) and
// backtrace frames.
func gdbCoreAArch64(t *testing.T, gdb, exe, core string) (map[string]uint64, []gdbBTFrame) {
	t.Helper()
	out, err := tooltest.RunTool(t, exec.Command(gdb, "-nx", "-batch", "-iex", "set sysroot "+qemuSysroot,
		"-ex", "echo @@regs\\n", "-ex", "info registers", "-ex", "echo @@bt\\n", "-ex", "bt", exe, core), 3*time.Minute)
	if err != nil {
		t.Fatalf("gdb-multiarch: %v\n%s", err, out)
	}
	text := out
	regsText, btText, ok := strings.Cut(text, "@@bt\n")
	if !ok {
		t.Fatalf("gdb-multiarch printed no backtrace:\n%s", text)
	}
	regs := map[string]uint64{}
	for _, m := range gdbRegRE.FindAllStringSubmatch(regsText, -1) {
		v, _ := strconv.ParseUint(m[2], 16, 64)
		regs[m[1]] = v
	}
	var frames []gdbBTFrame
	for _, line := range strings.Split(btText, "\n") {
		m := gdbBTRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		f := gdbBTFrame{fn: m[3], args: m[4], file: m[6]}
		if m[2] != "" {
			f.pc, _ = strconv.ParseUint(m[2], 16, 64)
		}
		if m[7] != "" {
			f.line, _ = strconv.Atoi(m[7])
		}
		frames = append(frames, f)
	}
	if len(regs) < 34 || len(frames) == 0 {
		t.Fatalf("gdb-multiarch: %d registers, %d frames:\n%s", len(regs), len(frames), text)
	}
	return regs, frames
}

type gdbBTFrame struct {
	pc       uint64
	fn, args string
	file     string
	line     int
}

var (
	gdbRegRE = regexp.MustCompile(`(?m)^(x\d+|sp|pc|cpsr)\s+0x([0-9a-f]+)`)
	gdbBTRE  = regexp.MustCompile(`^#(\d+)\s+(?:0x([0-9a-f]+) in )?(\S+) \((.*?)\)( at (\S+):(\d+)| from \S+)?$`)
)

// TestCoreAArch64QEMU reads real AArch64 cores, which qemu-aarch64 writes
// for a C program built with aarch64-linux-gnu-gcc -g that dies of
// SIGSEGV in its own code and of SIGABRT in libc, on any host: the
// registers and the frames (pcs, functions, lines, arguments) must be
// those gdb-multiarch reads from the same core, through the program and
// the C library of the sysroot found through the dynamic linker's list
// (qemu's cores have no NT_FILE). The PIE build, which gdb-multiarch 13
// does not relocate in these cores (its frames are "??"), must show the
// same functions.
func TestCoreAArch64QEMU(t *testing.T) {
	qemu := tooltest.Require(t, "qemu-aarch64")
	gcc := tooltest.Require(t, "aarch64-linux-gnu-gcc")
	gdb := tooltest.Require(t, "gdb-multiarch")
	if _, err := os.Stat(filepath.Join(qemuSysroot, "lib/libc.so.6")); err != nil {
		tooltest.Skip(t, "no AArch64 C library under %s: %v", qemuSysroot, err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "crash.c")
	if err := os.WriteFile(src, []byte(crashC), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, pie := range []bool{false, true} {
		exe := filepath.Join(dir, "crash")
		flag := "-no-pie"
		if pie {
			exe, flag = filepath.Join(dir, "crashpie"), "-pie"
		}
		if out, err := exec.Command(gcc, "-g", "-O1", flag, "-o", exe, src).CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		for _, mode := range []string{"segv", "abort"} {
			t.Run(fmt.Sprintf("%s/pie=%v", mode, pie), func(t *testing.T) {
				core := qemuCore(t, qemu, dir, exe, mode)
				c, err := procview.OpenCore(core)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				wantSig := 11
				if mode == "abort" {
					wantSig = 6
				}
				if c.Arch != arch.AArch64 || len(c.Threads) != 1 || c.Threads[0].Signal != wantSig || c.Command != filepath.Base(exe)[:min(15, len(filepath.Base(exe)))] {
					t.Fatalf("core: %s, %d threads, signal %d, command %q", c.Arch.Name, len(c.Threads), c.Threads[0].Signal, c.Command)
				}
				if len(c.Files) != 0 {
					t.Logf("this qemu writes NT_FILE (%d mappings)", len(c.Files))
				}
				threads, view, err := procview.CoreStacks(c, &procview.CoreOptions{Sysroot: qemuSysroot, Options: procview.Options{NoPerfMap: true}})
				if err != nil {
					t.Fatal(err)
				}
				defer view.Close()
				for _, w := range view.Warnings() {
					t.Errorf("warning: %v", w)
				}
				th := threads[0]
				var names []string
				for _, f := range th.Frames {
					n := "??"
					if len(f.Funcs) > 0 {
						n = f.Funcs[0].Function
					}
					names = append(names, n)
				}
				t.Logf("frames: %v (%v)", names, th.Err)
				if pie {
					// gdb-multiarch cannot be the oracle here: check the
					// chain from the program itself.
					want := []string{"deref", "walk", "walk", "walk", "walk", "main"}
					if mode == "abort" {
						want = []string{"??", "raise", "abort", "main"}
					}
					if len(names) < len(want) || !slicesEqual(names[:len(want)], want) {
						t.Errorf("frames %v, want %v first", names, want)
					}
					return
				}
				regs, gframes := gdbCoreAArch64(t, gdb, exe, core)
				r := c.Threads[0].AArch64Regs
				for i, v := range r.Regs {
					if g := regs[fmt.Sprintf("x%d", i)]; g != v {
						t.Errorf("x%d = %#x, gdb-multiarch %#x", i, v, g)
					}
				}
				if regs["sp"] != r.Sp || regs["pc"] != r.Pc || regs["cpsr"] != r.Pstate {
					t.Errorf("sp %#x pc %#x pstate %#x, gdb-multiarch %#x %#x %#x", r.Sp, r.Pc, r.Pstate, regs["sp"], regs["pc"], regs["cpsr"])
				}
				if len(th.Frames) < len(gframes) {
					t.Fatalf("%d frames, gdb-multiarch %d: %v", len(th.Frames), len(gframes), gframes)
				}
				for i, g := range gframes {
					f := th.Frames[i]
					pc := g.pc
					if pc == 0 && i == 0 {
						pc = r.Pc // gdb prints no pc at the start of a line
					}
					name := "??"
					if len(f.Funcs) > 0 {
						name = f.Funcs[0].Function
					}
					if f.PC != pc || name != g.fn {
						t.Errorf("frame %d: %#x %s, gdb-multiarch %#x %s", i, f.PC, name, pc, g.fn)
						continue
					}
					if g.line != 0 && (int(f.Funcs[0].Line) != g.line || filepath.Base(f.Funcs[0].File) != filepath.Base(g.file)) {
						t.Errorf("frame %d (%s): %s:%d, gdb-multiarch %s:%d", i, name, f.Funcs[0].File, f.Funcs[0].Line, g.file, g.line)
					}
					// Arguments as gdb prints them, values on entry
					// (through the caller's call site) included.
					for _, a := range strings.Split(g.args, ", ") {
						n, val, ok := strings.Cut(a, "=")
						if !ok || strings.Contains(n, "@") || val == "..." {
							continue
						}
						found := false
						for _, our := range f.Args[0] {
							if our.Name == n {
								found = true
								if s := our.String(); s != a && !(strings.HasPrefix(s, a+", ") && strings.Contains(g.args, s)) {
									t.Errorf("frame %d (%s): %s, gdb-multiarch %s", i, name, s, a)
								}
							}
						}
						if !found {
							t.Errorf("frame %d (%s): no argument %s (gdb-multiarch %s)", i, name, n, val)
						}
					}
				}
			})
		}
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestCoreStacksAArch64Scheme: the core qemu-aarch64 writes for the arm64
// elfimage CLI running spin.scm's image, compiled for AArch64 and linked
// in memory (-jit -gdb), when GOTRACEBACK=crash makes it abort on
// SIGABRT: read on this host, the spinning thread's walk crosses Go's
// signal handler (runtime.sigtramp, whose CFI ends the walk) and qemu's
// signal return trampoline (no CFI: the registers come from the saved
// sigcontext) into spin, with its argument, %start, the library's entry
// frame and the Go frames of native.Call down to main.main. Every frame
// gdb-multiarch shows for the same core (it stops at runtime.sigtramp)
// has our pc and function.
func TestCoreStacksAArch64Scheme(t *testing.T) {
	qemu := tooltest.Require(t, "qemu-aarch64")
	gdb := tooltest.Require(t, "gdb-multiarch")
	work := t.TempDir()
	cli := qemutest.BuildArm64(t, work, "../cmd/elfimage", "elfimage")
	if err := os.WriteFile(filepath.Join(work, "spin.scm"), []byte(spinProg), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(work, "core"), 0o755) // no core of qemu itself
	var c *procview.Core
	var threads []procview.Thread
	var view *procview.View
	var core string
	for try := 0; ; try++ {
		old, _ := filepath.Glob(filepath.Join(work, "qemu_*.core"))
		for _, o := range old {
			os.Remove(o)
		}
		cmd := exec.Command("sh", "-c", `ulimit -c unlimited && exec "$@"`, "sh", qemu, cli, "run", "-jit", "-gdb", "spin.scm")
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "GOTRACEBACK=crash", "GOMAXPROCS=1")
		tooltest.StartReady(t, cmd)
		if err := cmd.Process.Signal(syscall.SIGABRT); err != nil {
			t.Fatal(err)
		}
		tooltest.Wait(t, cmd, 0)
		cores, _ := filepath.Glob(filepath.Join(work, "qemu_*.core"))
		if len(cores) != 1 {
			tooltest.Skip(t, "qemu-aarch64 wrote %d cores (ulimit -c refused?)", len(cores))
		}
		core = cores[0]
		var err error
		if c, err = procview.OpenCore(core); err != nil {
			t.Fatal(err)
		}
		threads, view, err = procview.CoreStacks(c, &procview.CoreOptions{Exe: cli, Options: procview.Options{NoPerfMap: true}})
		if err != nil {
			t.Fatal(err)
		}
		if threadWith(threads, "spin") != nil {
			break
		}
		view.Close()
		c.Close()
		if try == 3 {
			t.Fatalf("no thread in spin:\n%s", dumpThreads(threads))
		}
	}
	defer c.Close()
	defer view.Close()
	if c.Arch != arch.AArch64 || c.Threads[0].Signal != int(syscall.SIGABRT) || c.Command != "elfimage" {
		t.Errorf("core: %s, signal %d, command %q", c.Arch.Name, c.Threads[0].Signal, c.Command)
	}
	th := threadWith(threads, "spin")
	var names []string
	for i, f := range th.Frames {
		n := "??"
		if len(f.Funcs) > 0 {
			n = f.Funcs[len(f.Funcs)-1].Function
		}
		if n == "spin" && (len(f.Args) == 0 || len(f.Args[0]) != 1 || f.Args[0][0].Name != "n" || f.Args[0][0].Err != nil) {
			t.Errorf("frame %d, spin: arguments %+v", i, f.Args)
		}
		names = append(names, n)
	}
	seq := strings.Join(names, " ")
	t.Logf("spinning thread %d: %s", th.TID, seq)
	if want := "runtime.sigtramp.abi0 ?? spin %start elfimage.entry github.com/elfimage/elfimage/native.trampoline.abi0 github.com/elfimage/elfimage/native.call"; !strings.Contains(seq, want) || !strings.HasSuffix(seq, "main.main runtime.main runtime.goexit.abi0") && !strings.Contains(seq, " main.main ") {
		t.Errorf("spinning thread: %s\nwant it to contain %s ... main.main\n%v", seq, want, th.Err)
	}

	out, err := tooltest.RunTool(t, exec.Command(gdb, "-nx", "-batch", "-ex", "thread apply all bt", cli, core), 3*time.Minute)
	if err != nil {
		t.Fatalf("gdb-multiarch: %v\n%s", err, out)
	}
	compared := 0
	for tid, block := range gdbtest.Threads(out) {
		var ours *procview.Thread
		for i := range threads {
			if threads[i].TID == tid {
				ours = &threads[i]
			}
		}
		if ours == nil {
			t.Errorf("gdb-multiarch shows thread %d, we do not", tid)
			continue
		}
		// Source frames, innermost first, as gdb numbers them.
		type src struct {
			pc uint64
			fn string
		}
		var our []src
		for _, f := range ours.Frames {
			for _, fn := range f.Funcs {
				our = append(our, src{f.PC, strings.TrimSuffix(fn.Function, ".abi0")})
			}
		}
		i := 0
		for _, line := range strings.Split(block, "\n") {
			m := gdbBTRE.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			if i >= len(our) {
				t.Errorf("thread %d: gdb-multiarch has more frames: %s", tid, line)
				break
			}
			pc, _ := strconv.ParseUint(m[2], 16, 64)
			if m[3] != our[i].fn || m[2] != "" && pc != our[i].pc {
				t.Errorf("thread %d frame %d: %#x %s, gdb-multiarch %s", tid, i, our[i].pc, our[i].fn, line)
			}
			i++
			compared++
		}
	}
	t.Logf("%d frames compared with gdb-multiarch", compared)
	if compared < 10 {
		t.Errorf("only %d frames compared with gdb-multiarch:\n%s", compared, out)
	}
}

// linkMapCore is an AArch64 core whose memory at 0x10000 holds an
// executable's dynamic section (DT_DEBUG), the dynamic linker's r_debug
// and a link_map chain of the executable (no name) and libc; cyclic makes
// libc's l_next point back at the first entry.
func linkMapCore(cyclic bool) *testCore {
	le := binary.LittleEndian
	mem := make([]byte, 0x1000)
	put := func(off int, vs ...uint64) {
		for i, v := range vs {
			le.PutUint64(mem[off+8*i:], v)
		}
	}
	const base = 0x10000
	put(0, 1, 0x42, 21, base+0x100, 0, 0) // DT_NEEDED, DT_DEBUG, DT_NULL
	put(0x100, 1, base+0x200)             // r_version, r_map
	next := uint64(0)
	if cyclic {
		next = base + 0x200
	}
	put(0x200, 0, base+0x400, 0, base+0x300, 0)                          // the executable
	put(0x300, 0x5500000000, base+0x410, 0x5500020000, next, base+0x200) // libc
	copy(mem[0x410:], "/lib/libc.so.6\x00")
	tc := sampleCoreAArch64()
	tc.Segs = append(tc.Segs, testSeg{Addr: base, Data: mem, Flags: elf.PF_R | elf.PF_W})
	return tc
}

// TestCoreLinkMap reads the dynamic linker's list from a core written by
// the tests' encoder, and stops a cyclic one at MaxLinkMapEntries.
func TestCoreLinkMap(t *testing.T) {
	for _, cyclic := range []bool{false, true} {
		b := writeCore(linkMapCore(cyclic))
		c, err := procview.NewCore(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.LinkMap(0x10000, 0x30)
		if cyclic {
			if err == nil || !strings.Contains(err.Error(), "link_map entries") || len(got) != procview.MaxLinkMapEntries {
				t.Errorf("cyclic list: %d entries, %v", len(got), err)
			}
			continue
		}
		want := []procview.LinkMapEntry{{}, {Bias: 0x5500000000, Path: "/lib/libc.so.6"}}
		if err != nil || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("list %+v, %v; want %+v", got, err, want)
		}
		// No DT_DEBUG within the section's size: no list.
		if got, err := c.LinkMap(0x10000, 0x10); got != nil || err != nil {
			t.Errorf("without DT_DEBUG: %+v, %v", got, err)
		}
		// The dynamic section outside the core's memory: an error.
		if _, err := c.LinkMap(0x90000, 0x30); !errors.Is(err, unwind.ErrMemory) {
			t.Errorf("dynamic section not in the core: %v", err)
		}
	}
}
