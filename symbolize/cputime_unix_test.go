//go:build unix

package symbolize_test

import "syscall"

// processCPU returns the process's user and system CPU time so far, in
// nanoseconds (0 when getrusage fails).
func processCPU() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
