// Package atomicfile writes a file so that readers see either the old
// file or the complete new one: the bytes go to a temporary file in the
// same directory, which is renamed over the destination (rename(2) is
// atomic within a file system).
package atomicfile

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// Options tunes [Write].
type Options struct {
	// Mode is the permission of the new file (0644 when zero),
	// applied with fchmod so the umask does not narrow it.
	Mode os.FileMode
	// Sync makes Write fsync the file before the rename, so that after
	// a crash path holds the old or the new bytes, not an empty file.
	// Without it a reader must verify what it reads.
	Sync bool
	// Track, when set, is called with the temporary file's path before
	// the file is created; the function it returns is called once the
	// file is renamed or removed. A program uses it to remove the file
	// when it is interrupted (package internal/cleanup).
	Track func(tmp string) (untrack func())
}

// TempName returns the name of a temporary file for path: in the same
// directory, hidden, ".BASE.tmp-RANDOM".
func TempName(path string) string {
	return filepath.Join(filepath.Dir(path), fmt.Sprintf(".%s.tmp-%016x", filepath.Base(path), rand.Uint64()))
}

// Write writes b to path atomically (see the package comment). The
// temporary file is created with O_EXCL, so it never reuses another
// file, and is removed on any error. Errors are those of the system calls,
// with the path.
func Write(path string, b []byte, opts Options) (err error) {
	mode := opts.Mode
	if mode == 0 {
		mode = 0o644
	}
	var tmp string
	var f *os.File
	for range 10 {
		tmp = TempName(path)
		untrack := func() {}
		if opts.Track != nil {
			untrack = opts.Track(tmp)
		}
		defer untrack()
		f, err = os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if !os.IsExist(err) {
			break
		}
	}
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(b); err != nil {
		return err
	}
	if err = f.Chmod(mode); err != nil {
		return err
	}
	if opts.Sync {
		if err = f.Sync(); err != nil {
			return err
		}
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
