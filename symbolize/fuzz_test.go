package symbolize

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// fuzzSeedBinary builds testdata/csrc with gcc -O2 -g (DWARF 5) for seeds,
// or returns "" without gcc (which fails under CI: tooltest.Optional).
func fuzzSeedBinary(f *testing.F, flags ...string) string {
	gcc := tooltest.Optional(f, "gcc")
	if gcc == "" {
		return ""
	}
	srcs, _ := filepath.Glob("testdata/csrc/*.c")
	out := filepath.Join(f.TempDir(), "seed")
	args := append(append([]string{"-O2", "-g"}, flags...), "-o", out)
	if msg, err := exec.Command(gcc, append(args, srcs...)...).CombinedOutput(); err != nil {
		f.Fatalf("gcc: %v\n%s", err, msg)
	}
	return out
}

// probeAddrs returns addresses spread over the first 64 KiB and over the
// address ranges the file's units claim.
func probeAddrs(s *Symbolizer) []uint64 {
	var addrs []uint64
	for a := uint64(0); a < 1<<16; a += 997 {
		addrs = append(addrs, a)
	}
	if d, err := s.dwarf(); err == nil && d != nil {
		for i, r := range d.cus {
			if i > 64 {
				break
			}
			addrs = append(addrs, r.start, r.start+(r.end-r.start)/2)
		}
	}
	return addrs
}

// FuzzNew: any bytes as a whole ELF file. Oracle: the three ways to the
// same answer agree at every probed address: the first query in a unit
// (which walks its DIEs), a repeated query (which indexes the unit) and a
// query after Prepare (units indexed in parallel beforehand). Errors of
// New are those Open documents.
func FuzzNew(f *testing.F) {
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	for _, flags := range [][]string{{"-gdwarf-5"}, {"-gdwarf-4", "-Os"}} {
		if p := fuzzSeedBinary(f, flags...); p != "" {
			data, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	// Big-endian and ELF32 seeds: Go's PowerPC and SPARC test objects.
	if root, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		for _, name := range []string{"go-relocation-test-gcc5-ppc.obj", "go-relocation-test-gcc620-sparc64.obj"} {
			if data, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(root)), "src/debug/elf/testdata", name)); err == nil {
				f.Add(data)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := New(data)
		if err != nil {
			var fe *dwarf.FormatError
			if !errors.Is(err, ErrNotELF) && !errors.As(err, &fe) {
				t.Fatalf("New: error %v (%T) is neither ErrNotELF nor a *dwarf.FormatError", err, err)
			}
			return
		}
		addrs := probeAddrs(s)
		prepared, err := New(data)
		if err != nil {
			t.Fatalf("New succeeded once, then: %v", err)
		}
		prepared.Prepare(addrs)
		for _, a := range addrs {
			first, err1 := s.Symbolize(a, nil)
			again, err2 := s.Symbolize(a, nil)
			prep, err3 := prepared.Symbolize(a, nil)
			if err1 != nil || err2 != nil || err3 != nil {
				continue
			}
			if !reflect.DeepEqual(first, again) || !reflect.DeepEqual(first, prep) {
				t.Fatalf("address %#x: first query %+v, repeated %+v, after Prepare %+v", a, first, again, prep)
			}
		}
	})
}

// FuzzDebugSections: arbitrary .debug_info, .debug_abbrev, .debug_line,
// .debug_rnglists, .debug_str, .debug_addr and .debug_str_offsets.
func FuzzDebugSections(f *testing.F) {
	names := []string{".debug_info", ".debug_abbrev", ".debug_line", ".debug_rnglists", ".debug_str", ".debug_addr", ".debug_str_offsets"}
	for _, flags := range [][]string{{"-gdwarf-5"}, {"-gdwarf-4"}} {
		p := fuzzSeedBinary(f, flags...)
		if p == "" {
			continue
		}
		ef, err := elf.Open(p)
		if err != nil {
			f.Fatal(err)
		}
		var secs [7][]byte
		for i, n := range names {
			if s := ef.Section(n); s != nil {
				secs[i], _ = s.Data()
			}
		}
		ef.Close()
		f.Add(secs[0], secs[1], secs[2], secs[3], secs[4], secs[5], secs[6])
	}
	f.Add([]byte{7, 0, 0, 0, 5, 0, 1, 8, 0, 0, 0}, []byte{1, 0x11, 0, 0, 0}, []byte{}, []byte{}, []byte{}, []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, info, abbrev, line, rng, str, addr, stroff []byte) {
		m := map[string][]byte{names[0]: info, names[1]: abbrev, names[2]: line, names[3]: rng, names[4]: str, names[5]: addr, names[6]: stroff}
		d, err := loadSections(func(n string) ([]byte, error) { return m[n], nil }, binary.LittleEndian)
		if err != nil || d == nil {
			return
		}
		for i := range d.units {
			x := d.index(i)
			if x.err != nil {
				continue
			}
			var frames []Frame
			for j, sg := range x.segs {
				st := sg.start
				if j > 256 {
					break
				}
				frames = x.frames(st, frames[:0])
				end := segEnd(x.segs, x.longSegs, j)
				frames = x.frames(end-1, frames[:0])
				// The scan path answers as the index does, at both
				// ends of a segment and just outside it.
				if j < 32 {
					for _, a := range []uint64{st - 1, st, end - 1, end} {
						indexed := x.frames(a, nil)
						scanned, err := d.scanFrames(&d.units[i], a, nil)
						if err != nil || !slices.Equal(scanned, indexed) {
							t.Fatalf("unit %d, address %#x: scanned %v (error %v), indexed %v", i, a, scanned, err, indexed)
						}
					}
				}
			}
			if x.lines != nil {
				for k := range x.lines.seqs {
					sq := &x.lines.seqs[k]
					for j := sq.first; j < sq.last && j <= 256; j++ {
						frames = x.frames(x.lines.rowAddr(sq, j), frames[:0])
					}
				}
			}
			// The batch's lookups from a cursor (framesFrom) answer as
			// frames does, at the segments' ends and the rows'
			// addresses in ascending order, repeated.
			var probe []uint64
			for j := range x.segs[:min(len(x.segs), 256)] {
				end := segEnd(x.segs, x.longSegs, j)
				probe = append(probe, x.segs[j].start-1, x.segs[j].start, end-1, end)
			}
			if x.lines != nil {
				for k := range x.lines.seqs[:min(len(x.lines.seqs), 64)] {
					sq := &x.lines.seqs[k]
					probe = append(probe, sq.start-1, sq.end-1, sq.end)
					for j := sq.first; j < sq.last && j-sq.first <= 64; j++ {
						probe = append(probe, x.lines.rowAddr(sq, j))
					}
				}
			}
			slices.Sort(probe)
			seq := -1
			for _, a := range probe {
				for range 2 {
					want := x.frames(a, nil)
					if got := x.framesFrom(&seq, a, nil); !slices.Equal(got, want) {
						t.Fatalf("unit %d, address %#x: from the cursor %v, frames %v", i, a, got, want)
					}
				}
			}
		}
	})
}
