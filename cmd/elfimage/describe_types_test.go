package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	"github.com/elfimage/elfimage/internal/typedemo"
)

// TestDescribeTypes: describe shows the type of each live variable that
// has one, and the layout of the structures, unions and enumerations they
// lead to; a computed location (the fixnum) is shown operation by
// operation.
func TestDescribeTypes(t *testing.T) {
	img := filepath.Join(t.TempDir(), "typedemo.elf")
	if err := elfimage.WriteFile(img, typedemo.Module(), elfimage.LinkOptions{}); err != nil {
		t.Fatal(err)
	}
	// typedemo is x86-64 code, only read (describe opens a file as its
	// e_machine says): opened as x86-64 on any machine.
	im, err := elfimage.Open(img, &elfimage.LoadOptions{Arch: arch.X86_64})
	if err != nil {
		t.Fatal(err)
	}
	p, err := im.ProcedureByName(typedemo.Proc)
	im.Close()
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "describe", img, fmt.Sprintf("%#x", p.Start+typedemo.BodyStart))
	if code != 0 {
		t.Fatalf("describe: exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"DW_OP_breg1(0) DW_OP_lit1 DW_OP_shra DW_OP_stack_value\n",
		"  type of vm: struct vm *\n",
		"  type of n: uint64\n",
		"  type of fix: fixnum (typedef of int64)\n",
		"  type of cells: int64[n]\n",
		"  struct vm (144 bytes):\n    +0 data: uint8 *\n    +8 cells: int64[8]\n    +72 f: double\n",
		"    +104 u: union num\n    +112 list: struct node *\n    +120 k: const int64\n    +128 w: word\n    +136 name: char[8]\n",
		"  enum color (4 bytes): RED = 0, GREEN = 1, BLUE = 2\n",
		"  union num (8 bytes):\n    +0 i: int64\n    +0 d: double\n",
		"  struct node (16 bytes):\n    +0 value: int64\n    +8 next: struct node *\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("describe lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "struct node (16 bytes)") != 1 {
		t.Errorf("struct node described more than once:\n%s", out)
	}
}
