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
	crc, err := debugfile.FileCRC(debug)
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
	for _, want := range []string{"CRC-32", "build ID", byID, filepath.Join(dir, ".debug", "a.debug")} {
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

// TestDebuglinkRoundTrip: AppendDebuglink's bytes are what objcopy
// writes, and ParseDebuglink reads them back.
func TestDebuglinkRoundTrip(t *testing.T) {
	stripped, _, _ := split(t)
	f, err := elf.Open(stripped)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	raw, err := f.Section(".gnu_debuglink").Data()
	if err != nil {
		t.Fatal(err)
	}
	l, err := debugfile.ParseDebuglink(raw, binary.LittleEndian)
	if err != nil {
		t.Fatal(err)
	}
	if got := debugfile.AppendDebuglink(nil, l, binary.LittleEndian); !bytes.Equal(got, raw) {
		t.Errorf("AppendDebuglink = %x, objcopy wrote %x", got, raw)
	}
}

func TestParseDebuglinkErrors(t *testing.T) {
	for _, c := range []struct {
		b     string
		field string
	}{
		{"", "file name"},
		{"abc", "file name"},
		{"\x00\x00\x00\x00\x01\x02\x03\x04", "file name"},
		{"a/b\x00\x01\x02\x03\x04", "file name"},
		{"abc\x00\x01\x02\x03", "CRC-32"},
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
}
