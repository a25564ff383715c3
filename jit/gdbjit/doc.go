// Package gdbjit implements the GDB JIT compilation interface (GDB manual,
// "JIT Compilation Interface": "JIT Declarations", "Registering Code",
// "Unregistering Code") in pure Go: a process tells a debugger about code
// it made at run time by handing it in-memory ELF symbol files. gdb and
// LLDB both implement the debugger's side (LLDB's GDB JIT loader is on by
// default on Linux; the tests drive gdb 13 and lldb-19).
//
// # The protocol
//
// The binary defines, in Go assembly (symbols_amd64.s, symbols_arm64.s; no cgo), the two
// global symbols gdb looks up by name in .symtab:
//
//   - __jit_debug_descriptor: struct jit_descriptor {uint32 version,
//     uint32 action_flag, jit_code_entry *relevant_entry, *first_entry},
//     24 bytes, statically initialised with version 1 so that gdb can read
//     it before any Go code runs;
//   - __jit_debug_register_code: a real function that only returns; gdb
//     puts a breakpoint on it.
//
// Registered symbol files form a doubly linked list of struct
// jit_code_entry {next_entry, prev_entry, symfile_addr, symfile_size}, 32
// bytes each, from first_entry. To register, the process links an entry,
// points relevant_entry at it, sets action_flag to JIT_REGISTER_FN (1) and
// calls __jit_debug_register_code; gdb, stopped there, reads the one
// relevant entry and the symbol file it points to. To unregister it unlinks
// the entry, points relevant_entry at it, sets JIT_UNREGISTER_FN (2) and
// calls the function again; gdb drops the symbol file it read from that
// entry address. A debugger that attaches later (gdb -p) walks the whole
// list from first_entry.
//
// # What this package guarantees
//
//   - Both symbols are global in .symtab under exactly those names in every
//     binary that imports the package (they are referenced from Go, so the
//     linker keeps them). A binary stripped with -ldflags=-s has no .symtab
//     and is invisible to gdb's JIT support; -ldflags=-w keeps .symtab.
//   - One definition per process: gdb uses the first descriptor it finds.
//     Two copies of this package in one binary (a fork or a /v2 under
//     another import path) fail to link with a duplicate-symbol error,
//     which is intended; C code linked in through cgo that defines the same
//     symbols (LLVM's ORC, for instance) conflicts the same way, and a
//     shared library loaded later with its own copy would be a second,
//     separate JIT interface that gdb handles per object file.
//   - Entries and symbol file copies live in mmap'd memory outside the Go
//     heap (the collector never scans or moves them); a copy stays mapped
//     until its Unregister, because gdb reads symbol files lazily.
//   - A mutex serialises list changes and notifications. Every store a
//     debugger could observe in the middle of a change is atomic and
//     ordered so that the list reached from first_entry through
//     next_entry is well formed at every instant: a debugger may stop the
//     process anywhere.
//   - Each notification calls __jit_debug_register_code with the goroutine
//     in the runtime's system-call state, so Go's preemption signal
//     (SIGURG) is not sent to the thread while gdb handles the event: a
//     signal during gdb's step over its JIT breakpoint makes gdb report the
//     breakpoint again and register the same symbol file twice (observed
//     with gdb 13), one copy of which survives unregistration. Other
//     signals (SIGPROF while CPU profiling) can still cause that, and on
//     a loaded machine gdb 13 still registered a symbol file twice in
//     about one session of 50 (2026-12-03, cause not pinned down: seen
//     only at startup, while the Go runtime creates its threads).
//   - gdb does not relocate JIT symbol files: every address in a
//     registered file must be the run-time address. [Symfile] builds such
//     files for procedures at known addresses, with every SHF_ALLOC section
//     at its real address and debug sections non-ALLOC.
//   - Unwinding and identity. A [Proc] with CFI gets an FDE in its symbol
//     file's .eh_frame, so both debuggers unwind through the procedure into
//     its caller at every instruction (without CFI they guess from the
//     code); every symbol file carries an NT_GNU_BUILD_ID note, the SHA-1
//     of the file, which LLDB shows as the module's UUID and gdb as the
//     objfile's build ID. [Publisher] builds its files the same way.
//
// # Cost, and batching
//
// Without a debugger a registration costs a copy of the symbol file, a
// call of an empty function and, for files over one page or when no page
// of an unregistered entry is cached for reuse, one mmap(2): well under
// 1 µs for a register/unregister pair of a small file. With gdb attached every
// notification stops the process; gdb reads the file and re-sets every
// breakpoint, and its cost per notification grows with the number of
// registered files (quadratic overall when a JIT registers one file per
// procedure). The protocol needs one notification per symbol file, so the
// batching that helps is many procedures per symbol file: [RegisterProcs]
// (or [Symfile] + [Register]) publishes any number of procedures with one
// notification. [RegisterBatch] registers several ready-made files under
// one lock, but still with one notification each.
//
// # Publisher: one procedure at a time, at scale
//
// A JIT makes procedures one at a time. Registering one symbol file per
// procedure is quadratic under gdb (each registration costs gdb time
// proportional to the files already registered: measured here 1,800
// registrations/s at 100 files, 255/s at 5,000). [Publisher] keeps both
// the number of notifications and the number of registered files small:
//
//   - Coalesce. [Publisher.Add] only appends to a pending list under the
//     Publisher's lock (never held during a notification, so Add never
//     waits for gdb). The first Add into an empty list arms a timer of
//     Delay (20 ms by default); MaxPending (1024) pending procedures
//     start a flush at once; [Publisher.Flush] flushes synchronously. A
//     flush registers the pending procedures, oldest first, in symbol
//     files of at most MaxObjectProcs procedures: one notification for
//     the whole batch.
//   - Repack. After publishing, a flush merges registered files like a
//     tiered log-structured merge: a file's level is
//     floor(log_Fanout(procedures)); when Fanout (4) files share a level,
//     the Fanout smallest are rebuilt as one file, unless it would exceed
//     MaxObjectProcs (1024). A procedure is thus re-registered at most
//     once per level it climbs (about log_Fanout(MaxObjectProcs/batch)
//     times), and the registered files number at most
//     (Fanout-1)*(levels up to MaxObjectProcs) + Fanout*N/MaxObjectProcs
//     for N procedures: at most 18 + 4N/1024 with the defaults (57 at
//     10,000; 11 to 30 in the benchmarks).
//   - Order. Every flush registers its new files first and only then
//     unregisters the files they replace. In between gdb knows some
//     procedures twice (same name, same address), never none: a
//     breakpoint on a procedure stays resolved and inserted throughout,
//     and a thread running the code at that moment still stops at it.
//     The other order would make such breakpoints pending again for an
//     instant and remove their trap instructions.
//   - No overlapping sections. gdb maps a pc to a section through one
//     sorted table from which it drops any section that overlaps another
//     ("unexpected overlap ... Will ignore section B"): a procedure in a
//     dropped section would lose its backtrace frame. So each symbol file
//     has one .text section (and one PT_LOAD and one compile unit) per run
//     of its procedures that no procedure of another file falls between,
//     and a new procedure that lands inside a registered file's section
//     (code allocated in a hole) makes the flush rebuild that file.
//   - Remove. [Publisher.Remove] marks the procedure in O(1); the next
//     flush rebuilds each file that lost procedures without them (or
//     unregisters it when it is empty). Free the code only after a flush
//     that started after Remove.
//
// Guarantees: a procedure is visible to gdb (its notification returned)
// at most Delay plus the time of the flush in progress after Add: that
// flush registers at most one batch and at most a few merged files of at
// most MaxObjectProcs procedures, so gdb never stops the process for more
// than one MaxObjectProcs-sized read at a time. Cost per Add without a
// debugger: a lock, an append and a map insert, plus, amortized, building
// the procedure into a symbol file once per level (a few microseconds;
// see BENCHMARKS.md). Flushes run on a timer goroutine or on the caller of
// Flush, one at a time.
//
// The package works on linux/amd64 and linux/arm64; elsewhere every registration returns
// an error matching errors.ErrUnsupported ([Symfile] works everywhere).
package gdbjit
