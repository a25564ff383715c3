//go:build !unix

package symbolize_test

// processCPU is 0 where getrusage is missing: the benchmarks then report
// no CPU time.
func processCPU() int64 { return 0 }
