package scheme

// The control block ("ctl") and capture area: the ABI between generated
// code and the host runtime (Run). Generated code keeps the control block's
// address in r15 (x27 on AArch64) at all times. All fields are little-endian uint64 at the
// byte offsets below; both blocks live in mmap'd memory outside the Go heap.
//
// Control block:
//
//	offset  field          written by  meaning
//	0       stack limit    host        lowest sp a prologue accepts (Stack.Bottom + margin)
//	8       saved sp       %start      sp of %start after its prologue (abort path restores it)
//	16      stack top      host        exclusive top of the run's stack (capture copies up to it)
//	24      fd             host        file descriptor display and newline write to
//	32      status         code        0 = running/normal, else the Kind that aborted the run
//	40      capture base   host        address of capture record 0
//	48      capture max    host        number of backtrace records; record [max] is reserved
//	                                   for the aborting capture (error, stack overflow)
//	56      capture count  code        backtrace records written
//	64      dropped        code        backtrace captures dropped because the area was full
//	72      stack max      host        bytes of stack a record can hold
//	80      record size    host        stride between records in bytes (recHeader + stack max)
//
// Capture record (recHeader bytes, then the stack copy):
//
//	offset  field
//	0       kind (1 backtrace, 2 error, 3 stack overflow)
//	8       regs[33], indexed by DWARF register number; set on x86-64 are rbx, rbp, rsp,
//	        r12-r15 and 16 (return address = rip of the caller), on AArch64 x19-x28, x29,
//	        sp (31), x30 and pc (32), both the return address; the others read as 0
//	272     stack address (= regs[sp]): address of the first copied byte
//	280     stack length in bytes, min(stack top - sp, stack max)
//	288     error message: address of a string object {u64 address of bytes, u64 length}
//	296     number of error values (at most MaxErrorArgs)
//	304     error values [MaxErrorArgs]int64
//	384     stack bytes [stack length]
const (
	ctlStackLimit  = 0
	ctlSavedSP     = 8
	ctlStackTop    = 16
	ctlFD          = 24
	ctlStatus      = 32
	ctlCapBase     = 40
	ctlCapMax      = 48
	ctlCapCount    = 56
	ctlCapDropped  = 64
	ctlCapStackMax = 72
	ctlCapRecSize  = 80
	ctlSize        = 128

	recKind      = 0
	recRegs      = 8
	recStackAddr = 272
	recStackLen  = 280
	recMsg       = 288
	recNArgs     = 296
	recArgs      = 304
	recHeader    = 384
)

// MaxErrorArgs is the largest number of values (error "message" value ...)
// may carry; more is a compile error.
const MaxErrorArgs = 8

// MaxParams is the largest number of parameters a procedure may have (they
// travel in the six SysV argument registers; in x0-x5 on AArch64).
const MaxParams = 6

// MaxFrameSize is the largest frame in bytes a compiled procedure may
// have (parameters, locals and temporaries); larger is a compile error.
const MaxFrameSize = 32 << 10

// startFrameSize is the distance in bytes from %start's saved sp to its
// CFA: the return address, saved rbp, saved r15 and 8 bytes of padding
// (on AArch64 x30, x29, x27 and padding).
const startFrameSize = 32

// EntryProc is the name of the procedure the host calls first through
// native.Call (the module's entry point). Its caller is the library's
// entry routine (elfimage.EntryName), whose call frame information
// describes the stack switch, so debuggers and unwinders go on from there
// into the Go code that called native.Call; a walk of a capture, which
// holds only the native stack, ends cleanly at that Go frame.
const EntryProc = symStart

// Names of the runtime procedures and data every module contains.
const (
	symStart         = "%start"
	symCapture       = "%capture"
	symDisplayInt    = "%display-int"
	symDisplayString = "%display-string"
	symWrite         = "%write"
)
