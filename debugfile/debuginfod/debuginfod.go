// Package debuginfod is a client of debuginfod servers (elfutils'
// debuginfod(8), and every server speaking its protocol): it fetches the
// debug file of a build ID with an HTTP GET of URL/buildid/HEX/debuginfo
// and keeps it in the cache directory elfutils' client uses, so that gdb,
// perf, elfutils and this package share downloads.
//
// Configuration is that of elfutils' debuginfod-client-config(7) (see
// [FromEnv]): DEBUGINFOD_URLS (space-separated URL prefixes),
// DEBUGINFOD_CACHE_PATH, DEBUGINFOD_TIMEOUT, DEBUGINFOD_MAXTIME,
// DEBUGINFOD_MAXSIZE and DEBUGINFOD_PROGRESS; the cache's cache_miss_s
// control file.
//
// The cache holds CACHE/HEX/debuginfo, HEX the build ID in lowercase
// hexadecimal, as elfutils 0.188 lays it out: a directory of mode 0700 per
// build ID and the file, mode 0400; an empty file records a failed query
// (every server answered 404), which is not repeated for cache_miss_s
// seconds (default 600). A download goes to a temporary file in the build
// ID's directory and is renamed into place only after it was checked to be
// an ELF file with that build ID: a crash, a timeout or a server answering
// something else leaves no file that a later lookup takes. The client
// never writes outside CACHE/HEX: the build ID is the only part of a path
// that comes from outside, and it is formatted from bytes; a HEX that
// exists as anything but a directory, or a debuginfo that exists as
// anything but a regular file, is an error, not followed.
//
// Every download is bounded in time (DEBUGINFOD_TIMEOUT, default 90 s,
// for each 100 KiB; DEBUGINFOD_MAXTIME for the whole file) and in size
// (DEBUGINFOD_MAXSIZE, and never more than MaxFileSize); memory use does
// not grow with the file (it is copied to disk in 64 KiB pieces).
package debuginfod

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/elfimage/elfimage/debugfile"
	"github.com/elfimage/elfimage/internal/atomicfile"
)

// Defaults, as elfutils documents them.
const (
	// DefaultTimeout is DEBUGINFOD_TIMEOUT's default.
	DefaultTimeout = 90 * time.Second
	// DefaultCacheMiss is the default of the cache_miss_s control file:
	// how long a failed query is remembered.
	DefaultCacheMiss = 600 * time.Second
	// ProgressUnit is the amount of data that must arrive in every
	// Timeout-long stretch of a download (elfutils: "at least 100K of
	// data within this many seconds").
	ProgressUnit = 100 << 10
	// MaxFileSize bounds every download, in bytes, whatever MaxSize
	// says: no debug file is larger.
	MaxFileSize = 16 << 30
)

// Client fetches debug files from debuginfod servers. Its fields are set
// before first use (FromEnv sets them from the environment); it is then
// safe for concurrent use.
type Client struct {
	// URLs are the servers' URL prefixes (http or https), asked in order
	// until one has the file.
	URLs []string
	// CacheDir is the cache directory (created, mode 0700, on first
	// download).
	CacheDir string
	// Timeout: connecting, and every stretch of Timeout after that, must
	// bring ProgressUnit bytes or the rest of the file, or the server is
	// skipped. 0 means no such bound.
	Timeout time.Duration
	// MaxTime bounds one server's whole download; 0: no bound.
	MaxTime time.Duration
	// MaxSize bounds the file, in bytes (a larger one is skipped as the
	// server announces it, or as soon as more arrives); 0 means
	// MaxFileSize.
	MaxSize int64
	// CacheMiss is how long a failed query is remembered; 0 means the
	// cache's cache_miss_s control file, else DefaultCacheMiss; negative:
	// not at all.
	CacheMiss time.Duration
	// Progress, when set, is called while a file downloads, with the
	// URL, the bytes so far and the size the server announced (-1 when
	// unknown): at each ProgressUnit*10 bytes and at the end.
	Progress func(url string, done, total int64)
	// HTTP is the HTTP client; nil means one with http.DefaultTransport's
	// settings (proxies from the environment). Its own Timeout, if any,
	// also applies.
	HTTP *http.Client

	once   sync.Once
	client *http.Client
}

// ErrNotFound is wrapped by Debuginfo's error when every server answered
// 404 Not Found (or the cache remembers that they did): it is
// debugfile.ErrNotFound, so that a debugfile.Finder reports it as such.
var ErrNotFound = debugfile.ErrNotFound

// FromEnv returns a Client configured from the environment as elfutils'
// client is, or nil and no error when DEBUGINFOD_URLS is unset or holds
// no URL:
//
//   - DEBUGINFOD_URLS: URL prefixes separated by white space; words
//     starting with "ima:" (signature policy tags) are skipped, and a
//     prefix that is not http:// or https:// is an error.
//   - DEBUGINFOD_CACHE_PATH: the cache directory; default
//     $XDG_CACHE_HOME/debuginfod_client, else
//     $HOME/.cache/debuginfod_client (or the deprecated
//     $HOME/.debuginfod_client_cache when it exists).
//   - DEBUGINFOD_TIMEOUT: seconds (default 90; zero or negative: none).
//   - DEBUGINFOD_MAXTIME: seconds (default 0: none).
//   - DEBUGINFOD_MAXSIZE: bytes (default 0: MaxFileSize).
//   - DEBUGINFOD_PROGRESS: when set, progress lines go to standard error.
//
// Errors name the variable and its value (a number that does not parse,
// a bad URL, no cache directory).
func FromEnv() (*Client, error) {
	urls, err := ParseURLs(os.Getenv("DEBUGINFOD_URLS"))
	if err != nil || len(urls) == 0 {
		return nil, err
	}
	c := &Client{URLs: urls, Timeout: DefaultTimeout}
	if c.CacheDir, err = defaultCacheDir(); err != nil {
		return nil, err
	}
	secs := func(name string) (time.Duration, bool, error) {
		v, ok := os.LookupEnv(name)
		if !ok || strings.TrimSpace(v) == "" {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("debuginfod: %s=%q: not a number of seconds", name, v)
		}
		if n <= 0 {
			return 0, true, nil
		}
		return time.Duration(min(n, int64(1<<63-1)/int64(time.Second))) * time.Second, true, nil
	}
	if d, ok, err := secs("DEBUGINFOD_TIMEOUT"); err != nil {
		return nil, err
	} else if ok {
		c.Timeout = d
	}
	if c.MaxTime, _, err = secs("DEBUGINFOD_MAXTIME"); err != nil {
		return nil, err
	}
	if v := strings.TrimSpace(os.Getenv("DEBUGINFOD_MAXSIZE")); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("debuginfod: DEBUGINFOD_MAXSIZE=%q: not a number of bytes", v)
		}
		c.MaxSize = n
	}
	if _, ok := os.LookupEnv("DEBUGINFOD_PROGRESS"); ok {
		c.Progress = func(u string, done, total int64) {
			if total >= 0 {
				fmt.Fprintf(os.Stderr, "debuginfod: %s: %d of %d bytes\n", u, done, total)
			} else {
				fmt.Fprintf(os.Stderr, "debuginfod: %s: %d bytes\n", u, done)
			}
		}
	}
	return c, nil
}

// ParseURLs splits a DEBUGINFOD_URLS value into URL prefixes (see
// FromEnv), each without trailing slashes.
func ParseURLs(s string) ([]string, error) {
	var out []string
	for _, w := range strings.Fields(s) {
		if strings.HasPrefix(w, "ima:") {
			continue
		}
		u, err := url.Parse(w)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("debuginfod: DEBUGINFOD_URLS: %q is not an http:// or https:// URL", w)
		}
		out = append(out, strings.TrimRight(w, "/"))
	}
	return out, nil
}

func defaultCacheDir() (string, error) {
	if p := os.Getenv("DEBUGINFOD_CACHE_PATH"); p != "" {
		return p, nil
	}
	if x := os.Getenv("XDG_CACHE_HOME"); x != "" {
		return filepath.Join(x, "debuginfod_client"), nil
	}
	home := os.Getenv("HOME")
	if home == "" {
		return "", errors.New("debuginfod: no cache directory: DEBUGINFOD_CACHE_PATH, XDG_CACHE_HOME and HOME are unset")
	}
	if st, err := os.Stat(filepath.Join(home, ".debuginfod_client_cache")); err == nil && st.IsDir() {
		return filepath.Join(home, ".debuginfod_client_cache"), nil
	}
	return filepath.Join(home, ".cache", "debuginfod_client"), nil
}

func (c *Client) httpClient() *http.Client {
	c.once.Do(func() {
		if c.HTTP != nil {
			c.client = c.HTTP
			return
		}
		// Timeouts are the download's own (fetch): connecting and the
		// response headers count toward the first stretch.
		c.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	})
	return c.client
}

// Debuginfo returns the path of the debug file of buildID in the cache,
// fetched from the first server that has it when the cache does not. The
// file is checked: an ELF file with the same build ID.
//
// Errors: ErrNotFound (wrapped) when every server answered 404 or the
// cache remembers that they did; otherwise an error naming each server
// and what went wrong there (connection refused, an HTTP status, a stall
// past Timeout, MaxTime or MaxSize exceeded, an answer that is not the
// debug file), or ctx's. A build ID outside [debugfile.MinBuildID,
// debugfile.MaxBuildID] bytes is an error before any I/O. Cost: a stat
// when cached; otherwise one GET per server tried, the download, and one
// read of the file's headers and notes.
func (c *Client) Debuginfo(ctx context.Context, buildID []byte) (string, error) {
	hexID, err := debugfile.BuildIDHex(buildID)
	if err != nil {
		return "", err
	}
	if c.CacheDir == "" {
		return "", errors.New("debuginfod: no cache directory")
	}
	dir := filepath.Join(c.CacheDir, hexID)
	dst := filepath.Join(dir, "debuginfo")
	if st, err := os.Lstat(dst); err == nil {
		if !st.Mode().IsRegular() {
			return "", fmt.Errorf("debuginfod: %s is not a regular file (mode %v): not used", dst, st.Mode())
		}
		if st.Size() > 0 {
			if err := debugfile.CheckBuildID(dst, buildID); err != nil {
				return "", fmt.Errorf("debuginfod: cached file %s: %w", dst, err)
			}
			return dst, nil
		}
		if miss := c.cacheMiss(); miss > 0 && time.Since(st.ModTime()) < miss {
			return "", fmt.Errorf("%w: build ID %s (the cache remembers that no server had it, %s)", ErrNotFound, hexID, dst)
		}
	}
	if len(c.URLs) == 0 {
		return "", fmt.Errorf("%w: build ID %s: no debuginfod server (DEBUGINFOD_URLS)", ErrNotFound, hexID)
	}
	if err := c.mkdirs(dir); err != nil {
		return "", err
	}
	var errs []error
	notFound := 0
	for _, u := range c.URLs {
		src := strings.TrimRight(u, "/") + "/buildid/" + hexID + "/debuginfo"
		err := c.fetch(ctx, src, dst, buildID)
		if err == nil {
			return dst, nil
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("debuginfod: %s: %w", src, context.Cause(ctx))
		}
		if errors.Is(err, errHTTPNotFound) {
			notFound++
		}
		errs = append(errs, fmt.Errorf("%s: %w", src, err))
	}
	if notFound == len(c.URLs) {
		if c.cacheMiss() > 0 {
			_ = atomicfile.Write(dst, nil, atomicfile.Options{Mode: 0o600})
		}
		return "", fmt.Errorf("%w: build ID %s: no server has it (%v)", ErrNotFound, hexID, joinErrs(errs))
	}
	return "", fmt.Errorf("debuginfod: build ID %s: %v", hexID, joinErrs(errs))
}

func joinErrs(errs []error) string {
	s := make([]string, len(errs))
	for i, e := range errs {
		s[i] = e.Error()
	}
	return strings.Join(s, "; ")
}

// cacheMiss returns how long a failed query is remembered.
func (c *Client) cacheMiss() time.Duration {
	if c.CacheMiss != 0 {
		return max(c.CacheMiss, 0)
	}
	b, err := os.ReadFile(filepath.Join(c.CacheDir, "cache_miss_s"))
	if err != nil {
		return DefaultCacheMiss
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 32)
	if err != nil || n < 0 {
		return DefaultCacheMiss
	}
	return time.Duration(n) * time.Second
}

// mkdirs makes the cache directory and dir in it, mode 0700; dir must
// be a directory, not a symbolic link.
func (c *Client) mkdirs(dir string) error {
	if err := os.MkdirAll(c.CacheDir, 0o700); err != nil {
		return fmt.Errorf("debuginfod: cache: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return fmt.Errorf("debuginfod: cache: %w", err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("debuginfod: cache: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("debuginfod: cache: %s is not a directory (mode %v): not used", dir, st.Mode())
	}
	return nil
}

var errHTTPNotFound = errors.New("404 Not Found")

// stall is the cause of a download's cancellation when a Timeout-long
// stretch brought less than ProgressUnit bytes.
type stallError struct {
	timeout time.Duration
	done    int64
}

func (e *stallError) Error() string {
	return fmt.Sprintf("less than %d bytes in %v after %d bytes (DEBUGINFOD_TIMEOUT)", ProgressUnit, e.timeout, e.done)
}

// fetch downloads src into dst (through a temporary file in its
// directory), checking the file's build ID before the rename.
func (c *Client) fetch(ctx context.Context, src, dst string, buildID []byte) (err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if c.MaxTime > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, c.MaxTime, fmt.Errorf("download not complete in %v (DEBUGINFOD_MAXTIME)", c.MaxTime))
		defer stop()
	}
	var mu sync.Mutex
	var done int64
	var watchdog *time.Timer
	if c.Timeout > 0 {
		watchdog = time.AfterFunc(c.Timeout, func() {
			mu.Lock()
			n := done
			mu.Unlock()
			cancel(&stallError{c.Timeout, n})
		})
		defer watchdog.Stop()
	}
	fail := func(err error) error {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
			return cause
		}
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "elfimage-debuginfod/1")
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return fail(err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return errHTTPNotFound
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("HTTP status %s", resp.Status)
	}
	limit := c.MaxSize
	if limit <= 0 || limit > MaxFileSize {
		limit = MaxFileSize
	}
	if resp.ContentLength > limit {
		return fmt.Errorf("the file has %d bytes, more than the %d allowed (DEBUGINFOD_MAXSIZE)", resp.ContentLength, limit)
	}
	tmp := atomicfile.TempName(dst)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	defer func() {
		if f != nil {
			f.Close()
		}
		if err != nil {
			os.Remove(tmp)
		}
	}()
	buf := make([]byte, 64<<10)
	var n, mark, report int64
	for {
		k, rerr := resp.Body.Read(buf)
		if k > 0 {
			if n+int64(k) > limit {
				return fmt.Errorf("the file has more than the %d bytes allowed (DEBUGINFOD_MAXSIZE)", limit)
			}
			if _, werr := f.Write(buf[:k]); werr != nil {
				return fmt.Errorf("cache: %w", werr)
			}
			n += int64(k)
			if watchdog != nil && n-mark >= ProgressUnit {
				mu.Lock()
				done = n
				mu.Unlock()
				if !watchdog.Stop() {
					return fail(context.Canceled)
				}
				watchdog.Reset(c.Timeout)
				mark = n
			}
			if c.Progress != nil && n-report >= 10*ProgressUnit {
				c.Progress(src, n, resp.ContentLength)
				report = n
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return fail(rerr)
		}
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return fmt.Errorf("%d bytes received, %d announced", n, resp.ContentLength)
	}
	if watchdog != nil && !watchdog.Stop() {
		return fail(context.Canceled)
	}
	if c.Progress != nil {
		c.Progress(src, n, resp.ContentLength)
	}
	if err := f.Chmod(0o400); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	err = f.Close()
	f = nil
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	if err := debugfile.CheckBuildID(tmp, buildID); err != nil {
		return fmt.Errorf("the answer is not the debug file: %w", err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	return nil
}
