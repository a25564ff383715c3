package selfprof

import (
	"runtime"
	"testing"
)

// BenchmarkAddGoSample is the reader's cost for one sample taken in Go
// code (the kernel's call chain used as is): decoding the record and
// counting its stack, locations already interned.
func BenchmarkAddGoSample(b *testing.B) {
	pcs := make([]uintptr, 32)
	n := runtime.Callers(0, pcs)
	s := testSample()
	s.Callchain = []uint64{contextUser}
	for _, pc := range pcs[:n] {
		s.Callchain = append(s.Callchain, uint64(pc))
	}
	s.Regs[8] = uint64(pcs[0])
	s.StackSize, s.Stack, s.DynSize = 8192, make([]byte, 8192), 8192
	rec := encodeSample(s, 2)
	o, _ := Options{}.withDefaults(pageSize())
	a := newAggregator(o)
	nregs := popcount(regsMask)
	b.ReportAllocs()
	for b.Loop() {
		if err := decodeSample(rec, 0, nregs, &a.cur); err != nil {
			b.Fatal(err)
		}
		a.add(&a.cur, 2)
	}
}
