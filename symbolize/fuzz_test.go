package symbolize

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

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

// probe symbolizes addresses spread over the first 64 KiB and over the
// address ranges the file's units claim; it must never panic. With prepare
// the addresses go through Prepare first (units indexed in parallel),
// otherwise each unit is indexed on demand.
func probe(s *Symbolizer, prepare bool) {
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
	if prepare {
		s.Prepare(addrs)
	}
	var frames []Frame
	for _, a := range addrs {
		frames, _ = s.Symbolize(a, frames[:0])
	}
}

// FuzzNew: any bytes as a whole ELF file (half the inputs, by length,
// go through Prepare).
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
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := New(data)
		if err != nil {
			return
		}
		probe(s, len(data)%2 == 0)
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
		d, err := loadSections(func(n string) ([]byte, error) { return m[n], nil })
		if err != nil || d == nil {
			return
		}
		for i := range d.units {
			x := d.index(i)
			if x.err != nil {
				continue
			}
			var frames []Frame
			for j, st := range x.segStart {
				if j > 256 {
					break
				}
				frames = x.frames(st, frames[:0])
				frames = x.frames(x.segs[j].end-1, frames[:0])
				// The scan path answers as the index does, at both
				// ends of a segment and just outside it.
				if j < 32 {
					for _, a := range []uint64{st - 1, st, x.segs[j].end - 1, x.segs[j].end} {
						indexed := x.frames(a, nil)
						scanned, err := d.scanFrames(&d.units[i], a, nil)
						if err != nil || !slices.Equal(scanned, indexed) {
							t.Fatalf("unit %d, address %#x: scanned %v (error %v), indexed %v", i, a, scanned, err, indexed)
						}
					}
				}
			}
			if x.lines != nil {
				for j, a := range x.lines.addrs {
					if j > 256 {
						break
					}
					frames = x.frames(a, frames[:0])
				}
			}
		}
	})
}
