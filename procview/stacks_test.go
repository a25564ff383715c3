package procview_test

import (
	"debug/dwarf"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/elfimage/elfimage/internal/gdbtest"
	"github.com/elfimage/elfimage/internal/tooltest"
	"github.com/elfimage/elfimage/procview"
	"github.com/elfimage/elfimage/unwind"
)

// spinProg prints "ready", then loops in spin (tail calls) until killed.
const spinProg = `(define (spin n)
  (if (= n 0)
      0
      (spin (- n 1))))
(define (main)
  (display "ready") (newline)
  (spin 100000000000))
`

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// fixture builds, once, the elfimage CLI (go build, so that its binary
// is a normal one) and spin.scm's image into a shared directory.
func fixture(t testing.TB) string {
	t.Helper()
	goTool := tooltest.Require(t, "go")
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "procview-test-")
		if buildErr != nil {
			return
		}
		out, err := exec.Command(goTool, "build", "-o", filepath.Join(buildDir, "elfimage"), "github.com/elfimage/elfimage/cmd/elfimage").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		if buildErr = os.WriteFile(filepath.Join(buildDir, "spin.scm"), []byte(spinProg), 0o644); buildErr != nil {
			return
		}
		cmd := exec.Command(filepath.Join(buildDir, "elfimage"), "build", "spin.scm")
		cmd.Dir = buildDir
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("elfimage build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// gdbFrame is one line of gdb's bt: its function ("<signal handler
// called>" for a signal frame, "??" when unknown) and whether it printed a
// pc (frames inlined into the previous line's function print none).
type gdbFrame struct {
	fn    string
	hasPC bool
}

var gdbFrameRE = regexp.MustCompile(`^#(\d+)\s+(0x[0-9a-f]+ in )?(.*)$`)

// gdbStacks runs gdb -p pid with `thread apply all bt` and returns each
// thread's frames by thread id (gdbThreads).
func gdbStacks(t *testing.T, gdb, dir string, pid int) map[int][]gdbFrame {
	t.Helper()
	return gdbThreads(t, &gdbtest.Session{GDB: gdb, Dir: dir, NoScript: true,
		Args: []string{"-p", strconv.Itoa(pid)}, Cmds: []string{"thread apply all bt", "detach"}})
}

// gdbThreads runs s, whose first command is `thread apply all bt`, and
// returns each thread's frames by thread id (parseGDBThreads).
func gdbThreads(t *testing.T, s *gdbtest.Session) map[int][]gdbFrame {
	t.Helper()
	r := gdbtest.MustRun(t, s)
	out := parseGDBThreads(r.Blocks[0])
	if len(out) == 0 {
		t.Fatalf("no backtrace in gdb's output:\n%s", r.Output)
	}
	return out
}

// norm makes names comparable across symbol tables and DWARF: Go's ABI
// wrapper suffix (.abi0, the symbol table's name for assembly functions,
// which gdb prints from DWARF without it) and glibc's internal aliases
// (__libc_pause, __GI___pause: symbols at the same address as pause, of
// which the symbol table and the debug information may name different
// ones) are dropped.
func norm(fn string) string {
	fn = strings.TrimSuffix(fn, ".abi0")
	// GCC's clones of a function carry its name and a suffix in the
	// symbol table (tcache_init.part.0, as eu-stack names the frame)
	// and the function's own name in DWARF (as we and gdb name it);
	// clones of clones chain the suffixes (f.constprop.0.isra.0).
	if m := gccClone.FindStringSubmatch(fn); m != nil {
		fn = m[1]
	}
	if i := strings.IndexByte(fn, '@'); i > 0 {
		fn = fn[:i] // symbol version: _IO_file_write@@GLIBC_2.2.5
	}
	fn = strings.Replace(fn, "_IO_new_", "_IO_", 1)
	// glibc's aliases of one function: __GI___libc_malloc (gdb, from
	// the debug file's local symbols), __libc_malloc, malloc.
	fn = strings.TrimPrefix(fn, "__GI_")
	fn = strings.TrimLeft(fn, "_")
	return strings.TrimPrefix(fn, "libc_")
}

// gccClone matches the suffix GCC gives the symbol of a function's clone
// (partial inlining, IPA-SRA, constant propagation, a cold part, LTO).
// A C name only: Go's names have dots of their own (main.(*T).cold).
var gccClone = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)(?:\.(?:part|isra|constprop|lto_priv)\.[0-9]+|\.cold(?:\.[0-9]+)?)+$`)

// freeze stops process pid with SIGSTOP and waits until every thread is
// stopped, so that our backtraces and gdb's see the same state; the
// process continues at the end of the test.
func freeze(t testing.TB, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		all := len(tasks) > 0
		for _, e := range tasks {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, e.Name()))
			if i := strings.LastIndexByte(string(b), ')'); i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
				all = false
			}
		}
		if all {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("process %d did not stop", pid)
}

// waitSyscall waits until thread tid of pid is blocked in system call nr
// (the first field of /proc/PID/task/TID/syscall).
func waitSyscall(t testing.TB, pid, tid, nr int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/syscall", pid, tid))
		if f := strings.Fields(string(b)); len(f) > 0 && f[0] == strconv.Itoa(nr) {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("thread %d did not block in system call %d", tid, nr)
}

// physical groups frames into physical frames (a line with a pc and the
// inlined lines after it) and returns, per physical frame, the function
// names innermost first.
func gdbPhysical(fs []gdbFrame) [][]string {
	var out [][]string
	for _, f := range fs {
		if f.hasPC || len(out) == 0 || f.fn == "<signal handler called>" {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], norm(f.fn))
	}
	return out
}

func ourPhysical(th *procview.Thread) [][]string {
	var out [][]string
	for _, f := range th.Frames {
		var names []string
		for _, fn := range f.Funcs {
			names = append(names, norm(fn.Function))
		}
		if f.Signal {
			names = []string{"<signal handler called>"}
		}
		if len(names) == 0 {
			names = []string{"??"}
		}
		out = append(out, names)
	}
	return out
}

// notCode reports whether frame i of th is where its walk stopped
// because the CFI of the frame before gave a return address outside
// executable memory (a thread just cloned returns to what its new stack
// holds): gdb and eu-stack show that pc too, named after the data symbol
// it may fall in ("type:*"), and go on guessing.
func notCode(th *procview.Thread, i int) bool {
	return i == len(th.Frames)-1 && len(th.Frames[i].Funcs) == 0 && errors.Is(th.Err, procview.ErrNotExecutable)
}

// guessedFrom reports whether gdb's physical frames from n on reach one
// gdb cannot name ("??") before its last: past a frame without call frame
// information gdb unwinds by prologue analysis and, when that goes wrong,
// names a frame or two at random before it loses its way.
func guessedFrom(g [][]string, n int) bool {
	for k := n; k < len(g); k++ {
		if g[k][0] == "??" {
			return true
		}
	}
	return false
}

// compareWithGDB checks that our backtrace of a thread agrees with gdb's,
// physical frame by physical frame (gdb's tail-call frames, which it
// makes up from the DWARF's call sites, left out: see tailCaller), up to the first frame gdb cannot name
// ("??", where gdb's own unwinding has left the code it knows: past that
// gdb prints guesses), the frame our walk stopped at outside executable
// memory (notCode), and gdb's last frame (gdb stops at main.main). In
// each physical frame the outermost function must be equal, and the
// inlined ones too when we have them (our answer for a module whose DWARF
// fails to load is the symbol table's name alone). It returns the number
// of physical frames compared.
func compareWithGDB(t *testing.T, tid int, ours *procview.Thread, gdb []gdbFrame) int {
	t.Helper()
	g, o := gdbPhysical(gdb), ourPhysical(ours)
	n := 0
	for ; n < len(g); n++ {
		if g[n][0] == "??" || notCode(ours, n) {
			break
		}
		if n >= len(o) {
			if ours.Err != nil && guessedFrom(g, n) {
				// Our walk stopped with an error (no CFI and no plausible
				// frame-pointer caller: a thread caught creating a thread
				// in cgo's C code); gdb's frames from here reach one it
				// cannot name, so they are its prologue-analysis guesses.
				break
			}
			t.Errorf("thread %d: we stop after %d frames, gdb goes on with %v\nours %v\ngdb  %v", tid, n, g[n], o, g)
			return n
		}
		module := ours.Frames[n].Module
		gl, ol := g[n][len(g[n])-1], o[n][len(o[n])-1]
		if !sameFunc(module, gl, ol) && n > 0 && n+1 < len(g) && tailCaller(ours.Frames[n-1].Module, gl, o[n-1][0]) {
			// gdb's tail-call frame (from DW_TAG_call_site): not on
			// the stack, so not in ours.
			g = append(g[:n:n], g[n+1:]...)
			gl = g[n][len(g[n])-1]
		}
		if !sameFunc(module, gl, ol) {
			t.Errorf("thread %d frame %d: ours %v, gdb %v\nours %v\ngdb  %v", tid, n, o[n], g[n], o, g)
			return n
		}
		if len(o[n]) > 1 && !sameFuncs(module, o[n], g[n]) {
			t.Errorf("thread %d frame %d: inlined frames: ours %v, gdb %v", tid, n, o[n], g[n])
		}
	}
	return n
}

// sameFunc reports whether a and b (normalized by norm) name one function
// of module: equal, or aliases, symbols of the module's symbol tables at
// one address (glibc's mmap and mmap64: gdb names the frame after the
// DWARF subprogram, __mmap64, we and llvm-symbolizer after the symbol
// table, mmap).
func sameFunc(module, a, b string) bool {
	if a == b {
		return true
	}
	addrs := symbolAddrs(module)
	for _, x := range addrs[a] {
		for _, y := range addrs[b] {
			if x == y {
				return true
			}
		}
	}
	return false
}

// sameFuncs is sameFunc for each of two equally long chains of inlined
// frames.
func sameFuncs(module string, a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !sameFunc(module, a[i], b[i]) {
			return false
		}
	}
	return true
}

var (
	symbolAddrsMu    sync.Mutex
	symbolAddrsCache = map[string]map[string][]uint64{}
)

// symbolAddrs returns the addresses of module's function symbols
// (.symtab and .dynsym) by normalized name, read once per module with
// debug/elf, an independent reader; nil for a module it cannot read
// (a JIT image in memory, a perf map).
func symbolAddrs(module string) map[string][]uint64 {
	symbolAddrsMu.Lock()
	defer symbolAddrsMu.Unlock()
	if m, ok := symbolAddrsCache[module]; ok {
		return m
	}
	var m map[string][]uint64
	add := func(f *elf.File) {
		syms, _ := f.Symbols()
		dyn, _ := f.DynamicSymbols()
		for _, s := range append(syms, dyn...) {
			if elf.ST_TYPE(s.Info) == elf.STT_FUNC || elf.ST_TYPE(s.Info) == elf.STT_GNU_IFUNC {
				name := norm(s.Name)
				m[name] = append(m[name], s.Value)
			}
		}
	}
	if f, err := elf.Open(module); err == nil {
		m = map[string][]uint64{}
		add(f)
		// The local symbols of a stripped library (glibc's
		// __pthread_create_2_1, gdb's name for pthread_create) are in
		// its separate debug file, found by build ID.
		if d, err := elf.Open(debugFile(module)); err == nil {
			add(d)
			d.Close()
		}
		f.Close()
	}
	symbolAddrsCache[module] = m
	return m
}

// tailCaller reports whether the DWARF of module (or of its separate
// debug file) has a call site marked as a tail call (DW_AT_call_tail_call,
// DW_AT_GNU_tail_call) to callee inside caller, names normalized by
// norm: gdb then shows a frame of caller between callee and the frame
// that called caller (glibc's new_heap, which jumps to alloc_new_heap),
// which is not on the stack. An independent reader: debug/dwarf.
func tailCaller(module, caller, callee string) bool {
	for _, e := range tailCalls(module) {
		if sameFunc(module, e[0], caller) && sameFunc(module, e[1], callee) {
			return true
		}
	}
	return false
}

var (
	tailCallsMu    sync.Mutex
	tailCallsCache = map[string][][2]string{}
)

// tailCalls returns the (caller, callee) names of module's tail-call
// sites, read once per module (tailCaller).
func tailCalls(module string) [][2]string {
	tailCallsMu.Lock()
	defer tailCallsMu.Unlock()
	if e, ok := tailCallsCache[module]; ok {
		return e
	}
	var out [][2]string
	for _, path := range []string{module, debugFile(module)} {
		f, err := elf.Open(path)
		if err != nil {
			continue
		}
		if d, err := f.DWARF(); err == nil {
			out = append(out, dwarfTailCalls(d)...)
		}
		f.Close()
	}
	tailCallsCache[module] = out
	return out
}

// dwarfTailCalls lists the (caller, callee) names of d's call sites
// marked as tail calls; the caller is the subprogram holding the site,
// names found through DW_AT_abstract_origin and DW_AT_specification.
func dwarfTailCalls(d *dwarf.Data) [][2]string {
	const (
		tagGNUCallSite  = dwarf.Tag(0x4109)
		attrGNUTailCall = dwarf.Attr(0x2115)
	)
	type site struct{ caller, callee dwarf.Offset }
	names := map[dwarf.Offset]string{}
	refs := map[dwarf.Offset]dwarf.Offset{} // origin or specification
	var sites []site
	var stack []dwarf.Offset // enclosing subprograms (0 for other DIEs with children)
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil || e == nil {
			break
		}
		if e.Tag == 0 {
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			continue
		}
		if n, ok := e.Val(dwarf.AttrName).(string); ok {
			names[e.Offset] = n
		}
		for _, a := range []dwarf.Attr{dwarf.AttrAbstractOrigin, dwarf.AttrSpecification} {
			if o, ok := e.Val(a).(dwarf.Offset); ok {
				refs[e.Offset] = o
			}
		}
		if e.Tag == dwarf.TagCallSite || e.Tag == tagGNUCallSite {
			tail, _ := e.Val(dwarf.AttrCallTailCall).(bool)
			gnuTail, _ := e.Val(attrGNUTailCall).(bool)
			origin, ok := e.Val(dwarf.AttrCallOrigin).(dwarf.Offset)
			if !ok {
				origin, ok = e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
			}
			if (tail || gnuTail) && ok {
				for i := len(stack) - 1; i >= 0; i-- {
					if stack[i] != 0 {
						sites = append(sites, site{stack[i], origin})
						break
					}
				}
			}
		}
		if e.Children {
			var sub dwarf.Offset
			if e.Tag == dwarf.TagSubprogram {
				sub = e.Offset
			}
			stack = append(stack, sub)
		}
	}
	name := func(o dwarf.Offset) string {
		for i := 0; i < 8; i++ {
			if n, ok := names[o]; ok {
				return norm(n)
			}
			next, ok := refs[o]
			if !ok {
				break
			}
			o = next
		}
		return ""
	}
	var out [][2]string
	for _, s := range sites {
		out = append(out, [2]string{name(s.caller), name(s.callee)})
	}
	return out
}

// debugFile returns the path of the separate debug file of the ELF file
// at path, found by build ID under /usr/lib/debug/.build-id ("" when path
// has no build ID).
func debugFile(path string) string {
	f, err := elf.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	id := buildID(f)
	if len(id) < 2 {
		return ""
	}
	return fmt.Sprintf("/usr/lib/debug/.build-id/%x/%x.debug", id[:1], id[1:])
}

// buildID returns the descriptor of f's NT_GNU_BUILD_ID note
// (.note.gnu.build-id), nil when it has none.
func buildID(f *elf.File) []byte {
	s := f.Section(".note.gnu.build-id")
	if s == nil {
		return nil
	}
	b, err := s.Data()
	if err != nil || len(b) < 16 {
		return nil
	}
	bo := f.ByteOrder
	namesz, descsz, typ := bo.Uint32(b), bo.Uint32(b[4:]), bo.Uint32(b[8:])
	off := 12 + (uint64(namesz)+3)&^3
	if typ != 3 || off+uint64(descsz) > uint64(len(b)) {
		return nil
	}
	return b[off : off+uint64(descsz)]
}

func threadWith(threads []procview.Thread, fn string) *procview.Thread {
	for i := range threads {
		for _, f := range threads[i].Frames {
			for _, x := range f.Funcs {
				if x.Function == fn {
					return &threads[i]
				}
			}
		}
	}
	return nil
}

func funcSeq(th *procview.Thread) []string {
	var s []string
	for _, p := range ourPhysical(th) {
		s = append(s, p[len(p)-1])
	}
	return s
}

// TestStacksSpin: for a child running spin.scm's image (mapped from its
// file, published with -gdb; or linked in memory, -jit -gdb), Stacks shows
// the spinning thread in spin, then %start, the library's entry frame
// elfimage.entry (a signal frame), the Go frames from native.trampoline down
// to main.main, each thread's physical frames with the same functions as
// gdb's `thread apply all bt`.
func TestStacksSpin(t *testing.T) {
	requireAmd64Stacks(t)
	gdb := tooltest.Require(t, "gdb")
	dir := fixture(t)
	for _, args := range [][]string{{"run", "-gdb", "spin.elf"}, {"run", "-jit", "-gdb", "spin.scm"}} {
		t.Run(strings.Join(args[1:len(args)-1], ""), func(t *testing.T) {
			cmd := exec.Command(filepath.Join(dir, "elfimage"), args...)
			cmd.Dir = dir
			tooltest.StartReady(t, cmd)
			pid := cmd.Process.Pid
			// The main thread may still be printing "ready": take
			// backtraces of the stopped process until it is in spin.
			var threads []procview.Thread
			var th *procview.Thread
			for try := 0; th == nil; try++ {
				if try > 0 {
					syscall.Kill(pid, syscall.SIGCONT)
					time.Sleep(10 * time.Millisecond)
				}
				freeze(t, pid)
				var view *procview.View
				var err error
				threads, view, err = procview.Stacks(pid, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer view.Close()
				for _, w := range view.Warnings() {
					t.Logf("warning: %v", w)
				}
				if th = threadWith(threads, "spin"); th == nil && try == 20 {
					t.Fatalf("no thread in spin:\n%s", dumpThreads(threads))
				}
			}
			seq := funcSeq(th)
			want := []string{"spin", "%start", "<signal handler called>", "github.com/elfimage/elfimage/native.trampoline", "github.com/elfimage/elfimage/native.call"}
			if len(seq) < len(want) || strings.Join(seq[:len(want)], " ") != strings.Join(want, " ") {
				t.Errorf("spinning thread: %v, want it to start with %v", seq, want)
			}
			if !strings.Contains(strings.Join(seq, " "), " main.main") {
				t.Errorf("spinning thread does not reach main.main: %v", seq)
			}
			f0 := th.Frames[0]
			wantMod := filepath.Join(dir, "spin.elf")
			if args[1] == "-jit" {
				wantMod = "[jit@"
			}
			if !strings.HasPrefix(f0.Module, wantMod) || f0.Funcs[0].File != filepath.Join(dir, "spin.scm") || f0.Funcs[0].Line < 1 || f0.Funcs[0].Line > 4 {
				t.Errorf("frame 0: module %q, %+v; want module %s..., spin.scm:1-4", f0.Module, f0.Funcs, wantMod)
			}
			if !th.Frames[2].Signal || th.Frames[2].Funcs[0].Function != "elfimage.entry" {
				t.Errorf("frame 2: %+v, want the signal frame elfimage.entry", th.Frames[2])
			}
			g := gdbStacks(t, gdb, dir, pid)
			for i := range threads {
				n := compareWithGDB(t, threads[i].TID, &threads[i], g[threads[i].TID])
				if &threads[i] == th && n < 8 {
					t.Errorf("only %d frames of the spinning thread compared", n)
				}
			}
			if t.Failed() {
				t.Logf("ours:\n%s", dumpThreads(threads))
			}
		})
	}
}

// TestStacksCgo: for a Go program blocked in pause(2) called from C
// through cgo, the blocked thread shows libc's pause (libc.so.6, unwound
// by its .eh_frame), the C function cprog_block (the binary's .eh_frame),
// then runtime.asmcgocall (Go's .debug_frame), where gdb and we both stop
// (asmcgocall has switched to the system stack: its caller's frame is on
// the goroutine stack, and gdb's next frame is "??").
func TestStacksCgo(t *testing.T) {
	requireAmd64Stacks(t)
	gdb := tooltest.Require(t, "gdb")
	tooltest.Require(t, "gcc")
	goTool := tooltest.Require(t, "go")
	dir := t.TempDir()
	bin := filepath.Join(dir, "cprog")
	build := exec.Command(goTool, "build", "-o", bin, "./testdata/cprog")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	tooltest.StartReady(t, cmd)
	waitSyscall(t, cmd.Process.Pid, cmd.Process.Pid, sysPauseX86_64)
	freeze(t, cmd.Process.Pid)
	threads, view, err := procview.Stacks(cmd.Process.Pid, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	th := threadWith(threads, "cprog_block")
	if th == nil {
		t.Fatalf("no thread in cprog_block:\n%s", dumpThreads(threads))
	}
	seq := funcSeq(th)
	if len(seq) < 3 || seq[0] != "pause" || seq[1] != "cprog_block" || seq[2] != "runtime.asmcgocall" {
		t.Errorf("blocked thread: %v, want pause, cprog_block, runtime.asmcgocall", seq)
	}
	if m := th.Frames[0].Module; !strings.Contains(filepath.Base(m), "libc.so") {
		t.Errorf("frame 0 in module %q, want libc", m)
	}
	if m := th.Frames[1].Module; m != bin {
		t.Errorf("frame 1 in module %q, want %s", m, bin)
	}
	if f := th.Frames[1].Funcs; len(f) == 0 || filepath.Base(f[0].File) != "main.go" {
		t.Errorf("cprog_block frame: %+v, want main.go", f)
	}
	g := gdbStacks(t, gdb, dir, cmd.Process.Pid)
	for i := range threads {
		n := compareWithGDB(t, threads[i].TID, &threads[i], g[threads[i].TID])
		if &threads[i] == th && n < 3 {
			t.Errorf("only %d frames of the blocked thread compared", n)
		}
	}
	if t.Failed() {
		t.Logf("ours:\n%s", dumpThreads(threads))
	}
}

func dumpThreads(threads []procview.Thread) string {
	var b strings.Builder
	for _, th := range threads {
		fmt.Fprintf(&b, "thread %d %q err=%v\n", th.TID, th.Name, th.Err)
		for i, f := range th.Frames {
			fmt.Fprintf(&b, "  #%d %#x sig=%v %s %+v\n", i, f.PC, f.Signal, f.Module, f.Funcs)
		}
	}
	return b.String()
}

// BenchmarkStacksSpin measures Stacks on the spin child (5 threads): the
// whole operation (attach, module snapshot, unwind, detach, symbolize with
// a fresh View, so first-use costs included), and attach + unwind only.
func BenchmarkStacksSpin(b *testing.B) {
	dir := fixture(b)
	for _, mode := range [][]string{{"run", "-gdb", "spin.elf"}, {"run", "-jit", "-gdb", "spin.scm"}} {
		cmd := exec.Command(filepath.Join(dir, "elfimage"), mode...)
		cmd.Dir = dir
		tooltest.StartReady(b, cmd)
		for _, sym := range []bool{false, true} {
			name := mode[1] + "/unwind"
			if sym {
				name = mode[1] + "/unwind+symbolize"
			}
			b.Run(name, func(b *testing.B) {
				frames := 0
				for b.Loop() {
					th, v, err := procview.Stacks(cmd.Process.Pid, &procview.Options{NoSymbolize: !sym})
					if err != nil {
						b.Fatal(err)
					}
					for _, t := range th {
						frames += len(t.Frames)
					}
					v.Close()
				}
				b.ReportMetric(float64(frames)/float64(b.N), "frames/op")
			})
		}
	}
}

// sigProg spins in interrupted until SIGUSR1 arrives, then in the
// handler. With the argument "raw" the handler is installed with the
// rt_sigaction system call and a restorer of its own, restorer_sigaction,
// which has no CFI (as Go's runtime.sigreturn__sigaction); otherwise with
// sigaction(3), whose restorer is glibc's __restore_rt, described by CFI
// as a signal frame.
const sigProg = `#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

void restorer_sigaction(void);
__asm__(".text\n.globl restorer_sigaction\n.type restorer_sigaction, @function\n"
	"restorer_sigaction:\n\tmov $15, %rax\n\tsyscall\n.size restorer_sigaction, .-restorer_sigaction\n");

struct kernel_sigaction {
	void (*handler)(int);
	unsigned long flags;
	void (*restorer)(void);
	unsigned long mask;
};

volatile int stop, spins;

__attribute__((noinline)) static void handler(int sig) {
	while (!stop)
		spins += sig;
}

__attribute__((noinline)) static void interrupted(int n) {
	while (!stop)
		spins += n;
}

int main(int argc, char **argv) {
	if (argc > 1 && strcmp(argv[1], "raw") == 0) {
		struct kernel_sigaction sa = {handler, 0x04000000 /* SA_RESTORER */, restorer_sigaction, 0};
		if (syscall(SYS_rt_sigaction, SIGUSR1, &sa, NULL, 8) != 0)
			return 1;
	} else {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = handler;
		if (sigaction(SIGUSR1, &sa, NULL) != 0)
			return 1;
	}
	printf("ready\n");
	fflush(stdout);
	interrupted(1);
	return 0;
}
`

// TestStacksSignal: a thread stopped in a signal handler shows the
// handler, the signal frame, and the function the signal interrupted at
// its exact pc, then main, as gdb's `thread apply all bt` does
// ("<signal handler called>"): with glibc's __restore_rt, which CFI
// describes as a signal frame, and with a restorer without CFI, which the
// walk recognises by its code (mov $15, %rax; syscall), as gdb does, and
// continues from the registers saved in the signal frame.
func TestStacksSignal(t *testing.T) {
	requireAmd64Stacks(t)
	gdb := tooltest.Require(t, "gdb")
	exe := tooltest.GCC(t, sigProg, "-g", "-O1")
	for _, mode := range []string{"glibc", "raw"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(exe, mode)
			tooltest.StartReady(t, cmd)
			pid := cmd.Process.Pid
			inFunc := func(fn string) func(th []procview.Thread) bool {
				return func(th []procview.Thread) bool {
					f := th[0].Frames
					return len(f) > 0 && len(f[0].Funcs) > 0 && f[0].Funcs[0].Function == fn
				}
			}
			// Once in interrupted, the signal arrives when it resumes.
			stacksWhen(t, pid, 50, inFunc("interrupted"))
			if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
				t.Fatal(err)
			}
			syscall.Kill(pid, syscall.SIGCONT)
			threads, _ := stacksWhen(t, pid, 50, inFunc("handler"))
			th := &threads[0]
			seq := funcSeq(th)
			if want := "handler <signal handler called> interrupted main"; !strings.HasPrefix(strings.Join(seq, " "), want) {
				t.Fatalf("frames %v, want %s ...\n%s", seq, want, dumpThreads(threads))
			}
			sig, in := th.Frames[1], th.Frames[2]
			if !in.Exact || in.Method != unwind.MethodSignal || len(in.Funcs) == 0 || in.Funcs[0].Line == 0 {
				t.Errorf("interrupted frame: exact %v, %v, %+v; want the exact pc by the signal frame, with a line", in.Exact, in.Method, in.Funcs)
			}
			if mode == "raw" {
				if len(sig.Funcs) == 0 || sig.Funcs[0].Function != "restorer_sigaction" || sig.Module != exe {
					t.Errorf("signal frame %+v in %s, want restorer_sigaction in %s", sig.Funcs, sig.Module, exe)
				}
			}
			if th.Err != nil {
				t.Errorf("walk stopped: %v", th.Err)
			}
			g := gdbStacks(t, gdb, t.TempDir(), pid)
			if n := compareWithGDB(t, th.TID, th, g[th.TID]); n < 4 {
				t.Errorf("only %d frames compared with gdb: %v", n, g[th.TID])
			}
		})
	}
}

// TestSameFunc: the comparison with gdb accepts glibc's aliases at one
// address (mmap, mmap64; pthread_create and the debug file's
// __pthread_create_2_1) and nothing else (mmap, munmap); tailCaller finds
// glibc's tail call from new_heap to alloc_new_heap, one way only.
func TestSameFunc(t *testing.T) {
	libc := "/lib/x86_64-linux-gnu/libc.so.6"
	if _, err := os.Stat(libc); err != nil {
		tooltest.Skip(t, "no %s: %v", libc, err)
	}
	if !sameFunc(libc, "mmap", "mmap64") {
		t.Error("mmap and mmap64 are not taken for one function")
	}
	if symbolAddrs(libc)["pthread_create_2_1"] == nil {
		tooltest.Skip(t, "no separate debug file of %s (Debian's libc6-dbg)", libc)
	}
	if !sameFunc(libc, "pthread_create", "pthread_create_2_1") {
		t.Error("pthread_create and __pthread_create_2_1 (a local symbol of the debug file) are not taken for one function")
	}
	if !tailCaller(libc, "new_heap", "alloc_new_heap") {
		t.Error("new_heap's tail call of alloc_new_heap not found")
	}
	if tailCaller(libc, "alloc_new_heap", "new_heap") {
		t.Error("alloc_new_heap taken to tail-call new_heap")
	}
	if sameFunc(libc, "mmap", "munmap") {
		t.Error("mmap and munmap are taken for one function")
	}
}

// TestNormClones: norm drops GCC's clone suffixes, chained ones too, and
// leaves Go's dotted names alone.
func TestNormClones(t *testing.T) {
	for in, want := range map[string]string{
		"tcache_init.part.0":          "tcache_init",
		"new_heap.isra.0":             "new_heap",
		"f.constprop.0.isra.0":        "f",
		"_int_free.cold":              "int_free",
		"runtime.mcall":               "runtime.mcall",
		"github.com/x/part.F":         "github.com/x/part.F",
		"main.(*T).cold":              "main.(*T).cold",
		"runtime.futex.abi0":          "runtime.futex",
		"__GI___libc_malloc":          "malloc",
		"_IO_file_write@@GLIBC_2.2.5": "IO_file_write",
	} {
		if got := norm(in); got != want {
			t.Errorf("norm(%q) = %q, want %q", in, got, want)
		}
	}
}
