package procview

import (
	"bytes"
	"fmt"
	"os"
	"sync"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/unwind"
)

// rtSigreturn is the x86-64 Linux signal return trampoline, the code a
// signal handler returns to (sa_restorer): mov $15 (__NR_rt_sigreturn),
// %rax; syscall. glibc's __restore_rt and Go's runtime.sigreturn__sigaction
// are this sequence; Go's has no CFI, so the walk would stop there (as
// eu-stack's does) unless the frame is recognised by its code, as gdb
// does (amd64_linux_sigtramp_p).
var rtSigreturn = []byte{0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05}

// Layout of the kernel's x86-64 struct rt_sigframe (arch/x86/include/asm/
// sigframe.h) as the trampoline sees it: the handler's ret has popped
// pretcode, so the stack pointer is the address of the struct ucontext,
// whose uc_mcontext (struct sigcontext) is at byte 40 and holds r8..r15,
// rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip, 8 bytes each, in that
// order (arch/x86/include/uapi/asm/sigcontext.h).
const ucMcontext = 40

var sigcontextRegs = [...]arch.Reg{
	arch.X86_64_R8, arch.X86_64_R9, arch.X86_64_R10, arch.X86_64_R11,
	arch.X86_64_R12, arch.X86_64_R13, arch.X86_64_R14, arch.X86_64_R15,
	arch.X86_64_RDI, arch.X86_64_RSI, arch.X86_64_RBP, arch.X86_64_RBX,
	arch.X86_64_RDX, arch.X86_64_RAX, arch.X86_64_RCX, arch.X86_64_RSP,
	arch.X86_64_RA, // rip
}

// rtSigreturnAArch64 is the AArch64 Linux signal return trampoline: mov
// x8, #139 (__NR_rt_sigreturn); svc #0, little-endian. The kernel's vDSO
// (__kernel_rt_sigreturn) and qemu-user's signal trampoline page are this
// sequence; qemu's has no CFI, and neither does the vDSO's (its CFI is
// gdb's aarch64_linux_sigtramp_p knowledge too).
var rtSigreturnAArch64 = []byte{0x68, 0x11, 0x80, 0xd2, 0x01, 0x00, 0x00, 0xd4}

// Layout of the kernel's AArch64 struct rt_sigframe (arch/arm64/kernel/
// signal.c) at the trampoline's stack pointer: siginfo_t (128 bytes), then
// struct ucontext, whose uc_mcontext (struct sigcontext, 16-byte aligned)
// is at byte 176 and holds fault_address, then x0..x30, sp and pc, 8 bytes
// each (arch/arm64/include/uapi/asm/sigcontext.h). qemu-user's
// target_rt_sigframe has the same layout.
const sigcontextRegsAArch64 = 128 + 176 + 8

// isSigreturn reports whether the code at pc is the signal return
// trampoline of the View's ABI, read through the View's code reader: the
// process's memory, and for a core also the files mapped where it left out
// their text.
func (v *View) isSigreturn(pc uint64) bool {
	want := rtSigreturn
	if v.Arch() == arch.AArch64 {
		want = rtSigreturnAArch64
	}
	b := make([]byte, len(want))
	if v.code != nil {
		return v.code.read(b, pc) && bytes.Equal(b, want)
	}
	if pc >= 1<<63 {
		return false
	}
	n, err := v.Mem.ReadAt(b, int64(pc))
	return err == nil && n == len(b) && bytes.Equal(b, want)
}

// sigreturnCaller returns the frame a signal interrupted, from the
// registers the kernel saved in the struct rt_sigframe at sp, the stack
// pointer of the signal return trampoline's frame, for ABI a: its pc is
// exact (unwind.Frame.AfterSignal), found by MethodSignal.
func sigreturnCaller(a *arch.Arch, mem unwind.Memory, sp uint64) (unwind.Frame, error) {
	if a == arch.AArch64 {
		var regs unwind.Regs
		for i := range 33 { // x0..x30, sp, pc: DWARF 0..32
			val, err := mem.ReadUint64(sp + sigcontextRegsAArch64 + uint64(i)*8)
			if err != nil {
				return unwind.Frame{}, fmt.Errorf("reading the registers saved by the signal frame at %#x: %w", sp, err)
			}
			regs.Set(arch.Reg(i), val)
		}
		pc, _ := regs.Get(arch.AArch64_PC)
		f := unwind.FirstFrame(arch.AArch64, pc, regs)
		f.First, f.AfterSignal, f.Method = false, true, unwind.MethodSignal
		return f, nil
	}
	var regs unwind.Regs
	for i, reg := range sigcontextRegs {
		val, err := mem.ReadUint64(sp + ucMcontext + uint64(i)*8)
		if err != nil {
			return unwind.Frame{}, fmt.Errorf("reading the registers saved by the signal frame at %#x: %w", sp, err)
		}
		regs.Set(reg, val)
	}
	pc, _ := regs.Get(arch.X86_64_RA)
	f := unwind.FirstFrame(arch.X86_64, pc, regs)
	f.First, f.AfterSignal, f.Method = false, true, unwind.MethodSignal
	return f, nil
}

// codeReader reads code at run-time addresses of a core's process: from
// the core, and, where the core did not dump it (the kernel leaves out
// file-backed pages never written, such as text), from the file mapped
// there (NT_FILE), at the mapping's offset. It is safe for concurrent
// use.
type codeReader struct {
	c      *Core
	mapped []CoreFile        // the core's file mappings (NT_FILE's, or from its link map)
	opened map[string]string // NT_FILE path → the file opened for it

	mu    sync.Mutex
	files map[string]*os.File
}

func (r *codeReader) read(p []byte, addr uint64) bool {
	if n, err := r.c.read(p, addr); err == nil && n == len(p) {
		return true
	}
	for _, m := range r.mapped {
		if addr < m.Start || addr >= m.End || m.End-addr < uint64(len(p)) {
			continue
		}
		path, ok := r.opened[m.Path]
		if !ok {
			return false
		}
		r.mu.Lock()
		if r.files == nil { // closed
			r.mu.Unlock()
			return false
		}
		f := r.files[path]
		if f == nil {
			var err error
			if f, err = os.Open(path); err != nil {
				r.mu.Unlock()
				return false
			}
			r.files[path] = f
		}
		r.mu.Unlock()
		off := m.Offset + (addr - m.Start)
		if off >= 1<<62 {
			return false
		}
		n, _ := f.ReadAt(p, int64(off))
		return n == len(p)
	}
	return false
}

func (r *codeReader) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.files {
		f.Close()
	}
	r.files = nil
}
