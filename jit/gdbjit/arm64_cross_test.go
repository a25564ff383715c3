//go:build linux && amd64

package gdbjit

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/elfimage/elfimage/internal/qemutest"
	"github.com/elfimage/elfimage/internal/tooltest"
)

// TestSymbolsInSymtabArm64: a program built for linux/arm64 that imports
// the package holds both symbols of the interface globally in .symtab
// under their exact names (symbols_arm64.s), the descriptor statically
// initialised to version 1 in a writable section, __jit_debug_register_code
// starting with RET, and, run under qemu-aarch64, DescriptorAddr returns
// the descriptor's .symtab address.
func TestSymbolsInSymtabArm64(t *testing.T) {
	prog := qemutest.BuildArm64(t, t.TempDir(), "./testdata/jitprog", "jitprog.arm64")
	f, syms := tooltest.ELFSymbols(t, prog)
	if f.Machine != elf.EM_AARCH64 {
		t.Fatalf("machine %v, want EM_AARCH64", f.Machine)
	}
	found := map[string]elf.Symbol{}
	for _, s := range syms {
		if s.Name == "__jit_debug_descriptor" || s.Name == "__jit_debug_register_code" {
			if _, dup := found[s.Name]; dup {
				t.Errorf("%s defined twice", s.Name)
			}
			found[s.Name] = s
		}
	}
	d, ok := found["__jit_debug_descriptor"]
	if !ok || elf.ST_BIND(d.Info) != elf.STB_GLOBAL || elf.ST_TYPE(d.Info) != elf.STT_OBJECT || d.Size != 24 {
		t.Fatalf("__jit_debug_descriptor %+v (found %v), want a global 24-byte object", d, ok)
	}
	sec := f.Sections[d.Section]
	if sec.Type != elf.SHT_PROGBITS || sec.Flags&elf.SHF_WRITE == 0 {
		t.Errorf("__jit_debug_descriptor in %s (%v, %v), want a writable PROGBITS section", sec.Name, sec.Type, sec.Flags)
	}
	data, err := sec.Data()
	if err != nil {
		t.Fatal(err)
	}
	if v := binary.LittleEndian.Uint32(data[d.Value-sec.Addr:]); v != 1 {
		t.Errorf("descriptor version initialised to %d, want 1", v)
	}
	r, ok := found["__jit_debug_register_code"]
	if !ok || elf.ST_BIND(r.Info) != elf.STB_GLOBAL || elf.ST_TYPE(r.Info) != elf.STT_FUNC {
		t.Fatalf("__jit_debug_register_code %+v (found %v), want a global function", r, ok)
	}
	text := f.Section(".text")
	code, err := text.Data()
	if err != nil {
		t.Fatal(err)
	}
	if w := binary.LittleEndian.Uint32(code[r.Value-text.Addr:]); w != 0xd65f03c0 {
		t.Errorf("__jit_debug_register_code starts with %#08x, want RET (0xd65f03c0)", w)
	}
	qemu := tooltest.Require(t, "qemu-aarch64")
	out, stderr, err := tooltest.RunToolSplit(t, exec.Command(qemu, prog, "addr"), 2*time.Minute)
	if err != nil {
		t.Fatalf("qemu-aarch64 jitprog addr: %v\n%s", err, stderr)
	}
	if got := strings.TrimSpace(out); got != fmt.Sprintf("%#x", d.Value) {
		t.Errorf("DescriptorAddr() = %s at run time under qemu-aarch64, .symtab says %#x", got, d.Value)
	}
}
