package selfprof

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/google/pprof/profile"
)

// Options tunes a [Profiler]. The zero value gives 100 samples per second
// of CPU time, an 8 KiB stack copy per sample and 512 KiB ring buffers.
type Options struct {
	// Rate is the sampling rate in samples per second of CPU time of
	// each thread (the event's period is 1e9/Rate ns of the software
	// cpu-clock); 0 means 100, as runtime/pprof. At most 100,000.
	Rate int
	// StackSize is how many bytes of each sampled thread's user stack
	// the kernel copies into a sample, from the stack pointer up; the
	// native frames are unwound from that copy, so it must reach the top
	// of the native stack (native.Stack) for the walk to cross into the
	// Go frames. 0 means 8192; it is rounded up to a multiple of 8 and at
	// most 65528 (the kernel's limit).
	StackSize int
	// RingSize is the size in bytes of each CPU's ring buffer (data
	// area), rounded up to a power of two pages; 0 means 512 KiB, which
	// fits an unprivileged user's kernel.perf_event_mlock_kb default (516
	// KiB per CPU). A sample costs about StackSize+300 bytes.
	RingSize int
	// MaxFrames bounds the kernel's call chain per sample
	// (sample_max_stack); 0 means 127, kernel.perf_event_max_stack's
	// default.
	MaxFrames int
	// UserOnly samples user time only (exclude_kernel, as perf's
	// cpu-clock:u). Otherwise time in system calls is sampled too, as a
	// "[kernel]" frame on top of the user stack, when the kernel allows
	// it (perf_event_paranoid 1 or below, or privileges), and user time
	// only otherwise ([Stats.Kernel] tells which).
	UserOnly bool
}

const (
	defaultRate      = 100
	maxRate          = 100_000
	defaultStackSize = 8192
	maxStackSize     = 65528
	defaultRingSize  = 512 << 10
	defaultMaxFrames = 127
)

func (o Options) withDefaults(pageSize int) (Options, error) {
	if o.Rate == 0 {
		o.Rate = defaultRate
	}
	if o.Rate < 0 || o.Rate > maxRate {
		return o, fmt.Errorf("selfprof: rate %d Hz: want 1 to %d", o.Rate, maxRate)
	}
	if o.StackSize == 0 {
		o.StackSize = defaultStackSize
	}
	if o.StackSize < 0 || o.StackSize > maxStackSize {
		return o, fmt.Errorf("selfprof: stack size %d bytes: want 8 to %d", o.StackSize, maxStackSize)
	}
	o.StackSize = (o.StackSize + 7) &^ 7
	if o.RingSize == 0 {
		o.RingSize = defaultRingSize
	}
	if o.RingSize < 0 || o.RingSize > 1<<30 {
		return o, fmt.Errorf("selfprof: ring size %d bytes: want at most 1 GiB", o.RingSize)
	}
	pages := 1
	for pages*pageSize < o.RingSize {
		pages *= 2
	}
	o.RingSize = pages * pageSize
	if o.MaxFrames == 0 {
		o.MaxFrames = defaultMaxFrames
	}
	if o.MaxFrames < 1 || o.MaxFrames > 65535 {
		return o, fmt.Errorf("selfprof: max frames %d: want 1 to 65535", o.MaxFrames)
	}
	return o, nil
}

// Stats counts what a profile is made of.
type Stats struct {
	// Samples is the number of samples in the profile.
	Samples int64
	// Lost is the number of records the kernel dropped because a ring
	// was full (PERF_RECORD_LOST and PERF_RECORD_LOST_SAMPLES): samples
	// the profile misses. Raise RingSize or lower Rate or StackSize.
	Lost int64
	// Unjoined counts samples in image code whose Go callers could not be
	// found: the native walk stopped before the entry frame (the stack
	// copy did not reach the native stack's top, or a frame had neither
	// CFI nor a frame pointer) and the kernel's call chain did not reach
	// native.Call's trampoline either. Their stacks end at the last
	// native frame found.
	Unjoined int64
	// Children counts the samples of child processes, dropped: inherited
	// events follow the threads a process creates and the processes it
	// forks (exec.Command included), and their samples arrive in the same
	// rings; their code is not this process's.
	Children int64
	// Malformed counts records that could not be decoded (they are
	// skipped; the first error is in Err).
	Malformed int64
	// Threads is the number of threads given events when the profile
	// started (later threads inherit them); Events the number of events
	// (threads × CPUs); CPUs the number of rings.
	Threads, Events, CPUs int
	// Kernel reports whether time in the kernel was sampled (see
	// Options.UserOnly).
	Kernel bool
	// ReaderCPU is the CPU time (user and system) of the profiler's
	// reader thread: opening the events, draining the rings, unwinding
	// and symbolizing the samples. The kernel's cost of taking the
	// samples is charged to the sampled threads.
	ReaderCPU time.Duration
	// Err is the first decoding error, if any.
	Err error
}

// Profiler samples the calling process's own threads (see the package
// documentation). Create one with [Start]; [Profiler.Stop] ends it and
// returns the profile.
type Profiler struct {
	opts  Options
	start time.Time

	mu      sync.Mutex
	stopped bool
	final   *Stats        // under mu: the counts, once Stop has them
	done    chan struct{} // closed when the reader has exited
	agg     *aggregator
	stats   Stats    // written by the reader, then by Stop
	sys     *sampler // the platform part (perf events, reader thread)
}

// Start starts sampling every thread of the process, those created later
// included, except the profiler's own reader thread. Errors: an invalid
// Options field; an error wrapping [ErrRefused] when the kernel refuses
// perf_event_open (the message says why and what to do); other system
// call failures (mapping the rings beyond the locked-memory limit, too
// many descriptors); errors.ErrUnsupported outside linux/amd64. Cost: one
// perf_event_open per thread and CPU, one mmap per CPU, one locked OS
// thread for the reader.
func Start(opts *Options) (*Profiler, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o, err := o.withDefaults(pageSize())
	if err != nil {
		return nil, err
	}
	p := &Profiler{opts: o, done: make(chan struct{}), agg: newAggregator(o)}
	if err := startSampler(p); err != nil {
		return nil, err
	}
	p.start = time.Now()
	return p, nil
}

// Stop stops sampling, drains the rings and returns the profile
// (profile.proto as github.com/google/pprof/profile models it; see the
// package documentation for what it holds). A second Stop returns an
// error. Cost: one last drain, then symbolization of every distinct
// location (mostly done while sampling) and the profile's construction.
func (p *Profiler) Stop() (*profile.Profile, error) {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return nil, errors.New("selfprof: profiler already stopped")
	}
	p.stopped = true
	p.mu.Unlock()
	stopSampler(p)
	<-p.done
	end := time.Now()
	p.stats.Samples = p.agg.samples
	p.stats.Unjoined = p.agg.unjoined
	p.stats.Children = p.agg.children
	prof, err := p.agg.build(p.start, end, &p.stats)
	st := p.stats
	p.mu.Lock()
	p.final = &st
	p.mu.Unlock()
	return prof, err
}

// Stats returns the counts of a stopped profiler: the zero Stats until
// [Profiler.Stop] has returned.
func (p *Profiler) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.final == nil {
		return Stats{}
	}
	return *p.final
}

// The process-wide profile of StartCPUProfile and StopCPUProfile.
var (
	cpuMu   sync.Mutex
	cpuProf *Profiler
	cpuOut  io.Writer // nil while a Handler's profile runs
	cpuRate = defaultRate
)

// ErrProfiling is returned by [StartCPUProfile] (and served by
// [Handler]) while a profile started by StartCPUProfile or by the handler
// is running: one at a time, as runtime/pprof.
var ErrProfiling = errors.New("selfprof: cpu profiling already in use")

// SetCPUProfileRate sets the rate in Hz of the next [StartCPUProfile]
// (runtime.SetCPUProfileRate's counterpart; 100 by default).
func SetCPUProfileRate(hz int) { cpuMu.Lock(); cpuRate = hz; cpuMu.Unlock() }

// StartCPUProfile starts a CPU profile of the process that
// [StopCPUProfile] writes to w, as runtime/pprof.StartCPUProfile does,
// but with the frames of image code and the Go code that called it
// (runtime/pprof cannot walk code outside Go: it records such samples as
// runtime._ExternalCode). The two profilers can run at once (they use
// different mechanisms: SIGPROF and perf events). Errors: [ErrProfiling]
// while a profile runs, and those of [Start].
func StartCPUProfile(w io.Writer) error {
	cpuMu.Lock()
	defer cpuMu.Unlock()
	if cpuProf != nil {
		return ErrProfiling
	}
	p, err := Start(&Options{Rate: cpuRate})
	if err != nil {
		return err
	}
	cpuProf, cpuOut = p, w
	return nil
}

// StopCPUProfile stops the profile of [StartCPUProfile] and writes it to
// its writer (gzipped profile.proto, what `go tool pprof` reads). It
// returns the error of building or writing the profile, nil when no
// profile of StartCPUProfile runs (one that a [Handler] serves is left
// alone) (runtime/pprof.StopCPUProfile returns nothing and drops
// such errors).
func StopCPUProfile() error {
	cpuMu.Lock()
	p, w := cpuProf, cpuOut
	if w == nil { // none, or a Handler's: not ours to stop
		cpuMu.Unlock()
		return nil
	}
	cpuProf, cpuOut = nil, nil
	cpuMu.Unlock()
	prof, err := p.Stop()
	if err != nil {
		return err
	}
	return prof.Write(w)
}

// bad counts a record that could not be decoded; called by the reader.
func (p *Profiler) bad(err error) {
	p.stats.Malformed++
	if p.stats.Err == nil {
		p.stats.Err = err
	}
}
