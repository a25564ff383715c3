// Command typesprog runs the typed image of internal/typedemo as a
// runtime would, for the gdb and lldb tests of types (link_types_gdb_test.go):
// it links the Module (DWARF version and format from its arguments),
// loads it, publishes it through the GDB JIT interface, fills the
// structure vm in memory outside the Go heap and calls inspect(vm, n, fix)
// through native.Call.
//
//	typesprog [VERSION [64]]
//
// It prints "inspect returned N" (cells[0] + cells[1]).
package main

import (
	"fmt"
	"os"
	"strconv"
	"unsafe"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/internal/typedemo"
	"github.com/elfimage/elfimage/native"
	"github.com/elfimage/elfimage/publish"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "typesprog:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	enc := dwarf.Encoding{Version: 5, Format: dwarf.Format32}
	if len(args) > 0 {
		v, err := strconv.Atoi(args[0])
		if err != nil {
			return err
		}
		enc.Version = uint16(v)
	}
	if len(args) > 1 && args[1] == "64" {
		enc.Format = dwarf.Format64
	}
	b, err := elfimage.Link(typedemo.Module(), elfimage.LinkOptions{DWARF: enc})
	if err != nil {
		return err
	}
	im, err := elfimage.Load("typedemo.elf", b, nil)
	if err != nil {
		return err
	}
	defer im.Close()
	if err := publish.GDB(im); err != nil {
		return err
	}
	p, err := im.ProcedureByName(typedemo.Proc)
	if err != nil {
		return err
	}
	mem, err := native.Alloc(typedemo.FillSize)
	if err != nil {
		return err
	}
	defer native.Free(mem)
	base := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	typedemo.Fill(mem, uint64(base))
	st, err := native.NewStack(64 << 10)
	if err != nil {
		return err
	}
	defer st.Close()
	r := native.Call(im.Base()+uintptr(p.Start), st, base, typedemo.N, typedemo.Fix)
	fmt.Printf("inspect returned %d\n", int64(r))
	return nil
}
