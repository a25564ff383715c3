package selfprof

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"unsafe"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/addrmap"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/unwind"
	"golang.org/x/arch/x86/x86asm"
)

// A frame of a sample's stack before interning: a run-time pc, whether it
// is exact (the interrupted instruction) or a return address, and the
// image holding it (nil for Go code and anything else).
type frame struct {
	pc    uint64
	exact bool
	im    *elfimage.Image
}

// lookupAddr is the address a frame's source position is looked up at:
// the pc itself when exact, the byte before a return address (inside the
// call) otherwise.
func (f frame) lookupAddr() uint64 {
	if f.exact || f.pc == 0 {
		return f.pc
	}
	return f.pc - 1
}

// kernelPC stands for the kernel in a stack: samples taken while a thread
// was in a system call get a "[kernel]" frame on top of their user stack.
const kernelPC = ^uint64(0)

// perfRecordMiscKernel is PERF_RECORD_MISC_KERNEL in the header's misc
// field (cpumode 1).
const perfRecordMiscKernel = 1

// aggregator turns samples into counted stacks of interned locations. It
// is used by the reader goroutine only, until Stop builds the profile.
type aggregator struct {
	opts     Options
	cur      sample // decode buffer
	samples  int64
	unjoined int64
	children int64  // samples of child processes, dropped
	pid      uint32 // this process

	u      *unwind.Unwinder
	mem    sampleMemory
	frames []frame
	user   []uint64
	refs   []*addrmap.Ref[*elfimage.Image]
	key    []byte

	stacks   map[string]*stack
	order    []*stack
	locs     map[locKey]*location
	locList  []*location
	funcs    map[funcKey]*function
	funcList []*function
	images   map[*elfimage.Image]int // image -> mapping index in imgList
	imgList  []imageMapping
	tramp    map[uint64]bool // pcs known to be (or not to be) in native.trampoline
	// frameless caches isFrameless by pc.
	frameless map[uint64]bool
}

// stack is one distinct stack and its count.
type stack struct {
	locs  []*location
	count int64
}

type locKey struct {
	im   *elfimage.Image
	addr uint64 // lookup address
}

// location is an interned pprof location: an address and the source
// lines there, innermost (inlined) first.
type location struct {
	id    uint64
	addr  uint64
	im    *elfimage.Image
	lines []locLine
}

type locLine struct {
	fn     *function
	line   int64
	column int64
}

type funcKey struct{ name, file string }

type function struct {
	id        uint64
	name      string
	file      string
	startLine int64
}

// imageMapping is what a profile's mapping of an image needs, captured
// while the image is open.
type imageMapping struct {
	start, limit uint64
	path         string
	buildID      []byte
}

func newAggregator(o Options) *aggregator {
	a := &aggregator{
		opts:      o,
		u:         unwind.New(arch.X86_64, elfimage.Finder(), nil),
		stacks:    map[string]*stack{},
		locs:      map[locKey]*location{},
		funcs:     map[funcKey]*function{},
		images:    map[*elfimage.Image]int{},
		tramp:     map[uint64]bool{},
		frameless: map[uint64]bool{},
	}
	a.u.Mem = &a.mem
	a.pid = uint32(os.Getpid())
	return a
}

// sampleMemory is what the unwinder reads for one sample: the stack copy,
// and code (of an image or of the Go binary, which does not change while
// mapped) live, for the frame-pointer fallback's instruction checks.
// Anything else is unreadable: the live stack has moved on since the
// sample was taken.
type sampleMemory struct {
	stack unwind.Snapshot
	live  unwind.Local
}

func (m *sampleMemory) ReadUint64(addr uint64) (uint64, error) { return m.ReadSized(addr, 8) }

func (m *sampleMemory) ReadSized(addr uint64, size int) (uint64, error) {
	if addr >= m.stack.Base && addr-m.stack.Base < uint64(len(m.stack.Data)) {
		return m.stack.ReadSized(addr, size)
	}
	if _, err := elfimage.Lookup(uintptr(addr)); err == nil || runtime.FuncForPC(uintptr(addr)) != nil {
		return m.live.ReadSized(addr, size)
	}
	return 0, fmt.Errorf("%w: %#x is neither in the sample's stack copy [%#x, %#x) nor code", unwind.ErrMemory, addr, m.stack.Base, m.stack.Base+uint64(len(m.stack.Data)))
}

// add counts one sample: it builds the sample's stack (see the package
// documentation, "How stacks are built") and interns it.
func (a *aggregator) add(s *sample, misc uint16) {
	if s.PID != a.pid {
		// A child process (fork, exec.Command) inherited the events:
		// its pcs mean nothing here.
		a.children++
		return
	}
	a.samples++
	defer a.release()
	a.frames = a.frames[:0]
	// The user part of the kernel's call chain, innermost first.
	a.user = a.user[:0]
	inUser := false
	for _, v := range s.Callchain {
		if v >= contextMax {
			inUser = v == contextUser
			continue
		}
		if inUser {
			a.user = append(a.user, v)
		}
	}
	if misc&7 == perfRecordMiscKernel {
		a.frames = append(a.frames, frame{pc: kernelPC, exact: true})
	}
	ip, ok := a.userRegs(s)
	if !ok && len(a.user) > 0 {
		ip = a.user[0]
	}
	if im := a.acquire(ip); im != nil && ok {
		a.native(s, im)
	} else {
		for i, pc := range a.user {
			a.frames = append(a.frames, frame{pc: pc, exact: i == 0})
			if i == 0 && ok && pc == ip {
				if ra := a.goLeafCaller(ip, s); ra != 0 && (len(a.user) < 2 || a.user[1] != ra) {
					a.frames = append(a.frames, frame{pc: ra})
				}
			}
		}
		if len(a.user) == 0 && ip != 0 {
			a.frames = append(a.frames, frame{pc: ip, exact: true})
		}
	}
	a.intern()
}

// userRegs loads the sample's user registers into the unwinder's first
// frame registers and returns the user pc.
func (a *aggregator) userRegs(s *sample) (uint64, bool) {
	if s.RegsABI != regsABI64 || len(s.Regs) != len(perfRegToDWARF) {
		return 0, false
	}
	return s.Regs[8], true
}

// native walks the image frames of a sample whose user pc is in image
// im with the images' CFI (frame pointers where an image has none) over
// the sample's stack copy, then joins the Go frames of the kernel's call
// chain at the first pc outside every image: the return address into
// native.Call's trampoline.
func (a *aggregator) native(s *sample, im *elfimage.Image) {
	var regs unwind.Regs
	for i, v := range s.Regs {
		regs.Set(arch.Reg(perfRegToDWARF[i]), v)
	}
	sp := s.Regs[7]
	a.mem.stack = unwind.Snapshot{Base: sp, Data: s.Stack}
	cur := unwind.FirstFrame(arch.X86_64, s.Regs[8], regs)
	var caller unwind.Frame
	first := len(a.frames) // after a "[kernel]" frame
	host := uint64(0)
	for len(a.frames) < a.opts.MaxFrames {
		f := frame{pc: cur.PC, exact: cur.First || cur.AfterSignal}
		f.im = a.acquire(f.lookupAddr())
		if f.im == nil {
			host = cur.PC
			break
		}
		a.frames = append(a.frames, f)
		err := a.u.Step(&cur, &caller)
		if errors.Is(err, unwind.ErrNoFDE) {
			var h unwind.FPHints
			if p, perr := f.im.ProcedureAt(f.im.LinkAddr(uintptr(f.lookupAddr()))); perr == nil {
				h.FuncStart = uint64(f.im.Base()) + p.Start
			}
			err = a.u.StepFP(&cur, &caller, &h)
		}
		if err != nil {
			break // outermost, or the copy ends: join by the trampoline below
		}
		cur = caller
	}
	// Join: the host pc in the kernel's chain; else, when the walk
	// stopped inside the images, the chain after the last native frame
	// (the occurrence nearest its depth, for recursion); else the last
	// frame of native.Call's trampoline in the chain.
	j := -1
	if host != 0 {
		for i := 1; i < len(a.user); i++ {
			if a.user[i] == host {
				j = i
				break
			}
		}
	} else if n := len(a.frames) - first; n > 0 {
		last := a.frames[len(a.frames)-1].pc
		best := -1
		for i := range a.user {
			if a.user[i] == last && (best < 0 || abs(i-(n-1)) < abs(best-(n-1))) {
				best = i
			}
		}
		if best >= 0 && best+1 < len(a.user) {
			j = best + 1
		}
	}
	if j < 0 {
		for i := len(a.user) - 1; i >= 1; i-- {
			if a.isTrampoline(a.user[i]) {
				j = i
				break
			}
		}
	}
	if j < 0 {
		a.unjoined++
		if host != 0 {
			a.frames = append(a.frames, frame{pc: host})
		}
		return
	}
	for _, pc := range a.user[j:] {
		if len(a.frames) >= a.opts.MaxFrames {
			break
		}
		a.frames = append(a.frames, frame{pc: pc, im: a.acquire(pc - 1)}) // image frames past a failed walk
	}
}

// trampolineName is the function of native.Call's trampoline, where the
// kernel's call chain leaves the native stack.
const trampolineName = "github.com/elfimage/elfimage/native.trampoline"

func (a *aggregator) isTrampoline(pc uint64) bool {
	if v, ok := a.tramp[pc]; ok {
		return v
	}
	fn := runtime.FuncForPC(uintptr(pc - 1))
	v := fn != nil && strings.HasPrefix(fn.Name(), trampolineName)
	a.tramp[pc] = v
	return v
}

// acquire returns the open image holding pc, held until the sample is
// done (release), or nil.
func (a *aggregator) acquire(pc uint64) *elfimage.Image {
	ref, err := elfimage.Acquire(uintptr(pc))
	if err != nil {
		return nil
	}
	a.refs = append(a.refs, ref)
	return ref.Value()
}

func (a *aggregator) release() {
	for _, r := range a.refs {
		r.Release()
	}
	a.refs = a.refs[:0]
}

// intern counts the stack in a.frames.
func (a *aggregator) intern() {
	a.key = a.key[:0]
	for _, f := range a.frames {
		l := a.location(f)
		a.key = binary.LittleEndian.AppendUint64(a.key, l.id)
	}
	if st, ok := a.stacks[string(a.key)]; ok {
		st.count++
		return
	}
	st := &stack{count: 1}
	for _, f := range a.frames {
		st.locs = append(st.locs, a.location(f))
	}
	a.stacks[string(a.key)] = st
	a.order = append(a.order, st)
}

// location interns the location of a frame, symbolizing it the first
// time: an image frame with the image's procedure table and line program
// (while the image is held open), a Go frame with runtime.CallersFrames.
func (a *aggregator) location(f frame) *location {
	k := locKey{im: f.im, addr: f.lookupAddr()}
	if l, ok := a.locs[k]; ok {
		return l
	}
	l := &location{id: uint64(len(a.locList) + 1), addr: k.addr, im: f.im}
	switch {
	case f.pc == kernelPC:
		l.addr = 0
		l.lines = []locLine{{fn: a.function("[kernel]", "", 0)}}
	case f.im != nil:
		a.imageIndex(f.im)
		im := f.im
		addr := im.LinkAddr(uintptr(k.addr))
		if p, err := im.ProcedureAt(addr); err == nil {
			var start int64
			if pos, err := im.PositionAt(p.Start); err == nil {
				start = int64(pos.Line)
			}
			ln := locLine{}
			file := ""
			if pos, err := im.PositionAt(addr); err == nil {
				file, ln.line, ln.column = pos.File, int64(pos.Line), int64(pos.Column)
			}
			ln.fn = a.function(p.Name, file, start)
			l.lines = []locLine{ln}
		}
	default:
		// CallersFrames takes return addresses: it looks up pc-1.
		frames := runtime.CallersFrames([]uintptr{uintptr(k.addr) + 1})
		for {
			fr, more := frames.Next()
			if fr.Function == "" {
				break
			}
			l.lines = append(l.lines, locLine{fn: a.function(fr.Function, fr.File, startLine(fr)), line: int64(fr.Line)})
			if !more {
				break
			}
		}
	}
	a.locs[k] = l
	a.locList = append(a.locList, l)
	return l
}

func (a *aggregator) function(name, file string, start int64) *function {
	k := funcKey{name, file}
	if fn, ok := a.funcs[k]; ok {
		return fn
	}
	fn := &function{id: uint64(len(a.funcList) + 1), name: name, file: file, startLine: start}
	a.funcs[k] = fn
	a.funcList = append(a.funcList, fn)
	return fn
}

// imageIndex records the mapping of an image the first time one of its
// frames is seen.
func (a *aggregator) imageIndex(im *elfimage.Image) int {
	if i, ok := a.images[im]; ok {
		return i
	}
	path := im.Path()
	if !strings.HasPrefix(path, "<") {
		if abs, err := absPath(path); err == nil {
			path = abs
		}
	}
	a.imgList = append(a.imgList, imageMapping{
		start: uint64(im.Base()), limit: uint64(im.Base()) + im.Size(), path: path,
		buildID: append([]byte(nil), im.BuildID()...),
	})
	a.images[im] = len(a.imgList) - 1
	return len(a.imgList) - 1
}

func absPath(p string) (string, error) {
	if strings.HasPrefix(p, "/") {
		return p, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return wd + "/" + p, nil
}

func pageSize() int { return os.Getpagesize() }

// startLine is the line of a Go function's declaration (func keyword),
// when the runtime knows it.
func startLine(fr runtime.Frame) int64 {
	if fr.Func == nil {
		return 0
	}
	_, line := fr.Func.FileLine(fr.Func.Entry())
	return int64(line)
}

// goLeafCaller finds the caller of a sample's innermost Go frame when the
// kernel's frame-pointer chain skips it: Go functions without a frame
// (leaves whose locals fit in registers, assembly marked NOFRAME) never
// push a frame record, and every function is at its first instruction
// before it pushes one, so the chain's next entry is the caller's caller.
// It decodes the function from its entry to the pc (at most
// unwind.MaxPrologueScan bytes, cached per pc): when no instruction
// before the pc writes RSP or RBP or calls, the return address is the
// word at the stack pointer, read from the sample's stack copy. It
// returns 0 when the frame record is (or may be) in place.
func (a *aggregator) goLeafCaller(ip uint64, s *sample) uint64 {
	if len(s.Regs) != len(perfRegToDWARF) {
		return 0
	}
	frameless, ok := a.frameless[ip]
	if !ok {
		frameless = isFrameless(ip)
		a.frameless[ip] = frameless
	}
	if !frameless || len(s.Stack) < 8 {
		return 0
	}
	ra := binary.LittleEndian.Uint64(s.Stack)
	if fn := runtime.FuncForPC(uintptr(ra - 1)); fn == nil || ra == 0 {
		return 0
	}
	if a.u.PlausibleReturn(ra, nil) != nil {
		return 0
	}
	return ra
}

// isFrameless reports whether the Go code from its function's entry up to
// pc leaves RSP and RBP alone and makes no call.
func isFrameless(pc uint64) bool {
	fn := runtime.FuncForPC(uintptr(pc))
	if fn == nil {
		return false
	}
	entry := uint64(fn.Entry())
	if entry > pc || pc-entry > unwind.MaxPrologueScan {
		return false
	}
	a := uintptr(entry)
	p := *(*unsafe.Pointer)(unsafe.Pointer(&a)) // our own text, always mapped, outside the Go heap
	code := unsafe.Slice((*byte)(p), pc-entry)
	for off := 0; off < len(code); {
		in, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			return false
		}
		switch in.Op {
		case x86asm.CALL, x86asm.PUSH, x86asm.POP, x86asm.LEAVE, x86asm.ENTER:
			return false
		}
		if r, ok := in.Args[0].(x86asm.Reg); ok && (r == x86asm.RSP || r == x86asm.RBP || r == x86asm.ESP || r == x86asm.EBP) {
			return false
		}
		off += in.Len
	}
	return true
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
