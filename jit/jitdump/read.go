package jitdump

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/formaterr"
)

// Section is the Source of the reader's *formaterr.Error values; their
// offsets are file offsets.
const Section = "jitdump"

// ErrTruncated is wrapped (together with a *formaterr.Error) by the
// error for a file that ends inside a record, as a file still being written
// does.
var ErrTruncated = errors.New("jitdump: truncated")

// Dump is a decoded jitdump file.
type Dump struct {
	Header    Header
	ByteOrder binary.ByteOrder // the file's byte order
	Records   []Record         // in file order
}

// ReadFile reads and decodes the jitdump file at path (see [Parse]).
func ReadFile(path string) (*Dump, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data)
}

// Parse decodes a jitdump file: the header, then every record in order.
// Records keep slices of data (code, unwinding data, unknown payloads), not
// copies.
//
// As perf does, it accepts either byte order (by the magic number) and
// version 0 or 1, rejects a higher version and flag bits other than
// JITDUMP_FLAGS_ARCH_TIMESTAMP, skips header bytes beyond 40 that
// total_size announces, and keeps records of unknown type as [Unknown].
// Unlike perf, which stops silently at the first bad record, it reports it.
//
// Errors are *formaterr.Error (section "jitdump", the file offset and
// field), wrapped with [ErrTruncated] when the data end inside a record. On
// an error after the header, the returned Dump holds the records before
// the bad one. Cost: O(len(data)); allocation proportional to the number of
// records and entries, which the data bound.
func Parse(data []byte) (*Dump, error) {
	if len(data) < 4 {
		return nil, truncated(0, "magic", "file shorter than the magic number")
	}
	d := &Dump{}
	switch binary.LittleEndian.Uint32(data) {
	case Magic:
		d.ByteOrder = binary.LittleEndian
	case MagicSwapped:
		d.ByteOrder = binary.BigEndian
	default:
		return nil, &formaterr.Error{Source: Section, Field: "magic", Msg: fmt.Sprintf("bad magic %#x", binary.LittleEndian.Uint32(data))}
	}
	if len(data) < HeaderSize {
		return nil, truncated(0, "header", fmt.Sprintf("%d bytes, the header has %d", len(data), HeaderSize))
	}
	b := dwarf.MakeBuf(Section, d.ByteOrder, data)
	h := &d.Header
	h.Magic = b.U32("magic")
	h.Version = b.U32("version")
	h.TotalSize = b.U32("total_size")
	h.Machine = elf.Machine(b.U32("elf_mach"))
	h.Pad1 = b.U32("pad1")
	h.PID = b.U32("pid")
	h.Timestamp = b.U64("timestamp")
	h.Flags = Flags(b.U64("flags"))
	switch {
	case h.Version > Version:
		return nil, &formaterr.Error{Source: Section, Offset: 4, Field: "version", Msg: fmt.Sprintf("version %d, perf reads only %d", h.Version, Version)}
	case h.TotalSize < HeaderSize:
		return nil, &formaterr.Error{Source: Section, Offset: 8, Field: "total_size", Msg: fmt.Sprintf("header size %d < %d", h.TotalSize, HeaderSize)}
	case uint64(h.TotalSize) > uint64(len(data)):
		return nil, truncated(8, "total_size", fmt.Sprintf("header size %d past the end of %d bytes", h.TotalSize, len(data)))
	case h.Flags&^knownFlags != 0:
		return nil, &formaterr.Error{Source: Section, Offset: 32, Field: "flags", Msg: fmt.Sprintf("unknown flags %#x (perf rejects the file)", uint64(h.Flags&^knownFlags))}
	}
	for off := uint64(h.TotalSize); off < uint64(len(data)); {
		r, next, err := parseRecord(data, off, d.ByteOrder)
		if err != nil {
			return d, err
		}
		d.Records = append(d.Records, r)
		off = next
	}
	return d, nil
}

func truncated(off uint64, field, msg string) error {
	return fmt.Errorf("%w: %w", ErrTruncated, &formaterr.Error{Source: Section, Offset: off, Field: field, Msg: msg})
}

// parseRecord decodes the record at file offset off.
func parseRecord(data []byte, off uint64, order binary.ByteOrder) (Record, uint64, error) {
	left := uint64(len(data)) - off
	if left < PrefixSize {
		return nil, 0, truncated(off, "prefix", fmt.Sprintf("%d bytes left, a record prefix has %d", left, PrefixSize))
	}
	p := Prefix{
		ID:        RecordID(order.Uint32(data[off:])),
		TotalSize: order.Uint32(data[off+4:]),
		Timestamp: order.Uint64(data[off+8:]),
		Offset:    off,
	}
	size := uint64(p.TotalSize)
	switch {
	case size < PrefixSize:
		return nil, 0, &formaterr.Error{Source: Section, Offset: off + 4, Field: "total_size", Msg: fmt.Sprintf("%s record of %d bytes, less than its prefix", p.ID, size)}
	case size > left:
		return nil, 0, truncated(off+4, "total_size", fmt.Sprintf("%s record of %d bytes, %d left", p.ID, size, left))
	}
	rec := data[off : off+size]
	next := off + size
	// The cursor sees the whole file, so errors carry file offsets, but
	// cannot read past the record.
	b := dwarf.MakeBuf(Section, order, data)
	b.Seek(off+PrefixSize, "prefix")
	b.SetEnd(int(next))
	if fixed := fixedSize(p.ID); size < fixed {
		return nil, 0, &formaterr.Error{Source: Section, Offset: off + 4, Field: "total_size", Msg: fmt.Sprintf("%s record of %d bytes, its fixed fields need %d", p.ID, size, fixed)}
	}
	switch p.ID {
	case JIT_CODE_LOAD:
		r := &CodeLoad{Prefix: p}
		r.PID = b.U32("pid")
		r.TID = b.U32("tid")
		r.VMA = b.U64("vma")
		r.CodeAddr = b.U64("code_addr")
		r.CodeSize = b.U64("code_size")
		r.CodeIndex = b.U64("code_index")
		// perf: the code is the record's last code_size bytes; the name
		// starts after the fixed fields and ends at its NUL.
		if r.CodeSize > size-CodeLoadSize-1 {
			return nil, 0, &formaterr.Error{Source: Section, Offset: off + 40, Field: "code_size", Msg: fmt.Sprintf("code of %d bytes does not fit a record of %d bytes with a name", r.CodeSize, size)}
		}
		nameField := rec[CodeLoadSize : size-r.CodeSize]
		i := bytes.IndexByte(nameField, 0)
		if i < 0 {
			return nil, 0, &formaterr.Error{Source: Section, Offset: off + CodeLoadSize, Field: "name", Msg: "name not NUL-terminated before the code"}
		}
		r.Name = string(nameField[:i])
		r.Code = rec[size-r.CodeSize:]
		return r, next, nil
	case JIT_CODE_MOVE:
		r := &CodeMove{Prefix: p}
		r.PID = b.U32("pid")
		r.TID = b.U32("tid")
		r.VMA = b.U64("vma")
		r.OldCodeAddr = b.U64("old_code_addr")
		r.NewCodeAddr = b.U64("new_code_addr")
		r.CodeSize = b.U64("code_size")
		r.CodeIndex = b.U64("code_index")
		return r, next, b.Err()
	case JIT_CODE_DEBUG_INFO:
		r := &DebugInfo{Prefix: p}
		r.CodeAddr = b.U64("code_addr")
		nOff := b.Off()
		n := b.U64("nr_entry")
		// Each entry takes at least DebugEntrySize+1 bytes: n is bounded
		// by the record before anything is allocated.
		if max := uint64(b.Len()) / (DebugEntrySize + 1); n > max {
			return nil, 0, &formaterr.Error{Source: Section, Offset: nOff, Field: "nr_entry", Msg: fmt.Sprintf("%d entries cannot fit in %d bytes", n, b.Len())}
		}
		r.Entries = make([]DebugEntry, 0, n)
		prev := ""
		for range n {
			var e DebugEntry
			e.Addr = b.U64("addr")
			e.Line = int32(b.U32("lineno"))
			e.Discrim = int32(b.U32("discrim"))
			name := b.CString("name")
			if b.Err() != nil {
				return nil, 0, b.Err()
			}
			if len(name) == 1 && name[0] == 0xff {
				e.File, e.Repeated = prev, true
			} else {
				e.File = string(name)
			}
			prev = e.File
			r.Entries = append(r.Entries, e)
		}
		return r, next, nil
	case JIT_CODE_UNWINDING_INFO:
		r := &UnwindingInfo{Prefix: p}
		r.UnwindingSize = b.U64("unwinding_size")
		r.EHFrameHdrSize = b.U64("eh_frame_hdr_size")
		r.MappedSize = b.U64("mapped_size")
		switch {
		case r.UnwindingSize > size-UnwindingInfoSize:
			return nil, 0, &formaterr.Error{Source: Section, Offset: off + PrefixSize, Field: "unwinding_size", Msg: fmt.Sprintf("%d bytes of unwinding data in a record of %d bytes", r.UnwindingSize, size)}
		case r.EHFrameHdrSize > r.UnwindingSize:
			return nil, 0, &formaterr.Error{Source: Section, Offset: off + PrefixSize + 8, Field: "eh_frame_hdr_size", Msg: fmt.Sprintf("%d bytes of .eh_frame_hdr in %d bytes of unwinding data", r.EHFrameHdrSize, r.UnwindingSize)}
		}
		r.Data = rec[UnwindingInfoSize : UnwindingInfoSize+r.UnwindingSize]
		return r, next, nil
	case JIT_CODE_CLOSE:
		return &CodeClose{Prefix: p}, next, nil
	}
	return &Unknown{Prefix: p, Payload: rec[PrefixSize:]}, next, nil
}

// fixedSize returns the size of the fixed part of a record of type id,
// prefix included; for a CODE_LOAD that includes one byte of name.
func fixedSize(id RecordID) uint64 {
	switch id {
	case JIT_CODE_LOAD:
		return CodeLoadSize + 1
	case JIT_CODE_MOVE:
		return CodeMoveSize
	case JIT_CODE_DEBUG_INFO:
		return DebugInfoSize
	case JIT_CODE_UNWINDING_INFO:
		return UnwindingInfoSize
	}
	return PrefixSize
}

// LoadedCode is a JIT_CODE_LOAD with the records perf attaches to it.
type LoadedCode struct {
	*CodeLoad
	// DebugInfo is the last JIT_CODE_DEBUG_INFO before the load and after
	// the previous load, or nil.
	DebugInfo *DebugInfo
	// Unwinding is the last JIT_CODE_UNWINDING_INFO before the load and
	// after the previous load, or nil.
	Unwinding *UnwindingInfo
}

// Code returns the loads of d in file order, each with the debug and
// unwinding information perf's inject attaches to it: the last of each read
// since the previous load (perf forgets them after each load).
// Cost: O(len(d.Records)).
func (d *Dump) Code() []LoadedCode {
	var out []LoadedCode
	var di *DebugInfo
	var ui *UnwindingInfo
	for _, r := range d.Records {
		switch r := r.(type) {
		case *DebugInfo:
			di = r
		case *UnwindingInfo:
			ui = r
		case *CodeLoad:
			out = append(out, LoadedCode{CodeLoad: r, DebugInfo: di, Unwinding: ui})
			di, ui = nil, nil
		}
	}
	return out
}

// Span returns the run-time range [start, end) perf's MMAP2 event for the
// load covers ([Spacing] of the code size and the attached mapped size).
func (c *LoadedCode) Span() (start, end uint64) {
	var mapped uint64
	if c.Unwinding != nil {
		mapped = c.Unwinding.MappedSize
	}
	return c.CodeAddr, c.CodeAddr + Spacing(c.CodeSize, mapped)
}

// Finder parses the attached unwinding data at the addresses perf gives it
// relative to the code (.eh_frame at CodeAddr + [EHFrameOffset](CodeSize),
// .eh_frame_hdr right after it) and returns a [frame.Finder] that finds FDEs
// by run-time pc. The address size is that of the header's machine (8 if
// unknown) and the byte order the file's. Errors: an error when there is
// no unwinding information, or those of [frame.NewFinder].
func (c *LoadedCode) Finder(d *Dump) (*frame.Finder, error) {
	if c.Unwinding == nil {
		return nil, fmt.Errorf("jitdump: %q has no unwinding information", c.Name)
	}
	addrSize := uint8(8)
	if a := arch.ForMachine(d.Header.Machine); a != nil {
		addrSize = uint8(a.PtrSize)
	}
	eh, hdr := c.Unwinding.EHFrame(), c.Unwinding.EHFrameHdr()
	ehAddr := c.CodeAddr + EHFrameOffset(c.CodeSize)
	if len(hdr) == 0 {
		hdr = nil
	}
	return frame.NewFinder(eh, ehAddr, hdr, ehAddr+uint64(len(eh)), d.ByteOrder, addrSize)
}
