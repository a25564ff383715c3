package scheme

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/native"
)

// RunOptions configure [Run]. The zero value is usable.
type RunOptions struct {
	// Stdout is where display and newline write; nil means os.Stdout.
	// Run puts it into blocking mode (it uses Stdout.Fd).
	Stdout *os.File
	// StackSize is the size in bytes of the stack the program runs on;
	// 0 means DefaultStackSize. At least 2*StackMargin.
	StackSize int
	// MaxCaptures bounds the (backtrace) captures kept; later ones are
	// dropped and counted in Result.Dropped. 0 means 16.
	MaxCaptures int
	// CaptureStackSize bounds the bytes of stack each capture copies,
	// counted up from the captured rsp; 0 means 64 KiB.
	CaptureStackSize int
}

// DefaultStackSize is the stack size Run uses unless told otherwise.
const DefaultStackSize = 8 << 20

// StackMargin is the distance in bytes between the lowest usable stack
// address and the limit generated prologues compare rsp with: room for
// the largest frame (MaxFrameSize) plus the capture that reports the
// overflow.
const StackMargin = 64 << 10

// Result is the outcome of a run.
type Result struct {
	// Value is main's return value (0 when the run ended with an error).
	Value int64
	// Captures are the (backtrace) captures in the order taken.
	Captures []Capture
	// Dropped counts backtrace captures not kept (MaxCaptures reached).
	Dropped int
}

// Run calls the entry procedure of img, an image linked from a Module that
// [Compile] produced, and waits for it to finish. It sets up a fresh stack
// (native.NewStack), control block and capture area (native.Alloc, outside
// the Go heap), runs the program through native.Call and frees them.
//
// It returns the result and nil; or the result so far (captures taken)
// and a *[Error] when the program called error or divided by zero; or a
// *[StackOverflowError], matching [ErrStackOverflow], when the program ran
// out of stack (the process is unharmed and later runs work). Other errors
// come from setting up the run. img must stay open during the call. Cost:
// three mmaps and the program's own run time; Run is safe for concurrent
// use with separate or shared images.
func Run(img *elfimage.Image, opts RunOptions) (*Result, error) {
	if img == nil || img.Entry() == 0 {
		return nil, errors.New("scheme: image has no entry procedure")
	}
	base, size := img.Base(), uintptr(img.Size())
	inImage := func(addr, n uint64) bool {
		return addr >= uint64(base) && n <= uint64(size) && addr-uint64(base) <= uint64(size)-n
	}
	res, err := runEntry(img.Entry(), opts, inImage)
	runtime.KeepAlive(img)
	return res, err
}

// runEntry runs the entry stub at entry; inImage reports whether
// [addr, addr+n) is readable image memory (for error messages).
func runEntry(entry uintptr, opts RunOptions, inImage func(addr, n uint64) bool) (*Result, error) {
	out := opts.Stdout
	if out == nil {
		out = os.Stdout
	}
	stackSize := opts.StackSize
	if stackSize == 0 {
		stackSize = DefaultStackSize
	}
	if stackSize < 2*StackMargin {
		return nil, fmt.Errorf("scheme: stack size %d bytes is below the minimum %d", stackSize, 2*StackMargin)
	}
	maxCap := opts.MaxCaptures
	if maxCap <= 0 {
		maxCap = 16
	}
	capStack := opts.CaptureStackSize
	if capStack <= 0 {
		capStack = 64 << 10
	}
	capStack = (capStack + 15) &^ 15
	recSize := recHeader + capStack

	stack, err := native.NewStack(stackSize)
	if err != nil {
		return nil, fmt.Errorf("scheme: %w", err)
	}
	defer stack.Close()
	ctl, err := native.Alloc(ctlSize)
	if err != nil {
		return nil, fmt.Errorf("scheme: %w", err)
	}
	defer native.Free(ctl)
	area, err := native.Alloc((maxCap + 1) * recSize)
	if err != nil {
		return nil, fmt.Errorf("scheme: %w", err)
	}
	defer native.Free(area)

	le := binary.LittleEndian
	put := func(off int, v uint64) { le.PutUint64(ctl[off:], v) }
	put(ctlStackLimit, uint64(stack.Bottom())+StackMargin)
	put(ctlStackTop, uint64(stack.Top()))
	put(ctlFD, uint64(out.Fd()))
	put(ctlCapBase, uint64(addrOf(area)))
	put(ctlCapMax, uint64(maxCap))
	put(ctlCapStackMax, uint64(capStack))
	put(ctlCapRecSize, uint64(recSize))

	rv := native.Call(entry, stack, addrOf(ctl))
	runtime.KeepAlive(out)

	res := &Result{Dropped: int(min(le.Uint64(ctl[ctlCapDropped:]), 1<<31))}
	n := min(le.Uint64(ctl[ctlCapCount:]), uint64(maxCap))
	for i := range int(n) {
		res.Captures = append(res.Captures, readCapture(area[i*recSize:(i+1)*recSize]))
	}
	reserved := area[maxCap*recSize:]
	switch status := le.Uint64(ctl[ctlStatus:]); CaptureKind(status) {
	case 0:
		res.Value = int64(rv)
		return res, nil
	case KindError:
		c := readCapture(reserved)
		e := &Error{Capture: &c, Message: readMessage(le.Uint64(reserved[recMsg:]), inImage)}
		nargs := min(le.Uint64(reserved[recNArgs:]), MaxErrorArgs)
		for i := range int(nargs) {
			e.Args = append(e.Args, int64(le.Uint64(reserved[recArgs+8*i:])))
		}
		return res, e
	case KindStackOverflow:
		c := readCapture(reserved)
		return res, &StackOverflowError{Capture: &c}
	default:
		return res, fmt.Errorf("scheme: run ended with unknown status %d", status)
	}
}

// readCapture decodes one capture record (see ctl.go), copying its stack
// bytes into Go memory. Lengths are clamped to the record.
func readCapture(rec []byte) Capture {
	le := binary.LittleEndian
	c := Capture{Kind: CaptureKind(le.Uint64(rec[recKind:])), Arch: arch.Host()}
	for i := range c.Regs {
		c.Regs[i] = le.Uint64(rec[recRegs+8*i:])
	}
	c.StackAddr = le.Uint64(rec[recStackAddr:])
	n := min(le.Uint64(rec[recStackLen:]), uint64(len(rec)-recHeader))
	c.Stack = append([]byte(nil), rec[recHeader:recHeader+int(n)]...)
	return c
}

// maxMessage bounds the bytes of an error message Run reads.
const maxMessage = 64 << 10

// readMessage reads the string object at addr ({address, length}, both in
// the image) or returns a placeholder when it is not inside the image.
func readMessage(addr uint64, inImage func(addr, n uint64) bool) string {
	if !inImage(addr, 16) {
		return fmt.Sprintf("<message object %#x outside the image>", addr)
	}
	obj := unsafe.Slice((*byte)(ptrAt(uintptr(addr))), 16)
	p, n := binary.LittleEndian.Uint64(obj), binary.LittleEndian.Uint64(obj[8:])
	n = min(n, maxMessage)
	if !inImage(p, n) {
		return fmt.Sprintf("<message bytes %#x outside the image>", p)
	}
	if n == 0 {
		return ""
	}
	return string(unsafe.Slice((*byte)(ptrAt(uintptr(p))), n))
}

// ptrAt turns an address of memory outside the Go heap (the image) into a
// pointer without a uintptr→unsafe.Pointer conversion vet would flag.
func ptrAt(addr uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&addr)) }

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
