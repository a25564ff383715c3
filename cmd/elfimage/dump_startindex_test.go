package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
)

// TestDumpProcsStartIndex: dump -procs's summary line gives the procedure
// table's start index (meta.FlagStartIndex) with its number of entries,
// ⌊(n-1)/64⌋ for n procedures past 64, and no start index up to 64.
func TestDumpProcsStartIndex(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{
		{64, "64 procedures, position index of "},
		{65, "65 procedures, start index of 1 entry (one per 64 records), position index of "},
		{200, "200 procedures, start index of 3 entries (one per 64 records), position index of "},
	} {
		m := &elfimage.Module{File: "many.s", Arch: arch.X86_64}
		for i := range c.n {
			m.Procs = append(m.Procs, &elfimage.Proc{
				Name:  fmt.Sprintf("p%d", i),
				Code:  []byte{0x55, 0x5d, 0xc3},
				Lines: []elfimage.LineRow{{Offset: 0, Line: uint32(i + 1), Column: 1, IsStmt: true}},
			})
		}
		b, err := elfimage.Link(m, elfimage.LinkOptions{})
		if err != nil {
			t.Fatal(err)
		}
		im, err := elfimage.Load("many.elf", b, &elfimage.LoadOptions{Arch: arch.X86_64})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		err = dumpProcs(&out, im)
		im.Close()
		if err != nil {
			t.Fatal(err)
		}
		first, _, _ := strings.Cut(out.String(), "\n")
		if !strings.Contains(first, c.want) || (c.n <= 64 && strings.Contains(first, "start index")) {
			t.Errorf("%d procedures: summary %q, want %q", c.n, first, c.want)
		}
	}
}
