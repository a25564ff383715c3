package symbolize

import (
	"bytes"
	"debug/elf"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/elfimage/elfimage/elfobj"
)

// symbol is one function or data symbol of the symbol table; its name is
// names[name : name+nameLen] of its symtab. It holds no pointers, so that
// sorting is cheap.
type symbol struct {
	size          uint64
	name, nameLen uint32
}

// symtab is the symbol table, as llvm-symbolizer uses it: STT_NOTYPE,
// STT_FUNC, STT_OBJECT and STT_GNU_IFUNC symbols of a defined section, from .symtab,
// or from .dynsym when there is no .symtab; of several symbols at one
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
	addrs  []uint64 // sorted; syms[i] is at addrs[i]
	syms   []symbol
	index  bucketIndex // over addrs
	sorted atomic.Bool
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
	if uint64(name) < uint64(len(t.strs)) {
		rest := t.strs[name:]
		n := bytes.IndexByte(rest, 0)
		if n < 0 {
			n = len(rest)
		}
		sym.name, sym.nameLen = name, uint32(n)
	}
	return addr, sym, true
}

// raw decodes symbol i without its name.
func (t *symtab) raw(i uint64) (addr, size uint64, name uint32, ok bool) {
	s := t.tab.Sym(int(i))
	switch s.Type() {
	case elf.STT_NOTYPE, elf.STT_OBJECT, elf.STT_FUNC, elf.STT_GNU_IFUNC:
	default:
		return 0, 0, 0, false
	}
	if s.Section == elf.SHN_UNDEF || (s.Section >= elf.SHN_LORESERVE && s.Section != elf.SHN_XINDEX) {
		return 0, 0, 0, false // undefined, absolute or common: no section
	}
	if t.f != nil && t.f.obj != nil && t.f.obj.Type == elf.ET_REL {
		// An object's st_value is an offset in its section.
		if sec, ok := t.tab.SectionOf(int(i)); ok && sec < len(t.f.obj.Sections) {
			return s.Value + t.f.obj.Sections[sec].Addr, s.Size, s.Name, true
		}
		return 0, 0, 0, false
	}
	return s.Value, s.Size, s.Name, true
}

func (t *symtab) count() uint64 { return uint64(t.table().Len()) }

// packedSortBits is the width of the packed sort keys of symtab.sort and
// flattenSubrs (a variable so that tests can force the unpacked paths).
var packedSortBits = 64

// sort builds the sorted arrays and their bucket index. Symbols are
// ordered by address, then table order; when address offsets and symbol
// indexes fit together in 64 bits (they do in any real file) the keys are
// packed into one uint64 each and sorted as integers, which is several
// times faster than comparing pairs. Cost: O(n log n), four allocations.
func (t *symtab) sort() {
	n := t.count()
	lo, hi := ^uint64(0), uint64(0)
	m := 0
	for i := uint64(1); i < n; i++ {
		if a, _, _, ok := t.raw(i); ok {
			lo, hi, m = min(lo, a), max(hi, a), m+1
		}
	}
	// Of the symbols at one address keep the largest, the last in table
	// order among equal sizes: pick is called for the symbols in order of
	// address, then table order. Built in locals and published at the
	// end: a fault on the mapped table leaves the symtab unsorted (lookups
	// then scan, and fault again, which Symbolize reports).
	names := string(t.strs)
	addrs := make([]uint64, 0, m)
	syms := make([]symbol, 0, m)
	pick := func(idx, addr uint64) {
		_, s, _ := t.entry(idx)
		if k := len(addrs) - 1; k >= 0 && addrs[k] == addr {
			if s.size >= syms[k].size {
				syms[k] = s
			}
			return
		}
		addrs = append(addrs, addr)
		syms = append(syms, s)
	}
	if idxBits := bits.Len64(n); m > 0 && bits.Len64(hi-lo)+idxBits <= packedSortBits {
		packed := make([]uint64, 0, m)
		for i := uint64(1); i < n; i++ {
			if a, _, _, ok := t.raw(i); ok {
				packed = append(packed, (a-lo)<<idxBits|i)
			}
		}
		slices.Sort(packed)
		for _, k := range packed {
			pick(k&(1<<idxBits-1), k>>idxBits+lo)
		}
	} else {
		type sym struct{ idx, addr uint64 }
		order := make([]sym, 0, m)
		for i := uint64(1); i < n; i++ {
			if a, _, _, ok := t.raw(i); ok {
				order = append(order, sym{i, a})
			}
		}
		slices.SortFunc(order, func(a, b sym) int {
			if a.addr != b.addr {
				return cmp(a.addr, b.addr)
			}
			return cmp(a.idx, b.idx)
		})
		for _, o := range order {
			pick(o.idx, o.addr)
		}
	}
	t.names, t.addrs, t.syms, t.index = names, addrs, syms, newBucketIndex(addrs)
	t.sorted.Store(true)
}

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
// llvm-symbolizer takes as reaching the next symbol). Cost: a linear scan
// for the first scanLimit calls, then a bucket-index lookup; no
// allocation.
func (t *symtab) lookup(addr uint64) (string, bool) {
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
		return "", false
	}
	s := &t.syms[i]
	if !covers(t.addrs[i], s, addr) {
		return "", false
	}
	return t.names[s.name : s.name+s.nameLen], true
}

// covers reports whether symbol s at address at covers addr.
func covers(at uint64, s *symbol, addr uint64) bool {
	return s.size == 0 || addr-at < s.size
}

// scan is lookup by a pass over the table; the name is copied out of the
// string table.
func (t *symtab) scan(addr uint64) (string, bool) {
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
		return "", false
	}
	_, s, _ := t.entry(best)
	if !covers(bestAt, &s, addr) {
		return "", false
	}
	return string(t.strs[s.name : s.name+s.nameLen]), true
}

// empty reports whether the file has no symbol table, or one with no
// entry but the null symbol.
func (t *symtab) empty() bool { return t.count() <= 1 }
