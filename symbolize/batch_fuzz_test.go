package symbolize

import (
	"os"
	"reflect"
	"slices"
	"testing"
)

// FuzzBatch: any bytes as a whole ELF file. Oracle: SymbolizeBatch of the
// probed addresses, sorted with each twice and in probe order, answers
// as Symbolize does address by address on another Symbolizer of the same
// bytes: the same frames and the same error text, prepared or not.
func FuzzBatch(f *testing.F) {
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
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ref, err := New(data)
		if err != nil {
			return
		}
		probe := probeAddrs(ref)
		sorted := slices.Clone(probe)
		slices.Sort(sorted)
		twice := make([]uint64, 0, 2*len(sorted))
		for _, a := range sorted {
			twice = append(twice, a, a+1, a)
		}
		for k, addrs := range [][]uint64{twice, probe} {
			s, err := New(data)
			if err != nil {
				t.Fatalf("New succeeded once, then: %v", err)
			}
			if k == 0 {
				s.Prepare(addrs)
			}
			var ends []int
			var errs []string
			frames, err := s.SymbolizeBatch(addrs, nil, func(i, end int, err error) {
				ends, errs = append(ends, end), append(errs, errText(err))
			})
			if err != nil || len(ends) != len(addrs) {
				t.Fatalf("SymbolizeBatch: %v, %d answers for %d addresses", err, len(ends), len(addrs))
			}
			start := 0
			for i, a := range addrs {
				want, werr := ref.Symbolize(a, nil)
				got := frames[start:ends[i]]
				start = ends[i]
				if errs[i] != errText(werr) || len(got) != len(want) || (len(got) > 0 && !reflect.DeepEqual(got, want)) {
					t.Fatalf("address %#x: batch %+v (error %q), Symbolize %+v (error %v)", a, got, errs[i], want, werr)
				}
			}
		}
	})
}
