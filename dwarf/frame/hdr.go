package frame

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"

	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/formaterr"
)

const (
	hdrVersion  = 1
	hdrPtrEnc   = dwarf.DW_EH_PE_pcrel | dwarf.DW_EH_PE_sdata4
	hdrCountEnc = dwarf.DW_EH_PE_udata4
	hdrTableEnc = dwarf.DW_EH_PE_datarel | dwarf.DW_EH_PE_sdata4
)

// EHFrameHdrSize returns the size in bytes of the .eh_frame_hdr that
// [EncodeEHFrameHdr] writes for nFDE FDEs: a 12-byte header and 8 bytes per
// FDE. It does not depend on any address.
func EHFrameHdrSize(nFDE int) int { return 12 + 8*nFDE }

// EncodeEHFrameHdr encodes an .eh_frame_hdr section (LSB 5.0 section
// 10.6.2) loaded at hdrAddr for the .eh_frame at ehFrameAddr written by
// [EncodeEHFrame] from fdes (fdeOffsets is its second result): version 1,
// eh_frame_ptr DW_EH_PE_pcrel|DW_EH_PE_sdata4, fde_count DW_EH_PE_udata4 and
// a table of (initial location, FDE address) pairs, DW_EH_PE_datarel|
// DW_EH_PE_sdata4 relative to hdrAddr, sorted by initial location. The
// result is EHFrameHdrSize(len(fdes)) bytes, little-endian (use
// [EncodeEHFrameHdrOrder] for another byte order).
//
// Errors wrap [ErrInvalid]: lengths differ, two FDEs start at the same
// address or overlap, or a distance does not fit 32 bits. Cost:
// O(n log n).
func EncodeEHFrameHdr(hdrAddr, ehFrameAddr uint64, fdes []FDE, fdeOffsets []uint64) ([]byte, error) {
	return EncodeEHFrameHdrOrder(binary.LittleEndian, hdrAddr, ehFrameAddr, fdes, fdeOffsets)
}

// EncodeEHFrameHdrOrder is [EncodeEHFrameHdr] in byte order order.
func EncodeEHFrameHdrOrder(order binary.AppendByteOrder, hdrAddr, ehFrameAddr uint64, fdes []FDE, fdeOffsets []uint64) ([]byte, error) {
	if len(fdes) != len(fdeOffsets) {
		return nil, invalid("%d FDEs but %d FDE offsets", len(fdes), len(fdeOffsets))
	}
	if len(fdes) > math.MaxUint32 {
		return nil, invalid("too many FDEs")
	}
	rel := func(what string, to, from uint64) (uint32, error) {
		d := int64(to - from)
		if d < math.MinInt32 || d > math.MaxInt32 {
			return 0, invalid("%s %#x is too far from %#x for sdata4", what, to, from)
		}
		return uint32(int32(d)), nil
	}
	b := make([]byte, 0, EHFrameHdrSize(len(fdes)))
	b = append(b, hdrVersion, byte(hdrPtrEnc), byte(hdrCountEnc), byte(hdrTableEnc))
	p, err := rel("eh_frame_ptr", ehFrameAddr, hdrAddr+4)
	if err != nil {
		return nil, err
	}
	b = order.AppendUint32(b, p)                 // eh_frame_ptr
	b = order.AppendUint32(b, uint32(len(fdes))) // fde_count
	idx := make([]int, len(fdes))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return fdes[idx[i]].Start < fdes[idx[j]].Start })
	for k, i := range idx {
		if k > 0 {
			prev := fdes[idx[k-1]]
			if prev.Start == fdes[i].Start || prev.Start+prev.Size > fdes[i].Start {
				return nil, invalid("FDEs %d [%#x, %#x) and %d [%#x, %#x) overlap", idx[k-1], prev.Start, prev.Start+prev.Size, i, fdes[i].Start, fdes[i].Start+fdes[i].Size)
			}
		}
		loc, err := rel("initial location", fdes[i].Start, hdrAddr)
		if err != nil {
			return nil, err
		}
		addr, err := rel("FDE address", ehFrameAddr+fdeOffsets[i], hdrAddr)
		if err != nil {
			return nil, err
		}
		b = order.AppendUint32(b, loc)  // initial_location
		b = order.AppendUint32(b, addr) // address
	}
	return b, nil
}

// Hdr is a parsed .eh_frame_hdr (LSB 5.0 section 10.6.2). Its table, if
// present with a fixed-size encoding, is searched in place.
type Hdr struct {
	// EHFramePtr is the address of .eh_frame the header points at.
	EHFramePtr uint64
	// Count is the number of table entries (0 when the table is absent).
	Count uint64
	// TableEnc is the table's encoding (DW_EH_PE_omit when absent).
	TableEnc dwarf.EHPE

	data      []byte
	p         pointers
	order     binary.ByteOrder
	tableOff  uint64
	entrySize uint64 // 0: the table cannot be binary searched
	// le4 is set for the table GCC, LLVM and our writer emit: 4-byte
	// fields (sdata4 or udata4), datarel or absolute, little-endian.
	// Lookup then searches it with direct loads (no call through order).
	le4    bool
	signed bool   // le4: the fields are sdata4
	base   uint64 // le4: the datarel base (0 for absolute fields)
}

// ParseEHFrameHdr parses the .eh_frame_hdr data loaded at address addr.
// The table is usable for binary search when its encoding has a fixed size
// (DW_EH_PE_udata2/4/8, sdata2/4/8 or absptr, applied absolutely, datarel
// (relative to addr) or pcrel); otherwise, or when it is omitted, [Finder]
// falls back to scanning .eh_frame. Errors are *formaterr.Error.
// Cost: O(1); the data are not copied.
func ParseEHFrameHdr(data []byte, addr uint64, order binary.ByteOrder, addrSize uint8) (*Hdr, error) {
	h := &Hdr{data: data, order: order, p: pointers{addr: addr, addrSize: addrSize, bases: Bases{Data: addr, HasData: true}}}
	b := dwarf.MakeBuf(".eh_frame_hdr", order, data)
	if v := b.U8("version"); b.Err() == nil && v != hdrVersion {
		b.FailAt(0, "version", fmt.Sprintf("unsupported version %d", v))
	}
	ptrEnc := dwarf.EHPE(b.U8("eh_frame_ptr_enc"))
	countEnc := dwarf.EHPE(b.U8("fde_count_enc"))
	h.TableEnc = dwarf.EHPE(b.U8("table_enc"))
	if b.Err() == nil {
		for i, e := range []dwarf.EHPE{ptrEnc, countEnc, h.TableEnc} {
			if !validEnc(e) || e != dwarf.DW_EH_PE_omit && e&dwarf.DW_EH_PE_indirect != 0 {
				b.FailAt(uint64(1+i), "encoding", fmt.Sprintf("unsupported encoding %#x", uint8(e)))
			}
		}
	}
	if ptrEnc != dwarf.DW_EH_PE_omit {
		h.EHFramePtr = h.p.read(&b, ptrEnc, "eh_frame_ptr", 0, false)
	}
	if countEnc == dwarf.DW_EH_PE_omit || h.TableEnc == dwarf.DW_EH_PE_omit {
		h.TableEnc = dwarf.DW_EH_PE_omit
		return h, b.Err()
	}
	h.Count = h.p.read(&b, countEnc, "fde_count", 0, false)
	h.tableOff = b.Off()
	if err := b.Err(); err != nil {
		return nil, err
	}
	var size uint64
	switch h.TableEnc & 0x0f {
	case dwarf.DW_EH_PE_udata2, dwarf.DW_EH_PE_sdata2:
		size = 2
	case dwarf.DW_EH_PE_udata4, dwarf.DW_EH_PE_sdata4:
		size = 4
	case dwarf.DW_EH_PE_udata8, dwarf.DW_EH_PE_sdata8:
		size = 8
	case dwarf.DW_EH_PE_absptr:
		size = uint64(addrSize)
	}
	switch h.TableEnc & 0x70 {
	case dwarf.DW_EH_PE_absptr, dwarf.DW_EH_PE_datarel, dwarf.DW_EH_PE_pcrel:
	default:
		size = 0
	}
	left := uint64(len(data)) - h.tableOff
	if size != 0 && h.Count > left/(2*size) {
		return nil, &formaterr.Error{Source: ".eh_frame_hdr", Offset: 8, Field: "fde_count", Msg: fmt.Sprintf("%d entries do not fit the %d bytes left", h.Count, left)}
	}
	h.entrySize = 2 * size
	if size == 4 && order == binary.LittleEndian {
		switch h.TableEnc & 0x70 {
		case dwarf.DW_EH_PE_datarel:
			h.le4, h.base = true, addr
		case dwarf.DW_EH_PE_absptr:
			h.le4 = true
		}
		h.signed = h.TableEnc&0x0f == dwarf.DW_EH_PE_sdata4
	}
	return h, nil
}

// lookupLE4 is Lookup for a le4 table: a bisection whose probes decode
// the field with the table's parameters held in registers. (A version
// that moves the candidate by a borrow mask instead of a branch was
// slower on the 64-frame benchmark, 215-235 against 185-200 ns per step:
// the branches of repeated walks are predicted.)
func (h *Hdr) lookupLE4(pc uint64) (fdeAddr uint64, ok bool) {
	t := h.data[h.tableOff : h.tableOff+8*h.Count] // checked by ParseEHFrameHdr
	signed, add, mask := h.signed, h.base, ^uint64(0)
	if h.p.addrSize == 4 {
		mask = 0xffffffff
	}
	val := func(u uint32) uint64 {
		v := uint64(u)
		if signed {
			v = uint64(int64(int32(u)))
		}
		return (v + add) & mask
	}
	base, n := uint64(0), h.Count
	for n > 1 {
		half := n / 2
		if val(binary.LittleEndian.Uint32(t[(base+half)*8:])) <= pc {
			base += half
		}
		n -= half
	}
	if val(binary.LittleEndian.Uint32(t[base*8:])) > pc {
		return 0, false // below every entry (base is 0)
	}
	return val(binary.LittleEndian.Uint32(t[base*8+4:])), true
}

// HasTable reports whether the header's table can be binary searched.
func (h *Hdr) HasTable() bool { return h.entrySize != 0 }

// fastField decodes the table field at offset off (in bounds: checked by
// ParseEHFrameHdr) for the common encodings, datarel or absolute
// sdata4/udata4/sdata8/udata8; ok is false for others.
func (h *Hdr) fastField(off uint64) (v uint64, ok bool) {
	var base uint64
	switch h.TableEnc & 0x70 {
	case dwarf.DW_EH_PE_datarel:
		base = h.p.bases.Data
	case dwarf.DW_EH_PE_absptr:
	default:
		return 0, false
	}
	switch h.TableEnc & 0x0f {
	case dwarf.DW_EH_PE_sdata4:
		v = uint64(int64(int32(h.order.Uint32(h.data[off:]))))
	case dwarf.DW_EH_PE_udata4:
		v = uint64(h.order.Uint32(h.data[off:]))
	case dwarf.DW_EH_PE_sdata8, dwarf.DW_EH_PE_udata8:
		v = h.order.Uint64(h.data[off:])
	default:
		return 0, false
	}
	v += base
	if h.p.addrSize == 4 {
		v &= 0xffffffff
	}
	return v, true
}

// entry decodes table entry i.
func (h *Hdr) entry(i uint64) (loc, fde uint64, err error) {
	off := h.tableOff + i*h.entrySize
	if l, ok := h.fastField(off); ok {
		f, _ := h.fastField(off + h.entrySize/2)
		return l, f, nil
	}
	b := dwarf.MakeBuf(".eh_frame_hdr", h.order, h.data)
	b.Seek(h.tableOff+i*h.entrySize, "table")
	loc = h.p.read(&b, h.TableEnc, "initial_location", 0, false)
	fde = h.p.read(&b, h.TableEnc, "address", 0, false)
	return loc, fde, b.Err()
}

// Lookup binary searches the table for the last entry whose initial
// location is <= pc and returns the address of its FDE. The caller must
// still check that the FDE covers pc. ok is false when no entry starts at
// or below pc or the table is unusable. Cost: O(log n); no allocation
// unless the table is malformed.
func (h *Hdr) Lookup(pc uint64) (fdeAddr uint64, ok bool, err error) {
	if h.entrySize == 0 || h.Count == 0 {
		return 0, false, nil
	}
	if h.le4 {
		fdeAddr, ok = h.lookupLE4(pc)
		return fdeAddr, ok, nil
	}
	// The last entry whose location is <= pc, by the bisection of
	// lookupLE4 (the same probes, so that a table out of order gives the
	// same answer either way).
	base, n := uint64(0), h.Count
	for n > 1 {
		half := n / 2
		loc, _, err := h.entry(base + half)
		if err != nil {
			return 0, false, err
		}
		if loc <= pc {
			base += half
		}
		n -= half
	}
	loc, fde, err := h.entry(base)
	if err != nil {
		return 0, false, err
	}
	if loc > pc {
		return 0, false, nil
	}
	return fde, true, nil
}

// Finder finds the FDE covering a pc in one module's .eh_frame (or
// .debug_frame), through the .eh_frame_hdr table when there is one.
type Finder struct {
	Sec *Section // the frame section
	Hdr *Hdr     // the parsed .eh_frame_hdr, or nil to scan Sec
}

// NewFinder parses one module's .eh_frame_hdr (hdr may be nil: no header)
// and returns a Finder over it and the .eh_frame, each given with the
// address it is loaded at. Errors are those of [ParseEHFrameHdr].
func NewFinder(ehFrame []byte, ehFrameAddr uint64, hdr []byte, hdrAddr uint64, order binary.ByteOrder, addrSize uint8) (*Finder, error) {
	f := &Finder{Sec: NewEHFrame(ehFrame, ehFrameAddr, order, addrSize)}
	if hdr != nil {
		h, err := ParseEHFrameHdr(hdr, hdrAddr, order, addrSize)
		if err != nil {
			return nil, err
		}
		f.Hdr = h
	}
	return f, nil
}

// FindFDE stores in fde the FDE covering pc: by binary search of the
// .eh_frame_hdr table when usable (the FDE found is checked to cover pc),
// else by a linear scan of the section. A miss returns an error wrapping
// [ErrNoFDE]; a malformed table or FDE a *formaterr.Error. Cost:
// O(log n) with a table, O(section) without; no allocation on a hit.
// When fde holds an FDE read earlier from the same section whose CIE is
// the new FDE's, that CIE is kept, not parsed again (a walk reuses one
// ParsedFDE); the section's bytes must not change meanwhile. Such an FDE,
// in the shape compilers emit (32-bit length, pcrel|sdata4 or 4-byte
// absolute pc_begin and pc_range, no LSDA or a pcrel|sdata4 one), is then read straight from
// the bytes; others go through the general parser.
func (f *Finder) FindFDE(pc uint64, fde *ParsedFDE) error {
	if f.Hdr == nil || !f.Hdr.HasTable() {
		return f.Sec.FindFDE(pc, fde)
	}
	addr, ok, err := f.Hdr.Lookup(pc)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w %#x: below every FDE in .eh_frame_hdr", ErrNoFDE, pc)
	}
	off := addr - f.Sec.addr
	if addr < f.Sec.addr || off >= uint64(len(f.Sec.data)) {
		return &formaterr.Error{Source: ".eh_frame_hdr", Field: "address", Msg: fmt.Sprintf("FDE address %#x outside .eh_frame [%#x, %#x)", addr, f.Sec.addr, f.Sec.addr+uint64(len(f.Sec.data)))}
	}
	if err := f.Sec.fdeAt(off, fde); err != nil {
		return err
	}
	if !fde.Contains(pc) {
		return fmt.Errorf("%w %#x: nearest FDE covers [%#x, %#x)", ErrNoFDE, pc, fde.Start, fde.Start+fde.Size)
	}
	return nil
}
