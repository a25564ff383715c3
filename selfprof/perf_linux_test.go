//go:build linux && amd64

package selfprof

import (
	"errors"
	"os"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fakeRing is a ring over Go memory: a metadata page and a data area of
// one page, with head and tail as the test sets them.
func fakeRing(t *testing.T) *ring {
	ps := os.Getpagesize()
	mem := make([]byte, 2*ps)
	r := &ring{mem: mem, data: mem[ps:]}
	r.meta = (*unix.PerfEventMmapPage)(unsafe.Pointer(&mem[0]))
	return r
}

// put writes rec into the ring's stream at offset off (wrapping).
func (r *ring) put(off uint64, rec []byte) {
	for i, c := range rec {
		r.data[(off+uint64(i))%uint64(len(r.data))] = c
	}
}

func TestRingDrainWraps(t *testing.T) {
	r := fakeRing(t)
	size := uint64(len(r.data))
	a := encodeLost(1, 10)
	s := encodeSample(testSample(), 2)
	// Start near the end so that the sample wraps around.
	off := size - uint64(len(a)) - 16
	r.meta.Data_tail = off
	r.put(off, a)
	r.put(off+uint64(len(a)), s)
	r.meta.Data_head = off + uint64(len(a)+len(s))
	var got [][]byte
	var offs []uint64
	r.drain(func(rec []byte, o uint64) { got = append(got, append([]byte(nil), rec...)); offs = append(offs, o) },
		func(o uint64, msg string) { t.Errorf("bad record at %#x: %s", o, msg) })
	if len(got) != 2 || string(got[0]) != string(a) || string(got[1]) != string(s) {
		t.Fatalf("drained %d records, want the lost record and the wrapped sample", len(got))
	}
	if offs[0] != off || offs[1] != off+uint64(len(a)) {
		t.Errorf("offsets %#x, want %#x and %#x", offs, off, off+uint64(len(a)))
	}
	if r.meta.Data_tail != r.meta.Data_head {
		t.Errorf("data_tail %#x after the drain, want data_head %#x", r.meta.Data_tail, r.meta.Data_head)
	}
	var sm sample
	if err := decodeSample(got[1], offs[1], popcount(regsMask), &sm); err != nil || sm.TID != 43 {
		t.Errorf("wrapped sample decodes as %+v, %v", sm, err)
	}
}

func TestRingDrainHostile(t *testing.T) {
	for _, c := range []struct {
		name       string
		size       uint16
		head       uint64
		wantPrefix string
	}{
		{"size below the header", 4, 64, "record size 4"},
		{"size beyond head", 200, 64, "record size 200"},
		{"head beyond the ring", 16, 1 << 40, "data_head"},
	} {
		r := fakeRing(t)
		rec := encodeLost(1, 1)
		rec[6], rec[7] = byte(c.size), byte(c.size>>8)
		r.put(0, rec)
		r.meta.Data_head = c.head
		n, bad := 0, ""
		r.drain(func([]byte, uint64) { n++ }, func(_ uint64, msg string) { bad = msg })
		if n != 0 || !strings.HasPrefix(bad, c.wantPrefix) {
			t.Errorf("%s: %d records, bad %q; want none and %q", c.name, n, bad, c.wantPrefix)
		}
		if r.meta.Data_tail != c.head {
			t.Errorf("%s: data_tail %#x, want the ring emptied to %#x", c.name, r.meta.Data_tail, c.head)
		}
	}
}

func TestOpenErrorSaysWhatToDo(t *testing.T) {
	for _, errno := range []error{unix.EACCES, unix.EPERM} {
		err := openError(errno)
		if !errors.Is(err, ErrRefused) || !errors.Is(err, errno) {
			t.Errorf("%v: %v does not wrap ErrRefused and the errno", errno, err)
		}
		for _, w := range []string{"kernel.perf_event_paranoid is ", "sysctl kernel.perf_event_paranoid=2", "seccomp"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %q lacks %q", errno, err, w)
			}
		}
	}
	if err := openError(unix.ENOSYS); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "seccomp") {
		t.Errorf("ENOSYS: %v", err)
	}
}
