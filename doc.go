// Package elfimage writes, loads and describes ELF images of compiled code
// for language runtimes: compilers, virtual machines and JITs.
//
// A runtime hands [Link] a [Module]: per procedure its machine code, line
// rows, call frame information (as github.com/elfimage/elfimage/dwarf/frame.Insn operations), parameters and
// scoped variables with their DWARF locations, docstring and properties.
// Link writes an ELF64 ET_DYN image whose file layout is its memory layout:
// page-aligned PT_LOAD segments (R, R+X, R+W) with p_offset == p_vaddr and
// p_filesz == p_memsz, then a non-loaded tail with the symbol table, DWARF
// 5 (or 4, 3; 32- or 64-bit format), the procedure table of package meta
// and the rebase table ([SectionRebase]). [WriteFile] writes it atomically.
// [Strip] (or [LinkSplit], or [LinkOptions].DebugFile) splits an image into
// a stripped image that loads and runs as it does and a separate debug
// file with its symbols and DWARF, which the debug queries of the stripped
// image find by build ID or .gnu_debuglink (package debugfile), as gdb,
// lldb and debuginfod do.
//
// [Open] maps an image file with one mmap(PROT_READ) and mprotects the
// segments that need write or execute (never both), applies the
// R_X86_64_RELATIVE relocations and registers the image's range; [Load]
// does the same from bytes in memory (the JIT path). Debug information is
// never parsed at load: queries ([Image.Procedure], [Image.PositionAt],
// [Image.Locals], [Image.SubprogramAt]) read the mapped tail lazily. Any
// run-time pc finds its image by bisection ([Lookup], or [Acquire] when
// another goroutine may close it) and [Backtrace] unwinds a stack through
// the images' .eh_frame with package unwind.
//
// Debuggers and profilers see loaded images through [PublishGDB] (the GDB
// JIT interface, each image moved to its run-time address by [Rebase]),
// [Image.PerfMapEntries] (perf maps) and [Image.JitdumpFunctions]
// (jitdump files for perf inject --jit); images mapped from files need
// nothing for perf, which reads them as files. Code called through
// native.Call runs on a library-owned stack and passes through the
// library's entry frame ([EntryName], in the entry image [EntryImage],
// loaded and installed before the first image), whose call frame
// information describes the stack switch: every tool unwinds from the
// code into the Go caller of native.Call without any CFI of the caller's
// making (gdb shows the entry frame as "<signal handler called>").
//
// Formats: System V gABI (ELF), the AMD64 psABI, DWARF 5 (sections 6.2
// line numbers, 6.4 call frame information, 7 encodings), LSB "Exception
// Frames" (.eh_frame, .eh_frame_hdr), the GDB manual's "JIT Compilation
// Interface", and perf's jitdump specification. README.md describes the
// image layout and the command-line tool.
package elfimage
