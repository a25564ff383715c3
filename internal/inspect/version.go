package inspect

import (
	"debug/elf"
	"fmt"

	"github.com/elfimage/elfimage/elfobj"
)

// versions returns the version suffix readelf -s prints after each of n
// .dynsym entries ("@@VER" for a defined default version, "@VER" for a
// hidden one, "@VER (IDX)" for a needed one), from .gnu.version,
// .gnu.version_d and .gnu.version_r (the GNU symbol versioning of the
// LSB, "Symbol Versioning"). A malformed or missing table gives no
// versions: they are an annotation, not the symbol.
func versions(f *elfobj.File, n int, nameOf func(int) string) []string {
	vs := f.FindSectionType(elf.SHT_GNU_VERSYM)
	if vs < 0 {
		return nil
	}
	sym, err := f.SectionData(vs)
	if err != nil {
		return nil
	}
	bo := f.ByteOrder
	names := map[uint16]string{}
	needed := map[uint16]bool{}
	strs := func(i int) []byte {
		l := int(f.Sections[i].Link)
		if l <= 0 || l >= len(f.Sections) {
			return nil
		}
		b, _ := f.SectionData(l)
		return b
	}
	cstr := func(b []byte, off uint32) string {
		if uint64(off) >= uint64(len(b)) {
			return ""
		}
		b = b[off:]
		for i, c := range b {
			if c == 0 {
				return string(b[:i])
			}
		}
		return string(b)
	}
	if i := f.FindSectionType(elf.SHT_GNU_VERDEF); i >= 0 {
		if b, err := f.SectionData(i); err == nil {
			st := strs(i)
			off := uint64(0)
			for k := 0; k < 1<<16 && off+20 <= uint64(len(b)); k++ {
				ndx := bo.Uint16(b[off+4:])
				aux := uint64(bo.Uint32(b[off+12:]))
				if a := off + aux; aux != 0 && a+8 <= uint64(len(b)) {
					names[ndx] = cstr(st, bo.Uint32(b[a:]))
				}
				next := uint64(bo.Uint32(b[off+16:]))
				if next == 0 {
					break
				}
				off += next
			}
		}
	}
	if i := f.FindSectionType(elf.SHT_GNU_VERNEED); i >= 0 {
		if b, err := f.SectionData(i); err == nil {
			st := strs(i)
			off := uint64(0)
			for k := 0; k < 1<<16 && off+16 <= uint64(len(b)); k++ {
				cnt := bo.Uint16(b[off+2:])
				a := off + uint64(bo.Uint32(b[off+8:]))
				for j := 0; j < int(cnt) && a+16 <= uint64(len(b)); j++ {
					other := bo.Uint16(b[a+6:])
					names[other] = cstr(st, bo.Uint32(b[a+8:]))
					needed[other] = true
					next := uint64(bo.Uint32(b[a+12:]))
					if next == 0 {
						break
					}
					a += next
				}
				next := uint64(bo.Uint32(b[off+12:]))
				if next == 0 {
					break
				}
				off += next
			}
		}
	}
	out := make([]string, min(n, len(sym)/2))
	for i := range out {
		v := bo.Uint16(sym[2*i:])
		idx := v & 0x7fff
		if idx < 2 { // VER_NDX_LOCAL, VER_NDX_GLOBAL
			continue
		}
		name, ok := names[idx]
		if !ok || !needed[idx] && name == nameOf(i) {
			// readelf prints no version after a version's own symbol.
			continue
		}
		switch {
		case needed[idx]:
			out[i] = fmt.Sprintf("@%s (%d)", name, idx)
		case v&0x8000 != 0:
			out[i] = "@" + name
		default:
			out[i] = "@@" + name
		}
	}
	return out
}
