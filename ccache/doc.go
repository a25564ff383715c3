// Package ccache is a compile cache of elfimage images, after Guile's
// auto-compilation cache (~/.cache/guile/ccache): a runtime that compiles
// source files when it loads them keeps each compiled image in a file,
// runs it mapped from that file, and reuses it while the source, the
// compiler and the link options are unchanged. Because the image stays on
// disk after the process ends, perf report, addr2line, gdb and
// elfimage symbolize read its symbols, lines and frames afterwards with no
// extra step, which an image in a temporary file or in memory cannot give.
//
// It is a package of its own, not part of the command, because any runtime
// embedding elfimage that compiles at load time wants the same thing, with
// the same trust rules.
//
// # Layout
//
// The cache is one flat directory (default $XDG_CACHE_HOME/elfimage, else
// ~/.cache/elfimage; see [Env]). The entry of a source file is named
// BASE-HASH.elf, where BASE is the source's base name without its extension
// and HASH the first 16 hex digits of the SHA-256 of the source's absolute
// path, the link options and the caller's extra options: one entry per
// source and option set, so runs with different options do not evict each
// other. The entry is the ELF image exactly as [elfimage.Link] wrote it,
// followed by a trailer that ELF readers ignore (as the signature appended
// to a Linux kernel module): the key record, the SHA-256 of the image and
// the record, and a 16-byte footer (see [Key] for the record, [FormatVersion]
// for the footer).
//
// # Key
//
// An entry is reused only when its key equals the one wanted: the cache
// format version, the source's absolute path and the SHA-256 of its bytes
// (content, not modification time, as Python's hash-based .pyc files), the
// compiler identity (by default [ExecutableID]: the running program's Go
// build ID, which changes whenever any of its code does, so a rebuilt
// compiler or linker never reuses an old image), the link options and the
// caller's extra options. A differing key means the entry is stale: it is
// rebuilt and replaced without a warning.
//
// # Trust and integrity
//
// A cache holds code that will be executed. The directory is created with
// mode 0700 and is used only when it is a directory owned by the effective
// user and not writable by group or others; an entry is loaded only when
// it is a regular file (not a symbolic link) with the same owner and not
// writable by group or others. Otherwise it is ignored with a warning and
// rebuilt. Before an entry runs, Load reads it whole and checks the
// trailer's SHA-256, the key, and [elfimage.Open]'s validation, then
// compares the mapped image with the bytes it checked, every byte outside
// the writable segments, which carry load-time relocations (they are
// covered by the image's build ID, a hash of the whole image, which is
// among the compared bytes): a truncated, corrupt or replaced entry is
// rebuilt, never executed.
//
// # Atomicity and concurrency
//
// An entry is written to a temporary file in the cache directory and
// renamed over the entry, so a reader sees the old entry or the new one,
// never part of one. There is no fsync: a crash may leave an empty or
// partial entry, which the checks above reject (the Go build cache makes
// the same choice). Any number of processes may load the same source at
// once: each either reuses a complete entry or builds, writes and renames
// its own, and then runs exactly the bytes it checked.
//
// # Size bound
//
// After storing an entry, Load removes the least recently used entries
// until the total size of the directory's entries is at most
// [Cache.MaxBytes] ([DefaultMaxBytes] by default). Using an entry sets its
// modification time, which is what "recently used" means here (access
// times are unreliable under relatime and noatime mounts). Temporary files
// left by a killed writer are removed once they are an hour old.
package ccache
