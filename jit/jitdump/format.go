package jitdump

import (
	"debug/elf"
	"strconv"
)

// Header constants (jitdump-specification.txt, "File header").
const (
	// Magic is the header's magic number ("JiTD" when read as a
	// little-endian uint32), written in the writer's byte order.
	Magic uint32 = 0x4A695444
	// MagicSwapped is Magic as read from a file of the other byte order.
	MagicSwapped uint32 = 0x4454694A
	// Version is the only header version perf accepts (it rejects higher
	// ones).
	Version uint32 = 1
	// HeaderSize is the size of the header in bytes.
	HeaderSize = 40
	// PrefixSize is the size of the record prefix in bytes.
	PrefixSize = 16
)

// Flags is the header's flags field.
type Flags uint64

// JITDUMP_FLAGS_ARCH_TIMESTAMP says timestamps are the architecture's cycle
// counter (TSC) rather than CLOCK_MONOTONIC nanoseconds. It is the only flag
// perf knows; any other bit makes perf reject the file.
const JITDUMP_FLAGS_ARCH_TIMESTAMP Flags = 1

// knownFlags are the flag bits perf accepts.
const knownFlags = JITDUMP_FLAGS_ARCH_TIMESTAMP

// RecordID is a record type (the prefix's id field).
type RecordID uint32

// Record types (jitdump-specification.txt, "Record types").
const (
	JIT_CODE_LOAD           RecordID = 0 // a function's name and code
	JIT_CODE_MOVE           RecordID = 1 // code moved to another address
	JIT_CODE_DEBUG_INFO     RecordID = 2 // source lines of the next loaded function
	JIT_CODE_CLOSE          RecordID = 3 // end of the dump
	JIT_CODE_UNWINDING_INFO RecordID = 4 // .eh_frame and .eh_frame_hdr of the next loaded function
)

var idNames = [...]string{"JIT_CODE_LOAD", "JIT_CODE_MOVE", "JIT_CODE_DEBUG_INFO", "JIT_CODE_CLOSE", "JIT_CODE_UNWINDING_INFO"}

// String returns the spec's name ("JIT_CODE_LOAD") or "JIT_CODE_<n>".
func (id RecordID) String() string {
	if int(id) < len(idNames) {
		return idNames[id]
	}
	return "JIT_CODE_" + strconv.FormatUint(uint64(id), 10)
}

// Fixed sizes of the records' leading parts, prefix included (bytes).
const (
	CodeLoadSize      = PrefixSize + 8 + 4*8 // then name and code
	CodeMoveSize      = PrefixSize + 8 + 5*8
	DebugInfoSize     = PrefixSize + 2*8 // then the entries
	DebugEntrySize    = 8 + 4 + 4        // then the file name
	UnwindingInfoSize = PrefixSize + 3*8 // then the data
	CodeCloseSize     = PrefixSize
)

// Header is the file header.
type Header struct {
	Magic     uint32      // Magic in the file's byte order
	Version   uint32      // 1
	TotalSize uint32      // size of the header (bytes), at least HeaderSize
	Machine   elf.Machine // e_machine of the code (elf_mach)
	Pad1      uint32      // reserved
	PID       uint32      // process that wrote the file
	Timestamp uint64      // when the file was created (CLOCK_MONOTONIC ns unless Flags say otherwise)
	Flags     Flags
}

// Prefix is the part every record starts with. Offset is not in the file:
// the reader sets it to the record's file offset.
type Prefix struct {
	ID        RecordID
	TotalSize uint32 // bytes, prefix and padding included
	Timestamp uint64
	Offset    uint64 // file offset of the record
}

// RecordPrefix returns p; it makes every record type a [Record].
func (p *Prefix) RecordPrefix() *Prefix { return p }

// Record is one decoded record: *[CodeLoad], *[CodeMove], *[DebugInfo],
// *[CodeClose], *[UnwindingInfo] or *[Unknown].
type Record interface {
	RecordPrefix() *Prefix
}

// CodeLoad is a JIT_CODE_LOAD record: the function Name's code, at run-time
// addresses [CodeAddr, CodeAddr+CodeSize).
type CodeLoad struct {
	Prefix
	PID, TID  uint32
	VMA       uint64 // virtual address of the code (equal to CodeAddr in every producer we know)
	CodeAddr  uint64
	CodeSize  uint64 // bytes
	CodeIndex uint64 // unique per load; perf names the ELF jitted-PID-CodeIndex.so
	Name      string
	Code      []byte // CodeSize bytes, aliasing the parsed data
}

// CodeMove is a JIT_CODE_MOVE record: the code of load CodeIndex now runs
// at NewCodeAddr.
type CodeMove struct {
	Prefix
	PID, TID    uint32
	VMA         uint64
	OldCodeAddr uint64
	NewCodeAddr uint64
	CodeSize    uint64
	CodeIndex   uint64
}

// DebugInfo is a JIT_CODE_DEBUG_INFO record: source lines of the function
// at CodeAddr, which the next CODE_LOAD describes.
type DebugInfo struct {
	Prefix
	CodeAddr uint64
	Entries  []DebugEntry
}

// DebugEntry is one line-table entry: from run-time address Addr on, the
// code comes from File:Line.
type DebugEntry struct {
	Addr     uint64 // absolute run-time address
	Line     int32  // 1-based
	Discrim  int32  // discriminator; 0 by default; perf ignores it
	File     string // resolved: the previous entry's file when Repeated
	Repeated bool   // the file name was the "\xff\0" marker
}

// UnwindingInfo is a JIT_CODE_UNWINDING_INFO record: the .eh_frame and
// .eh_frame_hdr of the function the next CODE_LOAD describes.
type UnwindingInfo struct {
	Prefix
	UnwindingSize  uint64 // bytes of .eh_frame plus .eh_frame_hdr
	EHFrameHdrSize uint64 // bytes of .eh_frame_hdr
	MappedSize     uint64 // bytes of unwinding data perf maps after the (8-aligned) code
	Data           []byte // UnwindingSize bytes (padding excluded), aliasing the parsed data
}

// EHFrame returns the .eh_frame part of Data (the first UnwindingSize -
// EHFrameHdrSize bytes, as perf's genelf.c reads it).
func (u *UnwindingInfo) EHFrame() []byte { return u.Data[:u.UnwindingSize-u.EHFrameHdrSize] }

// EHFrameHdr returns the .eh_frame_hdr part of Data (its last
// EHFrameHdrSize bytes).
func (u *UnwindingInfo) EHFrameHdr() []byte { return u.Data[u.UnwindingSize-u.EHFrameHdrSize:] }

// CodeClose is a JIT_CODE_CLOSE record: the runtime closed the dump.
type CodeClose struct {
	Prefix
}

// Unknown is a record of a type this package does not know; perf skips
// such records.
type Unknown struct {
	Prefix
	Payload []byte // the bytes after the prefix, aliasing the parsed data
}

// align8 rounds n up to a multiple of 8.
func align8(n uint64) uint64 { return (n + 7) &^ 7 }
