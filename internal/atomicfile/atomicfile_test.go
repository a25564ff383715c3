package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWrite: the file gets the bytes and the mode; the temporary file,
// announced to Track before it exists, is gone afterwards; a failed write
// leaves nothing.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.elf")
	os.WriteFile(path, []byte("old"), 0o600)
	var tracked []string
	untracked := 0
	opts := Options{Mode: 0o640, Sync: true, Track: func(tmp string) func() {
		if _, err := os.Lstat(tmp); err == nil {
			t.Errorf("Track called after %s was created", tmp)
		}
		tracked = append(tracked, tmp)
		return func() { untracked++ }
	}}
	if err := Write(path, []byte("new"), opts); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	fi, _ := os.Stat(path)
	if string(b) != "new" || fi.Mode().Perm() != 0o640 {
		t.Errorf("file %q mode %v, want \"new\" 0640", b, fi.Mode())
	}
	if len(tracked) != 1 || untracked != 1 || filepath.Dir(tracked[0]) != dir || !strings.HasPrefix(filepath.Base(tracked[0]), ".out.elf.tmp-") {
		t.Errorf("tracked %q, untracked %d times", tracked, untracked)
	}
	if des, _ := os.ReadDir(dir); len(des) != 1 {
		t.Errorf("directory holds %v, want only out.elf", des)
	}
	// Renaming over a directory fails: the temporary file goes.
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o700)
	os.WriteFile(filepath.Join(sub, "x"), nil, 0o600)
	if err := Write(sub, []byte("x"), Options{}); err == nil {
		t.Error("Write over a non-empty directory succeeded")
	}
	if des, _ := os.ReadDir(dir); len(des) != 2 {
		t.Errorf("after a failed write the directory holds %v", des)
	}
}
