package elfobj

import (
	"debug/elf"
	"encoding/binary"
	"testing"
)

// FuzzDecode checks the fixed-size decoders (DecodeHeader and
// DecodeHeaderInto, DecodeProg and DecodeProgInto, DecodeDyn, DecodeRel)
// on any bytes, in both classes and both byte orders, against a reference
// decode written from the gABI's structure layouts with encoding/binary
// (Elf32_Ehdr/Elf64_Ehdr, Elf32_Phdr/Elf64_Phdr, Elf32_Dyn/Elf64_Dyn,
// Elf32_Rel(a)/Elf64_Rel(a)).
func FuzzDecode(f *testing.F) {
	f.Add(byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), []byte("\x03\x00\x3e\x00\x01\x00\x00\x00 0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnop"))
	f.Add(byte(elf.ELFCLASS32), byte(elf.ELFDATA2MSB), []byte("\x00\x02\x00\x08\x00\x00\x00\x01 0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnop"))
	f.Fuzz(func(t *testing.T, class, data byte, rest []byte) {
		b := append([]byte(elf.ELFMAG+string([]byte{class, data})+"\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00"), rest...)
		h, err := DecodeHeader(b)
		into := Header{is64: true, big: true} // overwritten in full, on an error too
		into.Entry, into.Phnum, into.Class = 0x1234, 7, elf.ELFCLASS64
		if ierr := DecodeHeaderInto(&into, b); (ierr == nil) != (err == nil) || into != h {
			t.Fatalf("DecodeHeaderInto: %+v, %v; DecodeHeader: %+v, %v", into, ierr, h, err)
		}
		is64 := elf.Class(class) == elf.ELFCLASS64
		var order binary.ByteOrder
		switch elf.Data(data) {
		case elf.ELFDATA2LSB:
			order = binary.LittleEndian
		case elf.ELFDATA2MSB:
			order = binary.BigEndian
		}
		size := 52
		if is64 {
			size = 64
		}
		if wantErr := order == nil || (elf.Class(class) != elf.ELFCLASS32 && !is64) || len(b) < size; wantErr != (err != nil) {
			t.Fatalf("DecodeHeader error %v, want one: %v", err, wantErr)
		}
		if err != nil {
			return
		}
		u16 := func(o int) uint16 { return order.Uint16(b[o:]) }
		u32 := func(o int) uint32 { return order.Uint32(b[o:]) }
		u64 := func(o int) uint64 { return order.Uint64(b[o:]) }
		word := func(o int) uint64 { // Elf32_Addr/Off or Elf64_Addr/Off at o
			if is64 {
				return u64(o)
			}
			return uint64(u32(o))
		}
		want := Header{ObjectVersion: u32(20), big: order == binary.BigEndian, is64: is64}
		want.FileHeader = elf.FileHeader{Class: elf.Class(class), Data: elf.Data(data), Version: elf.Version(b[6]),
			OSABI: elf.OSABI(b[7]), ABIVersion: b[8], ByteOrder: order, Type: elf.Type(u16(16)), Machine: elf.Machine(u16(18))}
		rest32 := 36 // e_flags of Elf32_Ehdr
		if is64 {
			want.Entry, want.Phoff, want.Shoff, rest32 = u64(24), u64(32), u64(40), 48
		} else {
			want.Entry, want.Phoff, want.Shoff = uint64(u32(24)), uint64(u32(28)), uint64(u32(32))
		}
		want.Flags, want.Ehsize, want.Phentsize, want.Phnum = u32(rest32), u16(rest32+4), u16(rest32+6), u16(rest32+8)
		want.Shentsize, want.Shnum, want.Shstrndx = u16(rest32+10), u16(rest32+12), u16(rest32+14)
		if h != want {
			t.Fatalf("DecodeHeader: %+v, want %+v", h, want)
		}
		// The structures, decoded from the start of the header's bytes.
		if len(b) >= h.ProgHeaderSize() {
			var p elf.ProgHeader
			if is64 {
				p = elf.ProgHeader{Type: elf.ProgType(u32(0)), Flags: elf.ProgFlag(u32(4)), Off: u64(8), Vaddr: u64(16),
					Paddr: u64(24), Filesz: u64(32), Memsz: u64(40), Align: u64(48)}
			} else {
				p = elf.ProgHeader{Type: elf.ProgType(u32(0)), Off: uint64(u32(4)), Vaddr: uint64(u32(8)), Paddr: uint64(u32(12)),
					Filesz: uint64(u32(16)), Memsz: uint64(u32(20)), Flags: elf.ProgFlag(u32(24)), Align: uint64(u32(28))}
			}
			got := h.DecodeProg(b)
			into := elf.ProgHeader{Type: 0x12345678, Off: ^uint64(0)} // overwritten in full
			h.DecodeProgInto(&into, b)
			if got != p || into != p {
				t.Fatalf("DecodeProg %+v, DecodeProgInto %+v, want %+v", got, into, p)
			}
		}
		tag, val := h.DecodeDyn(b)
		wantTag := elf.DynTag(int32(u32(0))) // sign-extended
		if is64 {
			wantTag = elf.DynTag(int64(u64(0)))
		}
		if tag != wantTag || val != word(h.DynSize()/2) {
			t.Fatalf("DecodeDyn: %v %#x, want %v %#x", tag, val, wantTag, word(h.DynSize()/2))
		}
		for _, rela := range []bool{false, true} {
			r := h.DecodeRel(b, rela)
			var w Rel
			if is64 {
				w = Rel{Off: u64(0), Sym: uint32(u64(8) >> 32), Type: uint32(u64(8))}
				if rela {
					w.Addend = int64(u64(16))
				}
			} else {
				w = Rel{Off: uint64(u32(0)), Sym: u32(4) >> 8, Type: u32(4) & 0xff}
				if rela {
					w.Addend = int64(int32(u32(8)))
				}
			}
			if r != w {
				t.Fatalf("DecodeRel(rela %v): %+v, want %+v", rela, r, w)
			}
		}
	})
}
