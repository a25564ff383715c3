// Package formaterr holds the one error type every elfimage decoder
// returns for malformed input: [Error], naming the source, the byte offset
// in it, the field being decoded and what was wrong.
//
// The ELF reader (package elfobj), the loader and the queries of the root
// package (where the type is also spelled elfimage.FormatError), the DWARF
// decoders (dwarf and its subpackages, where it is also spelled
// dwarf.FormatError), the procedure table (meta), the jitdump and perf map
// parsers (jit/jitdump, jit/perfmap), the rebase table, the symbolizer and
// the /proc and core file readers (procview) all return a *Error, possibly
// wrapped: one errors.As catches them all,
//
//	var fe *formaterr.Error
//	if errors.As(err, &fe) {
//		fmt.Println(fe.Source, fe.Offset, fe.Field)
//	}
//
// The package is the lowest of the module: it imports nothing of it, so
// that every decoder can return its type.
package formaterr

import "fmt"

// Error reports malformed input: where it was found and what was wrong.
// Decoders never panic on hostile input; they return one of these
// (possibly wrapped, possibly wrapping a cause).
type Error struct {
	// Source names what was being decoded: a file path ("/tmp/a.elf",
	// the name given to elfimage.Load), a section (".debug_line",
	// ".eh_frame", ".elfimage.procs"), an ELF structure ("ELF header",
	// "section header 5", "program header 2") or a stream ("jitdump",
	// "perf map", "maps"); each decoder's documentation says which.
	Source string
	// Offset is the byte offset in Source of the offending field, or of
	// the structure holding it.
	Offset uint64
	// Field is the field being decoded in its format's own words
	// ("unit_length", "e_phoff", "p_filesz of program header 2",
	// "CIE_pointer", "total_size"), or "" when no single field is at
	// fault.
	Field string
	// Msg says what is wrong, in lower case; "" when Err says it all.
	Msg string
	// Err is the underlying cause (an I/O error, a decompression error,
	// the error of a lower decoder), or nil. [Error.Unwrap] returns it.
	Err error
}

// Error formats the error as "SOURCE: FIELD at offset 0xOFFSET: MSG"
// ("SOURCE at offset 0xOFFSET: MSG" when there is no field), appending
// ": CAUSE" when Err is set; for example
// ".debug_line: version at offset 0x4: unsupported line table version 9"
// or "/tmp/a.elf: e_phoff at offset 0x20: program header table past end of
// file".
func (e *Error) Error() string {
	var s string
	if e.Field != "" {
		s = fmt.Sprintf("%s: %s at offset %#x: ", e.Source, e.Field, e.Offset)
	} else {
		s = fmt.Sprintf("%s at offset %#x: ", e.Source, e.Offset)
	}
	switch {
	case e.Msg == "" && e.Err != nil:
		return s + e.Err.Error()
	case e.Err != nil:
		return s + e.Msg + ": " + e.Err.Error()
	}
	return s + e.Msg
}

// Unwrap returns the cause, Err (nil when there is none).
func (e *Error) Unwrap() error { return e.Err }
