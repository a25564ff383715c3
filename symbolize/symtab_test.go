package symbolize

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/elfobj"
)

// TestSymtabSort: the sorted symbol table, built with packed integer keys
// and with pairs (the path for address spans too wide to pack), equals a
// brute-force reading of the rule: per address the largest symbol, the
// last in table order among equal sizes; symbols of other types or
// without a section are left out. high puts every address above 2^63 (a
// narrow span that packs only once offset by the lowest address).
func TestSymtabSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, mode := range []string{"narrow", "wide", "high"} {
		wide, high := mode == "wide", mode == "high"
		// 2,000 symbols at 300 addresses (so many share one), sizes 0-3.
		var data []byte
		var names []byte
		data = append(data, make([]byte, 24)...) // symbol 0
		type want struct {
			size uint64
			name string
		}
		ref := map[uint64]want{}
		for i := 1; i < 2000; i++ {
			addr := 0x401000 + uint64(rng.IntN(300))*16
			if wide && i%2 == 0 || high {
				addr = 1<<63 + uint64(rng.IntN(300))*16
			}
			size := uint64(rng.IntN(4))
			typ := byte([]int{0, 1, 2, 10, 3, 4}[rng.IntN(6)]) // notype, object, func, ifunc; section, file: skipped
			shndx := uint16(1 + rng.IntN(3))
			if rng.IntN(20) == 0 {
				shndx = 0 // undefined: skipped
			}
			name := fmt.Sprintf("s%d", i)
			e := make([]byte, 24)
			binary.LittleEndian.PutUint32(e, uint32(len(names)))
			e[4] = typ
			binary.LittleEndian.PutUint16(e[6:], shndx)
			binary.LittleEndian.PutUint64(e[8:], addr)
			binary.LittleEndian.PutUint64(e[16:], size)
			data = append(data, e...)
			names = append(append(names, name...), 0)
			if typ == 3 || typ == 4 || shndx == 0 {
				continue
			}
			if w, ok := ref[addr]; !ok || size >= w.size {
				ref[addr] = want{size, name}
			}
		}
		for _, bits := range []int{64, 1} { // 1: always the unpacked path
			packedSortBits = bits
			st := &symtab{f: &elfFile{class64: true}, entsize: 24, data: data, strs: names}
			st.sort()
			packedSortBits = 64
			var addrs []uint64
			for a := range ref {
				addrs = append(addrs, a)
			}
			slices.Sort(addrs)
			if !slices.Equal(st.addrs, addrs) {
				t.Fatalf("%s, key bits %d: %d addresses, want %d", mode, bits, len(st.addrs), len(addrs))
			}
			for i, a := range st.addrs {
				s := st.sym(i)
				if got := st.names[s.name : s.name+s.nameLen]; got != ref[a].name || s.size != ref[a].size {
					t.Fatalf("%s, key bits %d: at %#x %s (size %d), want %s (size %d)", mode, bits, a, got, s.size, ref[a].name, ref[a].size)
				}
			}
		}
	}
}

// TestFlattenSubrsSort: flattenSubrs gives the same segments whether it
// sorts packed keys or pairs, on nested ranges in preorder that are out of
// address order (as hot/cold splits and .text.startup make them).
func TestFlattenSubrsSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for round := range 50 {
		var rs []cuRange
		var add func(lo, hi uint64, depth int)
		add = func(lo, hi uint64, depth int) {
			rs = append(rs, cuRange{lo, hi, len(rs)})
			for k := 0; depth < 3 && k < rng.IntN(3); k++ {
				a := lo // a third of the children start with their parent
				if rng.IntN(3) > 0 {
					a += rng.Uint64N(hi - lo)
				}
				b := a + 1 + rng.Uint64N(hi-a)
				add(a, min(b, hi), depth+1)
			}
		}
		for f := range 200 {
			base := uint64(0x401000 + (f*7919%200)*256) // functions out of address order
			if round%2 == 1 && f%50 == 0 {
				base += 1 << 40 // and a few far away
			}
			add(base, base+16+uint64(rng.IntN(200)), 0)
		}
		sc := new(scratch)
		s1, g1, _ := flattenSubrs(rs, sc, nil)
		s1 = slices.Clone(s1) // the starts are sc's, reused by the next call
		packedSortBits = 1
		s2, g2, _ := flattenSubrs(rs, sc, nil)
		packedSortBits = 64
		if !slices.Equal(s1, s2) || !slices.Equal(g1, g2) {
			t.Fatalf("round %d: packed and pair sorts give different segments (%d and %d)", round, len(g1), len(g2))
		}
		if len(g1) == 0 {
			t.Fatal("no segments")
		}
	}
}

// TestFlattenSubrsReversed: ranges whose starts do not increase (gcc's
// C units list functions last defined first), with children that share
// their parent's start or not, and runs of equal starts at any depth,
// flatten as the sort flattens them.
func TestFlattenSubrsReversed(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for round := range 100 {
		var rs []cuRange
		base := uint64(0x401000 + 64*400)
		for range 400 {
			base -= 16 + uint64(rng.IntN(48))
			n := 1 + rng.IntN(4) // the function and children at its start
			if round%4 == 0 {
				n = 1
			}
			for k := range n {
				rs = append(rs, cuRange{base, base + 64 - uint64(8*k), len(rs)})
			}
			if round%3 == 1 && rng.IntN(2) == 0 {
				// A child past the start breaks the order: sorted.
				rs = append(rs, cuRange{base + 4, base + 8, len(rs)})
			}
		}
		sc := new(scratch)
		s1, g1, _ := flattenSubrs(rs, sc, nil)
		s1 = slices.Clone(s1)
		presorted = false
		s2, g2, _ := flattenSubrs(rs, sc, nil)
		presorted = true
		if !slices.Equal(s1, s2) || !slices.Equal(g1, g2) {
			t.Fatalf("round %d: in-order and sorted flattening differ (%d and %d segments)", round, len(g1), len(g2))
		}
		if len(g1) == 0 {
			t.Fatal("no segments")
		}
	}
}

// TestFlattenSubrsLongMerge: adjacent ranges of one subroutine merge into
// one segment also when they are 4 GiB or more (its end kept aside, see
// seg), and a short segment that grows past 4 GiB by merging becomes one.
func TestFlattenSubrsLongMerge(t *testing.T) {
	rs := []cuRange{{0x1000, 1 << 33, 0}, {1 << 33, 1 << 34, 0}, {1 << 35, 1<<35 + 16, 1}, {1<<35 + 16, 1<<36 + 16, 1}}
	starts, segs, long := flattenSubrs(rs, new(scratch), nil)
	if len(segs) != 2 || len(long) != 2 {
		t.Fatalf("%d segments (%d long), want 2 (2): %v %v", len(segs), len(long), segs, long)
	}
	x := &unitIndex{segs: segs, longSegs: long, segIndex: newBucketIndex(starts)}
	for _, c := range []struct {
		addr uint64
		die  int32
	}{{0xfff, -1}, {0x1000, 0}, {1 << 33, 0}, {1<<34 - 1, 0}, {1 << 34, -1}, {1 << 35, 1}, {1<<36 + 15, 1}, {1<<36 + 16, -1}} {
		if got := x.leaf(c.addr); got != c.die {
			t.Errorf("leaf(%#x) = %d, want %d", c.addr, got, c.die)
		}
	}
}

// TestFlattenSubrsHugeRange: a subroutine claiming most of the address
// space (hostile input) makes a few segments, not one per 4 GiB.
func TestFlattenSubrsHugeRange(t *testing.T) {
	rs := []cuRange{{0, 1 << 63, 0}, {1 << 62, 1<<62 + 16, 1}, {^uint64(0) - 16, ^uint64(0), 2}}
	starts, segs, long := flattenSubrs(rs, new(scratch), nil)
	if len(segs) != 4 || len(starts) != 4 {
		t.Fatalf("%d segments, want 4: %v %v", len(segs), starts, segs)
	}
	for i := range segs {
		if segs[i].start != starts[i] {
			t.Fatalf("segment %d starts at %#x, starts[%d] = %#x", i, segs[i].start, i, starts[i])
		}
	}
	x := &unitIndex{segs: segs, longSegs: long, segIndex: newBucketIndex(starts)}
	for _, c := range []struct {
		addr uint64
		die  int32
	}{{0, 0}, {1 << 62, 1}, {1<<62 + 16, 0}, {1<<63 - 1, 0}, {1 << 63, -1}, {^uint64(0) - 1, 2}} {
		if got := x.leaf(c.addr); got != c.die {
			t.Errorf("leaf(%#x) = %d, want %d", c.addr, got, c.die)
		}
	}
}

// randomSymtab returns a random symbol table of n Elf64_Sym entries
// (after the null one) for machine m, with a string table: addresses
// clustered (many symbols at one address) or spread, names of 0 to 40
// bytes, some out of the string table or at its last bytes, every symbol
// type and binding, undefined, absolute, common, extended and reserved
// section indices, STT_FILE symbols between locals, and Arm, AArch64 and
// RISC-V mapping symbols and labels.
func randomSymtab(rng *rand.Rand, n int, m elf.Machine, high bool) *symtab {
	names := []byte{0}
	var data []byte
	data = append(data, make([]byte, 24)...)
	markers := []string{"$a", "$d", "$t", "$x", "$a.1", "$d.x", ".L1", ".Ltmp", "", "$", "$b"}
	for range n {
		var name string
		switch rng.IntN(4) {
		case 0:
			name = markers[rng.IntN(len(markers))]
		default:
			name = fmt.Sprintf("%s%d", strings.Repeat("n", rng.IntN(40)), rng.IntN(1000))
		}
		off := uint32(len(names))
		names = append(append(names, name...), 0)
		switch rng.IntN(40) {
		case 0:
			off = uint32(1<<20 + rng.IntN(100)) // outside the string table
		case 1:
			off = uint32(rng.IntN(len(names))) // into another name
		}
		addr := 0x401000 + uint64(rng.IntN(n/4+1))*uint64(1+rng.IntN(64))
		if high {
			addr += 1<<63 - 0x401000
		}
		typ := []byte{0, 1, 2, 10, 3, 4, 5, 6, 13}[rng.IntN(9)]
		bind := []byte{0, 1, 2, 10}[rng.IntN(4)]
		shndx := uint16(1 + rng.IntN(5))
		switch rng.IntN(15) {
		case 0:
			shndx = 0
		case 1:
			shndx = uint16(elf.SHN_ABS)
		case 2:
			shndx = uint16(elf.SHN_COMMON)
		case 3:
			shndx = uint16(elf.SHN_XINDEX)
		case 4:
			shndx = 0xff00 + uint16(rng.IntN(0xff))
		}
		e := make([]byte, 24)
		binary.LittleEndian.PutUint32(e, off)
		e[4] = bind<<4 | typ
		binary.LittleEndian.PutUint16(e[6:], shndx)
		binary.LittleEndian.PutUint64(e[8:], addr)
		binary.LittleEndian.PutUint64(e[16:], uint64(rng.IntN(4))*uint64(rng.IntN(100)))
		data = append(data, e...)
	}
	if rng.IntN(2) == 0 {
		// A name at the table's very end, without its terminator.
		binary.LittleEndian.PutUint32(data[len(data)-24:], uint32(len(names)))
		names = append(names, "tail"...)
	}
	obj := &elfobj.File{}
	obj.Machine = m
	return &symtab{f: &elfFile{obj: obj, class64: true}, entsize: 24, data: data, strs: names}
}

// TestSymtabDecoders: decodeLE64 and decodeAny (the table decoded entry
// by entry through rawSym) sort random tables of x86-64, Arm, AArch64 and
// RISC-V files into the same symbols, names and files, on the packed and
// unpacked paths, and the sorted lookups (bucket index and all) answer as
// the scan of the table does, at every symbol's address, next to it and
// at its end.
func TestSymtabDecoders(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for round := range 60 {
		m := []elf.Machine{elf.EM_X86_64, elf.EM_ARM, elf.EM_AARCH64, elf.EM_RISCV}[round%4]
		n := []int{0, 1, 20, 40, 300, 3000}[round%6]
		high := round%5 == 4
		seed := rng.Uint64()
		var ref *symtab
		for _, fast := range []bool{false, true} {
			for _, bits := range []int{64, 1} {
				st := randomSymtab(rand.New(rand.NewPCG(seed, 1)), n, m, high)
				symtabFastDecode, packedSortBits = fast, bits
				st.sort()
				symtabFastDecode, packedSortBits = true, 64
				if ref == nil {
					ref = st
					continue
				}
				if !slices.Equal(st.addrs, ref.addrs) {
					t.Fatalf("round %d (%v, %d symbols), fast %v, key bits %d: %d addresses, want %d", round, m, n, fast, bits, len(st.addrs), len(ref.addrs))
				}
				for i := range st.addrs {
					if *st.sym(i) != *ref.sym(i) {
						t.Fatalf("round %d (%v), fast %v, key bits %d: at %#x %+v, want %+v", round, m, fast, bits, st.addrs[i], *st.sym(i), *ref.sym(i))
					}
				}
				for i, a := range st.addrs {
					if i%(len(st.addrs)/40+1) != 0 && i != len(st.addrs)-1 {
						continue // the scan is a pass over the table
					}
					s := st.sym(i)
					for _, probe := range []uint64{a - 1, a, a + 1, a + s.size - 1, a + s.size} {
						name, file, ok := st.lookup(probe)
						wname, wfile, wok := st.scan(probe)
						if name != wname || file != wfile || ok != wok {
							t.Fatalf("round %d (%v), fast %v, key bits %d: lookup(%#x) = %q, %q, %v; the scan gives %q, %q, %v", round, m, fast, bits, probe, name, file, ok, wname, wfile, wok)
						}
					}
				}
			}
		}
	}
}

// TestGather checks gather against a copy: random distinct positions,
// fewer than the candidates (chains ending past the kept ones) or all of
// them (cycles only), and the identity.
func TestGather(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 4))
	for round := range 2000 {
		n := rng.IntN(70)
		m := n
		if round%3 != 0 && n > 0 {
			m = rng.IntN(n + 1)
		}
		perm := rng.Perm(n)
		if round%7 == 0 {
			for i := range perm {
				perm[i] = i
			}
		}
		cands := make([]symbol, n)
		for i := range cands {
			cands[i] = symbol{size: uint64(i), name: uint32(3 * i), nameLen: 1, file: uint32(i), fileLen: uint32(i % 5)}
		}
		order := make([]uint64, m)
		want := make([]symbol, m)
		for i := range order {
			order[i] = uint64(perm[i])
			want[i] = cands[perm[i]]
		}
		gather(cands, order)
		if !slices.Equal(cands[:m], want) {
			t.Fatalf("round %d (n %d, m %d, order %v): got %v, want %v", round, n, m, perm[:m], cands[:m], want)
		}
	}
}
