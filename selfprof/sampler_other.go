//go:build !(linux && amd64)

package selfprof

import (
	"errors"
	"fmt"
	"runtime"
)

type sampler struct{}

// ErrRefused is wrapped by the error of [Start] (and [StartCPUProfile])
// when the kernel refuses perf_event_open: the paranoid level, missing
// capabilities, or a seccomp filter. The message says which and what to do.
var ErrRefused = errors.New("selfprof: perf_event_open refused")

func startSampler(p *Profiler) error {
	return fmt.Errorf("selfprof: self-profiling on %s/%s: %w", runtime.GOOS, runtime.GOARCH, errors.ErrUnsupported)
}

func stopSampler(p *Profiler) {}
