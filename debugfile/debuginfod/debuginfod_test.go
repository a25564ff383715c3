package debuginfod_test

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/elfimage/elfimage/debugfile"
	"github.com/elfimage/elfimage/debugfile/debuginfod"
	"github.com/elfimage/elfimage/elfobj"
)

// debugFile returns a small ELF file (an ET_EXEC with one .debug_info-like
// section) whose NT_GNU_BUILD_ID note holds id, and pad bytes of
// section data.
func debugFile(id []byte, pad int) []byte {
	w := elfobj.NewWriter(elf.ELFCLASS64, elf.ELFDATA2LSB)
	note := w.AddSection(elf.SectionHeader{Name: ".note.gnu.build-id", Type: elf.SHT_NOTE, Addralign: 4})
	data := w.AddSection(elf.SectionHeader{Name: ".debug_str", Type: elf.SHT_PROGBITS, Addralign: 1})
	var n []byte
	n = binary.LittleEndian.AppendUint32(n, 4)
	n = binary.LittleEndian.AppendUint32(n, uint32(len(id)))
	n = binary.LittleEndian.AppendUint32(n, uint32(elfobj.NT_GNU_BUILD_ID))
	n = append(n, "GNU\x00"...)
	n = append(n, id...)
	for len(n)%4 != 0 {
		n = append(n, 0)
	}
	w.ReserveFileHeader()
	w.ReserveSectionData(note, uint64(len(n)))
	w.ReserveSectionData(data, uint64(pad))
	shstrtab := w.ReserveShstrtab()
	w.ReserveSectionHeaders()
	w.WriteFileHeader(elfobj.FileHeader{Type: elf.ET_EXEC, Machine: elf.EM_X86_64})
	w.WriteSection(note, n)
	w.WriteSection(data, bytes.Repeat([]byte{'x'}, pad))
	w.WriteStringTable(shstrtab)
	w.WriteSectionHeaders()
	b, err := w.Finish()
	if err != nil {
		panic(err)
	}
	return b
}

var testID = []byte{0x7f, 0x0f, 0x6d, 0xb5, 0x0e, 0xd1, 0x5a, 0xd3, 0x12, 0x24, 0xf2, 0xc6, 0xf8, 0xbf, 0xa7, 0x6e, 0x56, 0xb4, 0xe0, 0x58}

const testHex = "7f0f6db50ed15ad31224f2c6f8bfa76e56b4e058"

// server serves body for testHex's debuginfo (404 for anything else) and
// counts requests.
func server(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s, &n
}

func serve(body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/buildid/"+testHex+"/debuginfo" {
			http.NotFound(w, r)
			return
		}
		w.Write(body)
	}
}

func client(t *testing.T, urls ...string) *debuginfod.Client {
	return &debuginfod.Client{URLs: urls, CacheDir: filepath.Join(t.TempDir(), "cache"), Timeout: 10 * time.Second}
}

// cacheFiles lists the files under dir, relative to it.
func cacheFiles(t *testing.T, dir string) []string {
	var out []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// TestFetch: the file is fetched once from the first server that has it
// (after one that answers 404), laid out as elfutils lays it out, and
// answered from the cache afterwards.
func TestFetch(t *testing.T) {
	body := debugFile(testID, 300<<10)
	missing, _ := server(t, http.NotFound)
	s, n := server(t, serve(body))
	c := client(t, missing.URL, s.URL+"/")
	p, err := c.Debuginfo(context.Background(), testID)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(c.CacheDir, testHex, "debuginfo"); p != want {
		t.Errorf("path %s, want %s", p, want)
	}
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("cached file: %d bytes, %v; want the %d served", len(got), err, len(body))
	}
	st, _ := os.Stat(filepath.Dir(p))
	fst, _ := os.Stat(p)
	if st.Mode().Perm() != 0o700 || fst.Mode().Perm() != 0o400 {
		t.Errorf("modes %v %v, want 0700 and 0400 as elfutils makes them", st.Mode(), fst.Mode())
	}
	if _, err := c.Debuginfo(context.Background(), testID); err != nil || n.Load() != 1 {
		t.Errorf("second lookup: %v, %d requests; want 1", err, n.Load())
	}
	if files := cacheFiles(t, c.CacheDir); len(files) != 1 {
		t.Errorf("cache holds %v, want the one file", files)
	}
}

// TestNotFound: when every server answers 404 the error wraps
// ErrNotFound and the miss is remembered for cache_miss_s.
func TestNotFound(t *testing.T) {
	s, n := server(t, http.NotFound)
	c := client(t, s.URL)
	_, err := c.Debuginfo(context.Background(), testID)
	if !errors.Is(err, debugfile.ErrNotFound) || !strings.Contains(err.Error(), "404") {
		t.Fatalf("err = %v, want ErrNotFound from a 404", err)
	}
	st, err := os.Stat(filepath.Join(c.CacheDir, testHex, "debuginfo"))
	if err != nil || st.Size() != 0 {
		t.Fatalf("no empty miss file: %v", err)
	}
	if _, err := c.Debuginfo(context.Background(), testID); !errors.Is(err, debugfile.ErrNotFound) || n.Load() != 1 || !strings.Contains(err.Error(), "remembers") {
		t.Errorf("second lookup: %v after %d requests; want the remembered miss, 1 request", err, n.Load())
	}
	// cache_miss_s 0: forget at once.
	os.WriteFile(filepath.Join(c.CacheDir, "cache_miss_s"), []byte("0\n"), 0o644)
	c2 := &debuginfod.Client{URLs: c.URLs, CacheDir: c.CacheDir, Timeout: c.Timeout}
	if _, err := c2.Debuginfo(context.Background(), testID); !errors.Is(err, debugfile.ErrNotFound) || n.Load() != 2 {
		t.Errorf("with cache_miss_s 0: %v after %d requests; want 2", err, n.Load())
	}
}

// TestBadAnswers: a server that is down, answers 500, answers garbage,
// another build's file, a truncated file, or more than MaxSize gives an
// error saying so, leaves nothing in the cache, and is not remembered as
// a miss.
func TestBadAnswers(t *testing.T) {
	good := debugFile(testID, 1000)
	other := debugFile(bytes.Repeat([]byte{1}, 20), 1000)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close()
	for _, c := range []struct {
		name string
		h    http.HandlerFunc
		url  string
		max  int64
		want string
	}{
		{name: "down", url: down, want: "connection refused"},
		{name: "500", h: func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) }, want: "HTTP status 500"},
		{name: "garbage", h: serve([]byte("<html>hello</html>")), want: "not the debug file"},
		{name: "empty", h: serve(nil), want: "not the debug file"},
		{name: "other build", h: serve(other), want: "build ID is 0101"},
		{name: "truncated", h: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(len(good)))
			w.Write(good[:len(good)/2])
		}, want: "unexpected EOF"},
		{name: "announced too big", h: serve(good), max: 100, want: "DEBUGINFOD_MAXSIZE"},
		{name: "too big", h: func(w http.ResponseWriter, r *http.Request) {
			w.(http.Flusher).Flush() // chunked: no length announced
			w.Write(good)
		}, max: 100, want: "DEBUGINFOD_MAXSIZE"},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := c.url
			if c.h != nil {
				s, _ := server(t, c.h)
				u = s.URL
			}
			cl := client(t, u)
			cl.MaxSize = c.max
			_, err := cl.Debuginfo(context.Background(), testID)
			if err == nil || errors.Is(err, debugfile.ErrNotFound) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), u) {
				t.Fatalf("err = %v, want one naming %s and saying %q", err, u, c.want)
			}
			if files := cacheFiles(t, cl.CacheDir); len(files) != 0 {
				t.Errorf("cache holds %v after a failure", files)
			}
		})
	}
}

// TestStall: a server that sends the headers, or part of the file, and
// then stalls is abandoned after Timeout with an error naming
// DEBUGINFOD_TIMEOUT; MaxTime bounds a server that trickles.
func TestStall(t *testing.T) {
	body := debugFile(testID, 400<<10)
	// A stalled handler waits until the client goes away.
	stall := func(r *http.Request) { <-r.Context().Done() }
	for _, c := range []struct {
		name    string
		h       http.HandlerFunc
		maxTime time.Duration
		want    string
	}{
		{"before headers", func(w http.ResponseWriter, r *http.Request) { stall(r) }, 0, "DEBUGINFOD_TIMEOUT"},
		{"after headers", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			stall(r)
		}, 0, "DEBUGINFOD_TIMEOUT"},
		{"after 200 KiB", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			w.Write(body[:200<<10])
			w.(http.Flusher).Flush()
			stall(r)
		}, 0, "DEBUGINFOD_TIMEOUT"},
		{"trickle", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			for i := 0; i < len(body); i += 150 << 10 {
				w.Write(body[i:min(i+150<<10, len(body))])
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}, 150 * time.Millisecond, "DEBUGINFOD_MAXTIME"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _ := server(t, c.h)
			cl := client(t, s.URL)
			cl.Timeout, cl.MaxTime = 200*time.Millisecond, c.maxTime
			if c.maxTime > 0 {
				cl.Timeout = time.Minute
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := cl.Debuginfo(ctx, testID)
			if err == nil || !strings.Contains(err.Error(), c.want) || ctx.Err() != nil {
				t.Fatalf("err = %v, want one naming %s", err, c.want)
			}
			if files := cacheFiles(t, cl.CacheDir); len(files) != 0 {
				t.Errorf("cache holds %v after a stall", files)
			}
		})
	}
}

// TestCacheSafety: the build ID is validated before any I/O, and a cache
// entry that is a symbolic link is refused, not followed.
func TestCacheSafety(t *testing.T) {
	s, n := server(t, serve(debugFile(testID, 10)))
	c := client(t, s.URL)
	for _, id := range [][]byte{nil, {1}, make([]byte, 65)} {
		if _, err := c.Debuginfo(context.Background(), id); err == nil {
			t.Errorf("build ID %x: no error", id)
		}
	}
	if n.Load() != 0 {
		t.Errorf("%d requests for invalid build IDs", n.Load())
	}
	outside := t.TempDir()
	os.MkdirAll(c.CacheDir, 0o700)
	if err := os.Symlink(outside, filepath.Join(c.CacheDir, testHex)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Debuginfo(context.Background(), testID); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("symlinked entry: %v", err)
	}
	if files := cacheFiles(t, outside); len(files) != 0 {
		t.Errorf("wrote %v outside the cache", files)
	}
}

// TestFromEnv: the variables elfutils documents.
func TestFromEnv(t *testing.T) {
	t.Setenv("DEBUGINFOD_URLS", "")
	if c, err := debuginfod.FromEnv(); c != nil || err != nil {
		t.Errorf("no URLs: %v, %v", c, err)
	}
	t.Setenv("DEBUGINFOD_URLS", "http://a.example/ ima:enforcing  https://b.example:8002")
	t.Setenv("DEBUGINFOD_CACHE_PATH", "")
	t.Setenv("XDG_CACHE_HOME", "/x")
	t.Setenv("DEBUGINFOD_TIMEOUT", "5")
	t.Setenv("DEBUGINFOD_MAXTIME", "7")
	t.Setenv("DEBUGINFOD_MAXSIZE", "1000")
	c, err := debuginfod.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.URLs, " ") != "http://a.example https://b.example:8002" || c.CacheDir != "/x/debuginfod_client" ||
		c.Timeout != 5*time.Second || c.MaxTime != 7*time.Second || c.MaxSize != 1000 {
		t.Errorf("FromEnv = %+v", c)
	}
	t.Setenv("DEBUGINFOD_CACHE_PATH", "/c")
	t.Setenv("DEBUGINFOD_TIMEOUT", "0")
	if c, _ := debuginfod.FromEnv(); c.CacheDir != "/c" || c.Timeout != 0 {
		t.Errorf("FromEnv = %+v", c)
	}
	for k, v := range map[string]string{"DEBUGINFOD_TIMEOUT": "soon", "DEBUGINFOD_MAXSIZE": "-1", "DEBUGINFOD_URLS": "ftp://x"} {
		t.Run(k, func(t *testing.T) {
			t.Setenv(k, v)
			if _, err := debuginfod.FromEnv(); err == nil || !strings.Contains(err.Error(), k) {
				t.Errorf("%s=%s: %v", k, v, err)
			}
		})
	}
}
