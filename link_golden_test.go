package elfimage_test

import (
	"bufio"
	"crypto/sha256"
	ehex "encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/elfimage/elfimage"
	"github.com/elfimage/elfimage/arch"
	edwarf "github.com/elfimage/elfimage/dwarf"
	"github.com/elfimage/elfimage/dwarf/frame"
	"github.com/elfimage/elfimage/internal/typedemo"
	"github.com/elfimage/elfimage/lang/scheme"
)

var updateGolden = flag.Bool("update-link-golden", false, "rewrite testdata/link-golden.txt from this tree's Link")

// goldenModule is the shape of the Link benchmark (bench/cmd/benchrun's
// linkModule): n procedures with line rows, CFI, two parameters, and,
// unlike it, a docstring, properties, optional parameters and a scope on
// every third procedure, so that every attribute shape the fast paths
// encode is covered.
func goldenModule(n int) *elfimage.Module {
	m := &elfimage.Module{File: "golden.src", CompDir: "/tmp/golden", Producer: "golden", Language: edwarf.DW_LANG_C11}
	rdi := []byte{byte(edwarf.DW_OP_reg0) + byte(arch.X86_64_RDI)}
	rsi := []byte{byte(edwarf.DW_OP_reg0) + byte(arch.X86_64_RSI)}
	cfi := []frame.Insn{
		{PC: 1, Op: frame.OpDefCFAOffset, Offset: 16},
		{PC: 1, Op: frame.OpOffset, Reg: arch.X86_64_RBP, Offset: -16},
		{PC: 4, Op: frame.OpDefCFARegister, Reg: arch.X86_64_RBP},
		{PC: 19, Op: frame.OpDefCFA, Reg: arch.X86_64_RSP, Offset: 8},
	}
	body := []byte{0x55, 0x48, 0x89, 0xe5, 0x48, 0x8d, 0x04, 0x37, 0x48, 0x0f, 0xaf, 0xc7, 0x48, 0x05, 0, 0, 0, 0, 0x5d, 0xc3}
	m.Procs = make([]*elfimage.Proc, n)
	for i := range n {
		code := append([]byte(nil), body...)
		code[14], code[15] = byte(i), byte(i>>8)
		l := uint32(6*i + 1)
		p := &elfimage.Proc{
			Name: fmt.Sprintf("p%d", i), Code: code, Line: int(l), Column: 1 + i%3,
			Lines: []elfimage.LineRow{
				{Offset: 0, Line: l, Column: 1, IsStmt: true},
				{Offset: 4, Line: l + 1, Column: 3, IsStmt: true, PrologueEnd: true},
				{Offset: 8, Line: l + 2, Column: 3, IsStmt: true},
				{Offset: 18, Line: l + 4, Column: 1, IsStmt: true},
			},
			CFI: cfi,
			Params: []elfimage.Var{
				{Name: "a", Location: rdi, Line: int(l), Column: 10},
				{Name: "b", Location: rsi, Line: int(l), Column: 17},
			},
		}
		switch i % 3 {
		case 1:
			p.Doc = fmt.Sprintf("Procedure %d.", i)
			p.Properties = []elfimage.Property{{Name: "k", Value: fmt.Sprint(i)}}
			p.Params[1].Optional, p.Params[1].Default = true, "7"
			p.LinkName = fmt.Sprintf("golden_p%d", i)
		case 2:
			p.Internal = true
			p.Scopes = []*elfimage.Scope{{Ranges: []elfimage.CodeRange{{Start: 4, End: 18}},
				Vars: []elfimage.Var{{Name: "c", Location: []byte{byte(edwarf.DW_OP_reg0)}, Line: int(l) + 1}}}}
		}
		m.Procs[i] = p
	}
	return m
}

// TestLinkGolden links fixed modules in every encoding and compares the
// SHA-256 of each output with testdata/link-golden.txt, made by the
// linker before its DWARF building was rewritten for speed (issue 19):
// the rewrite must not change one byte. A deliberate change of the output
// regenerates the file with
//
//	go test -run TestLinkGolden -update-link-golden .
//
// after checking the new output with the tool tests.
func TestLinkGolden(t *testing.T) {
	type gcase struct {
		name string
		link func() ([]byte, error)
	}
	var cases []gcase
	// The demo is compiled for x86-64 on every host (the golden hashes
	// are of x86-64 images: Link writes the same bytes on any machine),
	// not for the running architecture as scheme.Compile would.
	demo := func() *elfimage.Module {
		m, err := scheme.CompileFor(arch.X86_64, scheme.DemoFile, scheme.DemoSource)
		if err != nil {
			t.Fatal(err)
		}
		m.CompDir = "/golden" // the compiler records the working directory
		return m
	}
	for _, e := range encodings {
		cases = append(cases,
			gcase{"demo-" + e.name, func() ([]byte, error) { return elfimage.Link(demo(), e.opts) }},
			gcase{"module-" + e.name, func() ([]byte, error) { return elfimage.Link(goldenModule(300), e.opts) }},
			gcase{"object-demo-" + e.name, func() ([]byte, error) {
				opts := e.opts
				opts.DebugFrame = false // an object has .eh_frame only
				return elfimage.LinkObject(demo(), opts)
			}},
		)
	}
	for _, enc := range typeEncodings {
		cases = append(cases, gcase{"typedemo-" + encName(enc), func() ([]byte, error) {
			return elfimage.Link(typedemo.Module(), elfimage.LinkOptions{DWARF: enc, DebugFrame: true})
		}})
	}
	// Large enough for the pipelined build (other goroutines) on a
	// machine with more than one core.
	cases = append(cases, gcase{"module-3000", func() ([]byte, error) { return elfimage.Link(goldenModule(3000), elfimage.LinkOptions{}) }})
	cases = append(cases, gcase{"split-demo", func() ([]byte, error) {
		img, dbg, err := elfimage.LinkSplit(demo(), elfimage.LinkOptions{DebugFile: "demo.debug"})
		return append(img, dbg...), err
	}})
	got := map[string]string{}
	for _, c := range cases {
		b, err := c.link()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		sum := sha256.Sum256(b)
		got[c.name] = ehex.EncodeToString(sum[:])
	}
	path := filepath.Join("testdata", "link-golden.txt")
	if *updateGolden {
		var names []string
		for n := range got {
			names = append(names, n)
		}
		sort.Strings(names)
		var b strings.Builder
		b.WriteString("# SHA-256 of Link outputs (TestLinkGolden); regenerate with go test -run TestLinkGolden -update-link-golden .\n")
		for _, n := range names {
			fmt.Fprintf(&b, "%s %s\n", n, got[n])
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, sum, ok := strings.Cut(sc.Text(), " ")
		if ok && !strings.HasPrefix(name, "#") {
			want[name] = sum
		}
	}
	if len(want) != len(got) {
		t.Errorf("%s has %d outputs, the test links %d", path, len(want), len(got))
	}
	for n, sum := range got {
		if want[n] != sum {
			t.Errorf("%s: output SHA-256 %s, golden %s", n, sum, want[n])
		}
	}
}
