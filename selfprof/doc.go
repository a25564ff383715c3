// Package selfprof is a CPU profiler of the calling process that sees
// the code of images: it samples the process's own threads with
// perf_event_open(2), unwinds the frames of image code with the images'
// call frame information, joins the Go frames that called into them, and
// writes the profile in pprof's profile.proto, which `go tool pprof`
// reads. It is runtime/pprof's counterpart for programs that run
// generated code: without cgo, the runtime's SIGPROF handler cannot walk
// from a pc outside Go, so runtime/pprof records every sample taken in
// generated code as runtime._ExternalCode under runtime._System, losing
// both the generated frames and their Go callers.
//
// The API follows runtime/pprof and net/http/pprof: [StartCPUProfile]
// and [StopCPUProfile] write one profile of the process to a writer;
// [Handler] serves ?seconds=N of profile like /debug/pprof/profile; and
// [Start] returns a [Profiler] whose [Profiler.Stop] gives the
// *profile.Profile and [Profiler.Stats] its counts.
//
//	if err := selfprof.StartCPUProfile(f); err != nil { ... }
//	defer selfprof.StopCPUProfile()
//
//	http.Handle("/debug/pprof/jitprofile", selfprof.Handler(nil))
//	// go tool pprof http://127.0.0.1:6060/debug/pprof/jitprofile?seconds=10
//
// # What is sampled
//
// The software event PERF_COUNT_SW_CPU_CLOCK (the machines this is built
// on have no hardware counters) with a period of 1e9/Rate ns of each
// thread's CPU time, on every online CPU, for every thread of the
// process: events are opened per thread and CPU with inherit set, so
// threads created later inherit them; each CPU's events write into one
// ring buffer (PERF_EVENT_IOC_SET_OUTPUT). The kernel refuses to map a
// per-thread (cpu -1) event with inherit, which is why the events are per
// CPU. Each sample is PERF_SAMPLE_IP | TID | TIME | CALLCHAIN |
// REGS_USER | STACK_USER: the user registers (rax..r15 and rip) and a
// copy of Options.StackSize bytes of the user stack from its pointer up,
// and the kernel's frame-pointer call chain (the user part; the kernel's
// own frames are excluded). Time in system calls is sampled too when the
// kernel lets the process see kernel samples (perf_event_paranoid ≤ 1,
// or root or CAP_PERFMON), shown as a "[kernel]" frame on top of the user
// stack; at level 2, only user time (Stats.Kernel says which).
//
// Inherited events also follow the processes the program forks while the
// profile runs (exec.Command included): the kernel samples them too, at
// their cost, and their samples, which arrive in the same rings, are
// dropped and counted ([Stats.Children]).
//
// The profiler's reader is a goroutine locked to an OS thread that gets
// no event: it is not sampled at all. Threads the Go runtime creates while
// it runs are cloned by the runtime's template thread (a locked thread
// never clones), which is sampled, so they inherit the events.
//
// # How stacks are built
//
// A sample whose user pc lies in an open image (elfimage.Acquire finds
// it, the entry image included) is unwound with [unwind.Unwinder.Step]
// through the images' .eh_frame ([elfimage.Finder]), over the stack copy;
// a frame of an image without call frame information is unwound by frame
// pointer ([unwind.Unwinder.StepFP]). The walk crosses the library's entry
// frame (elfimage.entry, whose CFI reads the trampoline's saved stack and
// frame pointers at the top of the native stack) and stops at the first
// pc outside every image: the return address into native.Call's
// trampoline. The Go frames come from the kernel's call chain, which
// follows the frame pointers from the native stack into the goroutine's
// (the entry routine keeps a frame record): they are joined at that
// return address, or, when the native walk did not get that far (the
// stack copy did not reach the native stack's top), at the chain's last
// frame in native.trampoline. A sample where neither is found keeps its
// native frames only and is counted in [Stats.Unjoined].
//
// A sample in Go code uses the kernel's call chain as is, except that a
// leaf without a frame record (a frameless Go function, or assembly marked
// NOFRAME) would lose its caller: when the code from the function's entry
// to the pc neither moves the stack pointer nor touches the frame pointer
// nor calls, the return address is read from the top of the stack copy.
//
// Locations are symbolized while the image is held open, the first time
// a pc is seen: image procedures by the image's procedure table and line
// program ([elfimage.Image.ProcedureAt], [elfimage.Image.PositionAt]:
// name, file, line, column), Go functions by runtime.CallersFrames (name,
// file, line, inlined frames). An image closed before its samples are
// drained (tens of milliseconds) leaves them as bare addresses.
//
// # The profile
//
// profile.proto (github.com/google/pprof/proto/profile.proto, through
// github.com/google/pprof/profile): sample types samples/count and
// cpu/nanoseconds, period type cpu/nanoseconds, one sample per distinct
// stack with its count; mapping 1 is the executable (its text from
// /proc/self/maps, its GNU build ID), then one mapping per image with
// samples ([Base, Base+Size), its path, its build ID), then other
// executable mappings a pc fell in (the vDSO); every location carries its
// address (the pc for the innermost frame, the byte before the return
// address for callers) and its lines; the mappings of the executable and
// the images are marked as having functions, files and lines, so pprof
// does not symbolize them again. The comments (`go tool pprof -comments`)
// give the rate, the counts of samples, lost and unjoined samples and
// malformed records, and the reader thread's CPU time.
//
// Goroutine labels (runtime/pprof.Labels, pprof.Do, pprof.SetGoroutineLabels)
// are not available: they live in the runtime's goroutine structures,
// which only the runtime's own SIGPROF handler reads; a perf sample knows
// the thread, not the goroutine. Samples carry no labels.
//
// # Costs and limits
//
// File descriptors: one event per thread and CPU at start (2 CPUs and 10
// threads: 20 descriptors); threads created later add none. Memory: one
// ring per CPU of Options.RingSize (512 KiB by default) plus a page,
// locked by the kernel; an unprivileged user's rings are bounded by
// kernel.perf_event_mlock_kb (516 KiB per CPU by default) and then
// RLIMIT_MEMLOCK, so larger rings need privileges. Each sample costs
// about StackSize + 300 bytes of ring and the kernel's copy of the stack;
// the reader drains every 50 ms, or when a ring is a quarter full, so at
// 1 kHz per busy thread an 8 KiB copy uses under a tenth of a 512 KiB ring
// between drains. When a ring fills, the kernel drops records and says
// how many (PERF_RECORD_LOST): [Stats.Lost] counts them; raise RingSize,
// lower Rate or StackSize. The reader thread's CPU time ([Stats.ReaderCPU],
// also in the profile's comments) was 5 to 50 ms for half-second Scheme
// loops at 1 kHz (270 to 460 samples) and 43 ms for 4,840 samples at
// 10 kHz on our machines: a fixed part (opening, enabling and disabling
// the events of every thread and CPU, the images' indexes and the first
// symbolization of each pc) dominates short profiles; interning a sample
// in Go code alone takes half a microsecond. The kernel's cost of taking
// the samples (a timer interrupt and an 8 KiB stack copy each) is charged
// to the sampled threads and dominates at high rates
// (BENCHMARKS.md gives the slowdown at 100 Hz, 1 kHz and 10 kHz).
//
// Privileges: perf_event_open on one's own threads needs
// kernel.perf_event_paranoid at 2 or below (Debian's default is 3 with
// its patch, upstream's 2), or CAP_PERFMON or root; containers need a
// seccomp profile that allows the system call (Docker's and Podman's
// default profiles refuse it without CAP_PERFMON or CAP_SYS_ADMIN).
// [Start] then returns an error wrapping [ErrRefused] that says which
// and what to do.
//
// Only linux/amd64 is implemented (the register layout of the samples and
// the call convention of native.Call's trampoline are x86-64's);
// elsewhere [Start] returns an error matching errors.ErrUnsupported.
// CPUs that come online after the start are not sampled. Native stacks
// deeper than StackSize are not unwound by CFI beyond the copy; their Go
// callers are still joined through the kernel's call chain when the
// image code keeps frame pointers (the Scheme compiler's does), and the
// frames between are then those of the frame-pointer chain. A stack is
// cut at Options.MaxFrames frames (127 by default, the kernel's
// kernel.perf_event_max_stack); a chain cut before native.Call's
// trampoline leaves its sample without Go callers ([Stats.Unjoined]).
//
// # Record decoding
//
// The ring buffers are decoded as perf_event_open(2) lays them out
// ("MMAP layout": struct perf_event_mmap_page, data_head read with
// acquire and data_tail written with release ordering, records that wrap
// around the end copied out): PERF_RECORD_SAMPLE of the sample type
// above, PERF_RECORD_LOST and PERF_RECORD_LOST_SAMPLES; other records are
// skipped by their size. The decoder treats records as untrusted: a
// header whose size is below 8 or beyond what the kernel published ends
// that drain, a record whose fields do not fit its size (counts, stack
// sizes, dyn_size above size) is counted in [Stats.Malformed] with an
// error naming its offset and field; nothing is allocated from a count in
// a record.
package selfprof
