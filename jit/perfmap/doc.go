// Package perfmap writes and reads perf map files, /tmp/perf-PID.map: the
// simplest way to tell Linux perf the names of code made at run time.
//
// # Format
//
// The format is defined by perf's tools/perf/Documentation/jit-interface.txt
// and by what perf's reader (dso__load_perf_map in tools/perf/util/symbol.c)
// accepts: one symbol per line,
//
//	START SIZE NAME\n
//
// START (an address) and SIZE (bytes) in hexadecimal without "0x", NAME the
// rest of the line, which may contain spaces. The symbol covers
// [START, START+SIZE). There are no timestamps and no way to remove a
// symbol: when code is freed and its addresses reused, the later line wins.
//
// # Traps of perf's reader, and what the [Writer] does about them
//
//   - perf strips the last byte of every line as the newline: the writer
//     ends every line with '\n' and never writes '\r'.
//   - A newline or carriage return in a name would split or corrupt the
//     line, and perf truncates a name at a NUL: the writer replaces '\n',
//     '\r' and NUL with a space.
//   - perf skips lines whose name is shorter than 3 bytes (its check
//     "len + 2 >= line_len"): the writer pads 1- and 2-byte names with
//     spaces (trailing spaces are trimmed by [Parse]) and rejects empty names.
//   - perf does not accept "0x" before the numbers: the writer writes bare
//     lowercase hex.
//   - perf ignores the file unless it is owned by root or by the user
//     running perf (without -f). The writer creates a fresh file, mode 0644,
//     owned by the process user: the first [Open] in a process removes any
//     stale file of the same name (a previous process with the same pid) and
//     creates the new one with O_EXCL|O_NOFOLLOW, so a file planted in /tmp
//     by another user or a symbolic link is never written through.
//   - Concurrent writers would interleave and tear lines: one [Writer] per
//     file per process ([Open] returns the same one), a mutex around writes,
//     O_APPEND, and every line handed to a single write(2).
//
// perf itself reads only /tmp/perf-PID.map ([Default]); [Open] takes another
// directory for tests and tools.
//
// # Reading
//
// [Parse] accepts what other producers write (optional "0x", either hex
// case, tabs or several spaces between fields, trailing '\r', blank lines),
// skips and counts malformed lines as perf does, and resolves overlapping
// entries so that the later line wins. [Map.Lookup] then finds the entry
// covering a pc by bisection without allocating.
package perfmap
