// Package value reads the types of DWARF debugging information and shows
// values of them as debuggers do: the one type model ([Type]) that
// elfimage.Link writes and every reader of this module reads back, its
// decoder from any producer's .debug_info ([Reader]), where a value is
// ([Locate], over package dwarf/expr) and its text ([Format]).
//
// The image queries of package elfimage (Image.Locals, Image.SubprogramAt,
// and through them the describe command) read types with a [Reader];
// package procview reads those of any module's DWARF with one. [Format]
// has two styles: [Print], as gdb's print command shows a value (members
// of structures, elements of arrays, strings), which
// elfimage.FormatLocation and elfimage.Backtrace (Arg.Text) use; and
// [Brief], as gdb's backtrace shows arguments (scalars only, aggregates as
// "..."), which procview uses for the arguments of every frame of a live
// process or core.
//
// The debug information and the memory a value is read from are
// untrusted: types are decoded with bounds (MaxTypes entries, nesting 64
// deep, sizes at most MaxSize) into errors that name the offset, never a
// panic; formatting reads at most 16384 members and elements and writes
// at most 4 KiB of text; a part that cannot be read is shown as such.
package value
