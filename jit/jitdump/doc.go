// Package jitdump writes and reads jitdump files (jit-PID.dump), the format
// in which a runtime tells Linux perf about code it makes at run time, with
// names, source lines and unwinding information. `perf inject --jit` turns
// each function of a jitdump into an ELF file (jitted-PID-N.so) and a
// PERF_RECORD_MMAP2 event, after which `perf report` symbolizes, annotates
// and unwinds through the code.
//
// The format is perf's tools/perf/Documentation/jitdump-specification.txt;
// where perf's code (util/jitdump.c, util/genelf.c, util/genelf_debug.c)
// differs from the prose, this package follows the code.
//
// # File layout
//
// A 40-byte header ([Header]: magic 0x4A695444 "JiTD" in the writer's byte
// order, version 1, total_size 40, e_machine, pad, pid, timestamp, flags),
// then records, each a 16-byte prefix (id, total_size including prefix,
// payload and padding, timestamp) and a payload:
//
//	JIT_CODE_LOAD (0)            pid u32, tid u32, vma, code_addr, code_size, code_index u64,
//	                             NUL-terminated name, code_size bytes of code
//	JIT_CODE_MOVE (1)            pid u32, tid u32, vma, old_code_addr, new_code_addr, code_size, code_index u64
//	JIT_CODE_DEBUG_INFO (2)      code_addr, nr_entry u64, nr_entry × {addr u64, line i32, discrim i32, NUL-terminated file name}
//	JIT_CODE_CLOSE (3)           nothing
//	JIT_CODE_UNWINDING_INFO (4)  unwinding_size, eh_frame_hdr_size, mapped_size u64, .eh_frame then .eh_frame_hdr
//
// # Perf behaviours the Writer honours
//
//   - Discovery. perf record notices the file only through an executable
//     mapping of it: [Open] maps the first page of the file PROT_READ|
//     PROT_EXEC, MAP_PRIVATE and keeps the mapping until [Writer.Close]; the
//     base name must be jit-<pid>.dump. Recording needs `perf record -k 1`
//     (CLOCK_MONOTONIC sample times), then `perf inject --jit`. A directory
//     mounted noexec makes the mapping, hence Open, fail.
//   - Clock and flags. Timestamps (header and every record) are
//     CLOCK_MONOTONIC nanoseconds and the header flags are 0; perf rejects a
//     file with any flag bit other than JITDUMP_FLAGS_ARCH_TIMESTAMP.
//   - Record order. perf attaches the DEBUG_INFO and UNWINDING_INFO records
//     read since the last CODE_LOAD to the next CODE_LOAD and then forgets
//     them: [Writer.Load] writes them just before the function's CODE_LOAD,
//     all in one write(2).
//   - Padding. Every record's total_size is a multiple of 8. perf finds a
//     CODE_LOAD's code as the last code_size bytes of the record, so the
//     padding of a CODE_LOAD goes between the name's NUL and the code (as
//     extra NULs, which perf's strlen ignores); DEBUG_INFO and
//     UNWINDING_INFO are padded at the end (perf uses nr_entry and
//     unwinding_size, not the record size).
//   - Line addresses. Each debug entry carries the absolute run-time address
//     of its instruction. Current perf (since 5.8, commit "perf jit: Fix
//     inaccurate DWARF line table") subtracts code_addr itself and starts
//     the line program at the .text address of the ELF it synthesizes;
//     producers that add 0x40 to compensate the older bug are now off by 64
//     bytes. The writer adds nothing. perf's genelf_debug.c ends the line
//     sequence at the last entry's address (DW_LNE_end_sequence without an
//     advance), which would leave the code after the last entry without a
//     line (`perf report --sort srcline` and addr2line on the
//     jitted-PID-N.so showed "??" there, checked with perf 6.1): the writer
//     therefore appends a closing entry, the last line again at the address
//     just past the code, so that the sequence ends at the end of the code.
//     Readers see it as one more entry than [Function].Lines. File names
//     are written in full; the "\xff\0" repeated-name marker is read but
//     never written (perf before it knew the marker would take it for a
//     file name).
//   - Unwinding layout. perf's genelf.c reads the payload as .eh_frame
//     (unwinding_size - eh_frame_hdr_size bytes) followed by .eh_frame_hdr,
//     and places .text at GEN_ELF_TEXT_OFFSET (0x40 in older perf, 0x80 since
//     the program header was added), .eh_frame at ALIGN_8(text + code_size)
//     and .eh_frame_hdr right after .eh_frame, with file offsets equal to
//     addresses. [EncodeUnwinding] therefore encodes the CFI for exactly
//     that layout relative to the code: .eh_frame at code_addr +
//     [EHFrameOffset](code_size), FDE pc_begin DW_EH_PE_pcrel|sdata4,
//     .eh_frame_hdr eh_frame_ptr pcrel|sdata4 and table datarel|sdata4. All
//     values are relative, so the same bytes are right at the run-time
//     address and in the synthesized ELF whatever GEN_ELF_TEXT_OFFSET is.
//     .eh_frame's size is a multiple of 4, so libelf's 4-byte alignment of
//     .eh_frame_hdr inserts no gap.
//   - Mapped size and spacing (the trap). perf's MMAP2 event for a function
//     covers [code_addr, code_addr + ALIGN_8(code_size) + mapped_size), or
//     [code_addr, code_addr + code_size) when mapped_size is 0. perf's
//     libunwind-based unwinder reads the .eh_frame_hdr table through that
//     mapping, so the writer sets mapped_size to unwinding_size by default.
//     Functions packed more tightly than [Spacing] (what
//     [Writer.Footprint] returns) overlap in perf's address space, and the
//     later mapping cuts the earlier one. Loaded in increasing address
//     order, each function's cut mapping still covers all of its code
//     (checked with perf 6.1: samples and lines land in the right function,
//     call graphs and --call-graph dwarf unwind; elfimage loads an image's
//     procedures this way, publish.JitdumpFunctions). Loaded in any other
//     order, a later function's tail covers the start of an earlier one
//     and samples land in the wrong function: such a JIT must leave
//     Footprint bytes from a function's start to the next function's start. It need not copy the unwinding
//     data there: perf reads it from the jitted-PID-N.so, never from the
//     process. [Options].UnmappedUnwinding writes mapped_size 0 instead:
//     functions may then be packed, and perf's libdw-based unwinder (which
//     reads .eh_frame_hdr from the file) still works, but the libunwind one
//     finds no table.
//   - Build ids. perf's build id of a jitted-PID-N.so is a hash of the code
//     (with the load address, when perf uses MD5): identical code at
//     identical addresses in two runs gets one build id, and perf's build-id
//     cache merges them. Nothing in the jitdump can change that.
//
// # Reading
//
// [Parse] and [ReadFile] decode every record type (unknown ids are kept as
// [Unknown], as perf skips them) from files of any producer, in either byte
// order (perf accepts byte-swapped files). Like perf, they reject a version
// above 1 and unknown flag bits. They treat the input as hostile: lengths
// are checked against the data before use, allocation is bounded by the
// input size, and errors are *formaterr.Error (section "jitdump", file
// offset, field). A file cut short (a writer still running) gives the
// records before the cut and an error wrapping [ErrTruncated].
// [Dump.Code] pairs each CODE_LOAD with the DEBUG_INFO and UNWINDING_INFO
// perf would attach to it, and [LoadedCode.Finder] parses its unwinding
// data at the addresses perf gives it.
package jitdump
