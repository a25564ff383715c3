package tooltest

import (
	"debug/elf"
	"testing"
)

// ELFSymbols opens the ELF file at path with debug/elf, an independent
// reader of what the tools under test read, and returns it (closed when
// the test ends) with its symbol table, .symtab, as f.Symbols returns it
// (without the null symbol at index 0). A file that does not open or has
// no symbol table fails t at once.
func ELFSymbols(t testing.TB, path string) (*elf.File, []elf.Symbol) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	syms, err := f.Symbols()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return f, syms
}
