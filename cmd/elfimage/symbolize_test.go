package main

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/elfimage/elfimage/internal/tooltest"
)

// TestSymbolizeGCC: on a gcc -O2 -g binary (not ours), `symbolize --json`
// gives llvm-symbolizer --inlining's frames, and the default output prints
// each of those frames as an addr2line -f -i function and file:line pair.
func TestSymbolizeGCC(t *testing.T) {
	gcc := tooltest.Require(t, "gcc")
	llvm := tooltest.Require(t, "llvm-symbolizer")
	srcs, _ := filepath.Glob("../../symbolize/testdata/csrc/*.c")
	bin := filepath.Join(t.TempDir(), "prog")
	if msg, err := exec.Command(gcc, append([]string{"-O2", "-g", "-o", bin}, srcs...)...).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, msg)
	}
	// Every 7th byte of every sized function.
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	syms, _ := f.Symbols()
	f.Close()
	var addrs []string
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Size > 0 && s.Value != 0 {
			for o := uint64(0); o < s.Size; o += 7 {
				addrs = append(addrs, fmt.Sprintf("%#x", s.Value+o))
			}
		}
	}
	code, ours, errOut := runCLI(t, append([]string{"symbolize", "--json", "-e", bin}, addrs...)...)
	if code != 0 {
		t.Fatal(errOut)
	}
	theirs, err := exec.Command(llvm, append([]string{"--inlining", "--output-style=JSON", "--obj=" + bin}, addrs...)...).Output()
	if err != nil {
		t.Fatal(err)
	}
	type frame struct {
		FunctionName, FileName string
		Line, Column           uint32
	}
	type answer struct {
		Address string
		Symbol  []frame
	}
	var want []answer
	if err := json.Unmarshal(theirs, &want); err != nil {
		t.Fatal(err)
	}
	var got []answer
	sc := bufio.NewScanner(strings.NewReader(ours))
	for sc.Scan() {
		var a answer
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		got = append(got, a)
	}
	if len(got) != len(want) || len(got) != len(addrs) {
		t.Fatalf("%d answers, llvm-symbolizer %d, %d addresses", len(got), len(want), len(addrs))
	}
	inlined, pairs := 0, 0
	for i := range got {
		if fmt.Sprint(got[i].Symbol) != fmt.Sprint(want[i].Symbol) {
			t.Errorf("%s: ours %v, llvm-symbolizer %v", addrs[i], got[i].Symbol, want[i].Symbol)
		}
		if len(got[i].Symbol) > 1 {
			inlined++
		}
		pairs += len(got[i].Symbol)
	}
	if inlined == 0 {
		t.Error("no inlined frames")
	}
	// Default output: the same frames as function / file:line pairs.
	code, text, errOut := runCLI(t, append([]string{"symbolize", "-e", bin}, addrs...)...)
	if code != 0 {
		t.Fatal(errOut)
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) != 2*pairs {
		t.Fatalf("%d lines of output for %d frames", len(lines), pairs)
	}
	k := 0
	for _, a := range got {
		for _, f := range a.Symbol {
			name, file := f.FunctionName, f.FileName
			if name == "" {
				name = "??"
			}
			if file == "" {
				file = "??"
			}
			loc := fmt.Sprintf("%s:%d", file, f.Line)
			if f.Line == 0 {
				loc = file + ":?"
			}
			if lines[k] != name || lines[k+1] != loc {
				t.Errorf("%s: printed %q %q, want %q %q", a.Address, lines[k], lines[k+1], name, loc)
			}
			k += 2
		}
	}
	// -i=false: one pair per address.
	code, text, _ = runCLI(t, append([]string{"symbolize", "-i=false", "-e", bin}, addrs...)...)
	if n := strings.Count(text, "\n"); code != 0 || n != 2*len(addrs) {
		t.Errorf("-i=false: exit %d, %d lines for %d addresses", code, n, len(addrs))
	}
}
