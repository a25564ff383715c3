package unwind

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/arch"
)

// space is a fake address space of regions, some executable: it is the
// Memory and the Space of the frame-pointer tests.
type space struct{ regs []region }

type region struct {
	base uint64
	b    []byte
	exec bool
}

func (s *space) find(a uint64, n uint64) (*region, bool) {
	for i := range s.regs {
		r := &s.regs[i]
		if a >= r.base && a-r.base+n <= uint64(len(r.b)) {
			return r, true
		}
	}
	return nil, false
}

func (s *space) ReadUint64(a uint64) (uint64, error) {
	r, ok := s.find(a, 8)
	if !ok {
		return 0, fmt.Errorf("%w: %#x", ErrMemory, a)
	}
	return binary.LittleEndian.Uint64(r.b[a-r.base:]), nil
}

func (s *space) Executable(a uint64) bool {
	r, ok := s.find(a, 1)
	return ok && r.exec
}

func (s *space) Mapping(a uint64) (uint64, uint64, bool) {
	r, ok := s.find(a, 1)
	if !ok {
		return 0, 0, false
	}
	return r.base, r.base + uint64(len(r.b)), true
}

func (s *space) put(a, v uint64) {
	r, ok := s.find(a, 8)
	if !ok {
		panic(fmt.Sprintf("put %#x", a))
	}
	binary.LittleEndian.PutUint64(r.b[a-r.base:], v)
}

func (s *space) code(a uint64, b ...byte) {
	r, _ := s.find(a, uint64(len(b)))
	copy(r.b[a-r.base:], b)
}

// The program: outer calls mid (call rel32 at outerCall), mid calls leaf
// (call *%rax at midCall). leaf is push %rbp; mov %rsp,%rbp; sub
// $16,%rsp; nop; leave; ret, and at leafTail a second epilogue that ends
// in a tail call: leave; jmp rel32.
const (
	codeBase  = 0x400000
	outerFn   = 0x400000
	outerCall = 0x400008 // e8 rel32: returns to 0x40000d
	outerRet  = outerCall + 5
	midFn     = 0x400100
	midCall   = 0x400108 // ff d0: returns to 0x40010a
	midRet    = midCall + 2
	leafFn    = 0x400200 // 55
	leafMov   = leafFn + 1
	leafBody  = leafFn + 8 // after sub $16,%rsp (48 83 ec 10)
	leafLeave = leafFn + 9
	leafRetI  = leafFn + 10
	leafTail  = leafFn + 11 // c9, then e9 rel32 at +12
	notCall   = 0x400300    // a return address after a nop
	// leafClone is glibc's clone3 after its syscall, which has no CFI:
	// test %rax,%rax; jl; je; ret.
	leafClone = 0x400400

	stackBase = 0x7f0000
	stackTop  = 0x7f1000
	otherBase = 0x900000 // another stack
)

// fpProgram lays out the program and its stack, stopped in leaf at pc
// (one of the leaf* addresses: the stack is what it is there). It returns
// the space and the first frame.
func fpProgram(pc uint64) (*space, Frame) {
	s := &space{regs: []region{
		{base: codeBase, b: make([]byte, 0x1000), exec: true},
		{base: stackBase, b: make([]byte, stackTop-stackBase)},
		{base: otherBase, b: make([]byte, 0x1000)},
	}}
	for i := range s.regs[0].b {
		s.regs[0].b[i] = 0x90 // nop
	}
	s.code(outerFn, 0x55, 0x48, 0x89, 0xe5)
	s.code(outerCall, 0xe8, 0xf3, 0x00, 0x00, 0x00)
	s.code(midFn, 0x55, 0x48, 0x89, 0xe5)
	s.code(midCall, 0xff, 0xd0)
	s.code(leafFn, 0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x10, 0x90, 0xc9, 0xc3, 0xc9, 0xe9, 0, 0, 0, 0)
	s.code(leafClone, 0x48, 0x85, 0xc0, 0x7c, 0x05, 0x74, 0x03, 0xc3)

	// outer's frame record: rbp 0 (outermost) above its return slot.
	outerRBP := uint64(stackTop - 0x40)
	s.put(outerRBP, 0)
	s.put(outerRBP+8, 0)
	// call mid: return address, then mid's push %rbp.
	midRBP := outerRBP - 0x30
	s.put(midRBP+8, outerRet)
	s.put(midRBP, outerRBP)
	// call leaf: return address at midSP-8.
	midSP := midRBP - 0x20
	leafEntrySP := midSP - 8
	s.put(leafEntrySP, midRet)
	var regs Regs
	var sp, fp uint64
	switch pc {
	case leafFn: // at push %rbp
		sp, fp = leafEntrySP, midRBP
	case leafMov: // after push %rbp
		sp, fp = leafEntrySP-8, midRBP
		s.put(sp, midRBP)
	case leafRetI, leafTail + 1, leafClone: // after leave; as at ret
		sp, fp = leafEntrySP, midRBP
	default: // in the body
		fp = leafEntrySP - 8
		sp = fp - 16
		s.put(fp, midRBP)
	}
	regs.Set(rsp, sp)
	regs.Set(rbp, fp)
	regs.Set(rbx, 0xb0b)
	return s, FirstFrame(arch.X86_64, pc, regs)
}

// walkFP unwinds with StepFP only, returning each frame's pc and method.
func walkFP(t *testing.T, s *space, f Frame, start uint64) ([]uint64, []Method, error) {
	t.Helper()
	u := New(arch.X86_64, nil, s)
	var pcs []uint64
	var ms []Method
	cur := f
	for range 10 {
		pcs, ms = append(pcs, cur.PC), append(ms, cur.Method)
		var caller Frame
		h := &FPHints{Space: s}
		if cur.First {
			h.FuncStart = start
		}
		if err := u.StepFP(&cur, &caller, h); err != nil {
			return pcs, ms, err
		}
		if caller.SP <= cur.SP || cur.CFA != caller.SP {
			t.Fatalf("caller sp %#x, callee sp %#x cfa %#x", caller.SP, cur.SP, cur.CFA)
		}
		if _, ok := caller.Regs.Get(rbx); ok {
			t.Errorf("rbx known in a frame-pointer caller")
		}
		cur = caller
	}
	t.Fatal("the walk does not end")
	return nil, nil, nil
}

// TestStepFP: from every point of leaf (entry, after push, body, ret,
// tail-call jmp after leave), with and without the function's start, the
// walk finds mid and outer by the right method and ends at outer's zero
// frame pointer.
func TestStepFP(t *testing.T) {
	full := []uint64{0, midRet, outerRet}
	for _, c := range []struct {
		name       string
		pc, start  uint64
		first      Method
		wantCaller uint64 // 0: mid's return address
	}{
		{"body", leafBody, leafFn, MethodFramePointer, 0},
		{"body without start", leafBody, 0, MethodFramePointer, 0},
		{"entry", leafFn, leafFn, MethodPrologue, 0},
		{"entry without start", leafFn, 0, MethodPrologue, 0},
		{"after push", leafMov, leafFn, MethodPrologue, 0},
		{"after push without start", leafMov, 0, MethodPrologue, 0},
		{"ret", leafRetI, leafFn, MethodEpilogue, 0},
		{"ret without start", leafRetI, 0, MethodEpilogue, 0},
		{"tail jmp after leave", leafTail + 1, leafFn, MethodEpilogue, 0},
		// Without the function start the jmp after a leave byte is
		// taken as a tail call's epilogue too.
		{"tail jmp without start", leafTail + 1, 0, MethodEpilogue, 0},
		{"before ret", leafClone, 0, MethodEpilogue, 0},
		{"before ret with start", leafClone, leafClone - 0x10, MethodEpilogue, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, f := fpProgram(c.pc)
			pcs, ms, err := walkFP(t, s, f, c.start)
			if !errors.Is(err, ErrOutermost) {
				t.Fatalf("walk ends with %v, want ErrOutermost", err)
			}
			want := append([]uint64{c.pc}, full[1:]...)
			if c.wantCaller != 0 {
				want = []uint64{c.pc, c.wantCaller}
			}
			if fmt.Sprintf("%#x", pcs) != fmt.Sprintf("%#x", want) {
				t.Fatalf("pcs %#x, want %#x", pcs, want)
			}
			if ms[0] != MethodRegisters || ms[1] != c.first {
				t.Errorf("methods %v, want registers, %v, ...", ms, c.first)
			}
			for i := 2; i < len(ms); i++ {
				if ms[i] != MethodFramePointer {
					t.Errorf("frame %d by %v, want fp", i, ms[i])
				}
			}
		})
	}
}

// TestStepFPChecks: each implausible frame pointer or return address is
// refused with the check it fails.
func TestStepFPChecks(t *testing.T) {
	for _, c := range []struct {
		name  string
		edit  func(s *space, regs *Regs)
		want  string
		noSpc bool
	}{
		{"misaligned", func(s *space, r *Regs) { v, _ := r.Get(rbp); r.Set(rbp, v+3) }, "not 8-byte aligned", false},
		{"below sp", func(s *space, r *Regs) { v, _ := r.Get(rsp); r.Set(rbp, v-16) }, "below the stack pointer", false},
		{"other stack", func(s *space, r *Regs) { r.Set(rbp, otherBase+0x100) }, "outside the stack pointer's mapping", false},
		{"return into data", func(s *space, r *Regs) {
			v, _ := r.Get(rbp)
			s.put(v+8, stackBase+0x10)
		}, "not in executable memory", false},
		{"return after no call", func(s *space, r *Regs) {
			v, _ := r.Get(rbp)
			s.put(v+8, notCall)
		}, "does not follow a call instruction", false},
		{"return after no call, no space", func(s *space, r *Regs) {
			v, _ := r.Get(rbp)
			s.put(v+8, notCall)
		}, "does not follow a call instruction", true},
		{"unreadable", func(s *space, r *Regs) { r.Set(rbp, 0xa00000) }, "reading the return address", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, f := fpProgram(leafBody)
			c.edit(s, &f.Regs)
			u := New(arch.X86_64, nil, s)
			h := &FPHints{Space: s, FuncStart: leafFn}
			if c.noSpc {
				h.Space = nil
			}
			var caller Frame
			err := u.StepFP(&f, &caller, h)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("StepFP: %v, want an error saying %q", err, c.want)
			}
			if c.want != "reading the return address" && !errors.Is(err, ErrImplausible) {
				t.Errorf("%v does not wrap ErrImplausible", err)
			}
		})
	}
	// A zero frame pointer in a body is the outermost frame.
	s, f := fpProgram(leafBody)
	f.Regs.Set(rbp, 0)
	var caller Frame
	if err := New(arch.X86_64, nil, s).StepFP(&f, &caller, &FPHints{Space: s}); !errors.Is(err, ErrOutermost) {
		t.Fatalf("zero frame pointer: %v, want ErrOutermost", err)
	}
	// A prologue rule whose return address fails falls back to the frame
	// record, and both reasons are given when that fails too.
	s, f = fpProgram(leafFn)
	sp, _ := f.Regs.Get(rsp)
	s.put(sp, notCall)
	f.Regs.Set(rbp, 8)
	err := New(arch.X86_64, nil, s).StepFP(&f, &caller, &FPHints{Space: s, FuncStart: leafFn})
	if err == nil || !strings.Contains(err.Error(), "at the function's entry") || !strings.Contains(err.Error(), "below the stack pointer") {
		t.Fatalf("entry with a bad return address: %v", err)
	}
}

// TestStepFPAArch64: frame records {x29, x30} are followed, PAC bits
// stripped, and the caller's SP is unknown with caller.SP its lower bound.
func TestStepFPAArch64(t *testing.T) {
	s := &space{regs: []region{
		{base: codeBase, b: make([]byte, 0x1000), exec: true},
		{base: stackBase, b: make([]byte, 0x1000)},
	}}
	le := binary.LittleEndian
	le.PutUint32(s.regs[0].b[0x100:], 0x94000010) // bl: returns to 0x400104
	le.PutUint32(s.regs[0].b[0x200:], 0xd63f0200) // blr x16: returns to 0x400204
	const rec1, rec2 = stackBase + 0x800, stackBase + 0x900
	s.put(rec1, rec2)
	s.put(rec1+8, 0x0012_0000_0040_0104) // signed
	s.put(rec2, 0)
	s.put(rec2+8, 0x400204)
	var regs Regs
	regs.Set(a64SP, stackBase+0x700)
	regs.Set(x29, rec1)
	cur := FirstFrame(arch.AArch64, 0x400050, regs)
	u := New(arch.AArch64, nil, s)
	var caller Frame
	if err := u.StepFP(&cur, &caller, &FPHints{Space: s}); err != nil {
		t.Fatal(err)
	}
	if caller.PC != 0x400104 || caller.SP != rec1+16 || caller.Method != MethodFramePointer {
		t.Fatalf("caller %+v", caller)
	}
	if _, ok := caller.Regs.Get(a64SP); ok {
		t.Error("caller SP known")
	}
	next := caller
	if err := u.StepFP(&next, &caller, &FPHints{Space: s}); err != nil || caller.PC != 0x400204 {
		t.Fatalf("second step: %v, pc %#x", err, caller.PC)
	}
	next = caller
	if err := u.StepFP(&next, &caller, &FPHints{Space: s}); !errors.Is(err, ErrOutermost) {
		t.Fatalf("third step: %v, want ErrOutermost", err)
	}
}

func TestMethodString(t *testing.T) {
	for m, want := range map[Method]string{MethodRegisters: "registers", MethodCFI: "cfi", MethodSignal: "signal",
		MethodFramePointer: "fp", MethodPrologue: "prologue", MethodEpilogue: "epilogue", MethodStackSwitch: "stack-switch", 99: "Method(99)"} {
		if got := m.String(); got != want {
			t.Errorf("%d: %q, want %q", m, got, want)
		}
	}
}

// TestBeforeRet: only tests, compares and conditional jumps may lie
// between pc and the ret; anything that moves the stack pointer or %rbp,
// or any other instruction, or no ret within the bytes, says no.
func TestBeforeRet(t *testing.T) {
	for _, c := range []struct {
		name string
		code []byte
		want bool
	}{
		{"clone3", []byte{0x48, 0x85, 0xc0, 0x7c, 0x05, 0x74, 0x03, 0xc3}, true},
		{"cmp; jne; ret", []byte{0x48, 0x39, 0xd8, 0x75, 0x01, 0xc3}, true},
		{"at ret", []byte{0xc3}, false}, // analyzeX86's "at ret"
		{"add rsp", []byte{0x48, 0x85, 0xc0, 0x48, 0x83, 0xc4, 0x08, 0xc3}, false},
		{"pop rbp", []byte{0x48, 0x85, 0xc0, 0x5d, 0xc3}, false},
		{"jmp", []byte{0x48, 0x85, 0xc0, 0xeb, 0x00, 0xc3}, false},
		{"no ret", []byte{0x48, 0x85, 0xc0, 0x74, 0x03, 0x48, 0x85, 0xc0, 0x74, 0x03, 0x48, 0x85, 0xc0, 0x74, 0x03, 0x90}, false},
	} {
		code := append(c.code, make([]byte, 16)...)[:16]
		if got := beforeRet(code); got != c.want {
			t.Errorf("%s: beforeRet = %v, want %v", c.name, got, c.want)
		}
	}
}
