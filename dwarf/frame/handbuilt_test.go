package frame

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/internal/readelf"
)

// Hand-built CIEs and FDEs, byte by byte, for what our writer never emits:
// every DW_EH_PE pointer encoding, augmentations P, L, S, CIE versions 1, 3
// and 4 with segment selectors, 64-bit .debug_frame, and every call frame
// instruction.

var le = binary.LittleEndian

// sec is a section under construction at address addr.
type sec struct {
	b    []byte
	addr uint64
}

func (s *sec) off() uint64  { return uint64(len(s.b)) }
func (s *sec) u8(v ...byte) { s.b = append(s.b, v...) }
func (s *sec) u16(v uint16) { s.b = le.AppendUint16(s.b, v) }
func (s *sec) u32(v uint32) { s.b = le.AppendUint32(s.b, v) }
func (s *sec) u64(v uint64) { s.b = le.AppendUint64(s.b, v) }
func (s *sec) uleb(v uint64) {
	s.b = dwarf.AppendUleb128(s.b, v)
}
func (s *sec) sleb(v int64) { s.b = dwarf.AppendSleb128(s.b, v) }
func (s *sec) str(v string) { s.b = append(append(s.b, v...), 0) }

// entry32 appends a 32-bit entry: length, id, body.
func (s *sec) entry32(id func(idOff uint64) uint32, body func()) (off uint64) {
	off = s.off()
	s.u32(0)
	idOff := s.off()
	s.u32(id(idOff))
	body()
	le.PutUint32(s.b[off:], uint32(s.off()-idOff))
	return off
}

// ptr appends raw in the format of enc (low 4 bits), addrSize bytes for
// absptr and signed.
func (s *sec) ptr(enc dwarf.EHPE, raw int64, addrSize int) {
	switch enc & 0x0f {
	case dwarf.DW_EH_PE_absptr, dwarf.DW_EH_PE_signed:
		if addrSize == 8 {
			s.u64(uint64(raw))
		} else {
			s.u32(uint32(raw))
		}
	case dwarf.DW_EH_PE_uleb128:
		s.uleb(uint64(raw))
	case dwarf.DW_EH_PE_sleb128:
		s.sleb(raw)
	case dwarf.DW_EH_PE_udata2, dwarf.DW_EH_PE_sdata2:
		s.u16(uint16(raw))
	case dwarf.DW_EH_PE_udata4, dwarf.DW_EH_PE_sdata4:
		s.u32(uint32(raw))
	case dwarf.DW_EH_PE_udata8, dwarf.DW_EH_PE_sdata8:
		s.u64(uint64(raw))
	default:
		panic(fmt.Sprintf("format %#x", enc))
	}
}

func signedFormat(enc dwarf.EHPE) bool {
	switch enc & 0x0f {
	case dwarf.DW_EH_PE_signed, dwarf.DW_EH_PE_sleb128, dwarf.DW_EH_PE_sdata2, dwarf.DW_EH_PE_sdata4, dwarf.DW_EH_PE_sdata8:
		return true
	}
	return false
}

// mapMem is a PointerReader over a map of 8-byte words.
type mapMem map[uint64]uint64

func (m mapMem) ReadUint64(a uint64) (uint64, error) {
	if v, ok := m[a]; ok {
		return v, nil
	}
	return 0, fmt.Errorf("unmapped %#x", a)
}

const (
	ehSecAddr = 0x40000
	textBase  = 0x100000
	dataBase  = 0x200000
)

// buildEH builds an .eh_frame at ehSecAddr with one CIE "zPLR" whose FDE
// pointer encoding is fdeEnc, personality encoding persEnc (raw value
// persRaw), LSDA encoding lsdaEnc, and one FDE with raw pc_begin startRaw,
// pc_range 0x40 and raw LSDA lsdaRaw. It returns the section and the
// section offsets of the fields pc_begin, personality and LSDA.
func buildEH(fdeEnc, persEnc, lsdaEnc dwarf.EHPE, startRaw, persRaw, lsdaRaw int64) (s *sec, startOff, persOff, lsdaOff uint64) {
	s = &sec{addr: ehSecAddr}
	cie := s.entry32(func(uint64) uint32 { return 0 }, func() {
		s.u8(1)
		s.str("zPLR")
		s.uleb(1)
		s.sleb(-8)
		s.u8(16)
		lenOff := s.off()
		s.u8(0) // augmentation length, patched
		s.u8(byte(persEnc))
		if persEnc == dwarf.DW_EH_PE_aligned {
			for (s.addr+s.off())%8 != 0 {
				s.u8(0)
			}
		}
		persOff = s.off()
		s.ptr(persEnc, persRaw, 8)
		s.u8(byte(lsdaEnc), byte(fdeEnc))
		s.b[lenOff] = byte(s.off() - lenOff - 1)
		s.u8(byte(dwarf.DW_CFA_def_cfa), 7, 8, byte(dwarf.DW_CFA_offset)|16, 1)
	})
	s.entry32(func(idOff uint64) uint32 { return uint32(idOff - cie) }, func() {
		if fdeEnc == dwarf.DW_EH_PE_aligned {
			for (s.addr+s.off())%8 != 0 {
				s.u8(0)
			}
		}
		startOff = s.off()
		s.ptr(fdeEnc, startRaw, 8)
		s.ptr(fdeEnc&0x0f, 0x40, 8)
		lenOff := s.off()
		s.u8(0)
		lsdaOff = s.off()
		if lsdaEnc != dwarf.DW_EH_PE_omit {
			s.ptr(lsdaEnc, lsdaRaw, 8)
		}
		s.b[lenOff] = byte(s.off() - lenOff - 1)
		s.u8(byte(dwarf.DW_CFA_advance_loc)|4, byte(dwarf.DW_CFA_def_cfa_offset), 16)
	})
	s.u32(0)
	return s, startOff, persOff, lsdaOff
}

func TestPointerEncodings(t *testing.T) {
	formats := []dwarf.EHPE{dwarf.DW_EH_PE_absptr, dwarf.DW_EH_PE_uleb128, dwarf.DW_EH_PE_udata2, dwarf.DW_EH_PE_udata4,
		dwarf.DW_EH_PE_udata8, dwarf.DW_EH_PE_signed, dwarf.DW_EH_PE_sleb128, dwarf.DW_EH_PE_sdata2, dwarf.DW_EH_PE_sdata4, dwarf.DW_EH_PE_sdata8}
	apps := []dwarf.EHPE{dwarf.DW_EH_PE_absptr, dwarf.DW_EH_PE_pcrel, dwarf.DW_EH_PE_textrel, dwarf.DW_EH_PE_datarel}
	n := 0
	for _, fm := range formats {
		for _, app := range apps {
			enc := fm | app
			raw := int64(0x1234)
			if signedFormat(fm) {
				raw = -0x1234
			}
			base := func(off uint64) uint64 {
				switch app {
				case dwarf.DW_EH_PE_pcrel:
					return ehSecAddr + off
				case dwarf.DW_EH_PE_textrel:
					return textBase
				case dwarf.DW_EH_PE_datarel:
					return dataBase
				}
				return 0
			}
			// Absolute values: raw around 0x3000, so that 2-byte
			// formats hold them.
			absAdjust := int64(0)
			if app == dwarf.DW_EH_PE_absptr {
				absAdjust = 0x3000
			}
			// LSDA: the same format, function-relative.
			lsdaEnc := fm | dwarf.DW_EH_PE_funcrel
			s, startOff, persOff, _ := buildEH(enc, enc, lsdaEnc, raw+absAdjust, raw+absAdjust, raw)
			wantStart := base(startOff) + uint64(raw+absAdjust)
			wantPers := base(persOff) + uint64(raw+absAdjust)
			name := fmt.Sprintf("%#02x", uint8(enc))
			t.Run(name, func(t *testing.T) {
				sec := NewEHFrame(s.b, ehSecAddr, le, 8)
				sec.Bases = Bases{Text: textBase, Data: dataBase, HasText: true, HasData: true}
				fdes, err := sec.FDEs()
				if err != nil {
					t.Fatal(err)
				}
				if len(fdes) != 1 {
					t.Fatalf("%d FDEs", len(fdes))
				}
				f := fdes[0]
				if f.Start != wantStart || f.Size != 0x40 {
					t.Errorf("FDE [%#x, +%#x), want [%#x, +0x40)", f.Start, f.Size, wantStart)
				}
				if f.CIE.Personality != wantPers || f.CIE.PersonalityEnc != enc {
					t.Errorf("personality %#x (enc %#x), want %#x", f.CIE.Personality, uint8(f.CIE.PersonalityEnc), wantPers)
				}
				if !f.HasLSDA || f.LSDA != f.Start+uint64(raw) {
					t.Errorf("LSDA %#x (%v), want FDE start %#x %+d", f.LSDA, f.HasLSDA, f.Start, raw)
				}
				// The FDE is found by a scan and gives the rows.
				var got ParsedFDE
				if err := sec.FindFDE(wantStart+5, &got); err != nil || got.Offset != f.Offset {
					t.Errorf("FindFDE: %v", err)
				}
				rows, err := Table(&got)
				if err != nil || len(rows) != 2 || rows[1].Loc != wantStart+4 || rows[1].CFA.Offset != 16 {
					t.Errorf("rows %v, %v", rows, err)
				}
				if app == dwarf.DW_EH_PE_textrel || app == dwarf.DW_EH_PE_datarel {
					// Without the base, a clear error.
					bare := NewEHFrame(s.b, ehSecAddr, le, 8)
					_, err := bare.FDEs()
					var fe *dwarf.FormatError
					if !errors.As(err, &fe) || fe.Source != ".eh_frame" {
						t.Errorf("no bases: err %v, want a FormatError", err)
					}
				}
			})
			n++
		}
	}
	if n != 40 {
		t.Fatalf("%d combinations", n)
	}
}

func TestPointerAlignedIndirect(t *testing.T) {
	// Personality: DW_EH_PE_aligned (an absolute pointer at the next
	// 8-byte boundary). FDE pointers: pcrel|sdata4|indirect, which needs a
	// memory reader.
	const slot = 0x50000 // where the indirect pc_begin points
	fdeEnc := dwarf.DW_EH_PE_indirect | dwarf.DW_EH_PE_absptr
	s, _, persOff, _ := buildEH(fdeEnc, dwarf.DW_EH_PE_aligned, dwarf.DW_EH_PE_udata4, slot, 0x7777, 0x99)
	if (ehSecAddr+persOff)%8 != 0 {
		t.Fatalf("aligned pointer at %#x", ehSecAddr+persOff)
	}
	sec := NewEHFrame(s.b, ehSecAddr, le, 8)
	if _, err := sec.FDEs(); err == nil {
		t.Fatal("indirect FDE pointer without a reader: no error")
	}
	sec.Indirect = mapMem{slot: 0x123000, slot + 8: 0}
	fdes, err := sec.FDEs()
	if err != nil {
		t.Fatal(err)
	}
	f := fdes[0]
	if f.Start != 0x123000 || f.CIE.Personality != 0x7777 || f.LSDA != 0x99 {
		t.Fatalf("start %#x personality %#x LSDA %#x", f.Start, f.CIE.Personality, f.LSDA)
	}
	// Indirect personality: with no reader, the slot address and a flag;
	// with one, the routine.
	persEnc := dwarf.DW_EH_PE_indirect | dwarf.DW_EH_PE_pcrel | dwarf.DW_EH_PE_sdata4
	s, _, persOff, _ = buildEH(dwarf.DW_EH_PE_udata8, persEnc, dwarf.DW_EH_PE_omit, 0x9000, 0x100, 0)
	sec = NewEHFrame(s.b, ehSecAddr, le, 8)
	cie, err := sec.CIEAt(0)
	if err != nil {
		t.Fatal(err)
	}
	slotAddr := ehSecAddr + persOff + 0x100
	if !cie.PersonalityIndirect || cie.Personality != slotAddr {
		t.Fatalf("personality %#x indirect %v, want slot %#x", cie.Personality, cie.PersonalityIndirect, slotAddr)
	}
	sec.Indirect = mapMem{slotAddr: 0xabcdef}
	cie, err = sec.CIEAt(0)
	if err != nil || cie.PersonalityIndirect || cie.Personality != 0xabcdef {
		t.Fatalf("personality %#x indirect %v err %v", cie.Personality, cie.PersonalityIndirect, err)
	}
	sec.Indirect = mapMem{}
	if _, err := sec.CIEAt(0); err == nil {
		t.Fatal("unreadable indirect personality: no error")
	}
}

func TestPointerEncodingErrors(t *testing.T) {
	for _, enc := range []dwarf.EHPE{0x05, 0x0d, 0x60, 0x70, 0x5b, dwarf.DW_EH_PE_omit} {
		s, _, _, _ := buildEH(dwarf.DW_EH_PE_udata4, dwarf.DW_EH_PE_udata4, dwarf.DW_EH_PE_omit, 0x1000, 0, 0)
		s.b[24] = byte(enc) // the FDE encoding byte: length 4, id 4, version, "zPLR", 3 uleb/bytes, length, P enc + 4 bytes, L enc
		sec := NewEHFrame(s.b, ehSecAddr, le, 8)
		_, err := sec.CIEAt(0)
		var fe *dwarf.FormatError
		if !errors.As(err, &fe) || fe.Field != "FDE pointer encoding" {
			t.Errorf("encoding %#x: err %v, want a FormatError on the FDE pointer encoding", uint8(enc), err)
		}
	}
}

// debugFrame64 builds a 64-bit DWARF .debug_frame with a version 4 CIE
// (address_size 4, segment_selector_size 2), a version 1 CIE with
// augmentation "S" (no z) and a version 3 CIE with a uleb128 return
// address register above 255, each with one FDE.
func debugFrame64() []byte {
	s := &sec{}
	entry64 := func(id uint64, body func()) uint64 {
		off := s.off()
		s.u32(0xffffffff)
		s.u64(0)
		s.u64(id)
		body()
		le.PutUint64(s.b[off+4:], s.off()-off-12)
		return off
	}
	const cieID = ^uint64(0)
	v4 := entry64(cieID, func() {
		s.u8(4)
		s.str("")
		s.u8(4, 2) // address_size, segment_selector_size
		s.uleb(4)
		s.sleb(-8)
		s.uleb(30)
		s.u8(byte(dwarf.DW_CFA_def_cfa), 31, 0)
	})
	entry64(v4, func() {
		s.u16(0xbeef) // segment selector
		s.u32(0x4000)
		s.u32(0x100)
		s.u8(byte(dwarf.DW_CFA_advance_loc)|1, byte(dwarf.DW_CFA_def_cfa_offset), 16)
	})
	v1 := entry64(cieID, func() {
		s.u8(1)
		s.str("S")
		s.uleb(1)
		s.sleb(-8)
		s.u8(16)
		s.u8(byte(dwarf.DW_CFA_def_cfa), 7, 8)
	})
	entry64(v1, func() {
		s.u64(0x5000)
		s.u64(0x10)
	})
	v3 := entry64(cieID, func() {
		s.u8(3)
		s.str("")
		s.uleb(1)
		s.sleb(-4)
		s.uleb(300)
		s.u8(byte(dwarf.DW_CFA_def_cfa), 7, 8)
	})
	entry64(v3, func() {
		s.u64(0x6000)
		s.u64(0x20)
	})
	return s.b
}

func TestDebugFrame64Versions(t *testing.T) {
	sec := NewDebugFrame(debugFrame64(), le, 8)
	fdes, err := sec.FDEs()
	if err != nil {
		t.Fatal(err)
	}
	if len(fdes) != 3 {
		t.Fatalf("%d FDEs", len(fdes))
	}
	for i, w := range []struct {
		ver, as, seg uint8
		start, size  uint64
		ra           uint16
		signal       bool
		align        uint64
	}{
		{4, 4, 2, 0x4000, 0x100, 30, false, 4},
		{1, 8, 0, 0x5000, 0x10, 16, true, 1},
		{3, 8, 0, 0x6000, 0x20, 300, false, 1},
	} {
		f := fdes[i]
		c := f.CIE
		if c.Format != dwarf.Format64 || c.Version != w.ver || c.AddrSize != w.as || c.SegmentSize != w.seg ||
			f.Start != w.start || f.Size != w.size || uint16(c.RA) != w.ra || c.Signal != w.signal || c.CodeAlign != w.align {
			t.Errorf("FDE %d: CIE %+v, FDE [%#x, +%#x)", i, c, f.Start, f.Size)
		}
	}
	rows, err := Table(&fdes[0])
	if err != nil || len(rows) != 2 || rows[1].Loc != 0x4004 || rows[1].CFA.Reg != 31 || rows[1].CFA.Offset != 16 {
		t.Fatalf("v4 rows %+v %v", rows, err)
	}
	// The same bytes in .eh_frame are not valid (CIE id 0 there, no 64-bit
	// CIE id, no version 4).
	if _, err := NewEHFrame(debugFrame64(), 0, le, 8).FDEs(); err == nil {
		t.Error("64-bit .debug_frame read as .eh_frame: no error")
	}
	// Version 4 is refused in .eh_frame.
	s, _, _, _ := buildEH(dwarf.DW_EH_PE_udata4, dwarf.DW_EH_PE_udata4, dwarf.DW_EH_PE_omit, 0x1000, 0, 0)
	s.b[8] = 4
	if _, err := NewEHFrame(s.b, ehSecAddr, le, 8).CIEAt(0); err == nil {
		t.Error(".eh_frame CIE version 4: no error")
	}
}

// allInsnsFDE is a 32-bit .debug_frame with a version 3 CIE (code
// alignment 2, data alignment -8) and one FDE at 0x1000 using every call
// frame instruction (DWARF 5 section 6.4.2 and the GNU extensions).
func allInsnsFDE() []byte {
	s := &sec{}
	cie := s.entry32(func(uint64) uint32 { return 0xffffffff }, func() {
		s.u8(3)
		s.str("")
		s.uleb(2)
		s.sleb(-8)
		s.uleb(16)
		s.u8(byte(dwarf.DW_CFA_def_cfa), 7, 8, byte(dwarf.DW_CFA_offset)|16, 1, byte(dwarf.DW_CFA_same_value), 3)
	})
	s.entry32(func(uint64) uint32 { return uint32(cie) }, func() {
		s.u64(0x1000)
		s.u64(0x200)
		op := func(c dwarf.CFA, b ...byte) { s.u8(byte(c)); s.u8(b...) }
		op(dwarf.DW_CFA_advance_loc | 1) // 0x1002
		op(dwarf.DW_CFA_def_cfa_offset, 16)
		op(dwarf.DW_CFA_offset|6, 2) // rbp c-16
		op(dwarf.DW_CFA_offset|16, 2)
		op(dwarf.DW_CFA_advance_loc1, 3) // 0x1008
		op(dwarf.DW_CFA_def_cfa_register, 6)
		op(dwarf.DW_CFA_offset_extended, 3, 3)               // rbx c-24
		op(dwarf.DW_CFA_restore | 16)                        // ra back to c-8
		op(dwarf.DW_CFA_advance_loc2, 2, 0)                  // 0x100c
		op(dwarf.DW_CFA_offset_extended_sf, 12, 0x7c)        // r12 -4*-8 = c+32
		op(dwarf.DW_CFA_GNU_negative_offset_extended, 13, 5) // r13 -(5*-8) = c+40
		op(dwarf.DW_CFA_advance_loc4, 1, 0, 0, 0)            // 0x100e
		op(dwarf.DW_CFA_remember_state)
		op(dwarf.DW_CFA_def_cfa_sf, 7, 0x7d)     // rsp -3*-8 = rsp+24
		op(dwarf.DW_CFA_val_offset, 14, 2)       // v-16
		op(dwarf.DW_CFA_val_offset_sf, 15, 0x7f) // v+8
		op(dwarf.DW_CFA_register, 12, 1)         // r12 in rdx
		op(dwarf.DW_CFA_undefined, 13)
		op(dwarf.DW_CFA_same_value, 3)
		op(dwarf.DW_CFA_MIPS_advance_loc8, 2, 0, 0, 0, 0, 0, 0, 0) // 0x1012
		op(dwarf.DW_CFA_restore_state)
		op(dwarf.DW_CFA_def_cfa_offset_sf, 0x7c) // -4*-8 = 32: rbp+32
		op(dwarf.DW_CFA_GNU_args_size, 16)
		op(dwarf.DW_CFA_GNU_window_save)
		op(dwarf.DW_CFA_set_loc, 0x20, 0x10, 0, 0, 0, 0, 0, 0) // 0x1020
		op(dwarf.DW_CFA_expression, 3, 2, byte(dwarf.DW_OP_breg0)+7, 8)
		op(dwarf.DW_CFA_val_expression, 6, 2, byte(dwarf.DW_OP_breg0)+7, 16)
		op(dwarf.DW_CFA_restore_extended, 3) // rbx back to the CIE's s
		op(dwarf.DW_CFA_advance_loc | 1)     // 0x1022
		op(dwarf.DW_CFA_def_cfa_expression, 3, byte(dwarf.DW_OP_breg0)+7, 8, byte(dwarf.DW_OP_deref))
		op(dwarf.DW_CFA_nop)
		op(dwarf.DW_CFA_nop)
	})
	return s.b
}

func TestAllInstructions(t *testing.T) {
	data := allInsnsFDE()
	sec := NewDebugFrame(data, le, 8)
	fdes, err := sec.FDEs()
	if err != nil {
		t.Fatal(err)
	}
	rows, err := Table(&fdes[0])
	if err != nil {
		t.Fatal(err)
	}
	type col struct {
		reg  uint16
		rule string
	}
	want := []struct {
		loc, end uint64
		cfa      string
		cols     []col
		args     uint64
		signed   bool
	}{
		{0x1000, 0x1002, "rsp+8", []col{{16, "c-8"}, {3, "s"}}, 0, false},
		{0x1002, 0x1008, "rsp+16", []col{{6, "c-16"}, {16, "c-16"}}, 0, false},
		{0x1008, 0x100c, "rbp+16", []col{{3, "c-24"}, {16, "c-8"}}, 0, false},
		{0x100c, 0x100e, "rbp+16", []col{{12, "c+32"}, {13, "c+40"}}, 0, false},
		{0x100e, 0x1012, "rsp+24", []col{{14, "v-16"}, {15, "v+8"}, {12, "rdx"}, {13, "u"}, {3, "s"}, {6, "c-16"}}, 0, false},
		{0x1012, 0x1020, "rbp+32", []col{{12, "c+32"}, {13, "c+40"}, {3, "c-24"}, {14, "u"}}, 16, true},
		{0x1020, 0x1022, "rbp+32", []col{{3, "s"}, {6, "vexp"}}, 16, true},
		{0x1022, 0x1200, "exp", []col{{6, "vexp"}}, 16, true},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for i, w := range want {
		r := &rows[i]
		if r.Loc != w.loc || r.End != w.end || r.CFA.Format(x86Name) != w.cfa || r.ArgsSize != w.args || r.RASigned != w.signed {
			t.Errorf("row %d: [%#x, %#x) CFA %s args %d signed %v, want [%#x, %#x) %s %d %v", i, r.Loc, r.End, r.CFA.Format(x86Name), r.ArgsSize, r.RASigned, w.loc, w.end, w.cfa, w.args, w.signed)
		}
		for _, c := range w.cols {
			if g := r.Rule(arch.Reg(c.reg)).Format(x86Name); g != c.rule {
				t.Errorf("row %d reg %d: %s, want %s", i, c.reg, g, c.rule)
			}
		}
	}
	if e := rows[5].Rule(arch.Reg(3)).Expr; e != nil {
		t.Errorf("stale expression %x", e)
	}
	// Expressions point into the section at the right bytes.
	if x := rows[7].CFA.Expr; len(x) != 3 || x[0] != byte(dwarf.DW_OP_breg0)+7 || x[2] != byte(dwarf.DW_OP_deref) {
		t.Errorf("CFA expression %x", x)
	}
	// RowAt agrees with Table at every address.
	var e Exec
	var row Row
	for i, w := range want {
		for pc := w.loc; pc < w.end && pc < w.loc+4; pc++ {
			if err := e.RowAt(&fdes[0], pc, &row); err != nil || row.Loc != rows[i].Loc || row.CFA.Format(x86Name) != w.cfa {
				t.Errorf("RowAt(%#x): loc %#x CFA %s %v", pc, row.Loc, row.CFA.Format(x86Name), err)
			}
		}
	}
	// Decoded instructions name their opcodes.
	ins, err := sec.DecodeInsns(nil, &fdes[0])
	if err != nil {
		t.Fatal(err)
	}
	seen := map[dwarf.CFA]bool{}
	for _, d := range ins {
		seen[d.Code] = true
	}
	for _, c := range []dwarf.CFA{dwarf.DW_CFA_MIPS_advance_loc8, dwarf.DW_CFA_GNU_window_save, dwarf.DW_CFA_set_loc,
		dwarf.DW_CFA_GNU_negative_offset_extended, dwarf.DW_CFA_val_offset_sf, dwarf.DW_CFA_def_cfa_expression} {
		if !seen[c] {
			t.Errorf("%v not decoded", c)
		}
	}

	// readelf agrees on every row and column.
	file := readelf.WriteELF(elf.EM_X86_64, []readelf.Section{{Name: ".debug_frame", Data: data}})
	text, _ := readelf.Run(t, file, "-W", "--debug-dump=frames-interp")
	entries, err := readelf.ParseFramesInterp(text)
	if err != nil {
		t.Fatal(err)
	}
	c := compareSectionWithReadelf(t, sec, entries, ".debug_frame")
	if c.fdes != 1 || c.rows != len(want)+1 {
		t.Errorf("compared %+v with readelf", c)
	}
}

func TestInstructionErrors(t *testing.T) {
	build := func(insns ...byte) *ParsedFDE {
		s := &sec{}
		cie := s.entry32(func(uint64) uint32 { return 0xffffffff }, func() {
			s.u8(1)
			s.str("")
			s.uleb(1)
			s.sleb(-8)
			s.u8(16)
			s.u8(byte(dwarf.DW_CFA_def_cfa), 7, 8)
		})
		s.entry32(func(uint64) uint32 { return uint32(cie) }, func() {
			s.u64(0x1000)
			s.u64(0x100)
			s.u8(insns...)
		})
		sec := NewDebugFrame(s.b, le, 8)
		f, err := sec.FDEAt(uint64(len(s.b)) - uint64(len(insns)) - 24)
		if err != nil {
			t.Fatal(err)
		}
		return &f
	}
	rep := func(b byte, n int) []byte {
		out := make([]byte, n)
		for i := range out {
			out[i] = b
		}
		return out
	}
	manyRegs := []byte{}
	for r := range MaxRowRegs + 1 {
		manyRegs = append(manyRegs, byte(dwarf.DW_CFA_same_value), byte(r+20))
	}
	for _, tc := range []struct {
		name  string
		insns []byte
		msg   string
	}{
		{"restore_state underflow", []byte{byte(dwarf.DW_CFA_restore_state)}, "without a remembered state"},
		{"remember_state overflow", rep(byte(dwarf.DW_CFA_remember_state), MaxStateStack+1), "remembered states"},
		{"too many registers", manyRegs, "registers"},
		{"unknown opcode", []byte{0x3f}, "unknown call frame instruction"},
		{"truncated operand", []byte{byte(dwarf.DW_CFA_advance_loc4), 1}, ""},
		{"set_loc backwards", []byte{byte(dwarf.DW_CFA_set_loc), 0, 0x0f, 0, 0, 0, 0, 0, 0}, "backwards"},
		{"advance overflow", []byte{byte(dwarf.DW_CFA_MIPS_advance_loc8), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, "overflows"},
	} {
		f := build(tc.insns...)
		_, err := Table(f)
		var fe *dwarf.FormatError
		if !errors.As(err, &fe) || fe.Source != ".debug_frame" || !strings.Contains(fe.Msg, tc.msg) {
			t.Errorf("%s: err %v, want a .debug_frame FormatError containing %q", tc.name, err, tc.msg)
		}
		var e Exec
		var row Row
		if err := e.RowAt(f, 0x10ff, &row); err == nil {
			t.Errorf("%s: RowAt: no error", tc.name)
		}
	}
}

// TestHdrWithoutTable: an .eh_frame_hdr whose table is omitted
// (fde_count_enc and table_enc DW_EH_PE_omit) makes the Finder scan
// .eh_frame, and still check coverage.
func TestHdrWithoutTable(t *testing.T) {
	cie := StandardCIE(arch.X86_64)
	fdes := []FDE{{Start: 0x10000, Size: 0x10}, {Start: 0x10040, Size: 0x20}}
	eh, offs, err := EncodeEHFrame(cie, fdes, 0x2000, dwarf.Default64)
	if err != nil {
		t.Fatal(err)
	}
	// version, eh_frame_ptr_enc pcrel|sdata4, fde_count_enc omit, table_enc omit, eh_frame_ptr.
	hdr := []byte{1, 0x1b, 0xff, 0xff}
	hdr = le.AppendUint32(hdr, uint32(0x2000-(0x1000+4)))
	fi, err := NewFinder(eh, 0x2000, hdr, 0x1000, le, 8)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Hdr.HasTable() || fi.Hdr.EHFramePtr != 0x2000 || fi.Hdr.TableEnc != dwarf.DW_EH_PE_omit {
		t.Fatalf("hdr %+v", fi.Hdr)
	}
	var got ParsedFDE
	for i, f := range fdes {
		if err := fi.FindFDE(f.Start+f.Size-1, &got); err != nil || got.Offset != offs[i] {
			t.Errorf("FindFDE(%#x): FDE %#x, %v", f.Start+f.Size-1, got.Offset, err)
		}
	}
	for _, pc := range []uint64{0x10010, 0x1003f, 0x10060} {
		if err := fi.FindFDE(pc, &got); !errors.Is(err, ErrNoFDE) {
			t.Errorf("FindFDE(%#x) in a gap: %v", pc, err)
		}
	}
	// A table entry that points at an FDE not covering the pc is a miss,
	// not that FDE.
	full, err := EncodeEHFrameHdr(0x1000, 0x2000, fdes, offs)
	if err != nil {
		t.Fatal(err)
	}
	fi, err = NewFinder(eh, 0x2000, full, 0x1000, le, 8)
	if err != nil {
		t.Fatal(err)
	}
	if err := fi.FindFDE(0x10030, &got); !errors.Is(err, ErrNoFDE) {
		t.Errorf("FindFDE past the first FDE's end: %v", err)
	}
}
