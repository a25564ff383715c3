//go:build linux && amd64

package selfprof

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// sampler is the reader: a goroutine locked to its own OS thread, which
// gets no event (it is not sampled), drains the rings and feeds the
// aggregator.
type sampler struct {
	poll *poller
}

// drainInterval bounds the time between two drains, in ms: the rings also
// wake the reader when a quarter full (wakeup_watermark).
const drainInterval = 50

func startSampler(p *Profiler) error {
	s := &sampler{}
	p.sys = s
	ready := make(chan error, 1)
	go s.run(p, ready)
	return <-ready
}

func stopSampler(p *Profiler) { p.sys.poll.wake() }

func (s *sampler) run(p *Profiler, ready chan<- error) {
	// Never unlocked: the thread ends with this goroutine, so no
	// goroutine of the program ever runs on the one thread without
	// events. Threads the runtime creates while this one is locked are
	// cloned by its template thread, which has events.
	runtime.LockOSThread()
	defer close(p.done)
	ev, err := openEvents(&p.opts, gettid())
	if err != nil {
		ready <- err
		return
	}
	defer ev.close()
	poll, err := newPoller(ev)
	if err != nil {
		ready <- err
		return
	}
	defer poll.close()
	s.poll = poll
	if err := ev.enable(true); err != nil {
		ready <- err
		return
	}
	p.stats.Threads, p.stats.Events, p.stats.CPUs, p.stats.Kernel = ev.threads, ev.events, len(ev.rings), ev.kernel
	ready <- nil
	for {
		stop := poll.wait(drainInterval)
		s.drain(p, ev)
		if stop {
			break
		}
	}
	ev.enable(false)
	s.drain(p, ev)
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_THREAD, &ru) == nil {
		p.stats.ReaderCPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
}

func (s *sampler) drain(p *Profiler, ev *events) {
	a := p.agg
	for _, r := range ev.rings {
		if r.meta == nil {
			continue
		}
		r.drain(func(rec []byte, off uint64) {
			typ, misc, _, _ := recordHeader(rec)
			switch typ {
			case recordSample:
				if err := decodeSample(rec, off, popcount(regsMask), &a.cur); err != nil {
					p.bad(err)
					return
				}
				a.add(&a.cur, misc)
			case recordLost:
				n, err := decodeLost(rec, off)
				if err != nil {
					p.bad(err)
					return
				}
				p.stats.Lost += int64(n)
			case recordLostSamples:
				n, err := decodeLostSamples(rec, off)
				if err != nil {
					p.bad(err)
					return
				}
				p.stats.Lost += int64(n)
			}
		}, func(off uint64, msg string) {
			p.bad(&decodeError{Off: off, Field: "header", Msg: msg})
		})
	}
}
