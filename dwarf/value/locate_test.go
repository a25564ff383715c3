package value_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/expr"
	"github.com/elfimage/elfimage/dwarf/value"
)

// entryContext is nilContext that knows rdi's value on entry.
type entryContext struct{ nilContext }

func (entryContext) EntryValue(r arch.Reg, size int) (uint64, error) {
	if r == arch.X86_64_RDI && size == 0 {
		return 0x11223344, nil
	}
	return 0, fmt.Errorf("%w: register %d", expr.ErrNoEntryValue, r)
}

// TestLocateEntryValue: gcc's locations of a parameter whose register
// the callee reused (DW_OP_entry_value(DW_OP_reg5) DW_OP_stack_value,
// with arithmetic, in a piece) are the value the Context gives on entry;
// without it (no EntryValuer, or no call site for the register) the
// value is optimized out, and the error says which operation at which
// offset.
func TestLocateEntryValue(t *testing.T) {
	p := expr.Params{Section: ".debug_loclists", Offset: 0x40, AddrSize: 8, Order: binary.LittleEndian}
	ev := func(r arch.Reg) []byte {
		return []byte{byte(dwarf.DW_OP_entry_value), 1, byte(dwarf.DW_OP_reg0) + byte(r)}
	}
	sv := byte(dwarf.DW_OP_stack_value)
	rdi := arch.X86_64_RDI
	for _, tc := range []struct {
		name string
		loc  []byte
		want []byte
	}{
		{"value", append(ev(rdi), sv), binary.LittleEndian.AppendUint64(nil, 0x11223344)},
		{"plus", append(ev(rdi), byte(dwarf.DW_OP_plus_uconst), 4, sv), binary.LittleEndian.AppendUint64(nil, 0x11223348)},
		{"pieces", append(ev(rdi), sv, byte(dwarf.DW_OP_piece), 4, byte(dwarf.DW_OP_lit0)+7, sv, byte(dwarf.DW_OP_piece), 4),
			[]byte{0x44, 0x33, 0x22, 0x11, 7, 0, 0, 0}},
	} {
		obj, err := value.Locate(tc.loc, p, entryContext{})
		if err != nil || obj.InMemory || string(obj.Bytes) != string(tc.want) {
			t.Errorf("%s: %+v, %v; want bytes % x", tc.name, obj, err, tc.want)
		}
	}
	for _, tc := range []struct {
		name string
		loc  []byte
		ctx  expr.Context
	}{
		{"no EntryValuer", append(ev(rdi), sv), nilContext{}},
		{"no call site parameter", append(ev(arch.X86_64_RSI), sv), entryContext{}},
	} {
		_, err := value.Locate(tc.loc, p, tc.ctx)
		var fe *dwarf.FormatError
		if !errors.Is(err, value.ErrOptimizedOut) || !errors.Is(err, expr.ErrNoEntryValue) || !errors.As(err, &fe) || fe.Offset != 0x40 || fe.Field != "DW_OP_entry_value" {
			t.Errorf("%s: %v; want ErrOptimizedOut naming DW_OP_entry_value at 0x40", tc.name, err)
		}
	}
}
