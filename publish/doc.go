// Package publish shows loaded images to debuggers and profilers: gdb
// through the GDB JIT interface ([GDB], [UnpublishGDB]; package
// jit/gdbjit), perf through perf maps ([PerfMap] in one call, or
// [PerfMapEntries] for a jit/perfmap.Writer of one's own) and jitdump files
// ([Jitdump] in one call, or [JitdumpFunctions] for a jit/jitdump.Writer of
// one's own; then `perf inject --jit`).
//
// Dependencies point one way: publishers depend on images, images know
// nothing of publishers. The root package loads, queries and closes an
// image; this package reads it through its public methods
// (Image.SymfileInto, Image.Procedures, Image.LineTable, Image.FindFDE)
// and ties a gdb registration to the image's life with Image.OnClose, so
// that a program that only links and loads images does not link the GDB
// JIT interface's symbols (__jit_debug_register_code,
// __jit_debug_descriptor) nor the jitdump and perf map writers.
//
// Images mapped from files need nothing for perf, which reads them as
// files; perf maps and jitdump serve images loaded from memory
// (elfimage.Load). Every publisher also announces the library's entry
// image (elfimage.EntryImage), the frame between every image's code and
// its Go caller, so that gdb and perf unwind and name it.
//
// Formats: the GDB manual's "JIT Compilation Interface", perf's
// jit-interface.txt (perf maps) and jitdump specification.
package publish
