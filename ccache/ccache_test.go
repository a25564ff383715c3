package ccache

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/lang/scheme"
)

// progA and progB are two programs; each test source starts as progA.
const (
	progA = "(define (f n) (+ n 1))\n(define (main) (display (f 41)))\n"
	progB = "(define (g n) (* n 2))\n(define (main) (display (g 21)))\n"
)

// fixture is a cache in a test directory and a source file beside it.
type fixture struct {
	c     *Cache
	src   string
	warns []string
	mu    sync.Mutex
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	c, err := Open(filepath.Join(dir, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{c: c, src: filepath.Join(dir, "prog.scm")}
	c.Warn = func(m string) {
		f.mu.Lock()
		f.warns = append(f.warns, m)
		f.mu.Unlock()
	}
	if err := os.WriteFile(f.src, []byte(progA), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// source is the Source of f.src compiled by lang/scheme.
func (f *fixture) source() Source {
	return Source{Path: f.src, Compile: scheme.Compile, Compiler: "test compiler 1"}
}

// procs returns the names of r's procedures that are not internal.
func procs(t *testing.T, r *Result) string {
	t.Helper()
	ps, err := r.Image.Procedures()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range ps {
		if !strings.HasPrefix(p.Name, "%") {
			names = append(names, p.Name)
		}
	}
	return strings.Join(names, " ")
}

func (f *fixture) load(t *testing.T, s Source) *Result {
	t.Helper()
	r, err := f.c.Load(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func (f *fixture) takeWarns() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.warns
	f.warns = nil
	return w
}

// TestLoadReuse: a miss stores an entry that the next Load reuses (same
// file, not rewritten); each part of the key, when changed, rebuilds.
func TestLoadReuse(t *testing.T) {
	f := newFixture(t)
	r := f.load(t, f.source())
	if r.Hit || r.Temporary || filepath.Dir(r.Path) != f.c.Dir() || procs(t, r) != "f main" {
		t.Fatalf("first load: %+v, procs %q", r, procs(t, r))
	}
	if !r.Image.Mapped() {
		t.Errorf("image not mapped from its file")
	}
	st0 := inode(t, r.Path)
	r2 := f.load(t, f.source())
	if !r2.Hit || r2.Path != r.Path || inode(t, r2.Path) != st0 {
		t.Fatalf("second load: hit %v, path %s (first %s), inode changed %v", r2.Hit, r2.Path, r.Path, inode(t, r2.Path) != st0)
	}
	// Each key part: a miss, and a load of the new key afterwards hits.
	changes := []struct {
		name string
		edit func(s *Source)
	}{
		{"compiler", func(s *Source) { s.Compiler = "test compiler 2" }},
		{"link options", func(s *Source) { s.Link.DebugFrame = true }},
		{"extra options", func(s *Source) { s.Extra = "-O2" }},
	}
	for _, ch := range changes {
		s := f.source()
		ch.edit(&s)
		if r := f.load(t, s); r.Hit {
			t.Errorf("%s changed: the old entry was reused", ch.name)
		}
		if r := f.load(t, s); !r.Hit {
			t.Errorf("%s changed: the new entry was not reused", ch.name)
		}
	}
	if err := os.WriteFile(f.src, []byte(progB), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := f.load(t, f.source()); r.Hit || procs(t, r) != "g main" {
		t.Errorf("source changed: hit %v, procs %q", r.Hit, procs(t, r))
	}
	if w := f.takeWarns(); len(w) != 0 {
		t.Errorf("warnings for stale entries: %q", w)
	}
	if fi, err := os.Stat(f.c.Dir()); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("cache directory mode %v, %v; want 0700", fi.Mode(), err)
	}
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// TestEntryIsImage: the entry is an ELF file that debug/elf reads like the
// plain image: the trailer does not disturb a reader of the section table.
func TestEntryIsImage(t *testing.T) {
	f := newFixture(t)
	r := f.load(t, f.source())
	data, err := os.ReadFile(r.Path)
	if err != nil {
		t.Fatal(err)
	}
	n, k, err := decodeEntry(data)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := scheme.Compile(f.src, []byte(progA))
	if err != nil {
		t.Fatal(err)
	}
	want, err := elfimage.Link(mod, elfimage.LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data[:n], want) {
		t.Errorf("the entry's image (%d bytes) differs from Link's output (%d bytes)", n, len(want))
	}
	abs, _ := filepath.Abs(f.src)
	if k.Source != abs || k.Compiler != "test compiler 1" {
		t.Errorf("key %+v", k)
	}
}

// TestCorruptEntries: a truncated entry, one with any byte flipped (at
// sampled positions over the whole file), and a symbolic link are never
// loaded: Load warns (or, for a format version change, says nothing),
// rebuilds, and the rebuilt entry is intact.
func TestCorruptEntries(t *testing.T) {
	f := newFixture(t)
	r := f.load(t, f.source())
	good, err := os.ReadFile(r.Path)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	type damage struct {
		name string
		make func() []byte
		warn string // "" when no warning is due
	}
	var cases []damage
	for _, n := range []int{0, 1, 64, len(good) / 2, len(good) - footerSize, len(good) - 1} {
		cases = append(cases, damage{fmt.Sprintf("truncated to %d", n), func() []byte { return good[:n] }, "corrupt"})
	}
	flips := []int{len(good) - 1, len(good) - 6, len(good) - 10, len(good) - 20, len(good) - 40, len(good) - 60}
	for i := 0; i < len(good); i += 1 + len(good)/97 {
		flips = append(flips, i)
	}
	for _, i := range flips {
		warn := "corrupt"
		if i >= len(good)-4 { // the footer's format version: a version change
			warn = ""
		}
		cases = append(cases, damage{fmt.Sprintf("byte %#x of %#x flipped", i, len(good)), func() []byte {
			b := bytes.Clone(good)
			b[i] ^= 0x40
			return b
		}, warn})
	}
	cases = append(cases, damage{"format version 2", func() []byte {
		b := bytes.Clone(good)
		b[len(b)-4] = 2
		return b
	}, ""})
	for _, c := range cases {
		if err := os.WriteFile(r.Path, c.make(), 0o644); err != nil {
			t.Fatal(err)
		}
		r2, err := f.c.Load(f.source(), nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, _ := os.ReadFile(r2.Path)
		r2.Close()
		w := f.takeWarns()
		switch {
		case r2.Hit:
			t.Errorf("%s: the damaged entry was loaded", c.name)
		case !bytes.Equal(got, good):
			t.Errorf("%s: the rebuilt entry differs from the original", c.name)
		case c.warn != "" && (len(w) != 1 || !strings.Contains(w[0], c.warn)):
			t.Errorf("%s: warnings %q, want one saying %q", c.name, w, c.warn)
		case c.warn == "" && len(w) != 0:
			t.Errorf("%s: warnings %q, want none", c.name, w)
		}
	}
	// A symbolic link to an intact entry is not followed.
	other := filepath.Join(t.TempDir(), "other.elf")
	os.WriteFile(other, good, 0o644)
	os.Remove(r.Path)
	if err := os.Symlink(other, r.Path); err != nil {
		t.Fatal(err)
	}
	r3 := f.load(t, f.source())
	if w := f.takeWarns(); r3.Hit || len(w) != 1 || !strings.Contains(w[0], "symbolic link") {
		t.Errorf("symbolic link entry: hit %v, warnings %q", r3.Hit, w)
	}
	if fi, err := os.Lstat(r.Path); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the link was not replaced by a file: %v %v", fi.Mode(), err)
	}
}

// poison stores, under f.source()'s key, the image of progB: an entry
// that passes every check but does not hold what the source says. Tests
// use it to show that an entry failing a trust check is not run: were it
// used, its procedures would be g and main.
func (f *fixture) poison(t *testing.T) string {
	t.Helper()
	s := f.source()
	s.Compile = func(path string, _ []byte) (*elfimage.Module, error) {
		return scheme.Compile(path, []byte(progB))
	}
	r, err := f.c.Load(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	// Control: trusted, the poisoned entry is used.
	if r := f.load(t, f.source()); !r.Hit || procs(t, r) != "g main" {
		t.Fatalf("control: poisoned entry not used (hit %v, procs %q)", r.Hit, procs(t, r))
	}
	return r.Path
}

// TestUntrustedEntry: an entry writable by group or others, or owned by
// another user, is not loaded: Load warns saying why and rebuilds.
func TestUntrustedEntry(t *testing.T) {
	for _, c := range []struct {
		name, warn string
		spoil      func(path string) error
	}{
		{"mode 0666", "writable by group or others", func(p string) error { return os.Chmod(p, 0o666) }},
		{"mode 0620", "writable by group or others", func(p string) error { return os.Chmod(p, 0o620) }},
		{"owner 12345", "owned by uid 12345", func(p string) error { return os.Chown(p, 12345, 12345) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			if strings.HasPrefix(c.name, "owner") && os.Geteuid() != 0 {
				t.Skip("chown to another user needs root")
			}
			f := newFixture(t)
			path := f.poison(t)
			if err := c.spoil(path); err != nil {
				t.Fatal(err)
			}
			r := f.load(t, f.source())
			w := f.takeWarns()
			if r.Hit || procs(t, r) != "f main" {
				t.Errorf("untrusted entry used: hit %v, procs %q", r.Hit, procs(t, r))
			}
			if len(w) != 1 || !strings.Contains(w[0], c.warn) || !strings.Contains(w[0], path) {
				t.Errorf("warnings %q, want one naming %s and saying %q", w, path, c.warn)
			}
			fi, err := os.Stat(path)
			if err != nil || untrusted(fi, false) != "" {
				t.Errorf("entry not replaced by a trusted one: %v %v", fi.Mode(), err)
			}
		})
	}
}

// TestUntrustedDir: Open refuses a directory writable by group or others,
// or owned by another user, or that is not a directory.
func TestUntrustedDir(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, want string
		make       func(p string) error
	}{
		{"mode 0777", "writable by group or others", func(p string) error {
			if err := os.Mkdir(p, 0o700); err != nil {
				return err
			}
			return os.Chmod(p, 0o777)
		}},
		{"mode 0730", "writable by group or others", func(p string) error {
			if err := os.Mkdir(p, 0o700); err != nil {
				return err
			}
			return os.Chmod(p, 0o730)
		}},
		{"owner 12345", "owned by uid 12345", func(p string) error {
			if err := os.Mkdir(p, 0o700); err != nil {
				return err
			}
			return os.Chown(p, 12345, 12345)
		}},
		{"a file", "not a directory", func(p string) error { return os.WriteFile(p, nil, 0o600) }},
	} {
		if strings.HasPrefix(c.name, "owner") && os.Geteuid() != 0 {
			t.Logf("%s: skipped: chown to another user needs root", c.name)
			continue
		}
		p := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
		if err := c.make(p); err != nil {
			t.Fatal(err)
		}
		_, err := Open(p)
		if c.name == "a file" {
			if err == nil || !strings.Contains(err.Error(), "not a directory") {
				t.Errorf("%s: Open: %v", c.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Open: %v, want ErrUntrusted saying %q", c.name, err, c.want)
		}
	}
}

// TestReplacedWhileLoading: when the file mapped is not the file checked
// (another process renamed its entry in between), openChecked says so, and
// Load retries and ends with an image it checked.
func TestReplacedWhileLoading(t *testing.T) {
	f := newFixture(t)
	r := f.load(t, f.source())
	path := r.Path
	checked, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	n, _, err := decodeEntry(checked)
	if err != nil {
		t.Fatal(err)
	}
	// Another process's entry for another source text.
	mod, err := scheme.Compile(f.src, []byte(progB))
	if err != nil {
		t.Fatal(err)
	}
	b, err := elfimage.Link(mod, elfimage.LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	k := Key{Source: "x"}
	if err := os.WriteFile(path, appendEntry(b, &k), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.openChecked(path, checked[:n], nil); !errors.Is(err, errChanged) {
		t.Errorf("openChecked of a replaced file: %v, want errChanged", err)
	}
	// The same image, but its read-only bytes changed after the check.
	ef, err := elf.NewFile(bytes.NewReader(checked))
	if err != nil {
		t.Fatal(err)
	}
	text := ef.Section(".text")
	if text == nil || text.Size <= 8 {
		t.Fatalf("the entry's image has no .text of more than 8 bytes: %v", text)
	}
	mutated := bytes.Clone(checked)
	mutated[text.Offset+8] ^= 0xff
	os.WriteFile(path, mutated, 0o644)
	if _, err := f.c.openChecked(path, checked[:n], nil); !errors.Is(err, errChanged) {
		t.Errorf("openChecked of a changed text byte: %v, want errChanged", err)
	}
}

// TestConcurrentLoads: goroutines loading the same source into an empty
// cache at once, while another one clears the cache, all get a checked
// image of the right program; the cache ends with one intact entry and no
// temporary file.
func TestConcurrentLoads(t *testing.T) {
	f := newFixture(t)
	const workers, rounds = 16, 8
	stop := make(chan struct{})
	var clearer sync.WaitGroup
	clearer.Add(1)
	go func() {
		defer clearer.Done()
		for {
			select {
			case <-stop:
				return
			default:
				f.c.Clear()
				time.Sleep(time.Millisecond)
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				r, err := f.c.Load(f.source(), nil)
				if err != nil {
					errs <- err
					continue
				}
				ps, err := r.Image.Procedures()
				if err != nil || len(ps) == 0 {
					errs <- fmt.Errorf("procedures: %v %v", ps, err)
				}
				r.Close()
			}
		}()
	}
	wg.Wait()
	close(stop)
	clearer.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, w := range f.takeWarns() {
		if !strings.Contains(w, "temporary file") { // a cleared temporary file falls back
			t.Errorf("warning: %s", w)
		}
	}
	r := f.load(t, f.source())
	des, _ := os.ReadDir(f.c.Dir())
	if len(des) != 1 || des[0].Name() != filepath.Base(r.Path) {
		t.Errorf("cache holds %v, want only %s", des, filepath.Base(r.Path))
	}
}

// TestTrim: Load evicts the least recently used entries beyond MaxBytes;
// a hit counts as a use; stale temporary files go.
func TestTrim(t *testing.T) {
	f := newFixture(t)
	dir := filepath.Dir(f.src)
	var paths []string
	load := func(i int) *Result {
		src := filepath.Join(dir, fmt.Sprintf("p%d.scm", i))
		if _, err := os.Stat(src); err != nil {
			os.WriteFile(src, []byte(progA), 0o644)
		}
		s := f.source()
		s.Path = src
		r := f.load(t, s)
		r.Close()
		return r
	}
	for i := range 2 {
		paths = append(paths, load(i).Path)
	}
	fi, _ := os.Stat(paths[0])
	f.c.MaxBytes = fi.Size()*2 + fi.Size()/2 // two entries fit, three do not
	old := time.Now().Add(-3 * time.Hour)
	os.Chtimes(paths[0], old, old)
	os.Chtimes(paths[1], old.Add(time.Hour), old.Add(time.Hour))
	stale := filepath.Join(f.c.Dir(), ".p9-0123456789abcdef.elf.tmp-0000000000000001")
	fresh := filepath.Join(f.c.Dir(), ".p9-0123456789abcdef.elf.tmp-0000000000000002")
	os.WriteFile(stale, []byte("x"), 0o600)
	os.WriteFile(fresh, []byte("x"), 0o600)
	os.Chtimes(stale, old, old)
	if !load(0).Hit { // p0 is now the most recently used
		t.Fatal("p0 not reused")
	}
	paths = append(paths, load(2).Path) // evicts p1, the least recently used
	for i, want := range []bool{true, false, true} {
		if _, err := os.Stat(paths[i]); (err == nil) != want {
			t.Errorf("entry p%d present %v, want %v", i, err == nil, want)
		}
	}
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stale temporary file kept: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("fresh temporary file removed: %v", err)
	}
	// Entries are the most recently used first. p2 was written after p0's
	// hit, but the kernel's file clock ticks coarsely (a jiffy), so the
	// two may have the same time, and then either may come first.
	ents, err := f.c.Entries()
	if err != nil || len(ents) != 2 || ents[0].Used.Before(ents[1].Used) ||
		!(ents[0].Path == paths[2] && ents[1].Path == paths[0] ||
			ents[0].Path == paths[0] && ents[1].Path == paths[2] && ents[0].Used.Equal(ents[1].Used)) {
		t.Fatalf("Entries: %v %+v", err, ents)
	}
	p2 := ents[0]
	if p2.Path != paths[2] {
		p2 = ents[1]
	}
	if s := p2.Stale("test compiler 1"); s != "" {
		t.Errorf("current entry stale: %s", s)
	}
	if s := p2.Stale("test compiler 2"); !strings.Contains(s, "another compiler") {
		t.Errorf("entry of another compiler: %q", s)
	}
	os.WriteFile(filepath.Join(dir, "p2.scm"), []byte(progB), 0o644)
	if s := p2.Stale("test compiler 1"); s != "source changed" {
		t.Errorf("entry of a changed source: %q", s)
	}
	os.WriteFile(filepath.Join(f.c.Dir(), "README"), []byte("not ours"), 0o600)
	if n, _, err := f.c.Clear(); err != nil || n != 3 { // two entries, one temporary file
		t.Errorf("Clear removed %d, %v; want 3", n, err)
	}
	if des, _ := os.ReadDir(f.c.Dir()); len(des) != 1 || des[0].Name() != "README" {
		t.Errorf("after Clear: %v, want only README", des)
	}
}

// TestZeroCache: the zero Cache loads from a temporary file that Close
// removes, and tells Track about it first.
func TestZeroCache(t *testing.T) {
	f := newFixture(t)
	var tracked []string
	c := &Cache{Track: func(p string) func() { tracked = append(tracked, p); return func() {} }}
	r, err := c.Load(f.source(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Temporary || r.Hit || len(tracked) != 1 || !strings.HasPrefix(r.Path, tracked[0]+"/") {
		t.Errorf("result %+v, tracked %q", r, tracked)
	}
	r.Close()
	if _, err := os.Stat(tracked[0]); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("temporary directory left: %v", err)
	}
}

// TestEnv: the directory and bound the environment gives.
func TestEnv(t *testing.T) {
	for _, c := range []struct {
		cache, size, xdg, home string
		want                   Config
		err                    string
	}{
		{xdg: "/x", home: "/h", want: Config{Dir: "/x/elfimage", MaxBytes: DefaultMaxBytes}},
		{xdg: "rel", home: "/h", want: Config{Dir: "/h/.cache/elfimage", MaxBytes: DefaultMaxBytes}},
		{home: "/h", size: "1M", want: Config{Dir: "/h/.cache/elfimage", MaxBytes: 1 << 20}},
		{cache: "off", want: Config{Off: true, MaxBytes: DefaultMaxBytes}},
		{cache: "/c", size: "0", want: Config{Dir: "/c"}},
		{cache: "/c", size: "12x", err: "ELFIMAGE_CACHE_SIZE"},
		{home: "", err: "no cache directory"},
	} {
		t.Setenv(EnvCache, c.cache)
		t.Setenv(EnvCacheSize, c.size)
		t.Setenv("XDG_CACHE_HOME", c.xdg)
		t.Setenv("HOME", c.home)
		got, err := Env()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%+v: error %v, want %q", c, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%+v: %+v, %v; want %+v", c, got, err, c.want)
		}
	}
	for s, want := range map[string]int64{"0": 0, "512": 512, "4K": 4 << 10, "64m": 64 << 20, "1GiB": 1 << 30, "2MB": 2 << 20} {
		if got, err := ParseSize(s); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "-1", "K", "1T", "99999999999G"} {
		if _, err := ParseSize(s); err == nil {
			t.Errorf("ParseSize(%q) accepted", s)
		}
	}
}

// TestExecutableID: the test binary has a Go build ID, which the identity
// carries.
func TestExecutableID(t *testing.T) {
	exe, _ := os.Executable()
	id := goBuildID(exe)
	if id == "" || strings.Count(id, "/") < 1 {
		t.Fatalf("goBuildID(%s) = %q", exe, id)
	}
	if got := ExecutableID(); !strings.HasSuffix(got, "go-buildid "+id) {
		t.Errorf("ExecutableID() = %q, want it to end with the build ID %q", got, id)
	}
}

// TestEntryName: names keep the source's base name readable and differ by
// path and options.
func TestEntryName(t *testing.T) {
	a := EntryName(&Key{Source: "/a/prog.scm"})
	b := EntryName(&Key{Source: "/b/prog.scm"})
	c := EntryName(&Key{Source: "/a/prog.scm", Link: "x"})
	d := EntryName(&Key{Source: "/a/prog.scm", Compiler: "other", SourceSHA256: [32]byte{1}})
	if !strings.HasPrefix(a, "prog-") || a == b || a == c || a != d || !isEntryName(a) {
		t.Errorf("names %s %s %s %s", a, b, c, d)
	}
	if n := EntryName(&Key{Source: "/x/we ird\n" + strings.Repeat("é", 50) + ".scm"}); !isEntryName(n) || strings.ContainsAny(n, " \n/") || len(n) > 64+22 {
		t.Errorf("name %q", n)
	}
	for _, n := range []string{"prog.elf", "prog-0123.elf", ".prog-0123456789abcdef.elf", "prog-0123456789abcdeg.elf"} {
		if isEntryName(n) {
			t.Errorf("isEntryName(%q)", n)
		}
	}
}
