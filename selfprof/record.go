package selfprof

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// The perf_event_open(2) record layout ("MMAP layout" in the manual page,
// include/uapi/linux/perf_event.h), as far as this package reads it. Every
// record starts with a perf_event_header; the ring buffer holds records
// back to back, each header.size bytes (a multiple of 8).
const (
	headerSize = 8 // struct perf_event_header {u32 type; u16 misc; u16 size}

	recordLost        = 2  // PERF_RECORD_LOST: {u64 id; u64 lost}
	recordThrottle    = 5  // PERF_RECORD_THROTTLE
	recordUnthrottle  = 6  // PERF_RECORD_UNTHROTTLE
	recordSample      = 9  // PERF_RECORD_SAMPLE
	recordLostSamples = 13 // PERF_RECORD_LOST_SAMPLES: {u64 lost}

	// Bits of perf_event_attr.sample_type this package asks for, in the
	// order their fields appear in a PERF_RECORD_SAMPLE.
	sampleIP        = 1 << 0  // PERF_SAMPLE_IP: u64 ip
	sampleTID       = 1 << 1  // PERF_SAMPLE_TID: u32 pid, tid
	sampleTime      = 1 << 2  // PERF_SAMPLE_TIME: u64 time
	sampleCallchain = 1 << 5  // PERF_SAMPLE_CALLCHAIN: u64 nr; u64 ips[nr]
	sampleRegsUser  = 1 << 12 // PERF_SAMPLE_REGS_USER: u64 abi; u64 regs[popcount(mask)] unless abi is 0
	sampleStackUser = 1 << 13 // PERF_SAMPLE_STACK_USER: u64 size; u8 data[size]; u64 dyn_size unless size is 0

	// sampleType is what this package asks for and decodes.
	sampleType = sampleIP | sampleTID | sampleTime | sampleCallchain | sampleRegsUser | sampleStackUser

	// regsABINone and regsABI64 are PERF_SAMPLE_REGS_ABI_NONE (no user
	// registers: a kernel thread) and PERF_SAMPLE_REGS_ABI_64.
	regsABINone = 0
	regsABI64   = 2

	// contextMax is PERF_CONTEXT_MAX: call-chain entries at or above it
	// (as unsigned values) are context markers, not addresses.
	contextMax  = ^uint64(4095) + 1 // (u64)-4095
	contextUser = ^uint64(512) + 1  // PERF_CONTEXT_USER, (u64)-512

	// maxCallchain bounds the call-chain entries a record may claim
	// (the kernel's default kernel.perf_event_max_stack is 127, its
	// limit 65535 plus context markers).
	maxCallchain = 1 << 17
)

// x86-64 user registers sampled (PERF_REG_X86_* bit numbers,
// arch/x86/include/uapi/asm/perf_regs.h): AX BX CX DX SI DI BP SP IP = 0..8,
// R8..R15 = 16..23. FLAGS and the segment registers are left out (the
// kernel refuses DS, ES, FS and GS on x86-64).
const regsMask = 0x1ff | 0xff<<16

// perfRegToDWARF maps the sampled registers, in increasing bit order, to
// their DWARF numbers (AMD64 psABI table 3.36); the IP becomes the
// return-address column.
var perfRegToDWARF = [...]uint8{
	0,  // AX -> rax
	3,  // BX -> rbx
	2,  // CX -> rcx
	1,  // DX -> rdx
	4,  // SI -> rsi
	5,  // DI -> rdi
	6,  // BP -> rbp
	7,  // SP -> rsp
	16, // IP -> return-address column
	8, 9, 10, 11, 12, 13, 14, 15,
}

// sample is a decoded PERF_RECORD_SAMPLE of sampleType. Its slices alias
// the decoded bytes.
type sample struct {
	IP       uint64
	PID, TID uint32
	Time     uint64 // ns, the event's clock (perf_clock unless use_clockid)
	// Callchain is the call chain, context markers included
	// (PERF_CONTEXT_USER, ...), innermost first.
	Callchain []uint64
	// RegsABI is PERF_SAMPLE_REGS_ABI_*; Regs are the user registers of
	// the attribute's sample_regs_user mask in increasing bit order
	// (empty when RegsABI is regsABINone).
	RegsABI uint64
	Regs    []uint64
	// Stack is the copy of the user stack from the sampled stack pointer
	// upward: StackSize bytes were reserved in the record, DynSize of
	// them are valid (Stack is cut to DynSize by the decoder when the
	// record carries a stack).
	StackSize uint64
	Stack     []byte
	DynSize   uint64
}

// decodeError is the error of the record decoder: the record's offset in
// the stream it came from (a ring buffer position), the field and what is
// wrong with it.
type decodeError struct {
	Off   uint64
	Field string
	Msg   string
}

func (e *decodeError) Error() string {
	return fmt.Sprintf("selfprof: perf record at offset %#x: %s: %s", e.Off, e.Field, e.Msg)
}

// recordHeader decodes the perf_event_header at the start of b.
func recordHeader(b []byte) (typ uint32, misc, size uint16, ok bool) {
	if len(b) < headerSize {
		return 0, 0, 0, false
	}
	return binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint16(b[4:]), binary.LittleEndian.Uint16(b[6:]), true
}

// cursor reads little-endian words from a record, keeping the first error.
type cursor struct {
	b   []byte
	pos int
	off uint64 // of b[0] in the stream, for errors
	err *decodeError
}

func (c *cursor) fail(field, format string, args ...any) {
	if c.err == nil {
		c.err = &decodeError{Off: c.off, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	c.pos = len(c.b)
}

func (c *cursor) u64(field string) uint64 {
	if c.err != nil {
		return 0
	}
	if len(c.b)-c.pos < 8 {
		c.fail(field, "record ends at byte %d of %d", c.pos, len(c.b))
		return 0
	}
	v := binary.LittleEndian.Uint64(c.b[c.pos:])
	c.pos += 8
	return v
}

// words returns n words of the record without copying them; bytes is the
// same for n bytes.
func (c *cursor) bytes(field string, n uint64) []byte {
	if c.err != nil {
		return nil
	}
	if n > uint64(len(c.b)-c.pos) {
		c.fail(field, "%d bytes claimed, %d left in the record", n, len(c.b)-c.pos)
		return nil
	}
	s := c.b[c.pos : c.pos+int(n)]
	c.pos += int(n)
	return s
}

// decodeSample decodes the PERF_RECORD_SAMPLE record b (header included,
// len(b) == header.size) of sample_type sampleType with nregs user
// registers in its sample_regs_user mask; off is the record's offset in
// its stream, for errors. header.size must be len(b). Call chain and registers are decoded into the
// caller's buffers (callchain, regs: reused, grown as needed); the stack
// aliases b. Errors (*decodeError) name the field: a record shorter than
// its fields, a count beyond maxCallchain or the record, a dyn_size above
// the reserved size, bytes left over after the last field. Cost: O(size),
// no allocation when the buffers are large enough.
func decodeSample(b []byte, off uint64, nregs int, s *sample) error {
	c := cursor{b: b, pos: headerSize, off: off}
	if len(b) < headerSize {
		c.fail("header", "%d bytes", len(b))
		return c.err
	}
	if _, _, size, _ := recordHeader(b); int(size) != len(b) {
		c.fail("header size", "%d, the record has %d bytes", size, len(b))
		return c.err
	}
	s.IP = c.u64("ip")
	pt := c.u64("pid, tid")
	s.PID, s.TID = uint32(pt), uint32(pt>>32)
	s.Time = c.u64("time")
	nr := c.u64("callchain nr")
	if c.err == nil && (nr > maxCallchain || nr > uint64(len(b)-c.pos)/8) {
		c.fail("callchain nr", "%d entries claimed, room for %d", nr, (len(b)-c.pos)/8)
	}
	s.Callchain = s.Callchain[:0]
	for i := uint64(0); i < nr && c.err == nil; i++ {
		s.Callchain = append(s.Callchain, c.u64("callchain ips"))
	}
	s.RegsABI = c.u64("regs abi")
	s.Regs = s.Regs[:0]
	if c.err == nil && s.RegsABI != regsABINone {
		for range nregs {
			s.Regs = append(s.Regs, c.u64("regs"))
		}
	}
	s.StackSize = c.u64("stack size")
	s.Stack, s.DynSize = nil, 0
	if c.err == nil && s.StackSize != 0 {
		s.Stack = c.bytes("stack data", s.StackSize)
		s.DynSize = c.u64("stack dyn_size")
		if c.err == nil && s.DynSize > s.StackSize {
			c.fail("stack dyn_size", "%d bytes valid of %d copied", s.DynSize, s.StackSize)
		}
		if c.err == nil {
			s.Stack = s.Stack[:s.DynSize]
		}
	}
	if c.err == nil && c.pos != len(b) {
		c.fail("record size", "%d bytes after the last field", len(b)-c.pos)
	}
	if c.err != nil {
		return c.err
	}
	return nil
}

// decodeLost decodes a PERF_RECORD_LOST record (header included; any
// sample_id trailer is ignored) and returns how many records the kernel
// dropped.
func decodeLost(b []byte, off uint64) (uint64, error) {
	c := cursor{b: b, pos: headerSize, off: off}
	c.u64("id")
	n := c.u64("lost")
	if c.err != nil {
		return 0, c.err
	}
	return n, nil
}

// decodeLostSamples decodes PERF_RECORD_LOST_SAMPLES {u64 lost}.
func decodeLostSamples(b []byte, off uint64) (uint64, error) {
	c := cursor{b: b, pos: headerSize, off: off}
	n := c.u64("lost")
	if c.err != nil {
		return 0, c.err
	}
	return n, nil
}

// popcount is the number of registers a sample_regs_user mask selects.
func popcount(mask uint64) int { return bits.OnesCount64(mask) }
