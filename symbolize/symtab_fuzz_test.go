package symbolize

import (
	"debug/elf"
	"math/rand/v2"
	"testing"

	"github.com/elfimage/elfimage/elfobj"
)

// FuzzSymtab: arbitrary Elf64_Sym entries and string table bytes, of an
// x86-64, Arm, AArch64 or RISC-V file. Oracle: the sort by decodeLE64
// (fields read in place, short names' lengths from a word) and by
// decodeAny (entries decoded by elfobj, kept by rawSym) give the same
// symbols, and the sorted lookups answer as the scan of the table does
// at, around and at the end of every symbol kept (at most 512).
func FuzzSymtab(f *testing.F) {
	for seed := range 4 {
		st := randomSymtab(rand.New(rand.NewPCG(uint64(seed), 2)), 100, elf.EM_X86_64, seed == 3)
		f.Add(st.data, st.strs, uint8(seed))
	}
	f.Add(make([]byte, 48), []byte("\x00x"), uint8(0))
	f.Fuzz(func(t *testing.T, data, strs []byte, mach uint8) {
		if len(data) > 1<<20 {
			return
		}
		m := []elf.Machine{elf.EM_X86_64, elf.EM_ARM, elf.EM_AARCH64, elf.EM_RISCV}[mach%4]
		build := func(fast bool) *symtab {
			obj := &elfobj.File{}
			obj.Machine = m
			st := &symtab{f: &elfFile{obj: obj, class64: true}, entsize: 24, data: data, strs: strs}
			symtabFastDecode = fast
			defer func() { symtabFastDecode = true }()
			st.sort()
			return st
		}
		slow, fast := build(false), build(true)
		if len(slow.addrs) != len(fast.addrs) {
			t.Fatalf("%d addresses by decodeAny, %d by decodeLE64", len(slow.addrs), len(fast.addrs))
		}
		for i, a := range fast.addrs {
			if a != slow.addrs[i] || *fast.sym(i) != *slow.sym(i) {
				t.Fatalf("address %d: decodeLE64 %#x %+v, decodeAny %#x %+v", i, a, *fast.sym(i), slow.addrs[i], *slow.sym(i))
			}
			if i >= 512 {
				continue
			}
			s := fast.sym(i)
			for _, probe := range []uint64{a - 1, a, a + 1, a + s.size - 1, a + s.size} {
				name, file, ok := fast.lookup(probe)
				wname, wfile, wok := fast.scan(probe)
				if name != wname || file != wfile || ok != wok {
					t.Fatalf("lookup(%#x) = %q, %q, %v; the scan gives %q, %q, %v", probe, name, file, ok, wname, wfile, wok)
				}
			}
		}
	})
}
