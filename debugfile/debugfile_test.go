package debugfile_test

import (
	"bytes"
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

// TestLinkAgainstObjcopy checks AppendLink and CRC32 against the
// .gnu_debuglink objcopy --add-gnu-debuglink writes for a file, for names
// of every length modulo 4 (the padding), and ParseLink and ReadLink on
// objcopy's output.
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
		want := debugfile.AppendLink(nil, name, debugfile.CRC32(content), binary.LittleEndian)
		if !bytes.Equal(got, want) || len(want) != debugfile.LinkSize(name) {
			t.Errorf("%s: objcopy wrote % x, AppendLink % x (LinkSize %d)", name, got, want, debugfile.LinkSize(name))
		}
		n, crc, err := debugfile.ParseLink(got, binary.LittleEndian)
		fc, ferr := debugfile.FileCRC32(dbg)
		if err != nil || n != name || crc != fc || ferr != nil {
			t.Errorf("ParseLink(objcopy's %s) = %q %#x %v; FileCRC32 %#x %v", name, n, crc, err, fc, ferr)
		}
		ef, err := elfobj.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		n2, crc2, ok, err := debugfile.ReadLink(ef)
		ef.Close()
		if !ok || err != nil || n2 != name || crc2 != fc {
			t.Errorf("ReadLink(%s) = %q %#x %v %v", out, n2, crc2, ok, err)
		}
	}
}

// TestParseLinkHostile checks the errors of ParseLink.
func TestParseLinkHostile(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		want string
	}{
		{nil, "no NUL"},
		{[]byte("abc"), "no NUL"},
		{[]byte{0, 0, 0, 0, 1, 2, 3, 4}, "empty"},
		{[]byte("a/b\x00\x00\x00\x00\x00"), "directory"},
		{[]byte("abc\x00\x01\x02"), "ends before the CRC"},
	} {
		_, _, err := debugfile.ParseLink(c.in, binary.LittleEndian)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseLink(%q): %v, want %q", c.in, err, c.want)
		}
	}
}

// FuzzParseLink: whatever ParseLink accepts, AppendLink writes back as
// the same bytes up to the CRC (round trip), and ParseLink reads its own
// output back.
func FuzzParseLink(f *testing.F) {
	f.Add(debugfile.AppendLink(nil, "prog.debug", 0x12345678, binary.LittleEndian))
	f.Add([]byte("a\x00\x00\x00\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		name, crc, err := debugfile.ParseLink(b, binary.LittleEndian)
		if err != nil {
			return
		}
		out := debugfile.AppendLink(nil, name, crc, binary.LittleEndian)
		n2, c2, err := debugfile.ParseLink(out, binary.LittleEndian)
		if err != nil || n2 != name || c2 != crc {
			t.Fatalf("round trip of %q %#x: %q %#x %v", name, crc, n2, c2, err)
		}
		if len(out) > len(b) || !bytes.Equal(out[:len(name)+1], b[:len(name)+1]) || !bytes.Equal(out[len(out)-4:], b[len(out)-4:len(out)]) {
			t.Fatalf("ParseLink(% x) = %q %#x, which AppendLink writes as % x", b, name, crc, out)
		}
	})
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

// TestFind checks the lookup order and the checks of each candidate:
// the build-ID path under each directory first, then the debuglink
// beside the file, in .debug and under the directories with the file's
// absolute directory; a candidate with another build ID or CRC is
// rejected with the reason, and a miss lists every path tried.
func TestFind(t *testing.T) {
	const id = "0123456789abcdef0123456789abcdef01234567"
	idb := []byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67}
	root := t.TempDir()
	img := filepath.Join(root, "bin", "prog")
	writeELF(t, img, id)
	d1, d2 := filepath.Join(root, "d1"), filepath.Join(root, "d2")
	dirs := []string{d1, d2}
	abs, _ := filepath.Abs(filepath.Dir(img))
	want := []string{
		filepath.Join(d1, ".build-id", "01", id[2:]+".debug"),
		filepath.Join(d2, ".build-id", "01", id[2:]+".debug"),
		filepath.Join(root, "bin", "prog.debug"),
		filepath.Join(root, "bin", ".debug", "prog.debug"),
		filepath.Join(d1, abs, "prog.debug"),
		filepath.Join(d2, abs, "prog.debug"),
	}
	got := debugfile.Candidates(idb, "prog.debug", img, dirs)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("Candidates:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if p := debugfile.BuildIDPath("/usr/lib/debug", idb); p != "/usr/lib/debug/.build-id/01/23456789abcdef0123456789abcdef01234567.debug" {
		t.Errorf("BuildIDPath = %s", p)
	}

	_, err := debugfile.Find(idb, "prog.debug", 0, img, dirs)
	var nf *debugfile.NotFoundError
	if !errors.As(err, &nf) || !errors.Is(err, debugfile.ErrNotFound) || strings.Join(nf.Tried, "\n") != strings.Join(want, "\n") {
		t.Fatalf("Find with nothing there: %v", err)
	}
	// Each candidate, from the last to the first: a file with the right
	// build ID there is found, as long as none before it is.
	for i := len(want) - 1; i >= 0; i-- {
		writeELF(t, want[i], id)
		p, err := debugfile.Find(idb, "prog.debug", 0, img, dirs)
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
	_, err = debugfile.Find(idb, "prog.debug", 0, img, dirs)
	if !errors.As(err, &nf) || len(nf.Rejected) != 2 || !strings.Contains(err.Error(), "its build ID is ffff") || !strings.Contains(err.Error(), "its build ID is eeee") {
		t.Errorf("Find with wrong build IDs: %v", err)
	}
	plain := bytes.Repeat([]byte("debug"), 100)
	os.WriteFile(want[2], plain, 0o644) // not ELF: rejected
	if _, err := debugfile.Find(nil, "prog.debug", debugfile.CRC32(plain), img, dirs); err == nil {
		t.Errorf("Find accepted a file that is not ELF")
	}
	exe := tooltest.GCC(t, "int main(void) { return 1; }\n", "-Wl,--build-id=none")
	b, _ := os.ReadFile(exe)
	os.WriteFile(want[2], b, 0o644)
	if p, err := debugfile.Find(nil, "prog.debug", debugfile.CRC32(b), img, dirs); err != nil || p != want[2] {
		t.Errorf("Find by CRC: %q, %v", p, err)
	}
	if _, err := debugfile.Find(nil, "prog.debug", debugfile.CRC32(b)+1, img, dirs); !errors.As(err, &nf) || !strings.Contains(err.Error(), "CRC-32") {
		t.Errorf("Find with a wrong CRC: %v", err)
	}
	// A debuglink naming the file itself is not its debug file.
	if _, err := debugfile.Find(nil, "prog", 0, img, dirs); err == nil {
		t.Errorf("Find returned the file itself")
	}
	if _, err := debugfile.Find(nil, "", 0, img, dirs); !errors.Is(err, debugfile.ErrNotFound) || !strings.Contains(err.Error(), "neither a build ID nor") {
		t.Errorf("Find without build ID or debuglink: %v", err)
	}
}
