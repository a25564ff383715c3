package debugfile_test

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/debugfile"
	"github.com/elfimage/elfimage/elfobj"
	"github.com/elfimage/elfimage/internal/tooltest"
)

const prog = `static int __attribute__((noinline)) f(int x) { return x * 3; }
int main(int argc, char **argv) { return f(argc); }
`

// split builds prog with gcc -g and splits it as distributions do:
// objcopy --only-keep-debug into DIR/a.debug, and the stripped file
// DIR/a with a .gnu_debuglink naming a.debug. It returns the stripped
// file, the debug file and the build ID.
func split(t *testing.T) (stripped, debug string, id []byte) {
	t.Helper()
	exe := tooltest.GCC(t, prog, "-g", "-O1", "-Wl,--build-id")
	objcopy := tooltest.Require(t, "objcopy")
	dir := t.TempDir()
	debug = filepath.Join(dir, "a.debug")
	stripped = filepath.Join(dir, "a")
	run(t, objcopy, "--only-keep-debug", exe, debug)
	run(t, objcopy, "--strip-debug", "--add-gnu-debuglink="+debug, exe, stripped)
	f, err := elf.Open(stripped)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	note := f.Section(".note.gnu.build-id")
	if note == nil {
		t.Fatal("gcc wrote no build ID")
	}
	b, _ := note.Data()
	return stripped, debug, b[16:]
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// TestReadTarget: the build ID and debuglink objcopy wrote are read back
// as readelf shows them, the CRC is the debug file's.
func TestReadTarget(t *testing.T) {
	stripped, debug, id := split(t)
	tg, err := debugfile.ReadTarget(stripped)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tg.BuildID, id) {
		t.Errorf("build ID %x, want %x", tg.BuildID, id)
	}
	crc, err := debugfile.FileCRC32(debug)
	if err != nil {
		t.Fatal(err)
	}
	if tg.Link == nil || tg.Link.Name != "a.debug" || tg.Link.CRC != crc {
		t.Errorf("debuglink %+v, want a.debug CRC %#x", tg.Link, crc)
	}
	out, err := exec.Command(tooltest.Require(t, "readelf"), "-p", ".gnu_debuglink", stripped).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "a.debug") {
		t.Errorf("readelf -p .gnu_debuglink: %v\n%s", err, out)
	}
}

// TestFind: each place of the search order is found, in order, and
// candidates of another build are skipped with the reason in the error.
func TestFind(t *testing.T) {
	stripped, debug, id := split(t)
	dir := filepath.Dir(stripped)
	tg, err := debugfile.ReadTarget(stripped)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	global := t.TempDir()
	f := &debugfile.Finder{DebugDirs: []string{global}}

	// Beside the file.
	if p, err := f.Find(ctx, tg); err != nil || p != debug {
		t.Fatalf("beside: %q, %v; want %s", p, err, debug)
	}
	// In .debug/ beside it.
	if err := os.Mkdir(filepath.Join(dir, ".debug"), 0o755); err != nil {
		t.Fatal(err)
	}
	dotDebug := filepath.Join(dir, ".debug", "a.debug")
	if err := os.Rename(debug, dotDebug); err != nil {
		t.Fatal(err)
	}
	if p, err := f.Find(ctx, tg); err != nil || p != dotDebug {
		t.Fatalf(".debug: %q, %v; want %s", p, err, dotDebug)
	}
	// Under the global directory, followed by the file's directory.
	real, _ := filepath.EvalSymlinks(dir)
	under := filepath.Join(global, real, "a.debug")
	if err := os.MkdirAll(filepath.Dir(under), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dotDebug, under); err != nil {
		t.Fatal(err)
	}
	if p, err := f.Find(ctx, tg); err != nil || p != under {
		t.Fatalf("global: %q, %v; want %s", p, err, under)
	}
	// The build-ID directory comes first.
	hex, _ := debugfile.BuildIDHex(id)
	byID := filepath.Join(global, ".build-id", hex[:2], hex[2:]+".debug")
	if err := os.MkdirAll(filepath.Dir(byID), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(under, byID); err != nil {
		t.Fatal(err)
	}
	if p, err := f.Find(ctx, tg); err != nil || p != byID {
		t.Fatalf("build-id: %q, %v; want %s", p, err, byID)
	}

	// A stale debug file beside the file (another build: another CRC
	// and build ID) is skipped, and named when nothing else is found.
	os.Remove(byID)
	os.Remove(under)
	other := tooltest.GCC(t, strings.Replace(prog, "* 3", "* 5", 1), "-g", "-O1")
	run(t, tooltest.Require(t, "objcopy"), "--only-keep-debug", other, filepath.Join(dir, "a.debug"))
	if err := os.Link(filepath.Join(dir, "a.debug"), byID); err != nil {
		t.Fatal(err)
	}
	p, err := f.Find(ctx, tg)
	if !errors.Is(err, debugfile.ErrNotFound) {
		t.Fatalf("stale: %q, %v; want ErrNotFound", p, err)
	}
	for _, want := range []string{byID + ": its build ID is", filepath.Join(dir, "a.debug") + ": its build ID is", filepath.Join(dir, ".debug", "a.debug")} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}

	// A remote source is asked last, and its answer is checked too.
	os.Remove(byID)
	os.Remove(filepath.Join(dir, "a.debug"))
	run(t, tooltest.Require(t, "objcopy"), "--only-keep-debug", other, filepath.Join(global, "wrong.debug"))
	run(t, tooltest.Require(t, "objcopy"), "--only-keep-debug", stripped, filepath.Join(global, "right.debug"))
	var asked []byte
	answer := filepath.Join(global, "wrong.debug")
	f.Remote = func(ctx context.Context, b []byte) (string, error) { asked = b; return answer, nil }
	if _, err := f.Find(ctx, tg); err == nil || !bytes.Equal(asked, id) || !strings.Contains(err.Error(), "build ID") {
		t.Errorf("remote answering another build: %v (asked %x)", err, asked)
	}
	answer = filepath.Join(global, "right.debug")
	if p, err := f.Find(ctx, tg); err != nil || p != answer {
		t.Errorf("remote: %q, %v; want %s", p, err, answer)
	}
}

// TestLinkAgainstObjcopy checks AppendDebuglink and CRC32 against the
// .gnu_debuglink objcopy --add-gnu-debuglink writes for a file, for names
// of every length modulo 4 (the padding), and ParseDebuglink,
// FileCRC32 and FileTarget on objcopy's output.
func TestLinkAgainstObjcopy(t *testing.T) {
	objcopy := tooltest.Require(t, "objcopy")
	exe := tooltest.GCC(t, "int main(void) { return 0; }\n", "-g")
	dir := t.TempDir()
	for _, name := range []string{"a", "ab.debug", "abc.debug", "abcd.debug", "x.dbg"} {
		dbg := filepath.Join(dir, name)
		content := bytes.Repeat([]byte(name), 1000)
		os.WriteFile(dbg, content, 0o644)
		out := filepath.Join(dir, name+".linked")
		cmd := exec.Command(objcopy, "--add-gnu-debuglink="+name, exe, out)
		cmd.Dir = dir
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("objcopy: %v\n%s", err, b)
		}
		f, err := elf.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.Section(debugfile.SectionDebugLink).Data()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := debugfile.AppendDebuglink(nil, debugfile.Debuglink{Name: name, CRC: debugfile.CRC32(content)}, binary.LittleEndian)
		if !bytes.Equal(got, want) || len(want) != (len(name)+4)&^3+4 {
			t.Errorf("%s: objcopy wrote % x, AppendDebuglink % x", name, got, want)
		}
		l, err := debugfile.ParseDebuglink(got, binary.LittleEndian)
		fc, ferr := debugfile.FileCRC32(dbg)
		if err != nil || l.Name != name || l.CRC != fc || ferr != nil {
			t.Errorf("ParseDebuglink(objcopy's %s) = %+v %v; FileCRC32 %#x %v", name, l, err, fc, ferr)
		}
		ef, err := elfobj.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		tg, err := debugfile.FileTarget(ef, out)
		ef.Close()
		if err != nil || tg.Link == nil || *tg.Link != (debugfile.Debuglink{Name: name, CRC: fc}) || tg.BuildID == nil {
			t.Errorf("FileTarget(%s) = %+v %v", out, tg, err)
		}
	}
}

// TestParseDebuglinkErrors: each malformed section gives an error naming
// the section and the field.
func TestParseDebuglinkErrors(t *testing.T) {
	for _, c := range []struct {
		b     string
		field string
	}{
		{"", "no NUL"},
		{"abc", "no NUL"},
		{"\x00\x00\x00\x00\x01\x02\x03\x04", "file name at offset 0x0: empty"},
		{"a/b\x00\x01\x02\x03\x04", "holds a '/'"},
		{"abc\x00\x01\x02\x03", "ends before the CRC"},
		{"abcd\x00\x00\x00\x00\x01\x02\x03", "CRC-32"},
		{strings.Repeat("x", 256) + "\x00\x00\x00\x00\x01\x02\x03\x04", "file name"},
	} {
		_, err := debugfile.ParseDebuglink([]byte(c.b), binary.LittleEndian)
		if err == nil || !strings.Contains(err.Error(), c.field) || !strings.Contains(err.Error(), ".gnu_debuglink") {
			t.Errorf("ParseDebuglink(%q) = %v, want an error on %s", c.b, err, c.field)
		}
	}
}

func TestBuildIDHex(t *testing.T) {
	for _, n := range []int{0, 1, 65} {
		if _, err := debugfile.BuildIDHex(make([]byte, n)); err == nil {
			t.Errorf("BuildIDHex of %d bytes: no error", n)
		}
	}
	if h, err := debugfile.BuildIDHex([]byte{0xab, 0x01, 0xff}); err != nil || h != "ab01ff" {
		t.Errorf("BuildIDHex = %q, %v", h, err)
	}
	if p := debugfile.BuildIDPath("/usr/lib/debug", []byte{0xab, 0x01, 0xff}); p != "/usr/lib/debug/.build-id/ab/01ff.debug" {
		t.Errorf("BuildIDPath = %s", p)
	}
	if p := debugfile.BuildIDPath("/usr/lib/debug", []byte{0xab}); p != "" {
		t.Errorf("BuildIDPath of 1 byte = %s", p)
	}
}

// writeELF writes an executable built by gcc with the given build ID
// (ld --build-id=0xHEX) to path.
func writeELF(t *testing.T, path, id string) {
	t.Helper()
	exe := tooltest.GCC(t, "int main(void) { return 0; }\n", "-Wl,--build-id=0x"+id)
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFindOrder checks the lookup order and the checks of each candidate:
// the build-ID path under each directory first, then the debuglink
// beside the file, in .debug and under the directories with the file's
// absolute directory; a candidate with another build ID or CRC is
// rejected with the reason, and a miss lists every path tried.
func TestFindOrder(t *testing.T) {
	const id = "0123456789abcdef0123456789abcdef01234567"
	idb := []byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67}
	root := t.TempDir()
	img := filepath.Join(root, "bin", "prog")
	writeELF(t, img, id)
	d1, d2 := filepath.Join(root, "d1"), filepath.Join(root, "d2")
	dirs := []string{d1, d2}
	abs, _ := filepath.EvalSymlinks(filepath.Dir(img))
	abs, _ = filepath.Abs(abs)
	want := []string{
		filepath.Join(d1, ".build-id", "01", id[2:]+".debug"),
		filepath.Join(d2, ".build-id", "01", id[2:]+".debug"),
		filepath.Join(abs, "prog.debug"),
		filepath.Join(abs, ".debug", "prog.debug"),
		filepath.Join(d1, abs, "prog.debug"),
		filepath.Join(d2, abs, "prog.debug"),
	}
	f := &debugfile.Finder{DebugDirs: dirs}
	ctx := context.Background()
	// find looks for the debug file of img with build ID id (nil: none)
	// and the debuglink name with CRC crc.
	find := func(id []byte, name string, crc uint32) (string, error) {
		tg := debugfile.Target{Path: img, BuildID: id}
		if name != "" {
			tg.Link = &debugfile.Debuglink{Name: name, CRC: crc}
		}
		return f.Find(ctx, tg)
	}
	got, nbuild := f.Candidates(debugfile.Target{Path: img, BuildID: idb, Link: &debugfile.Debuglink{Name: "prog.debug"}})
	if strings.Join(got, "\n") != strings.Join(want, "\n") || nbuild != 2 {
		t.Fatalf("Candidates (%d by build ID):\n%s\nwant\n%s", nbuild, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	_, err := find(idb, "prog.debug", 0)
	var nf *debugfile.NotFoundError
	if !errors.As(err, &nf) || !errors.Is(err, debugfile.ErrNotFound) || strings.Join(nf.Tried, "\n") != strings.Join(want, "\n") {
		t.Fatalf("Find with nothing there: %v", err)
	}
	// Each candidate, from the last to the first: a file with the right
	// build ID there is found, as long as none before it is.
	for i := len(want) - 1; i >= 0; i-- {
		writeELF(t, want[i], id)
		p, err := find(idb, "prog.debug", 0)
		if err != nil || p != want[i] {
			t.Errorf("with candidate %d present: Find = %q, %v", i, p, err)
		}
	}
	for _, w := range want {
		os.Remove(w)
	}
	// Wrong build ID at the build-ID path and beside: rejected; by CRC
	// when the debug file has no build ID.
	writeELF(t, want[0], "ffffffffffffffffffffffffffffffffffffffff")
	writeELF(t, want[2], "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee")
	_, err = find(idb, "prog.debug", 0)
	if !errors.As(err, &nf) || len(nf.Rejected) != 2 || !strings.Contains(err.Error(), "its build ID is ffff") || !strings.Contains(err.Error(), "its build ID is eeee") {
		t.Errorf("Find with wrong build IDs: %v", err)
	}
	plain := bytes.Repeat([]byte("debug"), 100)
	os.WriteFile(want[2], plain, 0o644) // not ELF: rejected
	if _, err := find(nil, "prog.debug", debugfile.CRC32(plain)); err == nil {
		t.Errorf("Find accepted a file that is not ELF")
	}
	exe := tooltest.GCC(t, "int main(void) { return 1; }\n", "-Wl,--build-id=none")
	b, _ := os.ReadFile(exe)
	os.WriteFile(want[2], b, 0o644)
	if p, err := find(nil, "prog.debug", debugfile.CRC32(b)); err != nil || p != want[2] {
		t.Errorf("Find by CRC: %q, %v", p, err)
	}
	if _, err := find(nil, "prog.debug", debugfile.CRC32(b)+1); !errors.As(err, &nf) || !strings.Contains(err.Error(), "CRC-32") {
		t.Errorf("Find with a wrong CRC: %v", err)
	}
	// A debuglink naming the file itself is not its debug file.
	if _, err := find(nil, "prog", 0); err == nil {
		t.Errorf("Find returned the file itself")
	}
	if _, err := find(nil, "", 0); !errors.Is(err, debugfile.ErrNotFound) || !strings.Contains(err.Error(), "neither a build ID nor") {
		t.Errorf("Find without build ID or debuglink: %v", err)
	}
}
