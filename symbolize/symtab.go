package symbolize

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/elfimage/elfimage/elfobj"
	"github.com/elfimage/elfimage/internal/radix"
)

// symbol is one function or data symbol of the symbol table; its name is
// names[name : name+nameLen] of its symtab. It holds no pointers, so that
// sorting is cheap.
type symbol struct {
	size          uint64
	name, nameLen uint32
	// file, fileLen is the name of the STT_FILE symbol before a local
	// symbol in table order (the source file it came from; gABI: a file
	// symbol precedes the file's other local symbols), in the same
	// string table; fileLen 0 for none.
	file, fileLen uint32
}

// symtab is the symbol table, as llvm-symbolizer uses it: STT_NOTYPE,
// STT_FUNC, STT_OBJECT and STT_GNU_IFUNC symbols of a defined section, from .symtab,
// or from .dynsym when there is no .symtab, but for the STT_NOTYPE
// symbols that mark code rather than name it (isMarker: Arm and AArch64
// mapping symbols, RISC-V's unnamed and .L labels); of several symbols at one
// address the one with the largest size is kept (the last in table order
// among equal sizes). The first lookups scan the table; after scanLimit
// of them it is sorted once and later lookups bisect.
type symtab struct {
	f       *elfFile
	tab     *elfobj.SymbolTable // decodes the entries of data
	data    []byte              // the raw table
	entsize uint64
	strs    []byte // the string table, in place (mapped)
	names   string // a copy of strs made by sort, so that sorted lookups' names cost nothing

	scans  atomic.Int32
	once   sync.Once
	addrs  []uint64    // sorted; syms[order[i]] is at addrs[i]
	order  []uint64    // parallel to addrs
	syms   []symbol    // the kept symbols, in table order
	index  bucketIndex // over addrs
	sorted atomic.Bool

	// opd is the .opd section of a big-endian PowerPC64 file (ELFv1
	// function descriptors), at opdAddr; nil for others.
	opd     []byte
	opdAddr uint64

	// slab, when set, holds sort's arrays (see slab); nil: the heap.
	slab *slab
}

const scanLimit = 32

// readSymtab finds the symbol table (gABI "Symbol Table"), .symtab, else
// .dynsym, and its string table. Neither is copied: the first lookups scan
// the table in place and copy the one name they return; sort copies the
// string table once. Errors are elfobj's (a table whose size is not a
// multiple of the entry size, a bad string table link).
func readSymtab(f *elfFile) (*symtab, error) {
	i := f.obj.FindSectionType(elf.SHT_SYMTAB)
	if i < 0 {
		i = f.obj.FindSectionType(elf.SHT_DYNSYM)
	}
	t := &symtab{f: f, entsize: uint64(f.obj.SymSize())}
	if i < 0 {
		t.table()
		return t, nil
	}
	tab, err := f.obj.Symbols(i)
	if err != nil {
		return nil, err
	}
	t.tab, t.strs = tab, tab.Strings()
	if o := f.obj.FindSection(".opd"); o >= 0 && f.obj.Machine == elf.EM_PPC64 && f.obj.Data == elf.ELFDATA2MSB && f.obj.Sections[o].Type != elf.SHT_NOBITS {
		if t.opd, err = f.obj.SectionData(o); err != nil {
			return nil, err
		}
		t.opdAddr = f.obj.Sections[o].Addr
	}
	return t, nil
}

// table returns the decoder of the entries, made from data and strs for a
// symtab built without a file. It is set before the symtab is shared.
func (t *symtab) table() *elfobj.SymbolTable {
	if t.tab == nil {
		class := elf.ELFCLASS32
		if t.f.class64 {
			class = elf.ELFCLASS64
		}
		t.tab, _ = elfobj.NewSymbolTable(class, elf.ELFDATA2LSB, ".symtab", t.data[:uint64(len(t.data))/t.entsize*t.entsize], t.strs)
	}
	return t.tab
}

// entry decodes symbol i; ok is false for symbols llvm-symbolizer skips.
func (t *symtab) entry(i uint64) (addr uint64, sym symbol, ok bool) {
	addr, size, name, ok := t.raw(i)
	if !ok {
		return 0, sym, false
	}
	sym.size = size
	sym.name, sym.nameLen = t.str(name)
	return addr, sym, true
}

// str returns the string at off of the string table as an offset and a
// length; 0, 0 when off is outside the table.
func (t *symtab) str(off uint32) (uint32, uint32) {
	if uint64(off) >= uint64(len(t.strs)) {
		return 0, 0
	}
	rest := t.strs[off:]
	n := bytes.IndexByte(rest, 0)
	if n < 0 {
		n = len(rest)
	}
	return off, uint32(n)
}

// fileOf sets sym's file to the name of the last STT_FILE symbol before
// symbol i, when i is local, as LLVM's SymbolizableObjectFile finds the
// file of a local symbol, searching the table backwards from i (the
// sort finds the files on its way through the table instead).
func (t *symtab) fileOf(i uint64, sym *symbol) {
	if t.tab.Sym(int(i)).Bind() != elf.STB_LOCAL {
		return
	}
	f := i - 1
	for ; f > 0 && t.tab.Sym(int(f)).Type() != elf.STT_FILE; f-- {
	}
	if f == 0 {
		return
	}
	sym.file, sym.fileLen = t.str(t.tab.Sym(int(f)).Name)
}

// isMarker reports whether an STT_NOTYPE symbol named name marks code or
// data rather than naming it, as LLVM's ELFObjectFile::getSymbolFlags
// marks it SF_FormatSpecific and its symbolizer leaves it out: the
// mapping symbols of Arm ($a, $d, $t and their $a.N forms) and AArch64
// ($d, $x; "ELF for the Arm Architecture", section "Mapping symbols"),
// and on RISC-V the unnamed labels assemblers emit for label differences
// and the .L local labels kept for linker relaxation.
func isMarker(m elf.Machine, name []byte) bool {
	switch m {
	case elf.EM_ARM:
		return bytes.HasPrefix(name, []byte("$a")) || bytes.HasPrefix(name, []byte("$d")) || bytes.HasPrefix(name, []byte("$t"))
	case elf.EM_AARCH64:
		return bytes.HasPrefix(name, []byte("$d")) || bytes.HasPrefix(name, []byte("$x"))
	case elf.EM_RISCV:
		return len(name) == 0 || bytes.HasPrefix(name, []byte(".L"))
	}
	return false
}

// raw decodes symbol i without its name.
func (t *symtab) raw(i uint64) (addr, size uint64, name uint32, ok bool) {
	return t.rawSym(i, t.tab.Sym(int(i)))
}

// rawSym is raw for symbol i, decoded as s.
func (t *symtab) rawSym(i uint64, s elfobj.Sym) (addr, size uint64, name uint32, ok bool) {
	switch s.Type() {
	case elf.STT_NOTYPE, elf.STT_OBJECT, elf.STT_FUNC, elf.STT_GNU_IFUNC:
	default:
		return 0, 0, 0, false
	}
	if s.Section == elf.SHN_UNDEF || (s.Section >= elf.SHN_LORESERVE && s.Section != elf.SHN_XINDEX) {
		return 0, 0, 0, false // undefined, absolute or common: no section
	}
	if s.Type() == elf.STT_NOTYPE && t.f != nil && t.f.obj != nil {
		if m := t.f.obj.Machine; m == elf.EM_ARM || m == elf.EM_AARCH64 || m == elf.EM_RISCV {
			off, n := t.str(s.Name)
			if isMarker(m, t.strs[off:off+n]) {
				return 0, 0, 0, false
			}
		}
	}
	if t.f != nil && t.f.obj != nil && t.f.obj.Type == elf.ET_REL {
		// An object's st_value is an offset in its section.
		if sec, ok := t.tab.SectionOf(int(i)); ok && sec < len(t.f.obj.Sections) {
			return s.Value + t.f.obj.Sections[sec].Addr, s.Size, s.Name, true
		}
		return 0, 0, 0, false
	}
	if off := s.Value - t.opdAddr; t.opd != nil && s.Value >= t.opdAddr && off < uint64(len(t.opd)) && uint64(len(t.opd))-off >= 8 {
		// A big-endian PowerPC64 function symbol is the address of its
		// descriptor in .opd, whose first word is the code's address
		// (64-bit PowerPC ELF ABI 1.9, section 3.2.5): named by that,
		// as llvm-symbolizer does. In a position-independent file the
		// word is 0, filled in by a dynamic relocation: the symbol then
		// stays at its descriptor (llvm-symbolizer moves it to 0).
		if code := binary.BigEndian.Uint64(t.opd[off:]); code != 0 {
			return code, s.Size, s.Name, true
		}
	}
	return s.Value, s.Size, s.Name, true
}

func (t *symtab) count() uint64 { return uint64(t.table().Len()) }

// packedSortBits is the width of the packed sort keys of symtab.sort and
// flattenSubrs (a variable so that tests can force the unpacked paths).
var packedSortBits = 64

// sort builds the sorted arrays and their bucket index. Symbols are
// ordered by address, then table order; when address offsets and symbol
// positions fit together in 64 bits (they do in any real file) the keys are
// packed into one uint64 each and sorted as integers, which is several
// times faster than comparing pairs. The table is decoded once, in table
// order: each kept symbol's size, name and source file (the last STT_FILE
// symbol before it, for a local one) go to a candidate array whose
// position the sort key carries; the sorted order refers to that array
// instead of copying it, so that picking in address order neither decodes
// the table and its strings again at random nor writes a second array of
// symbols to fresh pages. On the packed path the order overwrites the
// sorted keys as they are read and the addresses go to the radix sort's
// scratch, pages the sort has already touched. Cost: O(n log n), four
// allocations.
func (t *symtab) sort() {
	n := t.count()
	idxBits := bits.Len64(n)
	lo, hi := ^uint64(0), uint64(0)
	// Keys of the packed sort made on the way, the address not yet
	// offset by lo: abs stays true while every address fits so.
	keys := slabMake[uint64](t.slab, int(n))[:0]
	cands := slabMake[symbol](t.slab, int(n))[:0]
	abs := true
	var file, fileLen uint32
	for i := uint64(1); i < n; i++ {
		s := t.tab.Sym(int(i))
		if a, size, name, ok := t.rawSym(i, s); ok {
			lo, hi = min(lo, a), max(hi, a)
			if abs = abs && bits.Len64(a)+idxBits <= 64; abs {
				keys = append(keys, a<<idxBits|uint64(len(cands)))
			}
			c := symbol{size: size}
			c.name, c.nameLen = t.str(name)
			if s.Bind() == elf.STB_LOCAL {
				c.file, c.fileLen = file, fileLen
			}
			cands = append(cands, c)
		} else if s.Type() == elf.STT_FILE {
			file, fileLen = t.str(s.Name)
		}
	}
	m := len(cands)
	// Of the symbols at one address keep the largest, the last in table
	// order among equal sizes: pick is called for the symbols in order of
	// address, then table order. Built in locals and published at the
	// end: a fault on the mapped table leaves the symtab unsorted (lookups
	// then scan, and fault again, which Symbolize reports).
	names := string(t.strs)
	var addrs, order []uint64
	pick := func(j, addr uint64) {
		if k := len(addrs) - 1; k >= 0 && addrs[k] == addr {
			if cands[j].size >= cands[order[k]].size {
				order[k] = j
			}
			return
		}
		addrs = append(addrs, addr)
		order = append(order, j)
	}
	if m > 0 && bits.Len64(hi-lo)+idxBits <= packedSortBits {
		packed := keys
		if abs {
			for j := range packed {
				packed[j] -= lo << idxBits
			}
		} else {
			packed = packed[:0]
			for i := uint64(1); i < n; i++ {
				if a, _, _, ok := t.raw(i); ok {
					packed = append(packed, (a-lo)<<idxBits|uint64(len(packed)))
				}
			}
		}
		var tmp []uint64
		if len(packed) >= 256 { // radix.Sort's scratch, which shorter inputs do not use
			tmp = slabMake[uint64](t.slab, len(packed))[:0]
		}
		packed, scratch := radix.Sort(packed, tmp, bits.Len64(hi-lo)+idxBits)
		if cap(scratch) >= m {
			addrs = scratch[:0]
		} else {
			addrs = make([]uint64, 0, m)
		}
		// order[k] is written after packed[k] is read (k only lags).
		order = packed[:0]
		for _, k := range packed {
			pick(k&(1<<idxBits-1), k>>idxBits+lo)
		}
	} else {
		type sym struct{ idx, addr uint64 }
		sorted := make([]sym, 0, m)
		for i := uint64(1); i < n; i++ {
			if a, _, _, ok := t.raw(i); ok {
				sorted = append(sorted, sym{uint64(len(sorted)), a})
			}
		}
		slices.SortFunc(sorted, func(a, b sym) int {
			if a.addr != b.addr {
				return cmp(a.addr, b.addr)
			}
			return cmp(a.idx, b.idx)
		})
		addrs, order = make([]uint64, 0, m), make([]uint64, 0, m)
		for _, o := range sorted {
			pick(o.idx, o.addr)
		}
	}
	t.names, t.addrs, t.order, t.syms, t.index = names, addrs, order, cands, newBucketIndexIn(t.slab, addrs)
	t.sorted.Store(true)
}

// sym returns the symbol at addrs[i] of a sorted symtab.
func (t *symtab) sym(i int) *symbol { return &t.syms[t.order[i]] }

func cmp(a, b uint64) int {
	if a < b {
		return -1
	}
	if a > b {
		return 1
	}
	return 0
}

// lookup returns the name of the symbol that covers addr: the last one at
// or before addr, if its size reaches addr or its size is 0 (which
// llvm-symbolizer takes as reaching the next symbol), and, for a local
// symbol, the name of the STT_FILE symbol before it ("" for none). Cost: a
// linear scan for the first scanLimit calls, then a bucket-index lookup;
// no allocation.
func (t *symtab) lookup(addr uint64) (name, file string, ok bool) {
	if !t.sorted.Load() {
		if t.scans.Add(1) <= scanLimit {
			return t.scan(addr)
		}
		t.once.Do(t.sort)
		if !t.sorted.Load() {
			return t.scan(addr) // the sort faulted
		}
	}
	i := t.index.last(t.addrs, addr)
	if i < 0 {
		return "", "", false
	}
	s := t.sym(i)
	if !covers(t.addrs[i], s, addr) {
		return "", "", false
	}
	return t.names[s.name : s.name+s.nameLen], t.names[s.file : s.file+s.fileLen], true
}

// covers reports whether symbol s at address at covers addr.
func covers(at uint64, s *symbol, addr uint64) bool {
	return s.size == 0 || addr-at < s.size
}

// scan is lookup by a pass over the table; the name is copied out of the
// string table.
func (t *symtab) scan(addr uint64) (name, file string, ok bool) {
	var bestAt, bestSize uint64
	best := uint64(0)
	for i, n := uint64(1), t.count(); i < n; i++ {
		a, size, _, ok := t.raw(i)
		if !ok || a > addr {
			continue
		}
		if best == 0 || a > bestAt || (a == bestAt && size >= bestSize) {
			best, bestAt, bestSize = i, a, size
		}
	}
	if best == 0 {
		return "", "", false
	}
	_, s, _ := t.entry(best)
	if !covers(bestAt, &s, addr) {
		return "", "", false
	}
	t.fileOf(best, &s)
	return string(t.strs[s.name : s.name+s.nameLen]), string(t.strs[s.file : s.file+s.fileLen]), true
}

// empty reports whether the file has no symbol table, or one with no
// entry but the null symbol.
func (t *symtab) empty() bool { return t.count() <= 1 }
