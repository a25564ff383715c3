package main

import (
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/internal/qemutest"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// debuginfodProg is a C program with an inlined function, for the
// separate debug file tests: with an argument it prints "ready" and
// spins in compute.
const debuginfodProg = `#include <stdio.h>
static volatile int sink;
static inline int square(int x) { return x * x + sink; }
__attribute__((noinline)) int compute(int n) {
	int s = 0;
	for (int i = 0; i < n; i++)
		s += square(i);
	return s;
}
int main(int argc, char **argv) {
	if (argc > 1) {
		printf("ready\n");
		fflush(stdout);
		for (;;)
			sink += compute(1000);
	}
	return compute(argc) & 1;
}
`

// debuginfodServer is a debuginfod(8) serving a directory, in a network
// namespace of its own that has only loopback (debuginfod has no option to
// listen on 127.0.0.1 alone).
type debuginfodServer struct {
	url     string
	nsenter string
	pid     int
	log     *bytes.Buffer
}

// startDebuginfod starts debuginfod -F over dir on 127.0.0.1:8002 of a new
// network namespace, without DEBUGINFOD_URLS in its environment (it would
// forward misses there), and stops it when the test ends. It is skipped
// (failed under CI) when the tools are missing, and skipped when network
// namespaces cannot be made (not root).
func startDebuginfod(t *testing.T, dir string) *debuginfodServer {
	t.Helper()
	bin := tooltest.Require(t, "debuginfod")
	s := &debuginfodServer{url: "http://127.0.0.1:8002", nsenter: tooltest.Require(t, "nsenter"), log: &bytes.Buffer{}}
	db := filepath.Join(t.TempDir(), "debuginfod.sqlite")
	cmd := loopbackCommand(t, "sh", "-c", `exec "$0" -F -p 8002 -d "$1" -t 0 -g 0 -c 1 "$2"`, bin, db, dir)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.WaitDelay = 5 * time.Second // a child left holding the log pipe does not stall the cleanup
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.pid = cmd.Process.Pid
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return s
}

// loopbackCommand returns name with args run in a new network namespace
// with only loopback, up (unshare -n, then ip link set lo up), and the
// test's environment without its DEBUGINFOD_ variables (debuginfod
// forwards its misses to DEBUGINFOD_URLS). It is skipped (failed under
// CI) when unshare or ip is missing, and skipped when network namespaces
// cannot be made (not root).
func loopbackCommand(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	unshare := tooltest.Require(t, "unshare")
	tooltest.Require(t, "ip")
	if out, err := exec.Command(unshare, "-n", "true").CombinedOutput(); err != nil {
		t.Skipf("no network namespace for debuginfod (unshare -n: %v %s); it cannot listen on 127.0.0.1 alone", err, out)
	}
	cmd := exec.Command(unshare, append([]string{"-n", "sh", "-c", `ip link set lo up && exec "$@"`, "sh", name}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DEBUGINFOD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return cmd
}

// command returns cmd run inside the server's network namespace, with
// DEBUGINFOD_URLS naming the server and a fresh DEBUGINFOD_CACHE_PATH
// (returned): the elfutils client remembers a miss for ten minutes.
func (s *debuginfodServer) command(t *testing.T, name string, args ...string) (*exec.Cmd, string) {
	cache := filepath.Join(t.TempDir(), "debuginfod-cache")
	cmd := exec.Command(s.nsenter, append([]string{"-t", fmt.Sprint(s.pid), "-n", "--", name}, args...)...)
	cmd.Env = append(os.Environ(), "DEBUGINFOD_URLS="+s.url, "DEBUGINFOD_CACHE_PATH="+cache, "DEBUGINFOD_TIMEOUT=30")
	return cmd, cache
}

// waitIndexed polls with debuginfod-find until the server serves the
// debug file of every build ID (it scans its directory after it starts).
func (s *debuginfodServer) waitIndexed(t *testing.T, ids ...string) {
	t.Helper()
	find := tooltest.Require(t, "debuginfod-find")
	deadline := time.Now().Add(2 * time.Minute)
	for _, id := range ids {
		for {
			cmd, _ := s.command(t, find, "debuginfo", id)
			out, err := cmd.CombinedOutput()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("debuginfod never served %s: %v %s\nserver log:\n%s", id, err, out, s.log)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// emulatedCLI returns the program and arguments that run the CLI cli with
// args: cli itself, or, when the test binary runs under qemu-user
// (qemutest.Emulated: the CLI is an arm64 program the kernel cannot
// execute), qemu-aarch64 with cli first, for commands that take a program
// and its arguments (nsenter).
func emulatedCLI(t *testing.T, cli string, args ...string) (string, []string) {
	t.Helper()
	if qemutest.Emulated() != "" {
		return tooltest.Require(t, "qemu-aarch64"), append([]string{cli}, args...)
	}
	return cli, args
}

// splitFile writes objcopy --only-keep-debug of file to debugDir/BASE.debug
// and the file stripped of its debug sections, with a .gnu_debuglink to
// it, to binDir/BASE (where the debug file is not), and returns the
// stripped file and its build ID in hexadecimal.
func splitFile(t *testing.T, file, debugDir, binDir string) (stripped, id string) {
	stripped, id, _ = splitDebug(t, file, debugDir, binDir)
	return stripped, id
}

// splitDebug is splitFile that also returns the debug file.
func splitDebug(t *testing.T, file, debugDir, binDir string) (string, string, string) {
	t.Helper()
	ef, err := elf.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	machine := ef.Machine
	ef.Close()
	objcopy := tooltest.Binutils(t, machine, "objcopy") // the image is the running architecture's
	base := filepath.Base(file)
	debug := filepath.Join(debugDir, strings.TrimSuffix(base, ".elf")+".debug")
	stripped := filepath.Join(binDir, base)
	for _, args := range [][]string{{"--only-keep-debug", file, debug}, {"--strip-debug", "--add-gnu-debuglink=" + debug, file, stripped}} {
		if out, err := exec.Command(objcopy, args...).CombinedOutput(); err != nil {
			t.Fatalf("objcopy %v: %v\n%s", args, err, out)
		}
	}
	f, err := elf.Open(stripped)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Section(".debug_info") != nil {
		t.Fatalf("%s still has .debug_info", stripped)
	}
	note := f.Section(".note.gnu.build-id")
	if note == nil {
		t.Fatalf("%s has no build ID", file)
	}
	b, _ := note.Data()
	return stripped, fmt.Sprintf("%x", b[16:]), debug
}

// TestDebuginfod: a real debuginfod serving the debug files of a gcc
// program and of one of our images, split by objcopy. debuginfod-find
// fetches our debug file byte for byte; `elfimage symbolize` on the
// stripped files answers through the server what it answers for the
// unstripped ones (names, lines, inlined frames), and keeps the file in
// the elfutils cache layout; `elfimage stack` names a stripped running
// program's frames with their lines; gdb with DEBUGINFOD_URLS finds the
// debug files of a stripped program and of a stripped image.
func TestDebuginfod(t *testing.T) {
	gdb := tooltest.Require(t, "gdb")
	find := tooltest.Require(t, "debuginfod-find")
	fix := setupCLI(t)
	srv, bin := t.TempDir(), t.TempDir()
	cprog := tooltest.GCC(t, debuginfodProg, "-O2", "-g", "-Wl,--build-id")
	cStripped, cID, cDebug := splitDebug(t, cprog, srv, bin)
	img := filepath.Join(t.TempDir(), "prog.elf")
	if b, err := os.ReadFile(fix.img); err != nil || os.WriteFile(img, b, 0o644) != nil {
		t.Fatal(err)
	}
	imgStripped, imgID, imgDebug := splitDebug(t, img, srv, bin)

	s := startDebuginfod(t, srv)
	s.waitIndexed(t, cID, imgID)

	t.Run("debuginfod-find", func(t *testing.T) {
		for _, c := range []struct{ id, want string }{{cID, cDebug}, {imgID, imgDebug}} {
			cmd, cache := s.command(t, find, "debuginfo", c.id)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("debuginfod-find debuginfo %s: %v", c.id, err)
			}
			p := strings.TrimSpace(string(out))
			if p != filepath.Join(cache, c.id, "debuginfo") {
				t.Errorf("debuginfod-find printed %q", p)
			}
			got, err1 := os.ReadFile(p)
			want, err2 := os.ReadFile(c.want)
			if err1 != nil || err2 != nil || !bytes.Equal(got, want) {
				t.Errorf("fetched %d bytes (%v), the debug file has %d (%v)", len(got), err1, len(want), err2)
			}
		}
	})

	t.Run("symbolize", func(t *testing.T) {
		noDirs := t.TempDir() // no /usr/lib/debug: the server is the only source
		for _, c := range []struct {
			full, stripped, id string
			addrs              []string
		}{
			{cprog, cStripped, cID, funcAddrs(t, cprog)},
			{img, imgStripped, imgID, rowAddrs(t, img)},
		} {
			want, errOut, err := tooltest.RunToolSplit(t, qemutest.Command(context.Background(), t, fix.cli, append([]string{"symbolize", "-e", c.full}, c.addrs...)...), 2*time.Minute)
			if err != nil {
				t.Fatalf("%v\n%s", err, errOut)
			}
			if strings.Count(want, "??") > len(c.addrs)/2 {
				t.Fatalf("the unstripped file's answers are mostly ??:\n%s", want)
			}
			alone, _, _ := tooltest.RunToolSplit(t, qemutest.Command(context.Background(), t, fix.cli, append([]string{"symbolize", "-debug-dir", noDirs, "-e", c.stripped}, c.addrs...)...), 2*time.Minute)
			if alone == want {
				t.Fatalf("%s answers as the unstripped file without the server", c.stripped)
			}
			cli, args := emulatedCLI(t, fix.cli, append([]string{"symbolize", "-debug-dir", noDirs, "-e", c.stripped}, c.addrs...)...)
			cmd, cache := s.command(t, cli, args...)
			got, errOut, err := tooltest.RunToolSplit(t, cmd, 2*time.Minute)
			if err != nil || errOut != "" {
				t.Fatalf("symbolize %s through debuginfod: %v\n%s", c.stripped, err, errOut)
			}
			if got != want {
				t.Errorf("symbolize %s through debuginfod:\n%s\nunstripped:\n%s", c.stripped, got, want)
			}
			if st, err := os.Stat(filepath.Join(cache, c.id, "debuginfo")); err != nil || st.Mode().Perm() != 0o400 {
				t.Errorf("cache entry: %v", err)
			}
		}
	})

	t.Run("stack", func(t *testing.T) {
		skipStacks(t)
		run := exec.Command(cStripped, "spin")
		tooltest.StartReady(t, run)
		cmd, _ := s.command(t, fix.cli, "stack", "-debug-dir", t.TempDir(), fmt.Sprint(run.Process.Pid))
		out, err := tooltest.RunGroup(cmd, 2*time.Minute)
		if err != nil {
			t.Fatalf("stack: %v\n%s", err, out)
		}
		t.Logf("elfimage stack:\n%s", out)
		if !strings.Contains(out, "compute (n=") || !strings.Contains(out, "a.c:") || !strings.Contains(out, "main (") {
			t.Errorf("stack of the stripped program through debuginfod: want compute (n=...) and main with a.c lines:\n%s", out)
		}
	})

	t.Run("gdb", func(t *testing.T) {
		cmd, _ := s.command(t, gdb, "-nx", "-batch", "-iex", "set debuginfod enabled on",
			"-ex", "break compute", "-ex", "run", "-ex", "bt", "--args", cStripped)
		out, err := tooltest.RunGroup(cmd, 2*time.Minute)
		if err != nil {
			t.Fatalf("gdb: %v\n%s", err, out)
		}
		t.Logf("gdb:\n%s", out)
		if !strings.Contains(out, "Breakpoint 1, compute (n=1) at") || !strings.Contains(out, "a.c:") || !strings.Contains(out, "in main (") {
			t.Errorf("gdb on the stripped program: no breakpoint at compute with a.c lines:\n%s", out)
		}
		want, err := tooltest.RunGroup(exec.Command(gdb, "-nx", "-batch", "-ex", "info line fib", "-ex", "info scope tak", img), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		cmd, _ = s.command(t, gdb, "-nx", "-batch", "-iex", "set debuginfod enabled on", "-ex", "info line fib", "-ex", "info scope tak", imgStripped)
		out, err = tooltest.RunGroup(cmd, 2*time.Minute)
		if err != nil {
			t.Fatalf("gdb: %v\n%s", err, out)
		}
		if !strings.Contains(want, `Line 2 of "prog.scm"`) || !strings.Contains(out, strings.TrimSpace(want)) {
			t.Errorf("gdb on the stripped image through debuginfod:\n%s\nunstripped:\n%s", out, want)
		}
	})
}

// funcAddrs returns the addresses of the function symbols of an
// executable and a few bytes into each, in hexadecimal.
func funcAddrs(t *testing.T, path string) []string {
	var out []string
	for _, s := range funcSymbols(t, path) {
		for _, d := range []uint64{0, 1, 4, 9} {
			if d < s.Size {
				out = append(out, fmt.Sprintf("%#x", s.Value+d))
			}
		}
	}
	return out
}

// rowAddrs returns the address of every row of an image's line table.
func rowAddrs(t *testing.T, path string) []string {
	im, err := elfimage.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	tab, err := im.LineTable()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range tab.Sequences {
		for _, r := range s.Rows {
			out = append(out, fmt.Sprintf("%#x", r.Address))
		}
	}
	return out
}

// TestSymbolizeDebuginfodErrors: a debuginfod server that is down, stalls
// or answers garbage gives symbolize a warning naming the server and the
// cause, within DEBUGINFOD_TIMEOUT, and the symbol table's answers.
func TestSymbolizeDebuginfodErrors(t *testing.T) {
	cprog := tooltest.GCC(t, debuginfodProg, "-O2", "-g", "-Wl,--build-id")
	stripped, _ := splitFile(t, cprog, t.TempDir(), t.TempDir())
	var addr string
	for _, s := range funcSymbols(t, cprog) {
		if s.Name == "compute" {
			addr = fmt.Sprintf("%#x", s.Value)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close()
	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer stall.Close()
	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>hello</html>")) }))
	defer garbage.Close()
	for _, c := range []struct{ name, url, want string }{
		{"down", down, "connection refused"},
		{"stall", stall.URL, "DEBUGINFOD_TIMEOUT"},
		{"garbage", garbage.URL, "not the debug file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("DEBUGINFOD_URLS", c.url)
			t.Setenv("DEBUGINFOD_CACHE_PATH", t.TempDir())
			t.Setenv("DEBUGINFOD_TIMEOUT", "1")
			code, out, errOut := runCLI(t, "symbolize", "-debug-dir", t.TempDir(), "-e", stripped, addr)
			if code != 0 || out != "compute\n??:?\n" {
				t.Errorf("exit %d, output %q", code, out)
			}
			if !strings.Contains(errOut, "warning") || !strings.Contains(errOut, c.url) || !strings.Contains(errOut, c.want) {
				t.Errorf("stderr %q: want a warning naming %s and %q", errOut, c.url, c.want)
			}
		})
	}
	t.Run("malformed variable", func(t *testing.T) {
		t.Setenv("DEBUGINFOD_URLS", "http://127.0.0.1:1")
		t.Setenv("DEBUGINFOD_TIMEOUT", "soon")
		if code, _, errOut := runCLI(t, "symbolize", "-e", stripped, addr); code != 0 || !strings.Contains(errOut, "DEBUGINFOD_TIMEOUT") {
			t.Errorf("exit %d, stderr %q", code, errOut)
		}
	})
}
