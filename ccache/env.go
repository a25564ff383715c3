package ccache

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	"github.com/elfimage/elfimage/elfobj"
)

// DefaultMaxBytes is the default bound on the total size of a cache's
// entries: 256 MiB, some thousands of typical images.
const DefaultMaxBytes = 256 << 20

// Environment variables read by [Env].
const (
	// EnvCache is "off" to disable the cache, or the cache directory.
	EnvCache = "ELFIMAGE_CACHE"
	// EnvCacheSize is the size bound: bytes, or a number with the suffix
	// K, M or G (powers of 1024); 0 means unbounded.
	EnvCacheSize = "ELFIMAGE_CACHE_SIZE"
)

// ErrNoDir is wrapped by the error of [Env] when the environment names no
// cache directory; the Config returned with it is otherwise valid.
var ErrNoDir = errors.New("no cache directory: neither $XDG_CACHE_HOME nor $HOME is an absolute path")

// Config is where the cache is and how large it may grow.
type Config struct {
	// Dir is the cache directory, absolute; empty when Off.
	Dir string
	// Off reports that the cache is disabled ($ELFIMAGE_CACHE=off).
	Off bool
	// MaxBytes is the size bound, 0 for unbounded.
	MaxBytes int64
}

// Env returns the configuration the environment asks for. The directory is
// $ELFIMAGE_CACHE when set (a relative path is taken from the working
// directory; "off" disables the cache), else $XDG_CACHE_HOME/elfimage when
// XDG_CACHE_HOME is an absolute path (the XDG Base Directory specification
// says to ignore a relative one), else $HOME/.cache/elfimage. The bound is
// $ELFIMAGE_CACHE_SIZE, else [DefaultMaxBytes]. Errors: a malformed size,
// or [ErrNoDir] (wrapped) when there is no directory to use. Nothing is
// created.
func Env() (Config, error) {
	c := Config{MaxBytes: DefaultMaxBytes}
	if s := os.Getenv(EnvCacheSize); s != "" {
		n, err := ParseSize(s)
		if err != nil {
			return c, fmt.Errorf("ccache: $%s: %w", EnvCacheSize, err)
		}
		c.MaxBytes = n
	}
	switch v := os.Getenv(EnvCache); {
	case v == "off":
		c.Off = true
		return c, nil
	case v != "":
		dir, err := filepath.Abs(v)
		if err != nil {
			return c, fmt.Errorf("ccache: $%s: %w", EnvCache, err)
		}
		c.Dir = dir
		return c, nil
	}
	if x := os.Getenv("XDG_CACHE_HOME"); filepath.IsAbs(x) {
		c.Dir = filepath.Join(x, "elfimage")
		return c, nil
	}
	home := os.Getenv("HOME")
	if !filepath.IsAbs(home) {
		return c, fmt.Errorf("ccache: %w; set $%s", ErrNoDir, EnvCache)
	}
	c.Dir = filepath.Join(home, ".cache", "elfimage")
	return c, nil
}

// ParseSize parses a size in bytes: digits, optionally followed by K, M
// or G (powers of 1024, upper or lower case, an optional B or iB after).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(strings.TrimSpace(s)), "B"), "I")
	shift := 0
	if t != "" {
		switch t[len(t)-1] {
		case 'K':
			shift = 10
		case 'M':
			shift = 20
		case 'G':
			shift = 30
		}
		if shift != 0 {
			t = t[:len(t)-1]
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)>>shift {
		return 0, fmt.Errorf("size %q: want bytes, or a number with K, M or G", s)
	}
	return n << shift, nil
}

var executableID = sync.OnceValue(func() string {
	var who string
	if bi, ok := debug.ReadBuildInfo(); ok {
		who = bi.Main.Path + " " + bi.Main.Version
		var rev, dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "+dirty"
				}
			}
		}
		if rev != "" {
			who += " vcs " + rev + dirty
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return strings.TrimSpace(who + " unknown executable")
	}
	if id := goBuildID(exe); id != "" {
		return strings.TrimSpace(who + " go-buildid " + id)
	}
	// No build ID (linked with -buildid=): hash the whole executable.
	f, err := os.Open(exe)
	if err != nil {
		return strings.TrimSpace(who + " unreadable executable " + exe)
	}
	defer f.Close()
	h := sha256.New()
	io.Copy(h, f)
	return strings.TrimSpace(who + " sha256 " + hex.EncodeToString(h.Sum(nil)))
})

// ExecutableID identifies the running program's code, for [Key.Compiler]:
// the main module's path and version (with the VCS revision and "+dirty"
// when runtime/debug.ReadBuildInfo has them) and the Go build ID of the
// executable (its .note.go.buildid note: a hash that changes whenever any
// code linked into the program does), or, when the executable has no build
// ID, the SHA-256 of its file. The version alone would not do: a
// development build's "(devel)" stays the same across changes. Computed
// once per process (reading the executable's ELF headers, or hashing it).
func ExecutableID() string { return executableID() }

// goBuildID returns the Go build ID recorded in the ELF executable at path
// (note "Go", type 4, in section .note.go.buildid), or "" when none.
func goBuildID(path string) string {
	f, err := elfobj.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	i := f.FindSection(".note.go.buildid")
	if i < 0 || f.Sections[i].Size > 4096 {
		return ""
	}
	r, err := f.SectionNotes(i)
	if err != nil {
		return ""
	}
	for n, ok := r.Next(); ok; n, ok = r.Next() {
		if n.Type == 4 && string(n.Name) == "Go" {
			return string(n.Desc)
		}
	}
	return ""
}
