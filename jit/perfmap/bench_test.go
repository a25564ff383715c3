package perfmap

import (
	"fmt"
	"testing"
)

// BenchmarkAddBatch measures publishing to a perf map without a profiler
// attached: Writer.AddBatch of batches of 1, 100 and 10,000 entries (names
// like "module.procedure_1234", 4 KiB-spaced addresses, 200-byte sizes),
// reported per entry (ns/entry) besides per batch (ns/op). The file is cut
// back to empty every 64 Ki entries, outside the timing, so that the
// benchmark does not fill the disk; the writes go to the page cache.
func BenchmarkAddBatch(b *testing.B) {
	for _, n := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			w, err := Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			entries := make([]Entry, n)
			for i := range entries {
				entries[i] = Entry{Start: 0x7f0000000000 + uint64(i)*0x1000, Size: 200, Name: fmt.Sprintf("module.procedure_%d", i)}
			}
			b.ReportAllocs()
			written := 0
			for b.Loop() {
				if err := w.AddBatch(entries); err != nil {
					b.Fatal(err)
				}
				if written += n; written >= 64<<10 {
					b.StopTimer()
					if err := w.f.Truncate(0); err != nil {
						b.Fatal(err)
					}
					written = 0
					b.StartTimer()
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
		})
	}
}
