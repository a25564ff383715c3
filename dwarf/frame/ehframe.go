package frame

import (
	"encoding/binary"
	"math"

	"github.com/elfimage/elfimage/dwarf"
)

// DeferredEHFrame is an .eh_frame section encoded before its address and
// its FDEs' addresses are known, as a linker needs it: the section's size
// decides where the code after it goes, and so the FDEs' addresses. Its
// bytes are those [EncodeEHFrame] writes, except each FDE's pc_begin,
// which [DeferredEHFrame.Put] fills once the addresses are known: the
// instructions are encoded once.
type DeferredEHFrame struct {
	data     []byte
	offsets  []uint64
	order    binary.ByteOrder
	addrSize uint8
}

// EncodeEHFrameDeferred encodes cie and fdes as [EncodeEHFrame] does,
// without their addresses: the FDEs' Start fields are not encoded (0 is
// as good as any) and [DeferredEHFrame.Put] takes the real ones. Errors
// wrap [ErrInvalid], as those of EncodeEHFrame, except that an FDE too far
// from its pc_begin field is only found by Put. Cost: O(total
// instructions); allocates the section once.
func EncodeEHFrameDeferred(cie CIE, fdes []FDE, enc dwarf.Encoding) (*DeferredEHFrame, error) {
	data, offs, err := encode(ehFlavor{deferred: true}, cie, fdes, 0, enc)
	if err != nil {
		return nil, err
	}
	return &DeferredEHFrame{data: data, offsets: offs, order: enc.ByteOrder, addrSize: enc.AddrSize}, nil
}

// Size returns the size of the section in bytes; no address changes it.
func (e *DeferredEHFrame) Size() int { return len(e.data) }

// FDEOffsets returns the section offset of each FDE's length field, in
// the order of the FDEs (for [EncodeEHFrameHdr]). The slice is e's own.
func (e *DeferredEHFrame) FDEOffsets() []uint64 { return e.offsets }

// Put writes the section into dst (exactly [DeferredEHFrame.Size] bytes) as
// loaded at sectionAddr, for fdes: the FDEs given to [EncodeEHFrameDeferred], in the
// same order and with the same sizes, now with their Start addresses.
// Errors wrap [ErrInvalid]: dst or fdes of another length, an FDE whose
// size changed, a range that wraps or does not fit 4-byte addresses, or
// a Start more than 2 GiB away from its pc_begin field (sdata4). Cost:
// one copy of the section and O(1) per FDE; no allocation.
func (e *DeferredEHFrame) Put(dst []byte, sectionAddr uint64, fdes []FDE) error {
	if len(dst) != len(e.data) {
		return invalid(".eh_frame of %d bytes put into %d", len(e.data), len(dst))
	}
	if len(fdes) != len(e.offsets) {
		return invalid("%d FDEs put, %d encoded", len(fdes), len(e.offsets))
	}
	copy(dst, e.data)
	for i := range fdes {
		f := &fdes[i]
		// The FDE: length (4 bytes: .eh_frame is in the 32-bit format),
		// CIE pointer (4 bytes), pc_begin (sdata4), pc_range (udata4).
		field := e.offsets[i] + 8
		if got := e.order.Uint32(dst[field+4:]); uint64(got) != f.Size {
			return invalid("FDE %d: size %#x, encoded %#x", i, f.Size, got)
		}
		if f.Start+f.Size < f.Start {
			return invalid("FDE %d: range overflows the address space", i)
		}
		if e.addrSize == 4 && f.Start+f.Size > math.MaxUint32+1 {
			return invalid("FDE %d: range does not fit 4-byte addresses", i)
		}
		at := sectionAddr + field
		rel := int64(f.Start - at)
		if rel < math.MinInt32 || rel > math.MaxInt32 {
			return invalid("FDE %d: pc_begin %#x is too far from its field at %#x for sdata4", i, f.Start, at)
		}
		e.order.PutUint32(dst[field:], uint32(int32(rel)))
	}
	return nil
}
