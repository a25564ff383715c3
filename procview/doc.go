// Package procview gives a process-wide view of a live Linux process, or of
// one that left a core file, for debuggers, profilers and crash reporters:
// which module holds a code address, how to unwind through it and what
// source it comes from, and the symbolized backtrace of every thread,
// crossing elfimage images, Go frames and C library frames, each unwound
// with its own call frame information.
//
// # Modules
//
// Open(pid) takes a snapshot of the process's modules, sorted by address:
//
//   - every file-backed executable mapping of /proc/PID/maps (proc(5)): the
//     file's path, the run-time range [Start, End) and the load bias
//     (run-time address minus link-time address) computed from the
//     PT_LOAD program header that holds the mapping's file offset
//     (System V gABI, "Program Loading"): bias = start - offset -
//     (p_vaddr - p_offset). An elfimage image mapped from its file is an
//     ELF file like any other (p_offset == p_vaddr) and takes this path;
//   - the vDSO ([vdso]), an ELF image the kernel maps, read from memory;
//   - every symbol file published through the GDB JIT interface (GDB
//     manual, "JIT Compilation Interface"): the descriptor
//     __jit_debug_descriptor is found in the .symtab of /proc/PID/exe
//     (adjusted by the executable's bias), its list of jit_code_entry
//     records is walked from first_entry, and each symbol file, a whole ELF
//     file already moved to its run-time addresses (elfimage.Rebase), is
//     read from the process's memory and becomes a module with bias 0
//     covering its executable PT_LOAD segments. A symbol file whose code
//     also appears as a file mapping is left to the file.
//
// View.Lookup maps a pc to its module by bisection over the snapshot and
// allocates nothing. Each module's Symbolizer (package symbolize: DWARF,
// inlined frames, the symbol table as fallback, compressed sections) and
// its FDE finder (.eh_frame through .eh_frame_hdr at run-time addresses,
// then .debug_frame, which Go binaries have instead, adjusted by the bias)
// are built on the first address that needs them and kept; View
// implements unwind.Finder by dispatching to the module's finder. A module
// without DWARF is symbolized from its separate debug file, found by
// View.DebugFiles (package debugfile: the build-ID directory, as for
// libc6-dbg, the .gnu_debuglink places, and debuginfod when the finder has
// a remote source), as gdb does; a module whose DWARF fails to load is named from its symbol table.
//
// # Thread stacks
//
// Stacks(pid, opts) stops every thread of the process with PTRACE_SEIZE and
// PTRACE_INTERRUPT (ptrace(2)), reads its registers (PTRACE_GETREGS, mapped
// to x86-64 DWARF register numbers, AMD64 psABI section 3.6.2), unwinds it
// with package unwind over the View and unwind.Remote (process_vm_readv),
// copies the stack around its frames, detaches from every thread it
// stopped, also on error, and then describes every frame: symbolized at
// the return address minus one for callers, so that a call at the end of
// a function or inlined range is attributed to it, at the exact pc for
// the innermost frame and for a frame a signal frame interrupted; and
// with its arguments, read from the module's DWARF against the frame's
// registers and the stack copy, values on entry through the caller's
// call site as gdb finds them (View.DescribeFrames). All ptrace calls
// run on one locked OS thread, as the kernel requires.
//
// A frame is unwound with the CFI of its module. A frame without CFI
// (code outside every module, such as code a JIT made without publishing
// it, or a module without an FDE for the pc) is unwound by frame pointer
// (unwind.StepFP: aligned, not below the stack pointer, on the stack
// pointer's mapping, a return address in executable memory just after a
// call; an innermost frame in its prologue or epilogue by the function
// start that /tmp/perf-PID.map or the symbol table gives). The switch
// package native's trampoline makes from the Go stack to a native stack
// is crossed through the Go stack and frame pointers it saved at the top
// of the native stack (the rule the library's entry routine,
// elfimage.entry, states in CFI when its image is published), both from
// the trampoline's return address and from a frame without a frame
// record just below it (the entry routine or the code it calls, when not
// published). A signal frame without CFI (Go's
// runtime.sigreturn__sigaction, or a restorer of one's own that a handler
// installed with rt_sigaction returns to) is recognised by the rt_sigreturn trampoline's code
// (mov $15, %rax; syscall), as gdb does, and the walk continues from the
// registers the kernel saved in the signal frame; glibc's __restore_rt
// has CFI that says the same. Each Frame says how it was found
// (Frame.Method). Code outside every module is named from the perf map
// (View.LoadPerfMap, which trusts it only when owned by root or the
// process's user).
//
// A walk ends cleanly (Thread.Err nil) only at the outermost frame: an
// undefined return address, a return address of 0, or a zero frame
// pointer. Otherwise Thread.Err says why it stopped: no CFI and no
// plausible frame pointer (wrapping unwind.ErrNoFDE and
// unwind.ErrImplausible), a return address the CFI gives outside
// executable memory (ErrNotExecutable; that frame is kept, as gdb keeps
// it), unreadable memory, malformed CFI, or MaxFrames frames
// (ErrMaxFrames).
//
// # Core files
//
// OpenCore (or NewCore over any io.ReaderAt) decodes an ELF core file of
// an x86-64 or AArch64 Linux process, on any host, as the kernel writes it
// on a fatal signal (core(5)), gdb's gcore writes it of a live process or
// qemu-user writes it for a guest (qemu_PROG_DATE_PID.core): a thread per
// NT_PRSTATUS note (struct elf_prstatus: pr_pid, pr_cursig, pr_reg in
// struct user_regs_struct order, RegsFromUserRegs, or in AArch64 struct
// user_pt_regs order, RegsFromUserPtRegs; Core.Arch says which), the process from
// NT_PRPSINFO, the auxiliary vector (NT_AUXV), the mapped files
// (NT_FILE), the signal (NT_SIGINFO), and the memory of the PT_LOAD
// segments, read on demand: a Core is the io.ReaderAt and
// unwind.SizedMemory of the dead process. Bytes of a segment beyond its
// p_filesz (pages the kernel did not dump, such as unwritten file-backed
// text) or cut off by a truncated file fail that read with ErrNotDumped.
//
// CoreStacks unwinds every thread of a core as Stacks does a live process,
// with the same walk and the core's ABI (View.Arch), over a View that
// NewCoreView builds from it: the executable mappings of NT_FILE, or, in
// a core without NT_FILE (qemu-user's), of the executable and of the
// shared objects of the dynamic linker's list in the core's memory
// (Core.LinkMap), opened by path, under a sysroot when one is given
// (CoreOptions.Sysroot; the executable may be given instead), refused when
// they are for another machine (ErrMachine) or their build ID differs from the core's
// copy of their first page, the vDSO from AT_SYSINFO_EHDR, the GDB JIT
// symbol files found through __jit_debug_descriptor in the core's memory,
// and the address space of the PT_LOAD segments (Core.Mappings), against
// which the frame-pointer fallback checks return addresses and frame
// records. The process's perf map, when /tmp/perf-PID.map is still there
// or one is given, names code outside every module. Every thread of a
// GOTRACEBACK=crash core is in a signal frame without CFI (Go's
// runtime.sigreturn__sigaction on x86-64; on AArch64 the kernel's or
// qemu's trampoline, mov x8, #139; svc #0, under Go's runtime.sigtramp,
// whose CFI marks it outermost and which the walk steps from to that
// trampoline), which the walk crosses as above.
//
// The process's memory and files are untrusted: the maps file, the JIT list
// (at most MaxJITEntries entries of at most MaxSymfileSize bytes), the
// program headers, core files (at most MaxCoreSegments segments,
// MaxCoreNoteBytes of notes, MaxThreads threads) and the debug information
// are read with bounds, and
// malformed input yields errors (a *formaterr.Error where a decoder of
// this package finds it), never a panic.
//
// Only x86-64 Linux hosts are supported for the thread stacks of live
// processes (elsewhere Stacks fails with ErrLiveStacksArch; cores of both
// machines are read on any host); Open and the module
// view work on the calling process too (pid os.Getpid()), where a thread
// cannot ptrace its own process: View.Backtrace with unwind.Local unwinds
// a stack of the calling process from registers the caller captured.
package procview
