package main

// Tests of the compile cache as `run prog.scm` uses it, of the cache
// command, of the removal of temporary files on signals, and of the
// command line's error and flag conventions.

import (
	"bytes"
	"context"
	"debug/elf"
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

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/ccache"
	"github.com/elfimage/elfimage/internal/qemutest"
	"github.com/elfimage/elfimage/internal/tooltest"
	"github.com/elfimage/elfimage/lang/scheme"
)

// isolateCache points the compile cache of this test process and of the
// processes it starts at a temporary directory, never the user's, and
// returns the function that removes it.
func isolateCache() func() {
	dir, err := os.MkdirTemp("", "elfimage-test-cache-")
	if err != nil {
		panic(err)
	}
	if os.Getenv("GOCACHE") == "" {
		// go's build cache defaults to $XDG_CACHE_HOME/go-build: keep it
		// where it is, or every go build of a test starts from nothing.
		if d, err := os.UserCacheDir(); err == nil {
			os.Setenv("GOCACHE", filepath.Join(d, "go-build"))
		}
	}
	os.Setenv("XDG_CACHE_HOME", dir)
	os.Unsetenv(ccache.EnvCache)
	os.Unsetenv(ccache.EnvCacheSize)
	return func() { os.RemoveAll(dir) }
}

// testCache gives the test a cache of its own and returns its directory
// (not yet created).
func testCache(t *testing.T) string {
	t.Helper()
	xdg := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", xdg)
	return filepath.Join(xdg, "elfimage")
}

// entries returns the cache entries of dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.elf"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func inodeOf(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func writeSource(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

const (
	prog42   = "(define (f n) (+ n 1))\n(define (main) (display (f 41)) (newline))\n"
	prog43   = "(define (f n) (+ n 2))\n(define (main) (display (f 41)) (newline))\n"
	progEvil = "(define (g n) n)\n(define (main) (display (g 666)) (newline))\n"
)

// TestRunCache: run prog.scm stores one entry named after the source in
// $XDG_CACHE_HOME/elfimage (mode 0700), reuses it (same file, use time
// refreshed), replaces it when the source changes, keeps one per link
// options; -cache and ELFIMAGE_CACHE move or disable it; cache -list,
// -dir and -clear show and empty it.
func TestRunCache(t *testing.T) {
	cache := testCache(t)
	src := filepath.Join(t.TempDir(), "prog.scm")
	writeSource(t, src, prog42)
	run := func(want string, args ...string) {
		t.Helper()
		code, out, errOut := runCLI(t, append([]string{"run"}, args...)...)
		if code != 0 || out != want || errOut != "" {
			t.Fatalf("run %v: exit %d, output %q, stderr %q; want %q and no stderr", args, code, out, errOut, want)
		}
	}
	run("42\n", src)
	ents := entries(t, cache)
	if len(ents) != 1 || !strings.HasPrefix(filepath.Base(ents[0]), "prog-") {
		t.Fatalf("cache holds %q, want one prog-HASH.elf", ents)
	}
	entry := ents[0]
	if fi, err := os.Stat(cache); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("cache directory: %v %v, want mode 0700", fi.Mode(), err)
	}
	ino := inodeOf(t, entry)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(entry, old, old)
	run("42\n", src)
	if fi, _ := os.Stat(entry); inodeOf(t, entry) != ino || !fi.ModTime().After(old.Add(time.Minute)) {
		t.Errorf("second run: entry rewritten (%v) or its use time not refreshed (%v)", inodeOf(t, entry) != ino, fi.ModTime())
	}
	writeSource(t, src, prog43)
	run("43\n", src)
	if ents := entries(t, cache); len(ents) != 1 || ents[0] != entry || inodeOf(t, entry) == ino {
		t.Errorf("after a source change: %q (inode changed %v), want %s rewritten", ents, inodeOf(t, entry) != ino, entry)
	}
	run("43\n", "-dwarf", "4", src)
	if ents := entries(t, cache); len(ents) != 2 {
		t.Errorf("after -dwarf 4: %q, want two entries", ents)
	}

	code, list, errOut := runCLI(t, "cache")
	if code != 0 || strings.Count(list, " current ") != 2 || strings.Count(list, src) != 2 || !strings.Contains(list, cache+": 2 images") {
		t.Errorf("cache: exit %d\n%s%s", code, list, errOut)
	}
	writeSource(t, src, prog42)
	if _, list, _ := runCLI(t, "cache", "-list"); strings.Count(list, "stale: source changed") != 2 {
		t.Errorf("cache -list after a source change:\n%s", list)
	}
	if _, dir, _ := runCLI(t, "cache", "-dir"); dir != cache+"\n" {
		t.Errorf("cache -dir: %q, want %q", dir, cache)
	}

	t.Setenv(ccache.EnvCache, "off")
	run("42\n", src)
	if _, dir, _ := runCLI(t, "cache", "-dir"); dir != "off\n" {
		t.Errorf("cache -dir with the cache off: %q", dir)
	}
	moved := filepath.Join(t.TempDir(), "moved")
	t.Setenv(ccache.EnvCache, moved)
	run("42\n", src)
	if len(entries(t, moved)) != 1 {
		t.Errorf("ELFIMAGE_CACHE=%s: entries there %q", moved, entries(t, moved))
	}
	flagDir := filepath.Join(t.TempDir(), "flag")
	run("42\n", "-cache", flagDir, src)
	run("42\n", "-cache=off", src)
	if len(entries(t, flagDir)) != 1 || len(entries(t, moved)) != 1 {
		t.Errorf("-cache DIR: entries %q and %q", entries(t, flagDir), entries(t, moved))
	}
	t.Setenv(ccache.EnvCache, "")
	if ents := entries(t, cache); len(ents) != 2 {
		t.Errorf("runs with the cache moved or off wrote to the default cache: %q", ents)
	}

	code, out, errOut := runCLI(t, "cache", "-clear")
	if code != 0 || !regexp.MustCompile(`^removed 2 files \(\d+[BKMG]\) from `+regexp.QuoteMeta(cache)+"\n$").MatchString(out) || len(entries(t, cache)) != 0 {
		t.Errorf("cache -clear: exit %d, %q %s; left %q", code, out, errOut, entries(t, cache))
	}
	if _, list, _ := runCLI(t, "cache"); !strings.HasPrefix(list, cache+": 0 images") {
		t.Errorf("cache after -clear: %q", list)
	}
	none := filepath.Join(t.TempDir(), "none")
	t.Setenv(ccache.EnvCache, none)
	for _, args := range [][]string{{"cache"}, {"cache", "-clear"}} {
		code, out, errOut := runCLI(t, args...)
		if _, err := os.Stat(none); code != 0 || out != none+": no cache yet\n" || err == nil {
			t.Errorf("%v without a cache: exit %d, %q %s; created it: %v", args, code, out, errOut, err == nil)
		}
	}
	t.Setenv(ccache.EnvCache, "")
	t.Setenv(ccache.EnvCacheSize, "12 parsecs")
	if code, _, errOut := runCLI(t, "run", src); code != 2 || !strings.Contains(errOut, ccache.EnvCacheSize) {
		t.Errorf("malformed %s: exit %d, %q", ccache.EnvCacheSize, code, errOut)
	}
}

// poison stores under src's key, as run would look it up, the image of
// progEvil: an entry that passes every integrity and key check but does
// not hold what the source says, so that a test sees whether an entry is
// run. It checks that, trusted, the entry is run, and returns its path.
func poison(t *testing.T, cache, src string) string {
	t.Helper()
	c, err := ccache.Open(cache)
	if err != nil {
		t.Fatal(err)
	}
	opts, _ := linkOptions(5, false, false)
	evil := func(abs string, _ []byte) (*elfimage.Module, error) {
		mod, err := scheme.Compile(abs, []byte(progEvil))
		if mod != nil {
			mod.CompDir = filepath.Dir(abs)
		}
		return mod, err
	}
	r, err := c.Load(ccache.Source{Path: src, Compile: evil, Link: opts}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if code, out, errOut := runCLI(t, "run", src); code != 0 || out != "666\n" {
		t.Fatalf("control: the poisoned entry was not run: exit %d, %q %s", code, out, errOut)
	}
	return r.Path
}

// TestRunCacheRejects: an entry that is truncated, has a byte flipped, is
// from another elfimage build or cache format, is writable by others or
// owned by another user, or sits in a directory that is, is never run:
// run warns (except for the version changes, rebuilt silently), runs the
// right program, and (for the entry's faults) leaves a good entry that the
// next run reuses.
func TestRunCacheRejects(t *testing.T) {
	root := os.Geteuid() == 0
	cases := []struct {
		name string
		root bool   // needs root (chown)
		warn string // in the one warning line; "" for none
		dir  bool   // the directory is at fault: no entry is written
		harm func(t *testing.T, cache, entry string)
	}{
		{"truncated", false, "corrupt", false, func(t *testing.T, _, e string) {
			fi, _ := os.Stat(e)
			os.Truncate(e, fi.Size()/2)
		}},
		{"truncated by one byte", false, "corrupt", false, func(t *testing.T, _, e string) {
			fi, _ := os.Stat(e)
			os.Truncate(e, fi.Size()-1)
		}},
		{"byte flipped", false, "corrupt", false, func(t *testing.T, _, e string) {
			b, _ := os.ReadFile(e)
			ef, err := elf.NewFile(bytes.NewReader(b))
			if err != nil || ef.Section(".text") == nil {
				t.Fatalf("the entry's image: %v, or no .text", err)
			}
			b[ef.Section(".text").Offset+3] ^= 0x10
			os.WriteFile(e, b, 0o644)
		}},
		{"other format version", false, "", false, func(t *testing.T, _, e string) {
			b, _ := os.ReadFile(e)
			b[len(b)-4]++
			os.WriteFile(e, b, 0o644)
		}},
		{"other elfimage build", false, "", false, func(t *testing.T, cache, e string) {
			// An intact entry whose key names another compiler.
			c, _ := ccache.Open(cache)
			opts, _ := linkOptions(5, false, false)
			b, _ := os.ReadFile(e)
			src := regexp.MustCompile(`source "([^"]+)"`).FindSubmatch(b)
			r, err := c.Load(ccache.Source{Path: string(src[1]), Compile: scheme.Compile, Link: opts, Compiler: "elfimage v0.0.1"}, nil)
			if err != nil || r.Path != e {
				t.Fatalf("other build's entry: %v at %s", err, r.Path)
			}
			r.Close()
		}},
		{"entry mode 0666", false, "writable by group or others", false, func(t *testing.T, _, e string) { os.Chmod(e, 0o666) }},
		{"entry owned by uid 4242", true, "owned by uid 4242", false, func(t *testing.T, _, e string) { os.Chown(e, 4242, 4242) }},
		{"directory mode 0777", false, "writable by group or others", true, func(t *testing.T, c, _ string) { os.Chmod(c, 0o777) }},
		{"directory owned by uid 4242", true, "owned by uid 4242", true, func(t *testing.T, c, _ string) { os.Chown(c, 4242, 4242) }},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			if c.root && !root {
				t.Skip("chown to another user needs root")
			}
			cache := testCache(t)
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			src := filepath.Join(t.TempDir(), "prog.scm")
			writeSource(t, src, prog42)
			entry := poison(t, cache, src)
			c.harm(t, cache, entry)
			code, out, errOut := runCLI(t, "run", src)
			if code != 0 || out != "42\n" {
				t.Fatalf("exit %d, output %q (want 42: %q is the rejected entry's), stderr %q", code, out, "666\n", errOut)
			}
			switch {
			case c.warn == "" && errOut != "":
				t.Errorf("stderr %q, want nothing", errOut)
			case c.warn != "" && (strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "elfimage run: warning: ") || !strings.Contains(errOut, c.warn)):
				t.Errorf("stderr %q, want one warning line saying %q", errOut, c.warn)
			case c.dir && !strings.Contains(errOut, "will not find"):
				t.Errorf("stderr %q does not say the temporary image will be gone", errOut)
			}
			if des, _ := os.ReadDir(tmp); len(des) != 0 {
				t.Errorf("temporary files left in TMPDIR: %v", des)
			}
			if c.dir {
				return
			}
			ino := inodeOf(t, entry)
			if code, out, errOut := runCLI(t, "run", src); code != 0 || out != "42\n" || errOut != "" || inodeOf(t, entry) != ino {
				t.Errorf("next run: exit %d, %q, %q, entry rewritten %v; want the rebuilt entry reused", code, out, errOut, inodeOf(t, entry) != ino)
			}
		})
	}
}

// cliCommand is the CLI (this test binary, see perfAsCLI) with args, run
// by qemu-aarch64 when the test binary runs under qemu-user
// (qemutest.Command).
func cliCommand(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := qemutest.Command(context.Background(), t, exe, args...)
	cmd.Env = append(os.Environ(), perfAsCLI+"=1")
	return cmd
}

// TestRunCacheUnwritable: a cache directory that cannot be written, or
// cannot be created, gives one warning that the image goes to a temporary
// file, the program runs from there, and the temporary file is gone
// afterwards. As root, whom permissions do not stop, the unwritable case
// runs the CLI as uid 65534 (nobody).
func TestRunCacheUnwritable(t *testing.T) {
	t.Run("cannot create", func(t *testing.T) {
		xdg := filepath.Join(t.TempDir(), "file")
		writeSource(t, xdg, "") // a file where the cache's parent should be
		t.Setenv("XDG_CACHE_HOME", xdg)
		tmp := t.TempDir()
		t.Setenv("TMPDIR", tmp)
		src := filepath.Join(t.TempDir(), "prog.scm")
		writeSource(t, src, prog42)
		code, out, errOut := runCLI(t, "run", src)
		if code != 0 || out != "42\n" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "not using the compile cache") || !strings.Contains(errOut, "not a directory") {
			t.Errorf("exit %d, %q, stderr %q", code, out, errOut)
		}
		if des, _ := os.ReadDir(tmp); len(des) != 0 {
			t.Errorf("temporary files left: %v", des)
		}
	})
	t.Run("read-only", func(t *testing.T) {
		base, err := os.MkdirTemp("", "elfimage-ro-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(base) })
		os.Chmod(base, 0o755)
		xdg, tmp := filepath.Join(base, "xdg"), filepath.Join(base, "tmp")
		cache := filepath.Join(xdg, "elfimage")
		src := filepath.Join(base, "prog.scm")
		writeSource(t, src, prog42)
		for _, d := range []string{xdg, cache, tmp} {
			if err := os.Mkdir(d, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		var cmd *exec.Cmd
		if os.Geteuid() == 0 {
			const nobody = 65534
			exe, _ := os.Executable()
			cli := filepath.Join(base, "elfimage")
			b, err := os.ReadFile(exe)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(cli, b, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, d := range []string{xdg, cache, tmp} {
				os.Chown(d, nobody, nobody)
			}
			cmd = qemutest.Command(context.Background(), t, cli, "run", src)
			cmd.Env = append(os.Environ(), perfAsCLI+"=1")
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		} else {
			cmd = cliCommand(t, "run", src)
		}
		os.Chmod(cache, 0o500)
		cmd.Env = append(cmd.Env, "XDG_CACHE_HOME="+xdg, "TMPDIR="+tmp, "HOME="+tmp)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil || stdout.String() != "42\n" {
			t.Fatalf("%v: %v, output %q, stderr %q", cmd.Args, err, stdout.String(), stderr.String())
		}
		if e := stderr.String(); strings.Count(e, "\n") != 1 || !strings.Contains(e, "warning: cannot write the compile cache "+cache) || !strings.Contains(e, "will not find afterwards") {
			t.Errorf("stderr %q, want one warning line about the unwritable cache", e)
		}
		if des, _ := os.ReadDir(tmp); len(des) != 0 {
			t.Errorf("temporary files left: %v", des)
		}
		if des, _ := os.ReadDir(cache); len(des) != 0 {
			t.Errorf("files in the read-only cache: %v", des)
		}
	})
}

// TestRunCacheConcurrent: processes running the same source at once into
// an empty cache all run it, warn of nothing, and leave one intact entry
// and no temporary file; processes running while the cache is cleared
// over and over all run it too.
func TestRunCacheConcurrent(t *testing.T) {
	cache := testCache(t)
	src := filepath.Join(t.TempDir(), "prog.scm")
	writeSource(t, src, prog42)
	const procs = 8
	start := func() ([]*exec.Cmd, []*bytes.Buffer, []*bytes.Buffer) {
		var cmds []*exec.Cmd
		var outs, errs []*bytes.Buffer
		for range procs {
			cmd := cliCommand(t, "run", src)
			var o, e bytes.Buffer
			cmd.Stdout, cmd.Stderr = &o, &e
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds, outs, errs = append(cmds, cmd), append(outs, &o), append(errs, &e)
		}
		return cmds, outs, errs
	}
	cmds, outs, errs := start()
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil || outs[i].String() != "42\n" || errs[i].Len() != 0 {
			t.Errorf("process %d: %v, output %q, stderr %q", i, err, outs[i], errs[i])
		}
	}
	des, err := os.ReadDir(cache)
	if err != nil || len(des) != 1 {
		t.Fatalf("cache holds %v (%v), want one entry", des, err)
	}
	entry := filepath.Join(cache, des[0].Name())
	ino := inodeOf(t, entry)
	if code, out, errOut := runCLI(t, "run", src); code != 0 || out != "42\n" || errOut != "" || inodeOf(t, entry) != ino {
		t.Errorf("run after the concurrent runs: exit %d, %q, %q; entry rewritten %v", code, out, errOut, inodeOf(t, entry) != ino)
	}

	c, err := ccache.Open(cache)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				c.Clear()
				time.Sleep(time.Millisecond)
			}
		}
	}()
	cmds, outs, errs = start()
	for i, cmd := range cmds {
		err := cmd.Wait()
		for _, l := range strings.Split(strings.TrimSpace(errs[i].String()), "\n") {
			if l != "" && !strings.Contains(l, "temporary file") {
				t.Errorf("process %d (cache cleared meanwhile): %s", i, l)
			}
		}
		if err != nil || outs[i].String() != "42\n" {
			t.Errorf("process %d (cache cleared meanwhile): %v, output %q, stderr %q", i, err, outs[i], errs[i])
		}
	}
	close(stop)
	wg.Wait()
}

// TestRunCacheEviction: with ELFIMAGE_CACHE_SIZE room for two entries, a
// third run evicts the least recently used entry; a reuse counts as a use.
func TestRunCacheEviction(t *testing.T) {
	cache := testCache(t)
	dir := t.TempDir()
	var srcs, ents []string
	for i := range 3 {
		s := filepath.Join(dir, fmt.Sprintf("p%d.scm", i))
		writeSource(t, s, prog42)
		srcs = append(srcs, s)
	}
	for _, s := range srcs[:2] {
		if code, _, errOut := runCLI(t, "run", s); code != 0 {
			t.Fatal(errOut)
		}
		e := entries(t, cache)
		ents = append(ents, e[len(e)-1])
	}
	if len(entries(t, cache)) != 2 {
		t.Fatalf("entries %q", entries(t, cache))
	}
	slicesSortByName(ents, srcs)
	fi, _ := os.Stat(ents[0])
	t.Setenv(ccache.EnvCacheSize, strconv.FormatInt(fi.Size()*5/2, 10))
	old := time.Now().Add(-2 * time.Hour)
	os.Chtimes(ents[0], old, old)
	os.Chtimes(ents[1], old.Add(time.Hour), old.Add(time.Hour))
	runCLI(t, "run", srcs[0]) // p0 becomes the most recently used
	runCLI(t, "run", srcs[2]) // evicts p1
	got := entries(t, cache)
	var names []string
	for _, e := range got {
		names = append(names, strings.SplitN(filepath.Base(e), "-", 2)[0])
	}
	if strings.Join(names, " ") != "p0 p2" {
		t.Errorf("after eviction: %q, want p0 and p2", got)
	}
}

// slicesSortByName orders ents so that ents[i] is the entry of srcs[i]
// (entries are named after their source's base name).
func slicesSortByName(ents, srcs []string) {
	for i, s := range srcs[:len(ents)] {
		base := strings.TrimSuffix(filepath.Base(s), ".scm") + "-"
		for j := range ents {
			if strings.HasPrefix(filepath.Base(ents[j]), base) {
				ents[i], ents[j] = ents[j], ents[i]
			}
		}
	}
}

// nativeSpin runs for some seconds in one native loop (it ends on its
// own should a signal fail to end it).
const nativeSpin = "(define (spin n acc)\n  (let loop ((i 0) (a acc))\n    (if (< i n) (loop (+ i 1) (+ (* a 3) (remainder i 7))) a)))\n(define (main) (display (spin 4000000000 1)))\n"

// TestRunSignalCleanup: SIGINT or SIGTERM arriving while the program runs
// native code removes run's temporary image (the cache off, and the cache
// unwritable), and the shell sees the conventional status 130 or 143.
func TestRunSignalCleanup(t *testing.T) {
	bash := tooltest.Require(t, "bash")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	qemu := ""
	if qemutest.Emulated() != "" {
		qemu = tooltest.Require(t, "qemu-aarch64")
	}
	src := filepath.Join(t.TempDir(), "spin.scm")
	writeSource(t, src, nativeSpin)
	for _, c := range []struct {
		sig    string
		status string
		args   string
	}{{"INT", "130", "-cache=off"}, {"TERM", "143", "-cache=off"}, {"TERM", "143", "-cache=" + filepath.Join(t.TempDir(), "nodir", "x")}} {
		tmp := t.TempDir()
		if strings.Contains(c.args, "nodir") {
			writeSource(t, filepath.Dir(strings.TrimPrefix(c.args, "-cache=")), "") // not a directory
		}
		// Wait for the image to exist, then for the program to be in its
		// loop (its CPU time grows), then signal it. set -m: the job
		// gets SIGINT (a script's background jobs ignore it otherwise).
		// Under qemu-user (qemutest.Emulated) $QEMU is qemu-aarch64:
		// the signal goes to qemu, which delivers it to the program and
		// dies of it as the program does.
		script := `set -m; $QEMU "$CLI" run $ARGS "$SRC" & pid=$!
until ls "$TMPDIR"/elfimage-spin-*/spin.elf >/dev/null 2>&1; do sleep 0.02; done
t0=$(cut -d' ' -f14 /proc/$pid/stat); until [ "$(cut -d' ' -f14 /proc/$pid/stat)" -gt "$t0" ]; do sleep 0.02; done
kill -` + c.sig + ` $pid; wait $pid; echo "status $?"`
		cmd := exec.Command(bash, "-c", script)
		cmd.Env = append(os.Environ(), perfAsCLI+"=1", "CLI="+exe, "SRC="+src, "ARGS="+c.args, "TMPDIR="+tmp, "QEMU="+qemu)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.HasSuffix(string(out), "status "+c.status+"\n") {
			t.Errorf("SIG%s %s: %v, output %q; want status %s", c.sig, c.args, err, out, c.status)
		}
		if des, _ := os.ReadDir(tmp); len(des) != 0 {
			t.Errorf("SIG%s %s: temporary files left: %v", c.sig, c.args, des)
		}
	}
}

// TestPerfCache is the newcomer's path of issue 12: after `elfimage run
// hot.scm`, with no flag, `perf report --sort sym,srcline` names spin with
// hot.scm:LINE (lines of spin's code per the cached image's line table),
// and addr2line, gdb and elfimage symbolize read the cached image.
func TestPerfCache(t *testing.T) {
	f := setupPerf(t)
	addr2line := tooltest.Require(t, "addr2line")
	gdb := tooltest.Require(t, "gdb")
	cache := testCache(t)
	data := filepath.Join(t.TempDir(), "cache.data")
	f.record(t, data, nil, []string{"run", f.src})
	ents := entries(t, cache)
	if len(ents) != 1 {
		t.Fatalf("cache holds %q after run, want one entry", ents)
	}
	// The cached image's own procedures and lines are the reference.
	cf := *f
	cf.img = ents[0]
	im, err := elfimage.Open(cf.img, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { im.Close() })
	ps, err := im.Procedures()
	if err != nil {
		t.Fatal(err)
	}
	cf.procs = map[string]elfimage.Procedure{}
	for _, p := range ps {
		cf.procs[p.Name] = p
	}
	if cf.tab, err = im.LineTable(); err != nil {
		t.Fatal(err)
	}
	spin := cf.procs["spin"]
	spinLines := map[int]bool{}
	for a := spin.Start; a < spin.Start+spin.Size; a++ {
		if file, l := cf.lineAt(a); l > 0 && file == "hot.scm" {
			spinLines[l] = true
		}
	}

	// The user's command, as typed.
	report := f.perfOutput(t, "report", "--stdio", "-i", data, "--sort", "sym,srcline")
	row := regexp.MustCompile(`(?m)^\s+([0-9.]+)%\s+\[\.\] spin\s+hot\.scm:(\d+)\s*$`)
	var pct float64
	for _, m := range row.FindAllStringSubmatch(report, -1) {
		p, _ := strconv.ParseFloat(m[1], 64)
		l, _ := strconv.Atoi(m[2])
		if !spinLines[l] {
			t.Errorf("perf report: %.2f%% in spin at hot.scm:%d, a line spin's code does not have (%v)", p, l, spinLines)
		}
		pct += p
	}
	if pct <= 50 {
		t.Errorf("perf report --sort sym,srcline gives spin at hot.scm:LINE %.2f%% of the samples, want > 50%%:\n%s", pct, report)
	}
	// The same rows with their DSO: the cached image.
	rows := parseReport(t, f.perfOutput(t, "report", "--stdio", "-i", data, "-t", "|", "--sort", "dso,sym,srcline"))
	cf.checkSrclines(t, rows, func(d string) bool { return d == filepath.Base(cf.img) })

	// addr2line, elfimage symbolize and gdb on the cached file.
	var addrs []string
	for _, a := range []uint64{spin.Start, spin.Start + spin.Size/2, cf.procs["work"].Start + 4} {
		addrs = append(addrs, fmt.Sprintf("%#x", a))
	}
	out, err := exec.Command(addr2line, append([]string{"-f", "-e", cf.img}, addrs...)...).Output()
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, s := range addrs {
		a, _ := strconv.ParseUint(s[2:], 16, 64)
		p, _ := cf.procAt(a)
		_, l := cf.lineAt(a)
		fmt.Fprintf(&want, "%s\n%s:%d\n", p.Name, f.src, l)
	}
	if string(out) != want.String() {
		t.Errorf("addr2line -f -e %s %v:\n%s\nwant:\n%s", cf.img, addrs, out, want.String())
	}
	if code, sym, errOut := runCLI(t, append([]string{"symbolize", "-e", cf.img}, addrs...)...); code != 0 || sym != want.String() {
		t.Errorf("elfimage symbolize -e %s: exit %d\n%s%s\nwant:\n%s", cf.img, code, sym, errOut, want.String())
	}
	_, l := cf.lineAt(spin.Start)
	gout, err := tooltest.RunTool(t, exec.Command(gdb, "-q", "-nx", "-batch", "-ex", "info line spin", "-ex", "list spin,+1", cf.img), 3*time.Minute)
	if err != nil || !strings.Contains(gout, fmt.Sprintf("Line %d of %q starts at address %#x <spin>", l, f.src, spin.Start)) ||
		!strings.Contains(gout, "(define (spin n acc)") {
		t.Errorf("gdb -batch on %s: %v\n%s", cf.img, err, gout)
	}
}

// TestErrorPrefix: an error line has one prefix, the command's.
func TestErrorPrefix(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.elf")
	writeSource(t, junk, "\x7fELFjunk")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", filepath.Join(dir, "missing.elf")}, "elfimage run: open " + filepath.Join(dir, "missing.elf") + ": no such file or directory\n"},
		{[]string{"run", junk}, "elfimage run: " + junk + ": ELF header at offset 0x8: file is 8 bytes, shorter than the 64-byte ELF header\n"},
		{[]string{"dump", junk}, "elfimage dump: " + junk + ": ELF header"},
		{[]string{"describe", junk, "0x10"}, "elfimage describe: " + junk + ": ELF header"},
		{[]string{"symbolize", "-e", junk, "0x10"}, "elfimage symbolize: "},
	} {
		code, _, errOut := runCLI(t, c.args...)
		if code != 1 || !strings.HasPrefix(errOut, c.want) || strings.Count(errOut, "elfimage") != 1 || strings.Count(errOut, c.args[0]+":") != 1 {
			t.Errorf("%v: exit %d, %q; want exit 1 and %q with one prefix", c.args, code, errOut, c.want)
		}
	}
}

// TestFlagConventions: flags with an optional value show as -flag[=VALUE]
// in every command's -h and take the value after '='; the space form
// gives a usage error that shows the right form; usage errors exit 2.
func TestFlagConventions(t *testing.T) {
	spaceForm := regexp.MustCompile(`(?m)^\s+-jitdump DIR|^\s+-i true|^\s+-i$`)
	for _, c := range commands {
		_, _, help := runCLI(t, c.name, "-h")
		if spaceForm.MatchString(help) {
			t.Errorf("%s -h shows an optional value with a space:\n%s", c.name, help)
		}
		if strings.Contains(help, "[=") && !strings.Contains(help, "takes its value only after '='") {
			t.Errorf("%s -h has optional values but no note on the '=' form:\n%s", c.name, help)
		}
	}
	if _, _, help := runCLI(t, "run", "-h"); !strings.Contains(help, "  -jitdump[=DIR]\n") || !strings.Contains(help, "Compile cache.") || !strings.Contains(help, "ELFIMAGE_CACHE=off|DIR") {
		t.Errorf("run -h:\n%s", help)
	}
	if _, _, help := runCLI(t, "symbolize", "-h"); !strings.Contains(help, "  -i[=false]\n") {
		t.Errorf("symbolize -h:\n%s", help)
	}

	src := filepath.Join(t.TempDir(), "p.scm")
	writeSource(t, src, prog42)
	jd := t.TempDir()
	code, _, errOut := runCLI(t, "run", "-jitdump", jd, src)
	if code != 2 || !strings.Contains(errOut, "-jitdump="+jd) {
		t.Errorf("run -jitdump DIR: exit %d, %q; want 2 and the -jitdump=DIR form", code, errOut)
	}
	code, out, errOut := runCLI(t, "run", "-jitdump="+jd, src)
	dump := filepath.Join(jd, fmt.Sprintf("jit-%d.dump", os.Getpid()))
	if _, err := os.Stat(dump); code != 0 || out != "42\n" || err != nil {
		t.Errorf("run -jitdump=DIR: exit %d, %q %s; %v", code, out, errOut, err)
	}
	os.Remove(dump)

	for _, args := range [][]string{
		{"run"}, {"run", src, src}, {"build"}, {"describe", src}, {"cache", "x"}, {"cache", "-list", "-clear"},
		{"symbolize", "-e", src, "-i", "false", "0x1"}, {"run", "-nosuchflag", src}, {"run", "-dwarf", "7", src},
	} {
		if code, _, errOut := runCLI(t, args...); code != 2 || errOut == "" {
			t.Errorf("%v: exit %d, %q; want a usage error, exit 2", args, code, errOut)
		}
	}
}

// TestDescribeFrictions: a malformed address is a usage error that says
// what an address is (as -h does); an unknown declaration is left out.
func TestDescribeFrictions(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "p.elf")
	mod, err := scheme.Compile("p.scm", []byte("(define (f n m)\n  (+ n m))\n(define (main) (display (f 1 2)))\n"))
	if err != nil {
		t.Fatal(err)
	}
	var f *elfimage.Proc
	for _, p := range mod.Procs {
		if p.Name == "f" {
			f = p
		}
	}
	f.Params[1].Line, f.Params[1].Column = 0, 0 // m's declaration unknown
	if err := elfimage.WriteFile(img, mod, elfimage.LinkOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "describe", img, "zz")
	if code != 2 || out != "" || !strings.Contains(errOut, `address "zz" is not a hexadecimal number`) || !strings.Contains(errOut, "link-time addresses in hexadecimal") {
		t.Errorf("describe IMG zz: exit %d, %q, %q", code, out, errOut)
	}
	if _, _, help := runCLI(t, "describe", "-h"); !strings.Contains(help, "ADDR is a link-time address in hexadecimal") {
		t.Errorf("describe -h:\n%s", help)
	}
	im, err := elfimage.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	ps, err := im.Procedures()
	if err != nil {
		t.Fatal(err)
	}
	var p elfimage.Procedure
	for _, q := range ps {
		if q.Name == "f" {
			p = q
		}
	}
	var at uint64
	for a := p.Start; a < p.Start+p.Size && at == 0; a++ {
		if ls, _ := im.Locals(a); len(ls) == 2 {
			at = a
		}
	}
	if at == 0 {
		t.Fatal("no address where both parameters of f are live")
	}
	code, out, errOut = runCLI(t, "describe", img, fmt.Sprintf("%x", at))
	if code != 0 || !regexp.MustCompile(`live parameter n \(declared 1:\d+, depth 0\)`).MatchString(out) ||
		!strings.Contains(out, "live parameter m (depth 0) in ") || strings.Contains(out, "declared 0") {
		t.Errorf("describe %#x: exit %d\n%s%s", at, code, out, errOut)
	}
}
