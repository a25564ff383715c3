//go:build linux && amd64

package selfprof

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ring is one CPU's mmap'd ring buffer: a metadata page (struct
// perf_event_mmap_page) and a data area of a power-of-two number of pages.
type ring struct {
	cpu  int
	fd   int   // the event that owns the ring
	fds  []int // every event whose output goes to it (fd first)
	mem  []byte
	meta *unix.PerfEventMmapPage
	data []byte
	buf  []byte // a record that wraps around the end of data, made linear
}

// events is the set of perf events of one profile.
type events struct {
	rings  []*ring
	kernel bool // samples include time in the kernel (exclude_kernel clear)
	// threads and events count the threads given events and the events.
	threads, events int
}

// openEvents opens the sampling events: for every thread of the process
// but skip, one event per online CPU, all with inherit so that threads
// they create are followed, each CPU's events writing into one ring. The
// events start disabled.
func openEvents(o *Options, skip int) (*events, error) {
	cpus, err := onlineCPUs()
	if err != nil {
		return nil, err
	}
	pages := o.RingSize / os.Getpagesize()
	ev := &events{kernel: !o.UserOnly}
	attr := func() *unix.PerfEventAttr {
		a := &unix.PerfEventAttr{
			Type:              unix.PERF_TYPE_SOFTWARE,
			Config:            unix.PERF_COUNT_SW_CPU_CLOCK,
			Sample:            uint64(1e9 / o.Rate), // ns of CPU time per sample
			Sample_type:       sampleType,
			Bits:              unix.PerfBitDisabled | unix.PerfBitInherit | unix.PerfBitExcludeHv | unix.PerfBitExcludeCallchainKernel | unix.PerfBitWatermark,
			Wakeup:            uint32(pages * os.Getpagesize() / 4),
			Sample_regs_user:  regsMask,
			Sample_stack_user: uint32(o.StackSize),
			Sample_max_stack:  uint16(o.MaxFrames),
		}
		a.Size = uint32(unsafe.Sizeof(*a))
		if !ev.kernel {
			a.Bits |= unix.PerfBitExcludeKernel
		}
		return a
	}
	for _, cpu := range cpus {
		ev.rings = append(ev.rings, &ring{cpu: cpu, fd: -1})
	}
	done := map[int]bool{skip: true}
	first := true
	// Threads may be created while events are opened: a thread created
	// by one that has its events already inherits them; one created by
	// another shows up in the next scan. Three scans without a new thread
	// end it.
	for quiet := 0; quiet < 3; {
		tids, err := threads()
		if err != nil {
			ev.close()
			return nil, err
		}
		fresh := false
		for _, tid := range tids {
			if done[tid] {
				continue
			}
			fresh = true
			for _, r := range ev.rings {
				fd, err := unix.PerfEventOpen(attr(), tid, r.cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
				if (errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)) && ev.kernel && first {
					// Not allowed to sample the kernel: user time only,
					// as perf record does (cpu-clock:u).
					ev.kernel = false
					fd, err = unix.PerfEventOpen(attr(), tid, r.cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
				}
				first = false
				if errors.Is(err, unix.ESRCH) {
					break // the thread exited meanwhile
				}
				if err != nil {
					ev.close()
					return nil, openError(err)
				}
				if r.fd < 0 {
					if err := r.mapRing(fd, pages); err != nil {
						unix.Close(fd)
						ev.close()
						return nil, err
					}
				} else if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_SET_OUTPUT, r.fd); err != nil {
					unix.Close(fd)
					ev.close()
					return nil, fmt.Errorf("selfprof: redirecting the event of thread %d on CPU %d to its CPU's ring: %w", tid, r.cpu, err)
				}
				r.fds = append(r.fds, fd)
				ev.events++
			}
			done[tid] = true
			ev.threads++
		}
		if fresh {
			quiet = 0
		} else {
			quiet++
		}
	}
	return ev, nil
}

// mapRing maps the ring of the event fd: one metadata page and pages
// data pages.
func (r *ring) mapRing(fd, pages int) error {
	ps := os.Getpagesize()
	mem, err := unix.Mmap(fd, 0, (pages+1)*ps, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOMEM) {
			return fmt.Errorf("selfprof: mapping the %d KiB ring of CPU %d: %w (the rings of an unprivileged user are bounded by kernel.perf_event_mlock_kb, %s KiB here, per CPU, beyond which RLIMIT_MEMLOCK counts; lower Options.RingSize or raise the limits)",
				pages*ps>>10, r.cpu, err, strings.TrimSpace(readProc("/proc/sys/kernel/perf_event_mlock_kb")))
		}
		return fmt.Errorf("selfprof: mapping the ring of CPU %d: %w", r.cpu, err)
	}
	r.fd, r.mem = fd, mem
	r.meta = (*unix.PerfEventMmapPage)(unsafe.Pointer(&mem[0]))
	r.data = mem[ps:]
	return nil
}

// ErrRefused is wrapped by the error of [Start] (and [StartCPUProfile])
// when the kernel refuses perf_event_open: the paranoid level, missing
// capabilities, or a seccomp filter. The message says which and what to do.
var ErrRefused = errors.New("selfprof: perf_event_open refused")

// openError explains a failed perf_event_open.
func openError(err error) error {
	paranoid := strings.TrimSpace(readProc("/proc/sys/kernel/perf_event_paranoid"))
	switch {
	case errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM):
		why := "kernel.perf_event_paranoid is " + orUnknown(paranoid) + "; a process may sample its own threads at level 2 or below " +
			"(as root: sysctl kernel.perf_event_paranoid=2), or with CAP_PERFMON"
		if n, err := strconv.Atoi(paranoid); err == nil && n <= 2 {
			why = "kernel.perf_event_paranoid is " + paranoid + ", which allows it (sysctl kernel.perf_event_paranoid=2 is enough without CAP_PERFMON), " +
				"so a seccomp filter or a security module refused the call"
		}
		return fmt.Errorf("%w (%w): %s; in a container, the seccomp profile must also allow perf_event_open "+
			"(docker and podman refuse it by default: --security-opt seccomp=PROFILE with perf_event_open allowed, or --cap-add PERFMON)", ErrRefused, err, why)
	case errors.Is(err, unix.ENOSYS):
		return fmt.Errorf("%w (%w): the kernel has no perf events (CONFIG_PERF_EVENTS) or a seccomp filter answers ENOSYS for perf_event_open", ErrRefused, err)
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP):
		return fmt.Errorf("%w (%w): the kernel does not offer the software cpu-clock event with user stacks and registers", ErrRefused, err)
	case errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE):
		return fmt.Errorf("selfprof: perf_event_open: %w: one descriptor per thread and CPU is needed (raise RLIMIT_NOFILE)", err)
	}
	return fmt.Errorf("selfprof: perf_event_open: %w", err)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func readProc(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(b)
}

// enable starts (on true) or stops every event.
func (ev *events) enable(on bool) error {
	req := uint(unix.PERF_EVENT_IOC_DISABLE)
	if on {
		req = unix.PERF_EVENT_IOC_ENABLE
	}
	var errs []error
	for _, r := range ev.rings {
		for _, fd := range r.fds {
			if err := unix.IoctlSetInt(fd, req, 0); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("selfprof: enabling events: %w", err)
	}
	return nil
}

func (ev *events) close() {
	for _, r := range ev.rings {
		if r.mem != nil {
			unix.Munmap(r.mem)
			r.mem, r.meta, r.data = nil, nil, nil
		}
		for _, fd := range r.fds {
			unix.Close(fd)
		}
		if r.fd >= 0 && len(r.fds) == 0 {
			unix.Close(r.fd)
		}
		r.fds, r.fd = nil, -1
	}
}

// drain hands every complete record in the ring to fn, in order, with its
// offset in the ring's stream, then frees the space. A record whose header
// is impossible (size below 8, or beyond what the kernel published) ends
// the drain and discards the rest, counted by fn's caller through bad.
func (r *ring) drain(fn func(rec []byte, off uint64), bad func(off uint64, msg string)) {
	head := atomic.LoadUint64(&r.meta.Data_head) // acquire: records up to head are complete
	tail := r.meta.Data_tail
	size := uint64(len(r.data))
	if head-tail > size {
		bad(tail, fmt.Sprintf("data_head %#x is %d bytes past data_tail %#x, more than the %d-byte ring", head, head-tail, tail, size))
		atomic.StoreUint64(&r.meta.Data_tail, head)
		return
	}
	for tail < head {
		var hdr [headerSize]byte
		for i := range hdr {
			hdr[i] = r.data[(tail+uint64(i))%size]
		}
		_, _, n, _ := recordHeader(hdr[:])
		if n < headerSize || uint64(n) > head-tail {
			bad(tail, fmt.Sprintf("record size %d with %d bytes published", n, head-tail))
			tail = head
			break
		}
		start := tail % size
		var rec []byte
		if start+uint64(n) <= size {
			rec = r.data[start : start+uint64(n)]
		} else {
			r.buf = append(r.buf[:0], r.data[start:]...)
			r.buf = append(r.buf, r.data[:uint64(n)-(size-start)]...)
			rec = r.buf
		}
		fn(rec, tail)
		tail += uint64(n)
	}
	atomic.StoreUint64(&r.meta.Data_tail, tail) // release: the kernel may reuse the space
}

// onlineCPUs returns the CPUs to open events on: those online
// (/sys/devices/system/cpu/online, "0-3,8"), or 0 to runtime.NumCPU()-1
// when the file cannot be read. A CPU that comes online later is not
// sampled.
func onlineCPUs() ([]int, error) {
	s := strings.TrimSpace(readProc("/sys/devices/system/cpu/online"))
	var cpus []int
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, ok := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if !ok {
			b, err2 = a, err1
		}
		if err1 != nil || err2 != nil || a < 0 || b < a || b >= 1<<16 {
			cpus = nil
			break
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) == 0 {
		for c := range runtime.NumCPU() {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// threads lists the thread IDs of the process (/proc/self/task).
func threads() ([]int, error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("selfprof: listing the process's threads: %w", err)
	}
	var tids []int
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// poller waits for the rings to fill past their watermark, or for a stop.
type poller struct {
	fds  []unix.PollFd
	stop int // eventfd
}

func newPoller(ev *events) (*poller, error) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("selfprof: eventfd: %w", err)
	}
	p := &poller{stop: efd}
	p.fds = append(p.fds, unix.PollFd{Fd: int32(efd), Events: unix.POLLIN})
	for _, r := range ev.rings {
		if r.fd >= 0 {
			p.fds = append(p.fds, unix.PollFd{Fd: int32(r.fd), Events: unix.POLLIN})
		}
	}
	return p, nil
}

// wait blocks until a ring passes its watermark, timeoutMs passes, or
// wake is called; it reports whether wake was called.
func (p *poller) wait(timeoutMs int) bool {
	for i := range p.fds {
		p.fds[i].Revents = 0
	}
	_, err := unix.Poll(p.fds, timeoutMs)
	if err != nil && !errors.Is(err, unix.EINTR) {
		return false
	}
	return p.fds[0].Revents&unix.POLLIN != 0
}

func (p *poller) wake() {
	var one = [8]byte{1}
	unix.Write(p.stop, one[:])
}

func (p *poller) close() { unix.Close(p.stop) }

// gettid is the calling thread's ID.
func gettid() int { return unix.Gettid() }
