// Package elfimage writes, loads and describes ELF images of compiled code
// for language runtimes: compilers, virtual machines and JITs.
//
// A runtime hands [Link] a [Module]: per procedure its machine code, line
// rows, call frame information (as github.com/elfimage/elfimage/dwarf/frame.Insn operations), parameters and
// scoped variables with their DWARF locations, docstring and properties.
// Link writes an ELF64 ET_DYN image whose file layout is its memory layout:
// page-aligned PT_LOAD segments (R, R+W, R+X, R) with p_offset == p_vaddr and
// p_filesz == p_memsz, then a non-loaded tail with the symbol table, DWARF
// 5 (or 4, 3; 32- or 64-bit format), the procedure table of package meta
// and the rebase table ([SectionRebase]). [WriteFile] writes it atomically.
// [Strip] (or [LinkSplit], or [LinkOptions].DebugFile) splits an image into
// a stripped image that loads and runs as it does and a separate debug
// file with its symbols and DWARF, which the debug queries of the stripped
// image find by build ID or .gnu_debuglink (package debugfile), as gdb,
// lldb and debuginfod do.
//
// Ahead of time, [LinkObject] (or [WriteObject]) writes the same Module as
// a relocatable object (ET_REL) for the system linker instead: cc, GNU
// ld, gold and lld link it with C or C++ code, and resolve its .text,
// .eh_frame and DWARF relocations, so gdb, perf, addr2line, libgcc's
// unwinder (C++ exceptions, glibc's backtrace) see the generated code as
// they see C. Objects are x86-64 or AArch64, as the Module is. Its
// global procedures are called with the platform's calling convention
// (System V AMD64, AAPCS64) under [Proc].LinkName (a C identifier,
// DW_AT_linkage_name) or their Name; [Module].Externs names the C
// functions the code calls (undefined symbols, R_X86_64_PLT32 or
// R_AARCH64_CALL26). Such a program is not loaded by
// [Open]: the code must not depend on a host runtime.
//
// [Open] maps an image file with one mmap(PROT_READ), reads its headers
// and tables with pread (no page of the file is faulted in at load but the
// data pages the relocations write), mprotects the segments that need
// write or execute (never both), applies the
// R_X86_64_RELATIVE (R_AARCH64_RELATIVE) relocations and registers the image's range; [Load]
// does the same from bytes in memory (the JIT path). Debug information is
// never parsed at load: queries ([Image.Procedure], [Image.PositionAt],
// [Image.Locals], [Image.SubprogramAt]) read the mapped tail lazily. Any
// run-time pc finds its image by bisection ([Lookup], or [Acquire] when
// another goroutine may close it) and [Backtrace] unwinds a stack through
// the images' .eh_frame with package unwind.
//
// Debuggers and profilers see loaded images through package publish
// (github.com/elfimage/elfimage/publish): publish.GDB (the GDB JIT
// interface, each image moved to its run-time address, [Image.Symfile]),
// publish.PerfMapEntries (perf maps) and publish.JitdumpFunctions
// (jitdump files for perf inject --jit); images mapped from files need
// nothing for perf, which reads them as files. Code called through
// native.Call runs on a library-owned stack and passes through the
// library's entry frame ([EntryName], in the entry image [EntryImage],
// loaded and installed before the first image), whose call frame
// information describes the stack switch: every tool unwinds from the
// code into the Go caller of native.Call without any CFI of the caller's
// making (gdb shows the entry frame as "<signal handler called>").
//
// Package layout. This package holds the model ([Module], [Proc], types),
// the linker ([Link]), the loader ([Open], [Load], [Image]) and the
// queries on loaded images (procedures, lines, variables, [Backtrace]):
// the flow a compiler author follows, link then load then ask, with one
// import. Splitting model, linker and loader into packages was weighed
// and refused: every compiler needs all three, the linker's output is
// only meaningful to this loader, and three imports with types passed
// between them would make the first program longer without making any
// step clearer. What is not on that path lives in its own packages, and
// dependencies point one way, from them to images: publish (gdb, perf) ties
// itself to an image's life through [Image.OnClose], so a program that
// only links and loads links neither the GDB JIT interface nor the
// jitdump and perf map writers; the formats are read only through their
// packages (elfobj for ELF, dwarf/... for DWARF, meta for the procedure
// table, unwind for stacks). Every decoder's malformed-input error is one
// type, [FormatError] (package formaterr): one errors.As catches them
// all. The loader's debugger hook (gdbhook.go, in the manner of ld.so's
// r_debug breakpoint) stays here: it costs a load two empty calls and
// no allocation, and it imports nothing.
//
// Formats: System V gABI (ELF), the AMD64 psABI, DWARF 5 (sections 6.2
// line numbers, 6.4 call frame information, 7 encodings), LSB "Exception
// Frames" (.eh_frame, .eh_frame_hdr), the GDB manual's "JIT Compilation
// Interface", and perf's jitdump specification. README.md describes the
// image layout and the command-line tool.
package elfimage
