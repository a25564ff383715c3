// Command pubprog is the program the Publisher's gdb tests and benchmarks
// build and run under gdb. Every procedure it makes is "mov eax, K; ret"
// in a 16-byte slot of one mmap'd code region, named jit_K.
//
//	pubprog pending        publish pub_a..pub_d one at a time through a
//	                       Publisher (timer flushes), call pub_b, remove
//	                       jitC, Flush, call afterRemove
//	pubprog batch N        print "t0 NANOS", register N procedures in one
//	                       symbol file (RegisterProcs), call jit_(N/2)
//	pubprog publish N PACE publish N procedures one at a time through a
//	                       Publisher, one every PACE (a time.Duration; 0:
//	                       as fast as Add returns), and report rates and
//	                       latencies
//	pubprog naive N        register N procedures one symbol file each
//	                       (Register per procedure) and report rates
//	pubprog frames         publish pub_inner and pub_outer, which calls it
//	                       from a frame of its own described only by its
//	                       CFI, through a Publisher, and call pub_outer;
//	                       with PUBPROG_DUMP=DIR in the environment, first
//	                       copy every registered symbol file to
//	                       DIR/symfile-ADDR.elf (ADDR: its address in hex)
//
// Reports are lines "result KEY VALUE..." on standard output.
package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/jit/gdbjit"
	"github.com/elfimage/elfimage/native"
	"golang.org/x/sys/unix"
)

const srcFile = "/jit/gdbjit/pubprog.src"

// region maps n 16-byte slots of code, slot k "mov eax, k; ret", read-only
// and executable, and returns its address.
func region(n int) (uint64, error) {
	size := (n*16 + 4095) &^ 4095
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return 0, err
	}
	for k := range n {
		s := mem[k*16:]
		s[0] = 0xb8
		binary.LittleEndian.PutUint32(s[1:], uint32(k))
		s[5] = 0xc3
	}
	if err := unix.Mprotect(mem, unix.PROT_READ|unix.PROT_EXEC); err != nil {
		return 0, err
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(mem)))), nil
}

func proc(name string, base uint64, k int) gdbjit.Proc {
	return gdbjit.Proc{Name: name, Addr: base + uint64(k)*16, Size: 6, File: srcFile, Line: k + 1,
		Lines: []gdbjit.Line{{Offset: 5, Line: k + 1}}}
}

func call(addr uint64) (uintptr, error) {
	st, err := native.NewStack(64 << 10)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	return native.CallErr(uintptr(addr), st)
}

// afterRemove exists for the debugger's breakpoint.
//
//go:noinline
func afterRemove() { fmt.Fprintln(os.Stderr, "pubprog: removed") }

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: pubprog pending|batch N|publish N PACE|naive N")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "pending":
		err = pending()
	case "batch":
		err = batch(atoi(2))
	case "publish":
		pace, perr := time.ParseDuration(os.Args[3])
		if perr != nil {
			err = perr
			break
		}
		err = publish(atoi(2), pace)
	case "naive":
		err = naive(atoi(2))
	case "frames":
		err = frames()
	default:
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pubprog:", err)
		os.Exit(1)
	}
}

func atoi(i int) int {
	if len(os.Args) <= i {
		fmt.Fprintln(os.Stderr, "pubprog: missing count")
		os.Exit(2)
	}
	n, err := strconv.Atoi(os.Args[i])
	if err != nil {
		fmt.Fprintln(os.Stderr, "pubprog:", err)
		os.Exit(2)
	}
	return n
}

func pending() error {
	base, err := region(4)
	if err != nil {
		return err
	}
	fmt.Printf("pubprog: code at %#x\n", base)
	published := make(chan int, 16)
	p := gdbjit.NewPublisher(gdbjit.PublisherOptions{OnPublish: func(n int) { published <- n }})
	for k, name := range []string{"pub_a", "pub_b", "pub_c", "pub_d"} {
		if err := p.Add(proc(name, base, k)); err != nil {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
	for n := 0; n < 4; {
		n += <-published
	}
	r, err := call(base + 16)
	if err != nil {
		return err
	}
	fmt.Printf("pubprog: pub_b returned %d\n", r)
	if err := p.Remove(base + 32); err != nil {
		return err
	}
	if err := p.Flush(); err != nil {
		return err
	}
	afterRemove()
	if err := p.Close(); err != nil {
		return err
	}
	fmt.Println("pubprog: done")
	return nil
}

func batch(n int) error {
	fmt.Printf("result t0 %d\n", time.Now().UnixNano())
	base, err := region(n)
	if err != nil {
		return err
	}
	procs := make([]gdbjit.Proc, n)
	for k := range n {
		procs[k] = proc(fmt.Sprintf("jit_%d", k), base, k)
	}
	e, err := gdbjit.RegisterProcs(procs)
	if err != nil {
		return err
	}
	fmt.Printf("result registered %d\n", time.Now().UnixNano())
	r, err := call(base + uint64(n/2)*16)
	if err != nil {
		return err
	}
	fmt.Printf("pubprog: jit_%d returned %d\n", n/2, r)
	return e.Unregister()
}

// checkpoints are the cumulative counts at which rates are reported.
var checkpoints = []int{100, 1000, 2000, 5000, 10000, 20000}

// report prints, for each checkpoint k <= n, the cumulative rate k /
// (time the k-th procedure became visible - start) and the rate over the
// window since the previous checkpoint.
func report(start time.Time, visible []time.Time) {
	prevK, prevT := 0, start
	for _, k := range checkpoints {
		if k > len(visible) {
			break
		}
		t := visible[k-1]
		fmt.Printf("result rate %d %.0f %.0f\n", k, float64(k)/t.Sub(start).Seconds(),
			float64(k-prevK)/t.Sub(prevT).Seconds())
		prevK, prevT = k, t
	}
	fmt.Printf("result total %d %.3f\n", len(visible), visible[len(visible)-1].Sub(start).Seconds())
}

// latencies prints the median, 99th percentile and largest latency from
// Add to visible in milliseconds, over all procedures and over those after
// the first `first` (gdb's first JIT registration also pays for indexing
// the program's own DWARF, once).
func latencies(added, visible []time.Time, first int) {
	ms := func(ts []time.Duration) string {
		if len(ts) == 0 {
			return "- - -"
		}
		slices.Sort(ts)
		return fmt.Sprintf("%.1f %.1f %.1f", float64(ts[len(ts)/2])/1e6, float64(ts[len(ts)*99/100])/1e6, float64(ts[len(ts)-1])/1e6)
	}
	var all []time.Duration
	for i := range added {
		all = append(all, visible[i].Sub(added[i]))
	}
	rest := slices.Clone(all[first:])
	fmt.Printf("result latency-ms p50/p99/max all %s; after the first registration %s; first registration %d procedures\n", ms(all), ms(rest), first)
}

func publish(n int, pace time.Duration) error {
	base, err := region(n)
	if err != nil {
		return err
	}
	added := make([]time.Time, n)
	visible := make([]time.Time, n)
	var mu sync.Mutex
	done := make(chan struct{})
	nvis := 0
	firstFlush := 0
	p := gdbjit.NewPublisher(gdbjit.PublisherOptions{OnPublish: func(k int) {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if nvis == 0 {
			firstFlush = k
		}
		for range k {
			visible[nvis] = now
			nvis++
		}
		if nvis == n {
			close(done)
		}
	}})
	start := time.Now()
	next := start
	for k := range n {
		if pace > 0 {
			next = next.Add(pace)
			for time.Now().Before(next) {
				// The JIT "compiles" the next procedure.
			}
		}
		mu.Lock()
		added[k] = time.Now()
		mu.Unlock()
		if err := p.Add(proc(fmt.Sprintf("jit_%d", k), base, k)); err != nil {
			return err
		}
	}
	<-done
	report(start, visible)
	st := p.Stats()
	latencies(added, visible, firstFlush)
	fmt.Printf("result stats flushes %d registrations %d unregistrations %d objects %d flush time %.0f ms, longest %.1f ms\n",
		st.Flushes, st.Registrations, st.Unregistrations, st.Objects, float64(st.FlushTime)/1e6, float64(st.MaxFlush)/1e6)
	return p.Close()
}

func naive(n int) error {
	base, err := region(n)
	if err != nil {
		return err
	}
	visible := make([]time.Time, n)
	es := make([]*gdbjit.Entry, n)
	added := make([]time.Time, n)
	start := time.Now()
	for k := range n {
		t := time.Now()
		added[k] = t
		b, err := gdbjit.Symfile([]gdbjit.Proc{proc(fmt.Sprintf("jit_%d", k), base, k)})
		if err != nil {
			return err
		}
		if es[k], err = gdbjit.Register(b); err != nil {
			return err
		}
		visible[k] = time.Now()
	}
	report(start, visible)
	latencies(added, visible, 1)
	for _, e := range es {
		if err := e.Unregister(); err != nil {
			return err
		}
	}
	return nil
}

// Code of the frames scenario: pub_inner is "mov eax, 42; ret" and keeps
// the CIE's initial row (CFA = rsp+8) throughout; pub_outer moves rsp
// without a frame pointer, which no prologue analyser recognises, so only
// its CFI tells a debugger where its return address is.
var (
	innerCode = []byte{0xb8, 0x2a, 0x00, 0x00, 0x00, 0xc3} // mov eax, 42; ret
	outerCode = []byte{
		0x48, 0x83, 0xec, 0x18, // sub rsp, 24
		0xe8, 0, 0, 0, 0, // call pub_inner (rel32 patched in)
		0x48, 0x83, 0xc4, 0x18, // add rsp, 24
		0xc3, // ret
	}
	outerCFI = []frame.Insn{
		{PC: 4, Op: frame.OpDefCFAOffset, Offset: 32}, // after sub rsp, 24
		{PC: 13, Op: frame.OpDefCFAOffset, Offset: 8}, // after add rsp, 24
	}
)

// Lines of the frames scenario in srcFile.
const (
	innerLine = 10 // pub_inner
	outerLine = 20 // pub_outer; +1 from its call on
)

func frames() error {
	mem, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return err
	}
	base := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(mem))))
	inner, outer := base, base+16
	copy(mem, innerCode)
	copy(mem[16:], outerCode)
	binary.LittleEndian.PutUint32(mem[16+5:], uint32(int32(int64(inner)-int64(outer+9))))
	if err := unix.Mprotect(mem, unix.PROT_READ|unix.PROT_EXEC); err != nil {
		return err
	}
	fmt.Printf("pubprog: pub_inner at %#x, pub_outer at %#x\n", inner, outer)
	published := make(chan int, 4)
	p := gdbjit.NewPublisher(gdbjit.PublisherOptions{OnPublish: func(n int) { published <- n }})
	if err := p.Add(gdbjit.Proc{Name: "pub_inner", Addr: inner, Size: uint64(len(innerCode)),
		File: srcFile, Line: innerLine, Lines: []gdbjit.Line{{Offset: 5, Line: innerLine + 1}},
		CFI: []frame.Insn{}}); err != nil {
		return err
	}
	<-published // two flushes: two symbol files, one procedure each
	if err := p.Add(gdbjit.Proc{Name: "pub_outer", Addr: outer, Size: uint64(len(outerCode)),
		File: srcFile, Line: outerLine, Lines: []gdbjit.Line{{Offset: 4, Line: outerLine + 1}, {Offset: 9, Line: outerLine + 2}},
		CFI: outerCFI}); err != nil {
		return err
	}
	<-published
	if dir := os.Getenv("PUBPROG_DUMP"); dir != "" {
		if err := dumpSymfiles(dir); err != nil {
			return err
		}
	}
	r, err := call(outer)
	if err != nil {
		return err
	}
	fmt.Printf("pubprog: pub_outer returned %d\n", r)
	if err := p.Close(); err != nil {
		return err
	}
	fmt.Println("pubprog: done")
	return nil
}

// dumpSymfiles copies every symbol file registered now to
// dir/symfile-ADDR.elf, found as a debugger finds them: from
// __jit_debug_descriptor's first_entry along next_entry, each
// jit_code_entry giving symfile_addr and symfile_size, read from
// /proc/self/mem.
func dumpSymfiles(dir string) error {
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		return err
	}
	defer mem.Close()
	read := func(addr uint64, n uint64) ([]byte, error) {
		if n > 64<<20 {
			return nil, fmt.Errorf("symbol file of %d bytes", n)
		}
		b := make([]byte, n)
		_, err := mem.ReadAt(b, int64(addr))
		return b, err
	}
	le := binary.LittleEndian
	d, err := read(uint64(gdbjit.DescriptorAddr()), 24)
	if err != nil {
		return err
	}
	for entry, i := le.Uint64(d[16:]), 0; entry != 0; entry, i = le.Uint64(d[0:]), i+1 {
		if i == 1000 {
			return fmt.Errorf("JIT list longer than %d entries", i)
		}
		if d, err = read(entry, 32); err != nil {
			return err
		}
		addr, size := le.Uint64(d[16:]), le.Uint64(d[24:])
		f, err := read(addr, size)
		if err != nil {
			return err
		}
		if err := os.WriteFile(fmt.Sprintf("%s/symfile-%x.elf", dir, addr), f, 0o644); err != nil {
			return err
		}
	}
	return nil
}
