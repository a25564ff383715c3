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
	addrs  []uint64    // sorted; syms[i] is at addrs[i]
	syms   []symbol    // the kept symbols, in address order (parallel to addrs)
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

// symtabFastDecode is false to make symtab.sort decode every table with
// decodeAny (for the tests).
var symtabFastDecode = true

// sort builds the sorted arrays and their bucket index. Symbols are
// ordered by address, then table order; when address offsets and symbol
// positions fit together in 64 bits (they do in any real file) the keys are
// packed into one uint64 each, the position below the address, and sorted
// as integers, which is several times faster than comparing pairs: as
// they are made in table order, only their address bits need sorting
// (radix.SortHigh). The table is decoded once, in table order (decodeLE64
// for the usual Elf64_Sym little-endian table, decodeAny for others):
// each kept symbol's size, name and source file (the last STT_FILE symbol
// before it, for a local one) go to a candidate array whose position the
// sort key carries, so that picking in address order does not decode the
// table and its strings again at random. On the packed path the picks'
// positions (order) overwrite the sorted keys as they are read and the
// addresses go to the radix sort's scratch, pages the sort has already
// touched; the bucket index is filled on the way (picker). The kept
// candidates are then moved into address order in their own array
// (gather), so that lookups of ascending addresses read neighbouring
// records, without a second array on fresh pages. Cost: O(n) on the
// packed path (O(n log n) on the other); seven allocations, four of them
// in the slab when there is one.
func (t *symtab) sort() {
	n := t.count()
	idxBits := bits.Len64(n)
	keys := slabMake[uint64](t.slab, int(n))[:0]
	cands := slabMake[symbol](t.slab, int(n))[:0]
	var lo, hi uint64
	var abs bool
	if symtabFastDecode && t.tab.Is64() && !t.tab.BigEndian() && t.opd == nil && (t.f == nil || t.f.obj == nil || t.f.obj.Type != elf.ET_REL) {
		keys, cands, lo, hi = t.decodeLE64(keys, cands, idxBits)
		abs = bits.Len64(hi)+idxBits <= 64
	} else {
		keys, cands, lo, hi, abs = t.decodeAny(keys, cands, idxBits)
	}
	m := len(cands)
	// Of the symbols at one address keep the largest, the last in table
	// order among equal sizes: the picker is given the symbols in order
	// of address, then table order. Built in locals and published at the
	// end: a fault on the mapped table leaves the symtab unsorted (lookups
	// then scan, and fault again, which Symbolize reports).
	names := string(t.strs)
	var p picker
	if m > 0 && bits.Len64(hi-lo)+idxBits <= packedSortBits {
		packed, base := keys, uint64(0)
		if !abs {
			// An address too high to pack as it is: offsets from lo.
			packed, base = packed[:0], lo
			for i := uint64(1); i < n; i++ {
				if a, _, _, ok := t.raw(i); ok {
					packed = append(packed, (a-lo)<<idxBits|uint64(len(packed)))
				}
			}
		}
		var tmp []uint64
		if len(packed) >= 256 { // radix.SortHigh's scratch, which shorter inputs do not use
			tmp = slabMake[uint64](t.slab, len(packed))[:0]
		}
		// Every address in [lo, hi] shares the bits above those of
		// (hi-base)^(lo-base): only the bits below are sorted.
		packed, scratch := radix.SortHigh(packed, tmp, idxBits, idxBits+bits.Len64((hi-base)^(lo-base)))
		addrs := scratch[:0]
		if cap(scratch) < m {
			addrs = make([]uint64, 0, m)
		}
		// order[k] is written after packed[k] is read (k only lags).
		p.start(t.slab, cands, addrs, packed[:0], lo, hi)
		p.addPacked(packed, idxBits, base)
	} else if m > 0 {
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
		p.start(t.slab, cands, make([]uint64, 0, m), make([]uint64, 0, m), lo, hi)
		for _, o := range sorted {
			p.add(o.idx, o.addr)
		}
	}
	// The kept symbols laid out in address order, over the candidates
	// (a sorted batch then reads neighbouring records).
	gather(cands, p.order)
	t.names, t.addrs, t.syms, t.index = names, p.addrs, cands[:len(p.addrs)], p.done()
	t.sorted.Store(true)
}

// gather sets cands[i] to what cands[order[i]] was, for every i below
// len(order), in place: order holds distinct positions of cands (len(order)
// <= len(cands)) and is overwritten. The moves follow order's chains: i
// takes from order[i], which takes from order[order[i]] and so on, a
// chain that ends at a position past len(order) (whose candidate was not
// kept) or comes back to i (a cycle, closed with the candidate first
// moved out of it); a chain is walked from its start, a position below
// len(order) that no entry names, so that every candidate is read before
// its place is written. Cost: O(len(cands)) time, a bit per candidate of
// heap; each candidate moved at most once.
func gather(cands []symbol, order []uint64) {
	const done = ^uint64(0)
	m := len(order)
	var named []uint64
	if m < len(cands) { // else order is a permutation: cycles alone
		named = make([]uint64, (len(cands)+63)/64)
		for _, j := range order {
			named[j>>6] |= 1 << (j & 63)
		}
	}
	// The chains' starts: the positions below m missing from named, a
	// word of it at a time.
	for w, bitsNamed := range named[:min(len(named), (m+63)/64)] {
		free := ^bitsNamed
		if rest := m - 64*w; rest < 64 {
			free &= 1<<rest - 1
		}
		for ; free != 0; free &= free - 1 {
			for i := 64*w + bits.TrailingZeros64(free); i < m; {
				j := order[i]
				cands[i], order[i] = cands[j], done
				i = int(j)
			}
		}
	}
	for s := 0; s < m; s++ {
		if order[s] == done || order[s] == uint64(s) {
			continue
		}
		first := cands[s]
		for i := s; ; {
			j := order[i]
			order[i] = done
			if j == uint64(s) {
				cands[i] = first
				break
			}
			cands[i] = cands[j]
			i = int(j)
		}
	}
}

// decodeLE64 is sort's pass over a table of little-endian Elf64_Sym
// entries (gABI "Symbol Table") in a file that is not relocatable and has
// no PowerPC function descriptors: it keeps the symbols rawSym keeps, in
// table order, appending each one's candidate to cands and its key,
// address<<idxBits | position in cands, to keys (an address too high for
// that gives a key of no use, which sort then makes again: hi tells), and
// returns the lowest and highest address kept. keys and cands have room
// for every entry. The entries are read in place without decoding them
// whole, and a name's length is found in the word at its start when it is
// that short.
func (t *symtab) decodeLE64(keys []uint64, cands []symbol, idxBits int) (_ []uint64, _ []symbol, lo, hi uint64) {
	le := binary.LittleEndian
	data, strs := t.tab.Bytes(), t.strs
	var m elf.Machine
	if t.f != nil && t.f.obj != nil {
		m = t.f.obj.Machine
	}
	marks := m == elf.EM_ARM || m == elf.EM_AARCH64 || m == elf.EM_RISCV
	lo = ^uint64(0)
	var file, fileLen uint32
	const kept = 1<<elf.STT_NOTYPE | 1<<elf.STT_OBJECT | 1<<elf.STT_FUNC | 1<<elf.STT_GNU_IFUNC
	n := len(data) / 24
	keys, cands = keys[:min(n, cap(keys))], cands[:min(n, cap(cands))]
	j := 0
	for rest := data[min(24, len(data)):]; len(rest) >= 24; rest = rest[24:] {
		e := rest[:24:24]
		info := e[4]
		if typ := elf.SymType(info & 0xf); kept>>typ&1 == 0 {
			if typ == elf.STT_FILE {
				file, fileLen = t.str(le.Uint32(e))
			}
			continue
		}
		// Undefined, absolute or common: no section (SHN_XINDEX names
		// one in the extended table).
		if sec := elf.SectionIndex(le.Uint16(e[6:])); sec == elf.SHN_UNDEF || (sec >= elf.SHN_LORESERVE && sec != elf.SHN_XINDEX) {
			continue
		}
		// The name's length: the first zero byte of the little-endian
		// word w at its start is the lowest set bit of
		// (w-0x01…01) &^ w & 0x80…80 (no borrow reaches the bytes
		// below it); a longer name, or one near the table's end, by str.
		name := le.Uint32(e)
		var nameLen uint32
		if uint64(name)+8 <= uint64(len(strs)) {
			w := le.Uint64(strs[name:])
			if z := (w - 0x0101010101010101) &^ w & 0x8080808080808080; z != 0 {
				nameLen = uint32(bits.TrailingZeros64(z) >> 3)
			} else {
				name, nameLen = t.str(name)
			}
		} else {
			name, nameLen = t.str(name)
		}
		if marks && info&0xf == byte(elf.STT_NOTYPE) && isMarker(m, strs[name:name+nameLen]) {
			continue
		}
		a := le.Uint64(e[8:])
		lo, hi = min(lo, a), max(hi, a)
		keys[j] = a<<(idxBits&63) | uint64(j)
		c := &cands[j]
		c.size, c.name, c.nameLen = le.Uint64(e[16:]), name, nameLen
		if info>>4 == byte(elf.STB_LOCAL) {
			c.file, c.fileLen = file, fileLen
		}
		j++
	}
	return keys[:j], cands[:j], lo, hi
}

// decodeAny is decodeLE64 for any table, entries decoded by t.tab and
// kept by rawSym; abs is false when an address is too high for its key.
func (t *symtab) decodeAny(keys []uint64, cands []symbol, idxBits int) (_ []uint64, _ []symbol, lo, hi uint64, abs bool) {
	lo, abs = ^uint64(0), true
	var file, fileLen uint32
	for i, n := uint64(1), t.count(); i < n; i++ {
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
	return keys, cands, lo, hi, abs
}

// picker keeps, of the candidates given in order of address then table
// order, the one at each address that lookup answers with (the largest,
// the last in table order among equal sizes), in addrs and order, and
// builds the bucket index over addrs on the way: the index of
// newBucketIndex, but for its bucket size, chosen from the number of
// candidates (at least the addresses kept) before they are known.
type picker struct {
	cands        []symbol
	addrs, order []uint64
	x            bucketIndex
	next         int // the first bucket of x not filled yet
}

// start readies p for candidates at addresses in [lo, hi]; addrs and
// order are empty, with room for every candidate.
func (p *picker) start(sl *slab, cands []symbol, addrs, order []uint64, lo, hi uint64) {
	p.cands, p.addrs, p.order = cands, addrs, order
	n := len(cands)
	if n < minBucketKeys || n >= 1<<31-1 {
		return
	}
	p.x.base = lo
	span := hi - lo
	for span>>p.x.shift >= uint64(n) {
		p.x.shift++
	}
	p.x.b = slabMake[int32](sl, int(span>>p.x.shift)+2) // the last key's bucket, and one past it
}

// add gives p candidate j at addr, at or after the previous one's.
func (p *picker) add(j, addr uint64) {
	k := len(p.addrs) - 1
	if k >= 0 && p.addrs[k] == addr {
		if p.cands[j].size >= p.cands[p.order[k]].size {
			p.order[k] = j
		}
		return
	}
	if p.x.b != nil && addr > p.x.base {
		// The buckets that start before addr end at the address kept
		// last (their entry: the last at or before their start).
		end := min(int((addr-p.x.base-1)>>p.x.shift)+1, len(p.x.b)-1)
		for ; p.next < end; p.next++ {
			p.x.b[p.next] = int32(k)
		}
	}
	p.addrs = append(p.addrs, addr)
	p.order = append(p.order, j)
}

// addPacked is add for each of the sorted packed keys, candidate
// k&(1<<idxBits-1) at k>>idxBits + base, with p's state in locals (the
// loop of a large table); order may be keys' own array (it is written
// behind the keys read).
func (p *picker) addPacked(keys []uint64, idxBits int, base uint64) {
	cands, addrs, order := p.cands, p.addrs[:cap(p.addrs)], p.order[:cap(p.order)]
	mask := uint64(1)<<idxBits - 1
	kept := 0
	for _, k := range keys {
		j, a := k&mask, k>>(idxBits&63)+base
		if kept > 0 && addrs[kept-1] == a {
			if cands[j].size >= cands[order[kept-1]].size {
				order[kept-1] = j
			}
			continue
		}
		addrs[kept], order[kept] = a, j
		kept++
	}
	p.addrs, p.order = addrs[:kept], order[:kept]
	// The bucket index, in a loop of its own (fewer values live): as in
	// add, the buckets that start before addrs[i] end at addrs[i-1].
	b, next, shift, x0 := p.x.b, p.next, p.x.shift&63, p.x.base
	if b == nil {
		return
	}
	for i, a := range p.addrs {
		if a > x0 {
			end := min(int((a-x0-1)>>shift)+1, len(b)-1)
			for ; next < end; next++ {
				b[next] = int32(i - 1)
			}
		}
	}
	p.next = next
}

// done returns the bucket index over the addresses kept (none for fewer
// than minBucketKeys).
func (p *picker) done() bucketIndex {
	if len(p.addrs) < minBucketKeys {
		return bucketIndex{}
	}
	for ; p.next < len(p.x.b); p.next++ {
		p.x.b[p.next] = int32(len(p.addrs) - 1)
	}
	return p.x
}

// sym returns the symbol at addrs[i] of a sorted symtab.
func (t *symtab) sym(i int) *symbol { return &t.syms[i] }

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
